/*
 * Upstream dialects (SPEC §6a): the API citegate speaks to its upstream.
 * Clients always send OpenAI chat completions; with another dialect the
 * client's request becomes that API's request, sent to another path with
 * other headers, and its answer becomes chat completions again.
 *
 * A dialect is a table (cg_dialect_t): its name, its upstream path, the
 * client header fields it keeps from the upstream and the key fields it adds
 * instead, its request translation and its answer view. Every hook may be
 * NULL, which means "as the client sent it" (the openai dialect is the table
 * with none). Adding a dialect is one file in src/dialects/ that defines
 * cg__dialect_NAME, and one line in the registry (src/dialects/dialect.c).
 * The shell and the transformer call only the generic functions below: they
 * have no branch per dialect.
 *
 * Request side, pure: bytes in, bytes out, no I/O. The shell asks for the
 * upstream path, which client headers to forward, the dialect's own header
 * fields, and the upstream body (or the 400 that refuses the request, in
 * which case nothing is sent upstream). Header fields come and go through
 * spans and callbacks (cg_dialect_hdrs_t): the core never sees the shell's
 * header lists.
 *
 * Answer side: a dialect's view (cg_dialect_view_t, below) reads the
 * upstream's events or body and hands the transformer chat-completion
 * chunks of its own, so the finder, the profiles and the end-of-stream rules
 * are those of the openai dialect.
 */
#ifndef CITEGATE_DIALECT_H
#define CITEGATE_DIALECT_H

#include "citegate/common.h"
#include "citegate/request.h"

/* The anthropic-version header value citegate sends to an anthropic upstream. */
#define CG_ANTHROPIC_VERSION "2023-06-01"

struct cg_chatreq;
struct cg_xform;
struct cg_sse_event;
struct cg_evs_msg;

/* A refused request: answered `400` with cg_dialect_err_json(), type
 * invalid_request_error. */
