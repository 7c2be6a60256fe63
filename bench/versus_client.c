/*
 * versus_client: the measuring client of bench/versus.
 *
 * Opens --streams streaming chat requests to one target (HTTP/1.1, one
 * connection per stream; or with --h2, h2c with prior knowledge, up to
 * --h2-streams-per-conn streams per connection), their starts spread evenly
 * over --ramp-ms. Each answer is read as SSE; events stamped by
 * versus_upstream (`"versus_ns":` CLOCK_MONOTONIC ns, `"versus_seq":`)
 * give, per event, delivery latency = the time of the read that completed
 * the event − the stamp. Per stream: TTFB = first response byte (HTTP/2:
 * the response HEADERS) − request write, TTFT = the first stamped event's
 * arrival − request write. A stream is ok when it answered 200 with every
 * one of --events stamped events exactly once, `data: [DONE]` and a clean
 * end of body; lost = expected events that did not arrive.
 *
 * One thread, epoll. Prints one JSON object on stdout (µs figures,
 * percentiles by nearest rank).
 *
 * usage: versus_client --port P [--host 127.0.0.1] [--streams 1000]
 *          [--events 64] [--interval-ms MS] [--ramp-ms 500] [--timeout-s 120]
 *          [--path P] [--close] [--h2] [--h2-streams-per-conn 100]
 * --events and --interval-ms are sent as X-Versus-Events and
 * X-Versus-Interval-Ms, which versus_upstream honours.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HEAD (64 * 1024)
#define MAX_LINE (4 * 1024 * 1024)

enum { F_NONE, F_CONNECT, F_STATUS, F_TRUNCATED, F_PROTOCOL, F_TIMEOUT };
enum { B_CLOSE, B_CHUNKED, B_LENGTH };
enum { CK_SIZE, CK_DATA, CK_DATA_CRLF, CK_TRAILER };

struct hconn;

typedef struct stream {
    struct hconn *conn;
    int32_t h2_id;
    int started, finished;
    int64_t t_req, t_first_byte, t_first_event;
    int status;
    int events, dups, errors, done_seen;
    int fail;
    char *line;
    size_t line_len, line_cap;
    uint8_t *seen; /* one bit per event number */
} stream_t;

typedef struct hconn {
    int fd;
    int connected, closed;
    int want_out;
    char *out;
    size_t out_len, out_off, out_cap;
    /* HTTP/1.1: one stream */
    stream_t *st;
    char *head; /* the response head, then a chunk-size line */
    size_t head_len, head_cap;
    int head_done, body_mode, ck_state;
    int64_t body_left;
    uint64_t ck_left;
    /* h2 */
    nghttp2_session *sess;
    stream_t **pending;
    int n_pending, n_live, n_assigned;
} hconn_t;

static const char *opt_host = "127.0.0.1";
static int opt_port;
static int opt_streams = 1000, opt_events = 64, opt_h2, opt_per_conn = 100, opt_close;
static double opt_ramp_ms = 500, opt_timeout_s = 120, opt_interval_ms = -1;
static const char *opt_path = "/v1/chat/completions";

static const char BODY[] = "{\"model\":\"versus\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                           "\"content\":\"Tell me about the weather.\"}]}";

static char events_hdr[32], interval_hdr[32];
static int ep;
static struct sockaddr_in target;
static stream_t *streams;
static hconn_t **conns;
static int n_conns;
static int n_open, n_peak_open, n_finished;
static int64_t *deliv;
static size_t n_deliv, cap_deliv;
static int64_t g_read_time; /* when the bytes being parsed were read */
static char rbuf[256 * 1024];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "versus_client: out of memory\n");
        exit(1);
    }
    return q;
}

/* ---- SSE: only `data:` lines matter ---- */

static long long member_int(const char *p, size_t n, const char *key)
{
    const char *k = memmem(p, n, key, strlen(key));
    if (!k)
        return -1;
    k += strlen(key);
    long long v = 0;
    int any = 0;
    while (k < p + n && *k >= '0' && *k <= '9') {
        v = v * 10 + (*k++ - '0');
        any = 1;
    }
    return any ? v : -1;
}

