/*
 * h2mock: an HTTP/2 (h2c, prior knowledge) mock upstream for the tests,
 * independent of citegate's own code. It answers every request with a
 * fixture file (X-Mock-Fixture, default azure_oyd_stream.sse, or
 * embeddings.json for a :path ending in /embeddings), advertises
 * --max-streams as SETTINGS_MAX_CONCURRENT_STREAMS, can reset a stream
 * (X-Mock-Fault: rst, half the answer then RST_STREAM INTERNAL_ERROR; rst0,
 * half the answer without END_STREAM, then RST_STREAM NO_ERROR; bighead, an
 * answer whose head has 70 fields of 1 KiB) and counts the connections it
 * accepted into
 * --stats-file. With --events-file it appends one JSON line per RST_STREAM
 * received, stamped with CLOCK_MONOTONIC (the clock Python's
 * time.monotonic_ns() reads), so a test can time citegate's cancel. With
 * --goaway-after N it sends GOAWAY on a connection once N streams were
 * opened on it (those N finish). With --requests-file F it appends one JSON
 * line per request, {"headers":[[name,value],...],"body":"..."} (pseudo-headers
 * included, in arrival order), so a test can check what citegate sent.
 * Single-threaded poll() loop; for tests only.
 *
 * usage: h2mock --fixtures DIR --ready-file F [--max-streams N] [--stats-file F]
 *               [--delay-ms D]   (D ms between an answer's events)
 *               [--events-file F] [--goaway-after N] [--requests-file F]
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256

typedef struct bytes {
    char *p;
    size_t n, cap;
} bytes_t;

typedef struct stream {
    int32_t id;
    bytes_t req_headers; /* the request's fields as JSON pairs, comma-separated */
    bytes_t req_body;
    char fixture[256];
    int rst;
    bool big_head; /* X-Mock-Fault: bighead: 70 KiB of header fields */
    char *body;
    size_t len, off;
    long long next_ms; /* paced: when the next event may go */
    struct stream *next;
} stream_t;

typedef struct conn {
    int fd;
    nghttp2_session *s;
    stream_t *streams;
    unsigned opened;
    int goaway_sent;
} conn_t;

static const char *fixtures = ".";
static unsigned max_streams = 100;
static const char *stats_file;
static unsigned accepted;
static int delay_ms;
static const char *events_file;
static unsigned goaway_after;
static const char *requests_file;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void log_event(const char *what, int32_t id, uint32_t code)
{
    if (!events_file)
        return;
    FILE *f = fopen(events_file, "a");
    if (f) {
        fprintf(f, "{\"%s\":%d,\"code\":%u,\"t_ns\":%lld}\n", what, id, code, now_ns());
        fclose(f);
    }
}

static void put(bytes_t *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* A JSON string of raw bytes: quotes, backslashes and controls escaped,
 * the rest (UTF-8) as it is. */
static void put_json_str(bytes_t *b, const uint8_t *s, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        char esc[8];
        if (s[i] == '"' || s[i] == '\\') {
            esc[0] = '\\';
            esc[1] = (char)s[i];
            put(b, esc, 2);
        } else if (s[i] < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", s[i]);
            put(b, esc, 6);
        } else {
            put(b, s + i, 1);
        }
    }
    put(b, "\"", 1);
}

static void log_request(const stream_t *st)
{
    if (!requests_file)
        return;
    bytes_t line = {0};
    put(&line, "{\"headers\":[", 12);
    put(&line, st->req_headers.p, st->req_headers.n);
    put(&line, "],\"body\":", 9);
    put_json_str(&line, (const uint8_t *)st->req_body.p, st->req_body.n);
    put(&line, "}\n", 2);
    FILE *f = fopen(requests_file, "a");
    if (f) {
        fwrite(line.p, 1, line.n, f);
        fclose(f);
    }
    free(line.p);
}

