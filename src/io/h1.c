/*
 * HTTP/1.1 on a client connection (llhttp). One request at a time: the
 * parser pauses at each message's end. Reading goes on while a request is
 * served, to see a disconnect at once; what a pipelining client sends
 * meanwhile is kept, bounded, and parsed at a safe point once the response
 * is done.
 */
#include "admin.h"
#include "client.h"
#include "exchange.h"
#include "log.h"
#include "metrics.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static llhttp_settings_t settings;

static cg_h1_t *h1_of(cg_client_t *c)
{
    return &c->h1;
}

static size_t pending_max(const cg_client_t *c)
{
    return CG_MAX_HEADER_BYTES + c->ctx->cfg->max_request_bytes;
}

/* --- responses ------------------------------------------------------------------- */

/* An admin answer. */
static void send_admin(cg_client_t *c, const cg_admin_resp_t *r)
{
    cg_buf_t h = {0};
    cg_buf_printf(&h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n", r->status,
                  cg_status_text(r->status), r->ctype, r->body.len);
    if (r->allow)
        cg_buf_printf(&h, "Allow: %s\r\n", r->allow);
    if (!c->h1.keep_alive)
        cg_buf_puts(&h, "Connection: close\r\n");
    cg_buf_puts(&h, "\r\n");
    bool head = c->h1.method == HTTP_HEAD;
    uv_buf_t bufs[2] = {uv_buf_init(h.p, (unsigned)h.len),
                        uv_buf_init(r->body.p, (unsigned)r->body.len)};
    cg_conn_write(&c->conn, bufs, head ? 1 : 2);
    cg_buf_free(&h);
}

static void next_request(cg_defer_t *d);

/* The response is out: close, or go on with the next request. */
static void response_done(cg_client_t *c)
{
    cg_h1_t *h = h1_of(c);
    h->ex = NULL;
    if (!cg_conn_usable(&c->conn))
        return;
    if (!h->keep_alive || c->ctx->draining) {
        cg_conn_shutdown(&c->conn); /* a FIN once the response is written */
        return;
    }
    llhttp_resume(&h->parser);
    cg_client_expect_request(c, true);
    h->message_done = false;
    h->reject = 0;
    cg_reqmsg_reset(&h->msg);
    if (h->pending.len)
        cg_defer(&c->ctx->safe, &h->next, next_request);
    cg_conn_read_start(&c->conn);
}

static const cg_down_ops_t h1_down;

static const char *reject_code(int status)
{
    switch (status) {
    case 413: return "request_too_large";
    case 431: return "headers_too_large";
    case 501: return "not_implemented";
    case 505: return "http_version_not_supported";
    default: return "bad_request";
    }
}

/* Answers a request the parser refused, and closes. It goes through an
 * exchange like any answer, so it carries X-Request-Id (the client's, when
 * its header was read) and the CORS headers (SPEC §4). */
static void reject(cg_client_t *c, int status, const char *msg)
{
    cg_h1_t *h = h1_of(c);
    h->keep_alive = false;
    cg_conn_read_stop(&c->conn);
    cg_client_expect_request(c, true); /* a client that never reads this is closed */
    cg_exchange_t *ex = cg_exchange_new(c->ctx, &h->msg, &h1_down, c);
    if (c->admin)
        cg_exchange_set_route(ex, CG_ROUTE_ADMIN);
    cg_log_info(ex->rid, "rejected request: %d %s", status, msg);
    h->ex = ex;
    cg_exchange_reject(ex, status, reject_code(status), msg); /* done: response_done() */
}

/* --- the HTTP/1.1 side of an exchange ------------------------------------------- */

static cg_client_t *client_of(cg_exchange_t *ex)
{
    return ex->down_ctx;
}