static void on_line(stream_t *s, const char *l, size_t n)
{
    if (n && l[n - 1] == '\r')
        n--;
    if (n < 5 || memcmp(l, "data:", 5) != 0)
        return;
    l += 5;
    n -= 5;
    if (n && *l == ' ') {
        l++;
        n--;
    }
    if (n == 6 && memcmp(l, "[DONE]", 6) == 0) {
        s->done_seen = 1;
        return;
    }
    if (n >= 8 && memcmp(l, "{\"error\"", 8) == 0) {
        s->errors++;
        return;
    }
    long long stamp = member_int(l, n, "\"versus_ns\":");
    long long seq = member_int(l, n, "\"versus_seq\":");
    if (stamp < 0 || seq < 0)
        return;
    if (seq >= opt_events || (s->seen[seq / 8] & (1u << (seq % 8)))) {
        s->dups++;
        return;
    }
    s->seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
    s->events++;
    if (!s->t_first_event)
        s->t_first_event = g_read_time;
    if (n_deliv == cap_deliv) {
        cap_deliv = cap_deliv ? 2 * cap_deliv : 65536;
        deliv = xrealloc(deliv, cap_deliv * sizeof *deliv);
    }
    deliv[n_deliv++] = g_read_time - (int64_t)stamp;
}

static int sse_feed(stream_t *s, const char *p, size_t n)
{
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t seg = nl ? (size_t)(nl - p) : n;
        if (s->line_len || !nl) {
            if (s->line_len + seg > MAX_LINE)
                return -1;
            if (s->line_len + seg > s->line_cap) {
                s->line_cap = (s->line_len + seg) * 2;
                s->line = xrealloc(s->line, s->line_cap);
            }
            memcpy(s->line + s->line_len, p, seg);
            s->line_len += seg;
            if (!nl)
                return 0;
            on_line(s, s->line, s->line_len);
            s->line_len = 0;
        } else {
            on_line(s, p, seg);
        }
        p += seg + 1;
        n -= seg + 1;
    }
    return 0;
}

/* ---- streams and connections ---- */

static void stream_finish(stream_t *s, int fail)
{
    if (s->finished)
        return;
    s->finished = 1;
    n_finished++;
    if (s->started)
        n_open--;
    if (!fail && s->status != 200)
        fail = F_STATUS;
    if (!fail && (!s->done_seen || s->events != opt_events || s->dups || s->errors))
        fail = F_TRUNCATED;
    s->fail = fail;
    free(s->line);
    s->line = NULL;
}

static void conn_close(hconn_t *c, int fail)
{
    if (c->closed)
        return;
    c->closed = 1;
    if (c->st)
        stream_finish(c->st, fail);
    for (int i = 0; i < c->n_pending; i++)
        stream_finish(c->pending[i], fail);
    c->n_pending = 0;
    if (c->sess) {
        /* Streams still open on the session end with the connection. */
        for (int i = 0; i < opt_streams; i++)
            if (streams[i].conn == c && !streams[i].finished)
                stream_finish(&streams[i], fail);
        nghttp2_session_del(c->sess);
        c->sess = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->head);
    c->head = NULL;
    free(c->out);
    c->out = NULL;
}

