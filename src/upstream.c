/*
 * HTTP/1.1 upstream connections, pooled per worker: idle keep-alive
 * connections are reused, at most CITEGATE_UPSTREAM_MAX_CONNECTIONS exist,
 * and exchanges beyond that wait in a queue for the next free connection.
 *
 * The connection owns copies of what it writes, so an exchange may go away
 * (client disconnect) at any moment: the connection is then closed, never
 * reused mid-response.
 */
#include "server.h"

#include "fault.h"
#include "log.h"
#include "metrics.h"
#include "tls.h"

#include <stdlib.h>
#include <string.h>

struct cg_upconn {
    cg_worker_t *w;
    uv_tcp_t tcp;
    uv_connect_t connect;
    llhttp_t parser;
    cg_hdrs_t hdrs;
    cg_exchange_t *ex;
    cg_upconn_t *next_idle;
    bool connected, closing, reused, got_bytes, done, reading, request_pending;
    cg_tls_t *tls; /* NULL on plain http:// */
};

typedef struct upwrite {
    uv_write_t req;
    size_t len;
    char data[];
} upwrite_t;

static llhttp_settings_t settings;

static void serve_waiting(cg_worker_t *w);
static void read_start(cg_upconn_t *u);

static void on_close(uv_handle_t *h)
{
    cg_upconn_t *u = h->data;
    cg_worker_t *w = u->w;
    if (u->connected)
        cg_metrics->upstream_connections[CG_PROTO_LABEL_HTTP1]--;
    w->upconns--;
    cg_hdrs_free(&u->hdrs);
    if (u->tls) {
        cg_tls_free(u->tls);
        free(u->tls);
    }
    free(u);
    serve_waiting(w);
}

static void unlink_idle(cg_upconn_t *u)
{
    for (cg_upconn_t **p = &u->w->idle; *p; p = &(*p)->next_idle) {
        if (*p == u) {
            *p = u->next_idle;
            return;
        }
    }
}

static void conn_close(cg_upconn_t *u)
{
    if (u->closing)
        return;
    u->closing = true;
    unlink_idle(u);
    if (u->ex) {
        u->ex->up = NULL;
        u->ex = NULL;
    }
    uv_close((uv_handle_t *)&u->tcp, on_close);
}

/* Ends the exchange with an upstream failure (the connection is closed). */
static void fail(cg_upconn_t *u, int uerr)
{
    cg_exchange_t *ex = u->ex;
    conn_close(u);
    if (ex)
        cg_ex_on_end(ex, uerr);
}

/* --- response parsing ------------------------------------------------------------ */

static int on_message_begin(llhttp_t *p)
{
    cg_upconn_t *u = p->data;
    cg_hdrs_reset(&u->hdrs);
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    return cg_hdrs_on_field(&((cg_upconn_t *)p->data)->hdrs, at, n) == 0 ? 0 : -1;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    return cg_hdrs_on_value(&((cg_upconn_t *)p->data)->hdrs, at, n) == 0 ? 0 : -1;
}

static int on_headers_complete(llhttp_t *p)
{
    cg_upconn_t *u = p->data;
    if (p->status_code < 200 && p->status_code != 101)
        return 0; /* interim response: wait for the real one */
    if (u->ex == NULL)
        return -1;
    cg_ex_on_head(u->ex, p->status_code, &u->hdrs);
    if (u->ex == NULL || u->closing)
        return -1;
    /* A HEAD answer has headers only. */
    return u->ex->msg->method == HTTP_HEAD ? 1 : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    cg_upconn_t *u = p->data;
    if (u->ex == NULL)
        return -1;
    cg_ex_on_body(u->ex, at, n);
    return (u->ex == NULL || u->closing) ? -1 : 0;
}

static int on_message_complete(llhttp_t *p)
{
    cg_upconn_t *u = p->data;
    if (p->status_code < 200 && p->status_code != 101)
        return 0;
    u->done = true;
    return HPE_PAUSED;
}

/* The response is complete: hand the connection back, then end the exchange. */
static void complete(cg_upconn_t *u)
{
    cg_exchange_t *ex = u->ex;
    bool reuse = llhttp_should_keep_alive(&u->parser) && !u->closing;
    u->ex = NULL;
    if (ex)
        ex->up = NULL;
    if (reuse) {
        llhttp_resume(&u->parser);
        llhttp_reset(&u->parser);
        u->done = false;
        u->got_bytes = false;
        u->reused = true;
        u->next_idle = u->w->idle;
        u->w->idle = u;
        if (!u->reading)
            read_start(u);
    } else {
        conn_close(u);
    }
    if (ex)
        cg_ex_on_end(ex, -1);
    serve_waiting(u->w);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    /* One loop per process and every read is consumed (or copied) before
     * on_read returns, so all connections share one read buffer instead of
     * holding 16 KiB each. */
    static char slab[65536];
    (void)h;
    (void)hint;
    *buf = uv_buf_init(slab, sizeof(slab));
}

