/*
 * Dialect `gemini` (SPEC §6a): the Gemini API, generateContent.
 *
 * Request: POST {base}/models/{MODEL}:streamGenerateContent?alt=sse when
 * the client streams, else {base}/models/{MODEL}:generateContent. MODEL is
 * the Azure route's deployment name, else the body's model; it becomes part
 * of the path, so it must be made of A-Z a-z 0-9 . _ - and hold no "..",
 * or the client gets a 400 and nothing is sent. The key goes as
 * x-goog-api-key: the client's x-goog-api-key, else api-key, else its
 * Authorization: Bearer credentials; neither api-key nor Authorization goes
 * upstream. The body: system and developer texts joined into
 * systemInstruction; user and assistant messages in order as `contents`
 * (roles user and model, one text part each); generationConfig
 * (maxOutputTokens, temperature, topP, stopSequences), left out when empty;
 * `tools` = CITEGATE_GEMINI_TOOLS as it is. Nothing else.
 *
 * Answer: every SSE event (or the body) is a GenerateContentResponse; only
 * candidates[0] is read. Its text parts are content (JSON string bytes
 * handed on as they came), except those with "thought": true. The first
 * event brings the role chunk. finishReason maps to finish_reason (STOP
 * stop; MAX_TOKENS length; SAFETY, RECITATION, BLOCKLIST,
 * PROHIBITED_CONTENT, SPII, LANGUAGE, IMAGE_* content_filter; anything else
 * stop), and a promptFeedback.blockReason with no candidate to
 * content_filter. Usage comes from the last usageMetadata (a running
 * snapshot, not a maximum). There is no [DONE]: the stream ends with the
 * body. The finish chunk waits for that end (nothing the client reads
 * follows it but the end itself), so that references can still go before
 * it; then the usage chunk when asked, and the transformer's [DONE].
 *
 * Errors: an `error` object, as an event's data or on lines of their own
 * without a field name (how Gemini reports a failure once a stream has
 * started, possibly pretty-printed over several lines, possibly after the
 * finishReason event, possibly with no blank line after it) ends the
 * stream with SPEC §6's error event: code = its status (else its numeric
 * code as a string), message = its message; no [DONE]. What came before it
 * (references, the finish) goes out first. Lines that are neither an SSE
 * field nor part of such an object are counted malformed and dropped, and
 * so is data that is not a JSON object; a comment is forwarded as `: ping`.
 *
 * Grounding: the candidate's last non-empty groundingMetadata is kept (a
 * copy of its JSON: Gemini sends {} on every event but the last, and a later
 * non-empty one replaces an earlier one). Its groundingChunks are the
 * sources: web (url = uri, title) and retrievedContext (url = uri, title,
 * snippet = text; without a uri the key is its customMetadata source_url
 * string when there is one). A support cites its groundingChunkIndices at
 * segment.endIndex, a UTF-8 byte offset (absent: 0) into the visible text
 * (thoughts left out); one past the text, not on a character boundary, or
 * that is no whole number is ignored. Sources are numbered in the order first cited (supports by
 * endIndex, then as listed; within a support in its index order), after any
 * request-side <source> ids; a chunk no support cites is no citation.
 *   - A stream: text is never held for grounding that has not come, so at
 *     the end one content delta " [N][M]…" (every cited source, in number
 *     order) follows the last text, as if the model had written it.
 *   - A body: at each support's endIndex the references of its chunks are
 *     inserted into the text (supports ending at one offset in their order,
 *     a number not repeated there).
 * Either way the profile rewrites them like any numeric reference.
 * citationMetadata (recitation) is no source.
 *
 * Byte offsets: the view counts the decoded bytes of the visible text and
 * keeps one bit per byte, set for a UTF-8 continuation byte (its first
 * BITMAP_FIRST words come with the first text, so that an event allocates
 * nothing, and it doubles past them), up to TEXT_MAX bytes of
 * text: a support ending past that is taken as past the text.
 *
 * The steady path: an event that matches the last plain one read in full
 * (one text part, no finish, no grounding but {}, no error) everywhere but
 * in its text and in the numbers seen to change (the usage counts) is read
 * without a parse (see fast_event). An event allocates nothing there.
 *
 * State per stream, bounded: the token array (borrowed from the call's
 * cg_out_t while an event is read), one grounding copy, one pending error
 * object and one skeleton (each at most max_event bytes), the bitmap
 * (TEXT_MAX / 8 at most; BITMAP_FIRST words at first), and at the end the
 * supports and chunks of one grounding.
 */
#include "gemini.h"
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MAX     (16u << 20) /* bytes of text whose character boundaries are known */
#define BITMAP_FIRST 256         /* words of it at first: 16 KiB of text, most answers */
#define SKEL_MAX     1024        /* bytes of a plain event besides its text */
#define SKEL_HOLES   8
#define SKEL_NUMBERS 32 /* numbers of a plain event: more, and it has no skeleton */

/* --- The request ------------------------------------------------------------- */

/* A turn: roles user and model, its text as one part. */
static void put_turn(cg_chatreq_t *c, int msg, cg_req_role_t role, void *ctx)
{
    (void)ctx;
    cg__req_put_turn_text(c, msg,
                          role == CG_ROLE_USER ? "{\"role\":\"user\",\"parts\":[{\"text\":\""
                                               : "{\"role\":\"model\",\"parts\":[{\"text\":\"",
                          "\"}]}");
}

