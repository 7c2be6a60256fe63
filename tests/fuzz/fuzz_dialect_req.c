/*
 * libFuzzer target for the request side of the upstream dialects
 * (include/citegate/dialect.h, SPEC §6a).
 *
 * Input: one header byte, then the client's request body.
 *   bits 0-1: dialect: 0, 3 = anthropic, 1 = responses, 2 = openai
 *   bit 2:    a default model (an Azure deployment name) is given
 *   bit 3:    the request is read with max_doc_bytes 16 (cut snippets)
 *   bit 4:    gemini (bit 0 clear) or vertex (bit 0 set) instead, with
 *             CITEGATE_GEMINI_TOOLS when bit 1 is set
 *
 * Checks, for any body:
 *   - refusal and success exclusive: 0 with a body and no error, or -1 with
 *     a known error code, a message that names param, a valid error body,
 *     and nothing to send;
 *   - invalid_json exactly when cg_request_parse refuses the body;
 *   - openai: the body goes as it is;
 *   - anthropic / responses: the output is one valid JSON object holding
 *     only the members SPEC §6a names for the dialect, each once; its
 *     messages (input items) are {role, content} pairs, role user or
 *     assistant, as many as the request's user and assistant messages
 *     (counted here independently), content a string, or for the one
 *     message that carries the documents, ndocs documents then at most
 *     one text block; doc_ids name request-side sources in increasing
 *     order; stream agrees with cg_request_parse;
 *   - gemini / vertex: the same for systemInstruction, contents ({role,
 *     parts: [{text}]}, role user or model), generationConfig (never
 *     empty, only its four members) and tools (the configured ones, as
 *     given); no documents; the model the path names is non-empty, of
 *     A-Z a-z 0-9 . _ - only, without "..", and is the deployment when one
 *     is given; a refusal for the model names param "model";
 *   - the same input gives the same bytes twice.
 * The body is an exact-size heap copy, so ASan sees any read past its end.
 */
#include "citegate/dialect.h"

#include "../support/dialects.h"
#include "fuzz_common.h"
#include "fuzz_jsonv.h"

#define MAX_TOKENS (1u << 22)

static const char *const known_codes[] = {"unsupported_parameter", "invalid_json",
                                          "missing_required_parameter", "invalid_type",
                                          "invalid_value", "invalid_request"};

static const char *const anthropic_members[] = {"model",          "system",      "messages",
                                                "max_tokens",     "temperature", "top_p",
                                                "stop_sequences", "stream",      NULL};
static const char *const responses_members[] = {
    "model", "instructions", "input", "max_output_tokens", "temperature", "top_p", "stream", NULL};
static const char *const gemini_members[] = {"systemInstruction", "contents", "generationConfig",
                                             "tools", NULL};
static const char *const generation_members[] = {"maxOutputTokens", "temperature", "topP",
                                                 "stopSequences", NULL};
static const char tools[] = "[{\"googleSearch\":{}}]";

static bool is_number_token(const cg_json_t *j, int i)
{
    if (cg_json_type(j, i) != JSMN_PRIMITIVE)
        return false;
    char c = j->js[j->tok[i].start];
    return c == '-' || (c >= '0' && c <= '9');
}

static bool raw_is(const cg_json_t *j, int i, const char *lit)
{
    return cg_json_type(j, i) == JSMN_STRING && cg_span_eq(cg_json_raw(j, i), lit);
}

/* Decoded string value of token i equals lit. */
static bool decoded_is(const cg_json_t *j, int i, const char *lit)
{
    size_t n;
    char *s = cg_json_strdup(j, i, &n);
    bool eq = s && n == strlen(lit) && memcmp(s, lit, n) == 0;
    free(s);
    return eq;
}

/* The user and assistant messages of the request, counted without the
 * translator: the first "messages" member, roles decoded. */
