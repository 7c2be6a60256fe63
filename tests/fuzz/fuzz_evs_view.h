/*
 * The libFuzzer targets of the views that read AWS's event stream
 * (fuzz_bedrock.c, fuzz_bedrock_kb.c): one input, its checks, for the
 * dialect the target names. The input and the checks are fuzz_bedrock.c's
 * (its comment says them); only the view differs.
 */
#ifndef CG_FUZZ_EVS_VIEW_H
#define CG_FUZZ_EVS_VIEW_H

#include "citegate/evstream.h"
#include "citegate/xform.h"

#include "fuzz_dialect.h"
#include "fuzz_events.h"
#include "fuzz_run.h"

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

static void check_stream(const char *dialect, const cg_xform_cfg_t *cfg, const fz_req_t *r,
                         const uint8_t *in, size_t len, uint8_t seed, bool raw_control)
{
    fz_split_t sp;
    fz_split_init(&sp, seed);
    fz_result_t split, whole;
    fz_stream(&split, fz_dialect_xform(cfg, r, dialect), in, len, &sp);
    fz_stream(&whole, fz_dialect_xform(cfg, r, dialect), in, len, NULL);
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

/* One input for the view of `dialect`, whose <source> request makes `docs`
 * documents. */
static int fz_evs_view_one(const uint8_t *data, size_t size, const char *dialect, size_t docs)
{
    if (size < FZ_HEADER)
        return 0;
    fz_init_requests(dialect, docs);
    size_t len = size - FZ_HEADER;
    uint8_t *in = (uint8_t *)fz_dup(data + FZ_HEADER, len);
    bool raw_control = walk_frames(in, len, data[1] & 0x80);
    const fz_req_t *r = fz_pick_request(data[1]);
    cg_xform_cfg_t cfg;
    fz_pick_cfg(&cfg, data[1]);
    check_stream(dialect, &cfg, r, in, len, data[0], raw_control);
    fz_check_dialect_body(&cfg, r, dialect, in, len);
    free(in);
    return 0;
}

#endif