static void retry_or_fail(cg_upconn_t *u, int uerr)
{
    cg_exchange_t *ex = u->ex;
    /* A kept-alive connection the upstream closed just as we reused it:
     * nothing of the request was answered, so one new connection may try. */
    if (ex && u->reused && !u->got_bytes && !ex->up_retried) {
        ex->up_retried = true;
        conn_close(u);
        cg_upstream_send(ex);
        return;
    }
    fail(u, uerr);
}

/* Parses plaintext response bytes; false once the connection is done with. */
static bool take_plain(cg_upconn_t *u, const char *p, size_t n)
{
    if (u->ex == NULL) { /* bytes on an idle connection: not HTTP we can trust */
        conn_close(u);
        return false;
    }
    u->got_bytes = true;
    enum llhttp_errno err = llhttp_execute(&u->parser, p, n);
    if (u->closing)
        return false;
    if (err == HPE_PAUSED && u->done) {
        complete(u);
        return false;
    }
    if (err != HPE_OK) {
        cg_log_warn(u->ex ? u->ex->rid : NULL, "upstream response: %s",
                    llhttp_get_error_reason(&u->parser));
        fail(u, CG_UERR_PROTOCOL);
        return false;
    }
    return true;
}

static void on_eof(cg_upconn_t *u)
{
    if (u->ex == NULL) { /* idle connection closed by the upstream */
        conn_close(u);
        return;
    }
    if (u->got_bytes) {
        enum llhttp_errno err = llhttp_finish(&u->parser);
        if (u->closing)
            return;
        (void)err; /* HPE_PAUSED from on_message_complete counts as done */
    }
    if (u->done) {
        complete(u); /* body delimited by the connection's end */
        return;
    }
    retry_or_fail(u, CG_UERR_RESET);
}

static void write_request(cg_upconn_t *u);
static void flush_tls(cg_upconn_t *u);

/* Ciphertext in: finish the handshake, then hand out plaintext. */
static void take_tls(cg_upconn_t *u, const char *p, size_t n)
{
    cg_tls_feed(u->tls, p, n);
    if (!u->tls->done) {
        char err[300];
        int rc = cg_tls_handshake(u->tls, err, sizeof(err));
        flush_tls(u);
        if (rc == CG_TLS_ERROR) {
            cg_log_warn(u->ex ? u->ex->rid : NULL, "upstream TLS %s:%d: %s", u->w->up.host,
                        u->w->up.port, err);
            fail(u, CG_UERR_TLS);
            return;
        }
        if (rc == CG_TLS_AGAIN || u->closing)
            return;
        if (u->request_pending)
            write_request(u);
    }
    char plain[16384];
    int r;
    while (!u->closing && (r = cg_tls_read(u->tls, plain, sizeof(plain))) > 0)
        if (!take_plain(u, plain, (size_t)r))
            return;
    if (u->closing)
        return;
    flush_tls(u);
    if (r == -CG_TLS_CLOSED)
        on_eof(u);
    else if (r == CG_TLS_ERROR)
        fail(u, CG_UERR_TLS);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    cg_upconn_t *u = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        on_eof(u);
        return;
    }
    if (u->tls)
        take_tls(u, buf->base, (size_t)nread);
    else
        take_plain(u, buf->base, (size_t)nread);
}

static void read_start(cg_upconn_t *u)
{
    uv_read_start((uv_stream_t *)&u->tcp, on_alloc, on_read);
    u->reading = true;
}

/* --- sending ------------------------------------------------------------------------ */

static void on_write(uv_write_t *req, int status)
{
    upwrite_t *wr = (upwrite_t *)req;
    cg_upconn_t *u = req->handle->data;
    free(wr);
    if (status < 0 && !u->closing)
        retry_or_fail(u, CG_UERR_RESET);
}

/* Writes bytes to the socket from a copy the connection owns. */
static bool send_bytes(cg_upconn_t *u, const char *p, size_t n)
{
    upwrite_t *wr = cg_xmalloc(sizeof(upwrite_t) + n);
    wr->len = n;
    memcpy(wr->data, p, n);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)n);
    if (cg_fault_write() || uv_write(&wr->req, (uv_stream_t *)&u->tcp, &b, 1, on_write) != 0) {
        free(wr);
        return false;
    }
    return true;
}

static void flush_tls(cg_upconn_t *u)
{
    if (u->tls->out.len == 0 || u->closing)
        return;
    if (!send_bytes(u, u->tls->out.p, u->tls->out.len))
        retry_or_fail(u, CG_UERR_RESET);
    u->tls->out.len = 0;
}

