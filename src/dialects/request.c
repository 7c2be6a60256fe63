/*
 * A chat-completions request as an Anthropic Messages or OpenAI Responses
 * request (SPEC §6a; include/citegate/dialect.h).
 *
 * Three passes over the parsed body, each linear: the root members are
 * located once, then everything is checked (so a refusal never leaves half
 * a body), then the upstream body is written from a fixed list of members.
 * Building the output from that list, never by copying the client's
 * object, is what makes "fields not named here are not sent" hold for any
 * input, duplicate keys and escaped member names included. Every string is
 * decoded and escaped again.
 */
#include "citegate/dialect.h"

#include "citegate/json.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The members read, by index; a value is the token of its first occurrence
 * (like cg_json_get and cg_request_parse), -1 when absent. */
enum {
    R_MODEL,
    R_MESSAGES,
    R_MAX_COMPLETION_TOKENS,
    R_MAX_TOKENS,
    R_TEMPERATURE,
    R_TOP_P,
    R_STREAM,
    R_STREAM_OPTIONS,
    R_STOP,
    R_N,
    R_TOOLS,
    R_FUNCTIONS,
    R_COUNT
};
static const char *const root_names[R_COUNT] = {
    [R_MODEL] = "model",
    [R_MESSAGES] = "messages",
    [R_MAX_COMPLETION_TOKENS] = "max_completion_tokens",
    [R_MAX_TOKENS] = "max_tokens",
    [R_TEMPERATURE] = "temperature",
    [R_TOP_P] = "top_p",
    [R_STREAM] = "stream",
    [R_STREAM_OPTIONS] = "stream_options",
    [R_STOP] = "stop",
    [R_N] = "n",
    [R_TOOLS] = "tools",
    [R_FUNCTIONS] = "functions",
};

enum { M_ROLE, M_CONTENT, M_TOOL_CALLS, M_FUNCTION_CALL, M_COUNT };
static const char *const message_names[M_COUNT] = {"role", "content", "tool_calls",
                                                   "function_call"};

enum { P_TYPE, P_TEXT, P_COUNT };
static const char *const part_names[P_COUNT] = {"type", "text"};

typedef enum role {
    ROLE_SYSTEM,
    ROLE_USER,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    ROLE_FUNCTION,
    ROLE_OTHER
} role_t;

typedef struct ctx {
    cg_dialect_t d;
    const cg_json_t *j;
    int r[R_COUNT];
    int last_user; /* token of the last user message, or -1 */
    cg_buf_t *out;
    cg_buf_t scratch;  /* decoded strings */
    cg_request_t full; /* <source> tags with their whole text */
    const cg_citation_t **docs;
    size_t ndocs;
} ctx_t;

/* --- reading ------------------------------------------------------------------ */

/* idx[k] = value of the first member of object obj named names[k], or -1;
 * one pass over the members whatever their number. */
static void members(const cg_json_t *j, int obj, const char *const *names, int *idx, int n)
{
    for (int k = 0; k < n; k++)
        idx[k] = -1;
    int count = j->tok[obj].size;
    for (int m = 0, key = obj + 1; m < count; m++, key = cg_json_skip(j, key + 1)) {
        cg_span_t name = cg_json_raw(j, key);
        for (int k = 0; k < n; k++) {
            if (idx[k] < 0 && cg_span_eq(name, names[k])) {
                idx[k] = key + 1;
                break;
            }
        }
    }
}

/* A member that is there and not null. */
static bool present(const cg_json_t *j, int i)
{
    return i >= 0 && !cg_json_is_null(j, i);
}

/* tools / functions: anything but null or [] asks for them. */
static bool asks(const cg_json_t *j, int i)
{
    return present(j, i) && !(cg_json_type(j, i) == JSMN_ARRAY && j->tok[i].size == 0);
}

static bool is_number(const cg_json_t *j, int i)
{
    if (cg_json_type(j, i) != JSMN_PRIMITIVE)
        return false;
    char c = j->js[j->tok[i].start];
    return c == '-' || (c >= '0' && c <= '9');
}

static bool is_bool(const cg_json_t *j, int i)
{
    if (cg_json_type(j, i) != JSMN_PRIMITIVE)
        return false;
    char c = j->js[j->tok[i].start];
    return c == 't' || c == 'f';
}