static void stream_free(stream_t *st)
{
    free(st->body);
    free(st->req_headers.p);
    free(st->req_body.p);
    free(st);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *slurp(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", fixtures, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

static ssize_t read_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    stream_t *st = src->ptr;
    if (delay_ms && now_ms() < st->next_ms)
        return NGHTTP2_ERR_DEFERRED;
    size_t n = st->len - st->off;
    if (delay_ms) { /* one event at a time */
        char *e = memmem(st->body + st->off, n, "\n\n", 2);
        if (e)
            n = (size_t)(e + 2 - (st->body + st->off));
        st->next_ms = now_ms() + delay_ms;
    }
    if (n > len)
        n = len;
    memcpy(buf, st->body + st->off, n);
    st->off += n;
    if (st->off == st->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->off == st->len && st->rst == 2) /* rst0: no END_STREAM before the reset */
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    return (ssize_t)n;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    conn_t *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    stream_t *st = calloc(1, sizeof(*st));
    st->id = f->hd.stream_id;
    c->opened++;
    strcpy(st->fixture, "azure_oyd_stream.sse");
    st->next = c->streams;
    c->streams = st;
    nghttp2_session_set_stream_user_data(s, st->id, st);
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st)
        return 0;
    if (st->req_headers.n)
        put(&st->req_headers, ",", 1);
    put(&st->req_headers, "[", 1);
    put_json_str(&st->req_headers, name, nl);
    put(&st->req_headers, ",", 1);
    put_json_str(&st->req_headers, value, vl);
    put(&st->req_headers, "]", 1);
    if (nl == 5 && memcmp(name, ":path", 5) == 0 && vl >= 11 &&
        memcmp(value + vl - 11, "/embeddings", 11) == 0)
        strcpy(st->fixture, "embeddings.json");
    if (nl == 14 && memcmp(name, "x-mock-fixture", 14) == 0 && vl < sizeof(st->fixture)) {
        memcpy(st->fixture, value, vl);
        st->fixture[vl] = 0;
    }
    if (nl == 12 && memcmp(name, "x-mock-fault", 12) == 0 && vl == 3 && memcmp(value, "rst", 3) == 0)
        st->rst = 1;
    if (nl == 12 && memcmp(name, "x-mock-fault", 12) == 0 && vl == 4 &&
        memcmp(value, "rst0", 4) == 0)
        st->rst = 2; /* the same, with NO_ERROR */
    if (nl == 12 && memcmp(name, "x-mock-fault", 12) == 0 && vl == 7 &&
        memcmp(value, "bighead", 7) == 0)
        st->big_head = true;
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    stream_t *st = nghttp2_session_get_stream_user_data(s, id);
    if (st)
        put(&st->req_body, data, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type == NGHTTP2_RST_STREAM)
        log_event("rst", f->hd.stream_id, f->rst_stream.error_code);
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA))
        return 0;
    stream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st)
        return 0;
    log_request(st);
    st->body = slurp(st->fixture, &st->len);
    if (!st->body) {
        nghttp2_nv nv[] = {{(uint8_t *)":status", (uint8_t *)"404", 7, 3, 0}};
        nghttp2_submit_response(s, st->id, nv, 1, NULL);
        return 0;
    }
    if (st->rst)
        st->len /= 2; /* half the answer, then a reset */
    const char *ct = strstr(st->fixture, ".sse") ? "text/event-stream" : "application/json";
    enum { BIG_FIELDS = 70, BIG_VALUE = 1024 - 8 };
    static char names[BIG_FIELDS][8], value[BIG_VALUE];
    nghttp2_nv nv[2 + BIG_FIELDS] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
                                     {(uint8_t *)"content-type", (uint8_t *)ct, 12, strlen(ct), 0}};
    size_t nnv = 2;
    memset(value, 'v', sizeof(value));
    for (int i = 0; st->big_head && i < BIG_FIELDS; i++, nnv++) {
        snprintf(names[i], sizeof(names[i]), "x-p%03d", i);
        nv[nnv] = (nghttp2_nv){(uint8_t *)names[i], (uint8_t *)value, 6, sizeof(value),
                               NGHTTP2_NV_FLAG_NO_INDEX};
    }
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_cb};
    nghttp2_submit_response(s, st->id, nv, nnv, &prd);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    conn_t *c = ud;
    for (stream_t **p = &c->streams; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            stream_t *st = *p;
            *p = st->next;
            stream_free(st);
            break;
        }
    }
    nghttp2_session_set_stream_user_data(s, id, NULL);
    return 0;
}

static void write_stats(void)
{
    if (!stats_file)
        return;
    FILE *f = fopen(stats_file, "w");
    if (f) {
        fprintf(f, "{\"connections\":%u}\n", accepted);
        fclose(f);
    }
}