static void write_request(cg_upconn_t *u)
{
    cg_exchange_t *ex = u->ex;
    u->request_pending = false;
    bool ok;
    if (u->tls) {
        ok = cg_tls_write(u->tls, ex->up_req.p, ex->up_req.len) == 0;
        if (ok)
            flush_tls(u);
        if (u->closing)
            return;
    } else {
        ok = send_bytes(u, ex->up_req.p, ex->up_req.len);
    }
    if (!ok) {
        retry_or_fail(u, CG_UERR_RESET);
        return;
    }
    if (!u->reading)
        read_start(u);
    cg_exchange_upstream_ready(ex);
}

static void on_connect(uv_connect_t *req, int status)
{
    cg_upconn_t *u = req->data;
    if (u->closing)
        return;
    if (status < 0) {
        cg_log_warn(u->ex ? u->ex->rid : NULL, "upstream connect %s:%d: %s", u->w->up.host,
                    u->w->up.port, uv_strerror(status));
        fail(u, CG_UERR_CONNECT);
        return;
    }
    u->connected = true;
    cg_metrics->upstream_connections[CG_PROTO_LABEL_HTTP1]++;
    uv_tcp_nodelay(&u->tcp, 1);
    if (u->ex == NULL) {
        conn_close(u);
        return;
    }
    if (u->w->up_tls == NULL) {
        write_request(u);
        return;
    }
    u->tls = cg_xmalloc(sizeof(cg_tls_t));
    if (cg_tls_init(u->tls, u->w->up_tls, u->w->up_sni) != 0) {
        fail(u, CG_UERR_TLS);
        return;
    }
    u->request_pending = true;
    read_start(u);
    take_tls(u, NULL, 0);
}

static void attach(cg_upconn_t *u, cg_exchange_t *ex)
{
    u->ex = ex;
    ex->up = u;
}

static cg_upconn_t *conn_new(cg_worker_t *w)
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
    cg_upconn_t *u = cg_xcalloc(1, sizeof(*u));
    u->w = w;
    uv_tcp_init(w->loop, &u->tcp);
    u->tcp.data = u;
    u->connect.data = u;
    llhttp_init(&u->parser, HTTP_RESPONSE, &settings);
    u->parser.data = u;
    w->upconns++;
    return u;
}

void cg_upstream_send(cg_exchange_t *ex)
{
    cg_worker_t *w = ex->w;
    if (w->up_h2) {
        cg_h2up_send(ex);
        return;
    }
    if (w->idle) {
        cg_upconn_t *u = w->idle;
        w->idle = u->next_idle;
        attach(u, ex);
        write_request(u);
        return;
    }
    if (w->upconns >= w->cfg->upstream_max_connections) {
        ex->next_waiting = NULL;
        if (w->waiting_tail)
            w->waiting_tail->next_waiting = ex;
        else
            w->waiting_head = ex;
        w->waiting_tail = ex;
        ex->queued = true;
        return;
    }
    cg_upconn_t *u = conn_new(w);
    attach(u, ex);
    int r = uv_tcp_connect(&u->connect, &u->tcp, (const struct sockaddr *)&w->up_addr, on_connect);
    if (r != 0) {
        cg_log_warn(ex->rid, "upstream connect: %s", uv_strerror(r));
        fail(u, CG_UERR_CONNECT);
    }
}

static void serve_waiting(cg_worker_t *w)
{
    while (w->waiting_head && (w->idle || w->upconns < w->cfg->upstream_max_connections)) {
        cg_exchange_t *ex = w->waiting_head;
        w->waiting_head = ex->next_waiting;
        if (w->waiting_head == NULL)
            w->waiting_tail = NULL;
        ex->queued = false;
        cg_upstream_send(ex);
    }
}

void cg_upstream_abort(cg_exchange_t *ex)
{
    cg_worker_t *w = ex->w;
    if (ex->queued) {
        cg_exchange_t **p = &w->waiting_head, *prev = NULL;
        for (; *p; prev = *p, p = &(*p)->next_waiting) {
            if (*p == ex) {
                *p = ex->next_waiting;
                if (w->waiting_tail == ex)
                    w->waiting_tail = prev;
                break;
            }
        }
        ex->queued = false;
    }
    if (ex->up)
        conn_close(ex->up);
    if (ex->h2up)
        cg_h2up_abort(ex);
}

void cg_upstream_pause(cg_exchange_t *ex, bool pause)
{
    if (ex->h2up) {
        cg_h2up_pause(ex, pause);
        return;
    }
    cg_upconn_t *u = ex->up;
    if (u == NULL || u->closing)
        return;
    if (pause && u->reading) {
        uv_read_stop((uv_stream_t *)&u->tcp);
        u->reading = false;
    } else if (!pause && !u->reading) {
        read_start(u);
    }
}

void cg_upstream_close_idle(cg_worker_t *w)
{
    while (w->idle)
        conn_close(w->idle);
}
