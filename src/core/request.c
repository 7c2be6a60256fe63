/* Client request reading: see include/citegate/request.h. */
#include "citegate/request.h"

#include "citegate/json.h"

#include <stdlib.h>
#include <string.h>

static const char *find(const char *s, const char *end, const char *needle)
{
    size_t nl = strlen(needle);
    while (s + nl <= end) {
        const char *lt = memchr(s, needle[0], (size_t)(end - s));
        if (lt == NULL || lt + nl > end)
            return NULL;
        if (memcmp(lt, needle, nl) == 0)
            return lt;
        s = lt + 1;
    }
    return NULL;
}

/* An opening tag: "<source" then white space or ">". */
static const char *find_open(const char *s, const char *end)
{
    while ((s = find(s, end, "<source")) != NULL) {
        const char *after = s + 7;
        if (after < end && (*after == '>' || *after == ' ' || *after == '\t' ||
                            *after == '\n' || *after == '\r'))
            return s;
        s = after;
    }
    return NULL;
}

/* Value of attribute `name` inside tag [s, end); false if absent. */
static bool attr(const char *s, const char *end, const char *name, const char **v, size_t *vn)
{
    size_t nl = strlen(name);
    for (const char *p = s; p + nl + 2 < end; p++) {
        if ((p[-1] != ' ' && p[-1] != '\t' && p[-1] != '\n') || memcmp(p, name, nl) != 0 ||
            p[nl] != '=')
            continue;
        char q = p[nl + 1];
        if (q != '"' && q != '\'')
            continue;
        const char *start = p + nl + 2;
        const char *close = memchr(start, q, (size_t)(end - start));
        if (close == NULL)
            return false;
        *v = start;
        *vn = (size_t)(close - start);
        return true;
    }
    return false;
}

static bool parse_id(const char *s, size_t n, unsigned *id)
{
    if (n == 0 || n > 4)
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *id = v;
    return v > 0;
}

void cg_request_scan_sources(cg_cites_t *c, const char *s, size_t n, const cg_cite_opts_t *o)
{
    const char *end = s + n;
    const char *open = find_open(s, end);
    while (open) {
        const char *close = find(open + 7, end, "</source>");
        if (close == NULL)
            return;
        /* Pair with the nearest closing tag that has no other <source before it. */
        const char *other = find_open(open + 7, close);
        if (other) {
            open = other;
            continue;
        }
        const char *gt = memchr(open, '>', (size_t)(close - open));
        const char *idv, *namev = NULL;
        size_t idn, namen = 0;
        unsigned id;
        if (gt && attr(open + 7, gt, "id", &idv, &idn) && parse_id(idv, idn, &id)) {
            attr(open + 7, gt, "name", &namev, &namen);
            cg_cites_add_source(c, id, namev, namen, gt + 1, (size_t)(close - gt - 1), o);
        }
        open = find_open(close + 9, end);
    }
}

static void scan_string(cg_cites_t *c, const cg_json_t *j, int tok, const cg_cite_opts_t *o)
{
    size_t n;
    char *s = cg_json_strdup(j, tok, &n);
    if (s) {
        cg_request_scan_sources(c, s, n, o);
        free(s);
    }
}

/* Text of a message's content: a string, or its `text` parts joined by sep
 * (NULL sep: no separator). */
static char *content_text(const cg_json_t *j, int content, const char *sep, size_t *len)
{
    if (cg_json_is_str(j, content))
        return cg_json_strdup(j, content, len);
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return NULL;
    cg_buf_t b = {0};
    int n = j->tok[content].size;
    for (int k = 0, i = content + 1; k < n; k++, i = cg_json_skip(j, i)) {
        int text = cg_json_get(j, i, "text");
        if (!cg_json_is_str(j, text))
            continue;
        size_t tn;
        char *t = cg_json_strdup(j, text, &tn);
        if (b.len && sep)
            cg_buf_puts(&b, sep);
        cg_buf_put(&b, t, tn);
        free(t);
    }
    if (len)
        *len = b.len;
    cg_buf_putc(&b, '\0');
    return b.p;
}