static void set_out(hconn_t *c, int want)
{
    if (c->want_out == want || c->closed)
        return;
    c->want_out = want;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void queue_out(hconn_t *c, const void *p, size_t n)
{
    if (c->out_len + n > c->out_cap) {
        c->out_cap = (c->out_len + n) * 2;
        c->out = xrealloc(c->out, c->out_cap);
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static int flush_out(hconn_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            return -1;
        }
        c->out_off += (size_t)n;
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    set_out(c, c->out_len > 0);
    return 0;
}

/* ---- HTTP/1.1 ---- */

static void h1_send_request(hconn_t *c)
{
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Accept: text/event-stream\r\nX-Versus-Events: %s\r\n%s%s%s"
                     "%sContent-Length: %zu\r\n\r\n%s",
                     opt_path, opt_host, opt_port, events_hdr,
                     interval_hdr[0] ? "X-Versus-Interval-Ms: " : "", interval_hdr,
                     interval_hdr[0] ? "\r\n" : "", opt_close ? "Connection: close\r\n" : "",
                     strlen(BODY), BODY);
    c->st->t_req = now_ns();
    queue_out(c, req, (size_t)n);
    if (flush_out(c) < 0)
        conn_close(c, F_CONNECT);
}

static int h1_parse_head(hconn_t *c)
{
    char *end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
    if (!end)
        return c->head_len > MAX_HEAD ? -1 : 0;
    stream_t *s = c->st;
    if (c->head_len < 12 || memcmp(c->head, "HTTP/1.", 7) != 0)
        return -1;
    s->status = atoi(c->head + 9);
    c->body_mode = B_CLOSE;
    char *eol = memmem(c->head, c->head_len, "\r\n", 2);
    for (char *l = eol + 2; l < end;) {
        char *le = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
        if (!strncasecmp(l, "transfer-encoding:", 18) && memmem(l, (size_t)(le - l), "chunked", 7))
            c->body_mode = B_CHUNKED;
        else if (!strncasecmp(l, "content-length:", 15) && c->body_mode != B_CHUNKED) {
            c->body_mode = B_LENGTH;
            c->body_left = strtoll(l + 15, NULL, 10);
        }
        l = le + 2;
    }
    c->head_done = 1;
    return (int)((end + 4) - c->head);
}

/* Body bytes; 1 when the body ended, 0 for more, -1 bad. Chunk sizes and
 * payload may be cut anywhere; a size line is kept in c->head. */
static int h1_body(hconn_t *c, const char *p, size_t n)
{
    stream_t *s = c->st;
    if (c->body_mode == B_CLOSE)
        return sse_feed(s, p, n) < 0 ? -1 : 0;
    if (c->body_mode == B_LENGTH) {
        size_t take = n < (uint64_t)c->body_left ? n : (size_t)c->body_left;
        c->body_left -= (int64_t)take;
        if (sse_feed(s, p, take) < 0)
            return -1;
        return c->body_left == 0;
    }
    while (n) {
        if (c->ck_state == CK_DATA) {
            size_t take = n < c->ck_left ? n : (size_t)c->ck_left;
            if (sse_feed(s, p, take) < 0)
                return -1;
            p += take;
            n -= take;
            c->ck_left -= take;
            if (!c->ck_left)
                c->ck_state = CK_DATA_CRLF;
            continue;
        }
        /* a line: size, the CRLF after data, or a trailer */
        const char *nl = memchr(p, '\n', n);
        size_t seg = nl ? (size_t)(nl - p) + 1 : n;
        if (c->head_len + seg > 4096)
            return -1;
        memcpy(c->head + c->head_len, p, seg);
        c->head_len += seg;
        p += seg;
        n -= seg;
        if (!nl)
            break;
        char *l = c->head;
        size_t ll = c->head_len;
        c->head_len = 0;
        if (c->ck_state == CK_DATA_CRLF) {
            c->ck_state = CK_SIZE;
        } else if (c->ck_state == CK_SIZE) {
            char *e;
            unsigned long long sz = strtoull(l, &e, 16);
            if (e == l)
                return -1;
            c->ck_left = sz;
            c->ck_state = sz ? CK_DATA : CK_TRAILER;
        } else if (ll <= 2) {
            return 1; /* the empty line after the last chunk */
        }
    }
    return 0;
}

static void h1_readable(hconn_t *c)
{
    stream_t *s = c->st;
    for (;;) {
        ssize_t n = read(c->fd, rbuf, sizeof rbuf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        g_read_time = now_ns();
        if (n <= 0) {
            /* EOF ends a close-delimited body; anything else is a failure. */
            int ok = n == 0 && c->head_done && c->body_mode == B_CLOSE;
            conn_close(c, ok ? F_NONE : F_TRUNCATED);
            return;
        }
        if (!s->t_first_byte)
            s->t_first_byte = g_read_time;
        const char *p = rbuf;
        size_t len = (size_t)n;
        if (!c->head_done) {
            if (c->head_len + len > MAX_HEAD + sizeof rbuf) {
                conn_close(c, F_PROTOCOL);
                return;
            }
            if (c->head_len + len > c->head_cap) {
                c->head_cap = c->head_len + len < 4096 ? 4096 : c->head_len + len;
                c->head = xrealloc(c->head, c->head_cap);
            }
            size_t before = c->head_len;
            memcpy(c->head + c->head_len, p, len);
            c->head_len += len;
            int hl = h1_parse_head(c);
            if (hl < 0) {
                conn_close(c, F_PROTOCOL);
                return;
            }
            if (hl == 0)
                continue;
            p += (size_t)hl - before;
            len -= (size_t)hl - before;
            c->head_len = 0;
            c->ck_state = CK_SIZE;
            if (c->head_cap < 4096) {
                c->head_cap = 4096;
                c->head = xrealloc(c->head, c->head_cap);
            }
        }
        int r = h1_body(c, p, len);
        if (r < 0) {
            conn_close(c, F_PROTOCOL);
            return;
        }
        if (r == 1) {
            conn_close(c, F_NONE);
            return;
        }
    }
}

/* ---- h2c (prior knowledge) ---- */

static int h2_flush(hconn_t *c)
{
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->sess, &data);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        queue_out(c, data, (size_t)n);
    }
    return flush_out(c);
}