static bool is_true(const cg_json_t *j, int i)
{
    return is_bool(j, i) && j->js[j->tok[i].start] == 't';
}

/* Is token i a string whose decoded value is lit (at most 16 bytes)? Values
 * are compared decoded: "us\u0065r" is "user". */
static bool str_is(const cg_json_t *j, int i, const char *lit)
{
    if (!cg_json_is_str(j, i))
        return false;
    cg_span_t raw = cg_json_raw(j, i);
    if (memchr(raw.p, '\\', raw.n) == NULL)
        return cg_span_eq(raw, lit);
    char tmp[6 * 16]; /* an escape is at most 6 bytes per decoded byte */
    if (raw.n > sizeof(tmp))
        return false;
    size_t n = cg_json_unescape(raw.p, raw.n, tmp);
    return n == strlen(lit) && memcmp(tmp, lit, n) == 0;
}

static role_t role_of(const cg_json_t *j, int role)
{
    if (str_is(j, role, "user"))
        return ROLE_USER;
    if (str_is(j, role, "assistant"))
        return ROLE_ASSISTANT;
    if (str_is(j, role, "system") || str_is(j, role, "developer"))
        return ROLE_SYSTEM;
    if (str_is(j, role, "tool"))
        return ROLE_TOOL;
    if (str_is(j, role, "function"))
        return ROLE_FUNCTION;
    return ROLE_OTHER;
}

/* --- refusing ------------------------------------------------------------------ */

