/*
 * HTTP/2 upstreams (CITEGATE_UPSTREAM_PROTOCOL=h2): h2c with prior knowledge
 * on http://, h2 by ALPN on https://. Streams of many exchanges share a
 * connection up to the peer's SETTINGS_MAX_CONCURRENT_STREAMS, then the
 * pool opens another (up to CITEGATE_UPSTREAM_MAX_CONNECTIONS), then
 * exchanges wait in the worker's queue. A connection that sent GOAWAY takes
 * no new streams. Window updates are sent only as the client drains, so a
 * slow client slows its own stream and no other.
 */
#include "server.h"

#include "fault.h"
#include "log.h"
#include "metrics.h"
#include "tls.h"

#include <ctype.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

typedef struct h2up {
    cg_worker_t *w;
    uv_tcp_t tcp;
    uv_connect_t connect;
    cg_tls_t *tls;
    nghttp2_session *s;
    bool connected, ready, closing, goaway;
    unsigned nstreams;
    uv_timer_t ping;     /* liveness of an idle connection */
    bool ping_out;       /* a PING is waiting for its ACK */
    int handles;         /* open libuv handles; freed at zero */
    cg_exchange_t *exs; /* exchanges with a stream here */
    struct h2up *next;
} h2up_t;

typedef struct upwrite {
    uv_write_t req;
    char data[];
} upwrite_t;

static h2up_t *conns;
static unsigned nconns;

static void flush(h2up_t *u);
static void detach(h2up_t *u, cg_exchange_t *ex);
static h2up_t *pick(cg_worker_t *w);
static bool connecting(void);
static void start_exchange(h2up_t *u, cg_exchange_t *ex);

