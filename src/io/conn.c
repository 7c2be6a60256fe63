/* The connection layer: see conn.h. */
#include "conn.h"

#include "fault.h"
#include "log.h"
#include "tls.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct wreq {
    uv_write_t req;
    size_t len;
    char data[];
} wreq_t;

static void on_close(uv_handle_t *h)
{
    cg_conn_t *c = h->data;
    if (c->tls) {
        cg_tls_free(c->tls);
        free(c->tls);
        c->tls = NULL;
    }
    c->ops->closed(c);
}

void cg_conn_close(cg_conn_t *c, cg_err_t why)
{
    if (c->closing) {
        /* A FIN waiting for a peer that never reads: close now. */
        if (c->shutting && !uv_is_closing((uv_handle_t *)&c->tcp))
            uv_close((uv_handle_t *)&c->tcp, on_close);
        return;
    }
    c->closing = true;
    c->err = why;
    cg_conn_read_stop(c);
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    cg_conn_t *c = req->handle->data;
    free(req);
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_close);
}

void cg_conn_shutdown(cg_conn_t *c)
{
    if (c->closing)
        return;
    cg_conn_read_stop(c);
    c->closing = c->shutting = true;
    uv_shutdown_t *req = cg_xmalloc(sizeof(*req));
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
}

/* --- writing ----------------------------------------------------------------- */

static void on_write(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    cg_conn_t *c = req->handle->data;
    c->queued -= w->len;
    free(w);
    if (status < 0) {
        cg_conn_close(c, CG_E_WRITE);
        return;
    }
    if (c->blocked && c->queued < CG_CONN_LWM && !c->closing) {
        c->blocked = false;
        if (c->ops->drain)
            c->ops->drain(c);
    }
}

/* Copies what the socket did not take (from byte `done` on) and queues it. */
static void queue_rest(cg_conn_t *c, const uv_buf_t *bufs, unsigned n, size_t done, size_t total)
{
    size_t rest = total - done;
    wreq_t *w = cg_xmalloc(sizeof(wreq_t) + rest);
    w->len = rest;
    size_t o = 0, skip = done;
    for (unsigned i = 0; i < n; i++) {
        size_t len = bufs[i].len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        memcpy(w->data + o, bufs[i].base + skip, len - skip);
        o += len - skip;
        skip = 0;
    }
    c->queued += rest;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)rest);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
        c->queued -= rest;
        free(w);
        cg_conn_close(c, CG_E_WRITE);
        return;
    }
    if (c->queued > CG_CONN_HWM)
        c->blocked = true;
}

/* A plain outgoing connection whose connect callback has not run yet: on
 * loopback the handshake is over when connect() returns, so what is
 * written now can leave now, a loop turn sooner. libuv's own writes wait
 * for the callback; this sends past it, and a socket not yet connected
 * takes nothing (libuv then sends the rest once it is). */
static int send_early(cg_conn_t *c, const uv_buf_t *bufs, unsigned n)
{
    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return 0;
    /* uv_buf_t is laid out as struct iovec on Unix (uv/unix.h). */
    struct msghdr m = {.msg_iov = (struct iovec *)bufs, .msg_iovlen = n};
    ssize_t r = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    return r > 0 ? (int)r : 0; /* a failure is the connect callback's to report */
}

static bool connecting(const cg_conn_t *c)
{
    return c->outgoing && !c->ready && c->tls == NULL;
}

static void write_raw(cg_conn_t *c, const uv_buf_t *bufs, unsigned n)
{
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += bufs[i].len;
    if (total == 0 || c->closing)
        return;
    if (cg_fault_write()) {
        cg_conn_close(c, CG_E_WRITE);
        return;
    }
    size_t done = 0;
    if (c->queued == 0) {
        int r =
            connecting(c) ? send_early(c, bufs, n) : uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (r > 0)
            done = (size_t)r;
        else if (r < 0 && r != UV_EAGAIN) {
            cg_conn_close(c, CG_E_WRITE);
            return;
        }
    }
    if (done < total)
        queue_rest(c, bufs, n, done, total);
}

bool cg_conn_wait_drain(cg_conn_t *c)
{
    if (c->queued == 0 || c->closing)
        return false;
    c->blocked = true;
    return true;
}

/* Sends the ciphertext TLS produced (handshake records, alerts, data). */
static void flush_tls(cg_conn_t *c)
{
    if (c->tls->out.len == 0)
        return;
    uv_buf_t b = uv_buf_init(c->tls->out.p, (unsigned)c->tls->out.len);
    write_raw(c, &b, 1);
    c->tls->out.len = 0;
}

void cg_conn_write(cg_conn_t *c, const uv_buf_t *bufs, unsigned n)
{
    if (c->closing)
        return;
    if (c->tls == NULL) {
        write_raw(c, bufs, n);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        if (cg_tls_write(c->tls, bufs[i].base, bufs[i].len) != CG_OK) {
            c->tls->out.len = 0;
            cg_conn_close(c, CG_E_TLS);
            return;
        }
    }
    flush_tls(c);
}

/* --- reading ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    /* One loop per process, and every read is consumed (or copied) before
     * on_read returns: all connections share one read buffer instead of
     * holding one each. */
    static char slab[65536];
    (void)h;
    (void)hint;
    *buf = uv_buf_init(slab, sizeof(slab));
}

static const char *who(const cg_conn_t *c)
{
    return c->peer ? c->peer : c->outgoing ? "upstream" : "client";
}

static void become_ready(cg_conn_t *c)
{
    c->ready = true;
    if (c->ops->ready)
        c->ops->ready(c);
}

