/*
 * Dialect `bedrock` (SPEC §6a): Amazon Bedrock's Converse API.
 *
 * Request: POST {base}/model/{MODEL}/converse-stream when the client
 * streams, else .../converse. MODEL (the Azure route's deployment, else the
 * body's model) is one path segment, `:` and `/` percent-encoded; it must be
 * made of A-Z a-z 0-9 . _ - : / without "..". The body: system and developer
 * texts as one `system` block; user and assistant messages in order, one
 * text block each, consecutive messages of one role merged into one turn
 * (Converse refuses two turns of one role in a row), empty text blocks left
 * out; each request-side <source> with text, in id order, as a document
 * with citations on before the last user message's text; inferenceConfig
 * (maxTokens, temperature, topP, stopSequences); toolConfig =
 * CITEGATE_BEDROCK_TOOL_CONFIG as it is. Keys: the shell signs the request
 * (SigV4) when AWS keys are configured; otherwise the client's
 * Authorization (a Bedrock API key) goes as it came, and a client api-key
 * goes as Authorization: Bearer.
 *
 * Answer, streamed: AWS's event stream, read by the transformer
 * (citegate/evstream.h); this view gets each decoded message. messageStart
 * gives the role chunk; a contentBlockDelta's text a content chunk of the
 * upstream's JSON string bytes as they came; its citation a citation of
 * that block, whose source is numbered as it comes (so an `[N]` the model
 * writes after it links), and a citation with no location, title or
 * source continues the block's previous one (its sourceContent text goes
 * on that source's snippet, when that citation made the source); at
 * contentBlockStop one `[N]` per distinct source of the block, in the order
 * of their first citation there, goes out as content, rewritten like any
 * numeric reference; messageStop gives
 * finish_reason, metadata the usage (a chunk when the client asked for it);
 * an exception or error message SPEC §6's error event. The end of the body
 * after messageStop is the normal end. Not streamed: the JSON body's
 * output.message.content blocks in order (text, and citationsContent's
 * text with its citations, the references right after), stopReason and
 * usage: the same content as streamed.
 *
 * Sources: keyed by web url, else documentIndex, else searchResultIndex,
 * else `source`, else `title`; a citation with none of them is left out. A
 * documentIndex below the request's <source> document count is that
 * <source>; any other source gets the next free number, with title =
 * title, else the web domain; url = the web url, else an absolute-URL
 * source; snippet = its first citation's sourceContent texts.
 *
 * State per stream, bounded: at most CG_CITE_MAX sources (keys kept to
 * CG_CITE_MAX_FIELD bytes), at most CG_VIEW_BLOCK_REFS distinct sources
 * referenced per block (a block citing more gets no reference for the
 * rest, which stay sources), a citation's strings to CG_CITE_MAX_FIELD
 * bytes each; tokens are borrowed from the call while a message is read.
 */
#include "chatreq.h"
#include "view.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Is span v the bytes of string literal lit? Without strlen: every message
 * asks this several times. */
#define IS(v, lit) ((v).n == sizeof(lit) - 1 && memcmp((v).p, lit, sizeof(lit) - 1) == 0)

typedef enum key_kind {
    KEY_URL,
    KEY_DOCUMENT,
    KEY_SEARCH_RESULT,
    KEY_SOURCE,
    KEY_TITLE,
} key_kind_t;

typedef struct source {
    key_kind_t kind;
    double index; /* KEY_DOCUMENT, KEY_SEARCH_RESULT */
    char *key;    /* the others: the key's text, at most CG_CITE_MAX_FIELD bytes */
    size_t key_len;
    unsigned n;
} source_t;

typedef struct converse {
    cg_view_json_t in; /* the upstream message's payload being read */
    cg_buf_t strs;     /* decoded strings of one citation, the block's references */

    cg_view_refs_t block; /* the open block's sources */
    /* The source that the block's last citation made: a citation that goes
     * on in the next delta adds to its snippet. 0: none (a source cited
     * before keeps its first citation's snippet). */
    unsigned cont;

    source_t *src;
    size_t nsrc, src_cap;

    bool meta, started, finished, usage_seen, usage_out, over;
    double in_tokens, out_tokens, total_tokens;
} converse_t;

