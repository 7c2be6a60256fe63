/*
 * libFuzzer target for the gemini answer view (src/dialects/gemini.c)
 * through the transformer.
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream body: a
 * streamGenerateContent SSE stream, or a GenerateContentResponse for the
 * body path. Byte 1:
 *   bits 0-2: profile: openwebui, openai, webchat, structured, markdown,
 *             off, then openwebui and openai again
 *   bit 3:    the client asked for include_usage
 *   bit 4:    max_event 512 instead of 4 MiB (events the view never sees)
 *   bit 5:    the request carries <source> ids 2 and 5 (Gemini's numbers
 *             come after them)
 * Every input also runs through profile off.
 *
 * Checks, for any input:
 *   - the stream in reads cut by the header's seed and in one read: the
 *     same client bytes (the view reads whole events and lines);
 *   - every event the client gets is [DONE] or a valid JSON object, no line
 *     is over 64 KiB, and the stream ends with exactly one [DONE] or one
 *     error event, with nothing after it (unless profile structured let a
 *     long stream through);
 *   - profile off, when no line outside the data lines could hold an error
 *     object: the client's content is, byte for byte, the text of every
 *     part of candidates[0] that is no thought, of every event up to one
 *     whose data is an error object (read by a splitter and the JSON view
 *     here, not by the view's code), then nothing or one " [N]…" of
 *     numbers strictly increasing;
 *   - the body path: a refused body goes out unchanged; a taken one is one
 *     valid JSON object, an error or a chat completion whose content
 *     (profile off, decoded) is the visible text with nothing but
 *     references "[N]" inserted into it.
 * Every read is an exact-size heap copy, freed right after its output is
 * copied.
 */
#include "citegate/dialect.h"
#include "citegate/xform.h"

#include "../support/dialects.h"
#include "../support/profiles.h"
#include "fuzz_jsonv.h"
#include "fuzz_run.h"

static const char *const profile_names[8] = {"openwebui", "openai", "webchat",   "structured",
                                             "markdown",  "off",    "openwebui", "openai"};

typedef struct opts {
    cg_xform_cfg_t cfg;
    cg_request_t req;
    cg_dialect_req_t dreq;
    bool sources;
} opts_t;

static const char sources_request[] =
    "{\"model\":\"gemini-2.5-flash\",\"stream\":true,\"messages\":[{\"role\":\"system\","
    "\"content\":\"<source id=\\\"5\\\" name=\\\"https://a.example/five\\\">five</source>"
    "<source id=\\\"2\\\" name=\\\"two.md\\\">two</source>\"},{\"role\":\"user\",\"content\":"
    "\"q\"}]}";

static void pick(opts_t *o, uint8_t flags, const char *profile)
{
    memset(o, 0, sizeof(*o));
    cg_xform_cfg_default(&o->cfg, profile_named(profile ? profile : profile_names[flags & 7]));
    if (flags & 0x10)
        o->cfg.max_event = 512;
    if (flags & 0x20) {
        cg_cite_opts_t co = {8192, true};
        cg_dialect_err_t e;
        cg_dialect_in_t in = {.req = &o->req};
        FZ_CHECK(cg_request_parse(&o->req, sources_request, strlen(sources_request), &co) == 0);
        FZ_CHECK(cg_dialect_request(dialect_named("gemini"), sources_request,
                                    strlen(sources_request), &in, &o->dreq, &e) == 0);
        o->sources = true;
    }
    o->dreq.include_usage = (flags & 8) != 0;
}

static void opts_free(opts_t *o)
{
    cg_request_free(&o->req);
    cg_dialect_req_free(&o->dreq);
}

static cg_xform_t *new_view(const opts_t *o)
{
    cg_xform_t *x = cg_xform_new(&o->cfg, o->sources ? &o->req : NULL);
    cg_xform_set_dialect(x, cg_dialect_view(dialect_named("gemini")), &o->dreq, 1700000000);
    return x;
}

/* --- Reading SSE and JSON here ------------------------------------------------ */

/* Calls data_fn with the data of every complete event of s[0..n) that has
 * any (data lines joined by LF), and notes whether a line that is neither a
 * data line nor blank could be part of a JSON object: a plain line
 * splitter, not src/core/sse.c. */
typedef struct lines {
    void (*data_fn)(const char *d, size_t dn, void *arg);
    void *arg;
    bool json_lines; /* a line outside the data lines starts like JSON */
    size_t max_line;
} lines_t;

