/* The shell's fuzz world: see fuzz_shell.h. */
#include "fuzz_shell.h"

#include "citegate/json.h"
#include "io/demo_answer.h"
#include "io/metrics.h"
#include "io/log.h"
#include "tracking/tracking.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stdio.h>
#include <strings.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

cg_ctx_t fs_ctx;
cg_server_t fs_server;
cg_config_t fs_cfg;

static uv_loop_t loop;
static uv_prepare_t alive; /* keeps every turn a whole loop iteration */
static char cors_origins[] = "https://app.example";

#define MAX_WATCHED 16
static fs_peer_t *watched[MAX_WATCHED];

/* --- the world ------------------------------------------------------------- */

static void on_prepare(uv_prepare_t *h)
{
    (void)h;
}

void fs_init(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    signal(SIGPIPE, SIG_IGN);
    char err[256];
    const cg_config_flag_t flags[] = {{"ENABLE_SEMANTIC_MEMORY", "false"},
                                      {"CITEGATE_LOG_LEVEL", "error"},
                                      {"CITEGATE_LOG_FORMAT", "text"}};
    FZ_CHECK(cg_config_load(&fs_cfg, flags, sizeof(flags) / sizeof(flags[0]), err, sizeof(err)) ==
             0);
    cg_log_init(false, CG_LOG_ERROR, 0);
    FZ_CHECK(cg_metrics_init(1) == 0);
    cg_metrics_select(0);
    FZ_CHECK(uv_loop_init(&loop) == 0);
    uv_prepare_init(&loop, &alive);
    uv_prepare_start(&alive, on_prepare);
    cg_ctx_init(&fs_ctx, &loop, &fs_cfg, 0);
    cg_server_init(&fs_server, &fs_ctx, NULL);
    cg_server_sweep_start(&fs_server);
    cg_tracking_start(&fs_ctx, NULL); /* analysis and counters; no store, no embeddings */
}

fs_opts_t fs_configure(uint8_t flags)
{
    static const char *const dialects[] = {"openai", "anthropic", "responses", "gemini"};
    unsigned end = (flags >> 4) & 7;
    fs_opts_t o = {
        .small_body = flags & 1,
        .cors = (flags >> 1) & 1,
        .end = end % FS_NEND,
        .slow = flags >> 7,
    };
    fs_cfg.max_request_bytes = o.small_body ? 4096 : 8u << 20;
    fs_cfg.cors_origins = o.cors ? cors_origins : NULL;
    /* The ends past FS_NEND repeat the first ones with another dialect:
     * cohere (the first end), else an upstream that answers in AWS's event
     * stream, bedrock, or bedrock-kb when bit 2 is set (the first two). */
    const char *dialect = dialects[(flags >> 2) & 3];
    if (end == FS_NEND + 2) {
        dialect = "cohere";
        o.end = FS_END_EOF;
    } else if (end >= FS_NEND) {
        dialect = (flags >> 2) & 1 ? "bedrock-kb" : "bedrock";
    }
    FZ_CHECK(cg_dialect_parse(dialect, &o.dialect));
    fs_cfg.upstream_dialect = o.dialect;
    return o;
}

/* --- peers ------------------------------------------------------------------- */

static void watch(fs_peer_t *p)
{
    for (int i = 0; i < MAX_WATCHED; i++) {
        if (watched[i] == NULL) {
            watched[i] = p;
            return;
        }
    }
    FZ_CHECK(!"too many peers");
}

static void unwatch(fs_peer_t *p)
{
    for (int i = 0; i < MAX_WATCHED; i++)
        if (watched[i] == p)
            watched[i] = NULL;
}

void fs_watch(fs_peer_t *p, int fd)
{
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    FZ_CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
    watch(p);
}

void fs_client(fs_peer_t *p, bool admin)
{
    int sv[2];
    FZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fs_watch(p, sv[1]);
    cg_server_adopt(&fs_server, sv[0], admin);
}

size_t fs_read(fs_peer_t *p)
{
    size_t total = 0;
    while (p->fd >= 0 && !p->eof) {
        ssize_t n = read(p->fd, cg_buf_reserve(&p->got, 65536), 65536);
        if (n > 0) {
            p->got.len += (size_t)n;
            total += (size_t)n;
        } else if (n == 0 || errno != EAGAIN) {
            p->eof = true; /* EOF, or ECONNRESET */
        } else {
            break;
        }
    }
    return total;
}

