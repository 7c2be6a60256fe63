/*
 * The HTTP/2 upstream pool (CITEGATE_UPSTREAM_PROTOCOL=h2, or auto on
 * https://): h2c with prior knowledge on http://, h2 by ALPN on https://.
 * Streams of many exchanges share a connection up to the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS, then the pool opens another (up to
 * CITEGATE_UPSTREAM_MAX_CONNECTIONS), then exchanges wait in its queue. A
 * connection that sent GOAWAY takes no new streams. Window updates go out
 * only as the client drains, so a slow client slows its own stream alone.
 *
 * Frames are produced only at safe points (after nghttp2_session_mem_recv
 * returned, or from the worker's deferred queue), never from inside an
 * nghttp2 callback or a call an exchange made.
 */
#include "conn.h"
#include "exchange.h"
#include "h2lib.h"
#include "log.h"
#include "metrics.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define PING_EVERY_MS 30000 /* probe a connection idle this long */
#define SWEEP_MS      1000  /* how often connections are looked over */
/* The connection's receive window. Each stream's own window (64 KiB, given
 * back only as its client reads) bounds what citegate holds, and the
 * connection's is given back as bytes arrive; at the default 64 KiB, an
 * upstream with many streams would wait for a WINDOW_UPDATE every 32 KiB
 * (a round trip per 130 events of 250 bytes). */
#define CONN_WINDOW (16 << 20)
#define FEED_SLICE  (16 << 10) /* bytes of a read taken in before clients are written */
#define FRAME_HEAD  9          /* an h2 frame header: length (24 bits), type, flags, stream */

typedef struct h2pool h2pool_t;
typedef struct h2conn h2conn_t;

/* One request's stream. It owns the request body nghttp2 reads, so an
 * exchange that goes away leaves nothing nghttp2 could still read. */
typedef struct h2stream {
    h2conn_t *conn;
    cg_exchange_t *ex; /* NULL once the exchange forgot it */
    int32_t id;
    int status;
    bool head_done;
    cg_hdrs_t hdrs;
    cg_buf_t body;
    size_t body_off;
    size_t unconsumed; /* DATA bytes held back from the window while paused */
    cg_list_t link;    /* in the connection's streams */
} h2stream_t;

struct h2conn {
    cg_conn_t conn;
    h2pool_t *pool;
    nghttp2_session *s;
    bool settled; /* the peer's SETTINGS arrived */
    bool goaway, ping_out;
    uint64_t t_open, t_active; /* when it was opened; last had a stream or an answer */
    unsigned nstreams;
    cg_list_t streams; /* h2stream_t, by link */
    cg_buf_t out;     /* frames gathered for one write */
    /* Where the peer's frames begin in what it sent (slice_end): payload
     * bytes of the current frame still to come, and the next frame's header
     * while it is cut by the end of a read. */
    size_t frame_left;
    uint8_t head[FRAME_HEAD];
    uint8_t head_have;
    cg_defer_t flush; /* frames to send at the next safe point */
    cg_list_t link;   /* in the pool's connections */
};

struct h2pool {
    cg_upstream_t base;
    cg_upstream_t *fallback; /* HTTP/1.1, when ALPN may choose it */
    cg_list_t conns; /* h2conn_t, by link */
    unsigned nconns;
    cg_waitq_t waiting;
    cg_defer_t serve;
    uv_timer_t sweep; /* connect deadlines and PINGs, for all connections */
    bool draining;
};

static void serve(cg_defer_t *d);
static void flush_now(h2conn_t *u);

static h2pool_t *pool_of(cg_upstream_t *up)
{
    return (h2pool_t *)up;
}

static cg_ctx_t *ctx_of(const h2conn_t *u)
{
    return u->pool->base.ctx;
}

static cg_exchange_t *ex_of_link(cg_list_t *l)
{
    return CG_CONTAINER_OF(l, cg_exchange_t, up.wait);
}

/* A checked call's verdict (h2lib.h), carried out. */
static void apply(h2conn_t *u, cg_h2_verdict_t v)
{
    if (v == CG_H2_CLOSE)
        cg_conn_close(&u->conn, CG_E_PROTOCOL);
}

static void serve_soon(h2pool_t *p)
{
    cg_defer(&p->base.ctx->safe, &p->serve, serve);
}

static void on_flush(cg_defer_t *d)
{
    flush_now(CG_CONTAINER_OF(d, h2conn_t, flush));
}