static void converse_free(void *p)
{
    converse_t *s = p;
    cg__view_json_free(&s->in);
    cg_buf_free(&s->strs);
    for (size_t i = 0; i < s->nsrc; i++)
        free(s->src[i].key);
    free(s->src);
}

/* --- Writing chunks of our own ---------------------------------------------- */

static const char *finish_reason(cg_span_t stop)
{
    if (cg_span_eq(stop, "max_tokens"))
        return "length";
    if (cg_span_eq(stop, "guardrail_intervened") || cg_span_eq(stop, "content_filtered"))
        return "content_filter";
    return "stop"; /* end_turn, stop_sequence, and anything else */
}

static cg_view_usage_t usage_of(const converse_t *s)
{
    return (cg_view_usage_t){s->in_tokens, s->out_tokens, s->total_tokens};
}

static void put_usage(cg_xform_t *x, converse_t *s)
{
    if (s->usage_out || !s->usage_seen)
        return;
    s->usage_out = true;
    cg_view_usage_t u = usage_of(s);
    cg__view_usage(x, &u);
}

/* --- Citations and sources ---------------------------------------------------- */

/* The document or search result location inside `location`, and its index. */
static bool location_index(const cg_json_t *j, int loc, key_kind_t *kind, double *index)
{
    static const char *const docs[] = {"documentChar", "documentPage", "documentChunk"};
    for (int i = 0; i < 3; i++) {
        int d = cg_json_get(j, loc, docs[i]);
        if (cg_json_type(j, d) == JSMN_OBJECT &&
            (*index = cg__view_count(j, cg_json_get(j, d, "documentIndex"), -1)) >= 0) {
            *kind = KEY_DOCUMENT;
            return true;
        }
    }
    int r = cg_json_get(j, loc, "searchResultLocation");
    if (cg_json_type(j, r) == JSMN_OBJECT &&
        (*index = cg__view_count(j, cg_json_get(j, r, "searchResultIndex"), -1)) >= 0) {
        *kind = KEY_SEARCH_RESULT;
        return true;
    }
    return false;
}

/* Appends the texts of a sourceContent array. */
static void put_source_content(const cg_json_t *j, int sc, cg_buf_t *b)
{
    if (cg_json_type(j, sc) != JSMN_ARRAY)
        return;
    int n = j->tok[sc].size;
    for (int k = 0, e = sc + 1; k < n; k++, e = cg_json_skip(j, e))
        cg__view_put_field(j, cg_json_get(j, e, "text"), b);
}

/* What tells citation c's source from another; false when nothing does. */
static bool read_key(const cg_json_t *j, int c, source_t *k, cg_buf_t *b)
{
    int loc = cg_json_get(j, c, "location");
    int url = cg_json_get(j, cg_json_get(j, loc, "web"), "url");
    int source = cg_json_get(j, c, "source"), title = cg_json_get(j, c, "title");
    k->index = -1;
    b->len = 0;
    if (cg_json_is_str(j, url))
        k->kind = KEY_URL, cg__view_put_field(j, url, b);
    else if (location_index(j, loc, &k->kind, &k->index))
        ;
    else if (cg_json_is_str(j, source))
        k->kind = KEY_SOURCE, cg__view_put_field(j, source, b);
    else if (cg_json_is_str(j, title))
        k->kind = KEY_TITLE, cg__view_put_field(j, title, b);
    else
        return false;
    k->key = b->p;
    k->key_len = b->len;
    return true;
}

static source_t *find_source(converse_t *s, const source_t *k)
{
    for (size_t i = 0; i < s->nsrc; i++) {
        source_t *o = &s->src[i];
        if (o->kind != k->kind)
            continue;
        if (k->kind == KEY_DOCUMENT || k->kind == KEY_SEARCH_RESULT
                ? o->index == k->index
                : o->key_len == k->key_len &&
                      (k->key_len == 0 || memcmp(o->key, k->key, k->key_len) == 0))
            return o;
    }
    return NULL;
}