/* Reads every watched peer that has something: one poll() instead of a
 * read per peer per turn, as most turns move nothing. */
static size_t read_all(void)
{
    struct pollfd fds[MAX_WATCHED];
    fs_peer_t *peer[MAX_WATCHED];
    nfds_t n = 0;
    for (int i = 0; i < MAX_WATCHED; i++) {
        if (watched[i] && watched[i]->fd >= 0 && !watched[i]->eof) {
            peer[n] = watched[i];
            fds[n++] = (struct pollfd){.fd = watched[i]->fd, .events = POLLIN};
        }
    }
    if (n == 0 || poll(fds, n, 0) <= 0)
        return 0;
    size_t total = 0;
    for (nfds_t i = 0; i < n; i++)
        if (fds[i].revents)
            total += fs_read(peer[i]);
    return total;
}

void fs_close(fs_peer_t *p)
{
    if (p->fd < 0)
        return;
    unwatch(p);
    close(p->fd);
    p->fd = -1;
}

void fs_shutdown(fs_peer_t *p)
{
    if (p->fd >= 0)
        shutdown(p->fd, SHUT_WR);
}

bool fs_write(fs_peer_t *p, const void *b, size_t n)
{
    const char *q = b;
    int stuck = 0;
    while (n > 0 && p->fd >= 0) {
        ssize_t w = write(p->fd, q, n);
        if (w > 0) {
            q += w;
            n -= (size_t)w;
            stuck = 0;
            continue;
        }
        if (w < 0 && errno != EAGAIN)
            return false; /* the shell closed its end */
        /* Full: the shell reads once it has room (a served response, a
         * client that reads); it may also have stopped for good. */
        if (++stuck > 64)
            return false;
        uv_run(&loop, UV_RUN_NOWAIT);
        read_all();
    }
    return n == 0;
}

/* --- running the loop ------------------------------------------------------------ */

static bool safepoint_idle(void)
{
    return cg_list_empty(&fs_ctx.safe.queue) && cg_list_empty(&fs_ctx.safe.flushes);
}

void fs_settle(fs_busy_fn busy, void *arg)
{
    int quiet = 0;
    for (int turn = 0; quiet < 2; turn++) {
        FZ_CHECK(turn < FS_MAX_TURNS); /* the shell never settles: a hang */
        uv_run(&loop, UV_RUN_NOWAIT);
        bool moved = read_all() > 0 || !safepoint_idle() || (busy && busy(arg));
        quiet = moved ? 0 : quiet + 1;
    }
}

typedef struct shift {
    uint64_t ms;
} shift_t;

/* Moves an armed timer `ms` closer to its due time, as if that much time
 * had passed. uv_timer_t keeps its callback in a field libuv has no getter
 * for; this is test code, and the field is in the public struct. */
static void shift_timer(uv_handle_t *h, void *arg)
{
    const shift_t *s = arg;
    if (h->type != UV_TIMER || !uv_is_active(h) || uv_is_closing(h))
        return;
    uv_timer_t *t = (uv_timer_t *)h;
    uint64_t due = uv_timer_get_due_in(t);
    uv_timer_start(t, t->timer_cb, due > s->ms ? due - s->ms : 0, uv_timer_get_repeat(t));
}

void fs_advance(uint64_t ms, fs_busy_fn busy, void *arg)
{
    shift_t s = {ms};
    fs_ctx.clock_skew += ms;
    uv_walk(&loop, shift_timer, &s);
    fs_settle(busy, arg);
}

/* --- the end of an input ---------------------------------------------------------- */

static void drain_all(bool shutdown)
{
    fs_ctx.draining = true;
    if (shutdown)
        cg_server_shutdown(&fs_server);
    else
        cg_server_drain(&fs_server);
    fs_ctx.up->ops->drain(fs_ctx.up);
}

