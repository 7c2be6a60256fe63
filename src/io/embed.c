/* The embeddings client: see embed.h. */
#include "embed.h"

#include "exchange.h"
#include "log.h"
#include "metrics.h"
#include "waitq.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_MS   250   /* how often running calls' deadlines are looked at */
#define LOG_GAP_MS 60000 /* failures are logged at most this often */

struct cg_embed_call {
    cg_embed_t *e;
    cg_list_t link; /* in the queue, the running or the finished list */
    cg_buf_t text;
    cg_hdrs_t keys;
    cg_embed_cb cb; /* NULL once cancelled */
    void *arg;
    cg_exchange_t *ex; /* while running */
    uint64_t deadline;
    int status;
    cg_buf_t body;
    bool too_big, complete, timed_out;
    cg_err_t err;
    const char *why; /* set when it failed before running */
};

struct cg_embed {
    cg_ctx_t *ctx;
    cg_waitq_t queue, running, finished;
    cg_defer_t pump; /* starts calls and hands out outcomes at a safe point */
    uv_timer_t sweep;
    uint64_t last_log; /* loop time of the last failure logged; 0: none yet */
    uint64_t unlogged; /* failures since */
    uint32_t dim;      /* the vectors' dimension so far; 0: none yet */
    bool draining;
};

/* ---- lists ------------------------------------------------------------------ */

static cg_embed_call_t *call_of_link(cg_list_t *l)
{
    return l ? CG_CONTAINER_OF(l, cg_embed_call_t, link) : NULL;
}

/* Moves c from wherever it is to the back of `to`. */
static void move(cg_waitq_t *from, cg_waitq_t *to, cg_embed_call_t *c)
{
    cg_waitq_remove(from, &c->link);
    cg_waitq_push(to, &c->link);
}

static void call_free(cg_embed_call_t *c)
{
    cg_buf_free(&c->text);
    cg_hdrs_free(&c->keys);
    cg_buf_free(&c->body);
    free(c);
}

/* ---- failures --------------------------------------------------------------- */

/* Counts one failure and logs it, at most once a minute per worker (SPEC §8). */
static void failed(cg_embed_t *e, const char *why)
{
    cg_metrics->embedding_failures++;
    uint64_t now = cg_now_ms(e->ctx);
    if (e->last_log && now - e->last_log < LOG_GAP_MS) {
        e->unlogged++;
        return;
    }
    const cg_upstream_t *up = *e->ctx->embed_upp;
    char more[64] = "";
    if (e->unlogged)
        snprintf(more, sizeof(more), "; %llu more failures since the last report",
                 (unsigned long long)e->unlogged);
    /* The path without its query: a query may carry a key. */
    const char *path = e->ctx->embed_path;
    cg_log_warn(NULL,
                "embeddings: %s (%s%.*s, model %s); patterns are kept without a vector and "
                "recall ranks lexically; answers are not affected%s",
                why, up->target ? up->target->url.authority : "", (int)strcspn(path, "?"), path,
                e->ctx->cfg->embeddings_model, more);
    e->last_log = now ? now : 1;
    e->unlogged = 0;
}

/* ---- the answer of one call ------------------------------------------------- */

static void pump_soon(cg_embed_t *e);

static cg_embed_call_t *call_of(cg_exchange_t *ex)
{
    return ex->down_ctx;
}

static void on_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h, long long len)
{
    (void)h;
    (void)len;
    call_of(ex)->status = status;
}

static void on_data(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    cg_embed_call_t *c = call_of(ex);
    if (c->too_big || c->body.len + total > CG_EMBED_MAX_BODY) {
        c->too_big = true;
        cg_buf_free(&c->body);
        return;
    }
    for (unsigned i = 0; i < n; i++)
        cg_buf_put(&c->body, bufs[i].base, bufs[i].len);
}

static void on_end(cg_exchange_t *ex, bool complete)
{
    call_of(ex)->complete = complete;
}

static size_t on_queued(cg_exchange_t *ex)
{
    (void)ex;
    return 0;
}

static void on_done(cg_exchange_t *ex)
{
    cg_embed_call_t *c = call_of(ex);
    cg_embed_t *e = c->e;
    c->err = ex->err;
    c->ex = NULL;
    move(&e->running, &e->finished, c);
    pump_soon(e);
}

static const cg_down_ops_t down_ops = {on_head, on_data, NULL, on_end, on_queued, on_done};

/* An error of the upstream machinery, said of the embeddings endpoint
 * ("connect failed", "TLS handshake failed", …). */
