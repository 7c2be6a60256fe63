/* Citation model: see include/citegate/cite.h. */
#include "citegate/cite.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- The string store ----------------------------------------------------- */

/* A block of the store: strings are carved from data, one after the other,
 * and stay there until the table is freed. */
struct cg_cite_block {
    struct cg_cite_block *prev;
    size_t size, used;
    char data[];
};

/* A new block is at least STORE_LEAST, so that a table filled at once
 * (Azure context, web lists, request-side sources) makes a few blocks
 * about the size of its strings. A dialect adds its citations one by one
 * as the answer streams: its first makes a block of STORE_DIALECT, room
 * for the sources of a usual answer (eight web results or document chunks
 * with snippets of a few hundred bytes), so that the next ones seldom need
 * a block. */
#define STORE_LEAST   1024
#define STORE_DIALECT 4096
#define V_DIALECT     8 /* and room for that many citations */

static void store_block(cg_cites_t *c, size_t size)
{
    struct cg_cite_block *b = cg_xmalloc(sizeof(*b) + size);
    b->prev = c->block;
    b->size = size;
    b->used = 0;
    c->block = b;
}

/* Room for n bytes at the end of the newest block, not yet kept: a new
 * block when the rest is shorter, the largest of twice the last, n and
 * STORE_LEAST. Blocks at least double, so a table makes O(log) of them. */
static char *room(cg_cites_t *c, size_t n)
{
    struct cg_cite_block *b = c->block;
    if (b == NULL || b->size - b->used < n) {
        size_t size = b && 2 * b->size > STORE_LEAST ? 2 * b->size : STORE_LEAST;
        store_block(c, size < n ? n : size);
        b = c->block;
    }
    return b->data + b->used;
}

/* n bytes of the store, kept. */
static char *carve(cg_cites_t *c, size_t n)
{
    char *p = room(c, n);
    c->block->used += n;
    return p;
}

/* Keeps the n bytes written at p, in room(): read up to a NUL (as a C
 * string of them reads) and cut to max at a UTF-8 boundary, then a NUL. */
static char *kept(cg_cites_t *c, char *p, size_t n, size_t max)
{
    n = strnlen(p, n);
    if (n > max)
        n = cg_utf8_cut(p, max);
    p[n] = '\0';
    c->block->used += n + 1;
    return p;
}

/* s[0..n), as kept() keeps it. */
static char *keep(cg_cites_t *c, const char *s, size_t n, size_t max)
{
    n = s ? strnlen(s, n) : 0;
    if (n > max)
        n = cg_utf8_cut(s, max);
    char *p = room(c, n + 1);
    if (n)
        memcpy(p, s, n);
    return kept(c, p, n, SIZE_MAX);
}

static char *keep_str(cg_cites_t *c, const char *s)
{
    return s ? keep(c, s, strlen(s), SIZE_MAX) : NULL;
}

static void store_free(cg_cites_t *c)
{
    for (struct cg_cite_block *b = c->block, *prev; b; b = prev) {
        prev = b->prev;
        free(b);
    }
    c->block = NULL;
}

/* --- Reading strings -------------------------------------------------------- */

static const cg_span_t NONE = {NULL, 0};

/* C string s as a span; p is NULL when s is. */
static cg_span_t str_span(const char *s)
{
    return cg_span(s, s ? strlen(s) : 0);
}

static char *dup_cut(const char *s, size_t n, size_t max)
{
    if (n > max)
        n = cg_utf8_cut(s, max);
    return cg_xstrndup(s, n);
}

/* Decoded non-empty string member `key` of object obj, cut to max; else
 * NULL. Caller frees: for values read whole or only compared. */
static char *member_dup(const cg_json_t *j, int obj, const char *key, size_t max)
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

/* member_dup's string, kept in the store. */
static char *member(cg_cites_t *c, const cg_json_t *j, int obj, const char *key, size_t max)
{
    char *s = member_dup(j, obj, key, max);
    char *k = keep_str(c, s);
    free(s);
    return k;
}