int cg__gemini_request(cg_chatreq_t *c, cg_dialect_err_t *err)
{
    if (cg__req_check_stop(c, err) != 0 ||
        cg__req_read_model(c, err, "", "a model name of A-Z, a-z, 0-9, '.', '_' and '-'") != 0)
        return -1;
    cg_buf_t *o = c->out;
    cg_buf_putc(o, '{');
    cg__req_put_system(c, "\"systemInstruction\":{\"parts\":[{\"text\":\"", "\"}]}");
    cg__req_put_turns(c, "contents", put_turn, NULL);
    cg__req_put_sampling(c, "generationConfig", "maxOutputTokens");
    if (c->in->tools) {
        cg__req_key(o, "tools");
        cg_buf_puts(o, c->in->tools);
    }
    cg_buf_putc(o, '}');
    return 0;
}

void cg__gemini_path(const cg_dialect_req_t *r, cg_buf_t *out)
{
    cg_buf_puts(out, "/models/");
    cg_buf_put(out, r->model.p, r->model.len);
    cg_buf_puts(out, r->stream ? ":streamGenerateContent?alt=sse" : ":generateContent");
}

void cg__gemini_send_key(const cg_dialect_hdrs_t *h, cg_span_t otherwise)
{
    cg_span_t key = cg_dialect_api_key(h->get(h->ctx, "x-goog-api-key"), cg_span(NULL, 0));
    if (key.p == NULL)
        key = otherwise;
    if (key.p)
        h->add(h->ctx, CG_SPAN_LIT("x-goog-api-key"), key);
}

/* The key goes as x-goog-api-key, citegate's, once. */
static bool forwards(cg_span_t name)
{
    return !cg__req_field_is(name, "api-key") && !cg__req_field_is(name, "authorization") &&
           !cg__req_field_is(name, "x-goog-api-key");
}

static void headers(const cg_dialect_hdrs_t *h)
{
    cg__gemini_send_key(
        h, cg_dialect_api_key(h->get(h->ctx, "api-key"), h->get(h->ctx, "authorization")));
}

/* --- The answer: state ------------------------------------------------------- */

/* The grounding, read once when it arrives and kept without its JSON
 * tokens: the places of each chunk's strings in its text (raw JSON string
 * bytes; len 0: none), each support's end and chunk indices. So the end of
 * a stream needs no second parse. */
typedef struct place {
    uint32_t off, len;
} place_t;

typedef enum chunk_kind { C_NONE, C_WEB, C_CONTEXT } chunk_kind_t;

typedef struct chunk {
    chunk_kind_t kind;
    place_t uri, title, text, key;
} chunk_t;

#define NO_END   UINT64_MAX /* an endIndex that is no byte offset */
#define NO_CHUNK UINT32_MAX /* an index that names no chunk */

typedef struct support {
    uint64_t end;
    uint32_t order, first, n; /* its chunk indices: idx[first, first + n) */
} support_t;

/* A value of a plain event that may change from event to event: the text,
 * or a number (the usage counts among them). */
typedef enum hole_kind { H_TEXT, H_NUMBER, H_PROMPT, H_TOTAL } hole_kind_t;

typedef struct hole {
    size_t start, end; /* in the skeleton's bytes */
    hole_kind_t kind;
} hole_t;

/* The last plain event read in full: its data, and where its values are.
 * Only the numbers seen to change from one plain event to the next are
 * holes; the others stay bytes to match (a change makes them holes). */
typedef struct skeleton {
    cg_buf_t bytes;
    hole_t hole[SKEL_HOLES];
    size_t nholes;
    size_t num[SKEL_NUMBERS][2]; /* every number: [start, end) in bytes */
    size_t nnum;
    uint32_t vary;        /* bit i: number i changed */
    bool usage;           /* it has a usageMetadata object ... */
    double prompt, total; /* ... with these counts */
    bool ok;
} skeleton_t;

typedef struct gm {
    cg_view_json_t in; /* the upstream event being read (x->json is the chunks') */
    skeleton_t skel;
    cg_buf_t strs; /* decoded strings of one source */
    cg_buf_t text; /* decoded text: one part (stream), all of it (body) */

    bool started;         /* the role chunk went out */
    bool over;            /* the error went out: nothing more is read */
    bool refs_out;        /* the grounding's references went out */
    const char *finish;   /* the finish_reason to send at the end, or NULL */
    double prompt, total; /* the last usageMetadata */

    uint64_t bytes; /* decoded bytes of visible text so far */
    uint64_t *cont; /* bit i: byte i is a UTF-8 continuation byte */
    size_t cont_words;

    cg_buf_t raw; /* lines without a field name: an error object, maybe */

    /* The last non-empty groundingMetadata: its JSON, chunks and supports. */
    cg_buf_t ground;
    chunk_t *chunk;
    size_t nchunk, chunk_cap;
    support_t *sup;
    size_t nsup, sup_cap;
    uint32_t *idx;
    size_t nidx, idx_cap;
    /* Its numbering: the supports that count, in order; each chunk's
     * number (0: none yet, NO_CHUNK: no source); a body: per chunk, 1 +
     * the last offset group it went in. */
    support_t *use;
    size_t nuse, use_cap;
    unsigned *num;
    uint64_t *stamp;
} gm_t;