static void read_message(cg_request_t *r, const cg_json_t *j, int msg, const cg_cite_opts_t *o)
{
    int content = cg_json_get(j, msg, "content");
    if (cg_json_is_str(j, content)) {
        scan_string(&r->sources, j, content, o);
    } else if (cg_json_type(j, content) == JSMN_ARRAY) {
        int n = j->tok[content].size;
        for (int k = 0, i = content + 1; k < n; k++, i = cg_json_skip(j, i))
            scan_string(&r->sources, j, cg_json_get(j, i, "text"), o);
    }
    int role = cg_json_get(j, msg, "role");
    if (!cg_json_is_str(j, role))
        return;
    if (cg_span_eq(cg_json_raw(j, role), "user")) {
        free(r->question);
        r->question = content_text(j, content, "\n", NULL);
    } else if (cg_span_eq(cg_json_raw(j, role), "tool")) {
        size_t n = 0;
        char *t = content_text(j, content, NULL, &n);
        if (t) {
            size_t b = cg_json_begin(j, content);
            if (r->ntools == r->tools_cap) {
                r->tools_cap = r->tools_cap ? 2 * r->tools_cap : 8;
                r->tools = cg_xrealloc(r->tools, r->tools_cap * sizeof(cg_span_t));
                r->tool_at = cg_xrealloc(r->tool_at, r->tools_cap * sizeof(cg_body_range_t));
            }
            r->tool_at[r->ntools] = (cg_body_range_t){(uint32_t)b,
                                                      (uint32_t)(cg_json_end(j, content) - b)};
            r->tools[r->ntools++] = cg_span(t, n);
        }
    }
}

/* Where token t's value lies in the body; a string's quotes are part of it. */
static void note_value(cg_request_t *r, const cg_json_t *j, int t)
{
    bool str = j->tok[t].type == JSMN_STRING;
    r->data_sources_off = (uint32_t)(j->tok[t].start - str);
    r->data_sources_len = (uint32_t)(j->tok[t].end + str - (j->tok[t].start - str));
}

int cg_request_parse(cg_request_t *r, const char *body, size_t len, const cg_cite_opts_t *o)
{
    memset(r, 0, sizeof(*r));
    cg_json_t j;
    cg_json_init(&j, 1u << 22);
    int rc = -1;
    /* JSON text between systems is UTF-8 (RFC 8259 §8.1); the upstream is
     * one of them. */
    int parsed = cg_utf8_valid(body, len) ? cg_json_parse(&j, body, len) : CG_JSON_E_INVALID;
    if (parsed == CG_JSON_E_DEEP)
        rc = CG_REQUEST_E_DEEP;
    if (parsed != CG_JSON_OK || j.tok[0].type != JSMN_OBJECT)
        goto out;
    int ds = cg_json_get(&j, 0, "data_sources");
    r->has_data_sources = cg_json_type(&j, ds) == JSMN_ARRAY && j.tok[ds].size > 0;
    if (ds >= 0 && !r->has_data_sources)
        note_value(r, &j, ds);
    int stream = cg_json_get(&j, 0, "stream");
    r->stream = cg_json_type(&j, stream) == JSMN_PRIMITIVE && j.js[j.tok[stream].start] == 't';
    int model = cg_json_get(&j, 0, "model");
    if (cg_json_is_str(&j, model))
        r->model = cg_json_strdup(&j, model, &r->model_len);
    int msgs = cg_json_get(&j, 0, "messages");
    if (cg_json_type(&j, msgs) == JSMN_ARRAY) {
        int n = j.tok[msgs].size;
        for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(&j, i))
            if (cg_json_type(&j, i) == JSMN_OBJECT)
                read_message(r, &j, i, o);
    }
    rc = 0;
out:
    cg_json_free(&j);
    return rc;
}