static unsigned max_streams(h2up_t *u)
{
    if (!u->ready)
        return 1; /* until the peer's SETTINGS arrive */
    uint32_t m = nghttp2_session_get_remote_settings(u->s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    return m ? m : 1;
}

static void serve_queue(cg_worker_t *w);

#define PING_EVERY_MS 30000

static void on_close(uv_handle_t *h)
{
    h2up_t *u = h->data;
    if (--u->handles > 0)
        return;
    for (h2up_t **p = &conns; *p; p = &(*p)->next)
        if (*p == u) {
            *p = u->next;
            break;
        }
    nconns--;
    if (u->connected)
        cg_metrics->upstream_connections[CG_PROTO_LABEL_H2]--;
    if (u->s)
        nghttp2_session_del(u->s);
    if (u->tls) {
        cg_tls_free(u->tls);
        free(u->tls);
    }
    cg_worker_t *w = u->w;
    free(u);
    serve_queue(w);
}

static void detach(h2up_t *u, cg_exchange_t *ex)
{
    if (ex->h2_prev)
        ex->h2_prev->h2_next = ex->h2_next;
    else
        u->exs = ex->h2_next;
    if (ex->h2_next)
        ex->h2_next->h2_prev = ex->h2_prev;
    ex->h2_prev = ex->h2_next = NULL;
    ex->h2up = NULL;
    if (u->s)
        nghttp2_session_set_stream_user_data(u->s, ex->h2_id, NULL);
    u->nstreams--;
}

/* Ends every exchange still on the connection, then closes it. */
static void conn_fail(h2up_t *u, int uerr)
{
    if (u->closing)
        return;
    u->closing = true;
    while (u->exs) {
        cg_exchange_t *ex = u->exs;
        detach(u, ex);
        cg_ex_on_end(ex, uerr);
    }
    /* Exchanges waiting for this connection's SETTINGS fail with it, unless
     * another connection can take them. */
    cg_worker_t *w = u->w;
    if (!u->ready && w->up_h2 && !pick(w) && !connecting()) {
        cg_exchange_t *ex = w->waiting_head;
        w->waiting_head = w->waiting_tail = NULL;
        while (ex) {
            cg_exchange_t *next = ex->next_waiting;
            ex->queued = false;
            cg_ex_on_end(ex, uerr);
            ex = next;
        }
    }
    uv_close((uv_handle_t *)&u->ping, on_close);
    uv_close((uv_handle_t *)&u->tcp, on_close);
}

/* --- nghttp2 callbacks ------------------------------------------------------------- */

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    cg_exchange_t *ex = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (ex == NULL || f->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (nl == 7 && memcmp(name, ":status", 7) == 0) {
        ex->h2_status = atoi((const char *)value);
        cg_hdrs_reset(&ex->h2_hdrs);
        return 0;
    }
    cg_hdrs_on_field(&ex->h2_hdrs, (const char *)name, nl);
    cg_hdrs_on_value(&ex->h2_hdrs, (const char *)value, vl);
    return 0;
}

static void stream_ended(nghttp2_session *s, int32_t id, cg_exchange_t *ex, int uerr)
{
    (void)s;
    (void)id;
    h2up_t *u = ex->h2up;
    if (u)
        detach(u, ex);
    cg_ex_on_end(ex, uerr);
    if (u)
        serve_queue(u->w);
}

/* A stream the upstream refused before processing it (beyond a GOAWAY's
 * last stream id, or reset with REFUSED_STREAM) is safe to send again
 * (RFC 9113 §8.7): it goes back to the front of the queue, once. */
static bool resend(h2up_t *u, cg_exchange_t *ex)
{
    if (ex->h2_head_done || ex->h2_resent >= 2)
        return false;
    ex->h2_resent++;
    detach(u, ex);
    cg_worker_t *w = u->w;
    ex->next_waiting = w->waiting_head;
    w->waiting_head = ex;
    if (w->waiting_tail == NULL)
        w->waiting_tail = ex;
    ex->queued = true;
    return true;
}

/* GOAWAY: no new streams here; those above last_stream_id were never
 * processed and move to another connection (u->exs is newest first, so
 * pushing each to the queue's front keeps their order). */
static void on_goaway(h2up_t *u, int32_t last)
{
    u->goaway = true;
    for (cg_exchange_t *ex = u->exs, *next; ex; ex = next) {
        next = ex->h2_next;
        if (ex->h2_id > last)
            resend(u, ex);
    }
    serve_queue(u->w);
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    h2up_t *u = ud;
    if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK)) {
        u->ready = true;
        serve_queue(u->w);
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
    cg_exchange_t *ex = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (ex == NULL)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && ex->h2_status >= 200 && !ex->h2_head_done) {
        ex->h2_head_done = true;
        cg_ex_on_head(ex, ex->h2_status, &ex->h2_hdrs);
        ex = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
        if (ex == NULL)
            return 0;
    }
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) && ex->h2_head_done)
        stream_ended(s, f->hd.stream_id, ex, -1);
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    /* The connection's window always reopens; a stream's only as fast as its
     * own client reads, so one stalled client never stalls its neighbours. */
    nghttp2_session_consume_connection(s, len);
    cg_exchange_t *ex = nghttp2_session_get_stream_user_data(s, id);
    if (ex == NULL) {
        nghttp2_session_consume_stream(s, id, len);
        return 0;
    }
    cg_ex_on_body(ex, (const char *)data, len);
    ex = nghttp2_session_get_stream_user_data(s, id);
    if (ex && ex->paused)
        ex->h2_unconsumed += len;
    else
        nghttp2_session_consume_stream(s, id, len);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    h2up_t *u = ud;
    cg_exchange_t *ex = nghttp2_session_get_stream_user_data(s, id);
    if (ex == NULL)
        return 0;
    if (code == NGHTTP2_REFUSED_STREAM && resend(u, ex)) {
        serve_queue(u->w);
        return 0;
    }
    stream_ended(s, id, ex, code == NGHTTP2_NO_ERROR && ex->h2_head_done ? -1 : CG_UERR_RESET);
    return 0;
}

