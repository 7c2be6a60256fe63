/*
 * HTTP/2 on a client connection (nghttp2): h2c with prior knowledge (the
 * preface is sniffed on the HTTP/1.1 port) and h2 over TLS (ALPN). Every
 * stream carries one exchange; its answer is queued per stream and handed
 * to nghttp2 by a data provider, so a client that stops reading a stream
 * (flow control) fills only that stream's queue, which pauses only that
 * stream's upstream. The provider is submitted while bytes wait and ends
 * (without END_STREAM) once they are taken: an idle stream holds no DATA
 * item in nghttp2 between two events.
 *
 * Frames are produced only at safe points: right after
 * nghttp2_session_mem_recv returned, when the socket drained, or from the
 * worker's deferred queue. Exchanges only queue bytes and ask for a flush,
 * so no stream is closed (and freed) under a caller's feet.
 */
#include "client.h"
#include "exchange.h"
#include "h2lib.h"
#include "log.h"
#include "metrics.h"

#include <ctype.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS     256
#define MAX_HEADER_LIST 65536 /* SETTINGS_MAX_HEADER_LIST_SIZE we advertise */
#define MAX_431         3     /* requests answered 431 before the connection goes */
/* Control frames (SETTINGS, PING, PRIORITY, WINDOW_UPDATE, RST_STREAM, empty
 * DATA) a connection may send: a bucket of FLOOD_BURST refilled at
 * FLOOD_RATE a second. Clients send a few; floods send millions. */
#define FLOOD_BURST 2000
#define FLOOD_RATE  2000

typedef struct cg_h2stream cg_h2stream_t;

typedef struct cg_h2conn {
    cg_client_t *c;
    nghttp2_session *s;
    cg_list_t streams; /* cg_h2stream_t, by link */
    size_t nstreams;
    unsigned n431;
    bool heading;       /* a header block has begun and not yet ended */
    double budget;      /* control frames left (FLOOD_BURST at most) */
    uint64_t budget_at; /* when it was last refilled, ms */
    bool calm;          /* GOAWAY(ENHANCE_YOUR_CALM) is on its way */
    cg_defer_t flush;   /* frames to send at the next safe point */
} cg_h2conn_t;

struct cg_h2stream {
    cg_h2conn_t *conn;
    int32_t id;
    /* The request while its frames arrive; the exchange takes it over, and
     * the stream keeps only its method (HEAD is answered without a body). */
    cg_reqmsg_t *msg;
    int method;
    cg_exchange_t *ex;
    cg_buf_t out; /* answer bytes not yet taken by nghttp2, from off on */
    size_t off;
    int reject;          /* 400, 413 or 431 instead of an exchange */
    const char *why;     /* a 400's reason */
    size_t header_bytes; /* of the header block, as RFC 9113 counts them */
    bool eof, closed;
    bool headers_end; /* END_STREAM went with the HEADERS: no body */
    bool submitted;   /* a DATA item of ours is in nghttp2's queue */
    /* read_body ended it without END_STREAM: it leaves the queue once its
     * last frame is sent (on_frame_send), and only then may another come. */
    bool ending;
    bool deferred;  /* and waits for bytes (NGHTTP2_ERR_DEFERRED) */
    cg_list_t link; /* in the connection's streams */
};

static void flush_now(cg_h2conn_t *h);

/* A checked call's verdict (h2lib.h), carried out. */
static void apply(cg_h2conn_t *h, cg_h2_verdict_t v)
{
    if (v == CG_H2_CLOSE)
        cg_conn_close(&h->c->conn, CG_E_PROTOCOL);
}

static void on_flush(cg_defer_t *d)
{
    flush_now(CG_CONTAINER_OF(d, cg_h2conn_t, flush));
}

static void flush_soon(cg_h2conn_t *h)
{
    cg_defer_flush(&h->c->ctx->safe, &h->flush, on_flush);
}

/* A header block must end within the request timeout (SPEC §9, slowloris):
 * nothing else can arrive on the connection while one is open. The clock
 * that runs when it begins (since the connection went idle) keeps running;
 * on a busy connection one starts. */
static void head_begins(cg_h2conn_t *h)
{
    if (h->heading)
        return;
    h->heading = true;
    if (h->c->deadline == 0)
        cg_client_expect_request(h->c, true);
}

