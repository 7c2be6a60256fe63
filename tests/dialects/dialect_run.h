/*
 * Test support for the dialect views: a client request as the request side
 * translates it (for doc_ids and include_usage), and streams and bodies run
 * through a transformer that reads an upstream of that dialect, as
 * `citegate filter --dialect` and the daemon do; and such a stream as a
 * case of the split properties (tests/support/split.h).
 */
#ifndef CG_TEST_DIALECT_RUN_H
#define CG_TEST_DIALECT_RUN_H

#include "citegate/dialect.h"
#include "dialects.h"
#include "citegate/xform.h"
#include "profiles.h"
#include "split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIALECT_CREATED 1700000000

typedef struct dialect_case {
    const cg_dialect_t *d;
    cg_request_t req;
    cg_dialect_req_t dreq;
    bool has_req; /* false: no request (NULL), as `filter` without --request */
} dialect_case_t;

/* Reads the client's request body[0..n) (NULL: none); aborts when the
 * request side refuses it. */
static inline void dialect_case_init(dialect_case_t *c, const cg_dialect_t *d, const char *body,
                                     size_t n)
{
    memset(c, 0, sizeof(*c));
    c->d = d;
    if (body == NULL)
        return;
    cg_cite_opts_t o = {8192, true};
    cg_dialect_err_t e;
    if (cg_request_parse(&c->req, body, n, &o) != 0 ||
        cg_dialect_request(d, body, n, &(cg_dialect_in_t){.req = &c->req}, &c->dreq, &e) != 0) {
        fprintf(stderr, "test request refused: %.*s\n", (int)n, body);
        abort();
    }
    c->has_req = true;
}

/* Ends b with a NUL, not counted, so that b->p is a C string. */
static inline void dialect_nul(cg_buf_t *b)
{
    cg_buf_putc(b, '\0');
    b->len--;
}

/* The request side of dialect `name` on the client's body, with what else
 * `in` carries (its req, the parse of body, is set here; aborts when that
 * parse fails): returns cg_dialect_request's result, and when it is 0 the
 * upstream path and body in *path and *out (emptied first; NUL-terminated,
 * not counted). */
static inline int dialect_translate(const char *name, const char *body, cg_dialect_in_t in,
                                    cg_buf_t *path, cg_buf_t *out, cg_dialect_err_t *err)
{
    size_t n = strlen(body);
    cg_request_t r;
    cg_cite_opts_t o = {8192, true};
    if (cg_request_parse(&r, body, n, &o) != 0) {
        fprintf(stderr, "test request unreadable: %s\n", body);
        abort();
    }
    in.req = &r;
    const cg_dialect_t *d = dialect_named(name);
    cg_dialect_req_t dreq;
    int rc = cg_dialect_request(d, body, n, &in, &dreq, err);
    path->len = out->len = 0;
    if (rc == 0) {
        cg_dialect_path(d, &dreq, path);
        cg_buf_put(out, dreq.body.p, dreq.body.len);
        cg_dialect_req_free(&dreq);
    }
    dialect_nul(path);
    dialect_nul(out);
    cg_request_free(&r);
    return rc;
}

static inline void dialect_case_free(dialect_case_t *c)
{
    cg_request_free(&c->req);
    cg_dialect_req_free(&c->dreq);
}

static inline cg_xform_t *dialect_xform(const cg_xform_cfg_t *cfg, const dialect_case_t *c)
{
    cg_xform_t *x = cg_xform_new(cfg, c->has_req ? &c->req : NULL);
    cg_xform_set_dialect(x, cg_dialect_view(c->d), c->has_req ? &c->dreq : NULL, DIALECT_CREATED);
    return x;
}

static inline void dialect_collect(cg_buf_t *b, const cg_out_t *o)
{
    for (size_t i = 0; i < o->nseg; i++)
        cg_buf_put(b, o->seg[i].p, o->seg[i].n);
}

/* Streams in[0..n) in reads of the given sizes (cycled; NULL: one read),
 * each a private heap copy freed after use (ASan sees a span that outlives
 * its read), then ends at EOF. The client's bytes go to *out (NUL-terminated,
 * not counted); stats, when not NULL, gets the transformer's. */
