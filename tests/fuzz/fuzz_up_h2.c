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
 *   stream ends with [DONE] or SPEC §6's error event (its JSON shape), its
 *   lines are bounded, no upstream `event` member passes (fuzz_up.h);
 * - the upstream's first final answer, read off the first connection by an
 *   nghttp2 client session of the driver's own (below): when it is whole,
 *   the client's first answer is whole and has its status (or the 502 of a
 *   head citegate refuses), and, forwarded, its body is the DATA payloads
 *   byte for byte (none after a 204 or 304; fuzz_up.h);
 * - teardown leaves nothing, the pool included.
 */
#include "fuzz_h2ops.h"
#include "fuzz_up.h"

#include "io/metrics.h"

#include <strings.h>

#define HEADER 3

static const char *const fields[][2] = {
    {":status", "200"}, {":status", "100"}, {":status", "103"}, {":status", "101"},
    {":status", "204"}, {":status", "304"}, {":status", "404"}, {":status", "429"},
    {":status", "500"}, {":status", "503"}, {":status", "2000"}, {":status", "x"},
    {"content-type", "text/event-stream"}, {"content-type", "text/event-stream; charset=utf-8"},
    {"content-type", "application/json"}, {"content-type", "text/plain"},
    {"content-type", "application/vnd.amazon.eventstream"},
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

/* --- the upstream's first final answer, as citegate's nghttp2 reads it ---------------- */

/*
 * What was written to the first connection goes, write by write, to an
 * nghttp2 client session of the driver's own, made as up_h2.c makes its own
 * (the same library, options, SETTINGS and connection window; the same
 * callbacks' verdicts on the answer: :status, the field list of
 * CG_MAX_HEADER_BYTES, 1xx other than 100/103 refused, END_STREAM after the
 * final head; each window given back as data comes, as citegate does while
 * its client reads). The mirror opens the request's stream once citegate's
 * HEADERS came out, so a frame meets the stream in the state it met in
 * citegate. Its verdict on that stream: whole (status and DATA payloads
 * until END_STREAM), refused (the client gets a 502), or unknown, and
 * unknown whenever citegate's side may differ:
 * - the stream opened on a write that held frames other than SETTINGS and
 *   PING (citegate reads a write in slices, and opens streams between them);
 * - citegate reset the stream (a deadline, its client gone) or ended the
 *   connection before the answer's end;
 * - a client stalled (a paused stream's window reopens later than the
 *   mirror's) or a write to citegate failed, before or during the write
 *   that brought the end;
 * - the stream closed first (RST_STREAM, GOAWAY beyond it, a malformed
 *   message, a connection error: cut, or sent again elsewhere).
 * Its request's X-Request-Id names the client answer it is checked against.
 */
#define UP_H2_CONN_WINDOW (16 << 20) /* up_h2.c's CONN_WINDOW */

typedef struct mirror {
    nghttp2_session *s;
    fs_h2_reader_t cg; /* citegate's frames on the first connection */
    size_t cg_read;    /* bytes of them read */
    int32_t sid;       /* the first request's stream, once citegate sent it */
    char rid[64];
    int status;
    bool head_done, ended, refused, unknown;
    const char *why; /* unknown: the first reason (FS_DEBUG prints it) */
    bool sse, encoded;
    bool evstream; /* the dialect reads AWS's event stream */
    unsigned writes, verdict_write; /* writes fed; the one that brought ended or refused */
    uint64_t stalls;                /* cg_metrics->client_stalls at the last look */
    cg_hdrs_t hdrs;
    cg_buf_t body;
    /* The frames of what is written, split as slice_end does. */
    size_t frame_left;
    uint8_t head[9], head_have;
    bool other; /* the last write held a frame other than SETTINGS or PING, or a cut one */
} mirror_t;

static bool mi_over(const mirror_t *m)
{
    return m->ended || m->refused || m->unknown;
}

static void mi_unknown(mirror_t *m, const char *why)
{
    if (!m->unknown)
        m->why = why;
    m->unknown = true;
}

static void mi_refuse(nghttp2_session *s, mirror_t *m)
{
    m->refused = true;
    m->verdict_write = m->writes;
    nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, m->sid, NGHTTP2_PROTOCOL_ERROR);
}

static int mi_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    mirror_t *m = ud;
    if (mi_over(m) || f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != m->sid || m->head_done)
        return 0;
    if (nl == 7 && memcmp(name, ":status", 7) == 0) {
        m->status = atoi((const char *)value);
        cg_hdrs_reset(&m->hdrs);
        return 0;
    }
    if (cg_hdrs_add(&m->hdrs, (const char *)name, nl, (const char *)value, vl) != 0)
        mi_refuse(s, m);
    return 0;
}