/* The block ended: a request head is complete (or nghttp2 dropped it). A
 * connection with streams has no deadline; an idle one keeps its own. */
static void head_ends(cg_h2conn_t *h)
{
    if (!h->heading)
        return;
    h->heading = false;
    if (h->nstreams > 0)
        cg_client_expect_request(h->c, false);
}

static void stream_free(cg_h2stream_t *st)
{
    cg_h2conn_t *h = st->conn;
    cg_list_unlink(&st->link);
    if (--h->nstreams == 0 && !h->heading)
        cg_client_expect_request(h->c, true); /* idle: it may stay open so long */
    if (st->msg)
        cg_reqmsg_free(st->msg);
    free(st->msg);
    cg_buf_free(&st->out);
    free(st);
}

/* --- the h2 side of an exchange ----------------------------------------------- */

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    cg_h2stream_t *st = src->ptr;
    size_t avail = st->out.len - st->off;
    if (avail == 0) {
        if (st->eof) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = avail < len ? avail : len;
    memcpy(buf, st->out.p + st->off, n);
    st->off += n;
    if (st->off == st->out.len) {
        /* Drained, as a stream is between events nearly all the time: the
         * buffer and the DATA item go back rather than sit in each of
         * thousands of open streams (the allocator's per-size cache hands
         * the next event both at once). */
        st->off = 0;
        cg_buf_free(&st->out);
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (!st->eof) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            st->ending = true;
        }
    }
    if (st->ex && st->out.len - st->off < CG_CONN_LWM)
        cg_exchange_client_drained(st->ex);
    return (ssize_t)n;
}

static void h2_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h, long long clen)
{
    cg_h2stream_t *st = ex->down_ctx;
    nghttp2_nv *nva = cg_xcalloc(h->n + 2, sizeof(nghttp2_nv));
    cg_buf_t names = {0};
    char st_text[8], len_text[24];
    snprintf(st_text, sizeof(st_text), "%d", status);
    size_t k = 0;
    nva[k++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)st_text, 7, strlen(st_text), 0};
    /* h2 header names are lower case: keep lowered copies for the call. */
    for (size_t i = 0; i < h->n; i++)
        cg_buf_put(&names, cg_hdr_name(h, i).p, cg_hdr_name(h, i).n);
    for (size_t i = 0; i < names.len; i++)
        names.p[i] = (char)tolower((unsigned char)names.p[i]);
    size_t at = 0;
    for (size_t i = 0; i < h->n; i++) {
        cg_span_t name = cg_hdr_name(h, i), v = cg_hdr_value(h, i);
        nva[k++] = (nghttp2_nv){(uint8_t *)names.p + at, (uint8_t *)v.p, name.n, v.n, 0};
        at += name.n;
    }
    if (clen >= 0 && status >= 200 && status != 204) {
        snprintf(len_text, sizeof(len_text), "%lld", clen);
        nva[k++] =
            (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)len_text, 14, strlen(len_text), 0};
    }
    /* With no body, END_STREAM goes on the HEADERS; else on the last DATA
     * (send_queued). */
    bool nobody = cg_status_no_body(status, st->method);
    st->headers_end = nobody;
    int rv = nobody ? CG_H2_CALL(nghttp2_submit_response(st->conn->s, st->id, nva, k, NULL))
                    : CG_H2_CALL(nghttp2_submit_headers(st->conn->s, NGHTTP2_FLAG_NONE, st->id,
                                                        NULL, nva, k, NULL));
    apply(st->conn, cg_h2_verdict(st->conn->s, st->id, rv, "response"));
    free(nva);
    cg_buf_free(&names);
    flush_soon(st->conn);
}

/* The queued bytes (or the end) go to nghttp2: in the DATA item already
 * there, or in a new one. */
static void send_queued(cg_h2stream_t *st)
{
    int rv = 0;
    if (st->deferred) {
        st->deferred = false;
        rv = CG_H2_CALL(nghttp2_session_resume_data(st->conn->s, st->id));
    } else if (!st->submitted && !st->headers_end) {
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
        st->submitted = true;
        rv = CG_H2_CALL(nghttp2_submit_data(st->conn->s, NGHTTP2_FLAG_END_STREAM, st->id, &prd));
    }
    apply(st->conn, cg_h2_verdict(st->conn->s, st->id, rv, "data"));
    flush_soon(st->conn);
}