/* A new source, made of what citation c says of it: title, url, snippet. */
static unsigned new_citation(cg_xform_t *x, converse_t *s, const cg_json_t *j, int c,
                             const source_t *k)
{
    int web = cg_json_get(j, cg_json_get(j, c, "location"), "web");
    int title = cg_json_get(j, c, "title"), source = cg_json_get(j, c, "source");
    cg_buf_t *b = &s->strs;
    cg_cite_in_t in = {0};
    const char *file = NULL;
    /* The spans below point into b even when nothing was written: it must
     * have memory (kept from one citation to the next, so made once). */
    cg_buf_reserve(b, 64);
    if (k->kind == KEY_DOCUMENT && x->dreq && k->index < (double)x->dreq->ndocs) {
        in.id = x->dreq->doc_ids[(size_t)k->index];
        file = x->dreq->doc_files ? x->dreq->doc_files[(size_t)k->index] : NULL;
    }
    size_t at = b->len, n;
    if (file) /* the title Bedrock echoes is the document-K it was sent as */
        cg_buf_puts(b, file);
    else
        cg__view_put_field(j, title, b);
    if (b->len == at)
        cg__view_put_field(j, cg_json_get(j, web, "domain"), b);
    size_t t = at, tn = b->len - at;
    size_t u = b->len, un = 0;
    if (cg_json_is_str(j, cg_json_get(j, web, "url")))
        u = cg__view_decode(b, j, cg_json_get(j, web, "url"), &un);
    else if ((u = cg__view_decode(b, j, source, &n), !cg__view_absolute_url(b->p + u, n)))
        un = 0;
    else
        un = n;
    size_t sn = b->len;
    put_source_content(j, cg_json_get(j, c, "sourceContent"), b);
    in.title = cg_span(b->p + t, tn);
    in.url = cg_span(b->p + u, un);
    in.content = cg_span(b->p + sn, b->len - sn);
    return cg__xform_cite(x, &in);
}

/* The number of citation c's source, made when it is new (*fresh); 0 when
 * it names none, or the table is full. */
static unsigned source_of(cg_xform_t *x, converse_t *s, const cg_json_t *j, int c, bool *fresh)
{
    source_t k;
    *fresh = false;
    if (!read_key(j, c, &k, &s->strs))
        return 0;
    source_t *o = find_source(s, &k);
    if (o)
        return o->n;
    if (s->nsrc == CG_CITE_MAX)
        return 0;
    char *key = k.key_len ? cg_xstrndup(k.key, k.key_len) : NULL;
    size_t key_len = k.key_len;
    unsigned n = new_citation(x, s, j, c, &k);
    if (n == 0) {
        free(key);
        return 0;
    }
    s->src = cg_grow(s->src, s->nsrc, &s->src_cap, 16, sizeof(source_t));
    s->src[s->nsrc++] = (source_t){k.kind, k.index, key, key_len, n};
    /* A <source> document keeps its own text as its snippet. */
    *fresh = !(k.kind == KEY_DOCUMENT && x->dreq && k.index < (double)x->dreq->ndocs &&
               x->dreq->doc_ids[(size_t)k.index] != 0);
    return n;
}

/* Does c carry nothing but more of the previous citation's text? */
static bool continues(const cg_json_t *j, int c)
{
    return cg_json_get(j, c, "location") < 0 && cg_json_get(j, c, "title") < 0 &&
           cg_json_get(j, c, "source") < 0;
}

/* A citation of the open block (a delta's, or one of a body block's): its
 * source is numbered as it comes, so a reference the model wrote after it
 * links, and joins the block's references. */
static void block_cite(cg_xform_t *x, converse_t *s, const cg_json_t *j, int c)
{
    if (cg_json_type(j, c) != JSMN_OBJECT)
        return;
    if (continues(j, c)) {
        s->strs.len = 0;
        put_source_content(j, cg_json_get(j, c, "sourceContent"), &s->strs);
        if (s->cont)
            cg__xform_cite_more(x, s->cont, cg_span(s->strs.p, s->strs.len));
        return;
    }
    bool fresh;
    unsigned n = source_of(x, s, j, c, &fresh);
    s->cont = fresh ? n : 0;
    cg__view_refs_add(&s->block, n);
}

/* Appends one [N] per distinct source of the block to out, in the order of
 * first citation, and clears the block. */