static int fail(cg_dialect_err_t *e, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(cg_dialect_err_t *e, const char *code, const char *param, const char *fmt, ...)
{
    e->code = code;
    snprintf(e->param, sizeof(e->param), "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return -1;
}

/* Something the dialect cannot carry: param names it, `what` (NULL: param)
 * says it in the message, `where` (or NULL) says where it was. */
static int unsupported(const ctx_t *c, cg_dialect_err_t *e, const char *param, const char *what,
                       const char *where)
{
    return fail(e, "unsupported_parameter", param,
                "%s is not supported with the %s upstream dialect%s%s%s", what ? what : param,
                cg_dialect_name(c->d), where ? " (" : "", where ? where : "", where ? ")" : "");
}

/* A content part of an unsupported type: named by its type when that is a
 * plain name ([A-Za-z0-9_.-], at most 40 bytes), which every real one is;
 * any other type (empty, long, odd bytes) by its place, so that the error
 * always names something and never echoes arbitrary bytes. */
static int unsupported_part(const ctx_t *c, cg_dialect_err_t *e, int type, const char *where)
{
    char name[6 * 40]; /* decoded in place: an escape is at most 6 bytes per byte */
    cg_span_t raw = cg_json_raw(c->j, type);
    size_t n = raw.n <= sizeof(name) ? cg_json_unescape(raw.p, raw.n, name) : 0;
    bool plain = n > 0 && n <= 40;
    for (size_t i = 0; plain && i < n; i++)
        plain = isalnum((unsigned char)name[i]) || memchr("_.-", name[i], 3) != NULL;
    if (!plain) {
        char path[80];
        snprintf(path, sizeof(path), "%s.type", where);
        return unsupported(c, e, path, NULL, NULL);
    }
    name[n] = '\0';
    return unsupported(c, e, name, NULL, where);
}

static int check_part(const ctx_t *c, int part, const char *where, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    if (cg_json_type(j, part) != JSMN_OBJECT)
        return fail(e, "invalid_type", where, "%s must be a content part object", where);
    int p[P_COUNT];
    members(j, part, part_names, p, P_COUNT);
    if (!cg_json_is_str(j, p[P_TYPE]))
        return fail(e, "invalid_type", where, "%s.type must be a string", where);
    if (!str_is(j, p[P_TYPE], "text"))
        return unsupported_part(c, e, p[P_TYPE], where);
    if (!cg_json_is_str(j, p[P_TEXT]))
        return fail(e, "invalid_type", where, "%s.text must be a string", where);
    return 0;
}

/* Content: a string, null (or absent), or an array of text parts. */
static int check_content(const ctx_t *c, int k, int content, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    char where[64];
    if (!present(j, content) || cg_json_is_str(j, content))
        return 0;
    snprintf(where, sizeof(where), "messages[%d].content", k);
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return fail(e, "invalid_type", where,
                    "%s must be a string, an array of content parts or null", where);
    int n = j->tok[content].size;
    for (int q = 0, i = content + 1; q < n; q++, i = cg_json_skip(j, i)) {
        snprintf(where, sizeof(where), "messages[%d].content[%d]", k, q);
        if (check_part(c, i, where, e) != 0)
            return -1;
    }
    return 0;
}

/* One message; counts the usable ones and notes the last user message. */
static int check_message(ctx_t *c, int k, int msg, int *usable, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    char where[32];
    snprintf(where, sizeof(where), "messages[%d]", k);
    if (cg_json_type(j, msg) != JSMN_OBJECT)
        return fail(e, "invalid_type", where, "%s must be an object", where);
    int m[M_COUNT];
    members(j, msg, message_names, m, M_COUNT);
    role_t role = role_of(j, m[M_ROLE]);
    if (role == ROLE_TOOL)
        return unsupported(c, e, "tool", "a tool message", where);
    if (role == ROLE_FUNCTION)
        return unsupported(c, e, "function", "a function message", where);
    if (role == ROLE_OTHER) {
        snprintf(where, sizeof(where), "messages[%d].role", k);
        return fail(e, "invalid_value", where,
                    "%s must be one of system, developer, user, assistant", where);
    }
    if (role == ROLE_USER)
        c->last_user = msg;
    if (role != ROLE_SYSTEM)
        (*usable)++;
    if (asks(j, m[M_TOOL_CALLS]))
        return unsupported(c, e, "tool_calls", NULL, where);
    if (present(j, m[M_FUNCTION_CALL]))
        return unsupported(c, e, "function_call", NULL, where);
    return check_content(c, k, m[M_CONTENT], e);
}

static int check_messages(ctx_t *c, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    int msgs = c->r[R_MESSAGES];
    if (msgs < 0)
        return fail(e, "missing_required_parameter", "messages", "messages is required");
    if (cg_json_type(j, msgs) != JSMN_ARRAY)
        return fail(e, "invalid_type", "messages", "messages must be an array");
    int usable = 0, n = j->tok[msgs].size;
    for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(j, i))
        if (check_message(c, k, i, &usable, e) != 0)
            return -1;
    if (usable == 0)
        return fail(e, "invalid_value", "messages", "messages has no user or assistant message");
    return 0;
}

/* A kept member of the wrong type: what the client's own API would refuse. */
static int check_type(const cg_json_t *j, int i, bool ok, const char *name, const char *what,
                      cg_dialect_err_t *e)
{
    if (!present(j, i) || ok)
        return 0;
    return fail(e, "invalid_type", name, "%s must be %s", name, what);
}

static bool is_stop(const cg_json_t *j, int i)
{
    if (cg_json_is_str(j, i))
        return true;
    if (cg_json_type(j, i) != JSMN_ARRAY)
        return false;
    int n = j->tok[i].size;
    for (int k = 0, s = i + 1; k < n; k++, s = cg_json_skip(j, s))
        if (!cg_json_is_str(j, s))
            return false;
    return true;
}

static int check_root(const ctx_t *c, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    const int *r = c->r;
    double n;
    if (asks(j, r[R_TOOLS]))
        return unsupported(c, e, "tools", NULL, NULL);
    if (asks(j, r[R_FUNCTIONS]))
        return unsupported(c, e, "functions", NULL, NULL);
    if (cg_json_number(j, r[R_N], &n) && n > 1)
        return unsupported(c, e, "n", "n > 1", NULL);
    static const int numbers[] = {R_MAX_COMPLETION_TOKENS, R_MAX_TOKENS, R_TEMPERATURE, R_TOP_P};
    for (size_t k = 0; k < sizeof(numbers) / sizeof(numbers[0]); k++)
        if (check_type(j, r[numbers[k]], is_number(j, r[numbers[k]]), root_names[numbers[k]],
                       "a number", e) != 0)
            return -1;
    if (check_type(j, r[R_STREAM], is_bool(j, r[R_STREAM]), "stream", "a boolean", e) != 0 ||
        check_type(j, r[R_MODEL], cg_json_is_str(j, r[R_MODEL]), "model", "a string", e) != 0)
        return -1;
    if (c->d == CG_DIALECT_ANTHROPIC && check_type(j, r[R_STOP], is_stop(j, r[R_STOP]), "stop",
                                                   "a string or an array of strings", e) != 0)
        return -1;
    return 0;
}

/* --- documents ------------------------------------------------------------------- */

static int by_id(const void *a, const void *b)
{
    unsigned x = (*(const cg_citation_t *const *)a)->id, y = (*(const cg_citation_t *const *)b)->id;
    return (x > y) - (x < y);
}

/* The <source> tags that become document blocks, in id order. The client's
 * request names them; their text is read again from the same body without
 * the max_doc_bytes cut (that cut is for citations shown to the client, and
 * the model must see the whole source). Same body, same reader: the same
 * sources. */
static void find_documents(ctx_t *c, const char *body, size_t len, const cg_request_t *req,
                           cg_dialect_req_t *out)
{
    if (c->d != CG_DIALECT_ANTHROPIC || req == NULL || req->sources.n == 0 || c->last_user < 0)
        return;
    cg_cite_opts_t whole = {SIZE_MAX, false};
    cg_request_parse(&c->full, body, len, &whole);
    c->docs = cg_xmalloc(req->sources.n * sizeof(*c->docs));
    for (size_t i = 0; i < req->sources.n; i++) {
        const cg_citation_t *s = cg_cites_find(&c->full.sources, req->sources.v[i].id);
        if (s && s->content[0] != '\0')
            c->docs[c->ndocs++] = s;
    }
    qsort(c->docs, c->ndocs, sizeof(*c->docs), by_id);
    if (c->ndocs == 0)
        return;
    out->doc_ids = cg_xmalloc(c->ndocs * sizeof(unsigned));
    for (size_t i = 0; i < c->ndocs; i++)
        out->doc_ids[i] = c->docs[i]->id;
    out->ndocs = c->ndocs;
}

/* --- writing ------------------------------------------------------------------------ */

/* A comma unless the value or member is the first of its object or array
 * (no value ends in '{' or '['). */
static void sep(cg_buf_t *o)
{
    char last = o->p[o->len - 1];
    if (last != '{' && last != '[')
        cg_buf_putc(o, ',');
}

static void key(cg_buf_t *o, const char *name)
{
    sep(o);
    cg_json_put_cstr(o, name);
    cg_buf_putc(o, ':');
}

/* String token i, decoded and escaped again, without quotes. */
static void put_text(ctx_t *c, int i)
{
    cg_span_t raw = cg_json_raw(c->j, i);
    if (memchr(raw.p, '\\', raw.n) == NULL) {
        cg_json_put_escaped(c->out, raw.p, raw.n);
        return;
    }
    c->scratch.len = 0;
    char *t = cg_buf_reserve(&c->scratch, raw.n);
    cg_json_put_escaped(c->out, t, cg_json_unescape(raw.p, raw.n, t));
}

static void put_string(ctx_t *c, int i)
{
    cg_buf_putc(c->out, '"');
    put_text(c, i);
    cg_buf_putc(c->out, '"');
}

static void put_raw(ctx_t *c, int i)
{
    cg_span_t raw = cg_json_raw(c->j, i);
    cg_buf_put(c->out, raw.p, raw.n);
}

/* The text of a (checked) message: a string, or its text parts joined by
 * "\n"; nothing for null. No quotes. */
static void put_content_text(ctx_t *c, int msg)
{
    const cg_json_t *j = c->j;
    int content = cg_json_get(j, msg, "content");
    if (cg_json_is_str(j, content)) {
        put_text(c, content);
        return;
    }
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    int n = j->tok[content].size;
    for (int q = 0, i = content + 1; q < n; q++, i = cg_json_skip(j, i)) {
        if (q > 0)
            cg_buf_puts(c->out, "\\n");
        put_text(c, cg_json_get(j, i, "text"));
    }
}

static role_t message_role(const ctx_t *c, int msg)
{
    return role_of(c->j, cg_json_get(c->j, msg, "role"));
}

/* system / instructions: the non-empty system and developer texts joined
 * by a blank line; the member is left out when there is none. */
static void put_system(ctx_t *c, const char *name)
{
    cg_buf_t *o = c->out;
    const cg_json_t *j = c->j;
    size_t start = o->len;
    key(o, name);
    cg_buf_putc(o, '"');
    size_t first = o->len;
    int msgs = c->r[R_MESSAGES], n = j->tok[msgs].size;
    for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(j, i)) {
        if (message_role(c, i) != ROLE_SYSTEM)
            continue;
        size_t mark = o->len;
        if (mark > first)
            cg_buf_puts(o, "\\n\\n");
        size_t text = o->len;
        put_content_text(c, i);
        if (o->len == text)
            o->len = mark; /* empty: no separator either */
    }
    if (o->len == first)
        o->len = start;
    else
        cg_buf_putc(o, '"');
}

