/*
 * The HTTP/1.1 upstream pool: idle keep-alive connections are reused, at
 * most CITEGATE_UPSTREAM_MAX_CONNECTIONS exist per worker, and exchanges
 * beyond that wait in the pool's queue for the next free connection.
 *
 * A connection serves one exchange at a time and is never reused
 * mid-response: an exchange that goes away takes its connection with it.
 * Whatever ends a connection (the peer, a failed write, TLS, our own
 * abort) reaches `closed`, where the exchange still attached learns why.
 */
#include "conn.h"
#include "exchange.h"
#include "log.h"
#include "metrics.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

/* An idle pooled connection is closed after this long unused (nginx's
 * keepalive_timeout); the pool's sweep looks every SWEEP_MS. */
#define IDLE_CLOSE_MS 60000
#define SWEEP_MS      1000
#define JOINED_KEEP   (64 * 1024) /* a larger joined buffer is given back */

typedef struct h1pool h1pool_t;

typedef struct h1conn {
    cg_conn_t conn;
    h1pool_t *pool;
    llhttp_t parser;
    cg_hdrs_t hdrs;
    cg_exchange_t *ex;
    cg_list_t idle; /* in the pool's idle list while idle */
    bool reused, got_bytes, done;
    bool sent_early; /* the request went before the connection was ready */
    uint64_t idle_since;
    cg_span_t body; /* this read's body bytes so far, while in one piece */
} h1conn_t;

struct h1pool {
    cg_upstream_t base;
    cg_list_t idle; /* h1conn_t, newest first */
    unsigned conns;
    cg_waitq_t waiting;
    cg_defer_t serve; /* the queue is served at a safe point */
    uv_timer_t sweep; /* closes connections idle for IDLE_CLOSE_MS */
    bool draining;
    /* A read's body pieces joined (the chunks of a chunked answer): one
     * connection reads at a time, so one buffer serves the pool. */
    cg_buf_t joined;
};

static llhttp_settings_t settings;

static h1pool_t *pool_of(cg_upstream_t *up)
{
    return (h1pool_t *)up;
}

static cg_exchange_t *ex_of_link(cg_list_t *l)
{
    return CG_CONTAINER_OF(l, cg_exchange_t, up.wait);
}

static void serve(cg_defer_t *d);

static void serve_soon(h1pool_t *p)
{
    cg_defer(&p->base.ctx->safe, &p->serve, serve);
}

/* --- the idle list ----------------------------------------------------------------- */

static void idle_push(h1conn_t *u)
{
    h1pool_t *p = u->pool;
    u->idle_since = cg_now_ms(p->base.ctx);
    cg_list_insert(p->idle.next, &u->idle);
}

static h1conn_t *idle_conn(cg_list_t *l)
{
    return CG_CONTAINER_OF(l, h1conn_t, idle);
}

static void attach(h1conn_t *u, cg_exchange_t *ex)
{
    u->ex = ex;
    ex->up.handle = u;
}

static cg_exchange_t *detach(h1conn_t *u)
{
    cg_exchange_t *ex = u->ex;
    if (ex)
        ex->up.handle = NULL;
    u->ex = NULL;
    return ex;
}

/* --- the answer -------------------------------------------------------------------- */

static int on_message_begin(llhttp_t *lp)
{
    cg_hdrs_reset(&((h1conn_t *)lp->data)->hdrs);
    return 0;
}

static int on_header_field(llhttp_t *lp, const char *at, size_t n)
{
    return cg_hdrs_on_field(&((h1conn_t *)lp->data)->hdrs, at, n) == 0 ? 0 : -1;
}

static int on_header_value(llhttp_t *lp, const char *at, size_t n)
{
    return cg_hdrs_on_value(&((h1conn_t *)lp->data)->hdrs, at, n) == 0 ? 0 : -1;
}

/* 100 Continue and 103 Early Hints come before the real answer; any other
 * 1xx (101 Switching Protocols above all) is not an answer citegate can
 * relay: a protocol error, 502 (SPEC §9). */