static void flush_soon(h2conn_t *u)
{
    cg_defer(&ctx_of(u)->safe, &u->flush, on_flush);
}

/* --- streams ------------------------------------------------------------------------ */

static h2stream_t *stream_new(h2conn_t *u, cg_exchange_t *ex)
{
    h2stream_t *st = cg_xcalloc(1, sizeof(*st));
    st->conn = u;
    st->ex = ex;
    st->body = ex->upreq->body;
    memset(&ex->upreq->body, 0, sizeof(ex->upreq->body));
    ex->up.handle = st;
    cg_list_insert(u->streams.next, &st->link); /* newest first */
    u->nstreams++;
    return st;
}

/* The exchange forgets the stream (the stream may live on in nghttp2). */
static cg_exchange_t *stream_detach(h2stream_t *st)
{
    cg_exchange_t *ex = st->ex;
    if (ex)
        ex->up.handle = NULL;
    st->ex = NULL;
    return ex;
}

static void stream_free(h2stream_t *st)
{
    h2conn_t *u = st->conn;
    cg_list_unlink(&st->link);
    u->nstreams--;
    cg_hdrs_free(&st->hdrs);
    cg_buf_free(&st->body);
    free(st);
}

/* A stream the upstream refused before processing it (beyond a GOAWAY's
 * last stream id, or reset with REFUSED_STREAM) is safe to send again
 * (RFC 9113 §8.7): it goes back to the front of the queue, at most twice. */
static bool resend(h2stream_t *st)
{
    cg_exchange_t *ex = st->ex;
    if (ex == NULL || st->head_done || ex->up.resent >= 2)
        return false;
    ex->up.resent++;
    stream_detach(st);
    ex->upreq->body = st->body;
    memset(&st->body, 0, sizeof(st->body));
    cg_exchange_upstream_queued(ex);
    h2pool_t *p = st->conn->pool;
    cg_waitq_push_front(&p->waiting, &ex->up.wait);
    serve_soon(p);
    return true;
}

static void stream_end(h2stream_t *st, cg_err_t err)
{
    cg_exchange_t *ex = stream_detach(st);
    if (ex)
        cg_exchange_on_end(ex, err);
}

/* --- nghttp2 callbacks --------------------------------------------------------------- */

/* An answer citegate cannot relay: the stream is reset and its exchange
 * fails with a protocol error, 502 (SPEC §9). */
static void refuse_answer(h2stream_t *st, int32_t id, const char *why)
{
    h2conn_t *u = st->conn;
    cg_log_warn(st->ex->rid, "upstream answer not relayed: %s (status %d)", why, st->status);
    int rv = CG_H2_CALL(nghttp2_submit_rst_stream(u->s, NGHTTP2_FLAG_NONE, id,
                                                  NGHTTP2_PROTOCOL_ERROR));
    apply(u, cg_h2_verdict(u->s, 0, rv, "reset"));
    stream_end(st, CG_E_PROTOCOL);
}


static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    h2stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (st == NULL || st->ex == NULL || f->hd.type != NGHTTP2_HEADERS || st->head_done)
        return 0;
    if (cg_span_eq(cg_span((const char *)name, nl), ":status")) {
        st->status = atoi((const char *)value);
        cg_hdrs_reset(&st->hdrs);
        return 0;
    }
    if (cg_hdrs_add(&st->hdrs, (const char *)name, nl, (const char *)value, vl) != 0)
        refuse_answer(st, f->hd.stream_id, "header fields beyond SETTINGS_MAX_HEADER_LIST_SIZE");
    return 0;
}

static void on_goaway(h2conn_t *u, int32_t last)
{
    u->goaway = true;
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &u->streams) {
        h2stream_t *st = CG_CONTAINER_OF(pos, h2stream_t, link);
        if (st->id > last)
            resend(st);
    }
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    h2conn_t *u = ud;
    if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK)) {
        u->settled = true;
        serve_soon(u->pool);
        return 0;
    }
    if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK)) {
        u->ping_out = false;
        return 0;
    }
    if (f->hd.type == NGHTTP2_GOAWAY) {
        on_goaway(u, f->goaway.last_stream_id);
        return 0;
    }
    h2stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (st == NULL || st->ex == NULL)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && !st->head_done && st->status >= 100 && st->status < 200 &&
        st->status != 100 && st->status != 103) {
        refuse_answer(st, f->hd.stream_id, "an interim status other than 100/103");
        return 0;
    }
    if (f->hd.type == NGHTTP2_HEADERS && st->status >= 200 && !st->head_done) {
        st->head_done = true;
        cg_exchange_on_head(st->ex, st->status, &st->hdrs);
        /* The exchange copied what it keeps, and an answered request is
         * never sent again: neither needs to live as long as the stream. */
        cg_hdrs_free(&st->hdrs);
        if (st->body_off == st->body.len)
            cg_buf_free(&st->body);
    }
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) && st->head_done)
        stream_end(st, CG_OK);
    return 0;
}

