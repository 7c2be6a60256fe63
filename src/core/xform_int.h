/*
 * Transformer internals: the per-stream state that the transformer
 * (xform.c), the writers it shares with the profiles (emit.c), the profile
 * hooks (src/profiles/) and tracking (track.c) read. Only xform.c changes
 * the fields of the stream itself; profiles keep what is theirs in their own
 * state (`state` below and cg_choice_t.state).
 */
#ifndef CITEGATE_XFORM_INT_H
#define CITEGATE_XFORM_INT_H

#include "citegate/dialect.h"
#include "citegate/evstream.h"
#include "citegate/json.h"
#include "citegate/sse.h"
#include "citegate/xform.h"

#define CG_XFORM_TEMPLATE_MAX 4096
#define CG_XFORM_TEMPLATE_HOLES 4

/* A top-level scalar member's value in the template: tpl[start, end)
 * (16 bits hold CG_XFORM_TEMPLATE_MAX; this lives in every stream). */
typedef struct cg_tpl_hole {
    uint16_t start, end;
    bool str;
} cg_tpl_hole_t;
_Static_assert(CG_XFORM_TEMPLATE_MAX <= UINT16_MAX, "template offsets are 16 bits");

typedef struct cg_choice {
    cg_ref_t ref;
    bool emptied;  /* this event's content already went out in chunks of our own */
    char head[16]; /* the first content bytes (tracking skips "I do not know") */
    uint8_t headlen;
    void *state; /* the profile's choice_size bytes, or NULL */
} cg_choice_t;

/* Data bytes [start, end) that a rewritten event or body leaves out. */
typedef struct cg_cut {
    size_t start, end;
} cg_cut_t;

/* A distinct reference: (form << 16 | N), and how often it was seen. */
typedef struct cg_refrec {
    uint32_t code;
    uint32_t count;
} cg_refrec_t;

/* The form of a citation counted as referenced once, with no text of its
 * own (cg__xform_mention): it counts whatever the stream's style. */
#define CG_REFREC_MENTION 8u

/* The buffers a dialect view writes through: allocated with the view
 * (cg_xform_set_dialect), so that an openai stream, most of them, does not
 * carry them. */
typedef struct cg_xform_dv {
    cg_buf_t synth;                 /* the view's chunk being written */
    cg_buf_t chead;                 /* `data: {…,"content":"` of cg__xform_content's chunks, */
    size_t chead_index, chead_meta; /* made for this choice and these meta lengths */
    /* The view's finished chunks, where they stay until the caller's next
     * call: the transformer refers to them as to the caller's input
     * instead of copying them. Blocks are reused call after call. */
    cg_buf_t *kept;
    size_t nkept, kept_cap, kept_cur;
    cg_buf_t dbody; /* a non-streaming body, as a chat completion */
    cg_evs_t *evs;  /* the event-stream reader of a view that reads one */
} cg_xform_dv_t;

struct cg_xform {
    cg_xform_cfg_t cfg;
    const cg_request_t *req;
    cg_sse_t sse;
    cg_json_t json;
    cg_cites_t cites;
    bool cites_set;
    cg_ref_style_t style; /* the forms still possible while it is open (auto) */
    bool auto_style;      /* CITEGATE_REF_STYLE=auto: settle_style() decides */
    uint8_t first_ref;    /* auto: form of the first [N] or [citation:N] seen, or 0 */

    cg_choice_t *choices;
    size_t nchoices;
    cg_refrec_t *refs; /* first-reference order */
    size_t nrefs, refs_cap;
    uint64_t *url_hash; /* annotation-sourced citations: hash of citation i's url */
    size_t url_hash_cap;
    cg_buf_t hold;   /* a holds_stream profile's stream, until its end */
    size_t max_link; /* longest citation link, once citations are known */
    bool max_link_known;
    /* Splitting a huge content into chunks of our own (SPEC §6 Fidelity 5). */
    bool splitting, split_open;
    size_t split_index, split_from;

    cg_buf_t meta_id, meta_created, meta_model; /* raw JSON text */
    cg_buf_t scratch;                           /* multi-line data, LF -> space */
    cg_buf_t tpl;       /* bytes around the content string of the last plain chunk */
    size_t tpl_prefix;  /* tpl[0..tpl_prefix) precedes the content string */
    size_t tpl_choice;
    bool tpl_valid;
    /* Values after the content that may differ from chunk to chunk (a
     * sequence number, OpenAI's "obfuscation" padding): their places in tpl. */
    cg_tpl_hole_t tpl_hole[CG_XFORM_TEMPLATE_HOLES];
    uint8_t tpl_nholes;
    cg_xform_stats_t stats;
    bool ended;     /* citation events and the end of stream went out */
    cg_end_t end_why; /* how the upstream ended, once cg_xform_finish is called (a view's
                         `end` hook reads it: only CG_END_EOF is an answer's end) */
    bool body_mode; /* a non-streaming body */

