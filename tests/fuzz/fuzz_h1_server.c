/*
 * fuzz_h1_server: what one HTTP/1.1 client sends, through the real shell
 * (client.c, h1.c, exchange.c, admin.c, the transformer) to a scripted
 * upstream (fuzz_shell.h).
 *
 * Input: byte 0 the split seed (fuzz_common.h: how the client's bytes are
 * cut into writes), byte 1 the world's flags (fs_configure), byte 2 bit 0:
 * the connection is an admin listener's; then the client's bytes.
 *
 * After every piece the loop runs until nothing moves. Checked:
 * - the client reads a strict sequence of HTTP/1.1 responses (llhttp), one
 *   per request in order (HEAD answers without a body), none cut unless the
 *   client left or the drain time ran out;
 * - a connection still open has no exchange in flight, and every whole
 *   request it sent was answered;
 * - a streamed answer's lines are at most 64 KiB, its data lines JSON
 *   objects or [DONE], and no upstream `event` member reaches the client
 *   (SPEC §6 rules 4-5) but in profile off;
 * - a transformed body is one JSON object; a forwarded one is the request's
 *   body, byte for byte (the scripted upstream echoes it);
 * - what reaches the upstream is one clean request (fs_check_upreq);
 * - teardown leaves nothing (fs_teardown, LeakSanitizer).
 */
#include "fuzz_shell.h"

#include <strings.h>

#define HEADER 3

/* The requests of the client's bytes, as llhttp reads them. */
typedef struct req {
    int method;
    bool chat, profile_off;
    cg_buf_t body;
} req_t;

typedef struct scan {
    bool admin; /* the admin paths answer, not the upstream */
    req_t *v;
    size_t n, cap, done;
    cg_hdrs_t hdrs;
    cg_buf_t url;
} scan_t;

static int on_begin(llhttp_t *p)
{
    scan_t *s = p->data;
    s->v = cg_grow(s->v, s->n, &s->cap, 8, sizeof(req_t));
    memset(&s->v[s->n++], 0, sizeof(req_t));
    s->v[s->n - 1].method = -1;
    cg_hdrs_reset(&s->hdrs);
    s->url.len = 0;
    return 0;
}

static int on_method(llhttp_t *p)
{
    scan_t *s = p->data;
    s->v[s->n - 1].method = p->method;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    cg_buf_put(&((scan_t *)p->data)->url, at, n);
    return 0;
}

static int on_field(llhttp_t *p, const char *at, size_t n)
{
    cg_hdrs_on_field(&((scan_t *)p->data)->hdrs, at, n);
    return 0;
}

static int on_value(llhttp_t *p, const char *at, size_t n)
{
    cg_hdrs_on_value(&((scan_t *)p->data)->hdrs, at, n);
    return 0;
}

static bool chat_path(const cg_buf_t *url)
{
    static const char *const routes[] = {"/v1/chat/completions", "/openai/v1/chat/completions"};
    size_t n = url->len;
    const char *q = memchr(url->p, '?', n);
    if (q)
        n = (size_t)(q - url->p);
    for (int i = 0; i < 2; i++)
        if (n == strlen(routes[i]) && memcmp(url->p, routes[i], n) == 0)
            return true;
    return n > 36 && memcmp(url->p, "/openai/deployments/", 20) == 0 &&
           memcmp(url->p + n - 17, "/chat/completions", 17) == 0;
}

static int on_headers(llhttp_t *p)
{
    scan_t *s = p->data;
    req_t *r = &s->v[s->n - 1];
    r->chat = p->method == HTTP_POST && chat_path(&s->url);
    cg_span_t prof = cg_hdrs_get(&s->hdrs, "x-citegate-profile");
    r->profile_off = prof.p && prof.n == 3 && memcmp(prof.p, "off", 3) == 0;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    scan_t *s = p->data;
    cg_buf_put(&s->v[s->n - 1].body, at, n);
    return 0;
}

static int on_complete(llhttp_t *p)
{
    ((scan_t *)p->data)->done++;
    return 0;
}