static void put_document(cg_buf_t *o, const cg_citation_t *s)
{
    sep(o);
    cg_buf_puts(o, "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":"
                   "\"text/plain\",\"data\":");
    cg_json_put_cstr(o, s->content);
    cg_buf_puts(o, "},\"title\":");
    cg_json_put_cstr(o, s->title);
    cg_buf_puts(o, ",\"citations\":{\"enabled\":true}}");
}

/* The last user message with documents: the documents, then its text as a
 * text block unless that is empty. */
static void put_documents_then_text(ctx_t *c, int msg)
{
    cg_buf_t *o = c->out;
    cg_buf_putc(o, '[');
    for (size_t i = 0; i < c->ndocs; i++)
        put_document(o, c->docs[i]);
    size_t mark = o->len;
    cg_buf_puts(o, ",{\"type\":\"text\",\"text\":\"");
    size_t text = o->len;
    put_content_text(c, msg);
    if (o->len == text)
        o->len = mark;
    else
        cg_buf_puts(o, "\"}");
    cg_buf_putc(o, ']');
}

/* messages / input: the user and assistant messages, in order. */
static void put_messages(ctx_t *c, const char *name)
{
    cg_buf_t *o = c->out;
    const cg_json_t *j = c->j;
    key(o, name);
    cg_buf_putc(o, '[');
    int msgs = c->r[R_MESSAGES], n = j->tok[msgs].size;
    for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(j, i)) {
        role_t role = message_role(c, i);
        if (role != ROLE_USER && role != ROLE_ASSISTANT)
            continue;
        sep(o);
        cg_buf_puts(o, role == ROLE_USER ? "{\"role\":\"user\",\"content\":"
                                         : "{\"role\":\"assistant\",\"content\":");
        if (i == c->last_user && c->ndocs > 0) {
            put_documents_then_text(c, i);
        } else {
            cg_buf_putc(o, '"');
            put_content_text(c, i);
            cg_buf_putc(o, '"');
        }
        cg_buf_putc(o, '}');
    }
    cg_buf_putc(o, ']');
}

