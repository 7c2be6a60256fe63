/*
 * The embedded demo upstream (no upstream configured, or --demo): answers
 * in-process, an event every ~20 ms, in the API of the configured upstream
 * dialect (demo_answer.h), with citations, so the first curl shows what
 * citegate does. It sits behind the same interface as the real pools, and
 * like them answers only from the loop (its timer), never from inside a
 * call.
 */
#include "demo_answer.h"
#include "exchange.h"

#include <stdlib.h>
#include <string.h>

#define DEMO_TICK_MS 20

typedef struct demo_run {
    cg_exchange_t *ex; /* NULL once aborted */
    uv_timer_t timer;
    cg_demo_answer_t answer;
    size_t next; /* the next piece to send */
    bool paused, headed;
} demo_run_t;

static void on_close(uv_handle_t *h)
{
    demo_run_t *d = h->data;
    cg_demo_answer_free(&d->answer);
    free(d);
}

static cg_exchange_t *release(demo_run_t *d)
{
    cg_exchange_t *ex = d->ex;
    if (ex)
        ex->up.handle = NULL;
    d->ex = NULL;
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, on_close);
    return ex;
}

static void respond(cg_exchange_t *ex, int status, const char *ctype)
{
    cg_hdrs_t h = {0};
    cg_hdrs_add_str(&h, "Content-Type", ctype);
    cg_exchange_on_head(ex, status, &h);
    cg_hdrs_free(&h);
}

/* The first tick: the head, and what the request calls for. */
static void start(demo_run_t *d)
{
    cg_exchange_t *ex = d->ex;
    d->headed = true;
    if (!ex->transform) {
        respond(ex, 404, "application/json");
        cg_demo_not_found(&d->answer);
        return;
    }
    cg_demo_answer(&d->answer, ex->dialect, ex->req.stream, ex->dreq.ndocs);
    cg_hdrs_t h = {0};
    cg_hdrs_add_str(&h, "Content-Type", cg_demo_content_type(ex->dialect, ex->req.stream));
    cg_buf_t name = {0}, value = {0};
    cg_span_t sent = ex->upreq ? cg_span(ex->upreq->body.p, ex->upreq->body.len) : cg_span("", 0);
    if (cg_demo_answer_field(ex->dialect, sent, &name, &value))
        cg_hdrs_add(&h, name.p, name.len, value.p, value.len);
    cg_buf_free(&name);
    cg_buf_free(&value);
    cg_exchange_on_head(ex, 200, &h);
    cg_hdrs_free(&h);
}

static void on_tick(uv_timer_t *t)
{
    demo_run_t *d = t->data;
    if (d->ex == NULL || d->paused)
        return;
    cg_demo_answer_t *a = &d->answer;
    if (!d->headed) {
        start(d);
        if (a->npieces > 1) /* a stream: one piece a tick from the next on */
            return;
    }
    size_t from = d->next ? a->ends[d->next - 1] : 0;
    size_t to = a->ends[d->next++];
    cg_exchange_on_body(d->ex, a->bytes.p + from, to - from);
    if (d->next == a->npieces)
        cg_exchange_on_end(release(d), CG_OK);
}

static cg_err_t send_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    demo_run_t *d = cg_xcalloc(1, sizeof(*d));
    d->ex = ex;
    ex->up.handle = d;
    uv_timer_init(up->ctx->loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, on_tick, 0, DEMO_TICK_MS);
    cg_exchange_upstream_sent(ex);
    return CG_OK;
}

static void abort_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    (void)up;
    if (ex->up.handle)
        release(ex->up.handle);
}

static void pause_ex(cg_upstream_t *up, cg_exchange_t *ex, bool pause)
{
    (void)up;
    demo_run_t *d = ex->up.handle;
    if (d)
        d->paused = pause;
}

static void drain(cg_upstream_t *up)
{
    (void)up; /* no connections */
}

static void pool_free(cg_upstream_t *up)
{
    free(up);
}

static const cg_upstream_ops_t ops = {"demo", send_ex, abort_ex, pause_ex, drain, pool_free};

cg_upstream_t *cg_up_demo_new(cg_ctx_t *ctx)
{
    cg_upstream_t *up = cg_xcalloc(1, sizeof(*up));
    up->ops = &ops;
    up->ctx = ctx;
    return up;
}
