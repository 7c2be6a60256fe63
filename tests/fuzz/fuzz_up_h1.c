/*
 * fuzz_up_h1: what an HTTP/1.1 upstream answers, through the real shell:
 * the HTTP/1.1 pool (up_h1.c) over a real loopback TCP connection, the
 * exchange, the transformer in the profile and dialect the input picks,
 * and h1.c writing the answer to a client (fuzz_shell.h, fuzz_up.h).
 *
 * Input: byte 0 the split seed (how the upstream's bytes are cut into
 * writes), byte 1 the world's flags (fs_configure: dialect, end of input,
 * time passing after each write, ...), byte 2 the client side
 * (fuzz_up.h), then the upstream's bytes: status line to the end of the
 * body (and the next answer when a second request is made). Each write is
 * read before time moves.
 *
 * Checked:
 * - what citegate sent upstream is clean HTTP/1.1 (fs_check_h1_requests);
 * - the client reads a strict sequence of HTTP/1.1 responses, whatever the
 *   upstream sent;
 * - a transformed stream ends with [DONE] or the error event, never cut,
 *   its lines at most 64 KiB unless forwarded verbatim, and no upstream
 *   `event` member passes (SPEC §6); a forwarded answer's body is the
 *   upstream's body byte for byte (as llhttp frames the upstream's bytes);
 * - an answer is cut only when the client left, or the upstream broke off
 *   one that citegate forwards as is;
 * - teardown leaves nothing, the pool included.
 */
#include "fuzz_up.h"

#include "io/metrics.h"

#define HEADER 3

/* --- the upstream's own framing, for the forwarded body --------------------------- */

typedef struct framing {
    up_client_t *u;
    bool bad; /* a 1xx citegate refuses: its answer is a 502 of its own */
} framing_t;

static int fr_headers(llhttp_t *p)
{
    framing_t *f = p->data;
    if (p->status_code < 200 && p->status_code != 100 && p->status_code != 103)
        f->bad = true;
    return 0;
}

static int fr_body(llhttp_t *p, const char *at, size_t n)
{
    framing_t *f = p->data;
    /* A 204 or 304 has no content (RFC 9110 §15.3.5, §15.4.5): what an
     * upstream frames after one anyway is read and dropped. */
    bool content = p->status_code != 204 && p->status_code != 304;
    if (f->u->up_status == 0 && p->status_code >= 200 && content)
        cg_buf_put(&f->u->up_body, at, n);
    return 0;
}

static int fr_complete(llhttp_t *p)
{
    framing_t *f = p->data;
    if (p->status_code < 200 || f->u->up_status)
        return 0;
    f->u->up_status = f->bad ? 0 : p->status_code;
    return HPE_PAUSED;
}

/* How llhttp frames the upstream's first final answer: its status and
 * body, when the bytes sent (and their end, at eof) hold all of it. */
static void frame_upstream(up_client_t *u, size_t sent, bool eof)
{
    llhttp_settings_t set;
    llhttp_settings_init(&set);
    set.on_headers_complete = fr_headers;
    set.on_body = fr_body;
    set.on_message_complete = fr_complete;
    framing_t f = {u, false};
    llhttp_t p;
    llhttp_init(&p, HTTP_RESPONSE, &set);
    p.data = &f;
    if (llhttp_execute(&p, (const char *)u->in, sent) == HPE_OK && eof && u->up_status == 0)
        llhttp_finish(&p); /* completes a body that ends with the connection */
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
    size_t sent = 0;
    fs_peer_t *up;
    for (int piece = 1; sent < u.len && (up = up_current(&u)) != NULL; piece++) {
        size_t n = piece < FS_MAX_PIECES ? fz_split_next(&sp, u.len - sent) : u.len - sent;
        if (!fs_write(up, u.in + sent, n))
            break;
        sent += n;
        /* The piece is read before time passes: a deadline that then ends
         * the answer ends it after those bytes, never over them. */
        fs_settle(up_accept, &u);
        if (o.slow)
            fs_advance(FS_PIECE_MS, up_accept, &u);
    }
    up_end(&u, &o);
    frame_upstream(&u, sent, o.end == FS_END_EOF || o.end == FS_END_CLOSE);
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
