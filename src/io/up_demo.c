/*
 * The embedded demo upstream (no upstream configured, or --demo): answers
 * in-process, like Azure OpenAI "On Your Data", a token every ~20 ms, with
 * [docN] references (some split across chunks) and citations in the first
 * chunk's context, so the first curl shows what citegate does. It sits
 * behind the same interface as the real pools, and like them answers only
 * from the loop (its timer), never from inside a call.
 */
#include "citegate/json.h"
#include "exchange.h"

#include <stdlib.h>
#include <string.h>

#define DEMO_TICK_MS 20

typedef struct demo_run {
    cg_exchange_t *ex; /* NULL once aborted */
    uv_timer_t timer;
    cg_buf_t chunks; /* the whole answer, events back to back */
    size_t *ends;    /* end offset of each piece to send */
    size_t npieces, next;
    bool paused, headed;
} demo_run_t;

static const char *const CONTEXT =
    "{\"citations\":["
    "{\"content\":\"The X100 charges over USB-C in about two hours; a full charge lasts 14 "
    "hours.\","
    "\"title\":\"X100 User Manual\",\"url\":\"https://docs.example.com/x100/manual.pdf\","
    "\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"0\"},"
    "{\"content\":\"Every device carries a two-year limited warranty against manufacturing "
    "defects.\","
    "\"title\":\"Warranty "
    "FAQ\",\"url\":null,\"filepath\":\"faq/warranty.html\",\"chunk_id\":\"1\"},"
    "{\"content\":\"Batteries can be replaced at any authorised service centre.\","
    "\"title\":null,\"url\":\"https://docs.example.com/service/battery swap.html\","
    "\"filepath\":null,\"chunk_id\":\"4\"}],"
    "\"intent\":\"[\\\"x100 charging\\\"]\","
    "\"all_retrieved_documents\":["
    "{\"content\":\"The X100 charges over USB-C in about two hours; a full charge lasts 14 "
    "hours.\","
    "\"title\":\"X100 User Manual\",\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"0\","
    "\"original_search_score\":41.2,\"rerank_score\":3.4},"
    "{\"content\":\"Every device carries a two-year limited warranty against manufacturing "
    "defects.\","
    "\"title\":\"Warranty FAQ\",\"filepath\":\"faq/warranty.html\",\"chunk_id\":\"1\","
    "\"original_search_score\":17.9,\"rerank_score\":2.6},"
    "{\"content\":\"Batteries can be replaced at any authorised service centre.\","
    "\"title\":null,\"filepath\":null,\"chunk_id\":\"4\",\"original_search_score\":0.58}]}";

/* The answer, cut into tokens; note "[doc" + "1]" split across chunks. */
static const char *const TOKENS[] = {
    "The",       " X100",         " charges", " over", " USB-C", " in",
    " about",    " two",          " hours",   " [doc", "1]",     ".",
    " It",       " is",           " covered", " by",   " a",     " two-year",
    " warranty", " [doc2]",       ",",        " and",  " its",   " battery",
    " can",      " be",           " swapped", " at",   " a",     " service",
    " centre",   " [doc3][doc1]", ".",        NULL};

static const char *const HEAD =
    "{\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion.chunk\",\"created\":1757592280,"
    "\"model\":\"citegate-demo\",\"choices\":[{\"index\":0,\"delta\":";

static const char *const NOT_FOUND =
    "{\"error\":{\"message\":\"the demo upstream only answers chat completions\","
    "\"type\":\"invalid_request_error\",\"code\":\"not_found\"}}";

static void add_piece(demo_run_t *d)
{
    d->ends = cg_xrealloc(d->ends, (d->npieces + 1) * sizeof(size_t));
    d->ends[d->npieces++] = d->chunks.len;
}

static void build_stream(demo_run_t *d)
{
    cg_buf_t *b = &d->chunks;
    cg_buf_printf(b,
                  "data: %s{\"role\":\"assistant\",\"context\":%s},\"finish_reason\":null}]}\n\n",
                  HEAD, CONTEXT);
    add_piece(d);
    for (int i = 0; TOKENS[i]; i++) {
        cg_buf_printf(b, "data: %s{\"content\":", HEAD);
        cg_json_put_cstr(b, TOKENS[i]);
        cg_buf_puts(b, "},\"finish_reason\":null}]}\n\n");
        add_piece(d);
    }
    cg_buf_printf(b, "data: %s{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", HEAD);
    add_piece(d);
}

static void build_body(demo_run_t *d)
{
    cg_buf_t *b = &d->chunks;
    cg_buf_puts(b,
                "{\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion\",\"created\":1757592280,"
                "\"model\":\"citegate-demo\",\"choices\":[{\"index\":0,\"finish_reason\":\"stop\","
                "\"message\":{\"role\":\"assistant\",\"content\":\"");
    for (int i = 0; TOKENS[i]; i++)
        cg_json_put_escaped(b, TOKENS[i], strlen(TOKENS[i]));
    cg_buf_printf(b, "\",\"context\":%s}}]}", CONTEXT);
    add_piece(d);
}

static void on_close(uv_handle_t *h)
{
    demo_run_t *d = h->data;
    cg_buf_free(&d->chunks);
    free(d->ends);
    free(d);
}

static cg_exchange_t *release(demo_run_t *d)
{
    cg_exchange_t *ex = d->ex;
    if (ex)
        ex->up.ctx = NULL;
    d->ex = NULL;
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, on_close);
    return ex;
}

static void respond(cg_exchange_t *ex, int status, const char *ctype)
{
    cg_hdrs_t h = {0};
    cg_hdrs_add_str(&h, "Content-Type", ctype);
    cg_ex_on_head(ex, status, &h);
    cg_hdrs_free(&h);
}

/* The first tick: the head, and what the request calls for. */
static void start(demo_run_t *d)
{
    cg_exchange_t *ex = d->ex;
    d->headed = true;
    if (!ex->transform) {
        respond(ex, 404, "application/json");
        cg_buf_puts(&d->chunks, NOT_FOUND);
        add_piece(d);
        return;
    }
    if (ex->req.stream)
        build_stream(d);
    else
        build_body(d);
    respond(ex, 200, ex->req.stream ? "text/event-stream" : "application/json");
}

static void on_tick(uv_timer_t *t)
{
    demo_run_t *d = t->data;
    if (d->ex == NULL || d->paused)
        return;
    if (!d->headed) {
        start(d);
        if (d->npieces > 1) /* a stream: one piece a tick from the next on */
            return;
    }
    size_t from = d->next ? d->ends[d->next - 1] : 0;
    size_t to = d->ends[d->next++];
    cg_ex_on_body(d->ex, d->chunks.p + from, to - from);
    if (d->next == d->npieces)
        cg_ex_on_end(release(d), CG_OK);
}

static cg_err_t send_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    demo_run_t *d = cg_xcalloc(1, sizeof(*d));
    d->ex = ex;
    ex->up.ctx = d;
    uv_timer_init(up->w->loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, on_tick, 0, DEMO_TICK_MS);
    cg_ex_upstream_sent(ex);
    return CG_OK;
}

static void abort_ex(cg_upstream_t *up, cg_exchange_t *ex)
{
    (void)up;
    if (ex->up.ctx)
        release(ex->up.ctx);
}

static void pause_ex(cg_upstream_t *up, cg_exchange_t *ex, bool pause)
{
    (void)up;
    demo_run_t *d = ex->up.ctx;
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

cg_upstream_t *cg_up_demo_new(cg_worker_t *w)
{
    cg_upstream_t *up = cg_xcalloc(1, sizeof(*up));
    up->ops = &ops;
    up->w = w;
    return up;
}