    /* Per call / per event. */
    cg_out_t *out;
    cg_choice_t *cur_ch;        /* the choice whose content is being written */
    void (*put)(cg_xform_t *x, const char *p, size_t n); /* data bytes out */
    size_t cur;                 /* next data byte to copy */
    cg_cut_t *cuts;             /* removed upstream "event" members, in data order */
    size_t ncuts, cuts_cap;
    size_t next_cut;            /* the first cut that the output has not passed */
    bool changed;               /* this event's data must be rewritten */
    bool ev_stable;             /* the event lies in the caller's input */
    bool data_stable;           /* data is a span of the event (one data line) */
    bool content_stable;        /* content bytes may be passed by reference */
    bool last_raw;              /* the previous event went out unchanged */

    void *state; /* the profile's state_size bytes, or NULL */

    /* The upstream's dialect, when it is not openai (cg_xform_set_dialect). */
    const cg_dialect_view_t *view;
    void *view_state;
    const cg_dialect_req_t *dreq; /* what the request side knew, or NULL */
    int64_t created;              /* the client's "created" (Unix seconds) */
    cg_xform_dv_t *dv;            /* the view's buffers, with the view only */
};

/* Whether reference record r names a citation the answer cites: one of the
 * stream's style, or a mention, referenced at least once (a reserved place
 * whose reference never came cites nothing). */
static inline bool cg__refrec_cites(const cg_xform_t *x, const cg_refrec_t *r)
{
    uint32_t form = r->code >> 16;
    return r->count > 0 && (form == CG_REFREC_MENTION || form == (uint32_t)x->style);
}

static inline unsigned cg__refrec_n(const cg_refrec_t *r)
{
    return r->code & 0xFFFF;
}

/* --- For dialect views (citegate/dialect.h) ---------------------------------
 *
 * A view writes chunks of its own: cg__xform_chunk_begin() returns a buffer
 * that holds `data: `; the view appends the chunk's JSON (or `[DONE]`),
 * then cg__xform_chunk_end() puts it through the transformer as if the
 * upstream had sent it. */
cg_buf_t *cg__xform_chunk_begin(cg_xform_t *x);
void cg__xform_chunk_end(cg_xform_t *x);
/* A content chunk of choice `index` whose content is `raw`, valid JSON
 * string bytes (they are copied): what cg__xform_chunk_end makes of
 * `{"id",…,"choices":[{"index":index,"delta":{"content":raw},"finish_reason":null}]}`,
 * the same bytes, but written at once instead of parsed back (most of a
 * view's chunks are these). */
/* Parses an event's data into j; false when it is not one JSON object.
 * SSE joins several data lines with LF: white space between JSON tokens,
 * and not JSON inside a string (a raw control byte). Whatever of it is
 * written goes on one data line, so j then reads a copy in buf with each
 * LF a space: the same length, so the tokens hold. */
bool cg__xform_parse_data(cg_json_t *j, const cg_sse_event_t *ev, cg_buf_t *buf);
void cg__xform_content(cg_xform_t *x, size_t index, cg_span_t raw);
/* The tokens a view parses its upstream's event with: borrowed from the
 * call's cg_out_t (cg_json_borrow) and given back before the view's hook
 * returns, so that a stream keeps none between calls. */
static inline cg_json_store_t *cg__xform_view_tokens(cg_xform_t *x)
{
    return &x->out->toks[1];
}
/* Appends the members "id", "object", "created" and "model" of the
 * stream's chunks (no braces). */
void cg__xform_chunk_meta(const cg_xform_t *x, cg_buf_t *b);
/* Sets the stream's id and model (raw JSON values, quotes included; the
 * first non-empty ones win); "created" is cg_xform_set_dialect's. */
void cg__xform_meta(cg_xform_t *x, cg_span_t id, cg_span_t model);
/* Adds a citation the upstream names (request-side sources are adopted
 * first, so their ids stay theirs). in->id 0 takes the next number after
 * every number used so far. Returns the citation's number, or 0 when the
 * table is full. */
unsigned cg__xform_cite(cg_xform_t *x, cg_cite_in_t *in);
/* More of the snippet of citation n, which the upstream sends in pieces
 * (cg_cites_append_content). */
void cg__xform_cite_more(cg_xform_t *x, unsigned n, cg_span_t content);
/* Citation n counts as referenced once, here, with no text of its own (SPEC
 * §6, annotation-sourced citations), in the answer of choice `choice`; the
 * profile's mention hook hears of it. Later mentions of n add nothing. */
void cg__xform_mention(cg_xform_t *x, size_t choice, unsigned n);
/* Citation n will be referenced (`[n]`, the stream's style) in content yet
 * to come, of a body read whole: it takes its place in first-reference
 * order now, before what comes later in the upstream's order is mentioned,
 * and counts nothing until its reference comes. */
void cg__xform_reserve(cg_xform_t *x, size_t choice, unsigned n);
/* Ends the stream with SPEC §6's error event: held bytes and the profile's
 * citation events first, no [DONE]. message and code are raw JSON values. */
void cg__xform_error(cg_xform_t *x, cg_span_t message, cg_span_t code);

#endif
