/*
 * versus_upstream: the paced SSE upstream of bench/versus.
 *
 * An HTTP/1.1 and h2c server (one thread, epoll) that answers every request, any
 * method and path, with a chat-completion SSE stream of --events events,
 * --interval-ms apart, followed by `data: [DONE]`. Each event carries, as
 * extra top-level members, its number (`versus_seq`) and the time it was
 * handed to the kernel (`versus_ns`, CLOCK_MONOTONIC nanoseconds), so a
 * client on the same machine computes delivery latency as receive time
 * minus that stamp. The first event goes out with the response head as
 * soon as the request is complete (after --first-delay-ms, default 0).
 * A request may set its own count and pace with the headers
 * `X-Versus-Events: N` and `X-Versus-Interval-Ms: MS` (a gateway forwards
 * them), so one upstream serves every run of a benchmark.
 *
 * Responses are chunked and keep-alive (a gateway's pool reuses the
 * connection), unless the request says `Connection: close` or is
 * HTTP/1.0. Events are paced on a schedule (start + k × interval), so a
 * late loop turn does not shift later events; the stamp is taken when the
 * event is actually written, so upstream lateness never counts as delivery
 * latency.
 *
 * A connection that opens with the HTTP/2 preface is served as h2c (prior
 * knowledge, nghttp2): each request stream gets the same answer as DATA
 * frames, --h2-max-streams (1024) of them at once per connection.
 *
 * With --tls-cert and --tls-key a second listener (--tls-port, default any)
 * serves the same answers over TLS (mbedTLS, TLS 1.2, ALPN "h2" and
 * "http/1.1", a session cache for resumption), next to the plaintext one,
 * in the same loop with the same pacing and stamps: a client that speaks
 * plaintext to --port and a gateway that speaks TLS to --tls-port see the
 * same upstream. TLS is non-blocking: the record layer writes through the
 * connection's own queue (which never refuses bytes), so mbedtls_ssl_write
 * never has to be repeated and only reads wait for the socket.
 *
 * usage: versus_upstream [--host 127.0.0.1] [--port 0] [--events 64]
 *          [--interval-ms 20] [--first-delay-ms 0] [--content-bytes 8]
 *          [--h2-max-streams 1024] [--ready-file F] [--stats-file F]
 *          [--tls-cert F --tls-key F [--tls-port 0]]
 * The bound port is written to --ready-file (with TLS, a second line holds
 * the TLS port); on SIGTERM/SIGINT it stops and writes a one-line JSON
 * summary to --stats-file (and stderr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_cache.h>
#include <mbedtls/x509_crt.h>
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

#define MAX_HEAD   (64 * 1024)
#define NOT_QUEUED SIZE_MAX

enum { ST_HEAD, ST_BODY, ST_STREAM, ST_CLOSING };
enum { CK_SIZE, CK_DATA, CK_DATA_CRLF, CK_TRAILER };

struct conn;
struct h2s;

/* A paced answer's place in the timer heap: an HTTP/1.1 connection's
 * answer (s NULL) or an h2 stream of connection c. */
typedef struct pace {
    int64_t due; /* when the next event is due */
    size_t heap_i;
    struct conn *c;
    struct h2s *s;
} pace_t;

/* An h2 request stream and the event bytes nghttp2 has not taken yet. */
typedef struct h2s {
    pace_t pace;
    int32_t id;
    int events, seq, started, done;
    int64_t interval;
    char *buf;
    size_t len, off, cap;
    struct h2s *prev, *next;
} h2s_t;

typedef struct conn {
    int fd;
    mbedtls_ssl_context *ssl; /* set on the TLS listener's connections */
    int hs_done;              /* the TLS handshake is over */
    int proto_known;
    nghttp2_session *h2; /* set when the client sent the h2 preface */
    h2s_t *streams;
    int state;
    char *in;
    size_t in_len, in_cap;
    int64_t body_left; /* Content-Length bytes still to read */
    int chunked, ck_state;
    uint64_t ck_left;
    int close_after;
    int events;       /* events in this answer */
    int64_t interval; /* ns between them */
    int seq;          /* next event to send */
    pace_t pace;
    char *out; /* bytes the kernel did not take yet */
    size_t out_len, out_off, out_cap;
    int want_out;
} conn_t;