/* Gives len bytes of stream id's window back to the upstream. */
static void consume_stream(h2conn_t *u, int32_t id, size_t len)
{
    int rv = CG_H2_CALL(nghttp2_session_consume_stream(u->s, id, len));
    apply(u, cg_h2_verdict(u->s, id, rv, "window update"));
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    h2conn_t *u = ud;
    /* The connection's window always reopens; a stream's only as fast as its
     * own client reads, so one stalled client never stalls its neighbours. */
    int rv = CG_H2_CALL(nghttp2_session_consume_connection(s, len));
    apply(u, cg_h2_verdict(s, 0, rv, "window update"));
    h2stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL || st->ex == NULL) {
        consume_stream(u, id, len);
        return 0;
    }
    cg_exchange_on_body(st->ex, (const char *)data, len);
    if (st->ex && st->ex->paused)
        st->unconsumed += len;
    else
        consume_stream(u, id, len);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    h2conn_t *u = ud;
    h2stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    /* An answer that ended with END_STREAM has left its exchange already
     * (on_frame_recv): one still attached was cut, whatever the code. A
     * RST_STREAM with NO_ERROR closes only a complete answer (RFC 9113
     * §8.1); before END_STREAM, a body whose length the client was told
     * must not be taken as whole. */
    if (!(code == NGHTTP2_REFUSED_STREAM && resend(st)))
        stream_end(st, CG_E_RESET);
    stream_free(st);
    if (u->pool->draining && u->nstreams == 0 && cg_waitq_empty(&u->pool->waiting))
        cg_conn_close(&u->conn, CG_OK);
    serve_soon(u->pool);
    return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    h2stream_t *st = src->ptr;
    size_t n = st->body.len - st->body_off;
    if (n > len)
        n = len;
    memcpy(buf, st->body.p + st->body_off, n);
    st->body_off += n;
    if (st->body_off == st->body.len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* --- the connection -------------------------------------------------------------------- */

static void flush_now(h2conn_t *u)
{
    cg_defer_cancel(&u->flush);
    u->out.len = 0;
    while (cg_conn_usable(&u->conn) && u->s) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(u->s, &data);
        if (n < 0) {
            cg_conn_close(&u->conn, CG_E_PROTOCOL);
            return;
        }
        if (n == 0)
            break;
        cg_buf_put(&u->out, data, (size_t)n);
    }
    uv_buf_t b = uv_buf_init(u->out.p, (unsigned)u->out.len);
    cg_conn_write(&u->conn, &b, 1);
    u->out.len = 0;
}

/* How much of p[0..n) the next slice takes: up to the first frame boundary
 * at least FEED_SLICE bytes on, or all of it. A slice that cut a DATA frame
 * would cut its event, which then waits in its stream's SSE buffer (kept
 * afterwards: 1 KiB in every stream that was ever cut). The bytes counted
 * here are exactly those nghttp2 is given next. */
static size_t slice_end(h2conn_t *u, const uint8_t *p, size_t n)
{
    size_t pos = 0;
    while (pos < n) {
        if (u->frame_left > 0) {
            size_t k = u->frame_left < n - pos ? u->frame_left : n - pos;
            u->frame_left -= k;
            pos += k;
            continue;
        }
        if (pos >= FEED_SLICE && u->head_have == 0)
            return pos;
        size_t k = FRAME_HEAD - u->head_have;
        if (k > n - pos)
            k = n - pos;
        memcpy(u->head + u->head_have, p + pos, k);
        u->head_have += (uint8_t)k;
        pos += k;
        if (u->head_have == FRAME_HEAD) {
            u->frame_left = (size_t)u->head[0] << 16 | (size_t)u->head[1] << 8 | u->head[2];
            u->head_have = 0;
        }
    }
    return n;
}