void fs_end(fs_peer_t *client, const fs_opts_t *o, fs_busy_fn busy, void *arg)
{
    switch (o->end) {
    case FS_END_EOF:
        fs_shutdown(client);
        fs_settle(busy, arg);
        break;
    case FS_END_CLOSE:
        fs_close(client);
        fs_settle(busy, arg);
        break;
    case FS_END_DRAIN:
    case FS_END_SHUTDOWN:
        drain_all(false);
        fs_settle(busy, arg);
        if (o->end == FS_END_SHUTDOWN) {
            drain_all(true);
            fs_settle(busy, arg);
        }
        break;
    case FS_END_WAIT: {
        /* Past each of the shell's deadlines in turn: connect, queue,
         * request, first byte, idle. */
        static const uint64_t steps[] = {6000, 5000, 20000, 90000, 181000};
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
            fs_advance(steps[i], busy, arg);
        break;
    }
    }
}

void fs_teardown(fs_busy_fn busy, void *arg)
{
    for (int i = 0; i < MAX_WATCHED; i++)
        if (watched[i])
            fs_close(watched[i]);
    fs_settle(busy, arg);
    /* A connection that no longer reads (a refused request, a paused one)
     * learns nothing from a closed peer: its deadlines close it. */
    for (int i = 0; i < 3 && (fs_server.nclients || fs_ctx.active); i++)
        fs_advance(400000, busy, arg);
    FZ_CHECK(fs_server.nclients == 0 && cg_list_empty(&fs_server.clients));
    FZ_CHECK(fs_ctx.active == 0);
    FZ_CHECK(safepoint_idle());
    FZ_CHECK(cg_metrics->active_streams == 0);
    FZ_CHECK(cg_metrics->client_connections == 0);
    FZ_CHECK(cg_metrics->upstream_queue_length == 0);
    fs_ctx.draining = false;
}

/* --- checks of what reaches an upstream --------------------------------------------- */

bool fs_dot_segment(const char *path, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && path[i] != '/')
            continue;
        /* the segment path[start..i), decoded only for %2e */
        size_t dots = 0, len = 0;
        for (size_t k = start; k < i; len++) {
            bool enc = i - k >= 3 && path[k] == '%' && path[k + 1] == '2' &&
                       (path[k + 2] == 'e' || path[k + 2] == 'E');
            dots += enc || path[k] == '.';
            k += enc ? 3 : 1;
        }
        if (len > 0 && len <= 2 && dots == len)
            return true;
        start = i + 1;
    }
    return false;
}

static bool is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

void fs_check_upreq(const cg_upreq_t *r)
{
    for (size_t i = 0; i < r->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&r->hdrs, i), v = cg_hdr_value(&r->hdrs, i);
        FZ_CHECK(name.n > 0);
        for (size_t k = 0; k < name.n; k++)
            FZ_CHECK(is_tchar((unsigned char)name.p[k]));
        for (size_t k = 0; k < v.n; k++)
            FZ_CHECK(v.p[k] != '\r' && v.p[k] != '\n' && v.p[k] != '\0');
        FZ_CHECK(!cg_span_ieq(name, "host"));
    }
    cg_buf_t b = {0};
    cg_upreq_h1(r, "upstream.test", &b);
    FZ_CHECK(fs_check_h1_requests(b.p, b.len) == 1);
    cg_buf_free(&b);
}

typedef struct reqscan {
    cg_hdrs_t hdrs;
    cg_buf_t url;
    size_t done;
} reqscan_t;

static int rs_begin(llhttp_t *p)
{
    reqscan_t *s = p->data;
    cg_hdrs_reset(&s->hdrs);
    s->url.len = 0;
    return 0;
}

static int rs_url(llhttp_t *p, const char *at, size_t n)
{
    cg_buf_put(&((reqscan_t *)p->data)->url, at, n);
    return 0;
}

static int rs_field(llhttp_t *p, const char *at, size_t n)
{
    cg_hdrs_on_field(&((reqscan_t *)p->data)->hdrs, at, n);
    return 0;
}

static int rs_value(llhttp_t *p, const char *at, size_t n)
{
    cg_hdrs_on_value(&((reqscan_t *)p->data)->hdrs, at, n);
    return 0;
}