static void h2_data(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    cg_h2stream_t *st = ex->down_ctx;
    (void)total;
    for (unsigned i = 0; i < n; i++)
        cg_buf_put(&st->out, bufs[i].base, bufs[i].len);
    send_queued(st);
}

static void h2_end(cg_exchange_t *ex, bool complete)
{
    cg_h2stream_t *st = ex->down_ctx;
    if (complete) {
        st->eof = true;
        send_queued(st);
        return;
    }
    int rv = CG_H2_CALL(
        nghttp2_submit_rst_stream(st->conn->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR));
    apply(st->conn, cg_h2_verdict(st->conn->s, 0, rv, "reset"));
    flush_soon(st->conn);
}

static size_t h2_queued(cg_exchange_t *ex)
{
    cg_h2stream_t *st = ex->down_ctx;
    return st->out.len - st->off;
}

static void h2_done(cg_exchange_t *ex)
{
    cg_h2stream_t *st = ex->down_ctx;
    st->ex = NULL;
    if (st->closed)
        stream_free(st);
}

static const cg_down_ops_t h2_down = {h2_head, h2_data, NULL, h2_end, h2_queued, h2_done};

/* --- nghttp2 callbacks ---------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    cg_h2conn_t *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    cg_h2stream_t *st = cg_xcalloc(1, sizeof(*st));
    st->conn = h;
    st->id = f->hd.stream_id;
    st->msg = cg_xcalloc(1, sizeof(*st->msg));
    st->msg->keep_alive = true;
    st->msg->method = -1;
    cg_list_insert(&h->streams, &st->link);
    h->nstreams++;
    nghttp2_session_set_stream_user_data(s, st->id, st);
    return 0;
}

/* The client is hostile: GOAWAY(ENHANCE_YOUR_CALM), then the connection
 * closes once it is written (SPEC §9). */
static void calm(cg_h2conn_t *h, const char *why)
{
    if (h->calm)
        return;
    h->calm = true;
    cg_log_warn(NULL, "h2 client: %s: GOAWAY(ENHANCE_YOUR_CALM)", why);
    int rv = CG_H2_CALL(nghttp2_session_terminate_session(h->s, NGHTTP2_ENHANCE_YOUR_CALM));
    apply(h, cg_h2_verdict(h->s, 0, rv, "GOAWAY"));
}

/* RFC 9110 §5.6.2: token = 1*tchar. */
static bool is_token(const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isalnum(v[i]) && (v[i] == 0 || strchr("!#$%&'*+-.^_`|~", v[i]) == NULL))
            return false;
    return n > 0;
}

/* Any token is a method, forwarded as is like over HTTP/1.1 (SPEC §4).
 * The ones llhttp knows get its number, which the exchange compares
 * (HEAD, POST, OPTIONS, ...); the others keep their name. */
