/*
 * What the answer views of the dialects share (cg_dialect_view_t,
 * include/citegate/dialect.h). Every view reads its upstream's JSON with
 * tokens borrowed from the call, and writes the same chat-completion
 * chunks and bodies of its own around what it reads (the role, the finish,
 * the usage, [DONE], the body's frame, the error body, the references it
 * appends where its upstream keeps citations apart from the text). Those
 * are here, once, so that a view is its own logic only: which events it
 * reads and what they mean, as a profile is (src/profiles).
 *
 * Everything here writes exactly what each view wrote before it was
 * shared: the golden, split and shared-output tests hold the bytes.
 */
#ifndef CG_DIALECTS_VIEW_H
#define CG_DIALECTS_VIEW_H

#include "core/xform_int.h"

#include <string.h>

/* --- Reading the upstream's JSON -------------------------------------------- */

/* The upstream JSON a view reads, one event or body at a time. Its tokens
 * are borrowed from the call (cg__xform_view_tokens) by cg__view_parse and
 * given back by cg__view_give_back before the view's hook returns, so a
 * stream keeps none between calls. */
typedef struct cg_view_json {
    cg_json_t json;
    cg_buf_t lines; /* an event's data of several lines, LF -> space */
} cg_view_json_t;

void cg__view_json_free(cg_view_json_t *in);
/* Parses an event's data into in->json; false when it is not a JSON
 * object. Tokens are borrowed either way: give them back. */
bool cg__view_parse(cg_xform_t *x, cg_view_json_t *in, const cg_sse_event_t *ev);
/* The same for bytes p[0..n): a body, a message's payload, raw lines. */
bool cg__view_parse_bytes(cg_xform_t *x, cg_view_json_t *in, const char *p, size_t n);
void cg__view_give_back(cg_xform_t *x, cg_view_json_t *in);

/* Is token tok a string whose bytes, as written, are lit? Upstreams write
 * their own names and types plainly, so they are not decoded. */
bool cg__view_is(const cg_json_t *j, int tok, const char *lit);
/* String token tok as its whole JSON value, quotes included; else dflt, a
 * JSON value as written (NULL: no value, {NULL, 0}). What a view passes on
 * (an id, a model, a message) goes as the upstream escaped it. */
cg_span_t cg__view_str(const cg_json_t *j, int tok, const char *dflt);
/* A number token that is a whole number, 0 <= v < 1e15 (a count, an index,
 * an offset), else dflt: so it prints as digits and indexes nothing odd. */
double cg__view_count(const cg_json_t *j, int tok, double dflt);
/* Appends string token tok, decoded, to b; returns where it starts in b,
 * its length in *len (0, and nothing appended, when tok is no string).
 * Offsets, not pointers: b may move with the next string. */
size_t cg__view_decode(cg_buf_t *b, const cg_json_t *j, int tok, size_t *len);
/* The same for the raw JSON string bytes p[0..n). */
size_t cg__view_unescape(cg_buf_t *b, const char *p, size_t n);
/* Is p[0..n) an absolute http:// or https:// URL (scheme in any case)? */
bool cg__view_absolute_url(const char *p, size_t n);
/* Appends string token tok, decoded, to b, which holds at most
 * CG_CITE_MAX_FIELD bytes in all (a citation's field); nothing when tok is
 * no string or b is full. */
void cg__view_put_field(const cg_json_t *j, int tok, cg_buf_t *b);

/* --- AWS event-stream messages ---------------------------------------------- */

/* Opens message m of a view that reads AWS's event stream (bedrock,
 * bedrock-kb): parses its payload into in. An `exception` message
 * ({"message"}) or an `error` message (its message in a header) ends the
 * stream with SPEC §6's error event, code = the exception type or error
 * code, and sets *over; once *over, nothing more is read. Returns true when
 * m is an event whose payload is a JSON object, which the view then reads
 * from in->json and gives back (cg__view_give_back); false otherwise, with
 * the tokens given back (a payload that is no JSON object is counted
 * malformed). scratch is the view's, for the error's values. */
bool cg__view_evs_event(cg_xform_t *x, cg_view_json_t *in, const cg_evs_msg_t *m, cg_buf_t *scratch,
                        bool *over);

