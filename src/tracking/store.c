/* What both tracking stores share: see store.h. */
#include "store.h"

#include "citegate/json.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cg_pattern_free(cg_pattern_t *p)
{
    if (p == NULL)
        return;
    free(p->query);
    free(p->chunk_ids);
    cg_vector_free(&p->vec);
    free(p);
}

const char *cg_pattern_kind_name(cg_pattern_kind_t kind)
{
    return kind == CG_PATTERN_EPISODIC ? "episodic" : "procedural";
}

size_t cg_store_query_len(const char *q, size_t n)
{
    return n <= CG_MEMORY_MAX_QUERY ? n : cg_utf8_cut(q, CG_MEMORY_MAX_QUERY);
}

/*
 * Length of the longest prefix of the JSON array text s[0..n) that ends
 * after a whole element and leaves room for a closing ']' within max bytes;
 * the prefix ends just after the '[' when no element fits, and is 0 when s
 * does not start with '['. Only called for n > max.
 */
static size_t ids_prefix(const char *s, size_t n, size_t max)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    if (i >= n || s[i] != '[')
        return 0;
    size_t keep = ++i;
    int depth = 1;
    bool in_str = false, esc = false;
    for (; i < n && i < max; i++) {
        char c = s[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (--depth == 0) {
                keep = i; /* the whole array fits */
                break;
            }
        } else if (c == ',' && depth == 1) {
            keep = i;
        }
    }
    return keep <= max - 1 ? keep : 0;
}

const char *cg_store_ids_text(const char *s, cg_buf_t *tmp, size_t *len)
{
    if (s == NULL) {
        *len = 2;
        return "[]";
    }
    size_t n = strlen(s);
    if (n <= CG_MEMORY_MAX_CHUNK_IDS) {
        *len = n;
        return s;
    }
    size_t keep = ids_prefix(s, n, CG_MEMORY_MAX_CHUNK_IDS);
    tmp->len = 0;
    if (keep == 0) {
        cg_buf_puts(tmp, "[]");
    } else {
        cg_buf_put(tmp, s, keep);
        cg_buf_putc(tmp, ']');
    }
    *len = tmp->len;
    return tmp->p;
}

void cg_pattern_bound(cg_pattern_t *p)
{
    if (p->query != NULL) {
        size_t n = strlen(p->query);
        size_t keep = cg_store_query_len(p->query, n);
        if (keep < n) {
            p->query[keep] = '\0';
            p->query = cg_xrealloc(p->query, keep + 1);
        }
    }
    if (p->chunk_ids != NULL && strlen(p->chunk_ids) > CG_MEMORY_MAX_CHUNK_IDS) {
        cg_buf_t tmp = {0};
        size_t n;
        const char *ids = cg_store_ids_text(p->chunk_ids, &tmp, &n);
        char *cut = cg_xstrndup(ids, n);
        cg_buf_free(&tmp);
        free(p->chunk_ids);
        p->chunk_ids = cut;
    }
}