static void set_method(cg_reqmsg_t *m, const uint8_t *v, size_t n)
{
#define KNOWN(num, name, text)                                                                     \
    if (n == sizeof(#text) - 1 && memcmp(v, #text, n) == 0) {                                      \
        m->method = num;                                                                           \
        return;                                                                                    \
    }
    HTTP_METHOD_MAP(KNOWN)
#undef KNOWN
    m->method = -1;
    if (!is_token(v, n))
        return;
    m->method = CG_METHOD_OTHER;
    m->method_name.len = 0;
    cg_buf_put(&m->method_name, v, n);
    cg_buf_putc(&m->method_name, '\0');
    m->method_name.len--; /* the NUL stays behind it */
}

/* A declared body beyond CITEGATE_MAX_REQUEST_BYTES is answered 413 as
 * soon as the head is complete (SPEC §5, §11), as over HTTP/1.1. nghttp2
 * has already checked that the value is a number. */
static bool too_long(const cg_h2conn_t *h, const uint8_t *v, size_t n)
{
    unsigned long long len = 0;
    for (size_t i = 0; i < n && isdigit(v[i]); i++) {
        if (len > h->c->ctx->cfg->max_request_bytes)
            return true;
        len = len * 10 + (unsigned)(v[i] - '0');
    }
    return len > h->c->ctx->cfg->max_request_bytes;
}

/* RFC 9112 §3.2: a request target is visible ASCII; over HTTP/1.1 llhttp
 * refuses anything else, and nghttp2 lets obs-text through. Forwarded, it
 * would make an HTTP/1.1 upstream's request line invalid. */
static bool visible(const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] <= 0x20 || v[i] >= 0x7F)
            return false;
    return true;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    cg_h2stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (st == NULL || st->msg == NULL || f->hd.type != NGHTTP2_HEADERS)
        return 0;
    /* Beyond the SETTINGS_MAX_HEADER_LIST_SIZE we advertised, large or an
     * HPACK bomb alike (SPEC §9): decoding stops here. */
    st->header_bytes += nl + vl + 32;
    if (st->header_bytes > MAX_HEADER_LIST) {
        calm(st->conn, "header block decoding beyond SETTINGS_MAX_HEADER_LIST_SIZE");
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    cg_span_t field = cg_span((const char *)name, nl);
    if (cg_span_eq(field, "content-length") && too_long(st->conn, value, vl))
        st->reject = 413;
    if (cg_span_eq(field, ":method")) {
        set_method(st->msg, value, vl);
    } else if (cg_span_eq(field, ":path")) {
        if (!visible(value, vl)) {
            st->reject = 400;
            st->why = "request target has a byte that is not visible ASCII";
        }
        /* Kept to the answer's end: exactly its size. nghttp2 lets one
         * :path through per request. */
        cg_buf_set(&st->msg->url, value, vl);
    } else if (nl > 0 && name[0] == ':') {
        return 0; /* :scheme, :authority: the upstream's replace them */
    } else if (st->reject == 0 &&
               cg_hdrs_add(&st->msg->hdrs, (const char *)name, nl, (const char *)value, vl) != 0) {
        st->reject = 431;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    cg_h2conn_t *h = ud;
    cg_h2stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL || st->msg == NULL || st->reject)
        return 0;
    if (st->msg->body.len + len > h->c->ctx->cfg->max_request_bytes) {
        st->reject = 413;
        return 0;
    }
    cg_buf_put(&st->msg->body, data, len);
    return 0;
}

