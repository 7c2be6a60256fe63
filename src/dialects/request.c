/*
 * The shared side of the request translations (SPEC §6a;
 * include/citegate/dialect.h, src/dialects/chatreq.h): reading the client's
 * chat-completions body, refusing what no dialect carries, the writers the
 * dialects share, and the key helper.
 *
 * Three passes over the parsed body, each linear: the root members are
 * located once, then everything is checked (so a refusal never leaves half
 * a body), then the dialect writes the upstream body from a fixed list of
 * members. Every string is decoded and escaped again.
 */
#include "chatreq.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const root_names[CG_REQ_COUNT] = {
    [CG_REQ_MODEL] = "model",
    [CG_REQ_MESSAGES] = "messages",
    [CG_REQ_MAX_COMPLETION_TOKENS] = "max_completion_tokens",
    [CG_REQ_MAX_TOKENS] = "max_tokens",
    [CG_REQ_TEMPERATURE] = "temperature",
    [CG_REQ_TOP_P] = "top_p",
    [CG_REQ_STREAM] = "stream",
    [CG_REQ_STREAM_OPTIONS] = "stream_options",
    [CG_REQ_STOP] = "stop",
    [CG_REQ_N] = "n",
    [CG_REQ_TOOLS] = "tools",
    [CG_REQ_FUNCTIONS] = "functions",
};

enum { M_ROLE, M_CONTENT, M_TOOL_CALLS, M_FUNCTION_CALL, M_COUNT };
static const char *const message_names[M_COUNT] = {"role", "content", "tool_calls",
                                                   "function_call"};

enum { P_TYPE, P_TEXT, P_COUNT };
static const char *const part_names[P_COUNT] = {"type", "text"};

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

static bool present(const cg_json_t *j, int i)
{
    return i >= 0 && !cg_json_is_null(j, i);
}

