/*
 * Dialect `anthropic` (SPEC §6a): the Anthropic Messages API.
 *
 * Request: POST {base}/v1/messages with anthropic-version and the client's
 * key as x-api-key (from api-key, else Authorization: Bearer; neither of
 * those goes upstream). The body: system and developer texts joined into
 * `system`; user and assistant messages in order, their content one string;
 * max_tokens (4096 when the client set none), temperature, top_p,
 * stop_sequences, stream and model; each request-side <source> with text,
 * in id order, as a document block before the text of the last user
 * message (whose content then becomes a list, its text block left out when
 * empty; without a user message no document is sent).
 *
 * Answer: Anthropic Messages events and bodies become chat-completion
 * chunks and bodies of our own, which the transformer then reads as it
 * reads an openai upstream's. So references, profiles and the end of the
 * stream work as they do there.
 *
 * Stream: message_start gives id, model and a role chunk; each text_delta a
 * content chunk whose content is the upstream's JSON string bytes as they
 * came (never decoded); citations (citations_delta, or a text block's
 * `citations`) become citations of the stream, and at a text block's
 * content_block_stop one `[N]` per distinct source the block cited goes out
 * as content, to be rewritten like any numeric reference; message_delta
 * gives finish_reason and output usage; message_stop the usage chunk (when
 * the client asked for it) and [DONE]; an `error` event SPEC §6's error
 * event. thinking, signature and tool input deltas, and unknown events, are
 * left out. A `ping` event, or an upstream event with no data, becomes one
 * SSE comment `: ping`: no client reads it, but proxies between us and the
 * client see traffic while the model thinks (some close idle streams).
 * Events whose data is not JSON are counted (stats.malformed) and left out:
 * they are not chat chunks, and a client SDK would fail on them.
 *
 * finish_reason: end_turn, stop_sequence, pause_turn -> "stop";
 * max_tokens, model_context_window_exceeded -> "length"; tool_use ->
 * "tool_calls"; refusal -> "content_filter"; anything else -> "stop".
 *
 * Sources: a citation's key is its document_index, else its
 * search_result_index, else its url; one without any is left out. A
 * document_index below the request's document count is the request-side
 * <source> that the document was made of (dreq->doc_ids); any other source
 * gets the next free number.
 *
 * State per stream, bounded (the tokens of an upstream event are the
 * call's, borrowed while it is read): at most CG_CITE_MAX sources (a URL key is kept to
 * CG_CITE_MAX_FIELD bytes; further sources are not cited); at most
 * CG_VIEW_BLOCK_REFS distinct sources per text block (further ones get no
 * reference); a text_delta template of at most CG_VIEW_TPL_MAX bytes; decoded
 * strings of one citation. The steady path (one text_delta after another)
 * allocates nothing: it matches the previous text_delta's bytes around the
 * text instead of parsing, and hands the text to the transformer as content
 * (cg__xform_content) rather than as a chunk to parse back.
 */
#include "chatreq.h"
#include "view.h"

#include <stdlib.h>
#include <string.h>

typedef enum key_kind {
    KEY_DOCUMENT,
    KEY_SEARCH_RESULT,
    KEY_URL,
} key_kind_t;

typedef struct source {
    key_kind_t kind;
    double index; /* KEY_DOCUMENT, KEY_SEARCH_RESULT */
    char *url;    /* KEY_URL: decoded, at most CG_CITE_MAX_FIELD bytes */
    size_t url_len;
    unsigned n; /* the citation's number */
} source_t;

typedef struct state {
    cg_view_json_t in; /* the upstream event being read (x->json is the chunks') */
    cg_buf_t strs;     /* decoded strings of one citation */

    cg_view_tpl_t tpl; /* a text_delta event's data around its text */

    source_t *src;
    size_t nsrc, src_cap;

    bool in_text;         /* a text block is open */
    cg_view_refs_t block; /* the sources it cites */

    bool started;   /* the role chunk went out */
    bool finished;  /* a finish_reason went out */
    bool usage_out; /* the usage chunk went out */
    bool over;      /* [DONE] or the error went out: nothing more is read */
    double in_tokens, out_tokens;
} state_t;

