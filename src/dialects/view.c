/*
 * What the answer views of the dialects share (view.h): reading the
 * upstream's JSON, and the chunks and bodies of our own around it.
 */
#include "view.h"

#include "core/emit.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

/* --- Reading the upstream's JSON -------------------------------------------- */

void cg__view_json_free(cg_view_json_t *in)
{
    cg_json_free(&in->json);
    cg_buf_free(&in->lines);
}

bool cg__view_parse(cg_xform_t *x, cg_view_json_t *in, const cg_sse_event_t *ev)
{
    if (in->json.max == 0)
        cg_json_init(&in->json, CG_XFORM_MAX_TOKENS);
    cg_json_borrow(&in->json, cg__xform_view_tokens(x));
    return cg__xform_parse_data(&in->json, ev, &in->lines);
}

bool cg__view_parse_bytes(cg_xform_t *x, cg_view_json_t *in, const char *p, size_t n)
{
    cg_sse_event_t ev = {.data = cg_span(p, n), .ndata = 1};
    return cg__view_parse(x, in, &ev);
}

void cg__view_give_back(cg_xform_t *x, cg_view_json_t *in)
{
    cg_json_give_back(&in->json, cg__xform_view_tokens(x));
}

bool cg__view_is(const cg_json_t *j, int tok, const char *lit)
{
    return cg_json_is_str(j, tok) && cg_span_eq(cg_json_raw(j, tok), lit);
}

cg_span_t cg__view_str(const cg_json_t *j, int tok, const char *dflt)
{
    if (!cg_json_is_str(j, tok))
        return dflt ? cg_span(dflt, strlen(dflt)) : cg_span(NULL, 0);
    size_t b = cg_json_begin(j, tok);
    return cg_span(j->js + b, cg_json_end(j, tok) - b);
}

double cg__view_count(const cg_json_t *j, int tok, double dflt)
{
    if (cg_json_type(j, tok) != JSMN_PRIMITIVE)
        return dflt;
    /* Plain digits, what upstreams write: no strtod. */
    cg_span_t r = cg_json_raw(j, tok);
    if (r.n > 0 && r.n < 16 && (r.p[0] != '0' || r.n == 1)) {
        uint64_t v = 0;
        size_t i = 0;
        while (i < r.n && r.p[i] >= '0' && r.p[i] <= '9')
            v = v * 10 + (uint64_t)(r.p[i++] - '0');
        if (i == r.n)
            return (double)v;
    }
    double v;
    if (cg_json_number(j, tok, &v) && v >= 0 && v < 1e15 && v == (double)(uint64_t)v)
        return v;
    return dflt;
}

size_t cg__view_unescape(cg_buf_t *b, const char *p, size_t n)
{
    size_t at = b->len;
    char *dst = cg_buf_reserve(b, n); /* decoding never grows a string */
    b->len += cg_json_unescape(p, n, dst);
    return at;
}

size_t cg__view_decode(cg_buf_t *b, const cg_json_t *j, int tok, size_t *len)
{
    if (!cg_json_is_str(j, tok)) {
        *len = 0;
        return b->len;
    }
    cg_span_t raw = cg_json_raw(j, tok);
    size_t at = cg__view_unescape(b, raw.p, raw.n);
    *len = b->len - at;
    return at;
}

bool cg__view_absolute_url(const char *p, size_t n)
{
    return (n >= 7 && strncasecmp(p, "http://", 7) == 0) ||
           (n >= 8 && strncasecmp(p, "https://", 8) == 0);
}

void cg__view_put_field(const cg_json_t *j, int tok, cg_buf_t *b)
{
    size_t n;
    if (b->len >= CG_CITE_MAX_FIELD)
        return;
    cg__view_decode(b, j, tok, &n);
    if (b->len > CG_CITE_MAX_FIELD)
        b->len = CG_CITE_MAX_FIELD;
}

/* --- AWS event-stream messages ---------------------------------------------- */

/* An exception or error message: SPEC §6's error event, with the
 * upstream's type or code. */