static void on_read(cg_conn_t *c, const char *p, size_t n)
{
    h2conn_t *u = c->owner;
    /* In slices: what each slice made for clients leaves before the next
     * slice is taken in, so the first events of a large read (hundreds of
     * streams' events on one connection) do not wait for its last ones. */
    for (size_t off = 0, len; off < n && u->s && cg_conn_usable(c); off += len) {
        len = slice_end(u, (const uint8_t *)p + off, n - off);
        ssize_t r = nghttp2_session_mem_recv(u->s, (const uint8_t *)p + off, len);
        if (r < 0) {
            cg_log_warn(NULL, "upstream h2: %s", nghttp2_strerror((int)r));
            cg_conn_close(c, CG_E_PROTOCOL);
            return;
        }
        flush_now(u); /* nghttp2 has returned: a safe point */
        cg_safepoint_flush(&u->pool->base.ctx->safe);
    }
}

/* CITEGATE_UPSTREAM_PROTOCOL=auto and the upstream did not choose h2: from
 * now on this worker speaks HTTP/1.1 to it. No stream was opened yet
 * (exchanges wait for the peer's SETTINGS), so the waiting ones simply go
 * the HTTP/1.1 way. */
static void fall_back(h2conn_t *u)
{
    h2pool_t *p = u->pool;
    const cg_upstream_target_t *t = p->base.target;
    cg_log_info(NULL, "upstream %s:%d chose HTTP/1.1 by ALPN", t->url.host, t->url.port);
    *p->base.slot = p->fallback;
    cg_conn_close(&u->conn, CG_OK);
    cg_list_t *l;
    while ((l = cg_waitq_pop(&p->waiting))) {
        cg_exchange_t *ex = ex_of_link(l);
        if (p->fallback->ops->send(p->fallback, ex) == CG_E_BUSY)
            cg_exchange_on_end(ex, CG_E_BUSY);
    }
}

static nghttp2_session_callbacks *callbacks(void)
{
    static nghttp2_session_callbacks *cbs;
    if (cbs == NULL) {
        cbs = cg_h2_callbacks_new();
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    }
    return cbs;
}

static void on_ready(cg_conn_t *c)
{
    h2conn_t *u = c->owner;
    cg_metrics->upstream_connections[CG_PROTO_LABEL_H2]++;
    const char *alpn = cg_conn_alpn(c);
    if (c->tls && (alpn == NULL || strcmp(alpn, "h2") != 0)) {
        if (u->pool->fallback) {
            fall_back(u);
            return;
        }
        cg_log_warn(NULL, "upstream %s:%d did not agree to h2 (ALPN)",
                    u->pool->base.target->url.host, u->pool->base.target->url.port);
        cg_conn_close(c, CG_E_PROTOCOL);
        return;
    }
    static nghttp2_option *opt;
    if (opt == NULL) {
        opt = cg_h2_option_new();
        nghttp2_option_set_no_auto_window_update(opt, 1);
    }
    if (nghttp2_session_client_new2(&u->s, callbacks(), u, opt) != 0) {
        cg_conn_close(c, CG_E_PROTOCOL);
        return;
    }
    /* What citegate keeps of an answer's head (hdrs.h); nghttp2 counts 32
     * bytes more a field, so a peer within it always fits. */
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, CG_MAX_HEADER_BYTES}};
    int rv = CG_H2_CALL(nghttp2_submit_settings(u->s, NGHTTP2_FLAG_NONE, iv, 1));
    apply(u, cg_h2_verdict(u->s, 0, rv, "SETTINGS"));
    rv = CG_H2_CALL(nghttp2_session_set_local_window_size(u->s, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW));
    apply(u, cg_h2_verdict(u->s, 0, rv, "window update"));
    flush_now(u);
}

static bool may_take(const h2conn_t *u)
{
    if (!cg_conn_usable(&u->conn) || u->goaway || u->s == NULL || !u->settled)
        return false;
    uint32_t m = nghttp2_session_get_remote_settings(u->s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    return u->nstreams < (m ? m : 1);
}

static h2conn_t *conn_of(cg_list_t *l)
{
    return CG_CONTAINER_OF(l, h2conn_t, link);
}

static h2conn_t *pick(h2pool_t *p)
{
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &p->conns)
        if (may_take(conn_of(pos)))
            return conn_of(pos);
    return NULL;
}