static void state_free(void *p)
{
    state_t *s = p;
    cg__view_json_free(&s->in);
    cg_buf_free(&s->strs);
    cg_buf_free(&s->tpl.bytes);
    for (size_t i = 0; i < s->nsrc; i++)
        free(s->src[i].url);
    free(s->src);
}

static const char *finish_reason(cg_span_t stop)
{
    if (cg_span_eq(stop, "max_tokens") || cg_span_eq(stop, "model_context_window_exceeded"))
        return "length";
    if (cg_span_eq(stop, "tool_use"))
        return "tool_calls";
    if (cg_span_eq(stop, "refusal"))
        return "content_filter";
    return "stop";
}

static cg_view_usage_t usage_of(const state_t *s)
{
    return (cg_view_usage_t){s->in_tokens, s->out_tokens, s->in_tokens + s->out_tokens};
}

static void put_usage(cg_xform_t *x, state_t *s)
{
    if (s->usage_out)
        return;
    s->usage_out = true;
    cg_view_usage_t u = usage_of(s);
    cg__view_usage(x, &u);
}

/* --- Sources ------------------------------------------------------------------ */

static source_t *find_source(state_t *s, key_kind_t kind, double index, const char *url,
                             size_t url_len)
{
    for (size_t i = 0; i < s->nsrc; i++) {
        source_t *o = &s->src[i];
        if (o->kind != kind)
            continue;
        if (kind == KEY_URL ? o->url_len == url_len && memcmp(o->url, url, url_len) == 0
                            : o->index == index)
            return o;
    }
    return NULL;
}

/* The number of a source seen for the first time: its request-side
 * <source> id, or a new citation made of what the upstream says of it. */
static unsigned new_citation(cg_xform_t *x, state_t *s, int c, key_kind_t kind, double index)
{
    const cg_json_t *j = &s->in.json;
    cg_cite_in_t in = {0};
    if (kind == KEY_DOCUMENT && x->dreq && index < (double)x->dreq->ndocs)
        in.id = x->dreq->doc_ids[(size_t)index];
    int title = cg_json_get(j, c, kind == KEY_DOCUMENT ? "document_title" : "title");
    int url = cg_json_get(j, c, "url");
    int source = cg_json_get(j, c, "source");
    size_t tn, un, cn;
    size_t t = cg__view_decode(&s->strs, j, title, &tn);
    size_t u = cg__view_decode(&s->strs, j, url >= 0 ? url : source, &un);
    size_t k = cg__view_decode(&s->strs, j, cg_json_get(j, c, "cited_text"), &cn);
    if (url < 0 && !cg__view_absolute_url(s->strs.p + u, un))
        un = 0; /* a search result's `source` is its url only when absolute */
    in.title = cg_span(s->strs.p + t, tn);
    in.url = cg_span(s->strs.p + u, un);
    in.content = cg_span(s->strs.p + k, cn);
    return cg__xform_cite(x, &in);
}

/* The number of the source that citation object c names, or 0. */
static unsigned source_of(cg_xform_t *x, state_t *s, int c)
{
    const cg_json_t *j = &s->in.json;
    if (cg_json_type(j, c) != JSMN_OBJECT)
        return 0;
    key_kind_t kind;
    double index = cg__view_count(j, cg_json_get(j, c, "document_index"), -1);
    int url = -1;
    if (index >= 0) {
        kind = KEY_DOCUMENT;
    } else if ((index = cg__view_count(j, cg_json_get(j, c, "search_result_index"), -1)) >= 0) {
        kind = KEY_SEARCH_RESULT;
    } else if (cg_json_is_str(j, url = cg_json_get(j, c, "url"))) {
        kind = KEY_URL;
    } else {
        return 0; /* nothing to tell one source from another */
    }
    s->strs.len = 0;
    cg_buf_reserve(&s->strs, 1); /* spans into it are taken even when nothing is decoded */
    size_t un = 0, u = kind == KEY_URL ? cg__view_decode(&s->strs, j, url, &un) : 0;
    if (un > CG_CITE_MAX_FIELD)
        un = CG_CITE_MAX_FIELD;
    source_t *o = find_source(s, kind, index, s->strs.p + u, un);
    if (o)
        return o->n;
    if (s->nsrc == CG_CITE_MAX)
        return 0;
    char *key = kind == KEY_URL ? cg_xstrndup(s->strs.p + u, un) : NULL;
    unsigned n = new_citation(x, s, c, kind, index);
    if (n == 0) {
        free(key);
        return 0;
    }
    s->src = cg_grow(s->src, s->nsrc, &s->src_cap, 16, sizeof(source_t));
    s->src[s->nsrc++] = (source_t){kind, index, key, un, n};
    return n;
}