static bool interim(const llhttp_t *lp)
{
    return lp->status_code == 100 || lp->status_code == 103;
}

static int on_headers_complete(llhttp_t *lp)
{
    h1conn_t *u = lp->data;
    if (interim(lp))
        return 0; /* wait for the real answer */
    if (u->ex == NULL)
        return -1;
    if (lp->status_code < 200) {
        llhttp_set_error_reason(lp, "upstream answered with an interim status other than 100/103");
        return -1;
    }
    cg_exchange_on_head(u->ex, lp->status_code, &u->hdrs);
    cg_hdrs_free(&u->hdrs); /* the exchange copied what it keeps */
    /* A HEAD answer has headers only. */
    return u->ex->msg.method == HTTP_HEAD ? 1 : 0;
}

/* Body bytes are gathered over one read and handed on once (see
 * deliver_body): a read that brings several chunks, one event each, then
 * costs one transform call and one client write, not one per chunk. */
static int on_body(llhttp_t *lp, const char *at, size_t n)
{
    h1conn_t *u = lp->data;
    if (u->ex == NULL)
        return -1;
    cg_buf_t *j = &u->pool->joined;
    if (u->body.n == 0 && j->len == 0) {
        u->body = cg_span(at, n); /* the read's first piece: no copy yet */
        return 0;
    }
    if (j->len == 0)
        cg_buf_put(j, u->body.p, u->body.n);
    cg_buf_put(j, at, n);
    return 0;
}

/* The read's body: valid until release_body(). */
static cg_span_t take_body(h1conn_t *u)
{
    cg_buf_t *j = &u->pool->joined;
    cg_span_t b = j->len ? cg_span(j->p, j->len) : u->body;
    u->body = cg_span(NULL, 0);
    return b;
}

static void release_body(h1pool_t *p)
{
    p->joined.len = 0;
    if (p->joined.cap > JOINED_KEEP)
        cg_buf_free(&p->joined);
}

static void deliver_body(h1conn_t *u)
{
    cg_span_t b = take_body(u);
    if (b.n && u->ex)
        cg_exchange_on_body(u->ex, b.p, b.n);
    release_body(u->pool);
}

static int on_message_complete(llhttp_t *lp)
{
    h1conn_t *u = lp->data;
    if (interim(lp))
        return 0;
    u->done = true;
    return HPE_PAUSED;
}

/* The answer is complete: the exchange takes the read's last body bytes
 * and ends, then the connection goes back to the pool (or closes). */
static void complete(h1conn_t *u, cg_span_t last)
{
    h1pool_t *p = u->pool;
    cg_exchange_t *ex = detach(u);
    /* The answer goes first: bytes that break an event stream's framing
     * leave the connection unfit for another request. */
    bool sound = cg_exchange_on_last(ex, last.p, last.n);
    if (sound && llhttp_should_keep_alive(&u->parser) && cg_conn_usable(&u->conn) && !p->draining) {
        llhttp_resume(&u->parser);
        llhttp_reset(&u->parser);
        u->done = u->got_bytes = false;
        u->reused = true;
        idle_push(u);
        cg_conn_read_start(&u->conn);
    } else {
        cg_conn_close(&u->conn, sound ? CG_OK : CG_E_PROTOCOL);
    }
    release_body(p);
    serve_soon(p);
}

static void on_read(cg_conn_t *c, const char *data, size_t n)
{
    h1conn_t *u = c->owner;
    if (u->ex == NULL) { /* bytes on an idle connection: not HTTP we can trust */
        cg_conn_close(c, CG_E_PROTOCOL);
        return;
    }
    u->got_bytes = true;
    enum llhttp_errno err = llhttp_execute(&u->parser, data, n);
    if (err == HPE_PAUSED && u->done && u->ex) {
        complete(u, take_body(u)); /* data and the joined pieces stay put until it returns */
        return;
    }
    deliver_body(u);
    if (u->ex == NULL)
        return; /* the exchange let go of this connection, which is closing */
    if (err != HPE_OK) {
        cg_log_warn(u->ex->rid, "upstream response: %s", llhttp_get_error_reason(&u->parser));
        cg_conn_close(c, CG_E_PROTOCOL);
    }
}

