/*
 * libFuzzer target for the bedrock answer view (src/dialects/bedrock.c)
 * behind the whole transformer and its event-stream reader, as `citegate
 * filter --dialect bedrock` runs it.
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream answer
 * (AWS's event stream, or a Converse JSON body for the body path).
 * Byte 1 picks the variant: bits 0-6 the request, the profile and the
 * caps (fuzz_dialect.h), and
 *   bit 7:    mend both CRCs of every message a length walk finds, so that
 *             mutations reach the headers and JSON payloads behind them
 *
 * Checks, for any input:
 *   - the answer in reads cut by the header's seed and in one read gives
 *     the client the same bytes;
 *   - the output is bounded by the input (a constant factor and a constant);
 *   - every client event is a JSON object or [DONE], a valid one unless a
 *     payload has a raw control byte (which jsmn lets into a string); no line
 *     is longer than 64 KiB;
 *   - the stream ends with exactly one [DONE] or the error event, last; a
 *     framing error always ends it with an error event;
 *   - cg_xform_body on the same bytes: refused and copied unchanged, or a
 *     chat completion whose first choice has a message content string.
 */
#include "citegate/evstream.h"
#include "citegate/xform.h"

#include "fuzz_dialect.h"
#include "fuzz_events.h"
#include "fuzz_run.h"

static cg_xform_t *new_xform(const cg_xform_cfg_t *cfg, const fz_req_t *r)
{
    return fz_dialect_xform(cfg, r, "bedrock");
}

/* --- The frames, walked apart from src/core/evstream.c ----------------------- */

/* Mends the CRCs of each message a length walk finds (fix), and says
 * whether some payload has a raw control byte. */
static bool walk_frames(uint8_t *s, size_t len, bool fix)
{
    bool raw = false;
    for (size_t pos = 0; len - pos >= 16;) {
        uint32_t total = fz_be32(s + pos), hlen = fz_be32(s + pos + 4);
        if (total < 16 || total > len - pos || (uint64_t)hlen + 16 > total)
            break;
        if (fix) {
            fz_put_be32(s + pos + 8, cg_crc32(0, s + pos, 8));
            fz_put_be32(s + pos + total - 4, cg_crc32(0, s + pos, total - 4));
        }
        for (size_t i = pos + 12 + hlen; i < pos + total - 4; i++)
            raw |= s[i] < 0x20;
        pos += total;
    }
    return raw;
}

/* --- Checks ------------------------------------------------------------------ */

static void check_stream(const cg_xform_cfg_t *cfg, const fz_req_t *r, const uint8_t *in,
                         size_t len, uint8_t seed, bool raw_control)
{
    fz_split_t sp;
    fz_split_init(&sp, seed);
    fz_result_t split, whole;
    fz_stream(&split, new_xform(cfg, r), in, len, &sp);
    fz_stream(&whole, new_xform(cfg, r), in, len, NULL);
    FZ_CHECK(split.out.len == whole.out.len &&
             (whole.out.len == 0 || memcmp(split.out.p, whole.out.p, whole.out.len) == 0));
    FZ_CHECK(split.stats.framing_error == whole.stats.framing_error);
    FZ_CHECK(whole.out.len <= OUT_FACTOR * len + OUT_EXTRA);

    events_t e;
    read_events(&e, whole.out.p, whole.out.len);
    FZ_CHECK(e.others == 0);
    if (!raw_control)
        FZ_CHECK(e.valid == e.objects);
    FZ_CHECK(e.max_line <= CG_XFORM_LINE_MAX);
    FZ_CHECK(e.done + e.errors == 1);
    FZ_CHECK(e.last_done || e.last_error);
    if (whole.stats.framing_error) /* that error, or the upstream's own that came before */
        FZ_CHECK(e.last_error);
    cg_buf_free(&split.out);
    cg_buf_free(&whole.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    fz_init_requests("bedrock");
    size_t len = size - FZ_HEADER;
    uint8_t *in = (uint8_t *)fz_dup(data + FZ_HEADER, len);
    bool raw_control = walk_frames(in, len, data[1] & 0x80);
    const fz_req_t *r = fz_pick_request(data[1]);
    cg_xform_cfg_t cfg;
    fz_pick_cfg(&cfg, data[1]);
    check_stream(&cfg, r, in, len, data[0], raw_control);
    fz_check_dialect_body(&cfg, r, "bedrock", in, len);
    free(in);
    return 0;
}
