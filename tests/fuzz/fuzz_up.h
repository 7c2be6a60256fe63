/*
 * What the two upstream drivers (fuzz_up_h1, fuzz_up_h2) share: the client
 * side. A fixed, valid client speaks HTTP/1.1 to the shell through a
 * socketpair; its requests and the checks of what it reads are the same
 * whatever protocol the fuzzed upstream speaks. Each driver frames the
 * upstream's first final answer with the library citegate reads it with
 * (up_status and what follows it in up_client_t); the client's first answer
 * is checked against it here (up_check_first).
 *
 * Byte 2 of both drivers' inputs picks the client side:
 *   bits 0-2: the profile (openwebui, openai, webchat, markdown, structured,
 *             off, and openwebui twice more)
 *   bit 3: the client asks for a stream       bit 4: a forwarded path instead
 *   bit 5: the client leaves at the end       bit 6: a second, pipelined request
 *   bit 7: the upstream URL has a base path
 */
#ifndef CG_FUZZ_UP_H
#define CG_FUZZ_UP_H

#include "fuzz_shell.h"

#include "citegate/dialect.h"
#include "citegate/json.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define UP_MAX_CONNS 6

typedef struct up_client {
    fs_peer_t client;
    fs_peer_t ups[UP_MAX_CONNS]; /* the connections the pool opened */
    size_t nups;
    uint8_t flags; /* byte 2 */
    bool chat, stream, off, translates;
    bool evstream;  /* the dialect reads AWS's event stream (a view with a message hook) */
    bool code_null; /* the dialect's error code may be null (responses, SPEC §6a) */
    const uint8_t *in; /* the upstream's bytes, for lines forwarded verbatim */
    size_t len;
    /* The upstream's first final answer, as the driver framed it (fuzz_up_h1
     * with llhttp, fuzz_up_h2 with an nghttp2 session of its own, each the
     * library citegate reads it with): its status when it is whole and
     * citegate can relay it, else 0 (not whole, or the driver cannot tell). */
    int up_status;
    /* Its head, or a 1xx before it, is one citegate refuses (an interim
     * status other than 100/103, SPEC §9; fields beyond CG_MAX_HEADER_BYTES):
     * the client gets a 502 of citegate's own. */
    bool up_refused;
    bool up_sse, up_encoded; /* its Content-Type and Content-Encoding, as citegate reads them */
    cg_buf_t up_body;        /* its content (none for a 204 or 304) */
    /* The X-Request-Id of the request it answers, when the driver knows it
     * ("" otherwise): only the client answer with that id is checked. */
    char up_rid[64];
    int eof_conn;   /* the index in ups of the connection up_end half-closed, -1 */
    bool in_flight; /* the answer had not ended when the teardown began */
} up_client_t;

/* Does citegate read an answer of this Content-Type as a stream: SSE, or
 * AWS's event stream for a dialect that reads one? */
static inline bool up_stream_type(bool evstream, cg_span_t ct)
{
    if (ct.p && ct.n >= 17 && strncasecmp(ct.p, "text/event-stream", 17) == 0)
        return true;
    return evstream && ct.p && ct.n >= 34 &&
           strncasecmp(ct.p, "application/vnd.amazon.eventstream", 34) == 0;
}

static int up_listener = -1;
static cg_upstream_target_t up_target;