static int opt_events = 64;
static double opt_interval_ms = 20;
static double opt_first_delay_ms = 0;
static int opt_content_bytes = 8;
static int opt_h2_max_streams = 1024;
static const char *opt_ready_file, *opt_stats_file;
static const char *opt_tls_cert, *opt_tls_key;

/* The TLS listener's configuration, shared by its connections. */
static mbedtls_ssl_config tls_conf;
static mbedtls_x509_crt tls_cert;
static mbedtls_pk_context tls_key;
static mbedtls_entropy_context tls_entropy;
static mbedtls_ctr_drbg_context tls_drbg;
static mbedtls_ssl_cache_context tls_cache;
static const char *tls_alpn[] = {"h2", "http/1.1", NULL};
static uint64_t n_tls_accepted, n_tls_handshakes, n_tls_failed, n_tls_resumed;

/* Markers in epoll's data of the two listeners. */
static char L_PLAIN, L_TLS;

static int ep;
static volatile sig_atomic_t stop;
static pace_t **heap;
static size_t heap_len, heap_cap;
static uint64_t n_accepted, n_requests, n_completed, n_events, n_aborted, n_open, n_peak_open;

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
        fprintf(stderr, "versus_upstream: out of memory\n");
        exit(1);
    }
    return q;
}

/* ---- a min-heap of streaming connections by their next event's time ---- */

static void heap_set(size_t i, pace_t *c)
{
    heap[i] = c;
    c->heap_i = i;
}

static void heap_up(size_t i)
{
    pace_t *c = heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (heap[p]->due <= c->due)
            break;
        heap_set(i, heap[p]);
        i = p;
    }
    heap_set(i, c);
}

static void heap_down(size_t i)
{
    pace_t *c = heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l >= heap_len)
            break;
        m = l;
        if (l + 1 < heap_len && heap[l + 1]->due < heap[l]->due)
            m = l + 1;
        if (heap[m]->due >= c->due)
            break;
        heap_set(i, heap[m]);
        i = m;
    }
    heap_set(i, c);
}

static void heap_push(pace_t *c)
{
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? 2 * heap_cap : 1024;
        heap = xrealloc(heap, heap_cap * sizeof *heap);
    }
    heap[heap_len] = c;
    c->heap_i = heap_len++;
    heap_up(c->heap_i);
}

static void heap_remove(pace_t *c)
{
    size_t i = c->heap_i;
    if (i == NOT_QUEUED)
        return;
    c->heap_i = NOT_QUEUED;
    pace_t *last = heap[--heap_len];
    if (i == heap_len)
        return;
    heap_set(i, last);
    heap_up(i);
    heap_down(last->heap_i);
}

/* ---- connections ---- */