static int count_conversation(const char *body, size_t len)
{
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    int count = 0;
    if (cg_json_parse(&j, body, len) == CG_JSON_OK) {
        int msgs = cg_json_get(&j, 0, "messages");
        int n = cg_json_type(&j, msgs) == JSMN_ARRAY ? j.tok[msgs].size : 0;
        for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(&j, i)) {
            int role = cg_json_get(&j, i, "role");
            count += decoded_is(&j, role, "user") || decoded_is(&j, role, "assistant");
        }
    }
    cg_json_free(&j);
    return count;
}

static void check_valid_json(cg_json_t *j, const char *s, size_t n)
{
    FZ_CHECK(cg_json_parse(j, s, n) == CG_JSON_OK);
    const char *why = fz_json_invalid(j);
    if (why)
        fprintf(stderr, "invalid JSON out (%s): %.*s\n", why, (int)n, s);
    FZ_CHECK(why == NULL);
    FZ_CHECK(j->tok[0].type == JSMN_OBJECT);
}

static void check_refusal(const cg_dialect_req_t *out, const cg_dialect_err_t *err)
{
    FZ_CHECK(out->body.p == NULL && out->body.len == 0 && out->doc_ids == NULL && out->ndocs == 0);
    FZ_CHECK(err->code != NULL);
    bool known = false;
    for (size_t i = 0; i < sizeof(known_codes) / sizeof(known_codes[0]); i++)
        known = known || strcmp(err->code, known_codes[i]) == 0;
    FZ_CHECK(known);
    FZ_CHECK(memchr(err->message, '\0', sizeof(err->message)) != NULL && err->message[0]);
    FZ_CHECK(memchr(err->param, '\0', sizeof(err->param)) != NULL);
    FZ_CHECK(strcmp(err->code, "unsupported_parameter") != 0 || err->param[0]);
    FZ_CHECK(strstr(err->message, err->param) != NULL);
    cg_buf_t b = {0};
    cg_dialect_err_json(err, &b);
    cg_json_t j;
    cg_json_init(&j, 64);
    check_valid_json(&j, b.p, b.len);
    cg_json_free(&j);
    cg_buf_free(&b);
}

/* One content block of the message that carries the documents. */
static void check_block(const cg_json_t *j, int block, bool *text_seen, size_t *docs)
{
    FZ_CHECK(cg_json_type(j, block) == JSMN_OBJECT);
    int type = cg_json_get(j, block, "type");
    if (raw_is(j, type, "text")) {
        FZ_CHECK(!*text_seen && j->tok[block].size == 2);
        FZ_CHECK(cg_json_is_str(j, cg_json_get(j, block, "text")));
        *text_seen = true;
        return;
    }
    FZ_CHECK(raw_is(j, type, "document") && !*text_seen && j->tok[block].size == 4);
    int source = cg_json_get(j, block, "source");
    FZ_CHECK(cg_json_type(j, source) == JSMN_OBJECT && j->tok[source].size == 3);
    FZ_CHECK(cg_json_is_str(j, cg_json_get(j, source, "data")));
    FZ_CHECK(cg_json_is_str(j, cg_json_get(j, block, "title")));
    FZ_CHECK(cg_json_type(j, cg_json_get(j, block, "citations")) == JSMN_OBJECT);
    (*docs)++;
}

/* messages / input: {role, content} items; returns how many. */
static int check_messages(const cg_json_t *j, int msgs, const cg_dialect_req_t *out)
{
    FZ_CHECK(cg_json_type(j, msgs) == JSMN_ARRAY);
    int n = j->tok[msgs].size, with_docs = 0;
    for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(j, i)) {
        FZ_CHECK(cg_json_type(j, i) == JSMN_OBJECT && j->tok[i].size == 2);
        int role = cg_json_get(j, i, "role"), content = cg_json_get(j, i, "content");
        FZ_CHECK(raw_is(j, role, "user") || raw_is(j, role, "assistant"));
        if (cg_json_is_str(j, content))
            continue;
        FZ_CHECK(raw_is(j, role, "user") && cg_json_type(j, content) == JSMN_ARRAY);
        bool text_seen = false;
        size_t docs = 0;
        int nb = j->tok[content].size;
        for (int q = 0, b = content + 1; q < nb; q++, b = cg_json_skip(j, b))
            check_block(j, b, &text_seen, &docs);
        FZ_CHECK(docs == out->ndocs && docs > 0);
        with_docs++;
    }
    FZ_CHECK(with_docs == (out->ndocs > 0));
    return n;
}