static void dispatch(cg_h2conn_t *h, cg_h2stream_t *st)
{
    int method = st->msg->method;
    /* CONNECT has no :path (RFC 9113 §8.5): the exchange refuses it. */
    bool bad = st->reject || method < 0 || (st->msg->url.len == 0 && method != HTTP_CONNECT);
    int status = st->reject ? st->reject : 400;
    if (status == 431 && ++h->n431 >= MAX_431)
        calm(h, "too many requests answered 431");
    st->method = method;
    st->ex = cg_exchange_new(h->c->ctx, st->msg, &h2_down, st);
    free(st->msg); /* emptied by the exchange */
    st->msg = NULL;
    if (!bad) {
        cg_exchange_run(st->ex);
        return;
    }
    cg_exchange_reject(st->ex, status,
                       status == 413   ? "request_too_large"
                       : status == 431 ? "headers_too_large"
                                       : "bad_request",
                       status == 413   ? "request body too large"
                       : status == 431 ? "request headers too large"
                       : st->why       ? st->why
                                       : "malformed request");
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    cg_h2conn_t *h = ud;
    if (f->hd.type == NGHTTP2_HEADERS)
        head_ends(h);
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    cg_h2stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    /* A declared body too large is answered at once; the rest is dropped. */
    bool now = st && st->reject == 413 && f->hd.type == NGHTTP2_HEADERS;
    if (!now && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    if (st && st->ex == NULL && !st->closed)
        dispatch(h, st);
    return 0;
}

/* Spends the control-frame budget; a connection that runs out is a flood. */
static int on_begin_frame(nghttp2_session *s, const nghttp2_frame_hd *hd, void *ud)
{
    (void)s;
    cg_h2conn_t *h = ud;
    /* A frame other than CONTINUATION also ends a block nghttp2 dropped
     * (refused stream) without a frame_recv for it. */
    if (hd->type != NGHTTP2_CONTINUATION)
        head_ends(h);
    if (hd->type == NGHTTP2_HEADERS)
        head_begins(h);
    bool control =
        hd->type != NGHTTP2_HEADERS && hd->type != NGHTTP2_CONTINUATION &&
        !(hd->type == NGHTTP2_DATA && (hd->length > 0 || (hd->flags & NGHTTP2_FLAG_END_STREAM)));
    if (!control)
        return 0;
    uint64_t now = cg_now_ms(h->c->ctx);
    h->budget += (double)(now - h->budget_at) * FLOOD_RATE / 1000.0;
    if (h->budget > FLOOD_BURST)
        h->budget = FLOOD_BURST;
    h->budget_at = now;
    if (--h->budget < 0) {
        calm(h, "control frame flood");
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

/* The last frame of a DATA item that read_body ended is sent: nghttp2 has
 * let the item go, and takes a new one from here on (its documentation
 * allows submitting in this callback). Bytes or the end that came in the
 * meantime go in it. */
static void data_item_gone(nghttp2_session *s, int32_t id)
{
    cg_h2stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL || !st->ending)
        return;
    st->ending = st->submitted = false;
    if (st->off < st->out.len || st->eof)
        send_queued(st);
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type == NGHTTP2_DATA)
        data_item_gone(s, f->hd.stream_id);
    if (f->hd.type != NGHTTP2_GOAWAY)
        return 0;
    uint32_t code = f->goaway.error_code;
    cg_metrics->goaway_sent[code == NGHTTP2_NO_ERROR            ? CG_GOAWAY_SHUTDOWN
                            : code == NGHTTP2_ENHANCE_YOUR_CALM ? CG_GOAWAY_CALM
                                                                : CG_GOAWAY_PROTOCOL]++;
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)ud;
    cg_h2stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    if (st == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(s, id, NULL);
    st->closed = true;
    if (st->ex == NULL) {
        stream_free(st);
        return 0;
    }
    cg_metrics->client_disconnects += code != NGHTTP2_NO_ERROR;
    cg_exchange_client_gone(st->ex); /* frees st through h2_done */
    return 0;
}

/* --- the connection --------------------------------------------------------------- */

static nghttp2_session_callbacks *callbacks(void)
{
    static nghttp2_session_callbacks *cbs;
    if (cbs == NULL) {
        cbs = cg_h2_callbacks_new();
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    }
    return cbs;
}

/* nghttp2's own limits: CONTINUATION floods and Rapid Reset. */
static nghttp2_option *options(void)
{
    static nghttp2_option *opt;
    if (opt == NULL) {
        opt = cg_h2_option_new();
        nghttp2_option_set_max_continuations(opt, 8);
        nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);
    }
    return opt;
}

static void h2_start(cg_client_t *c)
{
    cg_h2conn_t *h = cg_xcalloc(1, sizeof(*h));
    h->c = c;
    c->h2 = h;
    cg_list_init(&h->streams);
    h->budget = FLOOD_BURST;
    h->budget_at = cg_now_ms(c->ctx);
    if (nghttp2_session_server_new2(&h->s, callbacks(), h, options()) != 0) {
        h->s = NULL;
        cg_conn_close(&c->conn, CG_E_PROTOCOL);
        return;
    }
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS},
                                   {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST}};
    int rv = CG_H2_CALL(nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, 2));
    apply(h, cg_h2_verdict(h->s, 0, rv, "SETTINGS"));
    flush_soon(h);
}

/* Frames are gathered for one write in a buffer that every connection of
 * the process shares: there is one loop per process, and cg_conn_write
 * copies what the socket does not take, so the buffer is free again when a
 * flush returns and no connection keeps a burst's peak. A flush that starts
 * inside another (nghttp2 calls back into the shell) gathers in its own. */
static cg_buf_t gather;
static bool gather_busy;

/* Gathers the frames nghttp2 has ready into one write, while the socket
 * keeps up: frames wait in nghttp2 while it lags, bounded like HTTP/1.1. */