static int rs_headers(llhttp_t *p)
{
    reqscan_t *s = p->data;
    int hosts = 0;
    for (size_t i = 0; i < s->hdrs.n; i++)
        hosts += cg_span_ieq(cg_hdr_name(&s->hdrs, i), "host");
    FZ_CHECK(hosts == 1);
    const char *q = memchr(s->url.p, '?', s->url.len);
    size_t path = q ? (size_t)(q - s->url.p) : s->url.len;
    FZ_CHECK(s->url.len > 0 && s->url.p[0] == '/');
    FZ_CHECK(!fs_dot_segment(s->url.p, path));
    return 0;
}

static int rs_complete(llhttp_t *p)
{
    ((reqscan_t *)p->data)->done++;
    return 0;
}

size_t fs_check_h1_requests(const char *p, size_t n)
{
    llhttp_settings_t set;
    llhttp_settings_init(&set);
    set.on_message_begin = rs_begin;
    set.on_url = rs_url;
    set.on_header_field = rs_field;
    set.on_header_value = rs_value;
    set.on_headers_complete = rs_headers;
    set.on_message_complete = rs_complete;
    reqscan_t s = {0};
    llhttp_t parser;
    llhttp_init(&parser, HTTP_REQUEST, &set);
    parser.data = &s;
    enum llhttp_errno e = llhttp_execute(&parser, p, n);
    if (e != HPE_OK) {
        fprintf(stderr, "upstream request: %s in:\n", llhttp_get_error_reason(&parser));
        fwrite(p, 1, n > 2000 ? 2000 : n, stderr);
    }
    FZ_CHECK(e == HPE_OK); /* no obs-fold, no bare CR or LF, valid framing */
    cg_hdrs_free(&s.hdrs);
    cg_buf_free(&s.url);
    return s.done;
}

/* --- the scripted upstream ----------------------------------------------------------- */

typedef struct run {
    cg_exchange_t *ex; /* NULL once forgotten */
    cg_defer_t step;
    cg_demo_answer_t answer;
    int status;
    const char *ctype;
    size_t next;
    bool headed, paused;
} run_t;

#define INJECTED                                                                                   \
    "data: {\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion.chunk\",\"choices\":[{"         \
    "\"index\":0,\"delta\":{\"content\":\" [doc1]\"}}],\"event\":{\"type\":\"status\"},"           \
    "\"\\u0065vent\":{\"type\":\"source\"}}\n\n"

/* The openai stream gets an event that tries to reach Open WebUI. */
static void inject(cg_demo_answer_t *a)
{
    cg_demo_answer_t b = {0};
    for (size_t i = 0; i < a->npieces; i++) {
        size_t from = i ? a->ends[i - 1] : 0;
        cg_buf_put(&b.bytes, a->bytes.p + from, a->ends[i] - from);
        b.ends = cg_xrealloc(b.ends, (b.npieces + 2) * sizeof(size_t));
        b.ends[b.npieces++] = b.bytes.len;
        if (i == 0) {
            cg_buf_puts(&b.bytes, INJECTED);
            b.ends[b.npieces++] = b.bytes.len;
        }
    }
    cg_demo_answer_free(a);
    *a = b;
}

static void plan(run_t *r, cg_exchange_t *ex)
{
    if (!ex->transform) {
        /* Forwarded as is: the request's own body comes back. */
        cg_buf_put(&r->answer.bytes, ex->upreq->body.p, ex->upreq->body.len);
        r->answer.ends = cg_xmalloc(sizeof(size_t));
        r->answer.ends[0] = r->answer.bytes.len;
        r->answer.npieces = 1;
        r->status = 200;
        r->ctype = "application/octet-stream";
        return;
    }
    cg_demo_answer(&r->answer, ex->dialect, ex->req.stream, ex->dreq.ndocs);
    if (!cg_dialect_translates(ex->dialect) && ex->req.stream)
        inject(&r->answer);
    r->status = 200;
    r->ctype = ex->req.stream ? "text/event-stream" : "application/json";
}

static void run_free(run_t *r)
{
    cg_defer_cancel(&r->step);
    cg_demo_answer_free(&r->answer);
    free(r);
}

static void on_step(cg_defer_t *d);

static void step_soon(run_t *r)
{
    if (!r->paused)
        cg_defer(&fs_ctx.safe, &r->step, on_step);
}