static bool absolute(cg_span_t s)
{
    return (s.n >= 7 && CG_HAS_IPREFIX(s.p, "http://")) ||
           (s.n >= 8 && CG_HAS_IPREFIX(s.p, "https://"));
}

bool cg_url_is_absolute(const char *s)
{
    return absolute(str_span(s));
}

/* The last path segment of path or URL s, without query or fragment;
 * false when that is empty. */
static bool file_segment(cg_span_t s, cg_span_t *seg)
{
    const char *path = s.p, *end = s.p + s.n;
    const char *scheme = memmem(s.p, s.n, "://", 3);
    if (scheme && (path = memchr(scheme + 3, '/', (size_t)(end - scheme - 3))) == NULL)
        return false;
    const char *stop = path;
    while (stop < end && *stop != '?' && *stop != '#')
        stop++;
    const char *start = stop;
    while (start > path && start[-1] != '/' && start[-1] != '\\')
        start--;
    *seg = cg_span(start, (size_t)(stop - start));
    return seg->n > 0;
}

/* Percent-decodes seg into out, up to most bytes; returns how many. */
static size_t decode_name(cg_span_t seg, char *out, size_t most)
{
    size_t o = 0;
    for (const char *q = seg.p, *stop = seg.p + seg.n; q < stop && o < most; q++) {
        int hi, lo;
        if (*q == '%' && stop - q > 2 && (hi = cg_hex_digit(q[1])) >= 0 &&
            (lo = cg_hex_digit(q[2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            q += 2;
        } else {
            out[o++] = *q;
        }
    }
    return o;
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

/* --- The table -------------------------------------------------------------- */

void cg_cites_free(cg_cites_t *c)
{
    store_free(c);
    free(c->v);
    *c = (cg_cites_t){0};
}

/* Bytes that src's strings take with their NULs. */
static size_t strings_size(const cg_cites_t *src)
{
    size_t n = 0;
    for (size_t i = 0; i < src->n; i++) {
        const cg_citation_t *s = &src->v[i];
        const char *f[] = {s->title, s->content,  s->url,      s->link,
                           s->key,   s->filepath, s->chunk_id, s->page};
        for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
            n += f[k] ? strlen(f[k]) + 1 : 0;
    }
    return n;
}

void cg_cites_copy(cg_cites_t *dst, const cg_cites_t *src)
{
    *dst = (cg_cites_t){.kind = src->kind};
    if (src->n == 0)
        return;
    dst->n = src->n;
    dst->cap = src->n;
    dst->v = cg_xcalloc(dst->cap, sizeof(cg_citation_t));
    store_block(dst, strings_size(src));
    for (size_t i = 0; i < src->n; i++) {
        const cg_citation_t *s = &src->v[i];
        cg_citation_t *d = &dst->v[i];
        *d = *s;
        d->title = keep_str(dst, s->title);
        d->content = keep_str(dst, s->content);
        d->content_cap = 0;
        d->url = keep_str(dst, s->url);
        d->link = keep_str(dst, s->link);
        d->key = keep_str(dst, s->key);
        d->filepath = keep_str(dst, s->filepath);
        d->chunk_id = keep_str(dst, s->chunk_id);
        d->page = keep_str(dst, s->page);
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
static bool link_url(cg_span_t s)
{
    return s.n <= CG_CITE_MAX_FIELD && absolute(s);
}

/* The file name of s as a title, or NULL. Decoded bytes past a field's
 * size are cut, so no more than one past it are written. */
static char *file_title(cg_cites_t *c, cg_span_t s)
{
    cg_span_t seg;
    if (s.p == NULL || !file_segment(s, &seg))
        return NULL;
    size_t most = seg.n <= CG_CITE_MAX_FIELD ? seg.n : CG_CITE_MAX_FIELD + 1;
    char *p = room(c, most + 1);
    return kept(c, p, decode_name(seg, p, most), CG_CITE_MAX_FIELD);
}

/* url's link, written in the store's room: cg_url_put_link makes at most
 * 3 bytes of one and a JSON escape 6, so a buffer over room for 6 per
 * byte never grows. */
static char *link_of(cg_cites_t *c, const char *url)
{
    size_t most = 6 * strlen(url);
    char *p = room(c, most + 1);
    cg_buf_t b = {p, 0, most};
    put_link_escaped(&b, url);
    CG_ASSERT(b.p == p && b.len <= most);
    return kept(c, p, b.len, SIZE_MAX);
}

/* The metadata key: base, then #chunk_id, cut to a field's size, so no
 * more than one byte past it of base is copied. */
static char *key_of(cg_cites_t *c, cg_span_t base, const char *chunk_id)
{
    size_t bn = base.n <= CG_CITE_MAX_FIELD ? base.n : CG_CITE_MAX_FIELD + 1;
    size_t cn = chunk_id ? strlen(chunk_id) : 0;
    char *p = room(c, bn + 1 + cn + 1);
    if (bn)
        memcpy(p, base.p, bn);
    if (chunk_id) {
        p[bn] = '#';
        memcpy(p + bn + 1, chunk_id, cn);
    }
    return kept(c, p, bn + (chunk_id ? 1 + cn : 0), CG_CITE_MAX_FIELD);
}

/* What finish() makes a citation's other fields of. url and filepath are
 * the upstream's as given (p NULL when absent; a url may be relative),
 * whole: only there are they cut, after the link is decided. key, when not
 * empty, is the key. content is the snippet when the citation has none yet. */
typedef struct raw {
    cg_span_t url, filepath, key, content;
} raw_t;

/* Fills the derived fields (url, title fallback, link, key), the file path
 * and the snippet, cut to max_doc. The snippet is kept last, so that one
 * sent in pieces grows in place. */
static void finish(cg_cites_t *c, cg_citation_t *x, const raw_t *r, size_t max_doc)
{
    cg_span_t url = link_url(r->url) ? r->url : link_url(r->filepath) ? r->filepath : NONE;
    if (url.p)
        x->url = keep(c, url.p, url.n, SIZE_MAX);
    if (r->filepath.p)
        x->filepath = keep(c, r->filepath.p, r->filepath.n, CG_CITE_MAX_FIELD);
    if (x->title == NULL)
        x->title = file_title(c, r->filepath);
    if (x->title == NULL)
        x->title = file_title(c, r->url);
    if (x->title == NULL)
        x->title = keep(c, CG_STRLIT("Unknown Document"), SIZE_MAX);
    if (x->url)
        x->link = link_of(c, x->url);
    cg_span_t base = r->filepath.p ? r->filepath : r->url.p ? r->url : str_span(x->title);
    x->key =
        r->key.n ? keep(c, r->key.p, r->key.n, CG_CITE_MAX_FIELD) : key_of(c, base, x->chunk_id);
    if (x->content == NULL)
        x->content = keep(c, r->content.p, r->content.n, max_doc);
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
    k->filepath = member_dup(j, obj, "filepath", CG_CITE_MAX_FIELD);
    k->chunk_id = member_dup(j, obj, "chunk_id", CG_CITE_MAX_FIELD);
    k->title = member_dup(j, obj, "title", CG_CITE_MAX_FIELD);
    k->content = member_dup(j, obj, "content", 100);
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
            finish(c, x, &(raw_t){0}, o->max_doc_bytes);
            continue;
        }
        x->title = member(c, j, i, "title", CG_CITE_MAX_FIELD);
        x->content = member(c, j, i, "content", o->max_doc_bytes);
        x->chunk_id = member(c, j, i, "chunk_id", CG_CITE_MAX_FIELD);
        char *fp = member_dup(j, i, "filepath", SIZE_MAX); /* cut by finish() */
        char *url = member_dup(j, i, "url", SIZE_MAX);
        finish(c, x, &(raw_t){.url = str_span(url), .filepath = str_span(fp)}, o->max_doc_bytes);
        free(fp);
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
        char *u = member_dup(j, i, "url", SIZE_MAX);
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
        x->title = member(c, j, result, "title", CG_CITE_MAX_FIELD);
        x->content = member(c, j, result, "snippet", o->max_doc_bytes);
        if (url == NULL)
            url = rurl = member_dup(j, result, "url", SIZE_MAX);
    }
    finish(c, x, &(raw_t){.url = str_span(url)}, o->max_doc_bytes);
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
    raw_t r = {.content = cg_span(text, text_len)};
    if (name_len > 0) {
        cg_span_t n = cg_span(name, strnlen(name, name_len));
        if (absolute(n))
            r.url = n;
        else
            x->title = keep(c, n.p, n.n, CG_CITE_MAX_FIELD);
    }
    finish(c, x, &r, o->max_doc_bytes);
    c->kind = CG_CITES_REQUEST;
}

static bool all_digits(cg_span_t s)
{
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
    return s.n > 0;
}

/* A dialect's citations come one by one as the answer streams: its first
 * makes room for the next ones, so that they seldom allocate. */
static void dialect_room(cg_cites_t *c)
{
    if (c->block != NULL)
        return;
    store_block(c, STORE_DIALECT);
    if (c->cap < V_DIALECT)
        c->v = cg_xrealloc(c->v, (c->cap = V_DIALECT) * sizeof(cg_citation_t));
}

const cg_citation_t *cg_cites_add(cg_cites_t *c, const cg_cite_in_t *in, const cg_cite_opts_t *o)
{
    const cg_citation_t *old = cg_cites_find(c, in->id);
    if (old || in->id == 0)
        return old;
    if (c->kind != CG_CITES_REQUEST)
        c->kind = CG_CITES_DIALECT;
    dialect_room(c);
    cg_citation_t *x = append(c);
    if (x == NULL)
        return NULL;
    x->id = in->id;
    if (in->title.n)
        x->title = keep(c, in->title.p, in->title.n, CG_CITE_MAX_FIELD);
    if (in->chunk_id.n)
        x->chunk_id = keep(c, in->chunk_id.p, in->chunk_id.n, CG_CITE_MAX_FIELD);
    if (all_digits(in->page) && in->page.n <= 15) /* written as a JSON number */
        x->page = keep(c, in->page.p, in->page.n, SIZE_MAX);
    raw_t r = {.key = in->key, .content = in->content};
    if (in->url.n)
        r.url = cg_span(in->url.p, strnlen(in->url.p, in->url.n));
    finish(c, x, &r, o->max_doc_bytes);
    return x;
}

/* Room for n bytes of x's content, whose first `have` are where it is: in
 * place when it has them, or can take them as the newest block's last
 * string; else at a new carve with room for twice that, up to max, so a
 * snippet that grows in pieces between other strings moves O(log) times. */
static char *content_room(cg_cites_t *c, cg_citation_t *x, size_t have, size_t n, size_t max)
{
    size_t cap = x->content_cap ? x->content_cap : have + 1;
    struct cg_cite_block *b = c->block;
    if (n <= cap)
        return x->content;
    if (x->content + cap == b->data + b->used && b->size - b->used >= n - cap) {
        b->used += n - cap;
        x->content_cap = n;
        return x->content;
    }
    size_t room = (n - 1 <= max / 2 ? 2 * (n - 1) : max) + 1;
    char *p = carve(c, room);
    memcpy(p, x->content, have);
    x->content = p;
    x->content_cap = room;
    return p;
}

void cg_cites_append_content(cg_cites_t *c, unsigned id, cg_span_t more, const cg_cite_opts_t *o)
{
    cg_citation_t *x = (cg_citation_t *)cg_cites_find(c, id);
    size_t have = x ? strlen(x->content) : 0, max = o->max_doc_bytes;
    if (x == NULL || more.n == 0 || have >= max)
        return;
    /* The bytes a cut at max reads: the old ones, then as many new. */
    size_t len = more.n < max - have ? have + more.n : max;
    char *p = content_room(c, x, have, len + 1, max);
    memcpy(p + have, more.p, len - have);
    if (more.n > max - have)
        len = cg_utf8_cut(p, max);
    p[len] = '\0';
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