/* A text block cites citation object c: its source joins the block's list. */
static void cite(cg_xform_t *x, state_t *s, int c)
{
    cg__view_refs_add(&s->block, source_of(x, s, c));
}

static void cite_all(cg_xform_t *x, state_t *s, int citations)
{
    const cg_json_t *j = &s->in.json;
    if (cg_json_type(j, citations) != JSMN_ARRAY)
        return;
    int n = j->tok[citations].size;
    for (int k = 0, c = citations + 1; k < n; k++, c = cg_json_skip(j, c))
        cite(x, s, c);
}

/* --- Stream events --------------------------------------------------------- */

/*
 * A text_delta whose data is the last one's around another well formed
 * text needs no parse (cg__view_tpl_text). Most events of an answer are
 * these.
 */
static bool fast_text(cg_xform_t *x, state_t *s, const cg_sse_event_t *ev)
{
    cg_span_t text;
    if (!cg__view_tpl_text(&s->tpl, ev, &text))
        return false;
    if (text.n)
        cg__xform_content(x, 0, text);
    return true;
}

static void on_message_start(cg_xform_t *x, state_t *s)
{
    const cg_json_t *j = &s->in.json;
    int msg = cg_json_get(j, 0, "message");
    int id = cg_json_get(j, msg, "id"), model = cg_json_get(j, msg, "model");
    int usage = cg_json_get(j, msg, "usage");
    cg__view_meta(x, j, id, model);
    s->in_tokens = cg__view_count(j, cg_json_get(j, usage, "input_tokens"), s->in_tokens);
    s->out_tokens = cg__view_count(j, cg_json_get(j, usage, "output_tokens"), s->out_tokens);
    cg__view_role(x, &s->started);
}

static void on_block_start(cg_xform_t *x, state_t *s)
{
    const cg_json_t *j = &s->in.json;
    int block = cg_json_get(j, 0, "content_block");
    s->in_text = cg__view_is(j, cg_json_get(j, block, "type"), "text");
    s->block.len = 0;
    if (!s->in_text)
        return;
    cite_all(x, s, cg_json_get(j, block, "citations"));
    int text = cg_json_get(j, block, "text");
    if (cg_json_is_str(j, text) && cg_json_raw(j, text).n)
        cg__xform_content(x, 0, cg_json_raw(j, text));
}

static void on_block_delta(cg_xform_t *x, state_t *s, const cg_sse_event_t *ev)
{
    const cg_json_t *j = &s->in.json;
    int delta = cg_json_get(j, 0, "delta");
    int type = cg_json_get(j, delta, "type");
    if (cg__view_is(j, type, "text_delta")) {
        int text = cg_json_get(j, delta, "text");
        if (!cg_json_is_str(j, text))
            return;
        cg__view_tpl_save(&s->tpl, ev, j, text);
        if (cg_json_raw(j, text).n)
            cg__xform_content(x, 0, cg_json_raw(j, text));
    } else if (cg__view_is(j, type, "citations_delta") && s->in_text) {
        cite(x, s, cg_json_get(j, delta, "citation"));
    }
}

static void on_block_stop(cg_xform_t *x, state_t *s)
{
    if (!s->in_text)
        return;
    s->in_text = false;
    if (s->block.len == 0)
        return;
    s->strs.len = 0;
    cg__view_put_refs(&s->strs, s->block.n, s->block.len);
    s->block.len = 0;
    cg__xform_content(x, 0, cg_span(s->strs.p, s->strs.len));
}