static ssize_t body_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
    size_t n = strlen(BODY);
    if (n > length)
        n = length; /* the body is far smaller than a frame */
    memcpy(buf, BODY, n);
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void h2_submit(hconn_t *c, stream_t *s)
{
    char auth[300], clen[32];
    snprintf(auth, sizeof auth, "%s:%d", opt_host, opt_port);
    snprintf(clen, sizeof clen, "%zu", strlen(BODY));
#define NV(n, v)                                                                                   \
    {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NO_COPY_NAME}
    nghttp2_nv nva[] = {NV(":method", "POST"),
                        NV(":scheme", "http"),
                        NV(":path", opt_path),
                        NV(":authority", auth),
                        NV("content-type", "application/json"),
                        NV("accept", "text/event-stream"),
                        NV("content-length", clen),
                        NV("x-versus-events", events_hdr),
                        NV("x-versus-interval-ms", interval_hdr)};
#undef NV
    size_t nnv = sizeof nva / sizeof nva[0] - (interval_hdr[0] ? 0 : 1);
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = body_read};
    s->t_req = now_ns();
    int32_t id = nghttp2_submit_request(c->sess, NULL, nva, nnv, &dp, s);
    if (id < 0) {
        stream_finish(s, F_PROTOCOL);
        return;
    }
    s->h2_id = id;
    c->n_live++;
}

static int on_h2_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    stream_t *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s && namelen == 7 && memcmp(name, ":status", 7) == 0) {
        s->status = atoi((const char *)value);
        if (!s->t_first_byte)
            s->t_first_byte = g_read_time;
    }
    return 0;
}

static int on_h2_data(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                      const uint8_t *data, size_t len, void *user_data)
{
    stream_t *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (s && sse_feed(s, (const char *)data, len) < 0)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    return 0;
}

static int on_h2_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                       void *user_data)
{
    hconn_t *c = user_data;
    stream_t *s = nghttp2_session_get_stream_user_data(session, stream_id);
    if (s) {
        stream_finish(s, error_code ? F_TRUNCATED : F_NONE);
        c->n_live--;
    }
    return 0;
}

static void h2_start(hconn_t *c)
{
    static nghttp2_session_callbacks *cbs;
    if (!cbs) {
        nghttp2_session_callbacks_new(&cbs);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_h2_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_h2_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_h2_close);
    }
    nghttp2_session_client_new(&c->sess, cbs, c);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}};
    nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, 2);
    nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, 16 << 20);
    for (int i = 0; i < c->n_pending; i++)
        h2_submit(c, c->pending[i]);
    c->n_pending = 0;
    if (h2_flush(c) < 0)
        conn_close(c, F_CONNECT);
}

static void h2_readable(hconn_t *c)
{
    for (;;) {
        ssize_t n = read(c->fd, rbuf, sizeof rbuf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        g_read_time = now_ns();
        if (n <= 0) {
            conn_close(c, F_TRUNCATED);
            return;
        }
        if (nghttp2_session_mem_recv(c->sess, (const uint8_t *)rbuf, (size_t)n) < 0) {
            conn_close(c, F_PROTOCOL);
            return;
        }
    }
    if (h2_flush(c) < 0) {
        conn_close(c, F_TRUNCATED);
        return;
    }
    if (c->n_live == 0 && c->n_pending == 0 && c->n_assigned == opt_per_conn)
        conn_close(c, F_NONE);
}

/* ---- scheduling ---- */

static hconn_t *conn_open(void)
{
    hconn_t *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "versus_client: out of memory\n");
        exit(1);
    }
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    conns[n_conns++] = c;
    if (c->fd < 0) {
        c->closed = 1;
        return c;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&target, sizeof target) < 0 && errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
        c->closed = 1;
        return c;
    }
    c->want_out = 1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    return c;
}