/* Writes bufs behind the held head, if any: one write for both. */
static void send_out(cg_client_t *c, const uv_buf_t *bufs, unsigned n)
{
    cg_h1_t *h = h1_of(c);
    if (h->head.len == 0) {
        cg_conn_write(&c->conn, bufs, n);
        return;
    }
    uv_buf_t stackv[24];
    uv_buf_t *v = n + 1 <= 24 ? stackv : cg_xmalloc((n + 1) * sizeof(uv_buf_t));
    v[0] = uv_buf_init(h->head.p, (unsigned)h->head.len);
    if (n > 0)
        memcpy(v + 1, bufs, n * sizeof(uv_buf_t));
    cg_conn_write(&c->conn, v, n + 1);
    if (v != stackv)
        free(v);
    cg_buf_free(&h->head);
    cg_defer_cancel(&h->flush);
}

static void flush_head(cg_client_t *c)
{
    send_out(c, NULL, 0);
}

static void on_flush_head(cg_defer_t *d)
{
    flush_head(CG_CONTAINER_OF(d, cg_client_t, h1.flush));
}

/* Builds the head and holds it: an answer's head and its first bytes come
 * from one upstream read, and one write (not two) is half the calls. */
static void h1_head(cg_exchange_t *ex, int status, const cg_hdrs_t *hd, long long clen)
{
    cg_client_t *c = client_of(ex);
    cg_h1_t *h = h1_of(c);
    h->bodiless = cg_status_no_body(status, h->method);
    h->chunked = !h->bodiless && clen < 0;
    if (h->chunked && h->http10) {
        /* HTTP/1.0 has no chunked coding: the body ends with the connection. */
        h->chunked = false;
        h->keep_alive = false;
    }
    cg_buf_t *b = &h->head;
    b->len = 0;
    cg_buf_printf(b, "HTTP/1.1 %d %s\r\n", status, cg_status_text(status));
    for (size_t i = 0; i < hd->n; i++) {
        cg_span_t name = cg_hdr_name(hd, i), v = cg_hdr_value(hd, i);
        cg_buf_printf(b, "%.*s: %.*s\r\n", (int)name.n, name.p, (int)v.n, v.p);
    }
    if (clen >= 0 && status >= 200 && status != 204) /* RFC 9110 §8.6 */
        cg_buf_printf(b, "Content-Length: %lld\r\n", clen);
    else if (h->chunked)
        cg_buf_puts(b, "Transfer-Encoding: chunked\r\n");
    if (!h->keep_alive)
        cg_buf_puts(b, "Connection: close\r\n");
    cg_buf_puts(b, "\r\n");
    cg_defer(&c->ctx->safe, &h->flush, on_flush_head);
}

/* Writes body bytes, as one chunk when chunked, and with `fin` the end of
 * a chunked body: the last event and the terminator leave together. A
 * response without a body drops them: the exchange writes its own error
 * bodies whatever the method, and on HTTP/1.1 they would be read as the
 * next response (RFC 9110 §9.3.2). */
static void send_body(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total, bool fin)
{
    cg_client_t *c = client_of(ex);
    cg_h1_t *h = h1_of(c);
    if (h->bodiless || total == 0)
        n = 0;
    if (!h->chunked) {
        send_out(c, bufs, n);
        return;
    }
    if (n == 0 && !fin) {
        flush_head(c);
        return;
    }
    char size[24];
    uv_buf_t stackv[20] = {{0}}; /* gcc 12 cannot tell that only v[0..k) is read */
    uv_buf_t *v = n + 3 <= 20 ? stackv : cg_xmalloc((n + 3) * sizeof(uv_buf_t));
    unsigned k = 0;
    if (n > 0) {
        v[k++] = uv_buf_init(size, (unsigned)snprintf(size, sizeof(size), "%zx\r\n", total));
        memcpy(v + k, bufs, n * sizeof(uv_buf_t));
        k += n;
        v[k++] = uv_buf_init(CG_STRLIT("\r\n"));
    }
    if (fin)
        v[k++] = uv_buf_init(CG_STRLIT("0\r\n\r\n"));
    send_out(c, v, k);
    if (v != stackv)
        free(v);
}

static void h1_data(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    send_body(ex, bufs, n, total, false);
}

static void h1_last(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    send_body(ex, bufs, n, total, true);
}