/* --- sending ------------------------------------------------------------------------ */

static void put_request(h1conn_t *u)
{
    cg_buf_t req = {0};
    cg_upreq_h1(u->ex->upreq, u->pool->base.target->url.authority, &req);
    uv_buf_t b = uv_buf_init(req.p, (unsigned)req.len);
    cg_conn_write(&u->conn, &b, 1);
    cg_buf_free(&req);
}

static void write_request(h1conn_t *u)
{
    put_request(u);
    cg_conn_read_start(&u->conn);
    cg_exchange_upstream_sent(u->ex);
}

/* The request went with the connect (connect_new): it counts as sent, and
 * its first-byte deadline begins, only now that the connection is made. */
static void on_ready(cg_conn_t *c)
{
    h1conn_t *u = c->owner;
    cg_metrics->upstream_connections[CG_PROTO_LABEL_HTTP1]++;
    if (u->ex == NULL)
        return;
    if (u->sent_early)
        cg_exchange_upstream_sent(u->ex);
    else
        write_request(u);
}

/* Why an exchange's answer broke off, from why its connection closed. */
static cg_err_t failure(const cg_conn_t *c)
{
    switch (c->err) {
    case CG_E_CONNECT:
    case CG_E_TLS:
    case CG_E_PROTOCOL: return c->err;
    default: return c->ready ? CG_E_RESET : CG_E_CONNECT;
    }
}

/* The connection ended under an exchange: finish a body delimited by the
 * connection's end, send again what a stale keep-alive connection lost,
 * or fail. */
static void end_under(h1conn_t *u, cg_exchange_t *ex)
{
    if (u->got_bytes && u->conn.err == CG_E_CLOSED && !u->done) {
        u->ex = ex;
        llhttp_finish(&u->parser); /* may complete a close-delimited body */
        u->ex = NULL;
    }
    if (u->done) {
        cg_exchange_on_end(ex, CG_OK);
        return;
    }
    /* Nothing of the request was answered on a reused connection the
     * upstream had just closed: one new connection may try again. */
    if (u->reused && !u->got_bytes && ex->up.resent == 0 && !cg_exchange_done(ex)) {
        ex->up.resent++;
        cg_exchange_upstream_queued(ex);
        cg_waitq_push_front(&u->pool->waiting, &ex->up.wait);
        return;
    }
    cg_exchange_on_end(ex, failure(&u->conn));
}

static void on_closed(cg_conn_t *c)
{
    h1conn_t *u = c->owner;
    h1pool_t *p = u->pool;
    cg_list_unlink(&u->idle);
    p->conns--;
    if (c->ready)
        cg_metrics->upstream_connections[CG_PROTO_LABEL_HTTP1]--;
    cg_exchange_t *ex = detach(u);
    if (ex)
        end_under(u, ex);
    cg_hdrs_free(&u->hdrs);
    free(u);
    serve_soon(p);
}

static const cg_conn_ops_t conn_ops = {.read = on_read, .ready = on_ready, .closed = on_closed};

static void connect_new(h1pool_t *p, cg_exchange_t *ex)
{
    cg_ctx_t *ctx = p->base.ctx;
    const cg_upstream_target_t *t = p->base.target;
    h1conn_t *u = cg_xcalloc(1, sizeof(*u));
    u->pool = p;
    llhttp_init(&u->parser, HTTP_RESPONSE, &settings);
    u->parser.data = u;
    p->conns++;
    attach(u, ex);
    cg_conn_connect(&u->conn, ctx->loop, (const struct sockaddr *)&t->addr, t->tls, t->sni,
                    &conn_ops, u);
    u->conn.peer = t->name;
    u->conn.quiet = t->quiet;
    /* A plain connection takes the request now: on loopback it leaves at
     * once, a loop turn before the connect callback (conn.h). */
    if (t->tls == NULL && cg_conn_usable(&u->conn)) {
        put_request(u);
        u->sent_early = true;
    }
}

