/*
 * Client side: listeners (SO_REUSEPORT, shared by the workers) and HTTP/1.1
 * connections parsed with llhttp. One request at a time per connection: the
 * parser pauses at each message's end and reading stops until the response
 * is done, which also bounds what a pipelining client can make us buffer.
 */
#include "server.h"

#include "citegate/json.h"
#include "fault.h"
#include "log.h"
#include "metrics.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

uint64_t cg_now_ms(const cg_worker_t *w)
{
    return uv_now(w->loop);
}

/* --- headers ---------------------------------------------------------------- */

void cg_hdrs_reset(cg_hdrs_t *h)
{
    h->buf.len = 0;
    h->n = 0;
    h->in_value = false;
}

void cg_hdrs_free(cg_hdrs_t *h)
{
    cg_buf_free(&h->buf);
    free(h->v);
    memset(h, 0, sizeof(*h));
}

int cg_hdrs_on_field(cg_hdrs_t *h, const char *p, size_t n)
{
    if (h->buf.len + n > CG_MAX_HEADER_BYTES)
        return -1;
    if (h->n == 0 || h->in_value) {
        h->v = cg_grow(h->v, h->n, &h->cap, 16, sizeof(cg_hdr_t));
        cg_hdr_t *x = &h->v[h->n++];
        x->name = h->buf.len;
        x->name_len = 0;
        x->value = 0;
        x->value_len = 0;
        h->in_value = false;
    }
    cg_buf_put(&h->buf, p, n);
    h->v[h->n - 1].name_len += n;
    return 0;
}

int cg_hdrs_on_value(cg_hdrs_t *h, const char *p, size_t n)
{
    if (h->n == 0 || h->buf.len + n > CG_MAX_HEADER_BYTES)
        return -1;
    cg_hdr_t *x = &h->v[h->n - 1];
    if (!h->in_value) {
        x->value = h->buf.len;
        h->in_value = true;
    }
    cg_buf_put(&h->buf, p, n);
    x->value_len += n;
    return 0;
}

cg_span_t cg_hdr_name(const cg_hdrs_t *h, size_t i)
{
    return cg_span(h->buf.p + h->v[i].name, h->v[i].name_len);
}

cg_span_t cg_hdr_value(const cg_hdrs_t *h, size_t i)
{
    return cg_span(h->buf.p + h->v[i].value, h->v[i].value_len);
}

static bool span_ieq(cg_span_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

cg_span_t cg_hdrs_get(const cg_hdrs_t *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (span_ieq(cg_hdr_name(h, i), name))
            return cg_hdr_value(h, i);
    return cg_span(NULL, 0);
}

/* Does the comma-separated list in `list` contain token `name`? */
static bool list_has(cg_span_t list, cg_span_t name)
{
    size_t i = 0;
    while (i < list.n) {
        while (i < list.n && (list.p[i] == ' ' || list.p[i] == ',' || list.p[i] == '\t'))
            i++;
        size_t s = i;
        while (i < list.n && list.p[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (list.p[e - 1] == ' ' || list.p[e - 1] == '\t'))
            e--;
        if (e - s == name.n && strncasecmp(list.p + s, name.p, name.n) == 0)
            return true;
    }
    return false;
}

bool cg_hdr_is_hop(const cg_hdrs_t *h, cg_span_t name)
{
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection",
                                      "proxy-authenticate", "proxy-authorization", "te",
                                      "trailer", "transfer-encoding", "upgrade", NULL};
    for (int i = 0; hop[i]; i++)
        if (span_ieq(name, hop[i]))
            return true;
    cg_span_t conn = cg_hdrs_get(h, "connection");
    return conn.p && list_has(conn, name);
}

/* --- responses --------------------------------------------------------------- */

const char *cg_status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
    }
}

typedef struct wreq {
    uv_write_t req;
    cg_client_t *c;
    size_t len;
    char data[];
} wreq_t;

static void on_write(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    cg_client_t *c = w->c;
    c->queued -= w->len;
    free(w);
    if (status < 0) {
        cg_client_close(c);
        return;
    }
    if (c->ex && c->queued < CG_CLIENT_LWM)
        cg_exchange_client_drained(c->ex);
    if (c->h2 && c->queued < CG_CLIENT_LWM)
        cg_h2_flush(c);
}


