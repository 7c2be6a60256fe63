/*
 * fuzz_up_h1: what an HTTP/1.1 upstream answers, through the real shell:
 * the HTTP/1.1 pool (up_h1.c) over a real loopback TCP connection, the
 * exchange, the transformer in the profile and dialect the input picks,
 * and h1.c writing the answer to a client (fuzz_shell.h, fuzz_up.h).
 *
 * Input: byte 0 the split seed (how the upstream's bytes are cut into
 * writes), byte 1 the world's flags (fs_configure: dialect, end of input,
 * time passing after each write, ...), byte 2 the client side (fuzz_up.h),
 * then the upstream's bytes: status line to the end of the body (and the
 * next answer when a second request is made). Each write is read before
 * time moves.
 *
 * Checked:
 * - what citegate sent upstream is clean HTTP/1.1 (fs_check_h1_requests);
 * - the client reads a strict sequence of HTTP/1.1 responses, whatever the
 *   upstream sent;
 * - a transformed stream ends with [DONE] or SPEC §6's error event (its
 *   JSON shape, fuzz_up.h), never cut, its lines at most 64 KiB unless
 *   forwarded verbatim, and no upstream `event` member passes (SPEC §6);
 * - the upstream's first final answer, as citegate's llhttp frames the
 *   first connection's bytes (below): when it is whole, the client's first
 *   answer is whole and has its status, or the 502 of a head citegate
 *   refuses (a 1xx other than 100/103, fields beyond CG_MAX_HEADER_BYTES);
 *   forwarded, its body is the upstream's byte for byte (none after a 204
 *   or 304);
 * - an answer is cut only when the client left, the teardown began
 *   mid-answer, or the upstream broke off one that citegate forwards as is;
 * - teardown leaves nothing, the pool included.
 */
#include "fuzz_up.h"

#include "io/metrics.h"

#include <strings.h>

#define HEADER 3

/* --- the upstream's own framing ------------------------------------------------------ */

/* The first connection's bytes read as up_h1.c reads them: llhttp with the
 * same callbacks' verdicts, the head gathered in a cg_hdrs_t as there (a
 * field list of CG_MAX_HEADER_BYTES at most, begun again with each
 * message, 1xx ones included; the trailers, after the final head, on a list
 * of their own). */
typedef struct framing {
    up_client_t *u;
    cg_hdrs_t hdrs;
    bool final; /* the first final answer's head is in */
} framing_t;

/* A field list over the limit: up_h1.c's callback fails, and so does the
 * answer. Before the final head, nothing of it went out: citegate answers
 * 502. In the trailers, the answer cannot be relayed whole (status 0). */
static int fr_over(framing_t *f)
{
    if (!f->final)
        f->u->up_refused = true;
    return -1;
}

static int fr_begin(llhttp_t *p)
{
    cg_hdrs_reset(&((framing_t *)p->data)->hdrs);
    return 0;
}

static int fr_field(llhttp_t *p, const char *at, size_t n)
{
    framing_t *f = p->data;
    return cg_hdrs_on_field(&f->hdrs, at, n) == 0 ? 0 : fr_over(f);
}

static int fr_value(llhttp_t *p, const char *at, size_t n)
{
    framing_t *f = p->data;
    return cg_hdrs_on_value(&f->hdrs, at, n) == 0 ? 0 : fr_over(f);
}

static int fr_headers(llhttp_t *p)
{
    framing_t *f = p->data;
    if (p->status_code == 100 || p->status_code == 103)
        return 0;
    if (p->status_code < 200) { /* 101 above all: a 502 of citegate's own */
        f->u->up_refused = true;
        return -1;
    }
    f->final = true;
    cg_span_t ct = cg_hdrs_get(&f->hdrs, "content-type");
    cg_span_t ce = cg_hdrs_get(&f->hdrs, "content-encoding");
    f->u->up_sse = up_stream_type(f->u->evstream, ct);
    f->u->up_encoded = ce.p && !cg_span_ieq(ce, "identity");
    cg_hdrs_free(&f->hdrs); /* as up_h1.c: the trailers begin a list of their own */
    return 0;
}

