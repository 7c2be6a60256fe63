/*
 * Stream transformer: upstream response bytes in, client response bytes out
 * (SPEC §6-7). Pure: no sockets, no event loop. What it writes around the
 * upstream's bytes is the configured profile's (citegate/profile.h).
 *
 * Output is a list of segments. Unchanged bytes are spans into the caller's
 * input (zero copy); new bytes live in the output's arena. Segments are valid
 * until the next call that takes the same cg_out_t, and spans into the input
 * as long as the caller keeps that input: write them out (or copy them)
 * before feeding more.
 *
 * Memory per stream is bounded: the SSE tokenizer's straddle buffer
 * (max_event), the citation
 * table (see cite.h; and a url hash of 8 bytes per annotation-sourced
 * citation), at most CG_XFORM_MAX_CHOICES reference finders and
 * CG_XFORM_MAX_REFS distinct references, and the profile's own state (each
 * profile states its bound). A stream keeps no JSON tokens: each call
 * borrows the cg_out_t's (up to CG_XFORM_MAX_TOKENS for one event, at most
 * CG_JSON_STORE_KEEP kept between calls). The arena grows with one call's
 * input only and is trimmed between calls, and so do the blocks that keep a dialect view's
 * chunks for the call's output. An event over max_event is never held: it goes
 * out unchanged as it streams in, and the events around it are transformed
 * as usual (SPEC §6 rule 6). A profile that holds the stream holds at most
 * max_event bytes (beyond it the whole stream goes through unchanged).
 */
#ifndef CITEGATE_XFORM_H
#define CITEGATE_XFORM_H

#include "citegate/cite.h"
#include "citegate/common.h"
#include "citegate/dialect.h"
#include "citegate/json.h"
#include "citegate/profile.h"
#include "citegate/ref.h"
#include "citegate/request.h"

#define CG_XFORM_MAX_TOKENS  (1u << 20)
#define CG_XFORM_MAX_CHOICES 128
#define CG_XFORM_MAX_REFS    1024
#define CG_XFORM_LINE_MAX    65536 /* longest SSE line citegate writes (SPEC §6) */
#define CG_XFORM_SPLIT_CHUNK 32768 /* content bytes per chunk when one is split */
#define CG_SSE_MAX_EVENT_DEFAULT (4u << 20)

typedef struct cg_xform_cfg {
    const cg_profile_t *profile; /* what to write (citegate/profile.h) */
    cg_ref_style_t style; /* CG_REF_DOC, _NUMERIC or _CITATION; CG_REF_ANY for auto */
    size_t max_doc_bytes;
    bool scores;          /* AZURE_AI_INCLUDE_SEARCH_SCORES */
    size_t max_event;     /* largest upstream SSE event the transformer parses; a
                             larger one goes out unchanged (CITEGATE_MAX_EVENT_BYTES) */
} cg_xform_cfg_t;

/* The defaults of SPEC §3, with the given profile. */
void cg_xform_cfg_default(cg_xform_cfg_t *cfg, const cg_profile_t *profile);

typedef struct cg_out_seg {
    const char *p; /* NULL while the bytes are in the arena (at off) */
    size_t off;
    size_t n;
} cg_out_seg_t;

/* What a call writes, and the scratch it works in. A caller that keeps one
 * per worker for all its streams (calls never nest) pays for the arena's
 * and the tokens' growth once, not per stream. */
typedef struct cg_out {
    cg_out_seg_t *seg;
    size_t nseg, cap;
    cg_buf_t arena;
    cg_json_store_t toks[2]; /* the transformer's and the dialect view's */
} cg_out_t;

void cg_out_free(cg_out_t *o);
size_t cg_out_len(const cg_out_t *o);

typedef enum cg_end {
    CG_END_EOF,      /* upstream closed the response normally */
    CG_END_RESET,    /* connection reset or protocol error */
    CG_END_TIMEOUT,  /* idle timeout */
    CG_END_SHUTDOWN, /* drain time ran out */
} cg_end_t;

typedef struct cg_xform_stats {
    uint64_t events_in, events_out, malformed;
    uint64_t oversized; /* events over max_event, forwarded unchanged (SPEC §6 rule 6) */
    uint64_t refs_linked, refs_unlinked, refs_out_of_range;
    uint64_t citations_emitted;
    unsigned citations_removed; /* structured: invalid citations dropped */
    bool structured;            /* structured: an answer was checked */
    bool saw_finish, saw_done, truncated;
    bool passthrough; /* a holds_stream profile's stream passed max_event: sent unchanged */
    /* An event-stream upstream broke its framing: the stream ended with
     * the error event, and the upstream connection must be closed. */
    bool framing_error;
} cg_xform_stats_t;

typedef struct cg_xform cg_xform_t;

/* req may be NULL; it must outlive the transformer. */
cg_xform_t *cg_xform_new(const cg_xform_cfg_t *cfg, const cg_request_t *req);
void cg_xform_free(cg_xform_t *x);
/* The upstream speaks the dialect whose answer view is `view`
 * (cg_dialect_view(); NULL: openai), before the first feed or body (SPEC
 * §6a). The caller looks the view up, as it does the profile: the views call
 * the transformer, so the transformer must not call the dialect registry.
 * dreq (may be NULL) must outlive the transformer; created is the "created"
 * of the client's chunks when the upstream gives none. */
void cg_xform_set_dialect(cg_xform_t *x, const cg_dialect_view_t *view,
                          const cg_dialect_req_t *dreq, int64_t created);

/* Streaming body (SSE): feed every read, then finish once. Returns 0. */
int cg_xform_feed(cg_xform_t *x, const char *in, size_t len, cg_out_t *out);
int cg_xform_finish(cg_xform_t *x, cg_end_t why, cg_out_t *out);
/* The last read and the end in one call: the same bytes as feed then
 * finish, in one output, so the caller can write them at once. */
int cg_xform_feed_finish(cg_xform_t *x, const char *in, size_t len, cg_end_t why, cg_out_t *out);

/* Non-streaming body (one JSON document). Returns 0, or -1 when the body is
 * not a JSON object (it is then copied out unchanged). */
int cg_xform_body(cg_xform_t *x, const char *body, size_t len, cg_out_t *out);

const cg_xform_stats_t *cg_xform_stats(const cg_xform_t *x);
const cg_cites_t *cg_xform_cites(const cg_xform_t *x);

#endif
