/*
 * Dialect `cohere` (SPEC §6a): Cohere's v2 Chat API.
 *
 * Request: POST {base}/v2/chat. Keys: the client's Authorization: Bearer
 * goes as it came, and a client api-key goes as Authorization: Bearer. The
 * body: model; messages in order (system and developer messages as
 * {role:"system",content}, empty ones left out; user and assistant ones as
 * {role,content:TEXT}); stream; max_tokens (max_completion_tokens, else
 * max_tokens); temperature; p (top_p); stop_sequences (stop, a string
 * becoming a one-element list); each request-side <source> with text, in id
 * order, as a document {id:"N",data:{title,snippet,url?}}, so that Cohere's
 * citations name it by N; citation_options:{mode} from
 * CITEGATE_COHERE_CITATIONS (none when it is off). Nothing else.
 *
 * Answer, streamed: SSE with event: lines; each data object names its
 * `type`. message-start gives the id and the role chunk; a content-delta's
 * delta.message.content.text a content chunk of the upstream's JSON string
 * bytes as they came (a `thinking` member is not content); a citation-start
 * a citation (delta.message.citations is one object), whose references
 * [N] (its distinct sources, in order) go out as content at once, after the
 * text received so far; message-end the finish (COMPLETE, STOP_SEQUENCE,
 * TOOL_CALL stop; MAX_TOKENS length; ERROR_TOXIC content_filter; anything
 * else stop), the usage chunk when the client asked, and [DONE], or, with
 * ERROR, SPEC §6's error event with code "ERROR". Other events are dropped
 * (those whose data's first member names their type, as Cohere writes
 * them, without a parse); data that is not a JSON object is counted
 * malformed and dropped; a comment becomes `: ping`.
 *
 * Not streamed: message.content[]'s text items are the text,
 * message.citations[] its citations, whose references are inserted at each
 * citation's end (several at one place in their order); finish_reason and
 * usage as above, ERROR the error body.
 *
 * A citation cites when its type is TEXT_CONTENT or absent, its start and
 * end are whole numbers with start <= end, and end is within the text: in a
 * stream, the text received so far (Cohere sends a citation after the text
 * it cites, in fast and accurate mode alike); in a body, the whole text.
 * Offsets count characters (code points), end exclusive. Any other citation
 * is ignored: nothing of it goes out and no text moves.
 *
 * Sources: {type:"document",id,document} and {type:"tool",id,tool_output},
 * keyed by id (a source without a string id is ignored). A document made of
 * the request's <source id="N"> (id "N") is that source; any other source
 * gets the next number after every number used so far, with title = the
 * document's (or tool output's) title, else SPEC §7's fallback; url = its
 * url when absolute http(s); snippet = its snippet, else its text, else the
 * citation's text.
 *
 * The steady path (one content-delta after another) allocates nothing: an
 * event whose bytes match the last content-delta's around its text is read
 * without a parse, and its text goes to the transformer as content
 * (cg__xform_content); its characters are counted on the raw bytes.
 *
 * A citation-start is read without a parse when its data has the one shape
 * Cohere sends (fast_citation: no white space, its members in Cohere's
 * order, start and end in plain digits) and every source in it is, byte for
 * byte, a source object an earlier citation of the stream brought and the
 * parse read (its raw bytes are kept with its id). Such a source's number
 * is its id's, and nothing else of it is read again; the rest of the event
 * is checked as the parse checks it. Any other event goes through the
 * parse.
 *
 * State per stream, bounded: at most CG_CITE_MAX sources (their ids kept to
 * CG_CITE_MAX_FIELD bytes, their raw objects when at most CO_RAW_MAX bytes;
 * further sources are not cited), at most
 * CG_VIEW_BLOCK_REFS distinct sources referenced per citation, a
 * content-delta template of at most CG_VIEW_TPL_MAX bytes, the decoded strings of
 * one citation; a body's decoded text and its citations' places while it
 * is read. Tokens are borrowed from the call while an event is read.
 */
#include "chatreq.h"
#include "view.h"

#include <stdlib.h>
#include <string.h>