static bool allowed(const char *const *names, cg_span_t key)
{
    for (int i = 0; names[i]; i++)
        if (cg_span_eq(key, names[i]))
            return true;
    return false;
}

/* Only the members SPEC §6a names, each once. */
static void check_members(const cg_json_t *j, const char *const *names)
{
    int n = j->tok[0].size;
    for (int k = 0, key = 1; k < n; k++, key = cg_json_skip(j, key + 1)) {
        cg_span_t name = cg_json_raw(j, key);
        FZ_CHECK(allowed(names, name));
        for (int m = k + 1, other = cg_json_skip(j, key + 1); m < n;
             m++, other = cg_json_skip(j, other + 1)) {
            cg_span_t o = cg_json_raw(j, other);
            FZ_CHECK(o.n != name.n || memcmp(o.p, name.p, name.n) != 0);
        }
    }
}

static void check_translation(const char *d, const char *body, size_t len,
                              const cg_request_t *req, const cg_dialect_req_t *out)
{
    bool anthropic = strcmp(d, "anthropic") == 0;
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    check_valid_json(&j, out->body.p, out->body.len);
    check_members(&j, anthropic ? anthropic_members : responses_members);
    int msgs = cg_json_get(&j, 0, anthropic ? "messages" : "input");
    FZ_CHECK(check_messages(&j, msgs, out) == count_conversation(body, len));
    FZ_CHECK(!anthropic || is_number_token(&j, cg_json_get(&j, 0, "max_tokens")));
    int system = cg_json_get(&j, 0, anthropic ? "system" : "instructions");
    FZ_CHECK(system < 0 || (cg_json_is_str(&j, system) && j.tok[system].end > j.tok[system].start));
    int stream = cg_json_get(&j, 0, "stream");
    FZ_CHECK(stream < 0 || (j.js[j.tok[stream].start] == 't') == req->stream);
    cg_json_free(&j);
    FZ_CHECK(anthropic || out->ndocs == 0);
    for (size_t i = 0; i < out->ndocs; i++) {
        FZ_CHECK(cg_cites_find(&req->sources, out->doc_ids[i]) != NULL);
        FZ_CHECK(i == 0 || out->doc_ids[i - 1] < out->doc_ids[i]);
    }
}

/* A {text} part list of one part, or a {role, parts} content. */
static void check_parts(const cg_json_t *j, int parts)
{
    FZ_CHECK(cg_json_type(j, parts) == JSMN_ARRAY && j->tok[parts].size == 1);
    FZ_CHECK(cg_json_type(j, parts + 1) == JSMN_OBJECT && j->tok[parts + 1].size == 1);
    FZ_CHECK(cg_json_is_str(j, cg_json_get(j, parts + 1, "text")));
}