static void put_model(ctx_t *c, cg_span_t model)
{
    if (cg_json_is_str(c->j, c->r[R_MODEL])) {
        key(c->out, "model");
        put_string(c, c->r[R_MODEL]);
    } else if (model.p) {
        key(c->out, "model");
        cg_json_put_str(c->out, model.p, model.n);
    }
}

/* max_tokens (anthropic, required there: 4096 when the client set none) or
 * max_output_tokens (responses): the client's max_completion_tokens, else
 * its max_tokens. */
static void put_max_tokens(ctx_t *c, const char *name, const char *otherwise)
{
    const cg_json_t *j = c->j;
    int v = present(j, c->r[R_MAX_COMPLETION_TOKENS]) ? c->r[R_MAX_COMPLETION_TOKENS]
            : present(j, c->r[R_MAX_TOKENS])          ? c->r[R_MAX_TOKENS]
                                                      : -1;
    if (v < 0 && otherwise == NULL)
        return;
    key(c->out, name);
    if (v >= 0)
        put_raw(c, v);
    else
        cg_buf_puts(c->out, otherwise);
}

/* A number or boolean member kept under its own name, when not null. */
static void put_kept(ctx_t *c, int which)
{
    if (!present(c->j, c->r[which]))
        return;
    key(c->out, root_names[which]);
    put_raw(c, c->r[which]);
}