static const char *endpoint_error(cg_err_t err)
{
    const char *m = cg_err_message(err);
    return CG_HAS_PREFIX(m, "upstream ") ? m + strlen("upstream ") : m;
}

/* The vector of a finished call, or NULL with why filled. */
static bool outcome(cg_embed_call_t *c, cg_vector_t *vec, char *why, size_t len)
{
    if (c->why)
        snprintf(why, len, "%s", c->why);
    else if (c->timed_out)
        snprintf(why, len, "no answer within %u ms", CG_EMBED_TIMEOUT_MS);
    else if (c->err != CG_OK)
        snprintf(why, len, "%s", endpoint_error(c->err));
    else if (c->status != 200)
        snprintf(why, len, "the endpoint answered HTTP %d", c->status);
    else if (!c->complete)
        snprintf(why, len, "the answer broke off");
    else if (c->too_big)
        snprintf(why, len, "the answer is over %u bytes", CG_EMBED_MAX_BODY);
    else if (cg_embedding_parse(c->body.p ? c->body.p : "", c->body.len, vec, why, len) == 0)
        return true;
    return false;
}

/* A vector of another dimension than the ones before: the endpoint's model
 * changed, and recall ranks the patterns stored before lexically from now
 * on. Counted, and said once per change; the vector is kept. */
static void check_dim(cg_embed_t *e, uint32_t dim)
{
    if (e->dim && dim != e->dim) {
        cg_metrics->embedding_failures++;
        cg_log_warn(NULL,
                    "embeddings: vectors of %u dimensions after %u (model %s): recall compares a "
                    "vector only with those of its dimension, so the patterns stored before "
                    "rank lexically",
                    (unsigned)dim, (unsigned)e->dim, e->ctx->cfg->embeddings_model);
    }
    e->dim = dim;
}

void cg_embed_expect_dim(cg_embed_t *e, uint32_t dim)
{
    if (e)
        e->dim = dim;
}

static void deliver(cg_embed_call_t *c)
{
    cg_embed_t *e = c->e;
    cg_vector_t vec = {0};
    char why[256];
    bool ok = outcome(c, &vec, why, sizeof(why));
    if (ok) {
        vec.model =
            cg_xstrndup(e->ctx->cfg->embeddings_model, strlen(e->ctx->cfg->embeddings_model));
        check_dim(e, vec.dim);
    } else
        failed(e, why);
    if (c->cb)
        c->cb(c->arg, ok ? &vec : NULL, ok ? NULL : why);
    cg_vector_free(&vec);
    call_free(c);
}

/* ---- running calls ---------------------------------------------------------- */

static void add_key(const cg_embed_call_t *c, cg_hdrs_t *h)
{
    const char *key = c->e->ctx->cfg->embeddings_api_key;
    if (key == NULL) {
        for (size_t i = 0; i < c->keys.n; i++) {
            cg_span_t name = cg_hdr_name(&c->keys, i), v = cg_hdr_value(&c->keys, i);
            cg_hdrs_add(h, name.p, name.n, v.p, v.n);
        }
        return;
    }
    cg_buf_t v = {0};
    cg_buf_printf(&v, "Bearer %s", key);
    cg_hdrs_add(h, CG_STRLIT("Authorization"), v.p, v.len);
    cg_buf_free(&v);
}

static void on_sweep(uv_timer_t *t);

