/*
 * Dialect `bedrock-kb` (SPEC §6a): Amazon Bedrock Knowledge Bases,
 * RetrieveAndGenerate, AWS's own "On Your Data".
 *
 * Request: POST {base}/retrieveAndGenerateStream when the client streams,
 * else {base}/retrieveAndGenerate. The body is {input:{text},
 * retrieveAndGenerateConfiguration, sessionId?} and nothing else: text =
 * the last user message's text (none, or an empty one, is refused: Knowledge
 * Bases take no empty input), the configuration = CITEGATE_BEDROCK_KB as
 * it is, sessionId = the client's X-Bedrock-Session-Id when it sent one
 * (the conversation lives upstream under it). Knowledge Bases take no API key:
 * the shell always signs (SigV4, service bedrock), and citegate does not
 * start without AWS keys and CITEGATE_BEDROCK_KB. The answer's
 * x-amzn-bedrock-knowledge-base-session-id goes back to the client as
 * X-Bedrock-Session-Id.
 *
 * Answer, streamed: AWS's event stream, read by the transformer; this view
 * gets each decoded message. `output` gives the role chunk once and its
 * text as content (the upstream's JSON string bytes as they came);
 * `citation` the references [N] of its retrieved references' sources, in
 * order, a source once per event, as content when the event comes (text
 * is never held, and a citation follows the text it cites); `guardrail`
 * with action INTERVENED makes the finish content_filter. The end of the
 * body (closed normally) at a message boundary is the normal end: the
 * finish (stop, or content_filter), then the transformer's [DONE]; a body
 * cut inside a message, one that brought no event, or a connection that
 * failed or went idle ends as truncated. Exceptions and
 * error messages as for bedrock (view.c).
 *
 * Not streamed: output.text with each citation's references inserted after
 * the character (code point) at its generatedResponsePart span.end, which
 * is inclusive, so at end + 1; citations ending at one point in their
 * order; an end past the text, negative, not a whole number or absent puts
 * them at the end of the text; guardrailAction INTERVENED → content_filter.
 *
 * A citation is {generatedResponsePart, retrievedReferences}; the
 * deprecated nested `citation` member is read when neither is there. Each
 * retrieved reference is a source keyed by its location: s3Location.uri,
 * webLocation.url, confluenceLocation.url, salesforceLocation.url,
 * sharePointLocation.url, kendraDocumentLocation.uri or
 * customDocumentLocation.id (a reference with none of them is left out),
 * numbered in the order first cited. url = the location when it is an
 * absolute http(s) URL (an s3:// one names a title, never a link); title =
 * metadata x-amz-bedrock-kb-title, else title, else SPEC §7's fallback on
 * the location; snippet = its first reference's content.text; metadata
 * x-amz-bedrock-kb-chunk-id and x-amz-bedrock-kb-document-page-number
 * are the citation's chunk_id and page.
 *
 * An `output` payload of the shape Knowledge Bases sends, {"text":"…"}, is
 * read without a parse (cg__bedrock_kb_output); any other goes through it.
 *
 * State per stream, bounded: at most CG_CITE_MAX sources (keys kept to
 * CG_CITE_MAX_FIELD bytes, in one buffer that doubles when full), at
 * most CG_VIEW_BLOCK_REFS distinct sources referenced per citation; a
 * body's decoded text and one place per citation while it is read; tokens
 * are borrowed from the call.
 */
#include "chatreq.h"
#include "view.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a retrieved reference's location keeps its key, in the order
 * they are looked for. */