static ssize_t read_request_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                                 uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    cg_exchange_t *ex = src->ptr;
    size_t avail = ex->up_req.len - ex->h2_body_off;
    size_t n = avail < len ? avail : len;
    memcpy(buf, ex->up_req.p + ex->h2_body_off, n);
    ex->h2_body_off += n;
    if (ex->h2_body_off == ex->up_req.len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* --- I/O ------------------------------------------------------------------------------ */

static void on_write(uv_write_t *req, int status)
{
    h2up_t *u = req->handle->data;
    free(req);
    if (status < 0)
        conn_fail(u, CG_UERR_RESET);
}

static void send_bytes(h2up_t *u, const void *p, size_t n)
{
    upwrite_t *wr = cg_xmalloc(sizeof(upwrite_t) + n);
    memcpy(wr->data, p, n);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)n);
    if (cg_fault_write() || uv_write(&wr->req, (uv_stream_t *)&u->tcp, &b, 1, on_write) != 0) {
        free(wr);
        conn_fail(u, CG_UERR_RESET);
    }
}

static void flush(h2up_t *u)
{
    while (!u->closing && u->s) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(u->s, &data);
        if (n < 0) {
            conn_fail(u, CG_UERR_PROTOCOL);
            return;
        }
        if (n == 0)
            break;
        if (u->tls) {
            cg_tls_write(u->tls, (const char *)data, (size_t)n);
            send_bytes(u, u->tls->out.p, u->tls->out.len);
            u->tls->out.len = 0;
        } else {
            send_bytes(u, data, (size_t)n);
        }
    }
}

static void take_plain(h2up_t *u, const char *p, size_t n)
{
    ssize_t r = nghttp2_session_mem_recv(u->s, (const uint8_t *)p, n);
    if (r < 0) {
        cg_log_warn(NULL, "upstream h2: %s", nghttp2_strerror((int)r));
        conn_fail(u, CG_UERR_PROTOCOL);
        return;
    }
    flush(u);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char slab[65536];
    (void)h;
    (void)hint;
    *buf = uv_buf_init(slab, sizeof(slab));
}

static void session_start(h2up_t *u);

/* CITEGATE_UPSTREAM_PROTOCOL=auto and the upstream did not pick h2: from
 * now on this worker speaks HTTP/1.1 to it. No stream was opened yet
 * (exchanges wait until the peer's SETTINGS), so the waiting ones simply
 * go the HTTP/1.1 way. */
static void fall_back_to_http1(h2up_t *u)
{
    cg_worker_t *w = u->w;
    cg_log_info(NULL, "upstream %s:%d chose HTTP/1.1 by ALPN", w->up.host, w->up.port);
    w->up_h2 = false;
    conn_fail(u, CG_UERR_PROTOCOL); /* no exchanges are attached */
    cg_exchange_t *ex = w->waiting_head;
    w->waiting_head = w->waiting_tail = NULL;
    while (ex) {
        cg_exchange_t *next = ex->next_waiting;
        ex->queued = false;
        cg_upstream_send(ex);
        ex = next;
    }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    h2up_t *u = st->data;
    if (nread == 0 || u->closing)
        return;
    if (nread < 0) {
        conn_fail(u, CG_UERR_RESET);
        return;
    }
    if (u->tls == NULL) {
        take_plain(u, buf->base, (size_t)nread);
        return;
    }
    cg_tls_feed(u->tls, buf->base, (size_t)nread);
    if (!u->tls->done) {
        char err[300];
        int rc = cg_tls_handshake(u->tls, err, sizeof(err));
        if (u->tls->out.len) {
            send_bytes(u, u->tls->out.p, u->tls->out.len);
            u->tls->out.len = 0;
        }
        if (rc == CG_TLS_ERROR) {
            cg_log_warn(NULL, "upstream TLS %s:%d: %s", u->w->up.host, u->w->up.port, err);
            conn_fail(u, CG_UERR_TLS);
            return;
        }
        if (rc == CG_TLS_AGAIN)
            return;
        const char *alpn = mbedtls_ssl_get_alpn_protocol(&u->tls->ssl);
        if ((alpn == NULL || strcmp(alpn, "h2") != 0) &&
            u->w->cfg->upstream_protocol == CG_PROTO_AUTO) {
            fall_back_to_http1(u);
            return;
        }
        if (alpn == NULL || strcmp(alpn, "h2") != 0) {
            cg_log_warn(NULL, "upstream %s:%d did not agree to h2 (ALPN)", u->w->up.host,
                        u->w->up.port);
            conn_fail(u, CG_UERR_PROTOCOL);
            return;
        }
        session_start(u);
    }
    char plain[16384];
    int r;
    while (!u->closing && (r = cg_tls_read(u->tls, plain, sizeof(plain))) > 0)
        take_plain(u, plain, (size_t)r);
}

