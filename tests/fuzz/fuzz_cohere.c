/*
 * libFuzzer target for the cohere answer view (src/dialects/cohere.c)
 * behind the whole transformer, as `citegate filter --dialect cohere` runs
 * it: Cohere v2 Chat streams (citation-start offsets in characters, a
 * `citations` object of any shape, sources of any shape) and bodies (their
 * citations inserted at character offsets). Input, variants and checks:
 * fuzz_sse_dialect.h.
 *
 * One check of its own: a citation-start whose sources the stream has
 * cited before is read without a parse, and the stream run again with
 * that path switched off must give the client the same bytes and counts.
 */
#include "dialects/view.h"
#include "fuzz_sse_dialect.h"

static void check_fast_path(const uint8_t *data, size_t size)
{
    const uint8_t *in = data + FZ_HEADER;
    size_t len = size - FZ_HEADER;
    const fz_req_t *r = fz_pick_request(data[1]);
    cg_xform_cfg_t cfg;
    fz_pick_cfg(&cfg, data[1]);
    fz_result_t fast, full;
    fz_stream(&fast, fz_dialect_xform(&cfg, r, "cohere"), in, len, NULL);
    cg__cohere_fast_off = true;
    fz_stream(&full, fz_dialect_xform(&cfg, r, "cohere"), in, len, NULL);
    cg__cohere_fast_off = false;
    FZ_CHECK(fast.out.len == full.out.len &&
             (full.out.len == 0 || memcmp(fast.out.p, full.out.p, full.out.len) == 0));
    FZ_CHECK(fast.stats.malformed == full.stats.malformed &&
             fast.stats.events_out == full.stats.events_out);
    cg_buf_free(&fast.out);
    cg_buf_free(&full.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fz_sse_dialect_input("cohere", data, size) == 0 && size >= FZ_HEADER)
        check_fast_path(data, size);
    return 0;
}