/* stop (a string or a list) as anthropic's stop_sequences (a list). */
static void put_stop_sequences(ctx_t *c)
{
    const cg_json_t *j = c->j;
    int stop = c->r[R_STOP];
    if (!present(j, stop))
        return;
    key(c->out, "stop_sequences");
    cg_buf_putc(c->out, '[');
    if (cg_json_is_str(j, stop)) {
        put_string(c, stop);
    } else {
        int n = j->tok[stop].size;
        for (int k = 0, i = stop + 1; k < n; k++, i = cg_json_skip(j, i)) {
            sep(c->out);
            put_string(c, i);
        }
    }
    cg_buf_putc(c->out, ']');
}

static void put_body(ctx_t *c, cg_span_t model)
{
    bool anthropic = c->d == CG_DIALECT_ANTHROPIC;
    cg_buf_putc(c->out, '{');
    put_model(c, model);
    put_system(c, anthropic ? "system" : "instructions");
    put_messages(c, anthropic ? "messages" : "input");
    put_max_tokens(c, anthropic ? "max_tokens" : "max_output_tokens", anthropic ? "4096" : NULL);
    put_kept(c, R_TEMPERATURE);
    put_kept(c, R_TOP_P);
    if (anthropic)
        put_stop_sequences(c);
    put_kept(c, R_STREAM);
    cg_buf_putc(c->out, '}');
}

/* --- the request -------------------------------------------------------------------- */

void cg_dialect_err_json(const cg_dialect_err_t *e, cg_buf_t *out)
{
    cg_buf_puts(out, "{\"error\":{\"message\":");
    cg_json_put_cstr(out, e->message);
    cg_buf_puts(out, ",\"type\":\"invalid_request_error\",\"param\":");
    if (e->param[0])
        cg_json_put_cstr(out, e->param);
    else
        cg_buf_puts(out, "null");
    cg_buf_puts(out, ",\"code\":");
    cg_json_put_cstr(out, e->code);
    cg_buf_puts(out, "}}");
}

static void read_stream_flags(const ctx_t *c, cg_dialect_req_t *out)
{
    const cg_json_t *j = c->j;
    out->stream = is_true(j, c->r[R_STREAM]);
    int opts = c->r[R_STREAM_OPTIONS];
    out->include_usage =
        cg_json_type(j, opts) == JSMN_OBJECT && is_true(j, cg_json_get(j, opts, "include_usage"));
}

static int translate(ctx_t *c, const char *body, size_t len, const cg_request_t *req,
                     cg_span_t model, cg_dialect_req_t *out, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    if (j->ntok == 0 || j->tok[0].type != JSMN_OBJECT)
        return fail(e, "invalid_json", "", "request body is not a valid JSON object");
    members(j, 0, root_names, c->r, R_COUNT);
    read_stream_flags(c, out);
    if (c->d == CG_DIALECT_OPENAI) {
        cg_buf_put(&out->body, body, len);
        return 0;
    }
    if (check_root(c, e) != 0 || check_messages(c, e) != 0)
        return -1;
    find_documents(c, body, len, req, out);
    put_body(c, model);
    return 0;
}

int cg_dialect_request(cg_dialect_t d, const char *body, size_t len, const cg_request_t *req,
                       cg_span_t model, cg_dialect_req_t *out, cg_dialect_err_t *err)
{
    memset(out, 0, sizeof(*out));
    cg_json_t j;
    cg_json_init(&j, 1u << 22); /* as cg_request_parse: it accepts what we accept */
    ctx_t c = {.d = d, .j = &j, .last_user = -1, .out = &out->body};
    if (!cg_utf8_valid(body, len) || cg_json_parse(&j, body, len) != CG_JSON_OK)
        j.ntok = 0; /* invalid_json, as cg_request_parse refuses it */
    int rc = translate(&c, body, len, req, model, out, err);
    if (rc != 0)
        cg_dialect_req_free(out);
    cg_request_free(&c.full);
    free(c.docs);
    cg_buf_free(&c.scratch);
    cg_json_free(&j);
    return rc;
}

void cg_dialect_req_free(cg_dialect_req_t *r)
{
    cg_buf_free(&r->body);
    free(r->doc_ids);
    memset(r, 0, sizeof(*r));
}