static bool connecting(h2pool_t *p)
{
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &p->conns) {
        const h2conn_t *u = conn_of(pos);
        if (cg_conn_usable(&u->conn) && !u->goaway && !u->settled)
            return true;
    }
    return false;
}

/* Fails the waiting exchanges when the only connection that could have
 * taken them never came up. */
static void fail_waiting(h2pool_t *p, cg_err_t err)
{
    if (pick(p) || connecting(p))
        return;
    cg_list_t *l;
    while ((l = cg_waitq_pop(&p->waiting)))
        cg_exchange_on_end(ex_of_link(l), err);
}

static cg_err_t failure(const cg_conn_t *c)
{
    switch (c->err) {
    case CG_E_CONNECT:
    case CG_E_TLS:
    case CG_E_PROTOCOL:
    case CG_E_CONNECT_TIMEOUT:
    case CG_E_TIMEOUT: return c->err;
    default: return c->ready ? CG_E_RESET : CG_E_CONNECT;
    }
}

static void on_closed(cg_conn_t *c)
{
    h2conn_t *u = c->owner;
    h2pool_t *p = u->pool;
    cg_defer_cancel(&u->flush);
    cg_list_unlink(&u->link);
    p->nconns--;
    if (c->ready)
        cg_metrics->upstream_connections[CG_PROTO_LABEL_H2]--;
    cg_err_t err = failure(c);
    while (!cg_list_empty(&u->streams)) {
        h2stream_t *st = CG_CONTAINER_OF(u->streams.next, h2stream_t, link);
        stream_end(st, err);
        stream_free(st);
    }
    if (!u->settled && *p->base.slot == &p->base)
        fail_waiting(p, err);
    if (u->s)
        nghttp2_session_del(u->s);
    cg_buf_free(&u->out);
    free(u);
    serve_soon(p);
}

static const cg_conn_ops_t conn_ops = {.read = on_read, .ready = on_ready, .closed = on_closed};

static void connect_new(h2pool_t *p)
{
    cg_ctx_t *ctx = p->base.ctx;
    h2conn_t *u = cg_xcalloc(1, sizeof(*u));
    u->pool = p;
    cg_list_init(&u->streams);
    cg_list_insert(p->conns.next, &u->link); /* newest first */
    p->nconns++;
    u->t_open = u->t_active = cg_now_ms(ctx);
    const cg_upstream_target_t *t = p->base.target;
    cg_conn_connect(&u->conn, ctx->loop, (const struct sockaddr *)&t->addr, t->tls, t->sni,
                    &conn_ops, u);
    u->conn.peer = t->name;
    u->conn.quiet = t->quiet;
}

/* --- requests ------------------------------------------------------------------------- */

static void start_stream(h2conn_t *u, cg_exchange_t *ex)
{
    const cg_upstream_target_t *t = u->pool->base.target;
    cg_buf_t names = {0};
    size_t n;
    nghttp2_nv *nva =
        cg_upreq_nv(ex->upreq, t->url.tls ? "https" : "http", t->url.authority, &names, &n);
    h2stream_t *st = stream_new(u, ex);
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
    int32_t id =
        CG_H2_CALL(nghttp2_submit_request(u->s, NULL, nva, n, st->body.len ? &prd : NULL, st));
    free(nva);
    cg_buf_free(&names);
    if (id < 0) {
        /* No stream was made: the exchange fails, the connection goes on
         * unless nghttp2 is broken. */
        cg_log_warn(ex->rid, "h2 request: %s", nghttp2_strerror(id));
        if (nghttp2_is_fatal(id))
            cg_conn_close(&u->conn, CG_E_PROTOCOL);
        stream_end(st, CG_E_PROTOCOL);
        stream_free(st);
        return;
    }
    st->id = id;
    flush_soon(u);
    cg_exchange_upstream_sent(ex);
}

static void serve(cg_defer_t *d)
{
    h2pool_t *p = CG_CONTAINER_OF(d, h2pool_t, serve);
    while (!cg_waitq_empty(&p->waiting)) {
        h2conn_t *u = pick(p);
        if (u == NULL) {
            if (!connecting(p) && p->nconns < p->base.ctx->cfg->upstream_max_connections)
                connect_new(p);
            return;
        }
        start_stream(u, ex_of_link(cg_waitq_pop(&p->waiting)));
    }
}