static cg_err_t send_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    h1pool_t *p = pool_of(up);
    const cg_config_t *cfg = p->base.ctx->cfg;
    if (!cg_list_empty(&p->idle)) {
        h1conn_t *u = idle_conn(p->idle.next);
        cg_list_unlink(&u->idle);
        attach(u, ex);
        write_request(u);
    } else if (p->conns < cfg->upstream_max_connections) {
        cg_exchange_upstream_connecting(ex);
        connect_new(p, ex);
    } else if (p->waiting.len >= cfg->upstream_max_pending) {
        return CG_E_BUSY;
    } else {
        cg_waitq_push(&p->waiting, &ex->up.wait);
        cg_exchange_upstream_queued(ex);
    }
    return CG_OK;
}

static void serve(cg_defer_t *d)
{
    h1pool_t *p = CG_CONTAINER_OF(d, h1pool_t, serve);
    while (!cg_waitq_empty(&p->waiting) &&
           (!cg_list_empty(&p->idle) || p->conns < p->base.ctx->cfg->upstream_max_connections))
        send_ex(&p->base, ex_of_link(cg_waitq_pop(&p->waiting)));
}

static void abort_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    h1pool_t *p = pool_of(up);
    cg_waitq_remove(&p->waiting, &ex->up.wait);
    h1conn_t *u = ex->up.handle;
    if (u) {
        detach(u);
        cg_conn_close(&u->conn, CG_OK);
    }
}

static void pause_ex(cg_upstream_t *up, cg_exchange_t *ex, bool pause)
{
    (void)up;
    h1conn_t *u = ex->up.handle;
    if (u == NULL)
        return;
    if (pause)
        cg_conn_read_stop(&u->conn);
    else
        cg_conn_read_start(&u->conn);
}

/* The idle list is newest first: the oldest are at its end. */
static void on_sweep(uv_timer_t *t)
{
    h1pool_t *p = t->data;
    uint64_t now = cg_now_ms(p->base.ctx);
    while (!cg_list_empty(&p->idle) && now - idle_conn(p->idle.prev)->idle_since >= IDLE_CLOSE_MS) {
        h1conn_t *u = idle_conn(p->idle.prev);
        cg_list_unlink(&u->idle);
        cg_conn_close(&u->conn, CG_OK);
    }
}

static void drain(cg_upstream_t *up)
{
    h1pool_t *p = pool_of(up);
    p->draining = true;
    if (!uv_is_closing((uv_handle_t *)&p->sweep))
        uv_close((uv_handle_t *)&p->sweep, NULL);
    while (!cg_list_empty(&p->idle)) {
        h1conn_t *u = idle_conn(p->idle.next);
        cg_list_unlink(&u->idle);
        cg_conn_close(&u->conn, CG_OK);
    }
}

static void pool_free(cg_upstream_t *up)
{
    h1pool_t *p = pool_of(up);
    cg_defer_cancel(&p->serve);
    cg_buf_free(&p->joined);
    free(p);
}

static const cg_upstream_ops_t ops = {"http1.1", send_ex, abort_ex, pause_ex, drain, pool_free};

cg_upstream_t *cg_up_h1_new(cg_ctx_t *ctx, const cg_upstream_target_t *t, cg_upstream_t **slot)
{
    if (!settings.on_message_complete) {
        llhttp_settings_init(&settings);
        settings.on_message_begin = on_message_begin;
        settings.on_header_field = on_header_field;
        settings.on_header_value = on_header_value;
        settings.on_headers_complete = on_headers_complete;
        settings.on_body = on_body;
        settings.on_message_complete = on_message_complete;
    }
    h1pool_t *p = cg_xcalloc(1, sizeof(*p));
    p->base.ops = &ops;
    p->base.ctx = ctx;
    p->base.target = t;
    p->base.slot = slot;
    cg_waitq_init(&p->waiting);
    cg_list_init(&p->idle);
    uv_timer_init(ctx->loop, &p->sweep);
    p->sweep.data = p;
    uv_timer_start(&p->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    uv_unref((uv_handle_t *)&p->sweep);
    return &p->base;
}