static void conn_close(conn_t *c)
{
    if (c->state == ST_STREAM) {
        n_aborted++;
        n_open--;
    }
    heap_remove(&c->pace);
    while (c->streams) {
        h2s_t *st = c->streams;
        c->streams = st->next;
        heap_remove(&st->pace);
        if (st->started && !st->done) {
            n_aborted++;
            n_open--;
        }
        free(st->buf);
        free(st);
    }
    if (c->h2)
        nghttp2_session_del(c->h2);
    if (c->ssl) {
        mbedtls_ssl_free(c->ssl);
        free(c->ssl);
    }
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

static void set_events(conn_t *c, int want_out)
{
    if (c->want_out == want_out)
        return;
    c->want_out = want_out;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Writes what is queued; 0 on success (maybe partial), -1 when the peer is gone. */
static int flush_out(conn_t *c)
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
    set_events(c, c->out_len > 0);
    return 0;
}

/* Bytes for the socket, as they are (plaintext, or TLS records): what the
 * kernel does not take now is queued. -1 when the peer is gone. */
static int raw_send(conn_t *c, const char *p, size_t n)
{
    if (c->out_len == 0) {
        ssize_t w = write(c->fd, p, n);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        }
        if (n == 0)
            return 0;
    }
    if (c->out_len + n > c->out_cap) {
        c->out_cap = (c->out_len + n) * 2;
        c->out = xrealloc(c->out, c->out_cap);
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    set_events(c, 1);
    return 0;
}

/* ---- TLS: mbedTLS over the connection's socket and queue ---- */

/* The record layer's output goes through raw_send, which takes every byte
 * (the kernel's share now, the rest queued for EPOLLOUT): mbedTLS never
 * sees WANT_WRITE. */
static int tls_bio_send(void *ctx, const unsigned char *p, size_t n)
{
    return raw_send(ctx, (const char *)p, n) < 0 ? MBEDTLS_ERR_NET_SEND_FAILED : (int)n;
}

static int tls_bio_recv(void *ctx, unsigned char *p, size_t n)
{
    conn_t *c = ctx;
    ssize_t r = read(c->fd, p, n);
    if (r >= 0)
        return (int)r;
    if (errno == EAGAIN || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return MBEDTLS_ERR_NET_RECV_FAILED;
}

static void tls_die(int rc, const char *what)
{
    char buf[160];
    mbedtls_strerror(rc, buf, sizeof buf);
    fprintf(stderr, "versus_upstream: %s: %s\n", what, buf);
    exit(1);
}

/* The session cache's lookup, counting the handshakes it lets resume. */
static int tls_cache_get(void *data, mbedtls_ssl_session *session)
{
    int r = mbedtls_ssl_cache_get(data, session);
    if (r == 0)
        n_tls_resumed++;
    return r;
}

static void tls_setup(void)
{
    mbedtls_ssl_config_init(&tls_conf);
    mbedtls_x509_crt_init(&tls_cert);
    mbedtls_pk_init(&tls_key);
    mbedtls_entropy_init(&tls_entropy);
    mbedtls_ctr_drbg_init(&tls_drbg);
    mbedtls_ssl_cache_init(&tls_cache);
    int rc = mbedtls_ctr_drbg_seed(&tls_drbg, mbedtls_entropy_func, &tls_entropy,
                                   (const unsigned char *)"versus", 6);
    if (rc != 0)
        tls_die(rc, "TLS random generator");
    if ((rc = mbedtls_x509_crt_parse_file(&tls_cert, opt_tls_cert)) != 0)
        tls_die(rc, opt_tls_cert);
    if ((rc = mbedtls_pk_parse_keyfile(&tls_key, opt_tls_key, NULL)) != 0)
        tls_die(rc, opt_tls_key);
    rc = mbedtls_ssl_config_defaults(&tls_conf, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                     MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0)
        tls_die(rc, "TLS configuration");
    mbedtls_ssl_conf_rng(&tls_conf, mbedtls_ctr_drbg_random, &tls_drbg);
    mbedtls_ssl_conf_min_version(&tls_conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
    if ((rc = mbedtls_ssl_conf_own_cert(&tls_conf, &tls_cert, &tls_key)) != 0)
        tls_die(rc, "TLS certificate");
    if ((rc = mbedtls_ssl_conf_alpn_protocols(&tls_conf, tls_alpn)) != 0)
        tls_die(rc, "TLS ALPN");
    /* Session resumption for gateways that reuse sessions on new connections. */
    mbedtls_ssl_cache_set_max_entries(&tls_cache, 16384);
    mbedtls_ssl_conf_session_cache(&tls_conf, &tls_cache, tls_cache_get,
                                   mbedtls_ssl_cache_set);
}

/* read(2) for either kind of connection: the TLS handshake first, then
 * decrypted bytes. 0 when the connection is over (EOF, close_notify, a TLS
 * error), -1 with errno EAGAIN when the socket has nothing more for now. */
static ssize_t conn_read(conn_t *c, char *buf, size_t n)
{
    if (!c->ssl)
        return read(c->fd, buf, n);
    int r;
    if (!c->hs_done) {
        r = mbedtls_ssl_handshake(c->ssl);
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) {
            errno = EAGAIN;
            return -1;
        }
        if (r != 0) {
            n_tls_failed++;
            return 0;
        }
        c->hs_done = 1;
        n_tls_handshakes++;
    }
    r = mbedtls_ssl_read(c->ssl, (unsigned char *)buf, n);
    if (r > 0)
        return r;
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

/* Application bytes for the peer: as they are, or as TLS records. */
static int send_bytes(conn_t *c, const char *p, size_t n)
{
    if (!c->ssl)
        return raw_send(c, p, n);
    while (n > 0) {
        int r = mbedtls_ssl_write(c->ssl, (const unsigned char *)p, n);
        if (r < 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static const char *const WORDS[] = {"the ", "model ", "answers ", "with ",  "a ",   "token ",
                                    "at ",  "a ",     "time, ",   "paced ", "and ", "stamped. "};

/* Event number seq of an answer of `events`, stamped now; the last one is
 * followed by `data: [DONE]`. Returns its length. */
static int format_event(char *ev, size_t cap, int seq, int events)
{
    char content[256];
    size_t cl = 0;
    for (int w = seq; cl < (size_t)opt_content_bytes && cl < sizeof content - 16; w++) {
        const char *s = WORDS[(size_t)w % (sizeof WORDS / sizeof WORDS[0])];
        size_t sl = strlen(s);
        memcpy(content + cl, s, sl);
        cl += sl;
    }
    if (cl > (size_t)opt_content_bytes)
        cl = (size_t)opt_content_bytes;
    content[cl] = 0;
    int last = seq == events - 1;
    int64_t t = now_ns();
    n_events++;
    return snprintf(ev, cap,
                    "data: {\"id\":\"chatcmpl-versus\",\"object\":\"chat.completion.chunk\","
                    "\"created\":1700000000,\"model\":\"versus\",\"choices\":[{\"index\":0,"
                    "\"delta\":{\"content\":\"%s\"},\"finish_reason\":%s}],"
                    "\"versus_seq\":%d,\"versus_ns\":%lld}\n\n%s",
                    content, last ? "\"stop\"" : "null", seq, (long long)t,
                    last ? "data: [DONE]\n\n" : "");
}

/* Event c->seq as one chunk (plus the end of the body after the last one),
 * stamped and written. -1 when the peer is gone. */
static int send_event(conn_t *c, int with_head)
{
    int last = c->seq == c->events - 1;
    char buf[1024], ev[768];
    size_t off = 0;
    if (with_head) {
        off = (size_t)snprintf(buf, sizeof buf,
                               "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n%s\r\n",
                               c->close_after ? "Connection: close\r\n" : "");
    }
    int el = format_event(ev, sizeof ev, c->seq, c->events);
    off += (size_t)snprintf(buf + off, sizeof buf - off, "%x\r\n%s\r\n%s", (unsigned)el, ev,
                            last ? "0\r\n\r\n" : "");
    c->seq++;
    return send_bytes(c, buf, off);
}

static int parse_request(conn_t *c);

/* The answer's end: back to reading the next request, or closing. */
static int stream_done(conn_t *c)
{
    n_completed++;
    n_open--;
    heap_remove(&c->pace);
    if (c->close_after) {
        c->state = ST_CLOSING;
        shutdown(c->fd, SHUT_RD);
        return c->out_len ? 0 : -1;
    }
    c->state = ST_HEAD;
    return parse_request(c);
}

static int start_stream(conn_t *c)
{
    n_requests++;
    n_open++;
    if (n_open > n_peak_open)
        n_peak_open = n_open;
    c->state = ST_STREAM;
    c->seq = 0;
    int64_t t = now_ns();
    if (opt_first_delay_ms > 0) {
        /* The head goes with the first event. */
        c->seq = -1;
        c->pace.due = t + (int64_t)(opt_first_delay_ms * 1e6);
        heap_push(&c->pace);
        return 0;
    }
    if (send_event(c, 1) < 0)
        return -1;
    if (c->seq == c->events)
        return stream_done(c);
    c->pace.due = t + c->interval;
    heap_push(&c->pace);
    return 0;
}

static void consume(conn_t *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* Skips the request body; 1 when it is complete, 0 for more input, -1 bad. */
static int body_step(conn_t *c)
{
    if (!c->chunked) {
        size_t take = c->in_len < (uint64_t)c->body_left ? c->in_len : (size_t)c->body_left;
        consume(c, take);
        c->body_left -= (int64_t)take;
        return c->body_left == 0;
    }
    size_t i = 0;
    int done = 0;
    while (!done) {
        if (c->ck_state == CK_SIZE || c->ck_state == CK_TRAILER) {
            char *e = memmem(c->in + i, c->in_len - i, "\r\n", 2);
            if (!e)
                break;
            size_t ll = (size_t)(e - (c->in + i));
            if (c->ck_state == CK_SIZE) {
                char *end;
                unsigned long long sz = strtoull(c->in + i, &end, 16);
                if (end == c->in + i)
                    return -1;
                c->ck_left = sz;
                c->ck_state = sz ? CK_DATA : CK_TRAILER;
            } else if (ll == 0) {
                done = 1;
            }
            i += ll + 2;
        } else if (c->ck_state == CK_DATA) {
            size_t take = c->in_len - i < c->ck_left ? c->in_len - i : (size_t)c->ck_left;
            i += take;
            c->ck_left -= take;
            if (c->ck_left)
                break;
            c->ck_state = CK_DATA_CRLF;
        } else {
            if (c->in_len - i < 2)
                break;
            i += 2;
            c->ck_state = CK_SIZE;
        }
    }
    consume(c, i);
    return done;
}

static int header_is(const char *line, size_t len, const char *name, const char **val)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return 0;
    const char *v = line + nl + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    *val = v;
    return 1;
}

/* Reads requests from c->in while there is one to answer. -1: close. */
static int parse_request(conn_t *c)
{
    if (c->state == ST_HEAD) {
        char *end = c->in_len ? memmem(c->in, c->in_len, "\r\n\r\n", 4) : NULL;
        if (!end)
            return c->in_len > MAX_HEAD ? -1 : 0;
        size_t head_len = (size_t)(end - c->in) + 4;
        c->body_left = 0;
        c->chunked = 0;
        c->ck_state = CK_SIZE;
        char *eol = memmem(c->in, head_len, "\r\n", 2);
        c->close_after = eol && eol - c->in >= 8 && memcmp(eol - 8, "HTTP/1.0", 8) == 0;
        c->events = opt_events;
        c->interval = (int64_t)(opt_interval_ms * 1e6);
        for (char *l = eol + 2; l < end;) {
            char *le = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
            const char *v;
            size_t ll = (size_t)(le - l);
            if (header_is(l, ll, "content-length", &v))
                c->body_left = strtoll(v, NULL, 10);
            else if (header_is(l, ll, "transfer-encoding", &v) && strncasecmp(v, "chunked", 7) == 0)
                c->chunked = 1;
            else if (header_is(l, ll, "connection", &v) && strncasecmp(v, "close", 5) == 0)
                c->close_after = 1;
            else if (header_is(l, ll, "x-versus-events", &v) && atoi(v) > 0)
                c->events = atoi(v);
            else if (header_is(l, ll, "x-versus-interval-ms", &v) && atof(v) >= 0)
                c->interval = (int64_t)(atof(v) * 1e6);
            l = le + 2;
        }
        consume(c, head_len);
        c->state = ST_BODY;
    }
    if (c->state == ST_BODY) {
        int r = body_step(c);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        return start_stream(c);
    }
    return 0;
}

/* ---- h2c (prior knowledge): the same answers as h2 streams ---- */

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* Hands nghttp2's output to the socket. -1: the connection is done. */
static int h2_flush(conn_t *c)
{
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        if (send_bytes(c, (const char *)data, (size_t)n) < 0)
            return -1;
    }
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2) && !c->out_len)
        return -1;
    return 0;
}

static void h2s_append_event(h2s_t *st)
{
    if (st->cap - st->len < 1024) {
        if (st->off) {
            memmove(st->buf, st->buf + st->off, st->len - st->off);
            st->len -= st->off;
            st->off = 0;
        }
        if (st->cap - st->len < 1024) {
            st->cap = st->cap ? 2 * st->cap : 2048;
            st->buf = xrealloc(st->buf, st->cap);
        }
    }
    st->len += (size_t)format_event(st->buf + st->len, st->cap - st->len, st->seq, st->events);
    st->seq++;
}

static ssize_t h2_read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data)
{
    h2s_t *st = source->ptr;
    size_t n = st->len - st->off;
    if (n == 0 && st->seq < st->events)
        return NGHTTP2_ERR_DEFERRED;
    if (n > length)
        n = length;
    memcpy(buf, st->buf + st->off, n);
    st->off += n;
    if (st->off == st->len)
        st->off = st->len = 0;
    if (st->seq == st->events && st->len == 0) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        st->done = 1;
        n_completed++;
        n_open--;
    }
    return (ssize_t)n;
}

static void h2_start(conn_t *c, h2s_t *st)
{
    n_requests++;
    n_open++;
    if (n_open > n_peak_open)
        n_peak_open = n_open;
    st->started = 1;
    int64_t t = now_ns();
    if (opt_first_delay_ms > 0)
        st->pace.due = t + (int64_t)(opt_first_delay_ms * 1e6);
    else {
        h2s_append_event(st);
        st->pace.due = t + st->interval;
    }
    nghttp2_nv nva[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"text/event-stream", 12, 17, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"cache-control", (uint8_t *)"no-cache", 13, 8, NGHTTP2_NV_FLAG_NONE}};
    nghttp2_data_provider dp = {.source.ptr = st, .read_callback = h2_read_body};
    nghttp2_submit_response(c->h2, st->id, nva, 3, &dp);
    if (st->seq < st->events)
        heap_push(&st->pace);
}