static void session_start(h2up_t *u)
{
    static nghttp2_session_callbacks *cbs;
    static nghttp2_option *opt;
    if (cbs == NULL) {
        nghttp2_session_callbacks_new(&cbs);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        nghttp2_option_new(&opt);
        nghttp2_option_set_no_auto_window_update(opt, 1);
    }
    nghttp2_session_client_new2(&u->s, cbs, u, opt);
    nghttp2_submit_settings(u->s, NGHTTP2_FLAG_NONE, NULL, 0);
    flush(u);
}

static void on_connect(uv_connect_t *req, int status)
{
    h2up_t *u = req->data;
    if (u->closing)
        return;
    if (status < 0) {
        cg_log_warn(NULL, "upstream connect %s:%d: %s", u->w->up.host, u->w->up.port,
                    uv_strerror(status));
        conn_fail(u, CG_UERR_CONNECT);
        return;
    }
    u->connected = true;
    cg_metrics->upstream_connections[CG_PROTO_LABEL_H2]++;
    uv_tcp_nodelay(&u->tcp, 1);
    uv_read_start((uv_stream_t *)&u->tcp, on_alloc, on_read);
    if (u->w->up_tls == NULL) {
        session_start(u);
        return;
    }
    u->tls = cg_xmalloc(sizeof(cg_tls_t));
    cg_tls_init(u->tls, u->w->up_tls, u->w->up_sni);
    char err[300];
    cg_tls_handshake(u->tls, err, sizeof(err));
    send_bytes(u, u->tls->out.p, u->tls->out.len);
    u->tls->out.len = 0;
}

/* An idle pooled connection is probed with PING; one that did not answer
 * the previous probe is closed before an exchange finds it dead. */
static void on_ping(uv_timer_t *t)
{
    h2up_t *u = t->data;
    if (u->closing || !u->ready || u->nstreams > 0)
        return;
    if (u->ping_out) {
        cg_log_warn(NULL, "upstream h2 connection did not answer PING: closing it");
        conn_fail(u, CG_UERR_TIMEOUT);
        return;
    }
    u->ping_out = true;
    nghttp2_submit_ping(u->s, NGHTTP2_FLAG_NONE, NULL);
    flush(u);
}

static h2up_t *conn_new(cg_worker_t *w)
{
    h2up_t *u = cg_xcalloc(1, sizeof(*u));
    u->w = w;
    uv_tcp_init(w->loop, &u->tcp);
    u->tcp.data = u;
    uv_timer_init(w->loop, &u->ping);
    u->ping.data = u;
    u->handles = 2;
    uv_timer_start(&u->ping, on_ping, PING_EVERY_MS, PING_EVERY_MS);
    u->connect.data = u;
    u->next = conns;
    conns = u;
    nconns++;
    if (uv_tcp_connect(&u->connect, &u->tcp, (const struct sockaddr *)&w->up_addr, on_connect) != 0)
        conn_fail(u, CG_UERR_CONNECT);
    return u;
}

/* --- requests -------------------------------------------------------------------------- */

static void lower(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)tolower((unsigned char)p[i]);
}

/* The next CRLF in [p, end): up_req is not NUL-terminated. */
static char *crlf(char *p, char *end)
{
    return memmem(p, (size_t)(end - p), "\r\n", 2);
}

