/*
 * fuzz_up_h2: what an HTTP/2 upstream answers, through the real shell: the
 * h2 pool (up_h2.c, h2c with prior knowledge) over a real loopback TCP
 * connection, the exchange, the transformer in the profile and dialect the
 * input picks, and h1.c writing the answer to a client (fuzz_shell.h,
 * fuzz_up.h).
 *
 * Input: byte 0 bit 0: the upstream sends no SETTINGS first (the pool waits
 * for them before it opens a stream), byte 1 the world's flags
 * (fs_configure), byte 2 the client side (fuzz_up.h), then the upstream's
 * frames as ops (fuzz_h2ops.h): SETTINGS, HEADERS with :status and fields
 * from the table below, DATA carrying the answer, RST_STREAM, GOAWAY,
 * WINDOW_UPDATE, PING, raw frames (PUSH_PROMISE, ...). A new connection the
 * pool opens gets a fresh HPACK context and SETTINGS.
 *
 * Checked:
 * - citegate's frames are well formed, its HPACK decodes, and each request
 *   carries one :method, :scheme, :authority and :path (no `.` or `..`
 *   segment), lower-case names and no connection-specific field;
 * - the client reads a strict sequence of HTTP/1.1 responses; a transformed
 *   stream ends with [DONE] or the error event, its lines are bounded, no
 *   upstream `event` member passes (fuzz_up.h);
 * - teardown leaves nothing, the pool included.
 */
#include "fuzz_h2ops.h"
#include "fuzz_up.h"

#include "io/metrics.h"

#define HEADER 3