void cg_client_write(cg_client_t *c, const uv_buf_t *bufs, unsigned n)
{
    if (c->closing)
        return;
    if (c->tls == NULL) {
        cg_client_write_raw(c, bufs, n);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        if (cg_tls_write(c->tls, bufs[i].base, bufs[i].len) != 0) {
            cg_client_close(c);
            return;
        }
    }
    uv_buf_t b = uv_buf_init(c->tls->out.p, (unsigned)c->tls->out.len);
    cg_client_write_raw(c, &b, 1);
    c->tls->out.len = 0;
}

void cg_client_write_raw(cg_client_t *c, const uv_buf_t *bufs, unsigned n)
{
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += bufs[i].len;
    if (total == 0)
        return;
    /* Write at once what the socket takes; copy only the rest, so spans of
     * an upstream read never have to outlive this call. */
    size_t done = 0;
    if (c->queued == 0) {
        int r = cg_fault_write() ? UV_EPIPE : uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
        if (r > 0)
            done = (size_t)r;
        else if (r < 0 && r != UV_EAGAIN) {
            cg_client_close(c);
            return;
        }
    }
    if (done == total)
        return;
    size_t rest = total - done;
    wreq_t *w = cg_xmalloc(sizeof(wreq_t) + rest);
    w->c = c;
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
    if ((cg_fault_write() ? UV_EPIPE : uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write)) < 0) {
        c->queued -= rest;
        free(w);
        cg_client_close(c);
    }
}

void cg_send_simple(cg_client_t *c, int status, const char *ctype, const char *body, size_t len,
                    const char *rid)
{
    cg_buf_t h = {0};
    cg_buf_printf(&h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n", status,
                  cg_status_text(status), ctype, len);
    if (rid)
        cg_buf_printf(&h, "X-Request-Id: %s\r\n", rid);
    if (!c->msg.keep_alive)
        cg_buf_puts(&h, "Connection: close\r\n");
    cg_buf_puts(&h, "\r\n");
    uv_buf_t bufs[2] = {uv_buf_init(h.p, (unsigned)h.len), uv_buf_init((char *)body, (unsigned)len)};
    cg_client_write(c, bufs, 2);
    cg_buf_free(&h);
}

void cg_error_json(cg_buf_t *b, const char *type, const char *code, const char *msg)
{
    cg_buf_puts(b, "{\"error\":{\"message\":");
    cg_json_put_cstr(b, msg);
    cg_buf_puts(b, ",\"type\":");
    cg_json_put_cstr(b, type);
    cg_buf_puts(b, ",\"code\":");
    cg_json_put_cstr(b, code);
    cg_buf_puts(b, "}}");
}

void cg_send_error(cg_client_t *c, int status, const char *type, const char *code,
                   const char *msg, const char *rid)
{
    cg_buf_t b = {0};
    cg_error_json(&b, type, code, msg);
    cg_send_simple(c, status, "application/json", b.p, b.len, rid);
    cg_buf_free(&b);
}

/* --- the HTTP/1.1 side of an exchange -------------------------------------------- */

static void h1_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h, long long clen)
{
    cg_client_t *c = ex->down_ctx;
    bool nobody = status < 200 || status == 204 || status == 304 || c->msg.method == HTTP_HEAD;
    c->chunked = !nobody && clen < 0;
    if (c->chunked && c->msg.http10) {
        /* HTTP/1.0 has no chunked coding: the body ends with the connection. */
        c->chunked = false;
        c->msg.keep_alive = false;
    }
    cg_buf_t b = {0};
    cg_buf_printf(&b, "HTTP/1.1 %d %s\r\n", status, cg_status_text(status));
    for (size_t i = 0; i < h->n; i++) {
        cg_span_t name = cg_hdr_name(h, i), v = cg_hdr_value(h, i);
        cg_buf_printf(&b, "%.*s: %.*s\r\n", (int)name.n, name.p, (int)v.n, v.p);
    }
    if (clen >= 0)
        cg_buf_printf(&b, "Content-Length: %lld\r\n", clen);
    else if (c->chunked)
        cg_buf_puts(&b, "Transfer-Encoding: chunked\r\n");
    if (!c->msg.keep_alive)
        cg_buf_puts(&b, "Connection: close\r\n");
    cg_buf_puts(&b, "\r\n");
    uv_buf_t ub = uv_buf_init(b.p, (unsigned)b.len);
    cg_client_write(c, &ub, 1);
    cg_buf_free(&b);
}