static void put_block_refs(converse_t *s, cg_buf_t *out)
{
    cg__view_put_refs(out, s->block.n, s->block.len);
    s->block.len = 0;
    s->cont = 0;
}

/* --- Stream messages ------------------------------------------------------------ */

/* A text delta's JSON string bytes: content as they came. */
static void put_text(cg_xform_t *x, converse_t *s, cg_span_t text)
{
    cg__view_role(x, &s->started);
    if (text.n)
        cg__xform_content(x, 0, text);
}

static void on_block_delta(cg_xform_t *x, converse_t *s)
{
    const cg_json_t *j = &s->in.json;
    int delta = cg_json_get(j, 0, "delta");
    int text = cg_json_get(j, delta, "text");
    if (cg_json_is_str(j, text)) {
        put_text(x, s, cg_json_raw(j, text));
        return;
    }
    int c = cg_json_get(j, delta, "citation");
    if (c >= 0)
        block_cite(x, s, j, c);
}

static void on_block_stop(cg_xform_t *x, converse_t *s)
{
    s->cont = 0;
    if (s->block.len == 0)
        return;
    cg__view_role(x, &s->started);
    s->strs.len = 0;
    put_block_refs(s, &s->strs);
    cg__xform_content(x, 0, cg_span(s->strs.p, s->strs.len));
}

static void on_message_stop(cg_xform_t *x, converse_t *s)
{
    const cg_json_t *j = &s->in.json;
    int stop = cg_json_get(j, 0, "stopReason");
    cg__view_role(x, &s->started);
    if (s->finished)
        return;
    s->finished = true;
    cg__view_finish(x,
                    finish_reason(cg_json_is_str(j, stop) ? cg_json_raw(j, stop) : cg_span("", 0)));
}

static void read_usage(converse_t *s, int usage)
{
    const cg_json_t *j = &s->in.json;
    if (cg_json_type(j, usage) != JSMN_OBJECT)
        return;
    s->usage_seen = true;
    s->in_tokens = cg__view_count(j, cg_json_get(j, usage, "inputTokens"), 0);
    s->out_tokens = cg__view_count(j, cg_json_get(j, usage, "outputTokens"), 0);
    s->total_tokens =
        cg__view_count(j, cg_json_get(j, usage, "totalTokens"), s->in_tokens + s->out_tokens);
}

static void on_event(cg_xform_t *x, converse_t *s, cg_span_t type)
{
    if (IS(type, "contentBlockDelta")) {
        on_block_delta(x, s);
    } else if (IS(type, "contentBlockStop")) {
        on_block_stop(x, s);
    } else if (IS(type, "messageStart")) {
        cg__view_role(x, &s->started);
    } else if (IS(type, "messageStop")) {
        on_message_stop(x, s);
    } else if (IS(type, "metadata")) {
        read_usage(s, cg_json_get(&s->in.json, 0, "usage"));
        if (s->finished)
            put_usage(x, s);
    }
}

/* Bedrock names no answer id; the model is the one the path named (its
 * bytes need no escape: cg__req_read_model allowed none that do). */
static void set_meta(cg_xform_t *x, converse_t *s)
{
    if (s->meta || x->dreq == NULL || x->dreq->model.len == 0)
        return;
    s->meta = true;
    s->strs.len = 0;
    cg_buf_putc(&s->strs, '"');
    cg_buf_put(&s->strs, x->dreq->model.p, x->dreq->model.len);
    cg_buf_putc(&s->strs, '"');
    cg__xform_meta(x, cg_span(NULL, 0), cg_span(s->strs.p, s->strs.len));
}

/* --- The steady path: text deltas and block stops ------------------------------ */

/*
 * Bedrock sends nearly every text delta and block stop as
 *
 *   {"contentBlockIndex":N,"delta":{"text":"…"},"p":"…"}
 *   {"contentBlockIndex":N,"p":"…"}
 *
 * and its padding p changes length and letters from message to message, so
 * no template of the last one's bytes ever matches. These read those
 * shapes without a parse: N a whole number written plainly (0 or no
 * leading zero), the text and p well-formed JSON strings
 * (cg__view_string_len takes exactly what the parser takes), p absent or
 * last, no white space anywhere. Such a payload is one JSON object that
 * the parse takes, and on_block_delta finds in it the same text: "delta"
 * is the first member of that name and holds "text" only (on_block_stop
 * reads nothing of it). Any other payload (escaped member names, white
 * space, other members or orders) is refused and goes through the parse.
 */