static void on_step(cg_defer_t *d)
{
    run_t *r = (run_t *)((char *)d - offsetof(run_t, step));
    cg_exchange_t *ex = r->ex;
    if (!r->headed) {
        r->headed = true;
        cg_hdrs_t h = {0};
        cg_hdrs_add_str(&h, "Content-Type", r->ctype);
        cg_exchange_on_head(ex, r->status, &h);
        cg_hdrs_free(&h);
    } else {
        size_t from = r->next ? r->answer.ends[r->next - 1] : 0;
        size_t to = r->answer.ends[r->next++];
        if (to > from)
            cg_exchange_on_body(ex, r->answer.bytes.p + from, to - from);
    }
    if (r->next < r->answer.npieces) {
        step_soon(r);
        return;
    }
    ex->up.handle = NULL;
    run_free(r);
    cg_exchange_on_end(ex, CG_OK);
}

static cg_err_t scripted_send(cg_upstream_t *up, cg_exchange_t *ex)
{
    (void)up;
    fs_check_upreq(ex->upreq);
    run_t *r = cg_xcalloc(1, sizeof(*r));
    r->ex = ex;
    ex->up.handle = r;
    plan(r, ex);
    cg_exchange_upstream_sent(ex);
    step_soon(r);
    return CG_OK;
}

static void scripted_abort(cg_upstream_t *up, cg_exchange_t *ex)
{
    (void)up;
    run_t *r = ex->up.handle;
    if (r == NULL)
        return;
    ex->up.handle = NULL;
    run_free(r);
}

static void scripted_pause(cg_upstream_t *up, cg_exchange_t *ex, bool pause)
{
    (void)up;
    run_t *r = ex->up.handle;
    if (r == NULL)
        return;
    r->paused = pause;
    step_soon(r);
}

static void scripted_drain(cg_upstream_t *up)
{
    (void)up;
}

static void scripted_free(cg_upstream_t *up)
{
    free(up);
}

static const cg_upstream_ops_t scripted_ops = {"scripted",     scripted_send,  scripted_abort,
                                               scripted_pause, scripted_drain, scripted_free};

cg_upstream_t *fs_scripted_new(void)
{
    cg_upstream_t *up = cg_xcalloc(1, sizeof(*up));
    up->ops = &scripted_ops;
    up->ctx = &fs_ctx;
    return up;
}

/* --- what the client sees ----------------------------------------------------------- */

/* Does the top-level object have a member whose decoded name is `event`?
 * Counts them; true when the only one is citegate's source event. */
static bool own_event(const cg_json_t *j, int *events)
{
    bool own = false;
    *events = 0;
    for (int i = 1; i < j->ntok; i = cg_json_skip(j, i + 1)) {
        cg_span_t k = cg_json_raw(j, i);
        char name[32]; /* "event" escaped is at most 30 bytes */
        if (k.n > 30 || cg_json_unescape(k.p, k.n, name) != 5 || memcmp(name, "event", 5))
            continue;
        ++*events;
        int ty = cg_json_get(j, i + 1, "type");
        cg_span_t t = cg_json_raw(j, ty);
        int ch = cg_json_get(j, 0, "choices");
        own = cg_json_type(j, i + 1) == JSMN_OBJECT && cg_json_is_str(j, ty) &&
              cg_span_eq(t, "source") && cg_json_type(j, ch) == JSMN_ARRAY && j->tok[ch].size == 0;
    }
    return own;
}