static void h1_end(cg_exchange_t *ex, bool complete)
{
    cg_client_t *c = client_of(ex);
    if (!complete) {
        c->h1.keep_alive = false; /* only closing tells the client */
        flush_head(c);
        return;
    }
    send_body(ex, NULL, 0, 0, true);
}

static size_t h1_queued(cg_exchange_t *ex)
{
    return client_of(ex)->conn.queued;
}

static void h1_done(cg_exchange_t *ex)
{
    cg_client_t *c = client_of(ex);
    flush_head(c);
    if (c->h1.ex != ex)
        return;
    c->h1.ex = NULL;
    if (!ex->gone)
        response_done(c);
}

static const cg_down_ops_t h1_down = {h1_head, h1_data, h1_last, h1_end, h1_queued, h1_done};

/* --- parsing ---------------------------------------------------------------------- */

static int on_message_begin(llhttp_t *p)
{
    cg_client_t *c = p->data;
    cg_reqmsg_reset(&c->h1.msg);
    c->h1.msg.method = -1; /* until its method is read */
    c->h1.reject = 0;
    c->h1.version_len = 0;
    return 0;
}

/* The method, for an answer to a request refused before its end (a HEAD
 * gets no body). */
static int on_method_complete(llhttp_t *p)
{
    ((cg_client_t *)p->data)->h1.msg.method = p->method;
    return 0;
}

/* Kept here, not as llhttp's error reason: llhttp replaces the reason
 * on_headers_complete sets with its own "User callback error". */
static int refuse(llhttp_t *p, int status, const char *why)
{
    cg_h1_t *h = &((cg_client_t *)p->data)->h1;
    h->reject = status;
    h->why = why;
    return HPE_USER;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    cg_reqmsg_t *m = &((cg_client_t *)p->data)->h1.msg;
    if (m->url.len + n > CG_MAX_HEADER_BYTES)
        return refuse(p, 431, "request line too long");
    cg_buf_put(&m->url, at, n);
    return 0;
}

/* llhttp reads HTTP/0.9 and HTTP/2.0 as well, and calls a well-formed
 * version it does not know malformed: citegate reads 1.0 and 1.1, and
 * answers any other DIGIT.DIGIT with 505 (RFC 9110 §15.6.6). The version
 * may come in pieces; it is whole at three bytes. */
static int on_version(llhttp_t *p, const char *at, size_t n)
{
    cg_h1_t *h = &((cg_client_t *)p->data)->h1;
    for (size_t i = 0; i < n && h->version_len < sizeof(h->version); i++)
        h->version[h->version_len++] = at[i];
    const char *v = h->version;
    if (h->version_len < 3 || v[1] != '.' || !isdigit((unsigned char)v[0]) ||
        !isdigit((unsigned char)v[2]))
        return 0;
    if (v[0] == '1' && (v[2] == '0' || v[2] == '1'))
        return 0;
    return refuse(p, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    if (cg_hdrs_on_field(&((cg_client_t *)p->data)->h1.msg.hdrs, at, n) != 0)
        return refuse(p, 431, "headers too large");
    return 0;
}

static bool blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Does the value piece at `at` begin on a continuation line? llhttp drops
 * the CRLF of an obs-fold and hands on what follows as value bytes, so only
 * the bytes before the piece tell. */
static bool folded(const cg_h1_t *h, const char *at)
{
    const char *q = at;
    while (q > h->in && blank(q[-1]))
        q--;
    return (q > h->in ? q[-1] : h->before) == '\n';
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    cg_h1_t *h = &((cg_client_t *)p->data)->h1;
    cg_hdrs_t *hd = &h->msg.hdrs;
    /* RFC 9112 §5.2 allows reading a fold as a space, but a folded framing
     * header is how requests are smuggled past another parser (SPEC §4). */
    if (hd->n > 0 && folded(h, at) &&
        (cg_span_ieq(cg_hdr_name(hd, hd->n - 1), "content-length") ||
         cg_span_ieq(cg_hdr_name(hd, hd->n - 1), "transfer-encoding")))
        return refuse(p, 400, "obs-fold in Content-Length or Transfer-Encoding");
    if (cg_hdrs_on_value(hd, at, n) != 0)
        return refuse(p, 431, "headers too large");
    return 0;
}

/* RFC 9110 §5.1: a field name is a token, never empty. llhttp hands an
 * empty one on (a line that starts with ':'), which would go upstream as
 * a line another parser may read otherwise. */
static bool names_valid(const cg_hdrs_t *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (cg_hdr_name(h, i).n == 0)
            return false;
    return true;
}

/* RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host. */
static bool one_host(const cg_hdrs_t *h)
{
    int n = 0;
    for (size_t i = 0; i < h->n; i++)
        n += cg_span_ieq(cg_hdr_name(h, i), "host");
    return n == 1;
}

/* RFC 9112 §6.1: citegate decodes chunked and no other transfer coding; a
 * body in another (gzip, chunked) would be read, or forwarded, as if it
 * had none. Every Transfer-Encoding field must be exactly "chunked". */
static bool codings_known(const cg_hdrs_t *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (!cg_span_ieq(cg_hdr_name(h, i), "transfer-encoding"))
            continue;
        cg_span_t v = cg_hdr_value(h, i);
        while (v.n && (v.p[v.n - 1] == ' ' || v.p[v.n - 1] == '\t'))
            v.n--;
        while (v.n && (v.p[0] == ' ' || v.p[0] == '\t'))
            v.p++, v.n--;
        if (!cg_span_ieq(v, "chunked"))
            return false;
    }
    return true;
}

