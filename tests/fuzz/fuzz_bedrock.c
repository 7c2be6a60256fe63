/*
 * libFuzzer target for the bedrock answer view (src/dialects/bedrock.c)
 * behind the whole transformer and its event-stream reader, as `citegate
 * filter --dialect bedrock` runs it.
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream answer
 * (AWS's event stream, or a Converse JSON body for the body path).
 * Byte 1 picks the variant:
 *   bits 0-1: the client's request: 0 = <source> tags (documents 0-2),
 *             1 = none, 2 = include_usage, 3 = both
 *   bits 2-4: profile: openwebui, openai, webchat, structured, off, then
 *             openwebui again
 *   bit 6:    max_doc_bytes 16 instead of 8192
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

#include "../support/dialects.h"
#include "../support/profiles.h"
#include "fuzz_events.h"
#include "fuzz_run.h"

#define OUT_FACTOR 32
#define OUT_EXTRA  (64u << 10)

static const char sources_request[] =
    "{\"model\":\"us.amazon.nova-pro-v1:0\",\"stream\":true,\"messages\":[{\"role\":\"system\","
    "\"content\":\"<source id=\\\"3\\\" name=\\\"https://a.example/x\\\">three</source>"
    "<source id=\\\"1\\\" name=\\\"one.md\\\">one</source>"
    "<source id=\\\"9\\\" name=\\\"report (v2).pdf\\\">nine</source>\"},"
    "{\"role\":\"user\",\"content\":\"what is x?\"}]%s}";

typedef struct fz_req {
    cg_request_t req;
    cg_dialect_req_t dreq;
} fz_req_t;

static fz_req_t requests[3]; /* sources, usage, sources + usage */

static void make_request(fz_req_t *r, const char *body)
{
    cg_cite_opts_t o = {8192, true};
    cg_dialect_err_t e;
    size_t n = strlen(body);
    FZ_CHECK(cg_request_parse(&r->req, body, n, &o) == 0);
    cg_dialect_in_t in = {.req = &r->req};
    FZ_CHECK(cg_dialect_request(dialect_named("bedrock"), body, n, &in, &r->dreq, &e) == 0);
}

static void init_requests(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    char body[1024];
    snprintf(body, sizeof(body), sources_request, "");
    make_request(&requests[0], body);
    FZ_CHECK(requests[0].dreq.ndocs == 3);
    make_request(&requests[1], "{\"model\":\"m\",\"stream\":true,\"stream_options\":"
                               "{\"include_usage\":true},\"messages\":[{\"role\":\"user\","
                               "\"content\":\"q\"}]}");
    FZ_CHECK(requests[1].dreq.include_usage);
    snprintf(body, sizeof(body), sources_request,
             ",\"stream_options\":{\"include_usage\":true}");
    make_request(&requests[2], body);
}

static const fz_req_t *pick_request(uint8_t flags)
{
    static const int which[4] = {0, -1, 1, 2};
    int w = which[flags & 3];
    return w < 0 ? NULL : &requests[w];
}

static void pick_cfg(cg_xform_cfg_t *cfg, uint8_t flags)
{
    static const char *const names[8] = {"openwebui", "openai",    "webchat",   "structured",
                                         "off",       "openwebui", "openwebui", "openwebui"};
    cg_xform_cfg_default(cfg, profile_named(names[(flags >> 2) & 7]));
    if (flags & 0x40)
        cfg->max_doc_bytes = 16;
}

static cg_xform_t *new_xform(const cg_xform_cfg_t *cfg, const fz_req_t *r)
{
    cg_xform_t *x = cg_xform_new(cfg, r ? &r->req : NULL);
    cg_xform_set_dialect(x, cg_dialect_view(dialect_named("bedrock")), r ? &r->dreq : NULL,
                         1700000000);
    return x;
}

/* --- The frames, walked apart from src/core/evstream.c ----------------------- */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Mends the CRCs of each message a length walk finds (fix), and says
 * whether some payload has a raw control byte. */
static bool walk_frames(uint8_t *s, size_t len, bool fix)
{
    bool raw = false;
    for (size_t pos = 0; len - pos >= 16;) {
        uint32_t total = rd32(s + pos), hlen = rd32(s + pos + 4);
        if (total < 16 || total > len - pos || (uint64_t)hlen + 16 > total)
            break;
        if (fix) {
            wr32(s + pos + 8, cg_crc32(0, s + pos, 8));
            wr32(s + pos + total - 4, cg_crc32(0, s + pos, total - 4));
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

static void check_body(const cg_xform_cfg_t *cfg, const fz_req_t *r, const uint8_t *in,
                       size_t len)
{
    cg_buf_t b = {0};
    int rc = fz_body(&b, new_xform(cfg, r), in, len);
    cg_json_t j;
    if (fz_body_object(&b, rc, in, len, &j)) {
        int choice = cg_json_get(&j, 0, "choices") + 1;
        FZ_CHECK(cg_json_is_str(&j, cg_json_get(&j, cg_json_get(&j, choice, "message"), "content")));
        FZ_CHECK(b.len <= OUT_FACTOR * len + OUT_EXTRA);
        cg_json_free(&j);
    }
    cg_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    init_requests();
    size_t len = size - FZ_HEADER;
    uint8_t *in = (uint8_t *)fz_dup(data + FZ_HEADER, len);
    bool raw_control = walk_frames(in, len, data[1] & 0x80);
    const fz_req_t *r = pick_request(data[1]);
    cg_xform_cfg_t cfg;
    pick_cfg(&cfg, data[1]);
    check_stream(&cfg, r, in, len, data[0], raw_control);
    check_body(&cfg, r, in, len);
    free(in);
    return 0;
}
