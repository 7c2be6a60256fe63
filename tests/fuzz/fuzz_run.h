/*
 * Running a transformer in the fuzz targets (fuzz_xform and the dialect
 * views): every read an isolated heap copy, so a span kept past its call
 * is an ASan report, and every output checked as it is collected.
 */
#ifndef CG_FUZZ_RUN_H
#define CG_FUZZ_RUN_H

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

/* Streams in[0..len) through x in reads cut by sp (NULL: one read), ends
 * at EOF and frees x. */
static inline void fz_stream(fz_result_t *res, cg_xform_t *x, const uint8_t *in, size_t len,
                             fz_split_t *sp)
{
    memset(res, 0, sizeof(*res));
    cg_out_t out = {0};
    size_t off = 0;
    do {
        size_t n = sp ? fz_split_next(sp, len - off) : len - off;
        char *read = fz_dup(in + off, n);
        FZ_CHECK(cg_xform_feed(x, read, n, &out) == 0);
        fz_collect(&res->out, &out);
        free(read);
        off += n;
    } while (off < len);
    FZ_CHECK(cg_xform_finish(x, CG_END_EOF, &out) == 0);
    fz_collect(&res->out, &out);
    res->stats = *cg_xform_stats(x);
    cg_out_free(&out);
    cg_xform_free(x);
}

/* in[0..len) as a non-streaming body through x, which it frees; the output
 * goes to *b. Returns cg_xform_body's result. */
static inline int fz_body(cg_buf_t *b, cg_xform_t *x, const uint8_t *in, size_t len)
{
    cg_out_t out = {0};
    char *body = fz_dup(in, len);
    int rc = cg_xform_body(x, body, len, &out);
    fz_collect(b, &out);
    free(body);
    cg_out_free(&out);
    cg_xform_free(x);
    return rc;
}

#endif