static int fr_body(llhttp_t *p, const char *at, size_t n)
{
    framing_t *f = p->data;
    /* A 204 or 304 has no content (RFC 9110 §15.3.5, §15.4.5): llhttp
     * frames none, and citegate would drop any (cg_status_no_body). */
    if (p->status_code != 204 && p->status_code != 304)
        cg_buf_put(&f->u->up_body, at, n);
    return 0;
}

static int fr_complete(llhttp_t *p)
{
    framing_t *f = p->data;
    if (p->status_code == 100 || p->status_code == 103)
        return 0;
    f->u->up_status = p->status_code;
    return HPE_PAUSED;
}

/* How citegate's llhttp frames the upstream's first final answer: its
 * status and body, when the first connection's bytes (and their end, at
 * eof) hold all of it, or its refusal. The first request goes on the first
 * connection and is never sent again (a retry is only for a reused one), and
 * every byte written to that connection was read before time moved. */
static void frame_upstream(up_client_t *u, size_t n, bool eof)
{
    llhttp_settings_t set;
    llhttp_settings_init(&set);
    set.on_message_begin = fr_begin;
    set.on_header_field = fr_field;
    set.on_header_value = fr_value;
    set.on_headers_complete = fr_headers;
    set.on_body = fr_body;
    set.on_message_complete = fr_complete;
    framing_t f = {.u = u};
    llhttp_t p;
    llhttp_init(&p, HTTP_RESPONSE, &set);
    p.data = &f;
    /* A body delimited by the connection's end completes at EOF only: an
     * RST (FS_END_CLOSE) cuts it, as up_h1.c's end_under reads it. */
    if (llhttp_execute(&p, (const char *)u->in, n) == HPE_OK && eof && u->up_status == 0)
        llhttp_finish(&p);
    cg_hdrs_free(&f.hdrs);
    if (u->up_status == 0)
        u->up_body.len = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEADER)
        return 0;
    fs_init();
    up_listen();
    fs_opts_t o = fs_configure(data[1]);
    cg_upstream_t *pool = cg_up_h1_new(&fs_ctx, &up_target, &fs_ctx.up);
    fs_ctx.up = pool;
    up_client_t u;
    up_client_init(&u, data[2], &o, data + HEADER, size - HEADER);
    fs_settle(up_accept, &u);

    fz_split_t sp;
    fz_split_init(&sp, data[0]);
    size_t sent = 0, first = 0; /* bytes written, and of them to the first connection */
    fs_peer_t *up;
    for (int piece = 1; sent < u.len && (up = up_current(&u)) != NULL; piece++) {
        size_t n = piece < FS_MAX_PIECES ? fz_split_next(&sp, u.len - sent) : u.len - sent;
        if (!fs_write(up, u.in + sent, n))
            break;
        sent += n;
        if (up == &u.ups[0])
            first = sent;
        /* The piece is read before time passes: a deadline that then ends
         * the answer ends it after those bytes, never over them. */
        fs_settle(up_accept, &u);
        if (o.slow)
            fs_advance(FS_PIECE_MS, up_accept, &u);
    }
    up_end(&u, &o);
    frame_upstream(&u, first, u.eof_conn == 0);
    fs_teardown(up_accept, &u);
    /* The pool goes as the worker's teardown takes it: drained, its
     * connections closed, then freed. */
    pool->ops->drain(pool);
    fs_settle(up_accept, &u);
    FZ_CHECK(cg_metrics->upstream_connections[CG_PROTO_LABEL_HTTP1] == 0);
    pool->ops->free(pool);
    fs_ctx.up = NULL;

    for (size_t i = 0; i < u.nups; i++)
        fs_check_h1_requests(u.ups[i].got.p, u.ups[i].got.len);
    up_check_client(&u);
    up_client_free(&u);
    return 0;
}