static int mi_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    mirror_t *m = ud;
    if (mi_over(m) || m->sid == 0)
        return 0;
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.last_stream_id < m->sid) {
        mi_unknown(m, "GOAWAY below the stream: sent again elsewhere, or cut");
        return 0;
    }
    if (f->hd.stream_id != m->sid || (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA))
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && !m->head_done && m->status >= 100 && m->status < 200 &&
        m->status != 100 && m->status != 103) {
        mi_refuse(s, m);
        return 0;
    }
    if (f->hd.type == NGHTTP2_HEADERS && m->status >= 200 && !m->head_done) {
        m->head_done = true;
        cg_span_t ct = cg_hdrs_get(&m->hdrs, "content-type");
        cg_span_t ce = cg_hdrs_get(&m->hdrs, "content-encoding");
        m->sse = up_stream_type(m->evstream, ct);
        m->encoded = ce.p && !cg_span_ieq(ce, "identity");
    }
    if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && m->head_done) {
        m->ended = true;
        m->verdict_write = m->writes;
    }
    return 0;
}

static int mi_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    (void)flags;
    mirror_t *m = ud;
    nghttp2_session_consume_connection(s, len);
    /* A 204 or 304 has no content: citegate drops any (cg_status_no_body),
     * when nghttp2 lets it through at all. */
    if (id == m->sid && !mi_over(m) && m->head_done && m->status != 204 && m->status != 304)
        cg_buf_put(&m->body, data, len);
    nghttp2_session_consume_stream(s, id, len);
    return 0;
}

static int mi_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)s;
    (void)code;
    mirror_t *m = ud;
    if (id == m->sid && m->sid && !mi_over(m))
        mi_unknown(m, "stream closed before END_STREAM: cut, or refused and sent again");
    return 0;
}

static void mi_send(mirror_t *m)
{
    const uint8_t *out;
    while (nghttp2_session_mem_send(m->s, &out) > 0)
        ; /* what the mirror sends goes nowhere: only its state counts */
}

static void mirror_begin(mirror_t *m)
{
    static nghttp2_session_callbacks *cbs;
    static nghttp2_option *opt;
    if (cbs == NULL) {
        FZ_CHECK(nghttp2_session_callbacks_new(&cbs) == 0 && nghttp2_option_new(&opt) == 0);
        nghttp2_session_callbacks_set_on_header_callback(cbs, mi_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, mi_frame);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, mi_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, mi_close);
        nghttp2_option_set_no_auto_window_update(opt, 1);
    }
    FZ_CHECK(nghttp2_session_client_new2(&m->s, cbs, m, opt) == 0);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, CG_MAX_HEADER_BYTES}};
    FZ_CHECK(nghttp2_submit_settings(m->s, NGHTTP2_FLAG_NONE, iv, 1) == 0);
    int rv = nghttp2_session_set_local_window_size(m->s, NGHTTP2_FLAG_NONE, 0, UP_H2_CONN_WINDOW);
    FZ_CHECK(rv == 0);
    mi_send(m);
    fs_h2_reader_init(&m->cg, true);
    m->stalls = cg_metrics->client_stalls;
}