static bool word_byte(unsigned char c)
{
    return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

size_t cg_store_next_word(const char *q, size_t n, size_t *pos, size_t *start)
{
    size_t i = *pos;
    while (i < n && !word_byte((unsigned char)q[i]))
        i++;
    *start = i;
    while (i < n && word_byte((unsigned char)q[i]))
        i++;
    *pos = i;
    return i - *start;
}

void cg_stats_add(cg_stats_t *to, const cg_stats_t *d)
{
    to->answers += d->answers;
    to->answers_skipped += d->answers_skipped;
    to->references += d->references;
    to->citations_available += d->citations_available;
    to->citations_cited += d->citations_cited;
}

bool cg_stats_zero(const cg_stats_t *s)
{
    return s->answers == 0 && s->answers_skipped == 0 && s->references == 0 &&
           s->citations_available == 0 && s->citations_cited == 0;
}

void cg_stats_json(cg_buf_t *b, const cg_stats_t *s, const char *scope)
{
    cg_buf_printf(b,
                  "{\"answers\":%llu,\"answers_skipped\":%llu,\"references\":%llu,"
                  "\"citations_available\":%llu,\"citations_cited\":%llu,\"citation_rate\":",
                  (unsigned long long)s->answers, (unsigned long long)s->answers_skipped,
                  (unsigned long long)s->references, (unsigned long long)s->citations_available,
                  (unsigned long long)s->citations_cited);
    if (s->citations_available)
        cg_buf_printf(b, "%.6g", (double)s->citations_cited / (double)s->citations_available);
    else
        cg_buf_putc(b, '0');
    cg_buf_puts(b, ",\"scope\":");
    cg_json_put_cstr(b, scope);
    cg_buf_putc(b, '}');
}

/* Appends unix seconds t as "YYYY-MM-DDTHH:MM:SSZ" (null when not representable). */
static void put_time(cg_buf_t *b, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    char s[40];
    if (gmtime_r(&tt, &tm) == NULL || strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        cg_buf_puts(b, "null");
        return;
    }
    cg_json_put_cstr(b, s);
}

void cg_store_pattern_json(cg_buf_t *b, const char *query, size_t query_len, double rate,
                           long long citations, int64_t created_at, double score)
{
    cg_buf_puts(b, "{\"query\":\"");
    cg_json_put_escaped(b, query, query_len);
    cg_buf_puts(b, "\",\"kind\":\"procedural\",\"citation_rate\":");
    cg_json_put_double(b, rate);
    cg_buf_printf(b, ",\"citations\":%lld,\"created_at\":", citations);
    put_time(b, created_at);
    cg_buf_puts(b, ",\"score\":");
    cg_json_put_double(b, score);
    cg_buf_putc(b, '}');
}

/* ---- Semantic recall ------------------------------------------------------ */

cg_candidate_t *cg_candidates_add(cg_candidates_t *cs, int64_t id, bool *fresh)
{
    for (size_t i = 0; i < cs->n; i++) {
        if (cs->c[i].id == id) {
            *fresh = false;
            return &cs->c[i];
        }
    }
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? cs->cap * 2 : 64;
        cs->c = cg_xrealloc(cs->c, cs->cap * sizeof(*cs->c));
    }
    cg_candidate_t *c = &cs->c[cs->n++];
    memset(c, 0, sizeof(*c));
    c->id = id;
    c->lexical_rank = -1;
    *fresh = true;
    return c;
}

void cg_candidates_free(cg_candidates_t *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        cg_buf_free(&cs->c[i].query);
        cg_vector_free(&cs->c[i].vec);
    }
    free(cs->c);
    memset(cs, 0, sizeof(*cs));
}

/* Which group a candidate falls in: 0 ranked by cosine, 1 a lexical match
 * without a comparable vector, 2 neither (not returned). */
static int group(const cg_candidate_t *c, const cg_vector_t *q)
{
    if (q && cg_vector_comparable(&c->vec, q))
        return 0;
    return c->lexical_rank >= 0 ? 1 : 2;
}

static int by_rank(const void *a, const void *b)
{
    const cg_candidate_t *x = a, *y = b;
    int gx = x->group, gy = y->group;
    if (gx != gy)
        return gx - gy;
    if (gx == 0 && x->cosine != y->cosine)
        return x->cosine > y->cosine ? -1 : 1;
    if (gx == 0) /* ties: the newer first */
        return x->created_at != y->created_at ? (x->created_at > y->created_at ? -1 : 1)
                                              : (x->id > y->id ? -1 : x->id < y->id);
    return x->lexical_rank - y->lexical_rank;
}

void cg_store_rank_json(cg_candidates_t *cs, const cg_recall_t *r, cg_buf_t *out)
{
    int k = r->k < 1 ? 1 : r->k > CG_STORE_MAX_RECALL ? CG_STORE_MAX_RECALL : r->k;
    const cg_vector_t *q = r->vec && r->vec->v ? r->vec : NULL;
    bool semantic = false;
    for (size_t i = 0; i < cs->n; i++) {
        cg_candidate_t *c = &cs->c[i];
        if (q && cg_vector_comparable(&c->vec, q)) {
            c->cosine = cg_vector_cosine(c->vec.v, q->v, q->dim);
            semantic = true;
        }
    }
    for (size_t i = 0; i < cs->n; i++)
        cs->c[i].group = group(&cs->c[i], semantic ? q : NULL);
    if (cs->n > 1)
        qsort(cs->c, cs->n, sizeof(*cs->c), by_rank);
    cg_buf_puts(out, "{\"patterns\":[");
    int shown = 0;
    for (size_t i = 0; i < cs->n && shown < k; i++) {
        const cg_candidate_t *c = &cs->c[i];
        int g = c->group;
        if (g == 2)
            break;
        double score = g == 0 ? c->cosine : semantic ? 0 : c->lexical;
        if (shown++ > 0)
            cg_buf_putc(out, ',');
        cg_store_pattern_json(out, c->query.p ? c->query.p : "", c->query.len, c->rate,
                              c->citations, c->created_at, score);
    }
    cg_buf_puts(out, semantic ? "],\"ranking\":\"semantic\"}" : "],\"ranking\":\"lexical\"}");
}

int64_t cg_store_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cg_store_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
