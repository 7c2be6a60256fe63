/*
 * What the targets of the SSE dialect views share (fuzz_anthropic,
 * fuzz_cohere): a view behind the whole transformer, as `citegate filter
 * --dialect NAME` runs it, fed an upstream answer.
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream answer.
 * Byte 1 picks the request, the profile and the caps (fuzz_dialect.h).
 *
 * Checks, for any input:
 *   - the answer in reads cut by the header's seed and in one read gives
 *     the client the same bytes (read boundaries are invisible);
 *   - the output is bounded by the input (a constant factor and a constant);
 *   - every client event is a JSON object or [DONE], and a valid one unless
 *     an input event already fooled the parser (raw control bytes); no line
 *     is longer than 64 KiB;
 *   - the stream ends with exactly one [DONE] or with the error event, and
 *     nothing follows either (unless profile structured let a long stream
 *     through unchanged);
 *   - cg_xform_body on the same bytes: refused and copied unchanged, or a
 *     chat completion object whose first choice has a message content string.
 * Every read is an exact-size heap copy, freed right after its output is
 * copied, so a segment pointing into an earlier read is a use after free.
 */
#ifndef CG_FUZZ_SSE_DIALECT_H
#define CG_FUZZ_SSE_DIALECT_H

#include "citegate/xform.h"

#include "fuzz_dialect.h"
#include "fuzz_events.h"
#include "fuzz_jsonv.h"
#include "fuzz_run.h"

/* Input events whose data cg_json_parse takes for an object that is not
 * valid JSON: their strings may carry what makes our chunks invalid too. */
static inline size_t fz_fooling_inputs(const uint8_t *in, size_t len)
{
    events_t e;
    read_events(&e, (const char *)in, len);
    return e.objects - e.valid;
}

static inline void fz_check_sse_stream(const char *dialect, const cg_xform_cfg_t *cfg,
                                       const fz_req_t *r, const uint8_t *in, size_t len,
                                       uint8_t seed)
{
    fz_split_t sp;
    fz_split_init(&sp, seed);
    fz_result_t split, whole;
    fz_stream(&split, fz_dialect_xform(cfg, r, dialect), in, len, &sp);
    fz_stream(&whole, fz_dialect_xform(cfg, r, dialect), in, len, NULL);
    FZ_CHECK(split.out.len == whole.out.len &&
             (whole.out.len == 0 || memcmp(split.out.p, whole.out.p, whole.out.len) == 0));
    FZ_CHECK(whole.out.len <= OUT_FACTOR * len + OUT_EXTRA);

    events_t e;
    read_events(&e, whole.out.p, whole.out.len);
    FZ_CHECK(e.others == 0);
    if (fz_fooling_inputs(in, len) == 0)
        FZ_CHECK(e.valid == e.objects);
    FZ_CHECK(e.max_line <= CG_XFORM_LINE_MAX);
    if (!whole.stats.passthrough) {
        /* One end, last: [DONE] after the answer's finish or end, else the
         * error event (the upstream's, or upstream_closed). */
        FZ_CHECK(e.done + e.errors == 1);
        FZ_CHECK(e.last_done || e.last_error);
        if (whole.stats.saw_done)
            FZ_CHECK(e.last_done);
        if (!whole.stats.saw_done && !whole.stats.saw_finish)
            FZ_CHECK(e.last_error);
    }
    cg_buf_free(&split.out);
    cg_buf_free(&whole.out);
}

/* One fuzz input for the view of `dialect`, which makes a document of
 * each of the first request's three <source> tags (anthropic, cohere). */
static inline int fz_sse_dialect_input(const char *dialect, const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    fz_init_requests(dialect, 3);
    const uint8_t *in = data + FZ_HEADER;
    size_t len = size - FZ_HEADER;
    const fz_req_t *r = fz_pick_request(data[1]);
    cg_xform_cfg_t cfg;
    fz_pick_cfg(&cfg, data[1]);
    fz_check_sse_stream(dialect, &cfg, r, in, len, data[0]);
    fz_check_dialect_body(&cfg, r, dialect, in, len);
    return 0;
}

#endif