static int on_h2_begin_headers(nghttp2_session *session, const nghttp2_frame *frame,
                               void *user_data)
{
    conn_t *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2s_t *st = calloc(1, sizeof *st);
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->id = frame->hd.stream_id;
    st->events = opt_events;
    st->interval = (int64_t)(opt_interval_ms * 1e6);
    st->pace.heap_i = NOT_QUEUED;
    st->pace.c = c;
    st->pace.s = st;
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    nghttp2_session_set_stream_user_data(session, st->id, st);
    return 0;
}

static int on_h2_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    h2s_t *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    char v[32];
    if (!st || valuelen >= sizeof v)
        return 0;
    memcpy(v, value, valuelen);
    v[valuelen] = 0;
    if (namelen == 15 && !memcmp(name, "x-versus-events", 15) && atoi(v) > 0)
        st->events = atoi(v);
    else if (namelen == 20 && !memcmp(name, "x-versus-interval-ms", 20) && atof(v) >= 0)
        st->interval = (int64_t)(atof(v) * 1e6);
    return 0;
}

static int on_h2_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    h2s_t *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (st && !st->started)
        h2_start(user_data, st);
    return 0;
}

static int on_h2_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user_data)
{
    conn_t *c = user_data;
    h2s_t *st = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!st)
        return 0;
    heap_remove(&st->pace);
    if (st->started && !st->done) {
        n_aborted++;
        n_open--;
    }
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    free(st->buf);
    free(st);
    return 0;
}