static void check_data(cg_span_t v, bool strict, bool pass_events)
{
    if (cg_span_eq(v, "[DONE]"))
        return;
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    bool object = v.n && cg_json_parse(&j, v.p, v.n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT;
    if (!object && strict)
        fprintf(stderr, "client data: %.*s\n", (int)(v.n > 400 ? 400 : v.n), v.p);
    FZ_CHECK(object || !strict);
    int events = 0;
    if (object && !pass_events) {
        bool own = own_event(&j, &events);
        if (events && !(events == 1 && own))
            fprintf(stderr, "client data: %.*s\n", (int)(v.n > 400 ? 400 : v.n), v.p);
        FZ_CHECK(events == 0 || (events == 1 && own));
    }
    cg_json_free(&j);
}

/* The SSE body event by event, as a client reads it (WHATWG: lines end in
 * CR, LF or CRLF; data lines joined by LF; a blank line dispatches). */
cg_span_t fs_check_sse(const fs_answer_t *a, const uint8_t *upstream, size_t un, bool strict,
                       bool pass_events, bool *done)
{
    static cg_buf_t data, last;
    data.len = last.len = 0;
    if (done)
        *done = false;
    if (a->body.len == 0)
        return cg_span(NULL, 0);
    bool has_data = false;
    const char *p = a->body.p, *end = p + a->body.len;
    while (p < end) {
        const char *nl = p;
        while (nl < end && *nl != '\n' && *nl != '\r')
            nl++;
        cg_span_t line = cg_span(p, (size_t)(nl - p));
        if (line.n > 65536)
            FZ_CHECK(upstream && memmem(upstream, un, line.p, line.n) != NULL);
        if (nl == end)
            break; /* a last line without its end is no line yet */
        if (line.n == 0 && has_data) {
            check_data(cg_span(data.p, data.len), strict, pass_events);
            if (done && data.len == 6 && memcmp(data.p, "[DONE]", 6) == 0)
                *done = true;
            last.len = 0;
            cg_buf_put(&last, data.p, data.len);
            data.len = 0;
            has_data = false;
        } else if (line.n >= 4 && memcmp(line.p, "data", 4) == 0 &&
                   (line.n == 4 || line.p[4] == ':')) {
            cg_span_t v = line.n > 4 ? cg_span(line.p + 5, line.n - 5) : cg_span(NULL, 0);
            if (v.n && v.p[0] == ' ')
                v.p++, v.n--;
            if (has_data)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, v.p, v.n);
            has_data = true;
        }
        p = nl + (*nl == '\r' && nl + 1 < end && nl[1] == '\n' ? 2 : 1);
    }
    return last.len ? cg_span(last.p, last.len) : cg_span(NULL, 0);
}

/* --- HTTP/1.1 responses -------------------------------------------------------------- */

static int rd_begin(llhttp_t *p)
{
    fs_h1_reader_t *r = p->data;
    cg_hdrs_reset(&r->hdrs);
    r->cur.body.len = 0;
    r->cur.status = 0;
    r->cur.rid[0] = '\0';
    return 0;
}

static int rd_field(llhttp_t *p, const char *at, size_t n)
{
    cg_hdrs_on_field(&((fs_h1_reader_t *)p->data)->hdrs, at, n);
    return 0;
}

static int rd_value(llhttp_t *p, const char *at, size_t n)
{
    cg_hdrs_on_value(&((fs_h1_reader_t *)p->data)->hdrs, at, n);
    return 0;
}

static bool starts(cg_span_t v, const char *lit)
{
    size_t n = strlen(lit);
    return v.p && v.n >= n && strncasecmp(v.p, lit, n) == 0;
}

static int rd_headers(llhttp_t *p)
{
    fs_h1_reader_t *r = p->data;
    r->cur.status = p->status_code;
    cg_span_t ct = cg_hdrs_get(&r->hdrs, "content-type");
    cg_span_t ce = cg_hdrs_get(&r->hdrs, "content-encoding");
    r->cur.sse = starts(ct, "text/event-stream");
    r->cur.json = starts(ct, "application/json");
    r->cur.encoded = ce.p && !cg_span_ieq(ce, "identity");
    cg_span_t rid = cg_hdrs_get(&r->hdrs, "x-request-id");
    size_t n = rid.p && rid.n < sizeof(r->cur.rid) ? rid.n : 0;
    memcpy(r->cur.rid, rid.p ? rid.p : "", n);
    r->cur.rid[n] = '\0';
    if (p->status_code < 200)
        return 0;
    bool head = r->answers < r->nhead && r->head[r->answers];
    return head ? 1 : 0; /* a HEAD answer has no body */
}

static int rd_body(llhttp_t *p, const char *at, size_t n)
{
    cg_buf_put(&((fs_h1_reader_t *)p->data)->cur.body, at, n);
    return 0;
}

static int rd_complete(llhttp_t *p)
{
    fs_h1_reader_t *r = p->data;
    if (r->cur.status < 200)
        return 0;
    if (r->on_answer)
        r->on_answer(r->arg, r->answers, &r->cur);
    r->answers++;
    return 0;
}

