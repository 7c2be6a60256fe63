/*
 * The client's chat-completions request as the dialects' translations read
 * it (src/dialects/request.c), and the writers they share. A translation
 * (cg_dialect_t.request) gets the request parsed, its root members located
 * and everything every dialect refuses already refused; it checks what is
 * its own, then writes the upstream body from a fixed list of members into
 * c->out, never by copying the client's object, which is what makes
 * "fields not named here are not sent" hold for any input, duplicate keys
 * and escaped member names included.
 */
#ifndef CG_DIALECTS_CHATREQ_H
#define CG_DIALECTS_CHATREQ_H

#include "citegate/dialect.h"
#include "citegate/json.h"

/* The root members read, by index; a value is the token of its first
 * occurrence (like cg_json_get and cg_request_parse), -1 when absent. */
enum {
    CG_REQ_MODEL,
    CG_REQ_MESSAGES,
    CG_REQ_MAX_COMPLETION_TOKENS,
    CG_REQ_MAX_TOKENS,
    CG_REQ_TEMPERATURE,
    CG_REQ_TOP_P,
    CG_REQ_STREAM,
    CG_REQ_STREAM_OPTIONS,
    CG_REQ_STOP,
    CG_REQ_N,
    CG_REQ_TOOLS,
    CG_REQ_FUNCTIONS,
    CG_REQ_COUNT
};

typedef enum cg_req_role {
    CG_ROLE_SYSTEM, /* system and developer */
    CG_ROLE_USER,
    CG_ROLE_ASSISTANT,
    CG_ROLE_TOOL,
    CG_ROLE_FUNCTION,
    CG_ROLE_OTHER
} cg_req_role_t;

typedef struct cg_chatreq {
    const cg_dialect_t *d;
    const cg_json_t *j; /* the client's body, parsed */
    const char *body;   /* ... and its bytes */
    size_t len;
    const cg_dialect_in_t *in; /* never NULL (empty when the caller gave none) */
    int r[CG_REQ_COUNT];       /* root members */
    int last_user;             /* token of the last user message, or -1 */
    cg_dialect_req_t *dreq;    /* what the translation fills */
    cg_buf_t *out;             /* = &dreq->body */
    cg_buf_t scratch;          /* decoded strings */
} cg_chatreq_t;

/* --- Reading ----------------------------------------------------------------- */

/* A member that is there and not null. */
bool cg__req_present(const cg_chatreq_t *c, int tok);
/* The role of a (checked) message token. */
cg_req_role_t cg__req_role(const cg_chatreq_t *c, int msg);
/* The messages array's first element and element count. */
int cg__req_messages(const cg_chatreq_t *c, int *n);
/* max_completion_tokens when present, else max_tokens, else -1. */
int cg__req_max_tokens(const cg_chatreq_t *c);

/* The request-side <source> tags with text that a dialect sends as
 * documents, in id order. Anthropic and bedrock put them in the last
 * user turn, so they find none without a user message (in_turn); cohere
 * sends them beside the messages. Their text is read again from the same body without the
 * max_doc_bytes cut (that cut is for citations shown to the client; the
 * model must see the whole source): same body, same reader, the same
 * sources. Fills c->dreq->doc_ids, so that the answer side knows which
 * source a document index is. */
typedef struct cg_req_docs {
    cg_request_t full; /* the <source> tags with their whole text */
    const cg_citation_t **v;
    size_t n;
} cg_req_docs_t;

void cg__req_find_documents(cg_chatreq_t *c, cg_req_docs_t *d, bool in_turn);
void cg__req_docs_free(cg_req_docs_t *d);

/* The model the upstream path names (gemini, vertex, bedrock): the Azure
 * route's deployment, else the body's model, decoded, into c->dreq->model.
 * It must be non-empty, hold no "..", and be made of A-Z a-z 0-9 . _ - and
 * the bytes of `extra`; else the request is refused (invalid_request,
 * param model, "model must be WHAT (it becomes part of the … upstream
 * path)"). Returns 0 or -1. */
int cg__req_read_model(cg_chatreq_t *c, cg_dialect_err_t *e, const char *extra, const char *what);

/* A user message's OpenAI `file` part, {"type":"file","file":{"file_data":
 * "data:MEDIA;base64,B64","filename":F}}, for a dialect that carries them
 * (cg_dialect_t.file_parts). */
