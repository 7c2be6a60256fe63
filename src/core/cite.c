/* Citation model: see include/citegate/cite.h. */
#include "citegate/cite.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *dup_cut(const char *s, size_t n, size_t max)
{
    if (n > max)
        n = cg_utf8_cut(s, max);
    return cg_xstrndup(s, n);
}

/* Decoded non-empty string member `key` of object obj, cut to max; else NULL. */
static char *member(const cg_json_t *j, int obj, const char *key, size_t max)
{
    int v = cg_json_get(j, obj, key);
    if (v < 0)
        return NULL;
    if (cg_json_type(j, v) == JSMN_PRIMITIVE && !cg_json_is_null(j, v)) {
        /* A numeric chunk_id is still an identifier. */
        cg_span_t raw = cg_json_raw(j, v);
        return dup_cut(raw.p, raw.n, max);
    }
    size_t n;
    char *s = cg_json_strdup(j, v, &n);
    if (s == NULL)
        return NULL;
    if (n == 0) {
        free(s);
        return NULL;
    }
    if (n > max)
        s[cg_utf8_cut(s, max)] = '\0';
    return s;
}

bool cg_url_is_absolute(const char *s)
{
    return s && (CG_HAS_IPREFIX(s, "http://") || CG_HAS_IPREFIX(s, "https://"));
}