/* The end of `{"contentBlockIndex":N` at the start of p[0..n), or 0. */
static size_t block_index_end(const char *p, size_t n)
{
    static const char head[] = "{\"contentBlockIndex\":";
    size_t i = sizeof(head) - 1;
    if (n <= i || memcmp(p, head, i) != 0)
        return 0;
    size_t d = i;
    i = p[i] == '0' ? i + 1 : cg__view_digits_from(p, n, i);
    return i == d ? 0 : i;
}

/* Is p[i..n) (i <= n) the object's end, `}`, or the padding and the end,
 * `,"p":"…"}`? */
static bool padded_end(const char *p, size_t n, size_t i)
{
    static const char pad[] = ",\"p\":\"";
    if (n - i == 1)
        return p[i] == '}';
    if (n - i < sizeof(pad) - 1 + 2 || memcmp(p + i, pad, sizeof(pad) - 1) != 0 || p[n - 1] != '}')
        return false;
    i += sizeof(pad) - 1;
    return cg__view_string_len(p + i, n - i) == n - i - 2;
}

#if defined(__SSE2__)
/* The 48 bytes at p: bit k of *stop is set when p[k] is '"', '\\' or a
 * byte below 0x20 (a byte that stops a plain run of a JSON string), of
 * *quote when it is '"'. */
static inline void scan48(const char *p, uint64_t *stop, uint64_t *quote)
{
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), top = _mm_set1_epi8(0x1f);
    uint64_t st = 0, qu = 0;
    for (unsigned k = 0; k < 3; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        __m128i isq = _mm_cmpeq_epi8(v, q);
        __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, top), v); /* v <= 0x1f, unsigned */
        __m128i any = _mm_or_si128(_mm_or_si128(isq, _mm_cmpeq_epi8(v, bs)), ctl);
        st |= (uint64_t)(unsigned)_mm_movemask_epi8(any) << (16 * k);
        qu |= (uint64_t)(unsigned)_mm_movemask_epi8(isq) << (16 * k);
    }
    *stop = st;
    *quote = qu;
}

/*
 * The usual text delta, found with few branches (the scans below stop at a
 * place that changes with every message, and a mispredicted branch costs
 * more than the scan): the padding, when it is plain and shorter than 41
 * bytes, is the run between the last two quotes, found from the end; the
 * text is what lies between the head and `"},"p":"` before it, which must
 * be one well-formed JSON string. True only for a payload that the scans
 * of cg__bedrock_text_delta below take with the same text; false when
 * unsure, and they decide.
 */
static bool text_delta_wide(const char *p, size_t n, cg_span_t *text)
{
    static const char head[] = "{\"contentBlockIndex\":", mid[] = ",\"delta\":{\"text\":\"",
                      before_pad[] = "\"},\"p\":\"";
    const size_t h = sizeof(head) - 1;
    if (n < h + 50 || memcmp(p, head, h) != 0 || p[n - 1] != '}' || p[n - 2] != '"')
        return false;
    /* N of one digit, or two without a leading zero; a longer one fails the
     * next compare */
    unsigned c0 = (unsigned char)p[h] - '0', c1 = (unsigned char)p[h + 1] - '0';
    if (c0 >= 10)
        return false;
    size_t ts = h + 1 + (c0 - 1 < 9 && c1 < 10);
    if (memcmp(p + ts, mid, sizeof(mid) - 1) != 0)
        return false;
    ts += sizeof(mid) - 1;
    uint64_t stop, quote;
    scan48(p + n - 50, &stop, &quote); /* the 48 bytes before the last quote */
    if (quote == 0)
        return false;
    unsigned po = 63 - (unsigned)__builtin_clzll(quote);
    if (stop >> po != 1) /* the padding holds an escape or a control byte */
        return false;
    size_t at = n - 50 + po; /* the padding's opening quote */
    if (at < ts + 7 || memcmp(p + at - 7, before_pad, sizeof(before_pad) - 1) != 0)
        return false;
    size_t te = at - 7, len = te - ts;
    if (len > 48)
        return false;
    size_t a = ts < n - 48 ? ts : n - 48;
    scan48(p + a, &stop, &quote);
    if ((stop >> (ts - a)) & ((1ull << len) - 1)) { /* an escape, or no string */
        if (cg__view_string_len(p + ts, n - ts) != len)
            return false;
    }
    *text = cg_span(p + ts, len);
    return true;
}
#endif