void fs_h1_reader_init(fs_h1_reader_t *r, const bool *head, size_t nhead,
                       void (*on_answer)(void *, size_t, fs_answer_t *), void *arg)
{
    memset(r, 0, sizeof(*r));
    llhttp_settings_init(&r->settings);
    r->settings.on_message_begin = rd_begin;
    r->settings.on_header_field = rd_field;
    r->settings.on_header_value = rd_value;
    r->settings.on_headers_complete = rd_headers;
    r->settings.on_body = rd_body;
    r->settings.on_message_complete = rd_complete;
    llhttp_init(&r->parser, HTTP_RESPONSE, &r->settings);
    r->parser.data = r;
    r->head = head;
    r->nhead = nhead;
    r->on_answer = on_answer;
    r->arg = arg;
}

void fs_h1_reader_feed(fs_h1_reader_t *r, const char *p, size_t n)
{
    if (r->broken || n == 0)
        return;
    enum llhttp_errno e = llhttp_execute(&r->parser, p, n);
    if (e != HPE_OK) {
        fprintf(stderr, "client view: %s (%s)\n", llhttp_errno_name(e),
                llhttp_get_error_reason(&r->parser));
        r->broken = true;
    }
}

bool fs_h1_reader_finish(fs_h1_reader_t *r)
{
    return !r->broken && llhttp_finish(&r->parser) == HPE_OK;
}

void fs_h1_reader_free(fs_h1_reader_t *r)
{
    cg_hdrs_free(&r->hdrs);
    cg_buf_free(&r->cur.body);
}

/* --- HTTP/2 on the driver's side ----------------------------------------------------- */

void fs_h2_frame(cg_buf_t *out, uint8_t type, uint8_t flags, uint32_t sid, const void *payload,
                 size_t n)
{
    uint8_t h[9] = {(uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n, type, flags,
                    (uint8_t)(sid >> 24) & 0x7f, (uint8_t)(sid >> 16), (uint8_t)(sid >> 8),
                    (uint8_t)sid};
    cg_buf_put(out, h, 9);
    if (n)
        cg_buf_put(out, payload, n);
}

void fs_h2_reader_init(fs_h2_reader_t *r, bool from_client)
{
    memset(r, 0, sizeof(*r));
    r->from_client = from_client;
    r->max_frame = 16384;
    FZ_CHECK(nghttp2_hd_inflate_new(&r->inf) == 0);
}

fs_h2_stream_t *fs_h2_stream(fs_h2_reader_t *r, int32_t id)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].id == id)
            return &r->v[i];
    r->v = cg_grow(r->v, r->n, &r->cap, 8, sizeof(fs_h2_stream_t));
    fs_h2_stream_t *st = &r->v[r->n++];
    memset(st, 0, sizeof(*st));
    st->id = id;
    return st;
}

/* A whole header block: decoded, and the stream's head (a second block is
 * trailers, or a final answer after 1xx). */
static void header_block(fs_h2_reader_t *r)
{
    fs_h2_stream_t *st = fs_h2_stream(r, r->block_sid);
    cg_hdrs_t h = {0};
    const uint8_t *in = (const uint8_t *)r->block.p;
    size_t left = r->block.len;
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t used = nghttp2_hd_inflate_hd2(r->inf, &nv, &flags, in, left, 1);
        FZ_CHECK(used >= 0); /* the shell's HPACK always decodes */
        in += used;
        left -= (size_t)used;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            cg_hdrs_add(&h, (const char *)nv.name, nv.namelen, (const char *)nv.value, nv.valuelen);
        if (flags & NGHTTP2_HD_INFLATE_FINAL)
            break;
        FZ_CHECK(used > 0 || left > 0);
    }
    nghttp2_hd_inflate_end_headers(r->inf);
    cg_span_t status = cg_hdrs_get(&h, ":status");
    int code = status.p ? atoi(status.p) : 0;
    bool informational = code >= 100 && code < 200;
    if (!st->head && !informational) {
        st->head = true;
        st->a.status = code;
        cg_span_t ct = cg_hdrs_get(&h, "content-type"), ce = cg_hdrs_get(&h, "content-encoding");
        st->a.sse = ct.p && ct.n >= 17 && strncasecmp(ct.p, "text/event-stream", 17) == 0;
        st->a.json = ct.p && ct.n >= 16 && strncasecmp(ct.p, "application/json", 16) == 0;
        st->a.encoded = ce.p && !cg_span_ieq(ce, "identity");
        cg_hdrs_free(&st->hdrs);
        st->hdrs = h;
    } else {
        cg_hdrs_free(&h);
    }
    if (r->block_flags & NGHTTP2_FLAG_END_STREAM)
        st->ended = true;
    r->block.len = 0;
    r->in_block = false;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The payload of a padded frame, without its padding. */