static void check_gemini(const char *body, size_t len, cg_span_t model, bool with_tools,
                         const cg_dialect_req_t *out)
{
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    check_valid_json(&j, out->body.p, out->body.len);
    check_members(&j, gemini_members);
    int contents = cg_json_get(&j, 0, "contents");
    FZ_CHECK(cg_json_type(&j, contents) == JSMN_ARRAY);
    int n = j.tok[contents].size;
    for (int k = 0, c = contents + 1; k < n; k++, c = cg_json_skip(&j, c)) {
        FZ_CHECK(cg_json_type(&j, c) == JSMN_OBJECT && j.tok[c].size == 2);
        int role = cg_json_get(&j, c, "role");
        FZ_CHECK(raw_is(&j, role, "user") || raw_is(&j, role, "model"));
        check_parts(&j, cg_json_get(&j, c, "parts"));
    }
    FZ_CHECK(n == count_conversation(body, len));
    int system = cg_json_get(&j, 0, "systemInstruction");
    if (system >= 0) {
        FZ_CHECK(cg_json_type(&j, system) == JSMN_OBJECT && j.tok[system].size == 1);
        int parts = cg_json_get(&j, system, "parts");
        check_parts(&j, parts);
        int text = cg_json_get(&j, parts + 1, "text");
        FZ_CHECK(j.tok[text].end > j.tok[text].start);
    }
    int gc = cg_json_get(&j, 0, "generationConfig");
    if (gc >= 0) {
        FZ_CHECK(cg_json_type(&j, gc) == JSMN_OBJECT && j.tok[gc].size > 0);
        int m = j.tok[gc].size;
        for (int k = 0, key = gc + 1; k < m; k++, key = cg_json_skip(&j, key + 1))
            FZ_CHECK(allowed(generation_members, cg_json_raw(&j, key)));
    }
    int t = cg_json_get(&j, 0, "tools");
    FZ_CHECK((t >= 0) == with_tools);
    if (t >= 0)
        FZ_CHECK(cg_json_end(&j, t) - cg_json_begin(&j, t) == strlen(tools));
    cg_json_free(&j);
    FZ_CHECK(out->ndocs == 0 && out->doc_ids == NULL);
    FZ_CHECK(out->model.len > 0 && memmem(out->model.p, out->model.len, "..", 2) == NULL);
    for (size_t i = 0; i < out->model.len; i++)
        FZ_CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-",
                        out->model.p[i]) != NULL && out->model.p[i] != '\0');
    if (model.p)
        FZ_CHECK(out->model.len == model.n && memcmp(out->model.p, model.p, model.n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char *const dialects[4] = {"anthropic", "responses", "openai", "anthropic"};
    const char *name = dialects[data[0] & 3];
    bool gemini = data[0] & 0x10, with_tools = gemini && (data[0] & 2);
    if (gemini)
        name = data[0] & 1 ? "vertex" : "gemini";
    const cg_dialect_t *d = dialect_named(name);
    cg_span_t model = (data[0] & 4) ? CG_SPAN_LIT("dep") : (cg_span_t){NULL, 0};
    cg_cite_opts_t o = {(data[0] & 8) ? 16 : 8192, true};
    size_t len = size - 1;
    char *body = fz_dup(data + 1, len);

    cg_request_t req;
    int req_rc = cg_request_parse(&req, body, len, &o);
    cg_dialect_req_t out, again;
    cg_dialect_err_t err, err2;
    memset(&err, 0, sizeof(err));
    cg_dialect_in_t in = {.req = req_rc == 0 ? &req : NULL, .deployment = model,
                          .tools = with_tools ? tools : NULL};
    int rc = cg_dialect_request(d, body, len, &in, &out, &err);
    FZ_CHECK(rc == 0 || rc == -1);
    FZ_CHECK((req_rc != 0) == (rc == -1 && strcmp(err.code, "invalid_json") == 0));
    if (rc != 0) {
        check_refusal(&out, &err);
        FZ_CHECK(out.model.len == 0);
        FZ_CHECK(strcmp(err.code, "invalid_request") != 0 ||
                 (gemini && strcmp(err.param, "model") == 0));
    } else {
        FZ_CHECK(err.code == NULL);
        FZ_CHECK(out.stream == req.stream);
        if (!cg_dialect_translates(d))
            FZ_CHECK(out.body.len == len && memcmp(out.body.p, body, len) == 0);
        else if (gemini)
            check_gemini(body, len, model, with_tools, &out);
        else
            check_translation(name, body, len, &req, &out);
        FZ_CHECK(gemini || out.model.len == 0);
    }
    FZ_CHECK(cg_dialect_request(d, body, len, &in, &again, &err2) == rc);
    FZ_CHECK(again.body.len == out.body.len &&
             (out.body.len == 0 || memcmp(again.body.p, out.body.p, out.body.len) == 0));
    cg_dialect_req_free(&again);
    cg_dialect_req_free(&out);
    cg_request_free(&req);
    free(body);
    return 0;
}