bool cg__bedrock_text_delta(const char *p, size_t n, cg_span_t *text)
{
    static const char mid[] = ",\"delta\":{\"text\":\"";
#if defined(__SSE2__)
    if (text_delta_wide(p, n, text))
        return true;
#endif
    size_t i = block_index_end(p, n);
    if (i == 0 || n - i < sizeof(mid) - 1 || memcmp(p + i, mid, sizeof(mid) - 1) != 0)
        return false;
    i += sizeof(mid) - 1;
    size_t t = cg__view_string_len(p + i, n - i);
    if (t > n - i)
        return false;
    *text = cg_span(p + i, t);
    i += t; /* the text's closing quote */
    return n - i >= 3 && p[i + 1] == '}' && padded_end(p, n, i + 2);
}

bool cg__bedrock_block_stop(const char *p, size_t n)
{
    size_t i = block_index_end(p, n);
    return i != 0 && padded_end(p, n, i);
}

/* The usual text delta and block stop are read without a parse; every
 * other message, and anything unusual in those, goes through it. */
static bool steady(cg_xform_t *x, converse_t *s, const cg_evs_msg_t *m)
{
    cg_span_t text;
    if (!IS(m->message_type, "event"))
        return false;
    if (IS(m->event_type, "contentBlockDelta") &&
        cg__bedrock_text_delta(m->payload.p, m->payload.n, &text)) {
        put_text(x, s, text);
        return true;
    }
    if (IS(m->event_type, "contentBlockStop") &&
        cg__bedrock_block_stop(m->payload.p, m->payload.n)) {
        on_block_stop(x, s);
        return true;
    }
    return false;
}

static void on_message(cg_xform_t *x, void *state, const cg_evs_msg_t *m)
{
    converse_t *s = state;
    if (s->over)
        return;
    set_meta(x, s);
    if (steady(x, s, m) || !cg__view_evs_event(x, &s->in, m, &s->strs, &s->over))
        return;
    on_event(x, s, m->event_type);
    cg__view_give_back(x, &s->in);
}

/* The upstream ended: after messageStop the answer is whole, and the usage
 * that came goes before the [DONE] the transformer adds. */
static void end_of_stream(cg_xform_t *x, void *state, cg_span_t pending)
{
    (void)pending;
    converse_t *s = state;
    if (s->finished && !s->over)
        put_usage(x, s);
}

/* --- Non-streaming bodies ------------------------------------------------------- */

/* Appends the texts of a citationsContent's content array. */
static void put_texts(const cg_json_t *j, int content, cg_buf_t *out)
{
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int k = 0, e = content + 1; k < n; k++, e = cg_json_skip(j, e)) {
        int text = cg_json_get(j, e, "text");
        if (cg_json_is_str(j, text))
            cg_buf_put(out, cg_json_raw(j, text).p, cg_json_raw(j, text).n);
    }
}

/* The message's content blocks: text, then a citing block's references. */
static void body_text(cg_xform_t *x, converse_t *s, int content, cg_buf_t *out)
{
    const cg_json_t *j = &s->in.json;
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int k = 0, b = content + 1; k < n; k++, b = cg_json_skip(j, b)) {
        int text = cg_json_get(j, b, "text"), cc = cg_json_get(j, b, "citationsContent");
        if (cg_json_is_str(j, text)) {
            cg_buf_put(out, cg_json_raw(j, text).p, cg_json_raw(j, text).n);
            continue;
        }
        if (cg_json_type(j, cc) != JSMN_OBJECT)
            continue;
        put_texts(j, cg_json_get(j, cc, "content"), out);
        int cites = cg_json_get(j, cc, "citations");
        s->block.len = 0;
        s->cont = 0;
        if (cg_json_type(j, cites) == JSMN_ARRAY) {
            int m = j->tok[cites].size;
            for (int q = 0, c = cites + 1; q < m; q++, c = cg_json_skip(j, c))
                block_cite(x, s, j, c);
        }
        put_block_refs(s, out);
    }
}