static void on_message_delta(cg_xform_t *x, state_t *s)
{
    const cg_json_t *j = &s->in.json;
    int usage = cg_json_get(j, 0, "usage");
    /* Counts there are cumulative: the last one wins. */
    s->in_tokens = cg__view_count(j, cg_json_get(j, usage, "input_tokens"), s->in_tokens);
    s->out_tokens = cg__view_count(j, cg_json_get(j, usage, "output_tokens"), s->out_tokens);
    int stop = cg_json_get(j, cg_json_get(j, 0, "delta"), "stop_reason");
    if (cg_json_is_str(j, stop) && !s->finished) {
        s->finished = true;
        cg__view_finish(x, finish_reason(cg_json_raw(j, stop)));
    }
}

static void on_error(cg_xform_t *x, state_t *s)
{
    const cg_json_t *j = &s->in.json;
    int err = cg_json_get(j, 0, "error");
    int msg = cg_json_get(j, err, "message"), type = cg_json_get(j, err, "type");
    cg__xform_error(x, cg__view_str(j, msg, "\"upstream sent an error event\""),
                    cg__view_str(j, type, "\"upstream_error\""));
}

static void dispatch(cg_xform_t *x, void *state, const cg_sse_event_t *ev, cg_span_t type)
{
    state_t *s = state;
    if (cg_span_eq(type, "content_block_delta")) {
        on_block_delta(x, s, ev);
    } else if (cg_span_eq(type, "message_start")) {
        on_message_start(x, s);
    } else if (cg_span_eq(type, "content_block_start")) {
        on_block_start(x, s);
    } else if (cg_span_eq(type, "content_block_stop")) {
        on_block_stop(x, s);
    } else if (cg_span_eq(type, "message_delta")) {
        on_message_delta(x, s);
    } else if (cg_span_eq(type, "message_stop")) {
        put_usage(x, s);
        cg__view_done(x);
        s->over = true;
    } else if (cg_span_eq(type, "error")) {
        on_error(x, s);
        s->over = true;
    } else if (cg_span_eq(type, "ping")) {
        cg__view_ping(x);
    }
}

static void on_event(cg_xform_t *x, void *state, const cg_sse_event_t *ev)
{
    state_t *s = state;
    if (s->over)
        return; /* a holding profile has not ended the stream yet; the answer has */
    if (!fast_text(x, s, ev))
        cg__view_typed_event(x, &s->in, ev, dispatch, s);
}

/* The upstream ended without message_stop. After a stop_reason the stream
 * is complete but for [DONE] (the transformer adds it): the usage chunk
 * still goes before it. */
static void on_end(cg_xform_t *x, void *state, cg_span_t pending)
{
    (void)pending; /* an incomplete event: dropped, as EventSource does */
    state_t *s = state;
    if (s->finished && !s->over)
        put_usage(x, s);
}

/* --- Non-streaming bodies ------------------------------------------------------ */

/* Appends the content of message body token msg: the text blocks' texts,
 * each followed by the references of its sources. */
static void body_text(cg_xform_t *x, state_t *s, int content, cg_buf_t *out)
{
    const cg_json_t *j = &s->in.json;
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int k = 0, b = content + 1; k < n; k++, b = cg_json_skip(j, b)) {
        int text = cg_json_get(j, b, "text");
        if (!cg__view_is(j, cg_json_get(j, b, "type"), "text") || !cg_json_is_str(j, text))
            continue;
        s->block.len = 0;
        cite_all(x, s, cg_json_get(j, b, "citations"));
        cg_span_t raw = cg_json_raw(j, text);
        cg_buf_put(out, raw.p, raw.n);
        cg__view_put_refs(out, s->block.n, s->block.len);
    }
    s->block.len = 0;
}

static int on_body(cg_xform_t *x, void *state, const char *body, size_t len, cg_buf_t *chat)
{
    state_t *s = state;
    const cg_json_t *j = &s->in.json;
    if (!cg__view_parse_bytes(x, &s->in, body, len) ||
        !cg__view_is(j, cg_json_get(j, 0, "type"), "message")) {
        cg__view_give_back(x, &s->in);
        return -1;
    }
    cg__view_meta(x, j, cg_json_get(j, 0, "id"), cg_json_get(j, 0, "model"));
    cg__view_body_open(x, chat);
    body_text(x, s, cg_json_get(j, 0, "content"), chat);
    int stop = cg_json_get(j, 0, "stop_reason"), usage = cg_json_get(j, 0, "usage");
    cg_view_usage_t u = {cg__view_count(j, cg_json_get(j, usage, "input_tokens"), 0),
                         cg__view_count(j, cg_json_get(j, usage, "output_tokens"), 0), 0};
    u.total = u.prompt + u.completion;
    cg__view_body_end(chat, cg_json_is_str(j, stop) ? finish_reason(cg_json_raw(j, stop)) : NULL,
                      cg_json_type(j, usage) == JSMN_OBJECT ? &u : NULL);
    cg__view_give_back(x, &s->in);
    return 0;
}