void cg_request_free(cg_request_t *r)
{
    cg_cites_free(&r->sources);
    free(r->question);
    free(r->model);
    for (size_t i = 0; i < r->ntools; i++)
        free((char *)r->tools[i].p);
    free(r->tools);
    free(r->tool_at);
    memset(r, 0, sizeof(*r));
}

/* --- AZURE_AI_DATA_SOURCES ---------------------------------------------------- */

typedef struct insertion {
    size_t at;
    char *text;
} insertion_t;

static bool array_has(const cg_json_t *j, int arr, const char *value)
{
    int n = j->tok[arr].size;
    for (int k = 0, i = arr + 1; k < n; k++, i = cg_json_skip(j, i))
        if (cg_json_is_str(j, i) && cg_span_eq(cg_json_raw(j, i), value))
            return true;
    return false;
}

/* What to insert into one azure_search source so include_contexts gains the
 * two contexts citegate reads; NULL when nothing is needed. */
static char *source_insertion(const cg_json_t *j, int src, size_t *at)
{
    int type = cg_json_get(j, src, "type");
    int params = cg_json_get(j, src, "parameters");
    if (!cg_json_is_str(j, type) || !cg_span_eq(cg_json_raw(j, type), "azure_search") ||
        cg_json_type(j, params) != JSMN_OBJECT)
        return NULL;
    static const char *const want[] = {"citations", "all_retrieved_documents"};
    cg_buf_t b = {0};
    int ctx = cg_json_get(j, params, "include_contexts");
    if (cg_json_type(j, ctx) == JSMN_ARRAY) {
        bool first = j->tok[ctx].size == 0;
        for (int i = 0; i < 2; i++) {
            if (array_has(j, ctx, want[i]))
                continue;
            cg_buf_printf(&b, "%s\"%s\"", first ? "" : ",", want[i]);
            first = false;
        }
        *at = cg_json_end(j, ctx) - 1;
    } else if (ctx < 0) {
        /* Azure's default is ["citations","intent"]: keep it, add ours. */
        cg_buf_printf(&b, "%s\"include_contexts\":[\"citations\",\"intent\",\"all_retrieved_documents\"]",
                      j->tok[params].size ? "," : "");
        *at = cg_json_end(j, params) - 1;
    }
    if (b.len == 0) {
        cg_buf_free(&b);
        return NULL;
    }
    cg_buf_putc(&b, '\0');
    return b.p;
}

char *cg_data_sources_prepare(const char *json, bool scores)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 16);
    size_t len = strlen(json);
    cg_buf_t out = {0};
    if (cg_json_parse(&j, json, len) != CG_JSON_OK) {
        cg_json_free(&j);
        return NULL;
    }
    bool wrap = j.tok[0].type == JSMN_OBJECT;
    insertion_t ins[64];
    size_t nins = 0;
    if (scores) {
        int n = wrap ? 1 : j.tok[0].size;
        for (int k = 0, i = wrap ? 0 : 1; k < n && nins < 64; k++, i = cg_json_skip(&j, i)) {
            size_t at = 0;
            char *t = cg_json_type(&j, i) == JSMN_OBJECT ? source_insertion(&j, i, &at) : NULL;
            if (t)
                ins[nins++] = (insertion_t){at, t};
        }
    }
    size_t begin = cg_json_begin(&j, 0), end = cg_json_end(&j, 0);
    if (wrap)
        cg_buf_putc(&out, '[');
    size_t cur = begin;
    for (size_t i = 0; i < nins; i++) {
        cg_buf_put(&out, json + cur, ins[i].at - cur);
        cg_buf_puts(&out, ins[i].text);
        cur = ins[i].at;
        free(ins[i].text);
    }
    cg_buf_put(&out, json + cur, end - cur);
    if (wrap)
        cg_buf_putc(&out, ']');
    cg_buf_putc(&out, '\0');
    cg_json_free(&j);
    return out.p;
}
