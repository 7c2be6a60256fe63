/*
 * What the transformer needs from the client's chat request (SPEC §5):
 * request-side <source> tags, whether it carries Azure data_sources, the
 * user's last question and the model it asks for (for tracking), and the
 * outputs of its `tool` messages (for the structured profile). Everything is
 * bounded by the request body, itself bounded by CITEGATE_MAX_REQUEST_BYTES.
 */
#ifndef CITEGATE_REQUEST_H
#define CITEGATE_REQUEST_H

#include "citegate/cite.h"
#include "citegate/common.h"

/* Bytes of a value in the request body: a string with its quotes. */
typedef struct cg_body_range {
    uint32_t off, len;
} cg_body_range_t;

typedef struct cg_request {
    cg_cites_t sources;    /* <source id="N"> tags, kind CG_CITES_REQUEST */
    bool has_data_sources; /* a non-empty data_sources array */
    bool stream;           /* "stream": true */
    /* The value of a data_sources member that counts as none ([], null,
     * an object...): its bytes in the body, replaced when sources are
     * injected, so the upstream never sees the member twice. Length 0:
     * no such member. */
    uint32_t data_sources_off, data_sources_len;
    char *question;        /* text of the last user message, or NULL */
    char *model;           /* "model" when it is a string (decoded), or NULL */
    size_t model_len;      /* its length: a decoded \u0000 may be inside */
    /* Each `tool` message's decoded content (owned; all of them, bounded
     * by the body), and where its content value lies in the body. */
    cg_span_t *tools;
    cg_body_range_t *tool_at;
    size_t ntools, tools_cap;
    /* The request's citation aliases (citegate/alias.h), or NULL; owned by
     * whoever made them, and outliving every reader of the request. */
    const struct cg_aliases *aliases;
} cg_request_t;

/* Reads a chat request body. Returns 0, -1 if it is not a JSON object in
 * UTF-8, or CG_REQUEST_E_DEEP if it nests deeper than CG_JSON_MAX_DEPTH. */
#define CG_REQUEST_E_DEEP (-2)
int cg_request_parse(cg_request_t *r, const char *body, size_t len, const cg_cite_opts_t *o);
void cg_request_free(cg_request_t *r);

/* Records the <source> tags of one decoded message text (exposed for tests). */
void cg_request_scan_sources(cg_cites_t *c, const char *s, size_t n, const cg_cite_opts_t *o);

/* AZURE_AI_DATA_SOURCES ready to inject (SPEC §5): an object becomes a
 * one-element array; with `scores`, each azure_search source's
 * parameters.include_contexts gains "citations" and "all_retrieved_documents"
 * (unique, other values kept; a missing list starts from Azure's default
 * ["citations","intent"]). Returns a new string, or NULL if not JSON. */
char *cg_data_sources_prepare(const char *json, bool scores);

#endif