typedef struct source {
    char *id; /* decoded, at most CG_CITE_MAX_FIELD bytes */
    size_t id_len;
    unsigned n;
    /* The source object as the citation that brought it wrote it (in the
     * same allocation as id), or raw_len 0: too large, or nested deeper
     * than CO_RAW_DEPTH. */
    const char *raw;
    size_t raw_len;
} source_t;

#define CO_RAW_MAX      4096 /* bytes of a source object kept for fast_citation */
#define CO_RAW_DEPTH    8    /* objects and arrays a kept source object nests, itself included */
#define CO_FAST_SOURCES 16   /* sources of a citation fast_citation reads, at most */

/* A body's citation that counts: its references go at `end` (a character
 * offset), refs[off, off + len) of the body's reference text. */
typedef struct place {
    uint64_t end;
    size_t order, off, len;
} place_t;

typedef struct co {
    cg_view_json_t in; /* the upstream event or body being read */
    cg_buf_t strs;     /* decoded strings of one source; a citation's references */

    cg_view_tpl_t tpl; /* a content-delta's data around its text */

    source_t *src;
    size_t nsrc, src_cap;

    uint64_t chars; /* characters of text so far */

    bool started, over;

    cg_buf_t refs; /* a streamed citation's references; a body's, of every citation */
    /* A body: its decoded text and the places of its citations. */
    cg_buf_t text;
    place_t *place;
    size_t nplace, place_cap;
} co_t;

static void co_free(void *p)
{
    co_t *s = p;
    cg__view_json_free(&s->in);
    cg_buf_free(&s->strs);
    cg_buf_free(&s->tpl.bytes);
    cg_buf_free(&s->text);
    cg_buf_free(&s->refs);
    for (size_t i = 0; i < s->nsrc; i++)
        free(s->src[i].id);
    free(s->src);
    free(s->place);
}

static bool is_object(const cg_json_t *j, int tok)
{
    return cg_json_type(j, tok) == JSMN_OBJECT;
}

/* --- Characters --------------------------------------------------------------- */