bool cg__req_present(const cg_chatreq_t *c, int tok)
{
    return present(c->j, tok);
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

static cg_req_role_t role_of(const cg_json_t *j, int role)
{
    if (str_is(j, role, "user"))
        return CG_ROLE_USER;
    if (str_is(j, role, "assistant"))
        return CG_ROLE_ASSISTANT;
    if (str_is(j, role, "system") || str_is(j, role, "developer"))
        return CG_ROLE_SYSTEM;
    if (str_is(j, role, "tool"))
        return CG_ROLE_TOOL;
    if (str_is(j, role, "function"))
        return CG_ROLE_FUNCTION;
    return CG_ROLE_OTHER;
}

cg_req_role_t cg__req_role(const cg_chatreq_t *c, int msg)
{
    return role_of(c->j, cg_json_get(c->j, msg, "role"));
}

int cg__req_messages(const cg_chatreq_t *c, int *n)
{
    int msgs = c->r[CG_REQ_MESSAGES];
    *n = c->j->tok[msgs].size;
    return msgs + 1;
}

int cg__req_max_tokens(const cg_chatreq_t *c)
{
    if (present(c->j, c->r[CG_REQ_MAX_COMPLETION_TOKENS]))
        return c->r[CG_REQ_MAX_COMPLETION_TOKENS];
    return present(c->j, c->r[CG_REQ_MAX_TOKENS]) ? c->r[CG_REQ_MAX_TOKENS] : -1;
}

static int by_id(const void *a, const void *b)
{
    unsigned x = (*(const cg_citation_t *const *)a)->id, y = (*(const cg_citation_t *const *)b)->id;
    return (x > y) - (x < y);
}

void cg__req_find_documents(cg_chatreq_t *c, cg_req_docs_t *d, bool in_turn)
{
    const cg_request_t *req = c->in->req;
    memset(d, 0, sizeof(*d));
    if (req == NULL || req->sources.n == 0 || (in_turn && c->last_user < 0))
        return;
    cg_cite_opts_t whole = {SIZE_MAX, false};
    cg_request_parse(&d->full, c->body, c->len, &whole);
    d->v = cg_xmalloc(req->sources.n * sizeof(*d->v));
    for (size_t i = 0; i < req->sources.n; i++) {
        const cg_citation_t *s = cg_cites_find(&d->full.sources, req->sources.v[i].id);
        if (s && s->content[0] != '\0')
            d->v[d->n++] = s;
    }
    qsort(d->v, d->n, sizeof(*d->v), by_id);
    if (d->n == 0)
        return;
    c->dreq->doc_ids = cg_xmalloc(d->n * sizeof(unsigned));
    for (size_t i = 0; i < d->n; i++)
        c->dreq->doc_ids[i] = d->v[i]->id;
    c->dreq->ndocs = d->n;
}

void cg__req_docs_free(cg_req_docs_t *d)
{
    cg_request_free(&d->full);
    free(d->v);
}

/* --- refusing ------------------------------------------------------------------ */

int cg__req_fail(cg_dialect_err_t *e, const char *code, const char *param, const char *fmt, ...)
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
static int unsupported(const cg_chatreq_t *c, cg_dialect_err_t *e, const char *param,
                       const char *what, const char *where)
{
    return cg__req_fail(
        e, "unsupported_parameter", param, "%s is not supported with the %s upstream dialect%s%s%s",
        what ? what : param, c->d->name, where ? " (" : "", where ? where : "", where ? ")" : "");
}

/* A content part of an unsupported type: named by its type when that is a
 * plain name ([A-Za-z0-9_.-], at most 40 bytes), which every real one is;
 * any other type (empty, long, odd bytes) by its place, so that the error
 * always names something and never echoes arbitrary bytes. */
static int unsupported_part(const cg_chatreq_t *c, cg_dialect_err_t *e, int type, const char *where)
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

/* The formats a document takes, as its filename's extension names them. */
static const char *const doc_formats[] = {"pdf", "csv", "doc", "docx", "xls", "xlsx",
                                          "html", "txt", "md", NULL};

int cg__req_file(const cg_chatreq_t *c, int part, cg_req_file_t *f)
{
    const cg_json_t *j = c->j;
    memset(f, 0, sizeof(*f));
    int file = cg_json_get(j, part, "file");
    int data = cg_json_get(j, file, "file_data"), name = cg_json_get(j, file, "filename");
    if (cg_json_type(j, file) != JSMN_OBJECT || !cg_json_is_str(j, data) ||
        !cg_json_is_str(j, name))
        return -1;
    /* data:MEDIA;base64,B64: the base64 is sent as it is, so it is read
     * raw: base64 has nothing a JSON string escapes. */
    cg_span_t d = cg_json_raw(j, data);
    const char *comma = memchr(d.p, ',', d.n);
    if (d.n < 5 || memcmp(d.p, "data:", 5) != 0 || comma == NULL || comma - d.p < 12 ||
        memcmp(comma - 7, ";base64", 7) != 0)
        return -1;
    f->bytes = cg_span(comma + 1, d.n - (size_t)(comma + 1 - d.p));
    for (size_t i = 0; i < f->bytes.n; i++)
        if (!isalnum((unsigned char)f->bytes.p[i]) && !strchr("+/=", f->bytes.p[i]))
            return -1;
    f->name = cg_json_strdup(j, name, &f->name_len);
    const char *dot = f->name_len ? memrchr(f->name, '.', f->name_len) : NULL;
    size_t ext = dot ? f->name_len - (size_t)(dot + 1 - f->name) : 0;
    for (size_t i = 0; dot && i < ext && i < sizeof(f->format) - 1; i++)
        f->format[i] = (char)tolower((unsigned char)dot[1 + i]);
    for (int i = 0; doc_formats[i]; i++)
        if (ext < sizeof(f->format) && strcmp(f->format, doc_formats[i]) == 0)
            return 0;
    return -2;
}

/* A `file` part as a dialect that carries them reads it (cg__req_file). */
static int check_file_part(const cg_chatreq_t *c, int part, const char *where,
                           cg_dialect_err_t *e)
{
    cg_req_file_t f;
    int rc = cg__req_file(c, part, &f);
    free(f.name);
    if (rc == 0)
        return 0;
    if (rc == -2)
        return cg__req_fail(e, "unsupported_parameter", where,
                            "%s.file.filename must end in .pdf, .csv, .doc, .docx, .xls, .xlsx, "
                            ".html, .txt or .md (the formats a %s document takes)",
                            where, c->d->name);
    return cg__req_fail(e, "invalid_value", where,
                        "%s.file must have a filename and file_data as a base64 data: URL", where);
}

static int check_part(const cg_chatreq_t *c, int part, const char *where, cg_req_role_t role,
                      cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    if (cg_json_type(j, part) != JSMN_OBJECT)
        return cg__req_fail(e, "invalid_type", where, "%s must be a content part object", where);
    int p[P_COUNT];
    members(j, part, part_names, p, P_COUNT);
    if (!cg_json_is_str(j, p[P_TYPE]))
        return cg__req_fail(e, "invalid_type", where, "%s.type must be a string", where);
    if (str_is(j, p[P_TYPE], "file") && c->d->file_parts && role == CG_ROLE_USER)
        return check_file_part(c, part, where, e);
    if (!str_is(j, p[P_TYPE], "text"))
        return unsupported_part(c, e, p[P_TYPE], where);
    if (!cg_json_is_str(j, p[P_TEXT]))
        return cg__req_fail(e, "invalid_type", where, "%s.text must be a string", where);
    return 0;
}

/* Content: a string, null (or absent), or an array of text parts (and, for
 * a dialect that carries them, a user message's file parts). */
static int check_content(const cg_chatreq_t *c, int k, int content, cg_req_role_t role,
                         cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    char where[64];
    if (!present(j, content) || cg_json_is_str(j, content))
        return 0;
    snprintf(where, sizeof(where), "messages[%d].content", k);
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return cg__req_fail(e, "invalid_type", where,
                            "%s must be a string, an array of content parts or null", where);
    int n = j->tok[content].size;
    for (int q = 0, i = content + 1; q < n; q++, i = cg_json_skip(j, i)) {
        snprintf(where, sizeof(where), "messages[%d].content[%d]", k, q);
        if (check_part(c, i, where, role, e) != 0)
            return -1;
    }
    return 0;
}

/* One message; counts the usable ones and notes the last user message. */
static int check_message(cg_chatreq_t *c, int k, int msg, int *usable, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    char where[32];
    snprintf(where, sizeof(where), "messages[%d]", k);
    if (cg_json_type(j, msg) != JSMN_OBJECT)
        return cg__req_fail(e, "invalid_type", where, "%s must be an object", where);
    int m[M_COUNT];
    members(j, msg, message_names, m, M_COUNT);
    cg_req_role_t role = role_of(j, m[M_ROLE]);
    if (role == CG_ROLE_TOOL)
        return unsupported(c, e, "tool", "a tool message", where);
    if (role == CG_ROLE_FUNCTION)
        return unsupported(c, e, "function", "a function message", where);
    if (role == CG_ROLE_OTHER) {
        snprintf(where, sizeof(where), "messages[%d].role", k);
        return cg__req_fail(e, "invalid_value", where,
                            "%s must be one of system, developer, user, assistant", where);
    }
    if (role == CG_ROLE_USER)
        c->last_user = msg;
    if (role != CG_ROLE_SYSTEM)
        (*usable)++;
    if (asks(j, m[M_TOOL_CALLS]))
        return unsupported(c, e, "tool_calls", NULL, where);
    if (present(j, m[M_FUNCTION_CALL]))
        return unsupported(c, e, "function_call", NULL, where);
    return check_content(c, k, m[M_CONTENT], role, e);
}

static int check_messages(cg_chatreq_t *c, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    int msgs = c->r[CG_REQ_MESSAGES];
    if (msgs < 0)
        return cg__req_fail(e, "missing_required_parameter", "messages", "messages is required");
    if (cg_json_type(j, msgs) != JSMN_ARRAY)
        return cg__req_fail(e, "invalid_type", "messages", "messages must be an array");
    int usable = 0, n = j->tok[msgs].size;
    for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(j, i))
        if (check_message(c, k, i, &usable, e) != 0)
            return -1;
    if (usable == 0)
        return cg__req_fail(e, "invalid_value", "messages",
                            "messages has no user or assistant message");
    return 0;
}

