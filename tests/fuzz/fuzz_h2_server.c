/*
 * fuzz_h2_server: what one HTTP/2 client sends, through the real shell
 * (client.c's preface sniffing, h2.c on nghttp2, exchange.c, the
 * transformer) to a scripted upstream (fuzz_shell.h).
 *
 * Input: byte 0 unused (the ops cut the writes), byte 1 the world's flags
 * (fs_configure), byte 2 bit 0: the driver sends no connection preface
 * (the ops may: raw bytes; else the bytes go to HTTP/1.1), bit 1: nor a
 * SETTINGS frame after it; then the client's frames as ops (fuzz_h2ops.h).
 *
 * Checked after the ops (and the driver opening every window wide):
 * - the shell's frames are well formed, its HPACK decodes, its header
 *   blocks are whole (fs_h2_reader_t);
 * - on a connection the shell keeps open nothing is in flight and every
 *   answer that began has ended (END_STREAM or RST_STREAM);
 * - a streamed 200 carries SSE whose data lines are JSON objects or [DONE],
 *   lines of at most 64 KiB, and no upstream `event` member (but profile off);
 * - what reaches the upstream is one clean request (fs_check_upreq);
 * - teardown leaves nothing (fs_teardown, LeakSanitizer).
 */
#include "fuzz_h2ops.h"

#define HEADER 3