static void state_free(void *p)
{
    gm_t *s = p;
    cg__view_json_free(&s->in);
    cg_buf_free(&s->strs);
    cg_buf_free(&s->text);
    cg_buf_free(&s->ground);
    cg_buf_free(&s->raw);
    cg_buf_free(&s->skel.bytes);
    free(s->cont);
    free(s->chunk);
    free(s->sup);
    free(s->idx);
    free(s->use);
    free(s->num);
    free(s->stamp);
}

static bool is_object(const cg_json_t *j, int tok)
{
    return cg_json_type(j, tok) == JSMN_OBJECT;
}

/* --- Visible text: its length and character boundaries ---------------------- */

static void mark(gm_t *s, uint64_t at)
{
    size_t w = (size_t)(at / 64);
    if (w >= s->cont_words) {
        size_t n = s->cont_words ? s->cont_words : BITMAP_FIRST;
        while (n <= w)
            n *= 2;
        s->cont = cg_xrealloc(s->cont, n * sizeof(uint64_t));
        memset(s->cont + s->cont_words, 0, (n - s->cont_words) * sizeof(uint64_t));
        s->cont_words = n;
    }
    s->cont[w] |= (uint64_t)1 << (at % 64);
}

/* Decoded text bytes p[0..n) follow the visible text so far. */
static void note_decoded(gm_t *s, const char *p, size_t n)
{
    if (s->cont == NULL && n > 0) {
        s->cont = cg_xcalloc(BITMAP_FIRST, sizeof(uint64_t));
        s->cont_words = BITMAP_FIRST;
    }
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) == 0x80 && s->bytes + i < TEXT_MAX)
            mark(s, s->bytes + i);
    s->bytes += n;
}

/* A text part's JSON string bytes follow the visible text so far; body:
 * its decoded bytes are kept too, in s->text. */
static void note_text(gm_t *s, cg_span_t raw, bool keep)
{
    if (!keep)
        s->text.len = 0;
    if (!keep && memchr(raw.p, '\\', raw.n) == NULL) {
        note_decoded(s, raw.p, raw.n); /* the same bytes */
        return;
    }
    size_t at = s->text.len;
    char *t = cg_buf_reserve(&s->text, raw.n);
    size_t n = cg_json_unescape(raw.p, raw.n, t);
    s->text.len = at + n;
    note_decoded(s, s->text.p + at, n);
}

/* SPEC §6a: past the text, or inside a character, an offset counts not. */
static bool on_boundary(const gm_t *s, uint64_t at)
{
    if (at > s->bytes || at > TEXT_MAX)
        return false;
    if (at == s->bytes || at / 64 >= s->cont_words)
        return true;
    return (s->cont[at / 64] >> (at % 64) & 1) == 0;
}

/* --- Writing chunks of our own ---------------------------------------------- */

/* The last usageMetadata: completion = total - prompt (the total counts
 * thoughts and tool use too). */
static cg_view_usage_t usage_of(const gm_t *s)
{
    return (cg_view_usage_t){s->prompt, s->total > s->prompt ? s->total - s->prompt : 0, s->total};
}

/* The held finish chunk, then the usage chunk when the client asked. */
static void put_finish(cg_xform_t *x, gm_t *s)
{
    if (s->finish == NULL)
        return;
    cg__view_finish(x, s->finish);
    s->finish = NULL;
    cg_view_usage_t u = usage_of(s);
    cg__view_usage(x, &u);
}

static const char *finish_reason(const cg_json_t *j, int tok)
{
    static const char *const filtered[] = {
        "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE"};
    cg_span_t r = cg_json_raw(j, tok);
    if (cg_span_eq(r, "MAX_TOKENS"))
        return "length";
    for (size_t i = 0; i < sizeof(filtered) / sizeof(filtered[0]); i++)
        if (cg_span_eq(r, filtered[i]))
            return "content_filter";
    if (r.n >= 6 && memcmp(r.p, "IMAGE_", 6) == 0)
        return "content_filter";
    return "stop";
}

/* --- Sources ------------------------------------------------------------------ */

/* Where string token tok lies in the grounding that begins at `begin`. */
static place_t place_of(const cg_json_t *j, int tok, size_t begin)
{
    if (!cg_json_is_str(j, tok))
        return (place_t){0, 0};
    return (place_t){(uint32_t)((size_t)j->tok[tok].start - begin),
                     (uint32_t)(j->tok[tok].end - j->tok[tok].start)};
}

/* The stringValue of the customMetadata entry whose key is source_url. */
static int source_url(const cg_json_t *j, int ctx)
{
    int md = cg_json_get(j, ctx, "customMetadata");
    if (cg_json_type(j, md) != JSMN_ARRAY)
        return -1;
    int n = j->tok[md].size;
    for (int k = 0, e = md + 1; k < n; k++, e = cg_json_skip(j, e))
        if (cg__view_is(j, cg_json_get(j, e, "key"), "source_url"))
            return cg_json_get(j, e, "stringValue");
    return -1;
}

/* Chunk token c: web (url = uri, title) or retrievedContext (also text;
 * without a uri, the key of customMetadata's source_url); else no source. */