/* Ciphertext in: the handshake first, then plaintext out to the owner. */
static void take_tls(cg_conn_t *c, const char *p, size_t n)
{
    cg_tls_feed(c->tls, p, n);
    if (!c->tls->done) {
        char err[300];
        cg_err_t rc = cg_tls_handshake(c->tls, err, sizeof(err));
        flush_tls(c);
        if (rc == CG_E_AGAIN || c->closing)
            return;
        if (rc != CG_OK) {
            /* A client's failed handshake is its own business; an
             * upstream's is the operator's. */
            cg_log(c->outgoing && !c->quiet ? CG_LOG_WARN : CG_LOG_DEBUG, NULL, "%s TLS: %s",
                   who(c), err);
            cg_conn_close(c, CG_E_TLS);
            return;
        }
        become_ready(c);
    }
    char plain[16384];
    size_t got = 0;
    cg_err_t rc = CG_OK;
    while (!c->closing && (rc = cg_tls_read(c->tls, plain, sizeof(plain), &got)) == CG_OK &&
           got > 0)
        c->ops->read(c, plain, got);
    if (c->closing)
        return;
    flush_tls(c);
    if (rc != CG_OK)
        cg_conn_close(c, rc);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    cg_conn_t *c = s->data;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        cg_conn_close(c, nread == UV_EOF ? CG_E_CLOSED : CG_E_RESET);
        return;
    }
    if (c->tls)
        take_tls(c, buf->base, (size_t)nread);
    else
        c->ops->read(c, buf->base, (size_t)nread);
}

void cg_conn_read_start(cg_conn_t *c)
{
    if (c->reading || c->closing)
        return;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
        c->reading = true;
}

void cg_conn_read_stop(cg_conn_t *c)
{
    if (!c->reading)
        return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
}

/* --- opening ------------------------------------------------------------------ */

static void init(cg_conn_t *c, uv_loop_t *loop, const cg_conn_ops_t *ops, void *owner)
{
    memset(c, 0, sizeof(*c));
    c->ops = ops;
    c->owner = owner;
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    c->connect.data = c;
}

static cg_err_t start_tls(cg_conn_t *c, struct cg_tls_conf *conf, const char *sni)
{
    c->tls = cg_xmalloc(sizeof(cg_tls_t));
    if (cg_tls_init(c->tls, conf, sni) != CG_OK) {
        cg_log_warn(NULL, "%s TLS: cannot set up a session", who(c));
        return CG_E_TLS;
    }
    return CG_OK;
}

/* An accepted (or adopted) socket is in the handle: TLS, then reading. */
static cg_err_t serve_accepted(cg_conn_t *c, cg_err_t err, struct cg_tls_conf *conf)
{
    if (err == CG_OK && conf)
        err = start_tls(c, conf, NULL);
    if (err != CG_OK) {
        cg_conn_close(c, err);
        return err;
    }
    c->ready = conf == NULL;
    cg_conn_read_start(c);
    return CG_OK;
}

cg_err_t cg_conn_accept(cg_conn_t *c, uv_stream_t *server, struct cg_tls_conf *conf,
                        const cg_conn_ops_t *ops, void *owner)
{
    init(c, server->loop, ops, owner);
    cg_err_t err = uv_accept(server, (uv_stream_t *)&c->tcp) == 0 ? CG_OK : CG_E_RESET;
    return serve_accepted(c, err, conf);
}

cg_err_t cg_conn_adopt(cg_conn_t *c, uv_loop_t *loop, int fd, struct cg_tls_conf *conf,
                       const cg_conn_ops_t *ops, void *owner)
{
    init(c, loop, ops, owner);
    cg_err_t err = CG_OK;
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        close(fd); /* the handle did not take it */
        err = CG_E_RESET;
    } else {
        uv_tcp_nodelay(&c->tcp, 1); /* fails harmlessly on a socketpair */
    }
    return serve_accepted(c, err, conf);
}

static void on_connect(uv_connect_t *req, int status)
{
    cg_conn_t *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        cg_log(c->quiet ? CG_LOG_DEBUG : CG_LOG_WARN, NULL, "%s connect: %s", who(c),
               uv_strerror(status));
        cg_conn_close(c, CG_E_CONNECT);
        return;
    }
    if (c->tls == NULL) {
        become_ready(c);
        return;
    }
    take_tls(c, NULL, 0); /* sends the ClientHello */
}

void cg_conn_connect(cg_conn_t *c, uv_loop_t *loop, const struct sockaddr *addr,
                     struct cg_tls_conf *conf, const char *sni, const cg_conn_ops_t *ops,
                     void *owner)
{
    init(c, loop, ops, owner);
    c->outgoing = true;
    cg_err_t err = conf ? start_tls(c, conf, sni) : CG_OK;
    /* Set before the socket exists, libuv applies it as it makes it: a
     * request sent early (send_early) is not held back by Nagle. */
    uv_tcp_nodelay(&c->tcp, 1);
    if (err == CG_OK && uv_tcp_connect(&c->connect, &c->tcp, addr, on_connect) != 0)
        err = CG_E_CONNECT;
    if (err != CG_OK) {
        cg_conn_close(c, err);
        return;
    }
    /* Reading starts with the connect, though libuv reads nothing before
     * the connect callback: the socket then enters epoll once, for both
     * directions, instead of once for the connect and again for reading. */
    cg_conn_read_start(c);
}

const char *cg_conn_alpn(const cg_conn_t *c)
{
    return c->tls && c->tls->done ? mbedtls_ssl_get_alpn_protocol(&c->tls->ssl) : NULL;
}