/* Sends what nghttp2 has; resets streams whose half answer went out. */
static int pump(conn_t *c)
{
    if (goaway_after && !c->goaway_sent && c->opened >= goaway_after) {
        int32_t last = nghttp2_session_get_last_proc_stream_id(c->s);
        nghttp2_submit_goaway(c->s, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR, NULL, 0);
        c->goaway_sent = 1;
        log_event("goaway", last, 0);
    }
    for (stream_t *st = c->streams; st; st = st->next) {
        if (st->rst && st->body && st->off == st->len) {
            nghttp2_submit_rst_stream(c->s, NGHTTP2_FLAG_NONE, st->id,
                                      st->rst == 2 ? NGHTTP2_NO_ERROR : NGHTTP2_INTERNAL_ERROR);
            st->rst = 0;
        }
        if (delay_ms && st->body && st->off < st->len && now_ms() >= st->next_ms)
            nghttp2_session_resume_data(c->s, st->id);
    }
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->s, &data);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = send(c->fd, data + off, (size_t)(n - off), MSG_NOSIGNAL);
            if (w < 0 && errno == EAGAIN) {
                struct pollfd p = {c->fd, POLLOUT, 0};
                poll(&p, 1, 1000);
                continue;
            }
            if (w < 0)
                return -1;
            off += w;
        }
    }
}

int main(int argc, char **argv)
{
    const char *ready = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--fixtures")) fixtures = argv[i + 1];
        else if (!strcmp(argv[i], "--ready-file")) ready = argv[i + 1];
        else if (!strcmp(argv[i], "--max-streams")) max_streams = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--stats-file")) stats_file = argv[i + 1];
        else if (!strcmp(argv[i], "--delay-ms")) delay_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--events-file")) events_file = argv[i + 1];
        else if (!strcmp(argv[i], "--goaway-after")) goaway_after = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--requests-file")) requests_file = argv[i + 1];
    }
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 128) != 0)
        return 1;
    getsockname(lfd, (struct sockaddr *)&a, &al);
    write_stats();
    if (ready) {
        FILE *f = fopen(ready, "w");
        fprintf(f, "%d\n", ntohs(a.sin_port));
        fclose(f);
    }
    nghttp2_session_callbacks *cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    /* The bighead fault's head is over nghttp2's 64 KiB default for what it sends. */
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    nghttp2_option_set_max_send_header_block_length(opt, 1 << 20);
    conn_t *conns[MAX_CONNS]; /* each at a fixed address: it is its session's user data */
    int n = 0;
    for (;;) {
        struct pollfd p[MAX_CONNS + 1];
        p[0] = (struct pollfd){lfd, POLLIN, 0};
        for (int i = 0; i < n; i++)
            p[i + 1] = (struct pollfd){conns[i]->fd, POLLIN, 0};
        poll(p, (nfds_t)n + 1, delay_ms ? 5 : 1000);
        if ((p[0].revents & POLLIN) && n < MAX_CONNS) {
            int fd = accept(lfd, NULL, NULL);
            if (fd >= 0) {
                fcntl(fd, F_SETFL, O_NONBLOCK);
                conn_t *c = calloc(1, sizeof(*c));
                conns[n++] = c;
                p[n] = (struct pollfd){fd, POLLIN, 0}; /* nothing polled for it yet */
                c->fd = fd;
                nghttp2_session_server_new2(&c->s, cbs, c, opt);
                nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams};
                nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, &iv, 1);
                accepted++;
                write_stats();
            }
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = conns[i];
            int dead = 0;
            if (p[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) {
                char buf[65536];
                ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
                if (r <= 0 && !(r < 0 && errno == EAGAIN))
                    dead = 1;
                else if (r > 0 && nghttp2_session_mem_recv(c->s, (uint8_t *)buf, (size_t)r) < 0)
                    dead = 1;
            }
            if (!dead && pump(c) < 0)
                dead = 1;
            if (dead) {
                close(c->fd);
                while (c->streams) {
                    stream_t *st = c->streams;
                    c->streams = st->next;
                    stream_free(st);
                }
                nghttp2_session_del(c->s);
                free(c);
                conns[i] = conns[--n];
                p[i + 1] = p[n + 1]; /* the moved connection's poll result */
                i--;
            }
        }
    }
}