/* Writes body bytes, as one chunk when chunked. */
static void h1_data(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    cg_client_t *c = ex->down_ctx;
    if (!c->chunked) {
        cg_client_write(c, bufs, n);
        return;
    }
    char head[24];
    int hl = snprintf(head, sizeof(head), "%zx\r\n", total);
    uv_buf_t stackv[18];
    uv_buf_t *v = n + 2 <= 18 ? stackv : cg_xmalloc((n + 2) * sizeof(uv_buf_t));
    v[0] = uv_buf_init(head, (unsigned)hl);
    memcpy(v + 1, bufs, n * sizeof(uv_buf_t));
    v[n + 1] = uv_buf_init("\r\n", 2);
    cg_client_write(c, v, n + 2);
    if (v != stackv)
        free(v);
}

static void h1_end(cg_exchange_t *ex, bool complete)
{
    cg_client_t *c = ex->down_ctx;
    if (!complete) {
        c->msg.keep_alive = false; /* only closing tells the client */
        return;
    }
    if (c->chunked) {
        uv_buf_t b = uv_buf_init("0\r\n\r\n", 5);
        cg_client_write(c, &b, 1);
    }
}

static size_t h1_queued(cg_exchange_t *ex)
{
    return ((cg_client_t *)ex->down_ctx)->queued;
}

static void h1_done(cg_exchange_t *ex)
{
    cg_client_t *c = ex->down_ctx;
    if (c->ex != ex)
        return;
    c->ex = NULL;
    if (!ex->gone)
        cg_client_response_done(c);
}

const cg_down_ops_t cg_h1_down = {h1_head, h1_data, h1_end, h1_queued, h1_done};

/* --- connections --------------------------------------------------------------- */