/* The characters of UTF-8 bytes p[0..n): the bytes that begin one. */
static uint64_t utf8_chars(const char *p, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

/* The characters of JSON string bytes raw: counted as they are when they
 * hold no escape, else once decoded (into s->strs). */
static uint64_t string_chars(co_t *s, cg_span_t raw)
{
    if (memchr(raw.p, '\\', raw.n) == NULL)
        return utf8_chars(raw.p, raw.n);
    s->strs.len = 0;
    size_t at = cg__view_unescape(&s->strs, raw.p, raw.n);
    return utf8_chars(s->strs.p + at, s->strs.len - at);
}

/* --- Chunks of our own ---------------------------------------------------------- */

static const char *finish_reason(cg_span_t r)
{
    if (cg_span_eq(r, "MAX_TOKENS"))
        return "length";
    if (cg_span_eq(r, "ERROR_TOXIC"))
        return "content_filter";
    return "stop"; /* COMPLETE, STOP_SEQUENCE, TOOL_CALL, and anything else */
}

/* usage.tokens' counts, else usage.billed_units'; false when there is no
 * usage object. */
static bool read_usage(const cg_json_t *j, int usage, cg_view_usage_t *u)
{
    if (!is_object(j, usage))
        return false;
    int counts = cg_json_get(j, usage, "tokens");
    if (!is_object(j, counts))
        counts = cg_json_get(j, usage, "billed_units");
    u->prompt = cg__view_count(j, cg_json_get(j, counts, "input_tokens"), 0);
    u->completion = cg__view_count(j, cg_json_get(j, counts, "output_tokens"), 0);
    u->total = u->prompt + u->completion;
    return true;
}

/* Cohere names no model: the chunks name the one the request did (its bytes
 * are JSON-escaped: any model name goes). */
static void set_meta(cg_xform_t *x, co_t *s, const cg_json_t *j, int id)
{
    cg_buf_t *b = &s->strs;
    b->len = 0;
    if (x->dreq && x->dreq->model.len)
        cg_json_put_str(b, x->dreq->model.p, x->dreq->model.len);
    cg__xform_meta(x, cg__view_str(j, id, NULL), cg_span(b->p, b->len));
}

/* --- Sources and citations ------------------------------------------------------ */

static source_t *find_source(co_t *s, const char *id, size_t n)
{
    for (size_t i = 0; i < s->nsrc; i++)
        if (s->src[i].id_len == n && memcmp(s->src[i].id, id, n) == 0)
            return &s->src[i];
    return NULL;
}

/* The request-side <source> whose document has id[0..n) ("N", as the
 * request side wrote it), or 0. */
static unsigned request_source(const cg_xform_t *x, const char *id, size_t n)
{
    if (x->dreq == NULL || n == 0 || n > 4 || id[0] == '0')
        return 0;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (id[i] < '0' || id[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(id[i] - '0');
    }
    for (size_t i = 0; i < x->dreq->ndocs; i++)
        if (x->dreq->doc_ids[i] == v)
            return v;
    return 0;
}

/* Appends string member `name` of object obj, decoded, to s->strs; its
 * offset there, its length in *n (0 when it is no string). */
static size_t member(co_t *s, const cg_json_t *j, int obj, const char *name, size_t *n)
{
    return cg__view_decode(&s->strs, j, cg_json_get(j, obj, name), n);
}

/* A new source, src of citation c: its title, url and snippet. */
static unsigned new_source(cg_xform_t *x, co_t *s, const cg_json_t *j, int c, int src)
{
    int doc = cg_json_get(j, src, "document");
    if (!is_object(j, doc))
        doc = cg_json_get(j, src, "tool_output");
    if (!is_object(j, doc))
        doc = -1;
    size_t tn, un, kn;
    size_t t = member(s, j, doc, "title", &tn), u = member(s, j, doc, "url", &un);
    size_t k = member(s, j, doc, "snippet", &kn);
    if (kn == 0)
        k = member(s, j, doc, "text", &kn);
    if (kn == 0)
        k = member(s, j, c, "text", &kn);
    if (!cg__view_absolute_url(s->strs.p + u, un))
        un = 0;
    cg_cite_in_t in = {0};
    in.title = cg_span(s->strs.p + t, tn);
    in.url = cg_span(s->strs.p + u, un);
    in.content = cg_span(s->strs.p + k, kn);
    return cg__xform_cite(x, &in);
}

/* The bytes of source object src as they came, kept for fast_citation:
 * none (n 0) when they are over CO_RAW_MAX bytes or nest deeper than
 * CO_RAW_DEPTH. Where the parse took them, they are one well formed object
 * wherever they stand; at most CO_RAW_DEPTH deep, they keep a citation
 * event of fast_citation's shape (5 levels above its sources) within
 * CG_JSON_MAX_DEPTH. */
static cg_span_t source_raw(const cg_json_t *j, int src)
{
    _Static_assert(5 + CO_RAW_DEPTH <= CG_JSON_MAX_DEPTH, "a kept source nests too deep");
    size_t b = cg_json_begin(j, src), e = cg_json_end(j, src);
    if (e - b > CO_RAW_MAX)
        return cg_span(NULL, 0);
    int end = cg_json_skip(j, src);
    for (int i = src + 1; i < end; i++) {
        if (j->tok[i].type != JSMN_OBJECT && j->tok[i].type != JSMN_ARRAY)
            continue;
        int d = 2; /* token i and src */
        for (int p = j->tok[i].parent; p != src; p = j->tok[p].parent)
            d += j->tok[p].type == JSMN_OBJECT || j->tok[p].type == JSMN_ARRAY;
        if (d > CO_RAW_DEPTH)
            return cg_span(NULL, 0);
    }
    return cg_span(j->js + b, e - b);
}

/* The number of source src of citation c; 0 when it has no id, or the table
 * is full. */
static unsigned source_of(cg_xform_t *x, co_t *s, const cg_json_t *j, int c, int src)
{
    s->strs.len = 0;
    cg_buf_reserve(&s->strs, 1); /* spans into it are taken even when nothing is decoded */
    size_t n, at = member(s, j, src, "id", &n);
    if (n == 0)
        return 0;
    if (n > CG_CITE_MAX_FIELD)
        n = CG_CITE_MAX_FIELD;
    source_t *o = find_source(s, s->strs.p + at, n);
    if (o)
        return o->n;
    if (s->nsrc == CG_CITE_MAX)
        return 0;
    cg_span_t raw = source_raw(j, src);
    char *id = cg_xmalloc(n + raw.n + 1);
    memcpy(id, s->strs.p + at, n);
    id[n] = '\0';
    if (raw.n)
        memcpy(id + n + 1, raw.p, raw.n);
    unsigned num = request_source(x, id, n);
    if (num) {
        cg_cite_in_t in = {.id = num};
        num = cg__xform_cite(x, &in); /* the <source> itself, adopted */
    } else {
        num = new_source(x, s, j, c, src);
    }
    if (num == 0) {
        free(id);
        return 0;
    }
    s->src = cg_grow(s->src, s->nsrc, &s->src_cap, 16, sizeof(source_t));
    s->src[s->nsrc++] = (source_t){id, n, num, id + n + 1, raw.n};
    return num;
}

/* What a citation object says, its members read in one pass (the first of
 * each name, as cg_json_get takes it): -1 where absent. */
typedef struct citation {
    int obj, type, start, end, sources;
} citation_t;

static void read_citation(const cg_json_t *j, int c, citation_t *out)
{
    *out = (citation_t){c, -1, -1, -1, -1};
    int n = j->tok[c].size;
    for (int k = 0, i = c + 1; k < n && i + 1 < j->ntok; k++, i = cg_json_skip(j, i + 1)) {
        cg_span_t name = cg_json_raw(j, i);
        int *m = cg_span_eq(name, "type")      ? &out->type
                 : cg_span_eq(name, "start")   ? &out->start
                 : cg_span_eq(name, "end")     ? &out->end
                 : cg_span_eq(name, "sources") ? &out->sources
                                               : NULL;
        if (m && *m < 0)
            *m = i + 1;
    }
}

/* Whether citation object c counts within a text of `chars` characters;
 * what it says in *cit. */
static bool counts(const cg_json_t *j, int c, uint64_t chars, citation_t *cit)
{
    if (!is_object(j, c))
        return false;
    read_citation(j, c, cit);
    if (cit->type >= 0 && !cg_json_is_null(j, cit->type) &&
        !cg__view_is(j, cit->type, "TEXT_CONTENT"))
        return false;
    double start = cg__view_count(j, cit->start, -1), end = cg__view_count(j, cit->end, -1);
    return start >= 0 && end >= start && end <= (double)chars;
}

/* The references of a citation that counts (one per distinct source, in
 * order), appended to out. */
static void put_citation_refs(cg_xform_t *x, co_t *s, const cg_json_t *j, const citation_t *cit,
                              cg_buf_t *out)
{
    if (cg_json_type(j, cit->sources) != JSMN_ARRAY)
        return;
    cg_view_refs_t refs = {.len = 0};
    int n = j->tok[cit->sources].size;
    for (int k = 0, e = cit->sources + 1; k < n; k++, e = cg_json_skip(j, e))
        if (is_object(j, e))
            cg__view_refs_add(&refs, source_of(x, s, j, cit->obj, e));
    cg__view_put_refs(out, refs.n, refs.len);
}

/* --- Stream events ------------------------------------------------------------- */

static void put_text(cg_xform_t *x, co_t *s, cg_span_t raw)
{
    if (raw.n == 0)
        return;
    s->chars += string_chars(s, raw);
    cg__xform_content(x, 0, raw);
}

/* A content-delta whose data is the last one's around another well formed
 * text needs no parse (cg__view_tpl_text). Most events of an answer are
 * these. */
static bool fast_text(cg_xform_t *x, co_t *s, const cg_sse_event_t *ev)
{
    cg_span_t text;
    if (!cg__view_tpl_text(&s->tpl, ev, &text))
        return false;
    put_text(x, s, text);
    return true;
}

static void on_content(cg_xform_t *x, co_t *s, const cg_sse_event_t *ev)
{
    const cg_json_t *j = &s->in.json;
    int content = cg_json_get(j, cg_json_get(j, cg_json_get(j, 0, "delta"), "message"), "content");
    int text = cg_json_get(j, content, "text");
    if (!cg_json_is_str(j, text))
        return; /* thinking, or nothing */
    cg__view_role(x, &s->started);
    cg__view_tpl_save(&s->tpl, ev, j, text);
    put_text(x, s, cg_json_raw(j, text));
}

static void on_citation(cg_xform_t *x, co_t *s)
{
    const cg_json_t *j = &s->in.json;
    int c = cg_json_get(j, cg_json_get(j, cg_json_get(j, 0, "delta"), "message"), "citations");
    citation_t cit;
    if (!counts(j, c, s->chars, &cit))
        return;
    s->refs.len = 0;
    put_citation_refs(x, s, j, &cit, &s->refs);
    if (s->refs.len) {
        cg__view_role(x, &s->started);
        cg__xform_content(x, 0, cg_span(s->refs.p, s->refs.len));
    }
}

static void on_message_end(cg_xform_t *x, co_t *s)
{
    const cg_json_t *j = &s->in.json;
    int delta = cg_json_get(j, 0, "delta");
    int reason = cg_json_get(j, delta, "finish_reason");
    cg_span_t r = cg_json_is_str(j, reason) ? cg_json_raw(j, reason) : cg_span("", 0);
    s->over = true;
    if (cg_span_eq(r, "ERROR")) {
        cg__xform_error(
            x,
            cg__view_str(j, cg_json_get(j, delta, "error"), "\"the upstream reported an error\""),
            CG_SPAN_LIT("\"ERROR\""));
        return;
    }
    cg__view_role(x, &s->started);
    cg__view_finish(x, finish_reason(r));
    cg_view_usage_t u = {0, 0, 0};
    read_usage(j, cg_json_get(j, delta, "usage"), &u);
    cg__view_usage(x, &u);
    cg__view_done(x);
}

static void dispatch(cg_xform_t *x, void *state, const cg_sse_event_t *ev, cg_span_t type)
{
    co_t *s = state;
    const cg_json_t *j = &s->in.json;
    if (cg_span_eq(type, "content-delta")) {
        on_content(x, s, ev);
    } else if (cg_span_eq(type, "citation-start")) {
        on_citation(x, s);
    } else if (cg_span_eq(type, "message-start")) {
        set_meta(x, s, j, cg_json_get(j, 0, "id"));
        cg__view_role(x, &s->started);
    } else if (cg_span_eq(type, "message-end")) {
        on_message_end(x, s);
    }
}

/* Is the event one of those the answer drops, as its data's first member
 * names it ({"type":"citation-end",…, how Cohere writes them)? Such an
 * event needs no parse: nothing of it is read, whatever follows. */
static bool dropped(cg_span_t d)
{
    static const char *const types[] = {
        "citation-end",    "content-start",   "content-end",   "tool-plan-delta",
        "tool-call-start", "tool-call-delta", "tool-call-end", "debug"};
    static const char head[] = "{\"type\":\"";
    size_t h = sizeof(head) - 1;
    if (d.n <= h || memcmp(d.p, head, h) != 0)
        return false;
    const char *q = memchr(d.p + h, '"', d.n - h);
    if (q == NULL)
        return false;
    cg_span_t type = cg_span(d.p + h, (size_t)(q - d.p) - h);
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (cg_span_eq(type, types[i]))
            return true;
    return false;
}

/* --- Citations without a parse ----------------------------------------------------- */

/* The tests' hold on fast_citation (view.h). */
_Thread_local bool cg__cohere_fast_off;
_Thread_local uint64_t cg__cohere_fast_reads;

/* The length of the whole number p[0..n) starts with, in plain digits (0,
 * or up to 15 digits not starting with 0), its value in *v; 0 when there is
 * none, or it is written otherwise: cg__view_count's value for what it
 * takes. */
static size_t plain_count(const char *p, size_t n, uint64_t *v)
{
    size_t i = 0;
    uint64_t r = 0;
    while (i < n && i < 16 && p[i] >= '0' && p[i] <= '9')
        r = r * 10 + (uint64_t)(p[i++] - '0');
    if (i == 0 || i == 16 || (p[0] == '0' && i > 1))
        return 0;
    *v = r;
    return i;
}

/* Whether p[*i..n) goes on with literal lit; *i past it if so. */
static bool lit_at(const char *p, size_t n, size_t *i, const char *lit, size_t len)
{
    if (n - *i < len || memcmp(p + *i, lit, len) != 0)
        return false;
    *i += len;
    return true;
}
#define LIT_AT(p, n, i, lit) lit_at(p, n, i, lit, sizeof(lit) - 1)

/* The kept source whose raw object p[0..n) starts with, or NULL. Two kept
 * objects cannot both match: an object ends where its brackets close. */
static const source_t *kept_source(const co_t *s, const char *p, size_t n)
{
    for (size_t k = 0; k < s->nsrc; k++) {
        const source_t *o = &s->src[k];
        if (o->raw_len && o->raw_len <= n && memcmp(o->raw, p, o->raw_len) == 0)
            return o;
    }
    return NULL;
}

/* A citation-start whose data d is
 *   {"type":"citation-start","index":NUMBER,"delta":{"message":{"citations":
 *   {"start":DIGITS,"end":DIGITS,"text":STRING,"sources":[KEPT,…],
 *   "type":"TEXT_CONTENT"}}}}
 * with no white space, at most CO_FAST_SOURCES sources, each a kept source
 * object (source_raw) byte for byte, is read here as on_citation reads it
 * after the parse: the parse takes such data (no member is there twice, and
 * every value is well formed, as the parse checks it: NUMBER and STRING as
 * cg__view_number_len and cg__view_string_len take them), and reads of it
 * the same start, end, type and sources' ids. Else false, and nothing is
 * read. */
static bool fast_citation(cg_xform_t *x, co_t *s, cg_span_t d)
{
    const char *p = d.p;
    size_t n = d.n, i = 0, len;
    uint64_t start, end;
    if (cg__cohere_fast_off || !LIT_AT(p, n, &i, "{\"type\":\"citation-start\",\"index\":") ||
        (len = cg__view_number_len(p + i, n - i)) == 0)
        return false;
    i += len;
    if (!LIT_AT(p, n, &i, ",\"delta\":{\"message\":{\"citations\":{\"start\":") ||
        (len = plain_count(p + i, n - i, &start)) == 0)
        return false;
    i += len;
    if (!LIT_AT(p, n, &i, ",\"end\":") || (len = plain_count(p + i, n - i, &end)) == 0)
        return false;
    i += len;
    if (!LIT_AT(p, n, &i, ",\"text\":\"") || (len = cg__view_string_len(p + i, n - i)) > n - i)
        return false;
    i += len;
    if (!LIT_AT(p, n, &i, "\",\"sources\":["))
        return false;
    unsigned num[CO_FAST_SOURCES];
    size_t nsrc = 0;
    if (i < n && p[i] == ']') {
        i++;
    } else {
        for (;;) {
            const source_t *o = i < n && p[i] == '{' ? kept_source(s, p + i, n - i) : NULL;
            if (o == NULL || nsrc == CO_FAST_SOURCES)
                return false;
            num[nsrc++] = o->n;
            i += o->raw_len;
            if (i < n && p[i] == ',')
                i++;
            else if (i < n && p[i] == ']' && ++i)
                break;
            else
                return false;
        }
    }
    if (!LIT_AT(p, n, &i, ",\"type\":\"TEXT_CONTENT\"}}}}") || i != n)
        return false;
    cg__cohere_fast_reads++;
    if (end < start || end > s->chars)
        return true; /* a citation that counts not */
    cg_view_refs_t refs = {.len = 0};
    for (size_t k = 0; k < nsrc; k++)
        cg__view_refs_add(&refs, num[k]);
    s->refs.len = 0;
    cg__view_put_refs(&s->refs, refs.n, refs.len);
    if (s->refs.len) {
        cg__view_role(x, &s->started);
        cg__xform_content(x, 0, cg_span(s->refs.p, s->refs.len));
    }
    return true;
}

static void on_event(cg_xform_t *x, void *state, const cg_sse_event_t *ev)
{
    co_t *s = state;
    if (s->over)
        return; /* a holding profile has not ended the stream yet; the answer has */
    if (fast_text(x, s, ev) ||
        (ev->ndata == 1 && (dropped(ev->data) || fast_citation(x, s, ev->data))))
        return;
    cg__view_typed_event(x, &s->in, ev, dispatch, s);
}

/* --- Non-streaming bodies ------------------------------------------------------- */

/* The text items of content array `content`, decoded into s->text; their
 * characters in s->chars. */
static void body_text(co_t *s, const cg_json_t *j, int content)
{
    s->text.len = 0;
    cg_buf_reserve(&s->text, 1);
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int k = 0, e = content + 1; k < n; k++, e = cg_json_skip(j, e)) {
        size_t len;
        if (cg__view_is(j, cg_json_get(j, e, "type"), "text"))
            cg__view_decode(&s->text, j, cg_json_get(j, e, "text"), &len);
    }
    s->chars = utf8_chars(s->text.p, s->text.len);
}

/* Reads citations array `cites`: the places of those that count, their
 * sources numbered in the array's order. */
static void body_citations(cg_xform_t *x, co_t *s, const cg_json_t *j, int cites)
{
    s->nplace = 0;
    s->refs.len = 0;
    if (cg_json_type(j, cites) != JSMN_ARRAY)
        return;
    int n = j->tok[cites].size;
    for (int k = 0, c = cites + 1; k < n; k++, c = cg_json_skip(j, c)) {
        citation_t cit;
        if (!counts(j, c, s->chars, &cit))
            continue;
        size_t at = s->refs.len;
        put_citation_refs(x, s, j, &cit, &s->refs);
        if (s->refs.len == at)
            continue;
        s->place = cg_grow(s->place, s->nplace, &s->place_cap, 16, sizeof(place_t));
        s->place[s->nplace++] =
            (place_t){(uint64_t)cg__view_count(j, cit.end, 0), (size_t)k, at, s->refs.len - at};
    }
}

static int by_end(const void *a, const void *b)
{
    const place_t *p = a, *q = b;
    if (p->end != q->end)
        return p->end < q->end ? -1 : 1;
    return (p->order > q->order) - (p->order < q->order);
}

/* The body's text with each citation's references at its end, JSON-escaped. */
static void put_cited_text(co_t *s, cg_buf_t *chat)
{
    if (s->nplace > 1)
        qsort(s->place, s->nplace, sizeof(place_t), by_end);
    const char *t = s->text.p;
    size_t from = 0, at = 0, len = s->text.len;
    uint64_t chars = 0;
    for (size_t k = 0; k < s->nplace; k++) {
        while (chars < s->place[k].end) { /* one character on */
            at++;
            while (at < len && ((unsigned char)t[at] & 0xC0) == 0x80)
                at++;
            chars++;
        }
        cg_json_put_escaped(chat, t + from, at - from);
        from = at;
        cg_buf_put(chat, s->refs.p + s->place[k].off, s->place[k].len);
    }
    cg_json_put_escaped(chat, t + from, len - from);
}

static int on_body(cg_xform_t *x, void *state, const char *body, size_t len, cg_buf_t *chat)
{
    co_t *s = state;
    const cg_json_t *j = &s->in.json;
    int msg = -1;
    if (cg__view_parse_bytes(x, &s->in, body, len))
        msg = cg_json_get(j, 0, "message");
    if (!is_object(j, msg)) {
        cg__view_give_back(x, &s->in);
        return -1;
    }
    int reason = cg_json_get(j, 0, "finish_reason");
    if (cg__view_is(j, reason, "ERROR")) {
        cg__view_error_body(
            chat, cg__view_str(j, cg_json_get(j, 0, "error"), "\"the upstream reported an error\""),
            CG_SPAN_LIT("\"ERROR\""));
        cg__view_give_back(x, &s->in);
        return 0;
    }
    set_meta(x, s, j, cg_json_get(j, 0, "id"));
    cg__view_body_open(x, chat);
    body_text(s, j, cg_json_get(j, msg, "content"));
    body_citations(x, s, j, cg_json_get(j, msg, "citations"));
    put_cited_text(s, chat);
    cg_view_usage_t u;
    bool usage = read_usage(j, cg_json_get(j, 0, "usage"), &u);
    cg__view_body_end(chat,
                      cg_json_is_str(j, reason) ? finish_reason(cg_json_raw(j, reason)) : NULL,
                      usage ? &u : NULL);
    cg__view_give_back(x, &s->in);
    return 0;
}

/* --- The request ---------------------------------------------------------------- */

/* The messages in order: system texts in place (empty ones left out), user
 * and assistant turns with their text. */
static void put_messages(cg_chatreq_t *c)
{
    cg_buf_t *o = c->out;
    cg__req_key(o, "messages");
    cg_buf_putc(o, '[');
    int n, i = cg__req_messages(c, &n);
    for (int k = 0; k < n; k++, i = cg_json_skip(c->j, i)) {
        cg_req_role_t role = cg__req_role(c, i);
        if (role == CG_ROLE_SYSTEM) {
            cg__req_put_text_block(c, i, "{\"role\":\"system\",\"content\":\"", "\"}");
        } else if (role == CG_ROLE_USER || role == CG_ROLE_ASSISTANT) {
            cg__req_sep(o);
            cg__req_put_role_turn(c, i, role, NULL);
        }
    }
    cg_buf_putc(o, ']');
}

static void put_documents(cg_buf_t *o, const cg_req_docs_t *d)
{
    if (d->n == 0)
        return;
    cg__req_key(o, "documents");
    cg_buf_putc(o, '[');
    for (size_t i = 0; i < d->n; i++) {
        const cg_citation_t *s = d->v[i];
        cg__req_sep(o);
        cg_buf_printf(o, "{\"id\":\"%u\",\"data\":{\"title\":", s->id);
        cg_json_put_cstr(o, s->title);
        cg_buf_puts(o, ",\"snippet\":");
        cg_json_put_cstr(o, s->content);
        if (s->url) {
            cg_buf_puts(o, ",\"url\":");
            cg_json_put_cstr(o, s->url);
        }
        cg_buf_puts(o, "}}");
    }
    cg_buf_putc(o, ']');
}

/* The model the answer's chunks name: the body's, else the deployment's. */
static void keep_model(cg_chatreq_t *c)
{
    cg_buf_t *m = &c->dreq->model;
    int tok = c->r[CG_REQ_MODEL];
    if (cg_json_is_str(c->j, tok)) {
        size_t n;
        cg__view_decode(m, c->j, tok, &n);
    } else if (c->in->deployment.p) {
        cg_buf_put(m, c->in->deployment.p, c->in->deployment.n);
    }
}

static int cohere_request(cg_chatreq_t *c, cg_dialect_err_t *err)
{
    static const char *const modes[] = {
        [CG_COHERE_FAST] = "fast", [CG_COHERE_ACCURATE] = "accurate"};
    if (cg__req_check_stop(c, err) != 0)
        return -1;
    keep_model(c);
    cg_req_docs_t d;
    cg__req_find_documents(c, &d, false);
    cg_buf_t *o = c->out;
    cg_buf_putc(o, '{');
    cg__req_put_model(c);
    put_messages(c);
    cg__req_put_kept(c, CG_REQ_STREAM, "stream");
    int max = cg__req_max_tokens(c);
    if (max >= 0) {
        cg__req_key(o, "max_tokens");
        cg__req_put_raw(c, max);
    }
    cg__req_put_kept(c, CG_REQ_TEMPERATURE, "temperature");
    cg__req_put_kept(c, CG_REQ_TOP_P, "p");
    cg__req_put_stop_list(c, "stop_sequences");
    put_documents(o, &d);
    if (c->in->cohere_citations != CG_COHERE_OFF) {
        cg__req_key(o, "citation_options");
        cg_buf_printf(o, "{\"mode\":\"%s\"}", modes[c->in->cohere_citations]);
    }
    cg_buf_putc(o, '}');
    cg__req_docs_free(&d);
    return 0;
}

static void cohere_path(const cg_dialect_req_t *r, cg_buf_t *out)
{
    (void)r;
    cg_buf_puts(out, "/v2/chat"); /* the client's query has no meaning there */
}

/* The client's Authorization goes as it came; api-key becomes
 * Authorization. */
static bool forwards_field(cg_span_t name)
{
    return !cg__req_field_is(name, "api-key");
}

static const cg_dialect_view_t cohere_view = {
    .state_size = sizeof(co_t),
    .state_free = co_free,
    .event = on_event,
    .body = on_body,
};

const cg_dialect_t cg__dialect_cohere = {
    .name = "cohere",
    .request = cohere_request,
    .path = cohere_path,
    .forwards = forwards_field,
    .headers = cg__req_bearer_key,
    .view = &cohere_view,
};