static inline void dialect_stream(const cg_xform_cfg_t *cfg, const dialect_case_t *c,
                                  const char *in, size_t n, const size_t *sizes, size_t nsizes,
                                  cg_buf_t *out, cg_xform_stats_t *stats)
{
    cg_xform_t *x = dialect_xform(cfg, c);
    cg_out_t o = {0};
    out->len = 0;
    for (size_t pos = 0, k = 0; pos < n;) {
        size_t step = sizes ? sizes[k++ % nsizes] : n;
        if (step == 0 || step > n - pos)
            step = n - pos;
        char *copy = cg_xmalloc(step);
        memcpy(copy, in + pos, step);
        cg_xform_feed(x, copy, step, &o);
        dialect_collect(out, &o);
        free(copy);
        pos += step;
    }
    cg_xform_finish(x, CG_END_EOF, &o);
    dialect_collect(out, &o);
    dialect_nul(out);
    if (stats)
        *stats = *cg_xform_stats(x);
    cg_out_free(&o);
    cg_xform_free(x);
}

/* A non-streaming body; returns cg_xform_body's result. */
static inline int dialect_body(const cg_xform_cfg_t *cfg, const dialect_case_t *c, const char *in,
                               size_t n, cg_buf_t *out)
{
    cg_xform_t *x = dialect_xform(cfg, c);
    cg_out_t o = {0};
    out->len = 0;
    int rc = cg_xform_body(x, in, n, &o);
    dialect_collect(out, &o);
    dialect_nul(out);
    cg_out_free(&o);
    cg_xform_free(x);
    return rc;
}

/* A stream of a dialect as a split case: every split run must give the
 * whole run's bytes. */
typedef struct dialect_split {
    const cg_xform_cfg_t *cfg;
    const dialect_case_t *c;
    const char *what; /* names the case in a failure */
} dialect_split_t;

static inline void dialect_split_run(const split_case_t *sc, const size_t *sizes, size_t nsizes,
                                     cg_buf_t *out)
{
    const dialect_split_t *ds = sc->ctx;
    dialect_stream(ds->cfg, ds->c, sc->in, sc->n, sizes, nsizes, out, NULL);
}

static inline void dialect_split_check(const split_case_t *sc, const cg_buf_t *whole,
                                       const cg_buf_t *got, size_t k, const char *how)
{
    const dialect_split_t *ds = sc->ctx;
    split_same_bytes(ds->what, whole, got, k, how);
}

/* The split case of in[0..n) as ds says. */
static inline split_case_t dialect_split_case(const dialect_split_t *ds, const char *in, size_t n)
{
    return (split_case_t){in, n, dialect_split_run, dialect_split_check, (void *)ds};
}

/* Stream in[0..n) of dialect `name` (request: the client's body, or NULL)
 * in profile `profile`, in one read, into *out; stats as dialect_stream. */
static inline void dialect_run(const char *name, const char *profile, const char *request,
                               const char *in, size_t n, cg_buf_t *out, cg_xform_stats_t *stats)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named(name), request, request ? strlen(request) : 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    dialect_stream(&cfg, &c, in, n, NULL, 0, out, stats);
    dialect_case_free(&c);
}

/* Stream in[0..n) of dialect `name` in each of the profiles, cut at every
 * point of split.h (profile k with phase k) and in `random` random
 * patterns (*rng's): every run gives the client the bytes of one read. */
static inline void dialect_every_split(const char *name, const char *request, const char *in,
                                       size_t n, const char *const *profiles, size_t nprofiles,
                                       size_t random, uint64_t *rng)
{
    for (size_t p = 0; p < nprofiles; p++) {
        dialect_case_t c;
        dialect_case_init(&c, dialect_named(name), request, request ? strlen(request) : 0);
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named(profiles[p]));
        cg_buf_t whole = {0};
        dialect_stream(&cfg, &c, in, n, NULL, 0, &whole, NULL);
        dialect_split_t ds = {&cfg, &c, profiles[p]};
        split_case_t sc = dialect_split_case(&ds, in, n);
        split_points_t sp;
        split_points_init(&sp, in, n, p);
        split_every(&sc, &sp, &whole);
        split_points_free(&sp);
        split_random(&sc, random, rng, &whole);
        cg_buf_free(&whole);
        dialect_case_free(&c);
    }
}

#endif