static void read_lines(const char *s, size_t n, lines_t *l)
{
    cg_buf_t data = {0};
    bool have = false;
    /* A byte order mark may open the stream (SSE drops it). */
    for (size_t i = n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0; i < n;) {
        size_t e = i;
        while (e < n && !fz_is_eol(s[e]))
            e++;
        if (e - i > l->max_line)
            l->max_line = e - i;
        if (e < n && e == i) {
            if (have && l->data_fn)
                l->data_fn(data.p, data.len, l->arg);
            data.len = 0;
            have = false;
        } else if (e - i >= 4 && memcmp(s + i, "data", 4) == 0 && (e - i == 4 || s[i + 4] == ':')) {
            size_t v = i + (e - i == 4 ? 4 : 5);
            v += v < e && s[v] == ' ';
            if (have)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, s + v, e - v);
            have = true;
        } else if (e > i && strchr(" \t{}[]\"", s[i]) != NULL) {
            l->json_lines = true;
        }
        if (e == n)
            break;
        i = e + fz_eol_len(s, n, e);
    }
    cg_buf_free(&data);
}

static bool is_true(const cg_json_t *j, int tok)
{
    return cg_json_type(j, tok) == JSMN_PRIMITIVE && j->js[j->tok[tok].start] == 't';
}

/* Appends the raw (or, decoded, the decoded) text of every part of
 * candidates[0] of response `root` that is no thought. */
static void visible_text(const cg_json_t *j, bool decoded, cg_buf_t *b)
{
    int cands = cg_json_get(j, 0, "candidates");
    if (cg_json_type(j, cands) != JSMN_ARRAY || j->tok[cands].size == 0)
        return;
    int parts = cg_json_get(j, cg_json_get(j, cands + 1, "content"), "parts");
    int n = cg_json_type(j, parts) == JSMN_ARRAY ? j->tok[parts].size : 0;
    for (int k = 0, p = parts + 1; k < n; k++, p = cg_json_skip(j, p)) {
        int text = cg_json_get(j, p, "text");
        if (!cg_json_is_str(j, text) || is_true(j, cg_json_get(j, p, "thought")))
            continue;
        cg_span_t raw = cg_json_raw(j, text);
        if (!decoded) {
            cg_buf_put(b, raw.p, raw.n);
            continue;
        }
        char *t = cg_buf_reserve(b, raw.n);
        b->len += cg_json_unescape(raw.p, raw.n, t);
        (void)t;
    }
}

/* --- The client's stream ---------------------------------------------------- */

typedef struct client {
    cg_buf_t content; /* raw JSON string bytes of every delta.content */
    size_t events, ends, after_end;
    bool done_last, error_last;
} client_t;