static chunk_t read_chunk(const cg_json_t *j, int c, size_t begin)
{
    chunk_t k = {0};
    int web = cg_json_get(j, c, "web"), ctx = cg_json_get(j, c, "retrievedContext");
    int src = is_object(j, web) ? web : is_object(j, ctx) ? ctx : -1;
    if (src < 0)
        return k;
    k.kind = src == web ? C_WEB : C_CONTEXT;
    k.uri = place_of(j, cg_json_get(j, src, "uri"), begin);
    k.title = place_of(j, cg_json_get(j, src, "title"), begin);
    if (k.kind == C_CONTEXT) {
        k.text = place_of(j, cg_json_get(j, src, "text"), begin);
        if (k.uri.len == 0)
            k.key = place_of(j, source_url(j, src), begin);
    }
    return k;
}

/* Support token p: its end (absent: 0; no whole number: NO_END) and its
 * indices (NO_CHUNK where one names no chunk); false when it has no list
 * of indices. */
static bool read_support(gm_t *s, const cg_json_t *j, int p, uint32_t order)
{
    int indices = cg_json_get(j, p, "groundingChunkIndices");
    if (cg_json_type(j, indices) != JSMN_ARRAY)
        return false;
    int at = cg_json_get(j, cg_json_get(j, p, "segment"), "endIndex");
    double end = at < 0 ? 0 : cg__view_count(j, at, -1);
    support_t u = {end < 0 ? NO_END : (uint64_t)end, order, (uint32_t)s->nidx, 0};
    int n = j->tok[indices].size;
    for (int k = 0, t = indices + 1; k < n; k++, t = cg_json_skip(j, t)) {
        double i = cg__view_count(j, t, -1);
        s->idx = cg_grow(s->idx, s->nidx, &s->idx_cap, 64, sizeof(uint32_t));
        s->idx[s->nidx++] = i >= 0 && i < (double)s->nchunk ? (uint32_t)i : NO_CHUNK;
        u.n++;
    }
    s->sup = cg_grow(s->sup, s->nsup, &s->sup_cap, 16, sizeof(support_t));
    s->sup[s->nsup++] = u;
    return true;
}

/* Keeps a non-empty groundingMetadata, token gm of j: the last one wins. */
static void keep_grounding(gm_t *s, const cg_json_t *j, int gm)
{
    if (!is_object(j, gm) || j->tok[gm].size == 0)
        return;
    size_t begin = cg_json_begin(j, gm);
    s->ground.len = 0;
    cg_buf_put(&s->ground, j->js + begin, cg_json_end(j, gm) - begin);
    s->nchunk = s->nsup = s->nidx = 0;
    int chunks = cg_json_get(j, gm, "groundingChunks");
    int n = cg_json_type(j, chunks) == JSMN_ARRAY ? j->tok[chunks].size : 0;
    for (int k = 0, c = chunks + 1; k < n; k++, c = cg_json_skip(j, c)) {
        s->chunk = cg_grow(s->chunk, s->nchunk, &s->chunk_cap, 16, sizeof(chunk_t));
        s->chunk[s->nchunk++] = read_chunk(j, c, begin);
    }
    int sups = cg_json_get(j, gm, "groundingSupports");
    n = cg_json_type(j, sups) == JSMN_ARRAY ? j->tok[sups].size : 0;
    for (int k = 0, p = sups + 1; k < n; k++, p = cg_json_skip(j, p))
        read_support(s, j, p, (uint32_t)k);
}

/* Appends the decoded string at place pl of the grounding to s->strs;
 * returns its offset there (s->strs may move), its length in *len. */
static size_t decode(gm_t *s, place_t pl, size_t *len)
{
    size_t at = cg__view_unescape(&s->strs, s->ground.p + pl.off, pl.len);
    *len = s->strs.len - at;
    return at;
}

/* Makes chunk c a citation; its number, or 0 (no source, a full table). */
static unsigned cite_chunk(cg_xform_t *x, gm_t *s, const chunk_t *c)
{
    if (c->kind == C_NONE)
        return 0;
    s->strs.len = 0;
    size_t un, tn, cn, kn;
    size_t u = decode(s, c->uri, &un), t = decode(s, c->title, &tn);
    size_t k = decode(s, c->text, &cn), m = decode(s, c->key, &kn);
    cg_cite_in_t in = {0};
    in.url = cg_span(s->strs.p + u, un);
    in.title = cg_span(s->strs.p + t, tn);
    in.content = cg_span(s->strs.p + k, cn);
    in.key = cg_span(s->strs.p + m, kn);
    return cg__xform_cite(x, &in);
}

static int by_end(const void *a, const void *b)
{
    const support_t *p = a, *q = b;
    if (p->end != q->end)
        return p->end < q->end ? -1 : 1;
    return (p->order > q->order) - (p->order < q->order);
}

/* Numbers the kept grounding's sources in the order first cited, by the
 * supports that count (within the text, on a character boundary), taken
 * by endIndex then as listed. */