static hconn_t *h2_current;

static void start_stream(stream_t *s, int idx)
{
    s->started = 1;
    s->seen = calloc((size_t)opt_events / 8 + 1, 1);
    n_open++;
    if (n_open > n_peak_open)
        n_peak_open = n_open;
    if (!opt_h2) {
        hconn_t *c = conn_open();
        c->st = s;
        s->conn = c;
        if (c->closed)
            stream_finish(s, F_CONNECT);
        return;
    }
    if (idx % opt_per_conn == 0) {
        h2_current = conn_open();
        h2_current->pending = calloc((size_t)opt_per_conn, sizeof(stream_t *));
    }
    hconn_t *c = h2_current;
    s->conn = c;
    c->n_assigned++;
    if (c->closed) {
        stream_finish(s, F_CONNECT);
        return;
    }
    if (!c->connected) {
        c->pending[c->n_pending++] = s;
        return;
    }
    h2_submit(c, s);
    if (h2_flush(c) < 0)
        conn_close(c, F_TRUNCATED);
}

static void on_conn_event(hconn_t *c, uint32_t evs)
{
    if (c->closed)
        return;
    if (!c->connected && (evs & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
            conn_close(c, F_CONNECT);
            return;
        }
        c->connected = 1;
        set_out(c, 0);
        if (opt_h2)
            h2_start(c);
        else
            h1_send_request(c);
        return;
    }
    if ((evs & EPOLLOUT) && flush_out(c) < 0) {
        conn_close(c, F_TRUNCATED);
        return;
    }
    if (evs & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (opt_h2)
            h2_readable(c);
        else
            h1_readable(c);
    }
}

