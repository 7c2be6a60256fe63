/*
 * The embedded demo upstream (no upstream configured, or --demo): answers
 * in-process, like Azure OpenAI "On Your Data", a token every ~20 ms, with
 * [docN] references (some split across chunks) and citations in the first
 * chunk's context, so the first curl shows what citegate does.
 */
#include "server.h"

#include "citegate/json.h"

#include <stdlib.h>
#include <string.h>

#define DEMO_TICK_MS 20

struct cg_demo {
    cg_exchange_t *ex;
    uv_timer_t timer;
    cg_buf_t chunks; /* the whole answer, events back to back */
    size_t *ends;    /* end offset of each piece to send */
    size_t npieces, next, sent;
    bool paused;
};

static const char *const CONTEXT =
    "{\"citations\":["
    "{\"content\":\"The X100 charges over USB-C in about two hours; a full charge lasts 14 hours.\","
    "\"title\":\"X100 User Manual\",\"url\":\"https://docs.example.com/x100/manual.pdf\","
    "\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"0\"},"
    "{\"content\":\"Every device carries a two-year limited warranty against manufacturing defects.\","
    "\"title\":\"Warranty FAQ\",\"url\":null,\"filepath\":\"faq/warranty.html\",\"chunk_id\":\"1\"},"
    "{\"content\":\"Batteries can be replaced at any authorised service centre.\","
    "\"title\":null,\"url\":\"https://docs.example.com/service/battery swap.html\","
    "\"filepath\":null,\"chunk_id\":\"4\"}],"
    "\"intent\":\"[\\\"x100 charging\\\"]\","
    "\"all_retrieved_documents\":["
    "{\"content\":\"The X100 charges over USB-C in about two hours; a full charge lasts 14 hours.\","
    "\"title\":\"X100 User Manual\",\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"0\","
    "\"original_search_score\":41.2,\"rerank_score\":3.4},"
    "{\"content\":\"Every device carries a two-year limited warranty against manufacturing defects.\","
    "\"title\":\"Warranty FAQ\",\"filepath\":\"faq/warranty.html\",\"chunk_id\":\"1\","
    "\"original_search_score\":17.9,\"rerank_score\":2.6},"
    "{\"content\":\"Batteries can be replaced at any authorised service centre.\","
    "\"title\":null,\"filepath\":null,\"chunk_id\":\"4\",\"original_search_score\":0.58}]}";

/* The answer, cut into tokens; note "[doc" + "1]" split across chunks. */
static const char *const TOKENS[] = {
    "The", " X100", " charges", " over", " USB-C", " in", " about", " two", " hours", " [doc",
    "1]", ".", " It", " is", " covered", " by", " a", " two-year", " warranty", " [doc2]", ",",
    " and", " its", " battery", " can", " be", " swapped", " at", " a", " service", " centre",
    " [doc3][doc1]", ".", NULL};

static const char *const HEAD =
    "{\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion.chunk\",\"created\":1757592280,"
    "\"model\":\"citegate-demo\",\"choices\":[{\"index\":0,\"delta\":";

static void add_piece(struct cg_demo *d)
{
    d->ends = cg_xrealloc(d->ends, (d->npieces + 1) * sizeof(size_t));
    d->ends[d->npieces++] = d->chunks.len;
}

static void build_stream(struct cg_demo *d)
{
    cg_buf_t *b = &d->chunks;
    cg_buf_printf(b, "data: %s{\"role\":\"assistant\",\"context\":%s},\"finish_reason\":null}]}\n\n",
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

static void build_body(struct cg_demo *d)
{
    cg_buf_t *b = &d->chunks;
    cg_buf_puts(b, "{\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion\",\"created\":1757592280,"
                   "\"model\":\"citegate-demo\",\"choices\":[{\"index\":0,\"finish_reason\":\"stop\","
                   "\"message\":{\"role\":\"assistant\",\"content\":\"");
    for (int i = 0; TOKENS[i]; i++)
        cg_json_put_escaped(b, TOKENS[i], strlen(TOKENS[i]));
    cg_buf_printf(b, "\",\"context\":%s}}]}", CONTEXT);
    add_piece(d);
}

static void on_close(uv_handle_t *h)
{
    struct cg_demo *d = h->data;
    cg_buf_free(&d->chunks);
    free(d->ends);
    free(d);
}

static void release(struct cg_demo *d)
{
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, on_close);
}

static void on_tick(uv_timer_t *t)
{
    struct cg_demo *d = t->data;
    cg_exchange_t *ex = d->ex;
    if (ex == NULL || d->paused)
        return;
    size_t from = d->next ? d->ends[d->next - 1] : 0;
    size_t to = d->ends[d->next++];
    cg_ex_on_body(ex, d->chunks.p + from, to - from);
    if (d->ex == NULL)
        return; /* the exchange went away while we wrote */
    if (d->next == d->npieces) {
        d->ex = NULL;
        ex->demo = NULL;
        release(d);
        cg_ex_on_end(ex, -1);
    }
}

static void respond(cg_exchange_t *ex, int status, const char *ctype)
{
    cg_hdrs_t h = {0};
    cg_hdrs_on_field(&h, "Content-Type", 12);
    cg_hdrs_on_value(&h, ctype, strlen(ctype));
    cg_ex_on_head(ex, status, &h);
    cg_hdrs_free(&h);
}

void cg_demo_send(cg_exchange_t *ex)
{
    struct cg_demo *d = cg_xcalloc(1, sizeof(*d));
    d->ex = ex;
    uv_timer_init(ex->w->loop, &d->timer);
    d->timer.data = d;
    ex->demo = d;
    cg_exchange_upstream_ready(ex);
    if (!ex->transform) {
        const char *msg = "{\"error\":{\"message\":\"the demo upstream only answers chat "
                          "completions\",\"type\":\"invalid_request_error\",\"code\":\"not_found\"}}";
        ex->demo = NULL;
        d->ex = NULL;
        respond(ex, 404, "application/json");
        cg_ex_on_body(ex, msg, strlen(msg));
        cg_ex_on_end(ex, -1);
        release(d);
        return;
    }
    if (ex->req.stream) {
        build_stream(d);
        respond(ex, 200, "text/event-stream");
        if (ex->demo)
            uv_timer_start(&d->timer, on_tick, DEMO_TICK_MS, DEMO_TICK_MS);
        return;
    }
    build_body(d);
    respond(ex, 200, "application/json");
    if (ex->demo)
        on_tick(&d->timer);
}

void cg_demo_abort(cg_exchange_t *ex)
{
    struct cg_demo *d = ex->demo;
    if (d == NULL)
        return;
    ex->demo = NULL;
    d->ex = NULL;
    release(d);
}

void cg_demo_pause(cg_exchange_t *ex, bool pause)
{
    if (ex->demo)
        ex->demo->paused = pause;
}