/* A loopback listener standing for the upstream, made once. */
static void up_listen(void)
{
    if (up_listener >= 0)
        return;
    up_listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    FZ_CHECK(up_listener >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    /* Accepted sockets inherit TCP_NODELAY: without it, Nagle holds a write
     * back until the last one is acknowledged, and loopback's delayed ACK
     * takes 40 ms of real time, so bytes the driver wrote would reach the
     * shell only after the loop settled, or never. */
    int one = 1;
    FZ_CHECK(setsockopt(up_listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
    FZ_CHECK(bind(up_listener, (struct sockaddr *)&a, len) == 0 && listen(up_listener, 64) == 0);
    FZ_CHECK(getsockname(up_listener, (struct sockaddr *)&a, &len) == 0);
    strcpy(up_target.url.host, "127.0.0.1");
    up_target.url.port = ntohs(a.sin_port);
    snprintf(up_target.url.authority, sizeof(up_target.url.authority), "127.0.0.1:%d",
             up_target.url.port);
    memcpy(&up_target.addr, &a, sizeof(a));
}

/* Takes the connections the pool opened: fs_settle's busy(). */
static bool up_accept(void *arg)
{
    up_client_t *u = arg;
    bool took = false;
    int fd;
    struct pollfd l = {.fd = up_listener, .events = POLLIN};
    if (poll(&l, 1, 0) <= 0)
        return false;
    while ((fd = accept4(up_listener, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        if (u->nups == UP_MAX_CONNS) {
            close(fd);
            continue;
        }
        fs_watch(&u->ups[u->nups++], fd);
        took = true;
    }
    return took;
}

/* The connection the upstream's bytes go to: the newest still open. */
static fs_peer_t *up_current(up_client_t *u)
{
    for (size_t i = u->nups; i-- > 0;)
        if (u->ups[i].fd >= 0 && !u->ups[i].eof)
            return &u->ups[i];
    return NULL;
}

/* Closes with RST rather than FIN: no TIME_WAIT piles up on loopback. */
static void up_reset(fs_peer_t *p)
{
    if (p->fd < 0)
        return;
    struct linger l = {1, 0};
    setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    fs_close(p);
}

static void up_client_init(up_client_t *u, uint8_t flags, const fs_opts_t *o, const uint8_t *in,
                           size_t len)
{
    static const char *const profiles[] = {"openwebui", "openai", "webchat", "markdown",
                                           "structured", "off", "openwebui", "openwebui"};
    memset(u, 0, sizeof(*u));
    u->flags = flags;
    u->chat = !(flags & 0x10);
    u->stream = flags & 8;
    u->off = (flags & 7) == 5;
    u->translates = cg_dialect_translates(o->dialect);
    const cg_dialect_view_t *view = cg_dialect_view(o->dialect);
    u->evstream = view && view->message;
    u->code_null = strcmp(o->dialect->name, "responses") == 0;
    u->eof_conn = -1;
    u->in = in;
    u->len = len;
    strcpy(up_target.url.base, (flags & 0x80) ? "/base" : "");
    fs_client(&u->client, false);
    cg_buf_t r = {0};
    for (int i = 0; i < ((flags & 0x40) ? 2 : 1); i++) {
        if (!u->chat) {
            cg_buf_puts(&r, "GET /v1/models?x=1 HTTP/1.1\r\nHost: citegate\r\n\r\n");
            continue;
        }
        char body[256];
        int n = snprintf(body, sizeof(body),
                         "{\"model\":\"m\",\"stream\":%s,\"messages\":[{\"role\":\"system\","
                         "\"content\":\"be brief\"},{\"role\":\"user\",\"content\":\"How do I "
                         "charge the X100?\"}]}",
                         u->stream ? "true" : "false");
        cg_buf_printf(&r,
                      "POST /v1/chat/completions HTTP/1.1\r\nHost: citegate\r\nContent-Type: "
                      "application/json\r\nAuthorization: Bearer sk-test\r\nX-Citegate-Profile: "
                      "%s\r\nContent-Length: %d\r\n\r\n%s",
                      profiles[flags & 7], n, body);
    }
    fs_write(&u->client, r.p, r.len);
    cg_buf_free(&r);
}

/* A stream citegate transforms (SPEC §6-6a): it always ends with [DONE] or
 * the error event. */
static bool up_transformed(const up_client_t *u, const fs_answer_t *a)
{
    return u->chat && a->status == 200 && a->sse && !a->encoded && (!u->off || u->translates);
}

/* Does citegate forward the upstream's first final answer as is (SPEC §4,
 * §6 rule 6, §11; cg_exchange_on_head)? Everything off a chat route; on one,
 * whatever is not a 200, a 200 in a Content-Encoding, and in profile off a
 * 200 of a dialect that needs no translation. */
static bool up_forwarded(const up_client_t *u)
{
    return !u->chat || u->up_status != 200 || u->up_encoded || (u->off && !u->translates);
}

/* SPEC §6's error event: one JSON object whose one member, "error", is an
 * object of exactly "message" (a string), "type" ("upstream_error") and
 * "code" (a string; for the responses dialect also null, as the upstream's
 * error code it carries may be, §6a). No profile changes it. */
static bool up_error_event(const up_client_t *u, cg_span_t data)
{
    if (data.n == 0)
        return false;
    cg_json_t j;
    cg_json_init(&j, 16);
    bool ok = cg_json_parse(&j, data.p, data.n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT &&
              j.tok[0].size == 1 && cg_json_is_str(&j, 1) &&
              cg_span_eq(cg_json_raw(&j, 1), "error") && cg_json_type(&j, 2) == JSMN_OBJECT &&
              j.tok[2].size == 3;
    if (ok) {
        /* Three members, each found: three different names. */
        int m = cg_json_get(&j, 2, "message"), t = cg_json_get(&j, 2, "type");
        int c = cg_json_get(&j, 2, "code");
        ok = cg_json_is_str(&j, m) && cg_json_is_str(&j, t) &&
             cg_span_eq(cg_json_raw(&j, t), "upstream_error") &&
             (cg_json_is_str(&j, c) || (u->code_null && cg_json_is_null(&j, c)));
    }
    if (!ok)
        fprintf(stderr, "last event, not [DONE] nor the error event: %.*s\n",
                (int)(data.n > 400 ? 400 : data.n), data.p);
    cg_json_free(&j);
    return ok;
}

/* The client's first answer against the upstream's first final answer. A
 * whole one that citegate relays keeps its status: a forwarded one, and a
 * transformed one too (only a 200 is transformed, and it stays a 200).
 * What else the client may read instead, and why: */
static void up_check_first(const up_client_t *u, const fs_answer_t *a)
{
    if (u->up_rid[0] && strcmp(u->up_rid, a->rid) != 0)
        return; /* the first exchange ended before its request reached that stream */
    int want = u->up_status;
    /* - A head citegate refuses is a protocol error: 502 (SPEC §9, §11;
     *   up_h1.c on_headers_complete and the field callbacks, up_h2.c
     *   refuse_answer). */
    if (u->up_refused)
        want = 502;
    if (want == 0)
        return;
    /* - A stream a profile holds to its end (structured), from a dialect
     *   read as AWS's event stream whose framing broke: nothing went out
     *   yet, so the exchange answers 502 (exchange.c end_broken_framing).
     *   (bedrock, bedrock-kb or cohere, when the input's end bits pick it,
     *   fuzz_shell.h). */
    bool broken_framing = u->evstream && u->chat && (u->flags & 7) == 4 && u->up_status == 200 &&
                          u->up_sse && !u->up_encoded && a->status == 502;
    if (a->status != want && !broken_framing) {
        fprintf(stderr, "client status %d, upstream's %d%s\n", a->status, u->up_status,
                u->up_refused ? " (refused: 502)" : "");
        FZ_CHECK(a->status == want);
    }
    if (u->up_refused || !up_forwarded(u))
        return;
    /* Forwarded as is: the upstream's body, byte for byte. */
    if (a->body.len != u->up_body.len ||
        (a->body.len && memcmp(a->body.p, u->up_body.p, a->body.len) != 0))
        fprintf(stderr, "client body %zu bytes, upstream's %zu\n", a->body.len, u->up_body.len);
    FZ_CHECK(a->body.len == u->up_body.len);
    FZ_CHECK(a->body.len == 0 || memcmp(a->body.p, u->up_body.p, a->body.len) == 0);
}

static void up_on_answer(void *arg, size_t i, fs_answer_t *a)
{
    up_client_t *u = arg;
    if (i == 0)
        up_check_first(u, a);
    if (up_transformed(u, a)) {
        /* It ends with [DONE], or with the error event and nothing after;
         * what an upstream sends after its [DONE] still passes, rewritten. */
        bool done;
        cg_span_t last = fs_check_sse(a, u->in, u->len, false, false, &done);
        FZ_CHECK(done || up_error_event(u, last));
    }
}

/* The end of the input as the upstream drivers see it: the client may
 * leave; then the upstream ends its side (EOF or RST), or the worker drains,
 * or time runs out (fs_end). */
static void up_end(up_client_t *u, const fs_opts_t *o)
{
    if (u->flags & 0x20) {
        fs_close(&u->client);
        fs_settle(up_accept, u);
    }
    fs_peer_t *up = up_current(u);
    if (o->end == FS_END_EOF || o->end == FS_END_CLOSE) {
        if (up && o->end == FS_END_EOF) {
            fs_shutdown(up);
            if (!(u->flags & 0x20)) /* else its exchange went with the client */
                u->eof_conn = (int)(up - u->ups);
        } else if (up)
            up_reset(up);
        fs_settle(up_accept, u);
        u->in_flight = fs_ctx.active > 0;
        return;
    }
    fs_end(&u->client, o, up_accept, u);
    u->in_flight = fs_ctx.active > 0;
}

/* After the teardown: the client read a strict sequence of HTTP/1.1
 * answers, checked one by one; one is cut only when the client left, when
 * it was still going when the teardown closed the client, or when the
 * upstream broke off one that citegate forwards as is. */
static void up_check_client(up_client_t *u)
{
    if (getenv("FS_DEBUG")) {
        fprintf(stderr, "upstream's first final answer: status %d%s, %zu body bytes, for %s\n",
                u->up_status, u->up_refused ? ", refused" : "", u->up_body.len,
                u->up_rid[0] ? u->up_rid : "the first request");
        fwrite(u->client.got.p, 1, u->client.got.len, stderr);
    }
    static const bool head[2] = {false, false};
    fs_h1_reader_t rd;
    fs_h1_reader_init(&rd, head, 2, up_on_answer, u);
    fs_h1_reader_feed(&rd, u->client.got.p, u->client.got.len);
    bool whole = fs_h1_reader_finish(&rd);
    FZ_CHECK(!rd.broken);
    bool cut_ok = (u->flags & 0x20) || u->in_flight ||
                  (rd.cur.status != 0 && !up_transformed(u, &rd.cur));
    FZ_CHECK(whole || cut_ok);
    /* An upstream answer that was whole (or refused) reaches the client
     * whole, unless the client left or the teardown began mid-answer. */
    if ((u->up_status || u->up_refused) && !(u->flags & 0x20) && !u->in_flight)
        FZ_CHECK(rd.answers > 0);
    fs_h1_reader_free(&rd);
}

/* The pool's drain may open connections after the teardown closed the
 * peers: they are closed here, before the frame that holds them returns. */
static void up_client_free(up_client_t *u)
{
    fs_close(&u->client);
    cg_buf_free(&u->client.got);
    for (size_t i = 0; i < u->nups; i++) {
        fs_close(&u->ups[i]);
        cg_buf_free(&u->ups[i].got);
    }
    cg_buf_free(&u->up_body);
}

#endif