/* ---- summary ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_us(int64_t *v, size_t n, double q)
{
    if (!n)
        return -1;
    size_t r = (size_t)ceil(q * (double)n);
    if (r < 1)
        r = 1;
    return (double)v[r - 1] / 1000.0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: versus_client --port P [--host A] [--streams N] [--events N] [--ramp-ms MS]\n"
            "         [--interval-ms MS] [--timeout-s S] [--path P] [--close] [--h2]\n"
            "         [--h2-streams-per-conn N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--h2")) {
            opt_h2 = 1;
            continue;
        }
        if (!strcmp(a, "--close")) {
            opt_close = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--host"))
            opt_host = v;
        else if (!strcmp(a, "--port"))
            opt_port = atoi(v);
        else if (!strcmp(a, "--streams"))
            opt_streams = atoi(v);
        else if (!strcmp(a, "--events"))
            opt_events = atoi(v);
        else if (!strcmp(a, "--ramp-ms"))
            opt_ramp_ms = atof(v);
        else if (!strcmp(a, "--timeout-s"))
            opt_timeout_s = atof(v);
        else if (!strcmp(a, "--path"))
            opt_path = v;
        else if (!strcmp(a, "--interval-ms"))
            opt_interval_ms = atof(v);
        else if (!strcmp(a, "--h2-streams-per-conn"))
            opt_per_conn = atoi(v);
        else
            usage();
    }
    if (opt_port <= 0 || opt_streams < 1 || opt_events < 1 || opt_per_conn < 1 || opt_ramp_ms < 0)
        usage();
    snprintf(events_hdr, sizeof events_hdr, "%d", opt_events);
    if (opt_interval_ms >= 0)
        snprintf(interval_hdr, sizeof interval_hdr, "%g", opt_interval_ms);
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)opt_port);
    if (inet_pton(AF_INET, opt_host, &target.sin_addr) != 1) {
        fprintf(stderr, "versus_client: --host must be an IPv4 address\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (!opt_h2 && rl.rlim_cur < (rlim_t)opt_streams + 16)
            fprintf(stderr, "versus_client: RLIMIT_NOFILE %llu is below %d streams\n",
                    (unsigned long long)rl.rlim_cur, opt_streams);
    }
    signal(SIGPIPE, SIG_IGN);
    ep = epoll_create1(EPOLL_CLOEXEC);
    streams = calloc((size_t)opt_streams, sizeof *streams);
    conns = calloc((size_t)opt_streams, sizeof *conns);

    int64_t t0 = now_ns();
    int64_t ramp = (int64_t)(opt_ramp_ms * 1e6);
    int64_t deadline = t0 + ramp + (int64_t)(opt_timeout_s * 1e9);
    int next = 0;
    struct epoll_event evs[1024];
    while (n_finished < opt_streams) {
        int64_t t = now_ns();
        while (next < opt_streams && t >= t0 + ramp * next / opt_streams) {
            start_stream(&streams[next], next);
            next++;
        }
        if (t >= deadline)
            break;
        int64_t wait = deadline - t;
        if (next < opt_streams) {
            int64_t due = t0 + ramp * next / opt_streams - t;
            if (due < wait)
                wait = due;
        }
        if (wait < 0)
            wait = 0;
        struct timespec ts = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
        int n = epoll_pwait2(ep, evs, 1024, &ts, NULL);
        if (n < 0 && errno != EINTR) {
            perror("epoll_pwait2");
            return 1;
        }
        for (int i = 0; i < n; i++)
            on_conn_event(evs[i].data.ptr, evs[i].events);
    }
    int64_t elapsed = now_ns() - t0;
    for (int i = 0; i < n_conns; i++)
        conn_close(conns[i], F_TIMEOUT);
    for (int i = 0; i < opt_streams; i++)
        if (!streams[i].finished)
            stream_finish(&streams[i], F_TIMEOUT);

    int ok = 0, fails[F_TIMEOUT + 1] = {0};
    long long events = 0, dups = 0, errors = 0;
    int64_t *ttft = calloc((size_t)opt_streams, sizeof *ttft);
    int64_t *ttfb = calloc((size_t)opt_streams, sizeof *ttfb);
    size_t n_ttft = 0, n_ttfb = 0;
    for (int i = 0; i < opt_streams; i++) {
        stream_t *s = &streams[i];
        events += s->events;
        dups += s->dups;
        errors += s->errors;
        fails[s->fail]++;
        if (!s->fail)
            ok++;
        if (s->t_first_event)
            ttft[n_ttft++] = s->t_first_event - s->t_req;
        if (s->t_first_byte)
            ttfb[n_ttfb++] = s->t_first_byte - s->t_req;
    }
    if (n_deliv)
        qsort(deliv, n_deliv, sizeof *deliv, cmp_i64);
    qsort(ttft, n_ttft, sizeof *ttft, cmp_i64);
    qsort(ttfb, n_ttfb, sizeof *ttfb, cmp_i64);
    long long expected = (long long)opt_streams * opt_events;
    printf("{\"proto\":\"%s\",\"streams\":%d,\"ok\":%d,\"failed\":%d,\"events\":%lld,"
           "\"expected\":%lld,\"lost\":%lld,\"dups\":%lld,\"error_events\":%lld,"
           "\"fail_connect\":%d,\"fail_status\":%d,\"fail_truncated\":%d,\"fail_protocol\":%d,"
           "\"fail_timeout\":%d,\"peak_open\":%d,\"connections\":%d,\"elapsed_s\":%.3f,"
           "\"ttfb_p50_us\":%.1f,\"ttfb_p99_us\":%.1f,"
           "\"ttft_p50_us\":%.1f,\"ttft_p99_us\":%.1f,\"ttft_max_us\":%.1f,"
           "\"deliv_p50_us\":%.1f,\"deliv_p99_us\":%.1f,\"deliv_p999_us\":%.1f,"
           "\"deliv_max_us\":%.1f}\n",
           opt_h2 ? "h2c" : "http1.1", opt_streams, ok, opt_streams - ok, events, expected,
           expected - events, dups, errors, fails[F_CONNECT], fails[F_STATUS], fails[F_TRUNCATED],
           fails[F_PROTOCOL], fails[F_TIMEOUT], n_peak_open, n_conns, (double)elapsed / 1e9,
           pct_us(ttfb, n_ttfb, 0.5), pct_us(ttfb, n_ttfb, 0.99), pct_us(ttft, n_ttft, 0.5),
           pct_us(ttft, n_ttft, 0.99), pct_us(ttft, n_ttft, 1.0), pct_us(deliv, n_deliv, 0.5),
           pct_us(deliv, n_deliv, 0.99), pct_us(deliv, n_deliv, 0.999),
           pct_us(deliv, n_deliv, 1.0));
    free(ttft);
    free(ttfb);
    return ok == opt_streams ? 0 : 1;
}