/* A reg-name's or an IP literal's byte (RFC 3986 §3.2.2). */
static bool host_char(char ch)
{
    return isalnum((unsigned char)ch) || (ch && strchr("-._~%!$&'()*+,;=", ch));
}

/* RFC 9112 §3.2: Host is uri-host [":" port]; empty when the target has
 * no authority. */
static bool valid_host(cg_span_t v)
{
    size_t i = 0;
    if (v.n > 0 && v.p[0] == '[') {
        while (++i < v.n && v.p[i] != ']')
            if (!host_char(v.p[i]) && v.p[i] != ':')
                return false;
        if (i++ == v.n)
            return false;
    } else {
        while (i < v.n && host_char(v.p[i]))
            i++;
    }
    if (i < v.n && v.p[i] == ':')
        while (++i < v.n && isdigit((unsigned char)v.p[i]))
            ;
    return i == v.n;
}

/* RFC 9112 §3.2.2: a server MUST accept the absolute-form. Its scheme and
 * authority are dropped (the upstream has its own), leaving the path and
 * query the rest of citegate routes by. */
static void origin_form(cg_buf_t *url)
{
    static const char *const schemes[] = {"http://", "https://", NULL};
    size_t k = 0;
    for (int i = 0; schemes[i] && k == 0; i++) {
        size_t n = strlen(schemes[i]);
        if (url->len >= n && strncasecmp(url->p, schemes[i], n) == 0)
            k = n;
    }
    if (k == 0)
        return;
    while (k < url->len && url->p[k] != '/' && url->p[k] != '?')
        k++;
    cg_buf_t path = {0};
    if (k == url->len || url->p[k] == '?')
        cg_buf_putc(&path, '/');
    cg_buf_put(&path, url->p + k, url->len - k);
    cg_buf_free(url);
    *url = path;
}

/* RFC 9110 §10.1.1: a client that sent Expect: 100-continue waits for a
 * 100 (curl, a second) before it sends the body. Called once the head is
 * accepted: a refused request gets its final status instead. An HTTP/1.0
 * client's expectation is ignored. */
static void go_on(cg_client_t *c, const llhttp_t *p)
{
    bool body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length);
    if (!body || c->h1.msg.http10 ||
        !cg_span_ieq(cg_hdrs_get(&c->h1.msg.hdrs, "expect"), "100-continue"))
        return;
    uv_buf_t b = uv_buf_init(CG_STRLIT("HTTP/1.1 100 Continue\r\n\r\n"));
    cg_conn_write(&c->conn, &b, 1);
}