static void evs_failure(cg_xform_t *x, const cg_json_t *j, const cg_evs_msg_t *m, bool parsed,
                        cg_buf_t *b)
{
    bool exception = cg_span_eq(m->message_type, "exception");
    cg_span_t code = exception ? m->exception_type : m->error_code;
    b->len = 0;
    cg_span_t text = cg__view_str(j, parsed ? cg_json_get(j, 0, "message") : -1, NULL);
    if (exception && text.p)
        cg_buf_put(b, text.p, text.n);
    else if (!exception && m->error_message.n)
        cg_json_put_str(b, m->error_message.p, m->error_message.n);
    else
        cg_buf_puts(b, "\"upstream sent an error message\"");
    size_t at = b->len;
    if (code.n)
        cg_json_put_str(b, code.p, code.n);
    else
        cg_buf_puts(b, "\"upstream_error\"");
    cg__xform_error(x, cg_span(b->p, at), cg_span(b->p + at, b->len - at));
}

bool cg__view_evs_event(cg_xform_t *x, cg_view_json_t *in, const cg_evs_msg_t *m, cg_buf_t *scratch,
                        bool *over)
{
    if (*over)
        return false;
    bool parsed = cg__view_parse_bytes(x, in, m->payload.p, m->payload.n);
    bool failed = cg_span_eq(m->message_type, "exception") || cg_span_eq(m->message_type, "error");
    if (failed) {
        *over = true;
        evs_failure(x, &in->json, m, parsed, scratch);
    } else if (cg_span_eq(m->message_type, "event") && parsed) {
        return true; /* the view reads it, then gives the tokens back */
    } else if (cg_span_eq(m->message_type, "event")) {
        x->stats.malformed++;
    } /* another kind of message: nothing of the answer */
    cg__view_give_back(x, in);
    return false;
}

void cg__view_tpl_save(cg_view_tpl_t *t, const cg_sse_event_t *ev, const cg_json_t *j, int text)
{
    size_t start = (size_t)j->tok[text].start, end = (size_t)j->tok[text].end;
    t->ok = false;
    if (ev->ndata != 1 || start + (j->len - end) > CG_VIEW_TPL_MAX)
        return;
    t->bytes.len = 0;
    cg_buf_put(&t->bytes, j->js, start);
    cg_buf_put(&t->bytes, j->js + end, j->len - end);
    t->pre = start;
    t->ok = true;
}

bool cg__view_tpl_text(const cg_view_tpl_t *t, const cg_sse_event_t *ev, cg_span_t *text)
{
    cg_span_t d = ev->data;
    size_t pre = t->pre, post = t->bytes.len - pre;
    if (!t->ok || ev->ndata != 1 || d.n < pre + post || memcmp(d.p, t->bytes.p, pre) != 0 ||
        memcmp(d.p + d.n - post, t->bytes.p + pre, post) != 0)
        return false;
    /* The suffix starts with the string's closing quote: it must be the
     * first one, after nothing but a well formed string. */
    *text = cg_span(d.p + pre, d.n - pre - post);
    return cg__view_string_len(text->p, d.n - pre) == text->n;
}

void cg__view_typed_event(cg_xform_t *x, cg_view_json_t *in, const cg_sse_event_t *ev,
                          cg_view_dispatch_fn dispatch, void *state)
{
    if (ev->ndata == 0) {
        if (ev->nother)
            cg__view_ping(x);
        return;
    }
    if (cg__view_parse(x, in, ev)) {
        const cg_json_t *j = &in->json;
        int type = cg_json_get(j, 0, "type");
        dispatch(x, state, ev, cg_json_is_str(j, type) ? cg_json_raw(j, type) : ev->type);
    } else {
        x->stats.malformed++;
    }
    cg__view_give_back(x, in);
}

/* --- Chunks of our own ------------------------------------------------------ */

void cg__view_meta(cg_xform_t *x, const cg_json_t *j, int id, int model)
{
    cg__xform_meta(x, cg__view_str(j, id, NULL), cg__view_str(j, model, NULL));
}

cg_buf_t *cg__view_chunk(cg_xform_t *x)
{
    cg_buf_t *b = cg__xform_chunk_begin(x);
    cg_buf_putc(b, '{');
    cg__xform_chunk_meta(x, b);
    return b;
}