/* Submits the exchange's request (kept as HTTP/1.1 text in up_req). */
static void start_exchange(h2up_t *u, cg_exchange_t *ex)
{
    char *req = ex->up_req.p;
    char *end = memmem(req, ex->up_req.len, "\r\n\r\n", 4);
    size_t head_len = (size_t)(end - req) + 4;
    ex->h2_body_off = head_len;
    nghttp2_nv nva[64];
    size_t k = 0;
    char *line = req, *eol = crlf(line, end + 2);
    char *sp1 = memchr(line, ' ', (size_t)(eol - line));
    char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    nva[k++] = (nghttp2_nv){(uint8_t *)":method", (uint8_t *)line, 7, (size_t)(sp1 - line), 0};
    nva[k++] = (nghttp2_nv){(uint8_t *)":path", (uint8_t *)sp1 + 1, 5, (size_t)(sp2 - sp1 - 1), 0};
    nva[k++] = (nghttp2_nv){(uint8_t *)":scheme", (uint8_t *)(u->tls || u->w->up.tls ? "https" : "http"),
                            7, u->w->up.tls ? 5 : 4, 0};
    nva[k++] = (nghttp2_nv){(uint8_t *)":authority", (uint8_t *)u->w->up.authority, 10,
                            strlen(u->w->up.authority), 0};
    for (line = eol + 2; line < end + 2 && k < 64; line = eol + 2) {
        eol = crlf(line, end + 2);
        if (eol == NULL || eol == line)
            break;
        char *colon = memchr(line, ':', (size_t)(eol - line));
        if (colon == NULL)
            continue;
        size_t nl = (size_t)(colon - line);
        lower(line, nl);
        if (nl == 4 && memcmp(line, "host", 4) == 0)
            continue;
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        nva[k++] = (nghttp2_nv){(uint8_t *)line, (uint8_t *)v, nl, (size_t)(eol - v), 0};
    }
    nghttp2_data_provider prd = {.source.ptr = ex, .read_callback = read_request_body};
    bool body = ex->up_req.len > head_len;
    int32_t id = nghttp2_submit_request(u->s, NULL, nva, k, body ? &prd : NULL, ex);
    if (id < 0) {
        cg_ex_on_end(ex, CG_UERR_PROTOCOL);
        return;
    }
    ex->h2up = u;
    ex->h2_id = id;
    ex->h2_next = u->exs;
    if (u->exs)
        u->exs->h2_prev = ex;
    u->exs = ex;
    u->nstreams++;
    flush(u);
    cg_exchange_upstream_ready(ex);
}

static h2up_t *pick(cg_worker_t *w)
{
    for (h2up_t *u = conns; u; u = u->next)
        if (!u->closing && !u->goaway && u->s && u->ready && u->nstreams < max_streams(u))
            return u;
    return NULL;
}

static bool connecting(void)
{
    for (h2up_t *u = conns; u; u = u->next)
        if (!u->closing && !u->goaway && !u->ready)
            return true;
    return false;
}

static void serve_queue(cg_worker_t *w)
{
    while (w->up_h2 && w->waiting_head) {
        h2up_t *u = pick(w);
        if (u == NULL) {
            if (!connecting() && nconns < w->cfg->upstream_max_connections)
                conn_new(w);
            return;
        }
        cg_exchange_t *ex = w->waiting_head;
        w->waiting_head = ex->next_waiting;
        if (w->waiting_head == NULL)
            w->waiting_tail = NULL;
        ex->queued = false;
        start_exchange(u, ex);
    }
}

void cg_h2up_send(cg_exchange_t *ex)
{
    cg_worker_t *w = ex->w;
    ex->next_waiting = NULL;
    if (w->waiting_tail)
        w->waiting_tail->next_waiting = ex;
    else
        w->waiting_head = ex;
    w->waiting_tail = ex;
    ex->queued = true;
    serve_queue(w);
}

void cg_h2up_abort(cg_exchange_t *ex)
{
    h2up_t *u = ex->h2up;
    if (u == NULL)
        return;
    detach(u, ex);
    nghttp2_submit_rst_stream(u->s, NGHTTP2_FLAG_NONE, ex->h2_id, NGHTTP2_CANCEL);
    flush(u);
    serve_queue(u->w);
}

void cg_h2up_pause(cg_exchange_t *ex, bool pause)
{
    h2up_t *u = ex->h2up;
    if (u == NULL || pause || ex->h2_unconsumed == 0)
        return;
    nghttp2_session_consume_stream(u->s, ex->h2_id, ex->h2_unconsumed);
    ex->h2_unconsumed = 0;
    flush(u);
}