static const char *const fields[][2] = {
    {":status", "200"}, {":status", "100"}, {":status", "103"}, {":status", "101"},
    {":status", "204"}, {":status", "304"}, {":status", "404"}, {":status", "429"},
    {":status", "500"}, {":status", "503"}, {":status", "2000"}, {":status", "x"},
    {"content-type", "text/event-stream"}, {"content-type", "text/event-stream; charset=utf-8"},
    {"content-type", "application/json"}, {"content-type", "text/plain"},
    {"content-encoding", "gzip"}, {"content-encoding", "identity"}, {"content-length", "0"},
    {"content-length", "12"}, {"x-request-id", "up-1"}, {"connection", "close"},
    {"access-control-allow-origin", "*"}, {"cache-control", "max-age=60"},
    {"x-accel-buffering", "yes"}, {"retry-after", "3"}, {"set-cookie", "a=1"},
    {":path", "/push"}, {"Upper", "x"}, {"x-empty", ""},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static const char *const bodies[] = {
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"Charge it [doc1].\"}}],\"event\":{\"type\":\"x\"}}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
    "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi "
    "[1]\"},\"finish_reason\":\"stop\"}],\"citations\":[\"https://a.example/\"]}",
    "{\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}",
    ": keep-alive\n\n",
};
#define NBODIES (sizeof(bodies) / sizeof(bodies[0]))

typedef struct drv {
    up_client_t u;
    h2ops_t ops;
    int conn_fd;      /* the connection the HPACK context belongs to */
    bool no_settings; /* byte 0 bit 0 */
} drv_t;

static void flush(void *arg);

/* A new connection: a fresh HPACK context, and the server's SETTINGS at
 * once (the pool opens streams once they came). */
static void follow_conn(drv_t *d)
{
    fs_peer_t *up = up_current(&d->u);
    int fd = up ? up->fd : -1;
    if (fd == d->conn_fd)
        return;
    d->conn_fd = fd;
    d->ops.out.len = 0; /* made for a connection that is gone */
    if (d->ops.def)
        nghttp2_hd_deflate_del(d->ops.def);
    FZ_CHECK(nghttp2_hd_deflate_new(&d->ops.def, 4096) == 0);
    if (!d->no_settings && fd >= 0) {
        fs_h2_frame(&d->ops.out, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
        flush(d);
    }
}

static void flush(void *arg)
{
    drv_t *d = arg;
    fs_peer_t *up = up_current(&d->u);
    if (up && d->ops.out.len && up->fd == d->conn_fd)
        fs_write(up, d->ops.out.p, d->ops.out.len);
    d->ops.out.len = 0;
    fs_settle(up_accept, &d->u);
}

static bool connection_specific(cg_span_t name)
{
    static const char *const names[] = {"connection", "keep-alive", "proxy-connection",
                                        "transfer-encoding", "upgrade", "host", NULL};
    for (int i = 0; names[i]; i++)
        if (cg_span_ieq(name, names[i]))
            return true;
    return false;
}

/* One request as citegate sent it (RFC 9113 §8.2-8.3). */
static void check_request(const fs_h2_stream_t *st)
{
    int method = 0, scheme = 0, authority = 0, path = 0;
    for (size_t i = 0; i < st->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&st->hdrs, i), v = cg_hdr_value(&st->hdrs, i);
        for (size_t k = 0; k < name.n; k++)
            FZ_CHECK(name.p[k] < 'A' || name.p[k] > 'Z');
        FZ_CHECK(!connection_specific(name));
        FZ_CHECK(!cg_span_eq(name, "te") || cg_span_eq(v, "trailers"));
        method += cg_span_eq(name, ":method");
        scheme += cg_span_eq(name, ":scheme");
        authority += cg_span_eq(name, ":authority");
        if (cg_span_eq(name, ":path")) {
            path++;
            const char *q = memchr(v.p, '?', v.n);
            FZ_CHECK(v.n > 0 && v.p[0] == '/');
            FZ_CHECK(!fs_dot_segment(v.p, q ? (size_t)(q - v.p) : v.n));
        }
    }
    FZ_CHECK(method == 1 && scheme == 1 && authority == 1 && path == 1);
}

static void check_requests(drv_t *d)
{
    for (size_t i = 0; i < d->u.nups; i++) {
        fs_h2_reader_t rd;
        fs_h2_reader_init(&rd, true);
        fs_h2_reader_feed(&rd, d->u.ups[i].got.p, d->u.ups[i].got.len);
        for (size_t k = 0; k < rd.n; k++)
            if (rd.v[k].head)
                check_request(&rd.v[k]);
        fs_h2_reader_free(&rd);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    fs_init();
    up_listen();
    fs_opts_t o = fs_configure(data[1]);
    cg_upstream_t *pool = cg_up_h2_new(&fs_ctx, &up_target, &fs_ctx.up, NULL);
    fs_ctx.up = pool;
    drv_t d = {.conn_fd = -2, .no_settings = data[0] & 1};
    d.ops = (h2ops_t){.fields = fields, .nfields = NFIELDS, .bodies = bodies, .nbodies = NBODIES,
                      .p = data + HEADER, .end = data + size, .max_frame = 16384,
                      .flush = flush, .arg = &d, .busy = up_accept, .busy_arg = &d.u};
    up_client_init(&d.u, data[2], &o, data + HEADER, size - HEADER);
    fs_settle(up_accept, &d.u);
    while (d.ops.p < d.ops.end) {
        follow_conn(&d);
        h2ops_step(&d.ops);
    }
    follow_conn(&d);
    flush(&d);
    up_end(&d.u, &o);
    fs_teardown(up_accept, &d.u);
    pool->ops->drain(pool);
    fs_settle(up_accept, &d.u);
    FZ_CHECK(cg_metrics->upstream_connections[CG_PROTO_LABEL_H2] == 0);
    pool->ops->free(pool);
    fs_ctx.up = NULL;

    check_requests(&d);
    up_check_client(&d.u);
    up_client_free(&d.u);
    cg_buf_free(&d.ops.out);
    if (d.ops.def)
        nghttp2_hd_deflate_del(d.ops.def);
    return 0;
}