static int on_headers_complete(llhttp_t *p)
{
    cg_client_t *c = p->data;
    cg_reqmsg_t *m = &c->h1.msg;
    cg_client_expect_request(c, false);
    m->http10 = p->http_major == 1 && p->http_minor == 0;
    /* A request line without a version is HTTP/0.9 to llhttp, which reads
     * on as if it had one (any method, headers and all). */
    if (p->http_major != 1)
        return refuse(p, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
    if (!names_valid(&m->hdrs))
        return refuse(p, 400, "a header field has an empty name");
    if (p->http_minor >= 1 && !one_host(&m->hdrs))
        return refuse(p, 400, "an HTTP/1.1 request needs exactly one Host header");
    cg_span_t host = cg_hdrs_get(&m->hdrs, "host");
    if (host.p && !valid_host(host))
        return refuse(p, 400, "the Host header is not a host[:port]");
    if (!codings_known(&m->hdrs))
        return refuse(p, 501, "only the chunked transfer coding is supported");
    origin_form(&m->url);
    if (!c->admin && (p->flags & F_CONTENT_LENGTH) &&
        p->content_length > c->ctx->cfg->max_request_bytes)
        return refuse(p, 413, "body too large");
    go_on(c, p);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    cg_client_t *c = p->data;
    size_t max = c->admin ? 65536 : c->ctx->cfg->max_request_bytes;
    if (c->h1.msg.body.len + n > max)
        return refuse(p, 413, "body too large");
    cg_buf_put(&c->h1.msg.body, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    cg_client_t *c = p->data;
    cg_h1_t *h = &c->h1;
    h->message_done = true;
    h->msg.keep_alive = llhttp_should_keep_alive(p);
    h->msg.method = p->method;
    return HPE_PAUSED;
}

static void admin_answered(void *arg, cg_admin_resp_t *r)
{
    cg_client_t *c = arg;
    c->h1.admin_wait = NULL;
    send_admin(c, r);
    cg_buf_free(&r->body);
    response_done(c);
}

/* Most admin answers are ready at once; a tracking store's query comes back
 * later from the loop, and reading goes on meanwhile (a disconnect cancels it). */
static void serve_admin(cg_client_t *c)
{
    cg_h1_t *h = h1_of(c);
    cg_admin_resp_t r;
    h->admin_wait = cg_admin_respond(c->ctx, h->msg.method, h->msg.url.p, h->msg.url.len,
                                     &h->msg.hdrs, &r, admin_answered, c);
    if (h->admin_wait == NULL)
        admin_answered(c, &r);
}

/* A whole request: answer it. The exchange takes the request over. */
static void dispatch(cg_client_t *c)
{
    cg_h1_t *h = h1_of(c);
    h->method = h->msg.method;
    h->keep_alive = h->msg.keep_alive;
    h->http10 = h->msg.http10;
    if (c->admin) {
        serve_admin(c);
        return;
    }
    h->ex = cg_exchange_new(c->ctx, &h->msg, &h1_down, c);
    cg_exchange_run(h->ex);
}

/* Remembers the last byte of data that is not blank, for folded(). */
static void note_before(cg_h1_t *h, const char *data, size_t n)
{
    while (n > 0 && blank(data[n - 1]))
        n--;
    if (n > 0)
        h->before = data[n - 1];
}

/* llhttp stops after a CONNECT or an Upgrade request, for the caller to
 * switch protocols. citegate never switches (it answers CONNECT with an
 * error and forwards Upgrade as a plain request without it), so the
 * connection stays HTTP/1.1 (RFC 9110 §7.8, §9.3.6) and parsing goes on. */
static enum llhttp_errno execute(cg_h1_t *h, const char *data, size_t n)
{
    enum llhttp_errno err = llhttp_execute(&h->parser, data, n);
    while (err == HPE_PAUSED_UPGRADE) {
        const char *at = llhttp_get_error_pos(&h->parser);
        size_t used = at ? (size_t)(at - data) : n;
        llhttp_resume_after_upgrade(&h->parser);
        err = llhttp_execute(&h->parser, data + used, n - used);
    }
    return err;
}

static void parse(cg_client_t *c, const char *data, size_t n)
{
    cg_h1_t *h = h1_of(c);
    h->in = data;
    enum llhttp_errno err = execute(h, data, n);
    note_before(h, data, n);
    if (err == HPE_OK)
        return;
    if (err == HPE_PAUSED && h->message_done) {
        const char *stop = llhttp_get_error_pos(&h->parser);
        size_t used = stop ? (size_t)(stop - data) : n;
        cg_buf_put(&h->pending, data + used, n - used); /* a pipelined request */
        dispatch(c);
        return;
    }
    h->method = h->msg.method;
    const char *reason = llhttp_get_error_reason(&h->parser);
    if (h->reject == 413)
        reject(c, 413, "request body too large");
    else if (h->reject == 431)
        reject(c, 431, "request headers too large");
    else if (h->reject)
        reject(c, h->reject, h->why);
    else
        reject(c, 400, reason ? reason : "malformed HTTP request");
}

static void h1_read(cg_client_t *c, const char *p, size_t n)
{
    cg_h1_t *h = h1_of(c);
    if (!h->message_done && h->pending.len == 0) {
        parse(c, p, n);
        return;
    }
    cg_buf_put(&h->pending, p, n);
    if (h->pending.len > pending_max(c))
        cg_conn_read_stop(&c->conn); /* resumed when the response is done */
}

static void next_request(cg_defer_t *d)
{
    cg_h1_t *h = CG_CONTAINER_OF(d, cg_h1_t, next);
    cg_client_t *c = CG_CONTAINER_OF(h, cg_client_t, h1);
    if (h->message_done || !cg_conn_usable(&c->conn) || h->pending.len == 0)
        return;
    cg_buf_t pending = h->pending;
    memset(&h->pending, 0, sizeof(h->pending));
    parse(c, pending.p, pending.len);
    cg_buf_free(&pending);
}

/* --- the protocol ------------------------------------------------------------------ */

static void h1_start(cg_client_t *c)
{
    if (!settings.on_message_complete) {
        llhttp_settings_init(&settings);
        settings.on_message_begin = on_message_begin;
        settings.on_method_complete = on_method_complete;
        settings.on_url = on_url;
        settings.on_version = on_version;
        settings.on_header_field = on_header_field;
        settings.on_header_value = on_header_value;
        settings.on_headers_complete = on_headers_complete;
        settings.on_body = on_body;
        settings.on_message_complete = on_message_complete;
    }
    cg_h1_t *h = h1_of(c);
    llhttp_init(&h->parser, HTTP_REQUEST, &settings);
    h->parser.data = c;
    h->msg.keep_alive = h->keep_alive = true;
}

static void h1_drained(cg_client_t *c)
{
    if (c->h1.ex)
        cg_exchange_client_drained(c->h1.ex);
}

static void h1_closed(cg_client_t *c)
{
    cg_h1_t *h = h1_of(c);
    cg_defer_cancel(&h->next);
    cg_defer_cancel(&h->flush);
    cg_buf_free(&h->head);
    if (h->admin_wait) {
        cg_admin_cancel(h->admin_wait);
        h->admin_wait = NULL;
    }
    if (h->ex) {
        if (c->conn.err != CG_OK)
            cg_metrics->client_disconnects++;
        cg_exchange_client_gone(h->ex);
    }
    cg_reqmsg_free(&h->msg);
    cg_buf_free(&h->pending);
}

static bool h1_busy(const cg_client_t *c)
{
    return c->h1.ex != NULL;
}

static void h1_drain(cg_client_t *c)
{
    (void)c; /* the response in flight ends with Connection: close */
}

static void h1_shutdown(cg_client_t *c)
{
    if (c->h1.ex)
        cg_exchange_shutdown(c->h1.ex);
}

static void h1_expire(cg_client_t *c)
{
    cg_conn_close(&c->conn, CG_E_TIMEOUT);
}

const cg_proto_t cg_h1_proto = {h1_start, h1_read,  h1_drained,  h1_closed,
                                h1_busy,  h1_drain, h1_shutdown, h1_expire};