static void number_sources(cg_xform_t *x, gm_t *s)
{
    s->nuse = 0;
    for (size_t k = 0; k < s->nsup; k++) {
        if (s->sup[k].end == NO_END || !on_boundary(s, s->sup[k].end))
            continue;
        s->use = cg_grow(s->use, s->nuse, &s->use_cap, 16, sizeof(support_t));
        s->use[s->nuse++] = s->sup[k];
    }
    if (s->nuse > 1) /* qsort wants an array, even of nothing */
        qsort(s->use, s->nuse, sizeof(support_t), by_end);
    size_t n = s->nchunk ? s->nchunk : 1;
    s->num = cg_xrealloc(s->num, n * sizeof(unsigned));
    memset(s->num, 0, n * sizeof(unsigned));
    for (size_t k = 0; k < s->nuse; k++) {
        for (uint32_t q = 0; q < s->use[k].n; q++) {
            uint32_t i = s->idx[s->use[k].first + q];
            if (i == NO_CHUNK || s->num[i] != 0)
                continue;
            s->num[i] = cite_chunk(x, s, &s->chunk[i]);
            if (s->num[i] == 0)
                s->num[i] = NO_CHUNK; /* no source: not tried again */
        }
    }
}

static bool cited(unsigned n)
{
    return n != 0 && n != NO_CHUNK;
}

static int by_number(const void *a, const void *b)
{
    unsigned p = *(const unsigned *)a, q = *(const unsigned *)b;
    return (p > q) - (p < q);
}

/* A stream's grounding, at its end: one delta of every cited source's
 * reference, in number order, after the last text. */
static void put_refs(cg_xform_t *x, gm_t *s)
{
    if (s->refs_out || s->ground.len == 0)
        return;
    s->refs_out = true;
    number_sources(x, s);
    size_t n = 0;
    for (size_t i = 0; i < s->nchunk; i++)
        if (cited(s->num[i]))
            s->num[n++] = s->num[i];
    if (n == 0)
        return;
    qsort(s->num, n, sizeof(unsigned), by_number);
    s->strs.len = 0;
    cg_buf_putc(&s->strs, ' ');
    cg__view_put_refs(&s->strs, s->num, n);
    cg__xform_content(x, 0, cg_span(s->strs.p, s->strs.len));
}

/* --- The steady path: plain events ------------------------------------------ */

/*
 * Most events of an answer are plain: one candidate, one text part that is
 * no thought, no finish, no grounding but {}, no error. The next one is the
 * same JSON with other text and other numbers (the usage counts), and the
 * view reads nothing else of it. So once one has been parsed, an event
 * whose bytes match it everywhere but in those values, each of them well
 * formed (a JSON string, a JSON number), is that JSON and needs no parse.
 */

static bool is_number(const cg_json_t *j, int tok)
{
    if (cg_json_type(j, tok) != JSMN_PRIMITIVE)
        return false;
    char c = j->js[j->tok[tok].start];
    return c == '-' || (c >= '0' && c <= '9');
}

/* The text token of a plain event, or -1. */
static int plain_text(const cg_json_t *j)
{
    int cands = cg_json_get(j, 0, "candidates");
    if (cg_json_get(j, 0, "error") >= 0 || cg_json_type(j, cands) != JSMN_ARRAY ||
        j->tok[cands].size != 1)
        return -1;
    int cand = cands + 1, gm = cg_json_get(j, cand, "groundingMetadata");
    if (cg_json_get(j, cand, "finishReason") >= 0 ||
        (gm >= 0 && (!is_object(j, gm) || j->tok[gm].size)))
        return -1;
    int parts = cg_json_get(j, cg_json_get(j, cand, "content"), "parts");
    if (cg_json_type(j, parts) != JSMN_ARRAY || j->tok[parts].size != 1 ||
        cg_json_type(j, parts + 1) != JSMN_OBJECT || j->tok[parts + 1].size != 1)
        return -1;
    int text = cg_json_get(j, parts + 1, "text");
    return cg_json_is_str(j, text) ? text : -1;
}

/* Which numbers of j (at tokens tok[0..n)) differ from the skeleton's: the
 * skeleton's changes, and those whose bytes changed now. None is known to
 * change when the two have not the same numbers. */
static uint32_t changed(const skeleton_t *k, const cg_json_t *j, const int *tok, size_t n)
{
    if (!k->ok || k->nnum != n)
        return 0;
    uint32_t vary = k->vary;
    for (size_t i = 0; i < n; i++) {
        cg_span_t now = cg_json_raw(j, tok[i]);
        size_t was = k->num[i][1] - k->num[i][0];
        if (now.n != was || memcmp(now.p, k->bytes.p + k->num[i][0], was) != 0)
            vary |= 1u << i;
    }
    return vary;
}