void cg__view_role(cg_xform_t *x, bool *sent)
{
    if (*sent)
        return;
    *sent = true;
    cg_buf_puts(cg__view_chunk(x), ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                                   "\"content\":\"\"},\"finish_reason\":null}]}");
    cg__xform_chunk_end(x);
}

void cg__view_finish(cg_xform_t *x, const char *reason)
{
    cg_buf_printf(cg__view_chunk(x),
                  ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"%s\"}]}", reason);
    cg__xform_chunk_end(x);
}

void cg__view_usage_members(cg_buf_t *b, const cg_view_usage_t *u)
{
    cg_buf_printf(
        b, "\"usage\":{\"prompt_tokens\":%.0f,\"completion_tokens\":%.0f,\"total_tokens\":%.0f}",
        u->prompt, u->completion, u->total);
}

void cg__view_usage(cg_xform_t *x, const cg_view_usage_t *u)
{
    if (x->dreq == NULL || !x->dreq->include_usage)
        return;
    cg_buf_t *b = cg__view_chunk(x);
    cg_buf_puts(b, ",\"choices\":[],");
    cg__view_usage_members(b, u);
    cg_buf_putc(b, '}');
    cg__xform_chunk_end(x);
}

void cg__view_done(cg_xform_t *x)
{
    cg_buf_puts(cg__xform_chunk_begin(x), "[DONE]");
    cg__xform_chunk_end(x);
}

void cg__view_ping(cg_xform_t *x)
{
    cg__emit_str(x->out, ": ping\n\n");
    x->stats.events_out++;
}

void cg__view_put_refs(cg_buf_t *b, const unsigned *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char d[16];
        size_t k = sizeof(d);
        d[--k] = ']';
        unsigned x = v[i];
        do
            d[--k] = (char)('0' + x % 10);
        while ((x /= 10) != 0);
        d[--k] = '[';
        cg_buf_put(b, d + k, sizeof(d) - k);
    }
}

void cg__view_refs_add(cg_view_refs_t *r, unsigned n)
{
    if (n == 0)
        return;
    for (size_t i = 0; i < r->len; i++)
        if (r->n[i] == n)
            return;
    if (r->len < CG_VIEW_BLOCK_REFS)
        r->n[r->len++] = n;
}

/* --- Non-streaming bodies ----------------------------------------------------- */

static void put_raw_or(cg_buf_t *b, const cg_buf_t *v, const char *dflt)
{
    if (v->len)
        cg_buf_put(b, v->p, v->len);
    else
        cg_buf_puts(b, dflt);
}

void cg__view_body_open(const cg_xform_t *x, cg_buf_t *chat)
{
    cg_buf_puts(chat, "{\"id\":");
    put_raw_or(chat, &x->meta_id, "\"\"");
    cg_buf_puts(chat, ",\"object\":\"chat.completion\",\"created\":");
    put_raw_or(chat, &x->meta_created, "0");
    cg_buf_puts(chat, ",\"model\":");
    put_raw_or(chat, &x->meta_model, "\"\"");
    cg_buf_puts(chat,
                ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"");
}

void cg__view_body_end(cg_buf_t *chat, const char *reason, const cg_view_usage_t *u)
{
    cg_buf_puts(chat, "\"},\"finish_reason\":");
    if (reason)
        cg_buf_printf(chat, "\"%s\"", reason);
    else
        cg_buf_puts(chat, "null");
    cg_buf_puts(chat, "}]");
    if (u) {
        cg_buf_putc(chat, ',');
        cg__view_usage_members(chat, u);
    }
    cg_buf_putc(chat, '}');
}

void cg__view_error_body(cg_buf_t *chat, cg_span_t message, cg_span_t code)
{
    cg_buf_puts(chat, "{\"error\":{\"message\":");
    cg_buf_put(chat, message.p, message.n);
    cg_buf_puts(chat, ",\"type\":\"upstream_error\",\"code\":");
    cg_buf_put(chat, code.p, code.n);
    cg_buf_puts(chat, "}}");
}