static const struct {
    const char *location, *member;
} keys[] = {
    {"s3Location", "uri"},
    {"webLocation", "url"},
    {"confluenceLocation", "url"},
    {"salesforceLocation", "url"},
    {"sharePointLocation", "url"},
    {"kendraDocumentLocation", "uri"},
    {"customDocumentLocation", "id"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

typedef struct source {
    size_t kind; /* index into keys */
    size_t key;  /* where its key starts in kb_t.keys: decoded, at most CG_CITE_MAX_FIELD bytes */
    size_t key_len;
    unsigned n;
} source_t;

/* The sources' keys share one buffer, made with the first source at
 * KEYS_FIRST bytes (a location is some 40 to 120 bytes: room for 16 to 50
 * of them), doubled when full: a new source copies its key without an
 * allocation of its own. */
#define KEYS_FIRST 2048

/* A body's citation: where its references go, and which they are. */
#define AT_END UINT64_MAX
typedef struct place {
    uint64_t at; /* code point index in the text, or AT_END */
    size_t order;
    size_t first, n; /* into kb_t.nums */
} place_t;

typedef struct kb {
    cg_view_json_t in; /* the message's payload or body being read */
    cg_buf_t strs;     /* decoded strings of one reference, the references written */

    source_t *src;
    size_t nsrc, src_cap;
    cg_buf_t keys;        /* the sources' keys, one after another */
    cg_view_refs_t cited; /* one citation's distinct sources */

    bool started, any, intervened, over;

    /* A body: its decoded text, its citations' places and numbers. */
    cg_buf_t text;
    place_t *pl;
    size_t npl, pl_cap;
    unsigned *nums;
    size_t nnums, nums_cap;
} kb_t;

static void kb_free(void *p)
{
    kb_t *s = p;
    cg__view_json_free(&s->in);
    cg_buf_free(&s->strs);
    cg_buf_free(&s->text);
    cg_buf_free(&s->keys);
    free(s->src);
    free(s->pl);
    free(s->nums);
}

/* --- Sources ------------------------------------------------------------------- */

/* The token of reference r's key and its kind; -1 when it has none (or an
 * empty one). */
static int key_of(const cg_json_t *j, int r, size_t *kind)
{
    int loc = cg_json_get(j, r, "location");
    for (size_t k = 0; k < NKEYS; k++) {
        int t = cg_json_get(j, cg_json_get(j, loc, keys[k].location), keys[k].member);
        if (cg_json_is_str(j, t) && cg_json_raw(j, t).n > 0) {
            *kind = k;
            return t;
        }
    }
    return -1;
}

static const source_t *find_source(const kb_t *s, size_t kind, const char *key, size_t n)
{
    for (size_t i = 0; i < s->nsrc; i++)
        if (s->src[i].kind == kind && s->src[i].key_len == n &&
            memcmp(s->keys.p + s->src[i].key, key, n) == 0)
            return &s->src[i];
    return NULL;
}

/* Metadata member `name` of reference r, decoded, appended to b. */
static size_t put_meta(const cg_json_t *j, int meta, const char *name, cg_buf_t *b, size_t *len)
{
    size_t at = b->len;
    cg__view_put_field(j, cg_json_get(j, meta, name), b);
    *len = b->len - at;
    return at;
}

/* A page number: a whole number, or a string of one. */
static size_t put_page(const cg_json_t *j, int meta, cg_buf_t *b, size_t *len)
{
    int t = cg_json_get(j, meta, "x-amz-bedrock-kb-document-page-number");
    double v = cg__view_count(j, t, -1);
    if (v < 0)
        return put_meta(j, meta, "x-amz-bedrock-kb-document-page-number", b, len);
    size_t at = b->len;
    cg_buf_printf(b, "%.0f", v);
    *len = b->len - at;
    return at;
}

/* A new source made of reference r (key in s->strs[0..key_len)). */
static unsigned new_source(cg_xform_t *x, kb_t *s, const cg_json_t *j, int r, size_t key_len)
{
    cg_buf_t *b = &s->strs;
    int meta = cg_json_get(j, r, "metadata");
    size_t tn, cn, kn, pn;
    size_t t = put_meta(j, meta, "x-amz-bedrock-kb-title", b, &tn);
    if (tn == 0)
        t = put_meta(j, meta, "title", b, &tn);
    size_t c = cg__view_decode(b, j, cg_json_get(j, cg_json_get(j, r, "content"), "text"), &cn);
    size_t k = put_meta(j, meta, "x-amz-bedrock-kb-chunk-id", b, &kn);
    size_t p = put_page(j, meta, b, &pn);
    cg_cite_in_t in = {0};
    in.url = cg_span(b->p, key_len); /* a link only when absolute http(s) */
    in.title = cg_span(b->p + t, tn);
    in.content = cg_span(b->p + c, cn);
    in.chunk_id = cg_span(b->p + k, kn);
    in.page = cg_span(b->p + p, pn);
    return cg__xform_cite(x, &in);
}

/* The number of reference r's source, made when it is new; 0 when it has
 * no key, or the table is full. */
static unsigned source_of(cg_xform_t *x, kb_t *s, const cg_json_t *j, int r)
{
    size_t kind;
    int tok = key_of(j, r, &kind);
    if (tok < 0)
        return 0;
    cg_buf_t *b = &s->strs;
    b->len = 0;
    cg__view_put_field(j, tok, b);
    const source_t *o = find_source(s, kind, b->p, b->len);
    if (o)
        return o->n;
    if (s->nsrc == CG_CITE_MAX)
        return 0;
    size_t key_len = b->len;
    unsigned n = new_source(x, s, j, r, key_len);
    if (n == 0)
        return 0;
    s->src = cg_grow(s->src, s->nsrc, &s->src_cap, 16, sizeof(source_t));
    if (s->keys.cap == 0)
        cg_buf_reserve(&s->keys, KEYS_FIRST);
    size_t at = s->keys.len;
    cg_buf_put(&s->keys, b->p, key_len);
    s->src[s->nsrc++] = (source_t){kind, at, key_len, n};
    return n;
}

/* The citation object itself: c, or its deprecated nested form when c has
 * neither of the members. */
static int citation_of(const cg_json_t *j, int c)
{
    int nested = cg_json_get(j, c, "citation");
    if (cg_json_get(j, c, "generatedResponsePart") < 0 &&
        cg_json_get(j, c, "retrievedReferences") < 0 && cg_json_type(j, nested) == JSMN_OBJECT)
        return nested;
    return c;
}

/* The distinct sources citation c cites, in order, into s->cited. */
static void read_citation(cg_xform_t *x, kb_t *s, const cg_json_t *j, int c)
{
    int refs = cg_json_get(j, c, "retrievedReferences");
    s->cited.len = 0;
    if (cg_json_type(j, refs) != JSMN_ARRAY)
        return;
    int n = j->tok[refs].size;
    for (int k = 0, r = refs + 1; k < n; k++, r = cg_json_skip(j, r))
        if (cg_json_type(j, r) == JSMN_OBJECT)
            cg__view_refs_add(&s->cited, source_of(x, s, j, r));
}

/* --- Stream messages ------------------------------------------------------------ */

static void on_output(cg_xform_t *x, kb_t *s)
{
    const cg_json_t *j = &s->in.json;
    int text = cg_json_get(j, 0, "text");
    cg__view_role(x, &s->started);
    if (cg_json_is_str(j, text) && cg_json_raw(j, text).n)
        cg__xform_content(x, 0, cg_json_raw(j, text));
}

/* The references of citation object c as content, when it cites any. */
static void on_citation(cg_xform_t *x, kb_t *s, int c)
{
    const cg_json_t *j = &s->in.json;
    read_citation(x, s, j, c);
    if (s->cited.len == 0)
        return;
    cg__view_role(x, &s->started);
    s->strs.len = 0;
    cg__view_put_refs(&s->strs, s->cited.n, s->cited.len);
    cg__xform_content(x, 0, cg_span(s->strs.p, s->strs.len));
}

static bool intervened(const cg_json_t *j, int action)
{
    return cg__view_is(j, action, "INTERVENED");
}

/* --- The steady path: output text ----------------------------------------------- */

/*
 * Knowledge Bases sends every `output` payload as {"text":"…"}. This reads
 * that shape without a parse: the text one well-formed JSON string
 * (cg__view_string_len takes exactly what the parser takes), nothing
 * before, after or between, no white space. Such a payload is a JSON object
 * that the parse takes, and on_output finds the same text in it (its only
 * member). Anything else (other or repeated members, escaped names, white
 * space, a NUL, a cut) goes through the parse. Not static: the tests hold
 * it to the parse (view.h).
 */
bool cg__bedrock_kb_output(const char *p, size_t n, cg_span_t *text)
{
    static const char head[] = "{\"text\":\"";
    const size_t h = sizeof(head) - 1;
    if (n < h + 2 || memcmp(p, head, h) != 0 || p[n - 1] != '}' || p[n - 2] != '"')
        return false;
    size_t len = n - h - 2; /* the closing quote is p[n - 2]: the first one, unescaped */
    if (cg__view_string_len(p + h, len + 1) != len)
        return false;
    *text = cg_span(p + h, len);
    return true;
}

/* --- Citation events: the nested copy -------------------------------------------- */

/*
 * Knowledge Bases sends each citation twice in one event: its members at
 * the top level and again in the deprecated nested `citation`, byte for
 * byte, the nested copy first or last: {"citation":{X},X} or
 * {X,"citation":{X}}. Then the nested object {X} alone says all the view
 * reads of the whole, and only it is parsed: half the bytes. The top
 * level's members are X's and `citation`, so citation_of picks {X} (first)
 * or what it picks in {X} (last: X's own members come before the copy).
 * The verdict stays the whole's: X is found by length and must be the same
 * bytes twice; the whole parses exactly when {X} does (X then holds one or
 * more members), unless it nests too deep or has too many tokens, which
 * the checks here and in on_nested_citation rule out. Declared in view.h
 * for the tests that hold it to the parse of the whole.
 */
enum { NESTED_NONE, NESTED_FIRST, NESTED_LAST };

#define NESTED_KEY "\"citation\":{"

int cg__bedrock_kb_nested(const char *p, size_t n, cg_span_t *half)
{
    const size_t k = sizeof(NESTED_KEY) - 1;
    if (n < k + 6 || (n - k - 4) % 2 != 0)
        return NESTED_NONE;
    size_t x = (n - k - 4) / 2; /* {, X twice, the key, two braces and a comma */
    int at = NESTED_NONE;
    if (p[0] == '{' && memcmp(p + 1, NESTED_KEY, k) == 0 && p[k + 1 + x] == '}' &&
        p[k + 2 + x] == ',' && p[n - 1] == '}' && memcmp(p + k + 1, p + k + 3 + x, x) == 0)
        at = NESTED_FIRST; /* {"citation":{ X }, X } */
    else if (p[0] == '{' && p[1 + x] == ',' && memcmp(p + 2 + x, NESTED_KEY, k) == 0 &&
             p[n - 2] == '}' && p[n - 1] == '}' && memcmp(p + 1, p + k + 2 + x, x) == 0)
        at = NESTED_LAST; /* { X ,"citation":{ X }} */
    if (at == NESTED_NONE)
        return NESTED_NONE;
    cg_span_t obj = cg_span(at == NESTED_FIRST ? p + k : p + k + 1 + x, x + 2);
    if (cg_json_opens(obj.p, obj.n) + 1 > CG_JSON_MAX_DEPTH)
        return NESTED_NONE; /* the whole nests one level deeper than {X} */
    *half = obj;
    return at;
}

/* A citation event read from its nested copy; false when it has none the
 * view can use, and the whole is to be read. */
static bool on_nested_citation(cg_xform_t *x, kb_t *s, const cg_evs_msg_t *m)
{
    cg_span_t half;
    int at;
    if (s->over || !cg_span_eq(m->message_type, "event") ||
        !cg_span_eq(m->event_type, "citation") ||
        (at = cg__bedrock_kb_nested(m->payload.p, m->payload.n, &half)) == NESTED_NONE)
        return false;
    bool parsed = cg__view_parse_bytes(x, &s->in, half.p, half.n);
    /* The whole has the top object, the key and {X}'s tokens twice. */
    bool fits = parsed && 2 * (unsigned)s->in.json.ntok + 1 <= s->in.json.max;
    if (fits) {
        s->any = true;
        on_citation(x, s, at == NESTED_FIRST ? 0 : citation_of(&s->in.json, 0));
    }
    cg__view_give_back(x, &s->in);
    return fits;
}

static void on_message(cg_xform_t *x, void *state, const cg_evs_msg_t *m)
{
    kb_t *s = state;
    cg_span_t text;
    if (!s->over && cg_span_eq(m->message_type, "event") && cg_span_eq(m->event_type, "output") &&
        cg__bedrock_kb_output(m->payload.p, m->payload.n, &text)) {
        s->any = true; /* on_output's reading, without the parse */
        cg__view_role(x, &s->started);
        if (text.n)
            cg__xform_content(x, 0, text);
        return;
    }
    if (on_nested_citation(x, s, m))
        return;
    if (!cg__view_evs_event(x, &s->in, m, &s->strs, &s->over))
        return;
    s->any = true;
    if (cg_span_eq(m->event_type, "output"))
        on_output(x, s);
    else if (cg_span_eq(m->event_type, "citation"))
        on_citation(x, s, citation_of(&s->in.json, 0));
    else if (cg_span_eq(m->event_type, "guardrail"))
        s->intervened |= intervened(&s->in.json, cg_json_get(&s->in.json, 0, "action"));
    cg__view_give_back(x, &s->in);
}

/* The end of the body (the upstream closed it normally) at a message
 * boundary, after events: the answer is whole. Else the transformer ends
 * it as truncated. */
static void end_of_stream(cg_xform_t *x, void *state, cg_span_t pending)
{
    (void)pending;
    kb_t *s = state;
    if (s->over || !s->any || x->end_why != CG_END_EOF ||
        (x->dv->evs && cg_evs_pending(x->dv->evs) > 0))
        return;
    cg__view_role(x, &s->started);
    cg__view_finish(x, s->intervened ? "content_filter" : "stop");
}

/* --- Non-streaming bodies ------------------------------------------------------- */

/* Where citation c's references go: the code point after span.end. */
static uint64_t place_at(const cg_json_t *j, int c)
{
    int part = cg_json_get(j, cg_json_get(j, c, "generatedResponsePart"), "textResponsePart");
    double end = cg__view_count(j, cg_json_get(j, cg_json_get(j, part, "span"), "end"), -1);
    return end < 0 ? AT_END : (uint64_t)end + 1;
}

static void add_place(kb_t *s, uint64_t at)
{
    s->pl = cg_grow(s->pl, s->npl, &s->pl_cap, 16, sizeof(place_t));
    s->pl[s->npl] = (place_t){at, s->npl, s->nnums, s->cited.len};
    s->npl++;
    for (size_t i = 0; i < s->cited.len; i++) {
        s->nums = cg_grow(s->nums, s->nnums, &s->nums_cap, 16, sizeof(unsigned));
        s->nums[s->nnums++] = s->cited.n[i];
    }
}

static int by_place(const void *a, const void *b)
{
    const place_t *p = a, *q = b;
    if (p->at != q->at)
        return p->at < q->at ? -1 : 1;
    return (p->order > q->order) - (p->order < q->order);
}

/* Reads the citations: their sources numbered in array order, their
 * places sorted by where they go. */
static void read_citations(cg_xform_t *x, kb_t *s, const cg_json_t *j, int cites)
{
    s->npl = s->nnums = 0;
    if (cg_json_type(j, cites) != JSMN_ARRAY)
        return;
    int n = j->tok[cites].size;
    for (int k = 0, c = cites + 1; k < n; k++, c = cg_json_skip(j, c)) {
        if (cg_json_type(j, c) != JSMN_OBJECT)
            continue;
        int cit = citation_of(j, c);
        read_citation(x, s, j, cit);
        if (s->cited.len)
            add_place(s, place_at(j, cit));
    }
    /* Past the text is at its end, one point with the text's last one. */
    uint64_t chars = 0;
    for (size_t i = 0; i < s->text.len; i++)
        chars += ((unsigned char)s->text.p[i] & 0xC0) != 0x80;
    for (size_t k = 0; k < s->npl; k++)
        if (s->pl[k].at > chars)
            s->pl[k].at = chars;
    if (s->npl > 1)
        qsort(s->pl, s->npl, sizeof(place_t), by_place);
}

/* Where code point `cp` of the text starts, from byte `at`, code point
 * *cur on (the text's end when it has fewer). */
static size_t advance(const cg_buf_t *t, size_t at, uint64_t *cur, uint64_t cp)
{
    while (at < t->len && *cur < cp) {
        at++;
        while (at < t->len && ((unsigned char)t->p[at] & 0xC0) == 0x80)
            at++;
        (*cur)++;
    }
    return at;
}

/* The body's text with each citation's references after its span's end,
 * JSON-escaped. */
static void put_cited_text(kb_t *s, cg_buf_t *chat)
{
    size_t from = 0;
    uint64_t cur = 0;
    for (size_t k = 0; k < s->npl; k++) {
        const place_t *p = &s->pl[k];
        size_t to = advance(&s->text, from, &cur, p->at);
        cg_json_put_escaped(chat, s->text.p + from, to - from);
        from = to;
        cg__view_put_refs(chat, s->nums + p->first, p->n);
    }
    cg_json_put_escaped(chat, s->text.p + from, s->text.len - from);
}

static int read_body(cg_xform_t *x, void *state, const char *body, size_t len, cg_buf_t *chat)
{
    kb_t *s = state;
    const cg_json_t *j = &s->in.json;
    int text = -1;
    if (cg__view_parse_bytes(x, &s->in, body, len))
        text = cg_json_get(j, cg_json_get(j, 0, "output"), "text");
    if (!cg_json_is_str(j, text)) {
        cg__view_give_back(x, &s->in);
        return -1;
    }
    size_t n;
    s->text.len = 0;
    cg__view_decode(&s->text, j, text, &n);
    read_citations(x, s, j, cg_json_get(j, 0, "citations"));
    cg__view_body_open(x, chat);
    put_cited_text(s, chat);
    cg__view_body_end(
        chat, intervened(j, cg_json_get(j, 0, "guardrailAction")) ? "content_filter" : "stop",
        NULL);
    cg__view_give_back(x, &s->in);
    return 0;
}

/* --- The request ---------------------------------------------------------------- */

#define SESSION_FIELD "x-bedrock-session-id"

static int kb_request(cg_chatreq_t *c, cg_dialect_err_t *err)
{
    if (c->last_user < 0)
        return cg__req_fail(err, "missing_required_parameter", "messages",
                            "messages must hold a user message: its text is the question");
    cg_buf_t *o = c->out;
    cg_buf_puts(o, "{\"input\":{\"text\":\"");
    size_t text = o->len;
    cg__req_put_content_text(c, c->last_user);
    /* Knowledge Bases refuse an empty input text (its minimum length is 1):
     * the client is better told why here than by the upstream. */
    if (o->len == text)
        return cg__req_fail(err, "missing_required_parameter", "messages",
                            "the last user message of messages has no text: it is the question");
    cg_buf_puts(o, "\"}");
    if (c->in->kb_config) {
        cg__req_key(o, "retrieveAndGenerateConfiguration");
        cg_buf_puts(o, c->in->kb_config);
    }
    cg_span_t session =
        c->in->client ? c->in->client->get(c->in->client->ctx, SESSION_FIELD) : cg_span(NULL, 0);
    if (session.n) {
        cg__req_key(o, "sessionId");
        cg_json_put_str(o, session.p, session.n);
    }
    cg_buf_putc(o, '}');
    return 0;
}

static void kb_path(const cg_dialect_req_t *r, cg_buf_t *out)
{
    cg_buf_puts(out, r->stream ? "/retrieveAndGenerateStream" : "/retrieveAndGenerate");
}

/* The session goes in the body; keys are AWS's alone. */
static bool forwards_field(cg_span_t name)
{
    return !cg__req_field_is(name, "api-key") && !cg__req_field_is(name, SESSION_FIELD);
}

static void answer_fields(const cg_dialect_hdrs_t *h)
{
    cg_span_t v = h->get(h->ctx, "x-amzn-bedrock-knowledge-base-session-id");
    if (v.n)
        h->add(h->ctx, CG_SPAN_LIT("X-Bedrock-Session-Id"), v);
}

/* A citation event carries its references' chunks twice (again in the
 * deprecated nested `citation`): three to five chunks of the default 300
 * tokens make some 8 to 14 KiB, and the event-stream reader's buffer for
 * a message that straddles reads is made to hold one. */
#define KB_MESSAGE_SIZE 16384

/* The event stream's messages come to on_message: no `event` hook. */
static const cg_dialect_view_t kb_view = {
    .message = on_message,
    .message_size = KB_MESSAGE_SIZE,
    .end = end_of_stream,
    .body = read_body,
    .state_size = sizeof(kb_t),
    .state_free = kb_free,
};

const cg_dialect_t cg__dialect_bedrock_kb = {
    .name = "bedrock-kb",
    .request = kb_request,
    .path = kb_path,
    .forwards = forwards_field,
    .view = &kb_view,
    .aws_service = "bedrock",
    .aws_keys_required = true,
    .kb_config_required = true,
    .answer_headers = answer_fields,
};