/* Keeps a plain event (s->in, one data line) as the skeleton. */
static void save_skeleton(gm_t *s)
{
    const cg_json_t *j = &s->in.json;
    skeleton_t *k = &s->skel;
    int text = plain_text(j), tok[SKEL_NUMBERS];
    size_t n = 0;
    for (int i = 1; text >= 0 && i < j->ntok; i++)
        if (is_number(j, i) && (n == SKEL_NUMBERS ? (text = -1) : (tok[n++] = i, 0)))
            break;
    if (text < 0 || j->len - (size_t)(j->tok[text].end - j->tok[text].start) > SKEL_MAX) {
        k->ok = false;
        return;
    }
    uint32_t vary = changed(k, j, tok, n);
    int usage = cg_json_get(j, 0, "usageMetadata");
    int prompt = cg_json_get(j, usage, "promptTokenCount");
    int total = cg_json_get(j, usage, "totalTokenCount");
    k->ok = false;
    k->nholes = 0;
    k->hole[k->nholes++] = (hole_t){(size_t)j->tok[text].start, (size_t)j->tok[text].end, H_TEXT};
    for (size_t i = 0; i < n; i++) {
        k->num[i][0] = (size_t)j->tok[tok[i]].start;
        k->num[i][1] = (size_t)j->tok[tok[i]].end;
        if (!(vary >> i & 1))
            continue;
        if (k->nholes == SKEL_HOLES)
            return;
        hole_kind_t kind = tok[i] == prompt ? H_PROMPT : tok[i] == total ? H_TOTAL : H_NUMBER;
        k->hole[k->nholes++] = (hole_t){k->num[i][0], k->num[i][1], kind};
    }
    /* In the order of the bytes: the text among the numbers. */
    for (size_t h = 1; h < k->nholes && k->hole[h].start < k->hole[h - 1].start; h++) {
        hole_t t = k->hole[h];
        k->hole[h] = k->hole[h - 1];
        k->hole[h - 1] = t;
    }
    k->nnum = n;
    k->vary = vary;
    k->usage = is_object(j, usage);
    k->prompt = cg__view_count(j, prompt, 0);
    k->total = cg__view_count(j, total, 0);
    k->bytes.len = 0;
    cg_buf_put(&k->bytes, j->js, j->len);
    k->ok = true;
}

/* A count as the full read takes it (cg__view_count(), default 0): digits only here,
 * anything else is left to the full read (-1). */
static double digits(const char *p, size_t n)
{
    if (n == 0 || n > 15)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    return (double)v;
}

/* Reads a plain event that matches the skeleton; false when it does not. */
static bool fast_event(cg_xform_t *x, gm_t *s, const cg_sse_event_t *ev)
{
    const skeleton_t *k = &s->skel;
    if (!k->ok || ev->ndata != 1 || ev->nother != 0)
        return false;
    const char *d = ev->data.p, *t = k->bytes.p;
    size_t dn = ev->data.n, di = 0, ti = 0;
    cg_span_t text = {NULL, 0};
    double prompt = k->prompt, total = k->total;
    for (size_t h = 0; h < k->nholes; h++) {
        size_t lit = k->hole[h].start - ti, n;
        if (dn - di < lit || memcmp(d + di, t + ti, lit) != 0)
            return false;
        di += lit;
        ti = k->hole[h].end;
        if (k->hole[h].kind == H_TEXT) {
            if ((n = cg__view_string_len(d + di, dn - di)) > dn - di)
                return false;
            text = cg_span(d + di, n);
        } else if ((n = cg__view_number_len(d + di, dn - di)) == 0) {
            return false;
        } else if (k->hole[h].kind != H_NUMBER) {
            double v = digits(d + di, n);
            if (v < 0)
                return false;
            *(k->hole[h].kind == H_PROMPT ? &prompt : &total) = v;
        }
        di += n;
    }
    if (dn - di != k->bytes.len - ti || memcmp(d + di, t + ti, dn - di) != 0)
        return false;
    if (k->usage) {
        s->prompt = prompt;
        s->total = total;
    }
    if (text.n) {
        note_text(s, text, false);
        cg__xform_content(x, 0, text);
    }
    return true;
}

/* --- Stream events --------------------------------------------------------- */

/* An error object's status, the code SPEC §6a names, when it has one. */
static bool has_status(const cg_json_t *j, int status)
{
    return cg_json_is_str(j, status) && cg_json_raw(j, status).n > 0;
}

/* SPEC §6's error event, with what came before it first. */
static void fail(cg_xform_t *x, gm_t *s, const cg_json_t *j, int err)
{
    int msg = cg_json_get(j, err, "message"), status = cg_json_get(j, err, "status");
    int code = cg_json_get(j, err, "code");
    char num[32];
    cg_span_t c = CG_SPAN_LIT("\"upstream_error\"");
    double v;
    if (has_status(j, status)) {
        c = cg__view_str(j, status, NULL);
    } else if (cg_json_type(j, code) == JSMN_PRIMITIVE && cg_json_number(j, code, &v) &&
               v == (double)(int64_t)v && v > -1e15 && v < 1e15) {
        c = cg_span(num, (size_t)snprintf(num, sizeof(num), "\"%lld\"", (long long)v));
    }
    cg_span_t m = cg__view_str(j, msg, "\"the upstream reported an error\"");
    s->over = true;
    /* The object's strings are in s->in's text, which the references
     * and the finish chunk below do not touch: they parse s->ground. */
    cg_buf_t copy = {0};
    cg_buf_put(&copy, m.p, m.n);
    size_t mn = copy.len;
    cg_buf_put(&copy, c.p, c.n);
    cg__view_give_back(x, &s->in);
    put_refs(x, s);
    put_finish(x, s);
    cg__xform_error(x, cg_span(copy.p, mn), cg_span(copy.p + mn, copy.len - mn));
    cg_buf_free(&copy);
}

/* A part with "thought": true: a thought summary, not visible text. */
static bool is_thought(const cg_json_t *j, int part)
{
    int t = cg_json_get(j, part, "thought");
    return cg_json_type(j, t) == JSMN_PRIMITIVE && j->js[j->tok[t].start] == 't';
}

