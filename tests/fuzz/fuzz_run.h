/*
 * Running a transformer in the fuzz targets (fuzz_xform and the dialect
 * views): every read an isolated heap copy, so a span kept past its call
 * is an ASan report, and every output checked as it is collected.
 */
#ifndef CG_FUZZ_RUN_H
#define CG_FUZZ_RUN_H

#include "citegate/json.h"
#include "citegate/xform.h"
#include "fuzz_common.h"

typedef struct fz_result {
    cg_buf_t out;
    cg_xform_stats_t stats;
} fz_result_t;

/* Appends one call's output; segments are only valid until the next call. */
static inline void fz_collect(cg_buf_t *b, const cg_out_t *o)
{
    size_t before = b->len;
    for (size_t i = 0; i < o->nseg; i++) {
        FZ_CHECK(o->seg[i].p != NULL || o->seg[i].n == 0);
        cg_buf_put(b, o->seg[i].p, o->seg[i].n);
    }
    FZ_CHECK(b->len - before == cg_out_len(o));
}

/* Every call of every input writes to this one output, as every stream of
 * a worker does: what a call leaves in it (arena, borrowed tokens) must
 * never show in another's output. It lives as long as the process. */
static cg_out_t fz_worker_out;

/* Streams in[0..len) through x in reads cut by sp (NULL: one read), ends
 * at EOF and frees x. */
static inline void fz_stream(fz_result_t *res, cg_xform_t *x, const uint8_t *in, size_t len,
                             fz_split_t *sp)
{
    memset(res, 0, sizeof(*res));
    cg_out_t *out = &fz_worker_out;
    size_t off = 0;
    do {
        size_t n = sp ? fz_split_next(sp, len - off) : len - off;
        char *read = fz_dup(in + off, n);
        FZ_CHECK(cg_xform_feed(x, read, n, out) == 0);
        fz_collect(&res->out, out);
        free(read);
        off += n;
    } while (off < len);
    FZ_CHECK(cg_xform_finish(x, CG_END_EOF, out) == 0);
    fz_collect(&res->out, out);
    res->stats = *cg_xform_stats(x);
    cg_xform_free(x);
}

/* in[0..len) as a non-streaming body through x, which it frees; the output
 * goes to *b. Returns cg_xform_body's result. */
static inline int fz_body(cg_buf_t *b, cg_xform_t *x, const uint8_t *in, size_t len)
{
    char *body = fz_dup(in, len);
    int rc = cg_xform_body(x, body, len, &fz_worker_out);
    fz_collect(b, &fz_worker_out);
    free(body);
    cg_xform_free(x);
    return rc;
}

/* cg_xform_body's contract on its output b: refused (rc -1), the bytes as
 * they came; else one JSON object, left parsed in *j (free it) for the
 * caller's own checks, and true. */
static inline bool fz_body_object(const cg_buf_t *b, int rc, const uint8_t *in, size_t len,
                                  cg_json_t *j)
{
    FZ_CHECK(rc == 0 || rc == -1);
    if (rc < 0) {
        FZ_CHECK(b->len == len && (len == 0 || memcmp(b->p, in, len) == 0));
        return false;
    }
    cg_json_init(j, 1u << 20);
    FZ_CHECK(cg_json_parse(j, b->p, b->len) == CG_JSON_OK && j->tok[0].type == JSMN_OBJECT);
    return true;
}

#endif