static void flush_now(cg_h2conn_t *h)
{
    cg_client_t *c = h->c;
    cg_defer_cancel(&h->flush);
    cg_buf_t own = {0};
    cg_buf_t *out = gather_busy ? &own : &gather;
    gather_busy = true;
    out->len = 0;
    bool full = false;
    while (h->s && cg_conn_usable(&c->conn)) {
        if (c->conn.queued + out->len >= CG_CONN_HWM) {
            full = true;
            break;
        }
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h->s, &data);
        if (n < 0) {
            cg_conn_close(&c->conn, CG_E_PROTOCOL);
            break;
        }
        if (n == 0)
            break;
        cg_buf_put(out, data, (size_t)n);
    }
    if (cg_conn_usable(&c->conn)) {
        uv_buf_t b = uv_buf_init(out->p, (unsigned)out->len);
        cg_conn_write(&c->conn, &b, 1);
    }
    out->len = 0;
    cg_buf_free(&own);
    if (out == &gather)
        gather_busy = false;
    /* Frames wait in nghttp2 past the high-water mark. `drain` goes on once
     * the queue falls; when the socket took all there is no queue to fall,
     * and nothing else would ask for the rest: the next safe point does. */
    if (full && h->s && cg_conn_usable(&c->conn) && !cg_conn_wait_drain(&c->conn))
        flush_soon(h);
    if (h->s && cg_conn_usable(&c->conn) && !nghttp2_session_want_read(h->s) &&
        !nghttp2_session_want_write(h->s) && c->conn.queued == 0)
        cg_conn_close(&c->conn, CG_OK);
}

static void h2_read(cg_client_t *c, const char *p, size_t n)
{
    cg_h2conn_t *h = c->h2;
    if (h->s == NULL)
        return;
    ssize_t r = nghttp2_session_mem_recv(h->s, (const uint8_t *)p, n);
    if (r < 0 && !h->calm) {
        cg_log_debug(NULL, "h2 client: %s", nghttp2_strerror((int)r));
        cg_conn_close(&c->conn, CG_E_PROTOCOL);
        return;
    }
    flush_now(h); /* nghttp2 has returned: a safe point */
    if (h->calm && cg_conn_usable(&c->conn)) {
        cg_conn_read_stop(&c->conn); /* nothing more is read from it */
        cg_conn_shutdown(&c->conn);  /* the GOAWAY goes out, then a FIN */
    }
}

static void h2_drained(cg_client_t *c)
{
    flush_now(c->h2);
}

static void h2_closed(cg_client_t *c)
{
    cg_h2conn_t *h = c->h2;
    cg_defer_cancel(&h->flush);
    while (!cg_list_empty(&h->streams)) {
        cg_h2stream_t *st = CG_CONTAINER_OF(h->streams.next, cg_h2stream_t, link);
        st->closed = true;
        if (st->ex)
            cg_exchange_client_gone(st->ex); /* frees st through h2_done */
        else
            stream_free(st);
    }
    if (h->s)
        nghttp2_session_del(h->s);
    free(h);
    c->h2 = NULL;
}

static bool h2_busy(const cg_client_t *c)
{
    return c->h2->nstreams > 0;
}

static void h2_drain(cg_client_t *c)
{
    cg_h2conn_t *h = c->h2;
    if (h->s) {
        /* no new streams; in-flight ones finish */
        apply(h, cg_h2_verdict(h->s, 0, CG_H2_CALL(nghttp2_submit_shutdown_notice(h->s)),
                               "shutdown notice"));
        flush_soon(h);
    }
}

static void h2_shutdown(cg_client_t *c)
{
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &c->h2->streams) {
        cg_h2stream_t *st = CG_CONTAINER_OF(pos, cg_h2stream_t, link);
        if (st->ex)
            cg_exchange_shutdown(st->ex);
    }
}

/* An idle connection, or one inside a header block, past its deadline:
 * GOAWAY(NO_ERROR) says the client may open a new one, then a FIN once it
 * is written. */
static void h2_expire(cg_client_t *c)
{
    cg_h2conn_t *h = c->h2;
    if (h->s == NULL) {
        cg_conn_close(&c->conn, CG_E_TIMEOUT);
        return;
    }
    int rv = CG_H2_CALL(nghttp2_session_terminate_session(h->s, NGHTTP2_NO_ERROR));
    apply(h, cg_h2_verdict(h->s, 0, rv, "GOAWAY"));
    flush_now(h);
    cg_conn_read_stop(&c->conn);
    cg_conn_shutdown(&c->conn);
    cg_client_expect_request(c, true); /* a client that never reads is closed next time */
}

const cg_proto_t cg_h2_proto = {h2_start, h2_read,  h2_drained,  h2_closed,
                                h2_busy,  h2_drain, h2_shutdown, h2_expire};
