/*
 * Upstream dialects (SPEC §6a): the API citegate speaks to its upstream.
 * Clients always send OpenAI chat completions; with an `anthropic` or
 * `responses` upstream, the client's request becomes an Anthropic Messages
 * or an OpenAI Responses request, sent to another path with other headers.
 *
 * Request side (src/dialects/request.c), pure: bytes in, bytes out, no
 * I/O. The shell asks it for the upstream path, which client headers to
 * forward, the anthropic key header, and the upstream body (or the 400 that
 * refuses the request, in which case nothing is sent upstream).
 *
 * Answer side: a dialect's view (cg_dialect_view_t, below) reads the
 * upstream's events or body and hands the transformer chat-completion
 * chunks of its own, so the finder, the profiles and the end-of-stream rules
 * are those of the openai dialect. One file per dialect in src/dialects/.
 */
#ifndef CITEGATE_DIALECT_H
#define CITEGATE_DIALECT_H

#include "citegate/common.h"
#include "citegate/request.h"

typedef enum cg_dialect {
    CG_DIALECT_OPENAI = 0, /* chat completions, as the client sent them */
    CG_DIALECT_ANTHROPIC,  /* Anthropic Messages */
    CG_DIALECT_RESPONSES,  /* OpenAI Responses */
} cg_dialect_t;

/* The accepted names, for messages (CITEGATE_UPSTREAM_DIALECT). */
#define CG_DIALECT_NAMES "openai, anthropic, responses"

/* The anthropic-version header value citegate sends to an anthropic upstream. */
#define CG_ANTHROPIC_VERSION "2023-06-01"

/* "openai", "anthropic" or "responses" (exact, lower case); false leaves *out untouched. */
bool cg_dialect_parse(const char *s, cg_dialect_t *out);
const char *cg_dialect_name(cg_dialect_t d);

/* The upstream path of a chat request, appended to the base path of
 * CITEGATE_UPSTREAM in place of the client's path and query, whatever the
 * chat route: "/v1/messages" (anthropic), "/v1/responses" (responses).
 * NULL for openai: the client's path and query are kept. */
const char *cg_dialect_path(cg_dialect_t d);

/* Whether the client's header field `name` (any case) goes upstream on a
 * chat route. anthropic: not `api-key` nor `authorization` (the key goes
 * as x-api-key), nor `x-api-key` and `anthropic-version`, which citegate
 * sets itself, once each. Every other field, and every field with the other
 * dialects: yes. The shell's own rules (hop-by-hop fields, Host, ...) apply
 * first. */
bool cg_dialect_forwards_header(cg_dialect_t d, cg_span_t name);

/* The anthropic x-api-key value: the client's `api-key` value when it is
 * not empty, else the credentials of its `Authorization: Bearer` value
 * (scheme in any case); surrounding white space is trimmed. Pass {NULL, 0}
 * for a field the client did not send. The result points into the
 * arguments; {NULL, 0} means there is no key: send no x-api-key. */
cg_span_t cg_dialect_api_key(cg_span_t api_key, cg_span_t authorization);

/* A refused request: answered `400` with cg_dialect_err_json(), type
 * invalid_request_error. */
typedef struct cg_dialect_err {
    /* "unsupported_parameter": something the dialect cannot carry (tools,
     * n > 1, a tool message, assistant tool_calls, a non-text content part);
     * "invalid_json": the body is not a JSON object;
     * "missing_required_parameter", "invalid_type", "invalid_value": the
     * messages or a kept field are not what chat completions allow, or no
     * message is a user or assistant message. */
    const char *code;
    /* The parameter: its name for unsupported_parameter ("tools",
     * "tool_calls", "image_url", ...; message says where; a content part
     * type that is not a plain name: its path, "messages[1].content[0].type"),
     * else a path such as "messages[2].content"; "" when none. */
    char param[64];
    char message[256]; /* one sentence that names param */
} cg_dialect_err_t;

#define CG_DIALECT_ERR_STATUS 400

/* Appends {"error":{"message","type":"invalid_request_error","param","code"}}
 * (param null when empty). */
void cg_dialect_err_json(const cg_dialect_err_t *e, cg_buf_t *out);

/* What the shell sends upstream, and what the answer side must know. */
typedef struct cg_dialect_req {
    cg_buf_t body;      /* the upstream request body, a JSON object */
    bool stream;        /* the client asked for a stream ("stream": true) */
    bool include_usage; /* and "stream_options": {"include_usage": true} */
    /* anthropic: the <source> id of each document block, in document_index
     * order (owned; NULL when none). A citation with document_index k cites
     * request-side source doc_ids[k]. */
    unsigned *doc_ids;
    size_t ndocs;
} cg_dialect_req_t;

/* Translates the client's chat-completions body[0..len) for dialect d.
 *
 * `req` is the same body read by cg_request_parse() (its <source> tags
 * become anthropic document blocks; NULL: none). `model` is the model to
 * name when the body has none (an Azure deployment route's deployment
 * name; {NULL, 0}: none).
 *
 * anthropic and responses follow SPEC §6a: system and developer messages
 * (string content or text parts joined by "\n"; empty ones skipped) joined
 * by a blank line into `system` / `instructions`; user and assistant
 * messages in order, their content one string (text parts joined by "\n",
 * null as ""); max_tokens / max_output_tokens; temperature, top_p, stream
 * and model; for anthropic stop as stop_sequences, and each <source> with
 * non-empty text (whole, not cut to max_doc_bytes), in id order, as a
 * document block before the text of the last user message (whose content
 * then becomes a list, its text block left out when empty; without a user
 * message no document is sent). Nothing else is sent; strings are decoded
 * and escaped again. openai: the body as it is.
 *
 * Returns 0 with *out filled (free it with cg_dialect_req_free), or -1 with
 * *err filled and *out empty. Linear in len. */
int cg_dialect_request(cg_dialect_t d, const char *body, size_t len, const cg_request_t *req,
                       cg_span_t model, cg_dialect_req_t *out, cg_dialect_err_t *err);
void cg_dialect_req_free(cg_dialect_req_t *r);


/* --- Answer side ------------------------------------------------------------
 *
 * A view works on the transformer's internals through the functions of
 * src/core/xform_int.h (cg__xform_*): it writes chat-completion chunks of
 * its own (which then go through the transformer as if the upstream had
 * sent them), adds the citations its upstream names, and ends the stream
 * with an error. Its per-stream state is allocated zeroed and freed by the
 * transformer.
 */
struct cg_xform;
struct cg_sse_event;

typedef struct cg_dialect_view {
    size_t state_size;
    /* Frees what a state owns, not the state itself; may be NULL. */
    void (*state_free)(void *state);
    /* One complete upstream SSE event (a comment or keep-alive too). Not
     * called once the stream has ended. */
    void (*event)(struct cg_xform *x, void *state, const struct cg_sse_event *ev);
    /* The upstream response ended (any reason) before the stream did:
     * release what is held. May be NULL. */
    void (*end)(struct cg_xform *x, void *state);
    /* A non-streaming body: appends the chat completion it amounts to to
     * `chat`. Returns 0, or -1 when it is not this dialect's answer (the
     * body then goes to the client unchanged). */
    int (*body)(struct cg_xform *x, void *state, const char *body, size_t len, cg_buf_t *chat);
} cg_dialect_view_t;

/* The answer view of dialect d; NULL for openai (the transformer's own). */
const cg_dialect_view_t *cg_dialect_view(cg_dialect_t d);

#endif