static int read_body(cg_xform_t *x, void *state, const char *body, size_t len, cg_buf_t *chat)
{
    converse_t *s = state;
    const cg_json_t *j = &s->in.json;
    int msg = -1;
    set_meta(x, s);
    if (cg__view_parse_bytes(x, &s->in, body, len))
        msg = cg_json_get(j, cg_json_get(j, 0, "output"), "message");
    if (cg_json_type(j, msg) != JSMN_OBJECT) {
        cg__view_give_back(x, &s->in);
        return -1;
    }
    cg__view_body_open(x, chat);
    body_text(x, s, cg_json_get(j, msg, "content"), chat);
    int stop = cg_json_get(j, 0, "stopReason");
    read_usage(s, cg_json_get(j, 0, "usage"));
    cg_view_usage_t u = usage_of(s);
    cg__view_body_end(chat, cg_json_is_str(j, stop) ? finish_reason(cg_json_raw(j, stop)) : NULL,
                      s->usage_seen ? &u : NULL);
    cg__view_give_back(x, &s->in);
    return 0;
}

/* --- The request ---------------------------------------------------------------- */

/* The documents of the request, in the order they are written: the one
 * whose index a citation names (documentIndex). */
typedef struct doc_list {
    unsigned *ids; /* a <source> document's id; 0 for a file's */
    char **files;  /* a file document's filename; NULL for a <source> one */
    size_t n, cap;
    unsigned nfiles; /* K of document-K */
} doc_list_t;

static void doc_add(doc_list_t *l, unsigned id, char *file)
{
    if (l->n == l->cap) {
        size_t cap = l->cap;
        l->ids = cg_grow(l->ids, l->n, &cap, 4, sizeof(unsigned));
        l->files = cg_xrealloc(l->files, cap * sizeof(char *));
        l->cap = cap;
    }
    l->ids[l->n] = id;
    l->files[l->n++] = file;
}

static void put_source_documents(cg_buf_t *o, const cg_req_docs_t *d, doc_list_t *l)
{
    for (size_t i = 0; i < d->n; i++) {
        cg__req_sep(o);
        cg_buf_printf(o, "{\"document\":{\"name\":\"source-%u\",\"format\":\"txt\",\"source\":"
                         "{\"text\":",
                      d->v[i]->id);
        cg_json_put_cstr(o, d->v[i]->content);
        cg_buf_puts(o, "},\"citations\":{\"enabled\":true}}}");
        doc_add(l, d->v[i]->id, NULL);
    }
}

/* A user message's file parts (checked by the shared reader), in order. */
static void put_file_documents(cg_chatreq_t *c, int msg, doc_list_t *l)
{
    const cg_json_t *j = c->j;
    int content = cg_json_get(j, msg, "content");
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int q = 0, i = content + 1; q < n; q++, i = cg_json_skip(j, i)) {
        cg_req_file_t f = {0};
        if (!cg__view_is(j, cg_json_get(j, i, "type"), "file") || cg__req_file(c, i, &f) != 0) {
            free(f.name);
            continue;
        }
        cg__req_sep(c->out);
        cg_buf_printf(c->out, "{\"document\":{\"name\":\"document-%u\",\"format\":\"%s\","
                              "\"source\":{\"bytes\":\"",
                      ++l->nfiles, f.format);
        cg_buf_put(c->out, f.bytes.p, f.bytes.n);
        cg_buf_puts(c->out, "\"},\"citations\":{\"enabled\":true}}}");
        doc_add(l, 0, f.name);
    }
}

/* User and assistant messages, a turn per run of one role; a message with
 * no block is as if absent. A user message's documents go before its
 * text: the request's <source> tags in the last one, then its own files. */