static cg_err_t send_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    h2pool_t *p = pool_of(up);
    if (p->waiting.len >= p->base.ctx->cfg->upstream_max_pending)
        return CG_E_BUSY;
    cg_waitq_push(&p->waiting, &ex->up.wait);
    cg_exchange_upstream_queued(ex);
    serve_soon(p);
    return CG_OK;
}

static void abort_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    cg_waitq_remove(&pool_of(up)->waiting, &ex->up.wait);
    h2stream_t *st = ex->up.handle;
    if (st == NULL)
        return;
    stream_detach(st);
    int rv = CG_H2_CALL(
        nghttp2_submit_rst_stream(st->conn->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL));
    apply(st->conn, cg_h2_verdict(st->conn->s, 0, rv, "cancel"));
    flush_soon(st->conn);
}

static void pause_ex(cg_upstream_t *up, cg_exchange_t *ex, bool pause)
{
    (void)up;
    h2stream_t *st = ex->up.handle;
    if (st == NULL || pause || st->unconsumed == 0)
        return;
    consume_stream(st->conn, st->id, st->unconsumed);
    st->unconsumed = 0;
    flush_soon(st->conn);
}

/* A connection that is not up within the connect timeout is closed (the
 * exchanges waiting for it fail with 502). An idle one is probed with PING
 * every PING_EVERY_MS; one that did not answer the previous probe is closed
 * before an exchange finds it dead. */
static void sweep_one(h2conn_t *u, uint64_t now)
{
    cg_ctx_t *ctx = ctx_of(u);
    if (!cg_conn_usable(&u->conn))
        return;
    if (!u->settled) {
        if (now - u->t_open >= ctx->cfg->connect_timeout_ms)
            cg_conn_close(&u->conn, CG_E_CONNECT_TIMEOUT);
        return;
    }
    if (u->nstreams > 0) {
        u->t_active = now;
        return;
    }
    if (now - u->t_active < PING_EVERY_MS)
        return;
    if (u->ping_out) {
        cg_log_warn(NULL, "upstream h2 connection did not answer PING: closing it");
        cg_conn_close(&u->conn, CG_E_TIMEOUT);
        return;
    }
    u->ping_out = true;
    u->t_active = now;
    apply(u, cg_h2_verdict(u->s, 0, CG_H2_CALL(nghttp2_submit_ping(u->s, NGHTTP2_FLAG_NONE, NULL)),
                           "PING"));
    flush_soon(u);
}

static void on_sweep(uv_timer_t *t)
{
    h2pool_t *p = t->data;
    uint64_t now = cg_now_ms(p->base.ctx);
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &p->conns)
        sweep_one(conn_of(pos), now);
}

static void drain(cg_upstream_t *up)
{
    h2pool_t *p = pool_of(up);
    p->draining = true;
    if (!uv_is_closing((uv_handle_t *)&p->sweep))
        uv_close((uv_handle_t *)&p->sweep, NULL); /* no probes while draining */
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &p->conns)
        if (conn_of(pos)->nstreams == 0 && cg_waitq_empty(&p->waiting))
            cg_conn_close(&conn_of(pos)->conn, CG_OK);
    if (p->fallback)
        p->fallback->ops->drain(p->fallback);
}

/* After the loop ended: every connection and the timer are closed. */
static void pool_free(cg_upstream_t *up)
{
    h2pool_t *p = pool_of(up);
    cg_defer_cancel(&p->serve);
    if (p->fallback)
        p->fallback->ops->free(p->fallback);
    free(p);
}

static const cg_upstream_ops_t ops = {"h2", send_ex, abort_ex, pause_ex, drain, pool_free};

cg_upstream_t *cg_up_h2_new(cg_ctx_t *ctx, const cg_upstream_target_t *t, cg_upstream_t **slot,
                            cg_upstream_t *fallback)
{
    h2pool_t *p = cg_xcalloc(1, sizeof(*p));
    p->base.ops = &ops;
    p->base.ctx = ctx;
    p->base.target = t;
    p->base.slot = slot;
    p->fallback = fallback;
    cg_waitq_init(&p->waiting);
    cg_list_init(&p->conns);
    uv_timer_init(ctx->loop, &p->sweep);
    p->sweep.data = p;
    uv_timer_start(&p->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    uv_unref((uv_handle_t *)&p->sweep);
    return &p->base;
}