/* The steady paths read an event without a parse when its bytes match the
 * last one's but for its text and numbers; these say where such a value
 * ends, taking exactly what the parser takes. Inline: those paths call them
 * on every event.
 *
 * The length of JSON string bytes p[0..n) up to their closing quote, or
 * n + 1 when they are not well formed (a raw control byte, an unknown or
 * cut escape) or not closed. Plain runs are skipped eight bytes at a time;
 * each stop must be the closing quote or a whole escape. */
static inline size_t cg__view_string_len(const char *p, size_t n)
{
    size_t i = cg_json_plain_len(p, n);
    while (i < n && p[i] == '\\') {
        if (++i == n)
            return n + 1;
        if (p[i] == 'u') {
            for (int k = 1; k <= 4; k++)
                if (i + k >= n || cg_hex_digit(p[i + k]) < 0)
                    return n + 1;
            i += 4;
        } else if (p[i] == '\0' || strchr("\"\\/bfnrt", p[i]) == NULL) {
            return n + 1;
        }
        i++;
        i += cg_json_plain_len(p + i, n - i);
    }
    return i < n && p[i] == '"' ? i : n + 1;
}

static inline size_t cg__view_digits_from(const char *p, size_t n, size_t i)
{
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    return i;
}

/* The length of the JSON number that p[0..n) starts with, or 0 when none
 * does: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, a leading 0 being
 * a whole integer part. */