static void start(cg_embed_call_t *c)
{
    cg_embed_t *e = c->e;
    cg_ctx_t *ctx = e->ctx;
    cg_reqmsg_t m = {0};
    m.method = HTTP_POST;
    cg_buf_puts(&m.url, ctx->embed_path);
    cg_hdrs_add_str(&m.hdrs, "Content-Type", "application/json");
    cg_hdrs_add_str(&m.hdrs, "Accept", "application/json");
    add_key(c, &m.hdrs);
    cg_embedding_request(&m.body, ctx->cfg->embeddings_model, c->text.p ? c->text.p : "",
                         c->text.len);
    cg_buf_free(&c->text);
    cg_hdrs_free(&c->keys);
    cg_waitq_push(&e->running, &c->link);
    c->deadline = cg_now_ms(ctx) + CG_EMBED_TIMEOUT_MS;
    c->ex = cg_exchange_call(ctx, &m, ctx->embed_upp, &down_ops, c);
    cg_reqmsg_free(&m);
    cg_metrics->embedding_requests++;
    if (!uv_is_active((uv_handle_t *)&e->sweep))
        uv_timer_start(&e->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    cg_exchange_run(c->ex); /* may finish it at once: on_done queues the outcome */
}

static void on_pump(cg_defer_t *d)
{
    cg_embed_t *e = CG_CONTAINER_OF(d, cg_embed_t, pump);
    cg_embed_call_t *c;
    while ((c = call_of_link(cg_waitq_pop(&e->finished))))
        deliver(c);
    while (!e->draining && e->running.len < CG_EMBED_IN_FLIGHT &&
           (c = call_of_link(cg_waitq_pop(&e->queue))))
        start(c);
}

static void pump_soon(cg_embed_t *e)
{
    if (e->ctx->safe.closed) /* the loop is over: cg_embed_free ends what is left */
        return;
    cg_defer(&e->ctx->safe, &e->pump, on_pump);
}

/* Abandons running calls past their deadline; stops when none runs. */
static void on_sweep(uv_timer_t *t)
{
    cg_embed_t *e = t->data;
    uint64_t now = cg_now_ms(e->ctx);
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &e->running.head) {
        cg_embed_call_t *c = call_of_link(pos);
        if (now >= c->deadline) {
            c->timed_out = true;
            cg_exchange_client_gone(c->ex); /* on_done moves it to finished */
        }
    }
    if (cg_waitq_empty(&e->running))
        uv_timer_stop(t);
}

/* ---- the interface ------------------------------------------------------------ */

cg_embed_t *cg_embed_new(cg_ctx_t *ctx)
{
    if (ctx->embed_upp == NULL)
        return NULL;
    cg_embed_t *e = cg_xcalloc(1, sizeof(*e));
    e->ctx = ctx;
    e->pump.fn = on_pump;
    cg_waitq_init(&e->queue);
    cg_waitq_init(&e->running);
    cg_waitq_init(&e->finished);
    uv_timer_init(ctx->loop, &e->sweep);
    e->sweep.data = e;
    uv_unref((uv_handle_t *)&e->sweep);
    return e;
}

cg_embed_call_t *cg_embed_ask(cg_embed_t *e, const char *text, size_t n, const cg_hdrs_t *keys,
                              bool urgent, cg_embed_cb cb, void *arg)
{
    if (e->draining || e->queue.len >= CG_EMBED_QUEUE) {
        failed(e, e->draining ? "citegate is shutting down"
                                       : "too many calls waiting (queue of 1024 full): dropped");
        return NULL;
    }
    cg_embed_call_t *c = cg_xcalloc(1, sizeof(*c));
    c->e = e;
    c->cb = cb;
    c->arg = arg;
    cg_buf_put(&c->text, text, n);
    for (size_t i = 0; keys && i < keys->n; i++) {
        cg_span_t name = cg_hdr_name(keys, i), v = cg_hdr_value(keys, i);
        cg_hdrs_add(&c->keys, name.p, name.n, v.p, v.n);
    }
    if (urgent)
        cg_waitq_push_front(&e->queue, &c->link);
    else
        cg_waitq_push(&e->queue, &c->link);
    pump_soon(e);
    return c;
}

void cg_embed_cancel(cg_embed_call_t *c)
{
    c->cb = NULL;
}

void cg_embed_drain(cg_embed_t *e)
{
    if (e == NULL || e->draining)
        return;
    e->draining = true;
    cg_embed_call_t *c;
    while ((c = call_of_link(cg_waitq_pop(&e->queue)))) {
        c->why = "citegate is shutting down";
        cg_waitq_push(&e->finished, &c->link);
    }
    while (!cg_waitq_empty(&e->running)) /* each moves itself to finished */
        cg_exchange_client_gone(call_of_link(e->running.head.next)->ex);
    pump_soon(e);
}

void cg_embed_free(cg_embed_t *e)
{
    if (e == NULL)
        return;
    cg_defer_cancel(&e->pump);
    /* Running calls ended with the loop (their exchanges were closed). */
    cg_waitq_t *lists[] = {&e->finished, &e->queue, &e->running};
    for (int i = 0; i < 3; i++) {
        cg_embed_call_t *c;
        while ((c = call_of_link(cg_waitq_pop(lists[i])))) {
            if (c->cb && !c->why && i > 0)
                c->why = "citegate is shutting down";
            deliver(c);
        }
    }
    free(e);
}

const cg_track_embedder_t cg_embed_tracking = {cg_embed_new,   cg_embed_ask,  cg_embed_cancel,
                                               cg_embed_drain, cg_embed_free, cg_embed_expect_dim};