static bool unpad(uint8_t flags, const uint8_t **p, size_t *n)
{
    if (!(flags & NGHTTP2_FLAG_PADDED))
        return true;
    if (*n < 1 || (*p)[0] >= *n)
        return false;
    size_t pad = (*p)[0];
    *p += 1;
    *n -= 1 + pad;
    return true;
}

static void frame(fs_h2_reader_t *r, const uint8_t *h, const uint8_t *p, size_t n)
{
    uint8_t type = h[3], flags = h[4];
    int32_t sid = (int32_t)(be32(h + 5) & 0x7fffffff);
    FZ_CHECK(n <= r->max_frame);
    /* A header block is one HEADERS and its CONTINUATIONs, uninterrupted. */
    FZ_CHECK(r->in_block == (type == NGHTTP2_CONTINUATION));
    FZ_CHECK(!r->in_block || sid == r->block_sid);
    switch (type) {
    case NGHTTP2_HEADERS:
        FZ_CHECK(sid != 0 && unpad(flags, &p, &n));
        if (flags & NGHTTP2_FLAG_PRIORITY) {
            FZ_CHECK(n >= 5);
            p += 5, n -= 5;
        }
        r->block_sid = sid;
        r->block_flags = flags;
        /* fall through */
    case NGHTTP2_CONTINUATION:
        cg_buf_put(&r->block, p, n);
        r->in_block = true;
        if (flags & NGHTTP2_FLAG_END_HEADERS)
            header_block(r);
        break;
    case NGHTTP2_DATA: {
        FZ_CHECK(sid != 0 && unpad(flags, &p, &n));
        fs_h2_stream_t *st = fs_h2_stream(r, sid);
        FZ_CHECK(st->head && !st->ended); /* DATA only inside a message */
        cg_buf_put(&st->a.body, p, n);
        if (flags & NGHTTP2_FLAG_END_STREAM)
            st->ended = true;
        break;
    }
    case NGHTTP2_RST_STREAM:
        FZ_CHECK(sid != 0 && n == 4);
        fs_h2_stream(r, sid)->reset = true;
        break;
    case NGHTTP2_GOAWAY:
        FZ_CHECK(sid == 0 && n >= 8);
        r->goaway = true;
        r->goaway_code = be32(p + 4);
        break;
    case NGHTTP2_SETTINGS:
        FZ_CHECK(sid == 0 && n % 6 == 0);
        break;
    default:
        break;
    }
}

void fs_h2_reader_feed(fs_h2_reader_t *r, const char *p, size_t n)
{
    if (r->broken)
        return;
    cg_buf_put(&r->in, p, n);
    if (!r->started && r->from_client) {
        if (r->in.len < 24)
            return;
        FZ_CHECK(memcmp(r->in.p, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) == 0);
        r->off = 24;
    }
    while (r->in.len - r->off >= 9) {
        const uint8_t *h = (const uint8_t *)r->in.p + r->off;
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        if (r->in.len - r->off - 9 < len)
            break;
        if (!r->started)
            FZ_CHECK(h[3] == NGHTTP2_SETTINGS && !(h[4] & NGHTTP2_FLAG_ACK)); /* the preface */
        r->started = true;
        frame(r, h, h + 9, len);
        r->off += 9 + len;
    }
}

void fs_h2_reader_free(fs_h2_reader_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        cg_hdrs_free(&r->v[i].hdrs);
        cg_buf_free(&r->v[i].a.body);
    }
    free(r->v);
    cg_buf_free(&r->in);
    cg_buf_free(&r->block);
    nghttp2_hd_inflate_del(r->inf);
}