static void stop_reading_handle(cg_client_t *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static void on_close(uv_handle_t *h)
{
    cg_client_t *c = h->data;
    cg_worker_t *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->nclients--;
    if (c->tls) {
        cg_tls_free(c->tls);
        free(c->tls);
    }
    cg_buf_free(&c->msg.url);
    cg_hdrs_free(&c->msg.hdrs);
    cg_buf_free(&c->msg.body);
    cg_buf_free(&c->pending);
    free(c);
}

void cg_client_close(cg_client_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->ex)
        cg_exchange_client_gone(c->ex);
    cg_h2_free(c);
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    cg_client_t *c = req->handle->data;
    free(req);
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* Ends the connection once queued bytes are written: a FIN, not a reset. */
static void close_after_flush(cg_client_t *c)
{
    c->closing = true;
    stop_reading_handle(c);
    uv_shutdown_t *req = cg_xmalloc(sizeof(*req));
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
}

static void reset_request(cg_client_t *c)
{
    c->msg.url.len = 0;
    cg_hdrs_reset(&c->msg.hdrs);
    c->msg.body.len = 0;
    c->reject = 0;
    c->reject_msg = NULL;
    c->message_done = false;
}

static int on_message_begin(llhttp_t *p)
{
    reset_request(p->data);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    cg_client_t *c = p->data;
    if (c->msg.url.len + n > CG_MAX_HEADER_BYTES) {
        c->reject = 431;
        llhttp_set_error_reason(p, "request line too long");
        return HPE_USER;
    }
    cg_buf_put(&c->msg.url, at, n);
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    cg_client_t *c = p->data;
    if (cg_hdrs_on_field(&c->msg.hdrs, at, n) != 0) {
        c->reject = 431;
        llhttp_set_error_reason(p, "headers too large");
        return HPE_USER;
    }
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    cg_client_t *c = p->data;
    if (cg_hdrs_on_value(&c->msg.hdrs, at, n) != 0) {
        c->reject = 431;
        llhttp_set_error_reason(p, "headers too large");
        return HPE_USER;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    cg_client_t *c = p->data;
    c->msg.http10 = p->http_major == 1 && p->http_minor == 0;
    if (!c->admin && (p->flags & F_CONTENT_LENGTH) &&
        p->content_length > c->w->cfg->max_request_bytes) {
        c->reject = 413;
        llhttp_set_error_reason(p, "body too large");
        return HPE_USER;
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    cg_client_t *c = p->data;
    size_t max = c->admin ? 65536 : c->w->cfg->max_request_bytes;
    if (c->msg.body.len + n > max) {
        c->reject = 413;
        llhttp_set_error_reason(p, "body too large");
        return HPE_USER;
    }
    cg_buf_put(&c->msg.body, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    cg_client_t *c = p->data;
    c->message_done = true;
    c->msg.keep_alive = llhttp_should_keep_alive(p);
    c->msg.method = p->method;
    return HPE_PAUSED;
}

static llhttp_settings_t settings;

static void stop_reading(cg_client_t *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static void dispatch(cg_client_t *c)
{
    if (c->admin)
        cg_admin_handle(c);
    else
        cg_exchange_start(c->w, &c->msg, &cg_h1_down, c);
}

static void feed(cg_client_t *c, const char *data, size_t n);

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char slab[65536]; /* one loop per process: reads never overlap */
    (void)h;
    (void)hint;
    *buf = uv_buf_init(slab, sizeof(slab));
}

/* Hands decrypted bytes to the parser while no request is being served. */
static void drain_tls(cg_client_t *c)
{
    char plain[16384];
    int r = 0;
    while (!c->closing && c->ex == NULL && !c->message_done &&
           (r = cg_tls_read(c->tls, plain, sizeof(plain))) > 0)
        feed(c, plain, (size_t)r);
    if (c->closing)
        return;
    if (c->tls->out.len) {
        uv_buf_t b = uv_buf_init(c->tls->out.p, (unsigned)c->tls->out.len);
        cg_client_write_raw(c, &b, 1);
        c->tls->out.len = 0;
    }
    if (r == CG_TLS_ERROR || r == -CG_TLS_CLOSED)
        cg_client_close(c);
}

static void take_tls(cg_client_t *c, const char *p, size_t n)
{
    cg_tls_feed(c->tls, p, n);
    if (!c->tls->done) {
        char err[300];
        int rc = cg_tls_handshake(c->tls, err, sizeof(err));
        if (c->tls->out.len) {
            uv_buf_t b = uv_buf_init(c->tls->out.p, (unsigned)c->tls->out.len);
            cg_client_write_raw(c, &b, 1);
            c->tls->out.len = 0;
        }
        if (rc == CG_TLS_ERROR) {
            cg_log_debug(NULL, "client TLS: %s", err);
            cg_client_close(c);
            return;
        }
        if (rc == CG_TLS_AGAIN)
            return;
        const char *alpn = mbedtls_ssl_get_alpn_protocol(&c->tls->ssl);
        c->sniffed = true;
        if (alpn && strcmp(alpn, "h2") == 0 && cg_h2_start(c) != 0) {
            cg_client_close(c);
            return;
        }
    }
    drain_tls(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    cg_client_t *c = s->data;
    if (nread < 0) {
        if (c->ex)
            cg_metrics->client_disconnects++;
        cg_client_close(c);
        return;
    }
    if (nread == 0)
        return;
    if (c->message_done) {
        /* Reading goes on while a request is served, to see a disconnect at
         * once; what a pipelining client sends meanwhile waits, bounded. */
        cg_buf_t *keep = c->tls ? &c->tls->in : &c->pending;
        cg_buf_put(keep, buf->base, (size_t)nread);
        if (keep->len > CG_MAX_HEADER_BYTES + c->w->cfg->max_request_bytes)
            stop_reading(c);
        return;
    }
    if (c->tls)
        take_tls(c, buf->base, (size_t)nread);
    else
        feed(c, buf->base, (size_t)nread);
}

static void reject(cg_client_t *c, int status, const char *msg)
{
    c->msg.keep_alive = false;
    cg_metrics_request(c->admin ? CG_ROUTE_ADMIN : CG_ROUTE_OTHER, status);
    cg_send_error(c, status, "invalid_request_error",
                  status == 413 ? "request_too_large"
                  : status == 431 ? "headers_too_large"
                                  : "bad_request",
                  msg, NULL);
    cg_log_info(NULL, "rejected request: %d %s", status, msg);
    cg_client_response_done(c);
}

/* Is this connection's first bytes the HTTP/2 preface? -1: can't tell yet. */
static int sniff_h2(cg_client_t *c, const char *data, size_t n)
{
    cg_buf_t *s = &c->pending;
    cg_buf_put(s, data, n < 24 ? n : 24);
    size_t k = s->len < 24 ? s->len : 24;
    int verdict = memcmp(s->p, CG_H2_PREFACE, k) != 0 ? 0 : (k >= 3 ? 1 : -1);
    s->len = verdict < 0 ? s->len : 0;
    return verdict;
}

/* Parses input; at a message's end stops reading and dispatches it. */
static void feed(cg_client_t *c, const char *data, size_t n)
{
    if (c->h2) {
        cg_h2_feed(c, data, n);
        return;
    }
    if (!c->sniffed && !c->admin) {
        /* h2c with prior knowledge shares the port: its preface ("PRI * ...")
         * cannot start an HTTP/1.1 request we serve. */
        size_t had = c->pending.len;
        int v = sniff_h2(c, data, n);
        if (v < 0)
            return;
        c->sniffed = true;
        if (v == 1 && cg_h2_start(c) == 0) {
            if (had)
                cg_h2_feed(c, CG_H2_PREFACE, had);
            if (!c->closing)
                cg_h2_feed(c, data, n);
            return;
        }
        if (had) { /* replay what waited for the verdict */
            cg_buf_t b = {0};
            cg_buf_put(&b, CG_H2_PREFACE, had);
            cg_buf_put(&b, data, n);
            feed(c, b.p, b.len);
            cg_buf_free(&b);
            return;
        }
    }
    enum llhttp_errno err = llhttp_execute(&c->parser, data, n);
    if (err == HPE_OK)
        return;
    if (err == HPE_PAUSED && c->message_done) {
        const char *stop = llhttp_get_error_pos(&c->parser);
        size_t used = stop ? (size_t)(stop - data) : n;
        if (used < n) {
            /* A pipelined request: keep it, bounded like any request. */
            if (c->pending.len + (n - used) > CG_MAX_HEADER_BYTES + c->w->cfg->max_request_bytes) {
                reject(c, 413, "pipelined requests too large");
                return;
            }
            cg_buf_put(&c->pending, stop, n - used);
        }
        dispatch(c);
        return;
    }
    stop_reading(c);
    int status = c->reject ? c->reject : 400;
    const char *reason = llhttp_get_error_reason(&c->parser);
    reject(c, status, status == 400 ? (reason ? reason : "malformed HTTP request")
                      : status == 413 ? "request body too large"
                                      : "request headers too large");
}

void cg_client_response_done(cg_client_t *c)
{
    c->ex = NULL;
    if (c->closing)
        return;
    if (!c->msg.keep_alive || c->w->draining) {
        close_after_flush(c);
        return;
    }
    llhttp_resume(&c->parser);
    reset_request(c);
    if (c->pending.len) {
        cg_buf_t pending = c->pending;
        memset(&c->pending, 0, sizeof(c->pending));
        feed(c, pending.p, pending.len);
        cg_buf_free(&pending);
        if (c->ex || c->closing || !c->msg.keep_alive)
            return;
    }
    if (c->tls) {
        drain_tls(c);
        if (c->ex || c->closing)
            return;
    }
    if (!c->reading && !c->closing) {
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        c->reading = true;
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    cg_worker_t *w = server->data;
    if (status < 0)
        return;
    cg_client_t *c = cg_xcalloc(1, sizeof(*c));
    c->w = w;
    c->admin = server == (uv_stream_t *)&w->admin;
    uv_tcp_init(w->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (!c->admin && w->srv_tls) {
        c->tls = cg_xmalloc(sizeof(cg_tls_t));
        cg_tls_init(c->tls, w->srv_tls, NULL);
    }
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    c->msg.keep_alive = true;
    c->next = w->clients;
    if (w->clients)
        w->clients->prev = c;
    w->clients = c;
    w->nclients++;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    c->reading = true;
}

static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof(host))
        return UV_EINVAL;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    int port = atoi(colon + 1);
    char *h = host;
    if (h[0] == '[' && hl > 1 && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    if (strchr(h, ':'))
        return uv_ip6_addr(h, port, (struct sockaddr_in6 *)ss);
    if (strcmp(h, "localhost") == 0)
        h = "127.0.0.1";
    return uv_ip4_addr(h, port, (struct sockaddr_in *)ss);
}

int cg_server_listen(cg_worker_t *w, uv_tcp_t *h, const char *addr, bool admin)
{
    (void)admin;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    int r = parse_addr(addr, &ss);
    if (r != 0)
        return r;
    /* libuv 1.44 cannot set SO_REUSEPORT, so the socket is made here and
     * handed over; every worker binds its own and the kernel spreads
     * connections across them. */
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    socklen_t len = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        r = -errno;
        close(fd);
        return r;
    }
    uv_tcp_init(w->loop, h);
    h->data = w;
    if ((r = uv_tcp_open(h, fd)) != 0)
        return r;
    if (!settings.on_message_complete) {
        llhttp_settings_init(&settings);
        settings.on_message_begin = on_message_begin;
        settings.on_url = on_url;
        settings.on_header_field = on_header_field;
        settings.on_header_value = on_header_value;
        settings.on_headers_complete = on_headers_complete;
        settings.on_body = on_body;
        settings.on_message_complete = on_message_complete;
    }
    return uv_listen((uv_stream_t *)h, 1024, on_connection);
}