static const char *const fields[][2] = {
    {":method", "POST"}, {":method", "GET"}, {":method", "HEAD"}, {":method", "OPTIONS"},
    {":method", "CONNECT"}, {":method", "PURGE"}, {":method", "G E T"},
    {":path", "/v1/chat/completions"}, {":path", "/openai/v1/chat/completions?x=1"},
    {":path", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-06-01"},
    {":path", "/v1/models"}, {":path", "/v1/%2E%2e/admin"}, {":path", "*"}, {":path", ""},
    {":scheme", "https"}, {":scheme", "http"}, {":authority", "citegate.test"},
    {":protocol", "websocket"}, {":status", "200"},
    {"content-type", "application/json"}, {"content-length", "10"},
    {"content-length", "99999999999"}, {"content-length", "x"},
    {"x-citegate-profile", "openai"}, {"x-citegate-profile", "webchat"},
    {"x-citegate-profile", "markdown"}, {"x-citegate-profile", "structured"},
    {"x-citegate-profile", "off"}, {"x-citegate-profile", "nope"},
    {"origin", "https://app.example"}, {"access-control-request-method", "POST"},
    {"access-control-request-headers", "content-type"}, {"x-request-id", "req-1"},
    {"te", "trailers"}, {"te", "gzip"}, {"connection", "close"}, {"host", "elsewhere"},
    {"expect", "100-continue"}, {"accept-encoding", "gzip"},
    {"authorization", "Bearer sk-test"}, {"api-key", "k"}, {"cookie", "a=1"},
    {"Upper-Case", "no"}, {"x-empty", ""},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static const char *const bodies[] = {
    "{\"model\":\"gpt-4o\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"How do "
    "I charge the X100?\"}]}",
    "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
    "{\"stream\":true,\"stream_options\":{\"include_usage\":true},\"messages\":[{\"role\":"
    "\"system\",\"content\":\"<source id=\\\"1\\\" name=\\\"https://a.example/x\\\">text</"
    "source>\"},{\"role\":\"user\",\"content\":\"q\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}],\"stream\":true}",
    "{not json",
    "",
};
#define NBODIES (sizeof(bodies) / sizeof(bodies[0]))

/* What the driver knows of the requests it sent, by stream. */
typedef struct sent {
    uint32_t id;
    bool profile_off, chat;
} sent_t;

typedef struct drv {
    h2ops_t ops;
    fs_h2_reader_t rd;
    fs_peer_t client;
    sent_t sent[16];
    size_t nsent;
    cg_buf_t wrote; /* every byte written: is the last frame whole? */
} drv_t;

/* The stream's first header block is its request; later ones are
 * trailers (or refused). */
static void note_request(void *arg, uint32_t id, const nghttp2_nv *nv, size_t n)
{
    drv_t *d = arg;
    for (size_t i = 0; i < d->nsent; i++)
        if (d->sent[i].id == id)
            return;
    if (d->nsent == 16)
        return;
    sent_t *s = &d->sent[d->nsent++];
    memset(s, 0, sizeof(*s));
    s->id = id;
    for (size_t i = n; i-- > 0;) { /* the first of a name wins, as in the shell */
        cg_span_t name = cg_span((const char *)nv[i].name, nv[i].namelen);
        cg_span_t v = cg_span((const char *)nv[i].value, nv[i].valuelen);
        if (cg_span_eq(name, "x-citegate-profile"))
            s->profile_off = cg_span_eq(v, "off");
        if (cg_span_eq(name, ":path"))
            s->chat = v.n > 17 && memcmp(v.p + v.n - 17, "/chat/completions", 17) == 0;
    }
}

static const sent_t *sent_of(const drv_t *d, int32_t id)
{
    for (size_t i = 0; i < d->nsent; i++)
        if ((int32_t)d->sent[i].id == id)
            return &d->sent[i];
    return NULL;
}

static void flush(void *arg)
{
    drv_t *d = arg;
    if (d->ops.out.len && fs_write(&d->client, d->ops.out.p, d->ops.out.len))
        cg_buf_put(&d->wrote, d->ops.out.p, d->ops.out.len);
    d->ops.out.len = 0;
    fs_settle(NULL, NULL);
}

/* Did the client speak h2 (the shell sniffs the preface), and end with a
 * whole frame (else what it writes next is the rest of that frame)? */
static bool spoke_h2(const drv_t *d, bool *whole)
{
    const char *p = d->wrote.p;
    size_t n = d->wrote.len, at = 24;
    if (n < 24 || memcmp(p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) != 0)
        return false;
    while (at + 9 <= n)
        at += 9 + ((size_t)(uint8_t)p[at] << 16 | (size_t)(uint8_t)p[at + 1] << 8 | (uint8_t)p[at + 2]);
    *whole = at == n;
    return true;
}

/* The client opens every window wide, so nothing waits on flow control. */
static void open_windows(drv_t *d)
{
    static const uint8_t wide[4] = {0x40, 0, 0, 0};
    fs_h2_frame(&d->ops.out, NGHTTP2_WINDOW_UPDATE, 0, 0, wide, 4);
    for (size_t i = 0; i < d->rd.n; i++)
        if (d->rd.v[i].head && !d->rd.v[i].ended && !d->rd.v[i].reset)
            fs_h2_frame(&d->ops.out, NGHTTP2_WINDOW_UPDATE, 0, (uint32_t)d->rd.v[i].id, wide, 4);
    flush(d);
}

static void check_answers(drv_t *d)
{
    for (size_t i = 0; i < d->rd.n; i++) {
        fs_h2_stream_t *st = &d->rd.v[i];
        const sent_t *s = sent_of(d, st->id);
        if (st->ended && st->a.sse && st->a.status == 200)
            fs_check_sse(&st->a, NULL, 0, true, s == NULL || s->profile_off || !s->chat, NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    fs_init();
    static cg_upstream_t *up;
    if (up == NULL)
        fs_ctx.up = up = fs_scripted_new();
    fs_opts_t opts = fs_configure(data[1]);
    drv_t d = {.ops = {.fields = fields, .nfields = NFIELDS, .bodies = bodies, .nbodies = NBODIES,
                       .p = data + HEADER, .end = data + size, .max_frame = 16384,
                       .on_headers = note_request, .flush = flush}};
    d.ops.arg = &d;
    d.ops.rd = &d.rd;
    FZ_CHECK(nghttp2_hd_deflate_new(&d.ops.def, 4096) == 0);
    fs_h2_reader_init(&d.rd, false);
    fs_client(&d.client, false);
    if (!(data[2] & 1))
        cg_buf_puts(&d.ops.out, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    if (!(data[2] & 2))
        fs_h2_frame(&d.ops.out, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    while (d.ops.p < d.ops.end)
        h2ops_step(&d.ops);
    flush(&d);
    bool whole = false, h2 = spoke_h2(&d, &whole);
    size_t seen = 0;
    if (h2) {
        fs_h2_reader_feed(&d.rd, d.client.got.p, d.client.got.len);
        seen = d.client.got.len;
        d.rd.max_frame = d.ops.max_frame;
        open_windows(&d);
        if (d.client.got.len > seen)
            fs_h2_reader_feed(&d.rd, d.client.got.p + seen, d.client.got.len - seen);
        seen = d.client.got.len;
        for (size_t i = 0; getenv("FS_DEBUG") && i < d.rd.n; i++)
            fprintf(stderr, "stream %d: %d%s%s, %zu bytes; active %zu\n", d.rd.v[i].id,
                    d.rd.v[i].a.status, d.rd.v[i].ended ? " ended" : "",
                    d.rd.v[i].reset ? " reset" : "", d.rd.v[i].a.body.len, fs_ctx.active);
        if (!d.client.eof && whole) {
            /* Open and settled: nothing in flight, every answer ended. */
            FZ_CHECK(fs_ctx.active == 0);
            for (size_t i = 0; i < d.rd.n; i++)
                FZ_CHECK(!d.rd.v[i].head || d.rd.v[i].ended || d.rd.v[i].reset);
        }
        check_answers(&d);
    }
    fs_end(&d.client, &opts, NULL, NULL);
    fs_teardown(NULL, NULL);
    if (h2 && d.client.got.len > seen)
        fs_h2_reader_feed(&d.rd, d.client.got.p + seen, d.client.got.len - seen);
    cg_buf_free(&d.client.got);
    cg_buf_free(&d.ops.out);
    cg_buf_free(&d.wrote);
    fs_h2_reader_free(&d.rd);
    nghttp2_hd_deflate_del(d.ops.def);
    return 0;
}