static void h2_begin(conn_t *c)
{
    static nghttp2_session_callbacks *cbs;
    if (!cbs) {
        nghttp2_session_callbacks_new(&cbs);
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_h2_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_h2_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_h2_frame_recv);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_h2_stream_close);
    }
    nghttp2_session_server_new(&c->h2, cbs, c);
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)opt_h2_max_streams}};
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1);
}

/* One due event of an h2 stream; -1: the connection is done. */
static int h2_due(h2s_t *st)
{
    conn_t *c = st->pace.c;
    h2s_append_event(st);
    nghttp2_session_resume_data(c->h2, st->id);
    if (st->seq == st->events)
        heap_remove(&st->pace);
    else {
        st->pace.due += st->interval;
        heap_down(st->pace.heap_i);
    }
    return h2_flush(c);
}

static void on_readable(conn_t *c)
{
    for (;;) {
        if (c->in_cap - c->in_len < 4096) {
            if (c->in_len > 2 * MAX_HEAD) {
                conn_close(c);
                return;
            }
            c->in_cap = c->in_cap ? 2 * c->in_cap : 4096;
            c->in = xrealloc(c->in, c->in_cap);
        }
        ssize_t n = conn_read(c, c->in + c->in_len, c->in_cap - c->in_len);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            conn_close(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        c->in_len += (size_t)n;
        if (!c->proto_known) {
            size_t k = c->in_len < sizeof PREFACE - 1 ? c->in_len : sizeof PREFACE - 1;
            if (memcmp(c->in, PREFACE, k) != 0)
                c->proto_known = 1;
            else if (k == sizeof PREFACE - 1) {
                c->proto_known = 1;
                h2_begin(c);
            }
        }
        if (c->h2) {
            ssize_t r = nghttp2_session_mem_recv(c->h2, (const uint8_t *)c->in, c->in_len);
            c->in_len = 0;
            if (r < 0 || h2_flush(c) < 0) {
                conn_close(c);
                return;
            }
        }
    }
    if (c->h2 || !c->proto_known)
        return;
    if (c->state == ST_HEAD || c->state == ST_BODY) {
        if (parse_request(c) < 0)
            conn_close(c);
    } else if (c->state == ST_CLOSING) {
        c->in_len = 0;
    }
}

static void on_accept(int lfd, int tls)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                fprintf(stderr, "versus_upstream: accept: %s\n", strerror(errno));
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn_t *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        c->fd = fd;
        if (tls) {
            c->ssl = malloc(sizeof *c->ssl);
            if (!c->ssl) {
                close(fd);
                free(c);
                return;
            }
            mbedtls_ssl_init(c->ssl);
            if (mbedtls_ssl_setup(c->ssl, &tls_conf) != 0) {
                mbedtls_ssl_free(c->ssl);
                free(c->ssl);
                close(fd);
                free(c);
                return;
            }
            mbedtls_ssl_set_bio(c->ssl, c, tls_bio_send, tls_bio_recv, NULL);
            n_tls_accepted++;
        }
        c->pace.heap_i = NOT_QUEUED;
        c->pace.c = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        n_accepted++;
    }
}