static void put_messages(cg_chatreq_t *c, const cg_req_docs_t *d, doc_list_t *l)
{
    cg_buf_t *o = c->out;
    cg__req_key(o, "messages");
    cg_buf_putc(o, '[');
    cg_req_role_t open = CG_ROLE_OTHER;
    int n, i = cg__req_messages(c, &n);
    for (int k = 0; k < n; k++, i = cg_json_skip(c->j, i)) {
        cg_req_role_t role = cg__req_role(c, i);
        if (role != CG_ROLE_USER && role != CG_ROLE_ASSISTANT)
            continue;
        size_t mark = o->len;
        if (role != open) {
            if (open != CG_ROLE_OTHER)
                cg_buf_puts(o, "]}");
            cg__req_sep(o);
            cg_buf_puts(o, role == CG_ROLE_USER ? "{\"role\":\"user\",\"content\":["
                                                : "{\"role\":\"assistant\",\"content\":[");
        }
        size_t blocks = o->len;
        if (i == c->last_user)
            put_source_documents(o, d, l);
        if (role == CG_ROLE_USER)
            put_file_documents(c, i, l);
        cg__req_put_text_block(c, i, "{\"text\":\"", "\"}"); /* left out when empty */
        if (o->len == blocks)
            o->len = mark;
        else
            open = role;
    }
    if (open != CG_ROLE_OTHER)
        cg_buf_puts(o, "]}");
    cg_buf_putc(o, ']');
}

/* The answer side maps a documentIndex through these. */
static void keep_documents(cg_chatreq_t *c, doc_list_t *l)
{
    cg_dialect_req_t *r = c->dreq;
    free(r->doc_ids);
    r->doc_ids = l->n ? l->ids : NULL;
    r->doc_files = l->nfiles ? l->files : NULL;
    r->ndocs = l->n;
    if (l->n == 0)
        free(l->ids);
    if (l->nfiles == 0)
        free(l->files);
}

static int converse_request(cg_chatreq_t *c, cg_dialect_err_t *err)
{
    if (cg__req_check_stop(c, err) != 0 ||
        cg__req_read_model(c, err, ":/",
                           "a model id, inference profile or ARN of A-Z, a-z, 0-9, '.', '_', "
                           "'-', ':' and '/'") != 0)
        return -1;
    cg_req_docs_t d;
    cg__req_find_documents(c, &d, true);
    doc_list_t l = {0};
    cg_buf_t *o = c->out;
    cg_buf_putc(o, '{');
    put_messages(c, &d, &l);
    keep_documents(c, &l);
    cg__req_put_system(c, "\"system\":[{\"text\":\"", "\"}]");
    cg__req_put_sampling(c, "inferenceConfig", "maxTokens");
    if (c->in->tool_config) {
        cg__req_key(o, "toolConfig");
        cg_buf_puts(o, c->in->tool_config);
    }
    cg_buf_putc(o, '}');
    cg__req_docs_free(&d);
    return 0;
}

/* The model as one path segment: `:` and `/` percent-encoded. */
static void converse_path(const cg_dialect_req_t *r, cg_buf_t *out)
{
    cg_buf_puts(out, "/model/");
    for (size_t i = 0; i < r->model.len; i++) {
        char ch = r->model.p[i];
        if (ch == ':')
            cg_buf_puts(out, "%3A");
        else if (ch == '/')
            cg_buf_puts(out, "%2F");
        else
            cg_buf_putc(out, ch);
    }
    cg_buf_puts(out, r->stream ? "/converse-stream" : "/converse");
}

/* The client's Authorization (a Bedrock API key) goes as it came; api-key
 * becomes Authorization (cg__req_bearer_key). With AWS keys configured the
 * shell signs the request and drops both. */
static bool forwards_field(cg_span_t name)
{
    return !cg__req_field_is(name, "api-key");
}

/* The event stream's messages come to on_message: no `event` hook. */
static const cg_dialect_view_t converse_view = {
    .message = on_message,
    .end = end_of_stream,
    .body = read_body,
    .state_size = sizeof(converse_t),
    .state_free = converse_free,
};

const cg_dialect_t cg__dialect_bedrock = {
    .name = "bedrock",
    .file_parts = true,
    .request = converse_request,
    .path = converse_path,
    .forwards = forwards_field,
    .headers = cg__req_bearer_key,
    .view = &converse_view,
    .aws_service = "bedrock",
};