static void scan(scan_t *s, const uint8_t *p, size_t n)
{
    llhttp_settings_t set;
    llhttp_settings_init(&set);
    set.on_message_begin = on_begin;
    set.on_method_complete = on_method;
    set.on_url = on_url;
    set.on_header_field = on_field;
    set.on_header_value = on_value;
    set.on_headers_complete = on_headers;
    set.on_body = on_body;
    set.on_message_complete = on_complete;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_REQUEST, &set);
    parser.data = s;
    const char *at = (const char *)p, *end = at + n;
    /* The connection stays HTTP/1.1 after CONNECT and Upgrade (h1.c). */
    while (llhttp_execute(&parser, at, (size_t)(end - at)) == HPE_PAUSED_UPGRADE) {
        at = llhttp_get_error_pos(&parser);
        llhttp_resume_after_upgrade(&parser);
    }
}

static void scan_free(scan_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        cg_buf_free(&s->v[i].body);
    free(s->v);
    cg_hdrs_free(&s->hdrs);
    cg_buf_free(&s->url);
}

/* Each answer against its request. */
static void on_answer(void *arg, size_t i, fs_answer_t *a)
{
    scan_t *s = arg;
    FZ_CHECK(i < s->n); /* never more answers than requests */
    const req_t *r = &s->v[i];
    if (a->sse)
        fs_check_sse(a, NULL, 0, true, r->profile_off || !r->chat, NULL);
    if (r->chat && a->status == 200 && a->json) {
        cg_json_t j;
        cg_json_init(&j, 1u << 20);
        FZ_CHECK(cg_json_parse(&j, a->body.p, a->body.len) == CG_JSON_OK &&
                 j.tok[0].type == JSMN_OBJECT);
        cg_json_free(&j);
    }
    if (!s->admin && !r->chat && a->status == 200 && r->method != HTTP_HEAD && !a->sse && !a->json)
        FZ_CHECK(a->body.len == r->body.len &&
                 (a->body.len == 0 || memcmp(a->body.p, r->body.p, a->body.len) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    fs_init();
    static cg_upstream_t *up;
    if (up == NULL)
        fs_ctx.up = up = fs_scripted_new();
    fs_opts_t o = fs_configure(data[1]);
    bool admin = data[2] & 1;
    const uint8_t *in = data + HEADER;
    size_t len = size - HEADER;

    fs_peer_t client;
    fs_client(&client, admin);
    fs_settle(NULL, NULL);
    fz_split_t sp;
    fz_split_init(&sp, data[0]);
    size_t sent = 0;
    for (int piece = 1; sent < len; piece++) {
        size_t n = piece < FS_MAX_PIECES ? fz_split_next(&sp, len - sent) : len - sent;
        if (!fs_write(&client, in + sent, n))
            break;
        sent += n;
        if (o.slow)
            fs_advance(FS_PIECE_MS, NULL, NULL);
        else
            fs_settle(NULL, NULL);
    }

    /* What the client sent, and what it got so far. */
    scan_t s = {.admin = admin};
    scan(&s, in, sent);
    bool *head = cg_xcalloc(s.n + 1, sizeof(bool));
    for (size_t i = 0; i < s.n; i++)
        head[i] = s.v[i].method == HTTP_HEAD;
    /* The h2 preface on the same port is fuzz_h2_server's: only the
     * teardown is checked here. */
    bool h2 = sent >= 24 && memcmp(in, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24) == 0;
    fs_h1_reader_t rd;
    fs_h1_reader_init(&rd, head, h2 ? 0 : s.n, h2 ? NULL : on_answer, &s);
    rd.broken = h2;
    if (getenv("FS_DEBUG"))
        fprintf(stderr, "client got:\n%.*s\n", (int)client.got.len, client.got.p);
    fs_h1_reader_feed(&rd, client.got.p, client.got.len);
    size_t seen = client.got.len;
    FZ_CHECK(h2 || !rd.broken);
    if (!client.eof && !h2) {
        /* Open and settled: nothing in flight, every whole request answered. */
        FZ_CHECK(fs_ctx.active == 0);
        FZ_CHECK(rd.answers == s.done);
    }

    fs_end(&client, &o, NULL, NULL);
    fs_teardown(NULL, NULL);
    if (client.got.len > seen)
        fs_h1_reader_feed(&rd, client.got.p + seen, client.got.len - seen);
    bool whole = fs_h1_reader_finish(&rd);
    FZ_CHECK(h2 || !rd.broken);
    FZ_CHECK(h2 || whole || o.end == FS_END_CLOSE || o.end == FS_END_SHUTDOWN);
    cg_buf_free(&client.got);
    fs_h1_reader_free(&rd);
    free(head);
    scan_free(&s);
    return 0;
}