/* Citegate's request went out on stream st: the mirror opens its own. */
static void mi_open(mirror_t *m, const up_client_t *u, const fs_h2_stream_t *st)
{
    m->sid = st->id;
    m->evstream = u->evstream;
    cg_span_t rid = cg_hdrs_get(&st->hdrs, "x-request-id");
    if (rid.p && rid.n < sizeof(m->rid))
        memcpy(m->rid, rid.p, rid.n);
    const char *method = u->chat ? "POST" : "GET";
    nghttp2_nv nv[] = {{(uint8_t *)":method", (uint8_t *)method, 7, strlen(method), 0},
                       {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
                       {(uint8_t *)":authority", (uint8_t *)"upstream", 10, 8, 0},
                       {(uint8_t *)":path", (uint8_t *)"/", 5, 1, 0}};
    int32_t id = nghttp2_submit_request(m->s, NULL, nv, 4, NULL, NULL);
    mi_send(m);
    nghttp2_stream *ms = id > 0 ? nghttp2_session_find_stream(m->s, id) : NULL;
    if (m->other)
        mi_unknown(m, "the stream opened on a write with other frames");
    else if (m->rid[0] == '\0')
        mi_unknown(m, "citegate's request has no X-Request-Id");
    else if (id != m->sid || ms == NULL ||
             nghttp2_stream_get_state(ms) != NGHTTP2_STREAM_STATE_HALF_CLOSED_LOCAL)
        mi_unknown(m, "the mirror's stream is not citegate's");
}

/* What citegate did since the last look: its request's stream opened, its
 * own resets, GOAWAY, stalls. */
static void mirror_sync(mirror_t *m, up_client_t *u)
{
    if (m->s == NULL)
        return;
    fs_peer_t *up = &u->ups[0];
    fs_h2_reader_feed(&m->cg, up->got.p + m->cg_read, up->got.len - m->cg_read);
    m->cg_read = up->got.len;
    bool stalled = cg_metrics->client_stalls != m->stalls;
    m->stalls = cg_metrics->client_stalls;
    if (stalled && !m->unknown && (!mi_over(m) || m->verdict_write == m->writes))
        mi_unknown(m, "a client stalled: the stream's window differs");
    for (size_t i = 0; i < m->cg.n && m->sid == 0; i++)
        if (m->cg.v[i].head)
            mi_open(m, u, &m->cg.v[i]);
    if (m->sid && !mi_over(m) && (fs_h2_stream(&m->cg, m->sid)->reset || m->cg.goaway))
        mi_unknown(m, "citegate reset the stream or ended the connection");
}

/* The frames of a write: whether any is not SETTINGS or PING, or is cut. */
static bool mi_split(mirror_t *m, const uint8_t *p, size_t n)
{
    bool other = false;
    for (size_t pos = 0, k; pos < n; pos += k) {
        if (m->frame_left > 0) {
            k = m->frame_left < n - pos ? m->frame_left : n - pos;
            m->frame_left -= k;
            continue;
        }
        k = 9u - m->head_have < n - pos ? 9u - m->head_have : n - pos;
        memcpy(m->head + m->head_have, p + pos, k);
        m->head_have += (uint8_t)k;
        if (m->head_have == 9) {
            m->frame_left = (size_t)m->head[0] << 16 | (size_t)m->head[1] << 8 | m->head[2];
            m->head_have = 0;
            other |= m->head[3] != NGHTTP2_SETTINGS && m->head[3] != NGHTTP2_PING;
        }
    }
    return other || m->frame_left > 0 || m->head_have > 0;
}

static void mirror_feed(mirror_t *m, const uint8_t *p, size_t n)
{
    m->writes++;
    m->other = mi_split(m, p, n);
    if (mi_over(m))
        return;
    if (nghttp2_session_mem_recv(m->s, p, n) < 0 && !mi_over(m))
        mi_unknown(m, "a connection error");
    mi_send(m);
}

/* The mirror's verdict, into what fuzz_up.h checks. */
static void mirror_end(mirror_t *m, up_client_t *u)
{
    mirror_sync(m, u);
    if (getenv("FS_DEBUG") && m->unknown)
        fprintf(stderr, "upstream's first final answer unknown: %s\n", m->why);
    if (m->s == NULL || m->unknown || !m->rid[0])
        return;
    memcpy(u->up_rid, m->rid, sizeof(m->rid));
    if (m->refused) {
        u->up_refused = true;
    } else if (m->ended) {
        u->up_status = m->status;
        u->up_sse = m->sse;
        u->up_encoded = m->encoded;
        cg_buf_put(&u->up_body, m->body.p, m->body.len);
    }
}

static void mirror_free(mirror_t *m)
{
    if (m->s == NULL)
        return;
    nghttp2_session_del(m->s);
    fs_h2_reader_free(&m->cg);
    cg_hdrs_free(&m->hdrs);
    cg_buf_free(&m->body);
}

/* --- the driver --------------------------------------------------------------------- */

typedef struct drv {
    up_client_t u;
    h2ops_t ops;
    mirror_t m;       /* of the first connection */
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
    if (up && d->ops.out.len && up->fd == d->conn_fd) {
        mirror_t *m = up == &d->u.ups[0] ? &d->m : NULL;
        if (m && m->s == NULL)
            mirror_begin(m);
        if (m) {
            mirror_sync(m, &d->u);
            mirror_feed(m, (const uint8_t *)d->ops.out.p, d->ops.out.len);
        }
        /* Cut short: citegate closed the connection, and may not have read
         * what the mirror was given. */
        if (!fs_write(up, d->ops.out.p, d->ops.out.len) && m &&
            (!mi_over(m) || m->verdict_write == m->writes))
            mi_unknown(m, "a write to citegate failed");
    }
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
    mirror_end(&d.m, &d.u);
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
    mirror_free(&d.m);
    cg_buf_free(&d.ops.out);
    if (d.ops.def)
        nghttp2_hd_deflate_del(d.ops.def);
    return 0;
}