/* The visible text parts of content token `content`: each to the client,
 * its bytes counted. */
static void put_parts(cg_xform_t *x, gm_t *s, const cg_json_t *j, int content)
{
    int parts = cg_json_get(j, content, "parts");
    if (cg_json_type(j, parts) != JSMN_ARRAY)
        return;
    int n = j->tok[parts].size;
    for (int k = 0, p = parts + 1; k < n; k++, p = cg_json_skip(j, p)) {
        int text = cg_json_get(j, p, "text");
        if (!cg_json_is_str(j, text) || cg_json_raw(j, text).n == 0 || is_thought(j, p))
            continue;
        cg_span_t raw = cg_json_raw(j, text);
        note_text(s, raw, false);
        cg__xform_content(x, 0, raw);
    }
}

static void take_usage(gm_t *s, const cg_json_t *j)
{
    int u = cg_json_get(j, 0, "usageMetadata");
    if (!is_object(j, u))
        return;
    /* Zero counts are left out: absent is 0. */
    s->prompt = cg__view_count(j, cg_json_get(j, u, "promptTokenCount"), 0);
    s->total = cg__view_count(j, cg_json_get(j, u, "totalTokenCount"), 0);
}

static void take_meta(cg_xform_t *x, const cg_json_t *j)
{
    cg__view_meta(x, j, cg_json_get(j, 0, "responseId"), cg_json_get(j, 0, "modelVersion"));
}

/* One GenerateContentResponse of a stream. */
static void on_response(cg_xform_t *x, gm_t *s)
{
    const cg_json_t *j = &s->in.json;
    int err = cg_json_get(j, 0, "error");
    if (is_object(j, err)) {
        fail(x, s, j, err);
        return;
    }
    take_meta(x, j);
    take_usage(s, j);
    cg__view_role(x, &s->started);
    int cands = cg_json_get(j, 0, "candidates");
    if (cg_json_type(j, cands) != JSMN_ARRAY || j->tok[cands].size == 0) {
        int block = cg_json_get(j, cg_json_get(j, 0, "promptFeedback"), "blockReason");
        if (cg_json_is_str(j, block))
            s->finish = "content_filter";
        return;
    }
    int cand = cands + 1;
    put_parts(x, s, j, cg_json_get(j, cand, "content"));
    keep_grounding(s, j, cg_json_get(j, cand, "groundingMetadata"));
    int fr = cg_json_get(j, cand, "finishReason");
    if (cg_json_is_str(j, fr))
        s->finish = finish_reason(j, fr);
}

/* Can a line be part of a JSON object written on lines of its own? Such
 * lines start with white space, a bracket, a brace or a quote; an SSE field
 * (data, event, id, retry) or a comment never does. */
static bool json_line(char c)
{
    return c == ' ' || c == '\t' || c == '{' || c == '}' || c == '[' || c == ']' || c == '"';
}

/* Appends the lines of p[0..n) that may be part of a JSON object to
 * s->raw; returns whether there was any. */
static bool json_lines(gm_t *s, const char *p, size_t n)
{
    bool any = false;
    for (const char *end = p + n; p < end;) {
        const char *e = p;
        while (e < end && *e != '\r' && *e != '\n')
            e++;
        while (e < end && (*e == '\r' || *e == '\n'))
            e++;
        if (json_line(*p)) {
            cg_buf_put(&s->raw, p, (size_t)(e - p));
            any = true;
        }
        p = e;
    }
    return any;
}

/* Lines without a field name: an error object once they parse as one. */
static void try_raw(cg_xform_t *x, gm_t *s)
{
    if (s->raw.len == 0)
        return;
    if (cg__view_parse_bytes(x, &s->in, s->raw.p, s->raw.len)) {
        int err = cg_json_get(&s->in.json, 0, "error");
        s->raw.len = 0;
        if (is_object(&s->in.json, err)) {
            fail(x, s, &s->in.json, err);
            return;
        }
        x->stats.malformed++;
    } else if (s->raw.len > x->cfg.max_event) {
        s->raw.len = 0;
        x->stats.malformed++;
    }
    cg__view_give_back(x, &s->in);
}

static void on_event(cg_xform_t *x, void *state, const cg_sse_event_t *ev)
{
    gm_t *s = state;
    if (s->over)
        return; /* a holding profile has not ended the stream yet; the answer has */
    if (ev->ndata > 0) {
        if (s->raw.len) { /* lines that never made an object */
            x->stats.malformed++;
            s->raw.len = 0;
        }
        if (!fast_event(x, s, ev)) {
            if (cg__view_parse(x, &s->in, ev)) {
                on_response(x, s);
                if (!s->over && ev->ndata == 1)
                    save_skeleton(s);
            } else {
                x->stats.malformed++;
            }
            if (!s->over)
                cg__view_give_back(x, &s->in);
        }
    }
    if (s->over || ev->nother == 0)
        return;
    if (json_lines(s, ev->raw.p + ev->lead, ev->raw.n - ev->lead))
        try_raw(x, s);
    else if (ev->ndata == 0)
        cg__view_ping(x); /* a comment, a keep-alive: the client sees traffic */
}

/* The end of the body: an error object on its last lines, or the normal
 * end: the references, the finish chunk (the transformer adds [DONE]).
 * Without a finish, the transformer ends the stream as truncated. */