typedef struct cg_dialect_err {
    /* "unsupported_parameter": something the dialect cannot carry (tools,
     * n > 1, a tool message, assistant tool_calls, a non-text content part);
     * "invalid_json": the body is not a JSON object;
     * "missing_required_parameter", "invalid_type", "invalid_value": the
     * messages or a kept field are not what chat completions allow, or no
     * message is a user or assistant message (bedrock-kb: no user message,
     * or the last one has no text);
     * "invalid_request": a model name that the upstream path cannot carry
     * (gemini, vertex). */
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

/* CITEGATE_COHERE_CITATIONS: the citation_options.mode a cohere request
 * asks for, or none (off). The first is the default. */
typedef enum cg_cohere_citations {
    CG_COHERE_FAST = 0,
    CG_COHERE_ACCURATE,
    CG_COHERE_OFF,
} cg_cohere_citations_t;

/* What the translation needs besides the body; any member may be empty. */
typedef struct cg_dialect_in {
    /* The same body read by cg_request_parse() (its <source> tags become
     * anthropic document blocks); NULL: none. */
    const cg_request_t *req;
    /* The deployment name of an Azure deployment route, as written, or
     * {NULL, 0}: the model when the body names none (anthropic,
     * responses), the model whatever the body names (gemini, vertex). */
    cg_span_t deployment;
    /* CITEGATE_GEMINI_TOOLS, a JSON array sent as gemini's and vertex's
     * `tools` as it is (checked when the configuration was read); NULL:
     * none. */
    const char *tools;
    /* CITEGATE_BEDROCK_TOOL_CONFIG, a JSON object sent as bedrock's
     * `toolConfig` as it is; NULL: none. */
    const char *tool_config;
    /* CITEGATE_BEDROCK_KB, a JSON object sent as bedrock-kb's
     * `retrieveAndGenerateConfiguration` as it is; NULL: none. */
    const char *kb_config;
    /* The client's header fields (`get` only), for a dialect that carries
     * one in its body (bedrock-kb's sessionId); NULL: none. */
    const struct cg_dialect_hdrs *client;
    /* CITEGATE_COHERE_CITATIONS (zero: fast, the default). */
    cg_cohere_citations_t cohere_citations;
} cg_dialect_in_t;

/* What the shell sends upstream, and what the answer side must know. */
typedef struct cg_dialect_req {
    cg_buf_t body;      /* the upstream request body, a JSON object */
    bool stream;        /* the client asked for a stream ("stream": true) */
    bool include_usage; /* and "stream_options": {"include_usage": true} */
    /* The model the upstream path names (gemini, vertex, bedrock), checked
     * to be made of the bytes that path allows; cohere: the model sent
     * (decoded), which the answer's chunks name, since Cohere's answers name
     * none; empty otherwise. */
    cg_buf_t model;
    /* anthropic: the <source> id of each document block, in document_index
     * order (owned; NULL when none). A citation with document_index k cites
     * request-side source doc_ids[k]. */
    unsigned *doc_ids;
    /* bedrock: per document, the filename of one made of a client's `file`
     * part (its doc_ids entry is 0), NULL for a <source> one (owned; NULL
     * when there is none of the first kind). */
    char **doc_files;
    size_t ndocs;
} cg_dialect_req_t;

/* How a dialect reads the client's header fields and adds its own. */
typedef struct cg_dialect_hdrs {
    /* The value of the client's field `name` (lower case), {NULL, 0} when it
     * sent none. */
    cg_span_t (*get)(void *ctx, const char *name);
    /* Adds the field name: value to the upstream request. */
    void (*add)(void *ctx, cg_span_t name, cg_span_t value);
    void *ctx;
} cg_dialect_hdrs_t;

/* --- Answer side ------------------------------------------------------------
 *
 * A view works on the transformer's internals through the functions of
 * src/core/xform_int.h (cg__xform_*): it writes chat-completion chunks of
 * its own (which then go through the transformer as if the upstream had
 * sent them), adds the citations its upstream names, and ends the stream
 * with an error. Its per-stream state is allocated zeroed and freed by the
 * transformer.
 */
typedef struct cg_dialect_view {
    size_t state_size;
    /* Frees what a state owns, not the state itself; may be NULL. */
    void (*state_free)(void *state);
    /* One complete upstream SSE event (a comment or keep-alive too). Not
     * called once the stream has ended. */
    void (*event)(struct cg_xform *x, void *state, const struct cg_sse_event *ev);
    /* The upstream response ended (any reason) before the stream did:
     * release what is held. `pending` is the incomplete last event's bytes
     * (no blank line ended it; a lead LF included), which the transformer
     * then drops: a gemini upstream ends a failed stream with an error
     * object on lines of their own. May be NULL. */
    void (*end)(struct cg_xform *x, void *state, cg_span_t pending);
    /* A non-streaming body: appends the chat completion it amounts to to
     * `chat`. Returns 0, or -1 when it is not this dialect's answer (the
     * body then goes to the client unchanged). */
    int (*body)(struct cg_xform *x, void *state, const char *body, size_t len, cg_buf_t *chat);
    /* The upstream's framing: NULL, SSE, and `event` reads it; set, AWS's
     * event stream (citegate/evstream.h), and this gets each decoded
     * message instead, so the view never sees a frame. A framing error
     * ends the stream with SPEC §6's error event (upstream_protocol_error)
     * and sets cg_xform_stats()->framing_error: the caller closes the
     * upstream connection. */
    void (*message)(struct cg_xform *x, void *state, const struct cg_evs_msg *m);
    /* With `message`: the bytes of the longest usual message, when longer
     * than Converse's (cg_evs_expect); 0 otherwise. */
    size_t message_size;
} cg_dialect_view_t;

typedef struct cg_dialect {
    const char *name; /* as CITEGATE_UPSTREAM_DIALECT spells it */
    /* The request translation (src/dialects/chatreq.h): the shared reader
     * has checked what every dialect refuses; the hook checks what is its
     * own, then writes the upstream body. Returns 0, or
     * -1 with *err filled. NULL: the body goes as the client sent it. */
    int (*request)(struct cg_chatreq *c, cg_dialect_err_t *err);
    /* Appends the upstream path of a translated chat request, to follow the
     * base path of CITEGATE_UPSTREAM in place of the client's path and
     * query. NULL: the client's path and query are kept. */
    void (*path)(const cg_dialect_req_t *r, cg_buf_t *out);
    /* Whether the client's header field `name` (any case) goes upstream on a
     * chat route; the fields a dialect sets itself, and keys it sends
     * otherwise, do not. NULL: every field. */
    bool (*forwards)(cg_span_t name);
    /* Adds the dialect's own fields (keys, versions) to a chat request,
     * from the client's. NULL: none. */
    void (*headers)(const cg_dialect_hdrs_t *h);
    /* The answer view; NULL: the transformer's own (chat completions). */
    const cg_dialect_view_t *view;
    /* Whether a user message's OpenAI `file` parts are the dialect's to
     * carry (bedrock: documents); else they are refused as any non-text
     * part. */
    bool file_parts;
    /* An AWS API: with AWS keys configured the shell signs each request
     * (SigV4, service `aws_service`) and sends none of the client's keys. */
    const char *aws_service;
    /* It takes no other key: without AWS keys citegate does not start
     * (an upstream of this dialect, not the demo). */
    bool aws_keys_required;
    /* It needs CITEGATE_BEDROCK_KB: without it citegate does not start. */
    bool kb_config_required;
    /* Adds fields to the client's answer from the upstream answer's (`get`
     * reads the upstream's, `add` adds to the client's): what the dialect
     * carries back in a header of its own. NULL: none. */
    void (*answer_headers)(const struct cg_dialect_hdrs *h);
} cg_dialect_t;

/* --- The registry -------------------------------------------------------- */

/* The dialect of that name (exact, lower case); false (and *out unchanged)
 * when there is none. */
bool cg_dialect_parse(const char *name, const cg_dialect_t **out);
/* "openai, anthropic, …": every name, for messages. */
const char *cg_dialect_list(void);
/* The default dialect, chat completions as the client sent them (openai). */
const cg_dialect_t *cg_dialect_default(void);
const char *cg_dialect_name(const cg_dialect_t *d);

/* --- Generic calls (the shell's and the transformer's) ------------------- */

/* Whether a chat request is translated (the upstream speaks another API),
 * so that its body is cg_dialect_request()'s and its answer goes through
 * the dialect's view in every profile. */
bool cg_dialect_translates(const cg_dialect_t *d);

/* Appends the upstream path of translated request r to out; false (and out
 * unchanged) when the client's path and query are kept. */
bool cg_dialect_path(const cg_dialect_t *d, const cg_dialect_req_t *r, cg_buf_t *out);

/* Whether the client's header field `name` (any case) goes upstream on a
 * chat route. The shell's own rules (hop-by-hop fields, Host, ...) apply
 * first. */
bool cg_dialect_forwards_header(const cg_dialect_t *d, cg_span_t name);

/* Adds the dialect's own header fields to a chat request (SPEC §6a). */
void cg_dialect_add_headers(const cg_dialect_t *d, const cg_dialect_hdrs_t *h);

/* A key as an API key header carries it: `api_key` when it is not empty,
 * else the credentials of an `Authorization: Bearer` value (scheme in any
 * case); surrounding white space is trimmed. Pass {NULL, 0} for a field the
 * client did not send. The result points into the arguments; {NULL, 0}
 * means there is no key: send none. */
cg_span_t cg_dialect_api_key(cg_span_t api_key, cg_span_t authorization);

/* Translates the client's chat-completions body[0..len) for dialect d
 * (SPEC §6a; in: see cg_dialect_in_t, NULL for none).
 *
 * Every translating dialect refuses the same things (tools, n > 1, tool
 * and function messages, non-text parts, members of the wrong type, no
 * user or assistant message) and sends only the members it names: its
 * output is written from a fixed list, never copied from the client's
 * object, and every string is decoded and escaped again. A dialect without
 * a translation gets the body as it is.
 *
 * Returns 0 with *out filled (free it with cg_dialect_req_free), or -1 with
 * *err filled and *out empty. Linear in len. */
int cg_dialect_request(const cg_dialect_t *d, const char *body, size_t len,
                       const cg_dialect_in_t *in, cg_dialect_req_t *out, cg_dialect_err_t *err);
void cg_dialect_req_free(cg_dialect_req_t *r);

/* The SigV4 service name of an AWS dialect; NULL for the others. */
const char *cg_dialect_aws_service(const cg_dialect_t *d);

/* Whether dialect d takes no key but AWS's (citegate refuses to start
 * without them), and whether it needs CITEGATE_BEDROCK_KB. */
bool cg_dialect_aws_keys_required(const cg_dialect_t *d);
bool cg_dialect_kb_config_required(const cg_dialect_t *d);

/* Adds the dialect's fields to the answer of a translated chat request
 * (SPEC §6a), from the upstream answer's fields. */
void cg_dialect_add_answer_headers(const cg_dialect_t *d, const cg_dialect_hdrs_t *h);

/* The answer view of d; NULL: chat completions (the transformer's own). */
const cg_dialect_view_t *cg_dialect_view(const cg_dialect_t *d);

#endif