/* --- The request ------------------------------------------------------------- */

static void put_document(cg_buf_t *o, const cg_citation_t *s)
{
    cg__req_sep(o);
    cg_buf_puts(o, "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":"
                   "\"text/plain\",\"data\":");
    cg_json_put_cstr(o, s->content);
    cg_buf_puts(o, "},\"title\":");
    cg_json_put_cstr(o, s->title);
    cg_buf_puts(o, ",\"citations\":{\"enabled\":true}}");
}

/* A turn: its text as one string; the last user message with documents:
 * the documents, then its text as a text block unless that is empty. */
static void put_turn(cg_chatreq_t *c, int msg, cg_req_role_t role, void *ctx)
{
    const cg_req_docs_t *d = ctx;
    cg_buf_t *o = c->out;
    if (msg != c->last_user || d->n == 0) {
        cg__req_put_role_turn(c, msg, role, NULL);
        return;
    }
    cg_buf_puts(o, "{\"role\":\"user\",\"content\":[");
    for (size_t i = 0; i < d->n; i++)
        put_document(o, d->v[i]);
    cg__req_put_text_block(c, msg, "{\"type\":\"text\",\"text\":\"", "\"}");
    cg_buf_puts(o, "]}");
}

static int request(cg_chatreq_t *c, cg_dialect_err_t *err)
{
    if (cg__req_check_stop(c, err) != 0)
        return -1;
    cg_req_docs_t d;
    cg__req_find_documents(c, &d, true);
    cg_buf_t *o = c->out;
    cg_buf_putc(o, '{');
    cg__req_put_model(c);
    cg__req_put_system(c, "\"system\":\"", "\"");
    cg__req_put_turns(c, "messages", put_turn, &d);
    int max = cg__req_max_tokens(c);
    cg__req_key(o, "max_tokens"); /* required there */
    if (max >= 0)
        cg__req_put_raw(c, max);
    else
        cg_buf_puts(o, "4096");
    cg__req_put_kept(c, CG_REQ_TEMPERATURE, "temperature");
    cg__req_put_kept(c, CG_REQ_TOP_P, "top_p");
    cg__req_put_stop_list(c, "stop_sequences");
    cg__req_put_kept(c, CG_REQ_STREAM, "stream");
    cg_buf_putc(o, '}');
    cg__req_docs_free(&d);
    return 0;
}

static void path(const cg_dialect_req_t *r, cg_buf_t *out)
{
    (void)r;
    cg_buf_puts(out, "/v1/messages"); /* the client's query has no meaning there */
}

/* The key goes as x-api-key, never as api-key or Authorization; the
 * version and the key are citegate's, once each. */
static bool forwards(cg_span_t name)
{
    return !cg__req_field_is(name, "api-key") && !cg__req_field_is(name, "authorization") &&
           !cg__req_field_is(name, "x-api-key") && !cg__req_field_is(name, "anthropic-version");
}

static void headers(const cg_dialect_hdrs_t *h)
{
    cg_span_t key = cg_dialect_api_key(h->get(h->ctx, "api-key"), h->get(h->ctx, "authorization"));
    h->add(h->ctx, CG_SPAN_LIT("anthropic-version"), CG_SPAN_LIT(CG_ANTHROPIC_VERSION));
    if (key.p)
        h->add(h->ctx, CG_SPAN_LIT("x-api-key"), key);
}

static const cg_dialect_view_t view = {
    .state_size = sizeof(state_t),
    .state_free = state_free,
    .event = on_event,
    .end = on_end,
    .body = on_body,
};

const cg_dialect_t cg__dialect_anthropic = {
    .name = "anthropic",
    .request = request,
    .path = path,
    .forwards = forwards,
    .headers = headers,
    .view = &view,
};