/* A kept member of the wrong type: what the client's own API would refuse. */
static int check_type(const cg_json_t *j, int i, bool ok, const char *name, const char *what,
                      cg_dialect_err_t *e)
{
    if (!present(j, i) || ok)
        return 0;
    return cg__req_fail(e, "invalid_type", name, "%s must be %s", name, what);
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

int cg__req_check_stop(const cg_chatreq_t *c, cg_dialect_err_t *e)
{
    int stop = c->r[CG_REQ_STOP];
    return check_type(c->j, stop, is_stop(c->j, stop), "stop", "a string or an array of strings",
                      e);
}

static bool model_byte(char ch, const char *extra)
{
    return isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-' ||
           (ch != '\0' && strchr(extra, ch) != NULL);
}

int cg__req_read_model(cg_chatreq_t *c, cg_dialect_err_t *e, const char *extra, const char *what)
{
    cg_buf_t *m = &c->dreq->model;
    cg_span_t deployment = c->in->deployment;
    int tok = c->r[CG_REQ_MODEL];
    if (deployment.p) {
        cg_buf_put(m, deployment.p, deployment.n);
    } else if (cg_json_is_str(c->j, tok)) {
        cg_span_t raw = cg_json_raw(c->j, tok);
        char *t = cg_buf_reserve(m, raw.n + 1);
        m->len = cg_json_unescape(raw.p, raw.n, t);
    }
    bool ok = m->len > 0 && memmem(m->p, m->len, "..", 2) == NULL;
    for (size_t i = 0; ok && i < m->len; i++)
        ok = model_byte(m->p[i], extra);
    if (ok)
        return 0;
    return cg__req_fail(e, "invalid_request", "model",
                        "model must be %s (it becomes part of the %s upstream path)", what,
                        c->d->name);
}

static int check_root(const cg_chatreq_t *c, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    const int *r = c->r;
    double n;
    if (asks(j, r[CG_REQ_TOOLS]))
        return unsupported(c, e, "tools", NULL, NULL);
    if (asks(j, r[CG_REQ_FUNCTIONS]))
        return unsupported(c, e, "functions", NULL, NULL);
    if (cg_json_number(j, r[CG_REQ_N], &n) && n > 1)
        return unsupported(c, e, "n", "n > 1", NULL);
    static const int numbers[] = {CG_REQ_MAX_COMPLETION_TOKENS, CG_REQ_MAX_TOKENS,
                                  CG_REQ_TEMPERATURE, CG_REQ_TOP_P};
    for (size_t k = 0; k < sizeof(numbers) / sizeof(numbers[0]); k++)
        if (check_type(j, r[numbers[k]], is_number(j, r[numbers[k]]), root_names[numbers[k]],
                       "a number", e) != 0)
            return -1;
    if (check_type(j, r[CG_REQ_STREAM], is_bool(j, r[CG_REQ_STREAM]), "stream", "a boolean", e) !=
            0 ||
        check_type(j, r[CG_REQ_MODEL], cg_json_is_str(j, r[CG_REQ_MODEL]), "model", "a string",
                   e) != 0)
        return -1;
    return 0;
}

/* --- writing ------------------------------------------------------------------------ */

/* No value ends in '{' or '[': those are the opening of a first one. */
void cg__req_sep(cg_buf_t *o)
{
    char last = o->p[o->len - 1];
    if (last != '{' && last != '[')
        cg_buf_putc(o, ',');
}

void cg__req_key(cg_buf_t *o, const char *name)
{
    cg__req_sep(o);
    cg_json_put_cstr(o, name);
    cg_buf_putc(o, ':');
}

void cg__req_put_text(cg_chatreq_t *c, int i)
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

void cg__req_put_string(cg_chatreq_t *c, int i)
{
    cg_buf_putc(c->out, '"');
    cg__req_put_text(c, i);
    cg_buf_putc(c->out, '"');
}

void cg__req_put_raw(cg_chatreq_t *c, int i)
{
    cg_span_t raw = cg_json_raw(c->j, i);
    cg_buf_put(c->out, raw.p, raw.n);
}

void cg__req_put_content_text(cg_chatreq_t *c, int msg)
{
    const cg_json_t *j = c->j;
    int content = cg_json_get(j, msg, "content");
    if (cg_json_is_str(j, content)) {
        cg__req_put_text(c, content);
        return;
    }
    if (cg_json_type(j, content) != JSMN_ARRAY)
        return;
    /* SPEC §6a: nothing is added between the parts; a file part has none. */
    int n = j->tok[content].size;
    for (int q = 0, i = content + 1; q < n; q++, i = cg_json_skip(j, i))
        if (str_is(j, cg_json_get(j, i, "type"), "text"))
            cg__req_put_text(c, cg_json_get(j, i, "text"));
}

void cg__req_put_text_block(cg_chatreq_t *c, int msg, const char *open, const char *close)
{
    cg_buf_t *o = c->out;
    size_t mark = o->len;
    cg__req_sep(o);
    cg_buf_puts(o, open);
    size_t text = o->len;
    cg__req_put_content_text(c, msg);
    if (o->len == text)
        o->len = mark;
    else
        cg_buf_puts(o, close);
}

void cg__req_put_turns(cg_chatreq_t *c, const char *name,
                       void (*put)(cg_chatreq_t *c, int msg, cg_req_role_t role, void *ctx),
                       void *ctx)
{
    cg_buf_t *o = c->out;
    cg__req_key(o, name);
    cg_buf_putc(o, '[');
    int n, i = cg__req_messages(c, &n);
    for (int k = 0; k < n; k++, i = cg_json_skip(c->j, i)) {
        cg_req_role_t role = cg__req_role(c, i);
        if (role != CG_ROLE_USER && role != CG_ROLE_ASSISTANT)
            continue;
        cg__req_sep(o);
        put(c, i, role, ctx);
    }
    cg_buf_putc(o, ']');
}

void cg__req_put_turn_text(cg_chatreq_t *c, int msg, const char *open, const char *close)
{
    cg_buf_puts(c->out, open);
    cg__req_put_content_text(c, msg);
    cg_buf_puts(c->out, close);
}

void cg__req_put_role_turn(cg_chatreq_t *c, int msg, cg_req_role_t role, void *ctx)
{
    (void)ctx;
    cg__req_put_turn_text(c, msg,
                          role == CG_ROLE_USER ? "{\"role\":\"user\",\"content\":\""
                                               : "{\"role\":\"assistant\",\"content\":\"",
                          "\"}");
}

void cg__req_put_system(cg_chatreq_t *c, const char *open, const char *close)
{
    cg_buf_t *o = c->out;
    size_t start = o->len;
    cg__req_sep(o);
    cg_buf_puts(o, open);
    size_t first = o->len;
    int n, i = cg__req_messages(c, &n);
    for (int k = 0; k < n; k++, i = cg_json_skip(c->j, i)) {
        if (cg__req_role(c, i) != CG_ROLE_SYSTEM)
            continue;
        size_t mark = o->len;
        if (mark > first)
            cg_buf_puts(o, "\\n\\n");
        size_t text = o->len;
        cg__req_put_content_text(c, i);
        if (o->len == text)
            o->len = mark; /* empty: no separator either */
    }
    if (o->len == first)
        o->len = start;
    else
        cg_buf_puts(o, close);
}

void cg__req_put_kept(cg_chatreq_t *c, int which, const char *name)
{
    if (!present(c->j, c->r[which]))
        return;
    cg__req_key(c->out, name);
    cg__req_put_raw(c, c->r[which]);
}

void cg__req_put_model(cg_chatreq_t *c)
{
    cg_span_t deployment = c->in->deployment;
    if (cg_json_is_str(c->j, c->r[CG_REQ_MODEL])) {
        cg__req_key(c->out, "model");
        cg__req_put_string(c, c->r[CG_REQ_MODEL]);
    } else if (deployment.p) {
        cg__req_key(c->out, "model");
        cg_json_put_str(c->out, deployment.p, deployment.n);
    }
}

void cg__req_put_stop_list(cg_chatreq_t *c, const char *name)
{
    const cg_json_t *j = c->j;
    int stop = c->r[CG_REQ_STOP];
    if (!present(j, stop))
        return;
    cg__req_key(c->out, name);
    cg_buf_putc(c->out, '[');
    if (cg_json_is_str(j, stop)) {
        cg__req_put_string(c, stop);
    } else {
        int n = j->tok[stop].size;
        for (int k = 0, i = stop + 1; k < n; k++, i = cg_json_skip(j, i)) {
            cg__req_sep(c->out);
            cg__req_put_string(c, i);
        }
    }
    cg_buf_putc(c->out, ']');
}

void cg__req_put_sampling(cg_chatreq_t *c, const char *name, const char *max_name)
{
    cg_buf_t *o = c->out;
    size_t start = o->len;
    cg__req_key(o, name);
    cg_buf_putc(o, '{');
    size_t open = o->len;
    int max = cg__req_max_tokens(c);
    if (max >= 0) {
        cg__req_key(o, max_name);
        cg__req_put_raw(c, max);
    }
    cg__req_put_kept(c, CG_REQ_TEMPERATURE, "temperature");
    cg__req_put_kept(c, CG_REQ_TOP_P, "topP");
    cg__req_put_stop_list(c, "stopSequences");
    if (o->len == open)
        o->len = start;
    else
        cg_buf_putc(o, '}');
}

/* --- keys ------------------------------------------------------------------------------- */

bool cg__req_field_is(cg_span_t name, const char *lit)
{
    return name.n == strlen(lit) && strncasecmp(name.p, lit, name.n) == 0;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static cg_span_t trim(cg_span_t s)
{
    while (s.n > 0 && is_ows(s.p[0]))
        s.p++, s.n--;
    while (s.n > 0 && is_ows(s.p[s.n - 1]))
        s.n--;
    return s;
}

cg_span_t cg_dialect_api_key(cg_span_t api_key, cg_span_t authorization)
{
    cg_span_t none = {NULL, 0};
    if (api_key.p) {
        cg_span_t k = trim(api_key);
        if (k.n > 0)
            return k;
    }
    if (authorization.p == NULL)
        return none;
    /* RFC 9110 §11.4: the scheme is case-insensitive, one or more spaces
     * separate it from the credentials. */
    cg_span_t a = trim(authorization);
    if (a.n < 7 || strncasecmp(a.p, "bearer", 6) != 0 || !is_ows(a.p[6]))
        return none;
    cg_span_t k = trim(cg_span(a.p + 6, a.n - 6));
    return k.n > 0 ? k : none;
}

void cg__req_bearer_key(const cg_dialect_hdrs_t *h)
{
    cg_span_t key = h->get(h->ctx, "api-key");
    if (h->get(h->ctx, "authorization").p || key.p == NULL)
        return;
    key = cg_dialect_api_key(key, cg_span(NULL, 0));
    if (key.p == NULL)
        return;
    char *v = cg_xmalloc(key.n + 8);
    memcpy(v, "Bearer ", 7);
    memcpy(v + 7, key.p, key.n);
    h->add(h->ctx, CG_SPAN_LIT("Authorization"), cg_span(v, key.n + 7));
    free(v);
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

static void read_stream_flags(const cg_chatreq_t *c, cg_dialect_req_t *out)
{
    const cg_json_t *j = c->j;
    out->stream = is_true(j, c->r[CG_REQ_STREAM]);
    int opts = c->r[CG_REQ_STREAM_OPTIONS];
    out->include_usage =
        cg_json_type(j, opts) == JSMN_OBJECT && is_true(j, cg_json_get(j, opts, "include_usage"));
}

static int translate(cg_chatreq_t *c, cg_dialect_err_t *e)
{
    const cg_json_t *j = c->j;
    if (j->ntok == 0 || j->tok[0].type != JSMN_OBJECT)
        return cg__req_fail(e, "invalid_json", "", "request body is not a valid JSON object");
    members(j, 0, root_names, c->r, CG_REQ_COUNT);
    read_stream_flags(c, c->dreq);
    if (c->d->request == NULL) {
        cg_buf_put(c->out, c->body, c->len);
        return 0;
    }
    if (check_root(c, e) != 0 || check_messages(c, e) != 0)
        return -1;
    return c->d->request(c, e);
}

int cg_dialect_request(const cg_dialect_t *d, const char *body, size_t len,
                       const cg_dialect_in_t *in, cg_dialect_req_t *out, cg_dialect_err_t *err)
{
    static const cg_dialect_in_t none = {0};
    memset(out, 0, sizeof(*out));
    cg_json_t j;
    cg_json_init(&j, 1u << 22); /* as cg_request_parse: it accepts what we accept */
    cg_chatreq_t c = {.d = d,
                      .j = &j,
                      .body = body,
                      .len = len,
                      .in = in ? in : &none,
                      .last_user = -1,
                      .dreq = out,
                      .out = &out->body};
    if (!cg_utf8_valid(body, len) || cg_json_parse(&j, body, len) != CG_JSON_OK)
        j.ntok = 0; /* invalid_json, as cg_request_parse refuses it */
    int rc = translate(&c, err);
    if (rc != 0)
        cg_dialect_req_free(out);
    cg_buf_free(&c.scratch);
    cg_json_free(&j);
    return rc;
}

void cg_dialect_req_free(cg_dialect_req_t *r)
{
    cg_buf_free(&r->body);
    cg_buf_free(&r->model);
    free(r->doc_ids);
    for (size_t i = 0; r->doc_files && i < r->ndocs; i++)
        free(r->doc_files[i]);
    free(r->doc_files);
    memset(r, 0, sizeof(*r));
}