static void run_due(void)
{
    int64_t t = now_ns();
    while (heap_len && heap[0]->due <= t) {
        conn_t *c = heap[0]->c;
        if (heap[0]->s) {
            if (h2_due(heap[0]->s) < 0)
                conn_close(c);
            continue;
        }
        int with_head = 0;
        if (c->seq < 0) {
            c->seq = 0;
            with_head = 1;
        }
        if (send_event(c, with_head) < 0) {
            conn_close(c);
            continue;
        }
        if (c->seq == c->events) {
            if (stream_done(c) < 0)
                conn_close(c);
            continue;
        }
        c->pace.due += c->interval;
        heap_down(0);
    }
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: versus_upstream [--host A] [--port N] [--events N] [--interval-ms MS]\n"
                    "         [--first-delay-ms MS] [--content-bytes N] [--h2-max-streams N]\n"
                    "         [--ready-file F] [--stats-file F]\n"
                    "         [--tls-cert F --tls-key F [--tls-port N]]\n");
    exit(2);
}

/* A listening socket on host:*port, in the loop with `mark` as its epoll
 * data; *port gets the bound port. -1 on failure (said on stderr). */
static int listen_on(const char *host, int *port, void *mark)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1 ||
        bind(lfd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(lfd, 4096) < 0) {
        fprintf(stderr, "versus_upstream: cannot listen on %s:%d: %s\n", host, *port,
                strerror(errno));
        return -1;
    }
    socklen_t sl = sizeof sin;
    getsockname(lfd, (struct sockaddr *)&sin, &sl);
    *port = ntohs(sin.sin_port);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = mark};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    return lfd;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    int port = 0, tls_port = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--host"))
            host = v;
        else if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--events"))
            opt_events = atoi(v);
        else if (!strcmp(a, "--interval-ms"))
            opt_interval_ms = atof(v);
        else if (!strcmp(a, "--first-delay-ms"))
            opt_first_delay_ms = atof(v);
        else if (!strcmp(a, "--h2-max-streams"))
            opt_h2_max_streams = atoi(v);
        else if (!strcmp(a, "--content-bytes"))
            opt_content_bytes = atoi(v);
        else if (!strcmp(a, "--ready-file"))
            opt_ready_file = v;
        else if (!strcmp(a, "--stats-file"))
            opt_stats_file = v;
        else if (!strcmp(a, "--tls-cert"))
            opt_tls_cert = v;
        else if (!strcmp(a, "--tls-key"))
            opt_tls_key = v;
        else if (!strcmp(a, "--tls-port"))
            tls_port = atoi(v);
        else
            usage();
    }
    if (opt_events < 1 || opt_interval_ms < 0 || opt_content_bytes < 1 || opt_content_bytes > 200 ||
        !opt_tls_cert != !opt_tls_key)
        usage();
    if (opt_tls_cert)
        tls_setup();
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    ep = epoll_create1(EPOLL_CLOEXEC);
    int lfd = listen_on(host, &port, &L_PLAIN), tls_lfd = -1;
    if (lfd < 0)
        return 1;
    if (opt_tls_cert && (tls_lfd = listen_on(host, &tls_port, &L_TLS)) < 0)
        return 1;
    if (opt_ready_file) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", opt_ready_file);
        FILE *f = fopen(tmp, "w");
        int bad = !f || fprintf(f, "%d\n", port) < 0 ||
                  (tls_lfd >= 0 && fprintf(f, "%d\n", tls_port) < 0);
        if (f && fclose(f) != 0)
            bad = 1;
        if (bad || rename(tmp, opt_ready_file) != 0) {
            fprintf(stderr, "versus_upstream: cannot write %s\n", opt_ready_file);
            return 1;
        }
    }

    struct epoll_event evs[512];
    while (!stop) {
        run_due();
        struct timespec ts, *tp = NULL;
        if (heap_len) {
            int64_t wait = heap[0]->due - now_ns();
            if (wait < 0)
                wait = 0;
            ts.tv_sec = wait / 1000000000;
            ts.tv_nsec = wait % 1000000000;
            tp = &ts;
        }
        int n = epoll_pwait2(ep, evs, 512, tp, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("epoll_pwait2");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if ((void *)c == &L_PLAIN || (void *)c == &L_TLS) {
                on_accept((void *)c == &L_TLS ? tls_lfd : lfd, (void *)c == &L_TLS);
                continue;
            }
            if (evs[i].events & EPOLLOUT) {
                if (flush_out(c) < 0 || (c->state == ST_CLOSING && c->out_len == 0) ||
                    (c->h2 && !c->out_len && h2_flush(c) < 0)) {
                    conn_close(c);
                    continue;
                }
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(c);
        }
    }
    char line[512];
    snprintf(line, sizeof line,
             "{\"accepted\":%llu,\"requests\":%llu,\"completed\":%llu,\"aborted\":%llu,"
             "\"events\":%llu,\"peak_open\":%llu,\"tls_accepted\":%llu,"
             "\"tls_handshakes\":%llu,\"tls_resumed\":%llu,\"tls_failed\":%llu}\n",
             (unsigned long long)n_accepted, (unsigned long long)n_requests,
             (unsigned long long)n_completed, (unsigned long long)n_aborted,
             (unsigned long long)n_events, (unsigned long long)n_peak_open,
             (unsigned long long)n_tls_accepted, (unsigned long long)n_tls_handshakes,
             (unsigned long long)n_tls_resumed, (unsigned long long)n_tls_failed);
    fputs(line, stderr);
    if (opt_stats_file) {
        FILE *f = fopen(opt_stats_file, "w");
        if (f) {
            fputs(line, f);
            fclose(f);
        }
    }
    close(lfd);
    if (tls_lfd >= 0)
        close(tls_lfd);
    return 0;
}