typedef struct cg_req_file {
    cg_span_t bytes; /* B64, as the client wrote it */
    char *name;      /* F, decoded (owned: free it) */
    size_t name_len;
    char format[8]; /* F's extension, lower case */
} cg_req_file_t;
/* Reads file part `part`: 0; -1 when it is not one (no filename, or no
 * base64 data: URL); -2 when F's extension is no document format (pdf csv
 * doc docx xls xlsx html txt md). f->name is set (or NULL) either way. */
int cg__req_file(const cg_chatreq_t *c, int part, cg_req_file_t *f);

/* --- Refusing ---------------------------------------------------------------- */

int cg__req_fail(cg_dialect_err_t *e, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* stop, where a dialect sends it: a string or an array of strings. */
int cg__req_check_stop(const cg_chatreq_t *c, cg_dialect_err_t *e);

/* --- Writing ----------------------------------------------------------------- */

/* A comma unless the value or member is the first of its object or array. */
void cg__req_sep(cg_buf_t *o);
/* A comma when needed, then "name": */
void cg__req_key(cg_buf_t *o, const char *name);
/* String token i, decoded and escaped again, without / with quotes. */
void cg__req_put_text(cg_chatreq_t *c, int i);
void cg__req_put_string(cg_chatreq_t *c, int i);
/* Token i as it is (a number or a boolean). */
void cg__req_put_raw(cg_chatreq_t *c, int i);
/* The text of a (checked) message: a string, or its text parts one after
 * the other, nothing added between them (SPEC §6a); nothing for null. No
 * quotes. */
void cg__req_put_content_text(cg_chatreq_t *c, int msg);
/* `open`, the text of message msg, `close` (written after a comma when one
 * is needed); nothing at all when the text is empty. */
void cg__req_put_text_block(cg_chatreq_t *c, int msg, const char *open, const char *close);
/* The user and assistant messages in order, as the array member `name`:
 * each after a comma when one is needed, written by put (ctx is the
 * caller's). */
void cg__req_put_turns(cg_chatreq_t *c, const char *name,
                       void (*put)(cg_chatreq_t *c, int msg, cg_req_role_t role, void *ctx),
                       void *ctx);
/* open, the text of message msg, close: a turn whose content is its text. */
void cg__req_put_turn_text(cg_chatreq_t *c, int msg, const char *open, const char *close);
/* {"role":"user"|"assistant","content":TEXT}: a turn as chat completions,
 * Messages and Responses all write it (a put for cg__req_put_turns; ctx
 * unused). */
void cg__req_put_role_turn(cg_chatreq_t *c, int msg, cg_req_role_t role, void *ctx);
/* The non-empty system and developer texts joined by a blank line, between
 * `open` and `close` (written after a comma when one is needed); nothing at
 * all when there is no such text. */
void cg__req_put_system(cg_chatreq_t *c, const char *open, const char *close);
/* A number or boolean root member kept under `name`, when not null. */
void cg__req_put_kept(cg_chatreq_t *c, int which, const char *name);
/* `model`: the body's, else the deployment's, else nothing. */
void cg__req_put_model(cg_chatreq_t *c);
/* stop (a checked string or list of strings) as a JSON list under `name`,
 * when not null. */
void cg__req_put_stop_list(cg_chatreq_t *c, const char *name);
/* The sampling settings as object member `name` (gemini's
 * generationConfig, bedrock's inferenceConfig): the token limit under
 * `max_name`, temperature, topP and stopSequences; left out when it would
 * be empty. */
void cg__req_put_sampling(cg_chatreq_t *c, const char *name, const char *max_name);

/* --- Header fields ----------------------------------------------------------- */

/* Is header field name `name` lit (lower case), in any case? */
bool cg__req_field_is(cg_span_t name, const char *lit);
/* The key rule of an API that takes `Authorization: Bearer KEY` (bedrock
 * without AWS keys, cohere): the client's Authorization goes as it came
 * (the dialect forwards it), and without one a client api-key goes as
 * Authorization: Bearer VALUE. A dialect's `headers` hook. */
void cg__req_bearer_key(const cg_dialect_hdrs_t *h);

#endif