static inline size_t cg__view_number_len(const char *p, size_t n)
{
    size_t i = n > 0 && p[0] == '-' ? 1 : 0;
    if (i == n || p[i] < '0' || p[i] > '9')
        return 0;
    i = p[i] == '0' ? i + 1 : cg__view_digits_from(p, n, i);
    if (i < n && p[i] == '.') {
        if (++i == n || p[i] < '0' || p[i] > '9')
            return 0;
        i = cg__view_digits_from(p, n, i);
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        if (++i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        if (i == n || p[i] < '0' || p[i] > '9')
            return 0;
        i = cg__view_digits_from(p, n, i);
    }
    return i;
}

/* The bedrock view's steady path (bedrock.c): the JSON string bytes of the
 * text of contentBlockDelta payload p[0..n) when it has the one shape
 * Bedrock sends text deltas in, read without a parse, else false; and
 * whether contentBlockStop payload p[0..n) has the one shape Bedrock sends
 * block stops in. Declared here for the tests that hold them to what the
 * parse reads. */
bool cg__bedrock_text_delta(const char *p, size_t n, cg_span_t *text);
bool cg__bedrock_block_stop(const char *p, size_t n);
/* The bedrock-kb view's steady path (bedrock_kb.c): the JSON string bytes
 * of the text of `output` payload p[0..n) when it is {"text":"…"} and
 * nothing else, read without a parse, else false. Here for its tests too. */
bool cg__bedrock_kb_output(const char *p, size_t n, cg_span_t *text);
/* bedrock-kb: a citation event {"citation":{X},X} (1) or
 * {X,"citation":{X}} (2), *half its nested {X}; 0 for any other. */
int cg__bedrock_kb_nested(const char *p, size_t n, cg_span_t *half);
/* The cohere view's citations read without a parse (cohere.c), for the
 * tests and the fuzz target that hold them to the parse: none are while
 * cg__cohere_fast_off, and cg__cohere_fast_reads counts those that were.
 * Per thread, so that runs side by side do not switch each other's. */
extern _Thread_local bool cg__cohere_fast_off;
extern _Thread_local uint64_t cg__cohere_fast_reads;
/* The steady path of an SSE view whose text events differ only in their
 * text (anthropic's text_delta, cohere's content-delta): the last such
 * event's data around its text. An event whose data has those bytes before
 * and after a well formed JSON string is that JSON with another text, and
 * needs no parse. */
#define CG_VIEW_TPL_MAX 512 /* bytes of an event besides its text */
typedef struct cg_view_tpl {
    cg_buf_t bytes;
    size_t pre; /* bytes[0..pre) precede the text */
    bool ok;
} cg_view_tpl_t;

/* Keeps the data of event ev, parsed into j, around its string token text
 * (no template when the event has several data lines, or the rest is over
 * CG_VIEW_TPL_MAX bytes). */
void cg__view_tpl_save(cg_view_tpl_t *t, const cg_sse_event_t *ev, const cg_json_t *j, int text);
/* Whether ev's data is the template's around a well formed string: its
 * bytes (raw JSON string bytes, no quotes) in *text. */
bool cg__view_tpl_text(const cg_view_tpl_t *t, const cg_sse_event_t *ev, cg_span_t *text);

/* One SSE event of an upstream whose events name their type (a data member
 * "type", else the `event:` field: anthropic, cohere), read into in: a
 * comment or keep-alive becomes `: ping`; data that is not a JSON object is
 * counted malformed and left out; any other event goes to the view's
 * dispatch with its type. The tokens are given back after. */
typedef void (*cg_view_dispatch_fn)(cg_xform_t *x, void *state, const cg_sse_event_t *ev,
                                    cg_span_t type);
void cg__view_typed_event(cg_xform_t *x, cg_view_json_t *in, const cg_sse_event_t *ev,
                          cg_view_dispatch_fn dispatch, void *state);

/* --- Chunks of our own ------------------------------------------------------ */

/* Sets the stream's id and model from string tokens id and model (another
 * token, or -1: none); the first non-empty ones win (cg__xform_meta). */
void cg__view_meta(cg_xform_t *x, const cg_json_t *j, int id, int model);
/* Begins a chunk of our own: `{` and the stream's id, object, created and
 * model. The view appends the rest, then calls cg__xform_chunk_end. */
cg_buf_t *cg__view_chunk(cg_xform_t *x);
/* The chunk that names the role, once: *sent says whether it went out. */
void cg__view_role(cg_xform_t *x, bool *sent);
/* A chunk with an empty delta and finish_reason `reason`. */
void cg__view_finish(cg_xform_t *x, const char *reason);
/* An answer's token counts, as chat completions name them. */
typedef struct cg_view_usage {
    double prompt, completion, total;
} cg_view_usage_t;
/* `"usage":{…}` with whole numbers (the counts are cg__view_count's). */
void cg__view_usage_members(cg_buf_t *b, const cg_view_usage_t *u);
/* The usage chunk ("choices":[]), when the client asked for one
 * (stream_options.include_usage); nothing otherwise. */
void cg__view_usage(cg_xform_t *x, const cg_view_usage_t *u);
void cg__view_done(cg_xform_t *x);
/* An SSE comment `: ping`, straight out: it carries nothing to rewrite or
 * hold, but proxies between us and the client see traffic while the model
 * thinks (some close idle streams). */
void cg__view_ping(cg_xform_t *x);

/* The references `[N]` of the numbers v[0..n), appended to b. An upstream
 * that keeps its citations apart from the text (anthropic's and bedrock's
 * blocks, Gemini's grounding) gets them written into the content as if the
 * model had, so the profile rewrites them like any numeric reference. */
void cg__view_put_refs(cg_buf_t *b, const unsigned *v, size_t n);

/* The distinct sources a block of the answer cites, in the order of their
 * first citation there, bounded: the references appended at its end. */
#define CG_VIEW_BLOCK_REFS 128
typedef struct cg_view_refs {
    unsigned n[CG_VIEW_BLOCK_REFS];
    size_t len;
} cg_view_refs_t;
/* Adds source number n, unless it is 0 (no source), already there, or the
 * block has CG_VIEW_BLOCK_REFS already (further sources get no reference). */
void cg__view_refs_add(cg_view_refs_t *r, unsigned n);

/* --- Non-streaming bodies ----------------------------------------------------- */

/* The chat completion a body amounts to, up to its content string's opening
 * quote: the stream's id, created and model, the message's role. */
void cg__view_body_open(const cg_xform_t *x, cg_buf_t *chat);
/* After the content's JSON string bytes: its closing quote, finish_reason
 * `reason` (NULL: null), the usage when u is not NULL, the end. */
void cg__view_body_end(cg_buf_t *chat, const char *reason, const cg_view_usage_t *u);
/* SPEC §6's error as a body: message and code are JSON values as written. */
void cg__view_error_body(cg_buf_t *chat, cg_span_t message, cg_span_t code);

#endif