static void client_event(const char *d, size_t n, void *arg)
{
    client_t *c = arg;
    c->events++;
    if (c->done_last || c->error_last)
        c->after_end++;
    if (n == 6 && memcmp(d, "[DONE]", 6) == 0) {
        c->done_last = true;
        c->ends++;
        return;
    }
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    FZ_CHECK(cg_json_parse(&j, d, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT);
    FZ_CHECK(fz_json_invalid(&j) == NULL);
    c->error_last = cg_json_get(&j, 0, "error") >= 0;
    c->ends += c->error_last;
    int choices = cg_json_get(&j, 0, "choices");
    int nc = cg_json_type(&j, choices) == JSMN_ARRAY ? j.tok[choices].size : 0;
    for (int k = 0, ch = choices + 1; k < nc; k++, ch = cg_json_skip(&j, ch)) {
        int content = cg_json_get(&j, cg_json_get(&j, ch, "delta"), "content");
        if (cg_json_is_str(&j, content)) {
            cg_span_t raw = cg_json_raw(&j, content);
            cg_buf_put(&c->content, raw.p, raw.n);
        }
    }
    cg_json_free(&j);
}

/* --- What the upstream said -------------------------------------------------- */

typedef struct upstream {
    cg_buf_t text; /* raw bytes of the visible text until an error object */
    bool ended;
} upstream_t;

static void upstream_event(const char *d, size_t n, void *arg)
{
    upstream_t *u = arg;
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    if (!u->ended && cg_json_parse(&j, d, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT) {
        int err = cg_json_get(&j, 0, "error");
        u->ended = cg_json_type(&j, err) == JSMN_OBJECT;
        if (!u->ended)
            visible_text(&j, false, &u->text);
    }
    cg_json_free(&j);
}

static bool same(const cg_buf_t *a, const cg_buf_t *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

/* Nothing, or " [N][M]…" with numbers strictly increasing. */
static bool refs_suffix(const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (p[0] != ' ' || n < 4)
        return false;
    unsigned long last = 0;
    for (size_t i = 1; i < n;) {
        if (p[i] != '[' || i + 1 >= n || p[i + 1] < '1' || p[i + 1] > '9')
            return false;
        unsigned long v = 0;
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            v = v * 10 + (unsigned long)(p[i] - '0');
        if (i >= n || p[i] != ']' || v <= last || v > 9999)
            return false;
        last = v;
        i++;
    }
    return true;
}

static void check_stream(const opts_t *o, const uint8_t *in, size_t len, uint8_t seed)
{
    fz_split_t sp;
    fz_split_init(&sp, seed);
    fz_result_t rs, rw;
    fz_stream(&rs, new_view(o), in, len, &sp);
    fz_stream(&rw, new_view(o), in, len, NULL);
    FZ_CHECK(same(&rs.out, &rw.out));
    client_t c = {0};
    lines_t cl = {client_event, &c, false, 0};
    read_lines(rw.out.p, rw.out.len, &cl);
    FZ_CHECK(cl.max_line <= CG_XFORM_LINE_MAX);
    if (!rw.stats.passthrough)
        FZ_CHECK(c.events > 0 && c.ends == 1 && c.after_end == 0 && (c.done_last || c.error_last));
    upstream_t u = {0};
    lines_t ul = {upstream_event, &u, false, 0};
    read_lines((const char *)in, len, &ul);
    if (strcmp(o->cfg.profile->name, "off") == 0 && o->cfg.max_event > len && !ul.json_lines) {
        FZ_CHECK(c.content.len >= u.text.len);
        FZ_CHECK(u.text.len == 0 || memcmp(c.content.p, u.text.p, u.text.len) == 0);
        FZ_CHECK(c.content.len == u.text.len ||
                 refs_suffix(c.content.p + u.text.len, c.content.len - u.text.len));
    }
    cg_buf_free(&u.text);
    cg_buf_free(&c.content);
    cg_buf_free(&rs.out);
    cg_buf_free(&rw.out);
}

/* --- Bodies --------------------------------------------------------------------- */

/* The length of a "[N]" at got[i], or 0. */
static size_t ref_at(const char *got, size_t gn, size_t i)
{
    size_t e = i + 1;
    if (i >= gn || got[i] != '[')
        return 0;
    while (e < gn && got[e] >= '0' && got[e] <= '9')
        e++;
    return e == i + 1 || e >= gn || got[e] != ']' ? 0 : e + 1 - i;
}

/* Is got[i..] the text want[k..] with only "[N]"s inserted? Where the text
 * itself has a '[' that could begin an inserted "[N]", both readings are
 * tried; *budget bounds the tries, and running out counts as a match (no
 * verdict, on inputs made of little else). */
static bool refs_from(const char *got, size_t gn, size_t i, const char *want, size_t wn,
                      size_t k, long *budget)
{
    while (i < gn) {
        if (--*budget < 0)
            return true;
        size_t r = ref_at(got, gn, i);
        bool same = k < wn && got[i] == want[k];
        if (same && r && refs_from(got, gn, i + r, want, wn, k, budget))
            return true;
        if (same) {
            i++, k++;
        } else if (r) {
            i += r;
        } else {
            return false;
        }
    }
    return k == wn;
}

/* Is got the text of want with only "[N]"s inserted? */
static bool with_refs(const char *got, size_t gn, const char *want, size_t wn)
{
    long budget = 1000000;
    return refs_from(got, gn, 0, want, wn, 0, &budget);
}

/* Profile off: a chat completion's content is the visible text with
 * references inserted, or the body is SPEC §6's error. */
static void check_body_text(const uint8_t *in, size_t len, const cg_json_t *jo)
{
    cg_json_t ji;
    cg_json_init(&ji, 1u << 20);
    FZ_CHECK(cg_json_parse(&ji, (const char *)in, len) == CG_JSON_OK);
    if (cg_json_type(&ji, cg_json_get(&ji, 0, "error")) == JSMN_OBJECT) {
        FZ_CHECK(cg_json_type(jo, cg_json_get(jo, 0, "error")) == JSMN_OBJECT);
    } else {
        cg_buf_t want = {0};
        visible_text(&ji, true, &want);
        int choices = cg_json_get(jo, 0, "choices");
        FZ_CHECK(cg_json_type(jo, choices) == JSMN_ARRAY && jo->tok[choices].size == 1);
        int content = cg_json_get(jo, cg_json_get(jo, choices + 1, "message"), "content");
        size_t n;
        char *got = cg_json_strdup(jo, content, &n);
        FZ_CHECK(got != NULL);
        FZ_CHECK(with_refs(got, n, want.p ? want.p : "", want.len));
        free(got);
        cg_buf_free(&want);
    }
    cg_json_free(&ji);
}

static void check_body(const opts_t *o, const uint8_t *in, size_t len)
{
    cg_buf_t b = {0};
    int rc = fz_body(&b, new_view(o), in, len);
    cg_json_t j;
    if (fz_body_object(&b, rc, in, len, &j)) {
        FZ_CHECK(fz_json_invalid(&j) == NULL);
        if (strcmp(o->cfg.profile->name, "off") == 0)
            check_body_text(in, len, &j);
        cg_json_free(&j);
    }
    cg_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    const uint8_t *in = data + FZ_HEADER;
    size_t len = size - FZ_HEADER;
    opts_t picked, off;
    pick(&picked, data[1], NULL);
    pick(&off, data[1], "off");
    check_stream(&picked, in, len, data[0]);
    check_stream(&off, in, len, data[0]);
    check_body(&picked, in, len);
    check_body(&off, in, len);
    opts_free(&picked);
    opts_free(&off);
    return 0;
}