static void on_end(cg_xform_t *x, void *state, cg_span_t pending)
{
    gm_t *s = state;
    if (s->over)
        return;
    if (pending.n && json_lines(s, pending.p, pending.n)) {
        try_raw(x, s);
        if (s->over)
            return;
        if (s->raw.len) {
            x->stats.malformed++;
            s->raw.len = 0;
        }
    }
    put_refs(x, s);
    put_finish(x, s);
}

/* --- Non-streaming bodies ------------------------------------------------------ */

/* Appends the references of support u that offset group g has not
 * inserted yet: a number once at an offset (each chunk has its own). */
static void put_support_refs(gm_t *s, const support_t *u, uint64_t g, cg_buf_t *chat)
{
    for (uint32_t q = 0; q < u->n; q++) {
        uint32_t i = s->idx[u->first + q];
        if (i == NO_CHUNK || !cited(s->num[i]) || s->stamp[i] == g + 1)
            continue;
        s->stamp[i] = g + 1;
        cg_buf_printf(chat, "[%u]", s->num[i]);
    }
}

/* The body's text (s->text) with each support's references inserted at its
 * endIndex, JSON-escaped. */
static void put_cited_text(gm_t *s, cg_buf_t *chat)
{
    size_t from = 0, n = s->nchunk ? s->nchunk : 1;
    s->stamp = cg_xrealloc(s->stamp, n * sizeof(uint64_t));
    memset(s->stamp, 0, n * sizeof(uint64_t));
    for (size_t k = 0, g = 0; k < s->nuse; g++) {
        uint64_t end = s->use[k].end;
        cg_json_put_escaped(chat, s->text.p + from, (size_t)end - from);
        from = (size_t)end;
        for (; k < s->nuse && s->use[k].end == end; k++)
            put_support_refs(s, &s->use[k], g, chat);
    }
    cg_json_put_escaped(chat, s->text.p + from, s->text.len - from);
}

/* Decodes the visible text of candidate cand into s->text. */
static void body_text(gm_t *s, const cg_json_t *j, int cand)
{
    int parts = cg_json_get(j, cg_json_get(j, cand, "content"), "parts");
    s->text.len = 0;
    cg_buf_reserve(&s->text, 1);
    if (cg_json_type(j, parts) != JSMN_ARRAY)
        return;
    int n = j->tok[parts].size;
    for (int k = 0, p = parts + 1; k < n; k++, p = cg_json_skip(j, p)) {
        int text = cg_json_get(j, p, "text");
        if (cg_json_is_str(j, text) && !is_thought(j, p))
            note_text(s, cg_json_raw(j, text), true);
    }
}

/* A failed answer: SPEC §6's error, as a body. */
static void put_error(const cg_json_t *j, int err, cg_buf_t *chat)
{
    int msg = cg_json_get(j, err, "message"), status = cg_json_get(j, err, "status");
    cg__view_error_body(chat, cg__view_str(j, msg, "\"the upstream reported an error\""),
                        has_status(j, status) ? cg__view_str(j, status, NULL)
                                              : CG_SPAN_LIT("\"upstream_error\""));
}

static void put_body(cg_xform_t *x, gm_t *s, cg_buf_t *chat)
{
    const cg_json_t *j = &s->in.json;
    take_meta(x, j);
    cg__view_body_open(x, chat);
    const char *finish = NULL;
    int cands = cg_json_get(j, 0, "candidates");
    if (cg_json_type(j, cands) == JSMN_ARRAY && j->tok[cands].size > 0) {
        int cand = cands + 1, fr = cg_json_get(j, cand, "finishReason");
        body_text(s, j, cand);
        keep_grounding(s, j, cg_json_get(j, cand, "groundingMetadata"));
        s->nuse = 0;
        if (s->ground.len)
            number_sources(x, s);
        put_cited_text(s, chat);
        finish = cg_json_is_str(j, fr) ? finish_reason(j, fr) : NULL;
    } else if (cg_json_is_str(j,
                              cg_json_get(j, cg_json_get(j, 0, "promptFeedback"), "blockReason"))) {
        finish = "content_filter";
    }
    bool usage = is_object(j, cg_json_get(j, 0, "usageMetadata"));
    take_usage(s, j);
    cg_view_usage_t u = usage_of(s);
    cg__view_body_end(chat, finish, usage ? &u : NULL);
}

static int on_body(cg_xform_t *x, void *state, const char *body, size_t len, cg_buf_t *chat)
{
    gm_t *s = state;
    if (!cg__view_parse_bytes(x, &s->in, body, len)) {
        cg__view_give_back(x, &s->in);
        return -1;
    }
    int err = cg_json_get(&s->in.json, 0, "error");
    if (is_object(&s->in.json, err))
        put_error(&s->in.json, err, chat);
    else
        put_body(x, s, chat);
    cg__view_give_back(x, &s->in);
    return 0;
}

const cg_dialect_view_t cg__gemini_view = {
    .state_size = sizeof(gm_t),
    .state_free = state_free,
    .event = on_event,
    .end = on_end,
    .body = on_body,
};

const cg_dialect_t cg__dialect_gemini = {
    .name = "gemini",
    .request = cg__gemini_request,
    .path = cg__gemini_path,
    .forwards = forwards,
    .headers = headers,
    .view = &cg__gemini_view,
};