char *cg_url_file_name(const char *s)
{
    if (s == NULL)
        return NULL;
    const char *path = s;
    const char *scheme = strstr(s, "://");
    if (scheme) {
        path = strchr(scheme + 3, '/');
        if (path == NULL)
            return NULL;
    }
    size_t end = strcspn(path, "?#");
    size_t start = end;
    while (start > 0 && path[start - 1] != '/' && path[start - 1] != '\\')
        start--;
    if (start == end)
        return NULL;
    char *out = cg_xmalloc(end - start + 1);
    size_t o = 0;
    for (size_t i = start; i < end; i++) {
        int hi, lo;
        if (path[i] == '%' && i + 2 < end + 1 && (hi = cg_hex_digit(path[i + 1])) >= 0 &&
            (lo = cg_hex_digit(path[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = path[i];
        }
    }
    out[o] = '\0';
    return out;
}

void cg_url_put_link(cg_buf_t *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case ' ': cg_buf_puts(b, "%20"); break;
        case '(': cg_buf_puts(b, "%28"); break;
        case ')': cg_buf_puts(b, "%29"); break;
        case '<': cg_buf_puts(b, "%3C"); break;
        case '>': cg_buf_puts(b, "%3E"); break;
        default: cg_buf_putc(b, *s);
        }
    }
}

static void citation_free(cg_citation_t *c)
{
    free(c->title);
    free(c->content);
    free(c->url);
    free(c->link);
    free(c->key);
    free(c->filepath);
    free(c->chunk_id);
    free(c->page);
}

void cg_cites_free(cg_cites_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        citation_free(&c->v[i]);
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
    c->kind = CG_CITES_NONE;
}

static char *dup_or_null(const char *s)
{
    return s ? cg_xstrndup(s, strlen(s)) : NULL;
}

void cg_cites_copy(cg_cites_t *dst, const cg_cites_t *src)
{
    dst->n = dst->cap = src->n;
    dst->kind = src->kind;
    dst->v = src->n ? cg_xcalloc(src->n, sizeof(cg_citation_t)) : NULL;
    for (size_t i = 0; i < src->n; i++) {
        const cg_citation_t *s = &src->v[i];
        cg_citation_t *d = &dst->v[i];
        *d = *s;
        d->title = dup_or_null(s->title);
        d->content = dup_or_null(s->content);
        d->url = dup_or_null(s->url);
        d->link = dup_or_null(s->link);
        d->key = dup_or_null(s->key);
        d->filepath = dup_or_null(s->filepath);
        d->chunk_id = dup_or_null(s->chunk_id);
        d->page = dup_or_null(s->page);
    }
}

static cg_citation_t *append(cg_cites_t *c)
{
    if (c->n >= CG_CITE_MAX)
        return NULL;
    c->v = cg_grow(c->v, c->n, &c->cap, 4, sizeof(cg_citation_t));
    cg_citation_t *x = &c->v[c->n++];
    memset(x, 0, sizeof(*x));
    x->id = (unsigned)c->n;
    return x;
}

/* url as cg_url_put_link writes it, escaped for a JSON string: the bytes it
 * percent-encodes need no JSON escape, so runs between them are escaped as
 * they are. */
static void put_link_escaped(cg_buf_t *b, const char *url)
{
    for (;;) {
        size_t run = strcspn(url, " ()<>");
        cg_json_put_escaped(b, url, run);
        url += run;
        if (*url == '\0')
            return;
        char one[2] = {*url++, '\0'};
        cg_url_put_link(b, one);
    }
}

/* An absolute URL that a citation keeps whole: one longer than a field
 * would point elsewhere once cut, so it makes no link at all. */
static bool link_url(const char *s)
{
    return cg_url_is_absolute(s) && strlen(s) <= CG_CITE_MAX_FIELD;
}

/* s cut to a field's size, or NULL. */
static char *field(char *s)
{
    if (s && strlen(s) > CG_CITE_MAX_FIELD)
        s[cg_utf8_cut(s, CG_CITE_MAX_FIELD)] = '\0';
    return s;
}

/* Fills the derived fields (title fallback, link, key) from the raw ones.
 * `url_raw` is the upstream's url field as given (may be relative), and
 * like filepath read whole: only here are they cut, after the link is
 * decided. */
static void finish(cg_citation_t *c, const char *url_raw)
{
    if (c->url == NULL && link_url(url_raw))
        c->url = cg_xstrndup(url_raw, strlen(url_raw));
    if (c->url == NULL && link_url(c->filepath))
        c->url = cg_xstrndup(c->filepath, strlen(c->filepath));
    if (c->title == NULL)
        c->title = field(cg_url_file_name(c->filepath));
    if (c->title == NULL)
        c->title = field(cg_url_file_name(url_raw));
    if (c->title == NULL)
        c->title = cg_xstrndup(CG_STRLIT("Unknown Document"));
    if (c->content == NULL)
        c->content = cg_xstrndup("", 0);
    if (c->url) {
        cg_buf_t link = {0};
        put_link_escaped(&link, c->url);
        cg_buf_putc(&link, '\0');
        c->link = link.p;
    }
    const char *base = c->filepath ? c->filepath : url_raw ? url_raw : c->title;
    cg_buf_t key = {0};
    cg_buf_puts(&key, base);
    if (c->chunk_id) {
        cg_buf_putc(&key, '#');
        cg_buf_puts(&key, c->chunk_id);
    }
    cg_buf_putc(&key, '\0');
    c->key = field(key.p);
    field(c->filepath);
}

/* --- Azure On Your Data --------------------------------------------------- */

static bool same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static bool same_prefix100(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return false;
    size_t la = strlen(a), lb = strlen(b);
    la = la > 100 ? 100 : la;
    lb = lb > 100 ? 100 : lb;
    return la == lb && memcmp(a, b, la) == 0;
}

/* Score of one retrieved document (SPEC §7), or false when it has none. */
static bool doc_score(const cg_json_t *j, int doc, double *out)
{
    double v;
    if (cg_json_number(j, cg_json_get(j, doc, "rerank_score"), &v)) {
        v /= 4;
    } else if (cg_json_number(j, cg_json_get(j, doc, "original_search_score"), &v)) {
        if (v > 1)
            v /= 100;
    } else {
        return false;
    }
    *out = v < 0 ? 0 : v > 1 ? 1 : v;
    return true;
}

typedef struct doc_keys {
    char *filepath, *chunk_id, *title, *content;
} doc_keys_t;

static void keys_read(doc_keys_t *k, const cg_json_t *j, int obj)
{
    k->filepath = member(j, obj, "filepath", CG_CITE_MAX_FIELD);
    k->chunk_id = member(j, obj, "chunk_id", CG_CITE_MAX_FIELD);
    k->title = member(j, obj, "title", CG_CITE_MAX_FIELD);
    k->content = member(j, obj, "content", 100);
}

static void keys_free(doc_keys_t *k)
{
    free(k->filepath);
    free(k->chunk_id);
    free(k->title);
    free(k->content);
}

/* Whether a and b are the same document by the keys of one pass (0:
 * filepath and chunk_id, 1: title and chunk_id, 2: the first 100 bytes of
 * content). */
static bool keys_match(const doc_keys_t *a, const doc_keys_t *b, int pass)
{
    switch (pass) {
    case 0: return same(a->filepath, b->filepath) && same(a->chunk_id, b->chunk_id);
    case 1: return same(a->title, b->title) && same(a->chunk_id, b->chunk_id);
    default: return same_prefix100(a->content, b->content);
    }
}

/* Gives each citation from `first` on the score of the retrieved document
 * it is: the first pass that matches one decides. */
static void merge_scores(cg_cites_t *c, size_t first, const cg_json_t *j, int context,
                         int cites)
{
    int docs = cg_json_get(j, context, "all_retrieved_documents");
    if (cg_json_type(j, docs) != JSMN_ARRAY || j->tok[docs].size == 0)
        return;
    int ndocs = j->tok[docs].size;
    doc_keys_t *dk = cg_xcalloc((size_t)ndocs, sizeof(doc_keys_t));
    int *dtok = cg_xcalloc((size_t)ndocs, sizeof(int));
    for (int d = 0, i = docs + 1; d < ndocs; d++, i = cg_json_skip(j, i)) {
        dtok[d] = i;
        if (cg_json_type(j, i) == JSMN_OBJECT)
            keys_read(&dk[d], j, i);
    }
    int ci = cites + 1;
    for (size_t k = first; k < c->n; k++, ci = cg_json_skip(j, ci)) {
        doc_keys_t ck = {0};
        keys_read(&ck, j, ci);
        bool found = false;
        for (int pass = 0; pass < 3 && !found; pass++) {
            for (int d = 0; d < ndocs && !found; d++) {
                if (keys_match(&ck, &dk[d], pass)) {
                    found = true;
                    c->v[k].has_score = doc_score(j, dtok[d], &c->v[k].score);
                }
            }
        }
        keys_free(&ck);
    }
    for (int d = 0; d < ndocs; d++)
        keys_free(&dk[d]);
    free(dk);
    free(dtok);
}

size_t cg_cites_from_azure(cg_cites_t *c, const cg_json_t *j, int context,
                           const cg_cite_opts_t *o)
{
    int cites = cg_json_get(j, context, "citations");
    if (cg_json_type(j, cites) != JSMN_ARRAY || j->tok[cites].size == 0)
        return 0;
    size_t first = c->n;
    int n = j->tok[cites].size;
    for (int k = 0, i = cites + 1; k < n; k++, i = cg_json_skip(j, i)) {
        cg_citation_t *x = append(c);
        if (x == NULL)
            break;
        if (cg_json_type(j, i) != JSMN_OBJECT) {
            finish(x, NULL);
            continue;
        }
        x->title = member(j, i, "title", CG_CITE_MAX_FIELD);
        x->content = member(j, i, "content", o->max_doc_bytes);
        x->filepath = member(j, i, "filepath", SIZE_MAX); /* cut by finish() */
        x->chunk_id = member(j, i, "chunk_id", CG_CITE_MAX_FIELD);
        char *url = member(j, i, "url", SIZE_MAX);
        finish(x, url);
        free(url);
    }
    c->kind = CG_CITES_AZURE;
    if (o->scores)
        merge_scores(c, first, j, context, cites);
    return c->n - first;
}

/* --- Perplexity-style top-level lists ------------------------------------- */

static int find_result(const cg_json_t *j, int results, const char *url)
{
    if (cg_json_type(j, results) != JSMN_ARRAY || url == NULL)
        return -1;
    int n = j->tok[results].size;
    for (int k = 0, i = results + 1; k < n; k++, i = cg_json_skip(j, i)) {
        char *u = member(j, i, "url", SIZE_MAX);
        bool eq = same(u, url);
        free(u);
        if (eq)
            return i;
    }
    return -1;
}

static void add_web(cg_cites_t *c, const cg_json_t *j, int result, const char *url,
                    const cg_cite_opts_t *o)
{
    cg_citation_t *x = append(c);
    if (x == NULL)
        return;
    char *rurl = NULL;
    if (result >= 0) {
        x->title = member(j, result, "title", CG_CITE_MAX_FIELD);
        x->content = member(j, result, "snippet", o->max_doc_bytes);
        if (url == NULL)
            url = rurl = member(j, result, "url", SIZE_MAX);
    }
    finish(x, url);
    free(rurl);
}

size_t cg_cites_from_web(cg_cites_t *c, const cg_json_t *j, int root, const cg_cite_opts_t *o)
{
    int urls = cg_json_get(j, root, "citations");
    int results = cg_json_get(j, root, "search_results");
    size_t first = c->n;
    if (cg_json_type(j, urls) == JSMN_ARRAY && j->tok[urls].size > 0) {
        int n = j->tok[urls].size;
        for (int k = 0, i = urls + 1; k < n; k++, i = cg_json_skip(j, i)) {
            char *url = cg_json_strdup_nonempty(j, i);
            add_web(c, j, find_result(j, results, url), url, o);
            free(url);
        }
    } else if (cg_json_type(j, results) == JSMN_ARRAY && j->tok[results].size > 0) {
        int n = j->tok[results].size;
        for (int k = 0, i = results + 1; k < n; k++, i = cg_json_skip(j, i))
            add_web(c, j, cg_json_type(j, i) == JSMN_OBJECT ? i : -1, NULL, o);
    }
    if (c->n > first)
        c->kind = CG_CITES_WEB;
    return c->n - first;
}

/* --- Request-side <source> tags -------------------------------------------- */

void cg_cites_add_source(cg_cites_t *c, unsigned id, const char *name, size_t name_len,
                         const char *text, size_t text_len, const cg_cite_opts_t *o)
{
    if (cg_cites_find(c, id))
        return;
    cg_citation_t *x = append(c);
    if (x == NULL)
        return;
    x->id = id;
    x->content = dup_cut(text, text_len, o->max_doc_bytes);
    char *url = NULL;
    if (name_len > 0) {
        char *n = cg_xstrndup(name, name_len);
        if (cg_url_is_absolute(n))
            url = n;
        else
            x->title = field(n);
    }
    finish(x, url);
    free(url);
    c->kind = CG_CITES_REQUEST;
}

static bool all_digits(cg_span_t s)
{
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
    return s.n > 0;
}

const cg_citation_t *cg_cites_add(cg_cites_t *c, const cg_cite_in_t *in, const cg_cite_opts_t *o)
{
    const cg_citation_t *old = cg_cites_find(c, in->id);
    if (old || in->id == 0)
        return old;
    if (c->kind != CG_CITES_REQUEST)
        c->kind = CG_CITES_DIALECT;
    cg_citation_t *x = append(c);
    if (x == NULL)
        return NULL;
    x->id = in->id;
    if (in->title.n)
        x->title = dup_cut(in->title.p, in->title.n, CG_CITE_MAX_FIELD);
    x->content = dup_cut(in->content.p ? in->content.p : "", in->content.n, o->max_doc_bytes);
    if (in->chunk_id.n)
        x->chunk_id = dup_cut(in->chunk_id.p, in->chunk_id.n, CG_CITE_MAX_FIELD);
    if (all_digits(in->page) && in->page.n <= 15) /* written as a JSON number */
        x->page = cg_xstrndup(in->page.p, in->page.n);
    char *url = in->url.n ? cg_xstrndup(in->url.p, in->url.n) : NULL;
    finish(x, url);
    free(url);
    if (in->key.n) {
        free(x->key);
        x->key = dup_cut(in->key.p, in->key.n, CG_CITE_MAX_FIELD);
    }
    return x;
}

void cg_cites_append_content(cg_cites_t *c, unsigned id, cg_span_t more, const cg_cite_opts_t *o)
{
    cg_citation_t *x = (cg_citation_t *)cg_cites_find(c, id);
    size_t have = x ? strlen(x->content) : 0;
    if (x == NULL || more.n == 0 || have >= o->max_doc_bytes)
        return;
    cg_buf_t b = {0};
    cg_buf_put(&b, x->content, have);
    cg_buf_put(&b, more.p, more.n);
    free(x->content);
    x->content = dup_cut(b.p, b.len, o->max_doc_bytes);
    cg_buf_free(&b);
}

unsigned cg_cites_max_id(const cg_cites_t *c)
{
    unsigned m = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id > m)
            m = c->v[i].id;
    return m;
}

const cg_citation_t *cg_cites_find(const cg_cites_t *c, unsigned n)
{
    if (n == 0)
        return NULL;
    if (c->kind != CG_CITES_REQUEST && c->kind != CG_CITES_DIALECT)
        return n <= c->n ? &c->v[n - 1] : NULL;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == n)
            return &c->v[i];
    return NULL;
}
