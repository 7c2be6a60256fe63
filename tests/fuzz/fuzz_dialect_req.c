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
 *   bit 5:    bedrock (bit 0 clear) or bedrock-kb (bit 0 set) instead (bit 4
 *             then unused); bit 1 set: bedrock with
 *             CITEGATE_BEDROCK_TOOL_CONFIG, bedrock-kb with a client
 *             X-Bedrock-Session-Id (bedrock-kb always has CITEGATE_BEDROCK_KB)
 *   bit 6:    cohere instead (bits 4-5 then unused), bits 0-1 its
 *             CITEGATE_COHERE_CITATIONS: 0, 3 = fast, 1 = accurate, 2 = off
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
 *   - bedrock: one valid JSON object of messages, system ([{text}], text
 *     not empty), inferenceConfig (as generationConfig) and toolConfig
 *     (the configured one, as given), each once; messages are turns of
 *     alternating roles (Converse refuses two of one role in a row), at
 *     most as many as the user and assistant messages, each a non-empty
 *     list of non-empty {text} blocks and, in user turns only, documents
 *     with citations on: a <source> tag's (source-N, txt, its text) only
 *     in the last user turn, N its doc_ids entry, a request source, in
 *     increasing order; a file part's (document-K for K = 1, 2, ..., a
 *     document format, base64 bytes) with doc_ids 0 and its doc_files
 *     name; as many as ndocs; the path model as for gemini, ':' and '/'
 *     allowed too;
 *   - bedrock-kb: one valid JSON object of input ({text} and nothing else),
 *     retrieveAndGenerateConfiguration (the configured one, as given) and
 *     sessionId, each once; input.text decoded is the last user message's
 *     text (found and decoded here independently: a string, or its text
 *     parts joined), never empty: when it would be, the request is refused
 *     (missing_required_parameter, param messages), and a refusal for want of
 *     a question has a user message whose text is empty; sessionId is there
 *     exactly when the client sent the header, and is its value; no
 *     documents, no model;
 *   - cohere: one valid JSON object of model, messages, stream, max_tokens,
 *     temperature, p, stop_sequences, documents and citation_options, each
 *     once; model is the body's (decoded), else the deployment, else absent,
 *     and the model the answer names is the same; messages are the
 *     request's in order, each {role, content: its text} (a string, or its
 *     text parts joined), system and developer ones as role system and left
 *     out when their text is empty; stream, max_tokens
 *     (max_completion_tokens, else max_tokens), temperature and p (top_p)
 *     are the request's value byte for byte, absent when it is absent or
 *     null; stop_sequences holds stop's strings (one for a string), decoded
 *     byte for byte; documents are {id: "N", data: {title, snippet, url?}}
 *     for each <source> tag with text (read here without the max_doc_bytes
 *     cut: the model sees the whole text), in increasing id order, N its
 *     doc_ids entry, with or without a user message; citation_options is
 *     {"mode":"fast"} or {"mode":"accurate"} as configured, absent when off;
 *   - the same input gives the same bytes twice.
 * The body is an exact-size heap copy, so ASan sees any read past its end.
 */
#include "citegate/dialect.h"

#include "../support/dialects.h"
#include "fuzz_common.h"
#include "fuzz_jsonv.h"

#include <ctype.h>

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
static const char *const bedrock_members[] = {"messages", "system", "inferenceConfig", "toolConfig",
                                              NULL};
static const char *const inference_members[] = {"maxTokens", "temperature", "topP", "stopSequences",
                                                NULL};
static const char *const kb_members[] = {"input", "retrieveAndGenerateConfiguration", "sessionId",
                                         NULL};
static const char *const cohere_members[] = {
    "model", "messages",       "stream",    "max_tokens",       "temperature",
    "p",     "stop_sequences", "documents", "citation_options", NULL};
static const char *const doc_formats[] = {"pdf",  "csv",  "doc", "docx", "xls",
                                          "xlsx", "html", "txt", "md",   NULL};
static const char tools[] = "[{\"googleSearch\":{}}]";
static const char tool_config[] = "{\"tools\":[{\"systemTool\":{\"name\":\"nova_grounding\"}}]}";
static const char kb_config[] =
    "{\"type\":\"KNOWLEDGE_BASE\",\"knowledgeBaseConfiguration\":{\"knowledgeBaseId\":\"KB1\"}}";
/* A session id with bytes a JSON string must escape, and one past ASCII. */
static const char session[] = "kb \"s\" \\ \xc3\xa9";

/* What the header byte picks. */
typedef struct fz_pick {
    const char *name;
    bool gemini, bedrock, kb, cohere;
    bool extra; /* bit 1: gemini's tools, bedrock's tool config, bedrock-kb's session */
    cg_cohere_citations_t mode; /* cohere's */
    cg_span_t model;
    cg_cite_opts_t opts;
} fz_pick_t;

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

/* Decoded string value of token i equals want[0..n). */
static bool decoded_eq(const cg_json_t *j, int i, const char *want, size_t n)
{
    size_t m;
    char *s = cg_json_strdup(j, i, &m);
    bool eq = s && m == n && (n == 0 || memcmp(s, want, n) == 0);
    free(s);
    return eq;
}

static bool decoded_is(const cg_json_t *j, int i, const char *lit)
{
    return decoded_eq(j, i, lit, strlen(lit));
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

/* Value token i is exactly the bytes of lit (a configured member, sent as
 * it is). */
static bool verbatim(const cg_json_t *j, int i, const char *lit)
{
    if (i < 0)
        return false;
    size_t b = cg_json_begin(j, i), n = strlen(lit);
    return cg_json_end(j, i) - b == n && memcmp(j->js + b, lit, n) == 0;
}

/* generationConfig / inferenceConfig: absent, or a non-empty object of
 * the four sampling members only. */
static void check_sampling(const cg_json_t *j, int gc, const char *const *names)
{
    if (gc < 0)
        return;
    FZ_CHECK(cg_json_type(j, gc) == JSMN_OBJECT && j->tok[gc].size > 0);
    int m = j->tok[gc].size;
    for (int k = 0, key = gc + 1; k < m; k++, key = cg_json_skip(j, key + 1))
        FZ_CHECK(allowed(names, cg_json_raw(j, key)));
}

/* The model an upstream path names: non-empty, no "..", of A-Z a-z 0-9 .
 * _ - and the bytes of extra; the deployment when one is given. */
static void check_path_model(const cg_dialect_req_t *out, cg_span_t model, const char *extra)
{
    FZ_CHECK(out->model.len > 0 && memmem(out->model.p, out->model.len, "..", 2) == NULL);
    static const char plain[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
    for (size_t i = 0; i < out->model.len; i++) {
        char c = out->model.p[i];
        FZ_CHECK(c != '\0' && (strchr(plain, c) != NULL || strchr(extra, c) != NULL));
    }
    if (model.p)
        FZ_CHECK(out->model.len == model.n && memcmp(out->model.p, model.p, model.n) == 0);
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
    check_sampling(&j, cg_json_get(&j, 0, "generationConfig"), generation_members);
    int t = cg_json_get(&j, 0, "tools");
    FZ_CHECK((t >= 0) == with_tools);
    FZ_CHECK(t < 0 || verbatim(&j, t, tools));
    cg_json_free(&j);
    FZ_CHECK(out->ndocs == 0 && out->doc_ids == NULL);
    check_path_model(out, model, "");
}

/* --- bedrock ------------------------------------------------------------------- */

/* Where the walk over bedrock's turns is. */
typedef struct turn_walk {
    const cg_dialect_req_t *out;
    size_t docs;     /* documents so far */
    unsigned files;  /* of them, file parts' */
    int turn;        /* the turn being read */
    int last_user;   /* the last user turn so far */
    int source_turn; /* the turn that holds <source> documents, or -1 */
} turn_walk_t;

static bool is_base64(cg_span_t s)
{
    for (size_t i = 0; i < s.n; i++)
        if (!isalnum((unsigned char)s.p[i]) && !strchr("+/=", s.p[i]))
            return false;
    return true;
}

static bool is_doc_format(const cg_json_t *j, int i)
{
    for (int k = 0; doc_formats[k]; k++)
        if (raw_is(j, i, doc_formats[k]))
            return true;
    return false;
}

/* A document block's {name, format, source, citations}: a <source> tag's or
 * a file part's, as doc_ids and doc_files say. */
static void check_document(const cg_json_t *j, int doc, turn_walk_t *w)
{
    const cg_dialect_req_t *out = w->out;
    size_t k = w->docs++;
    FZ_CHECK(k < out->ndocs);
    FZ_CHECK(cg_json_type(j, doc) == JSMN_OBJECT && j->tok[doc].size == 4);
    FZ_CHECK(verbatim(j, cg_json_get(j, doc, "citations"), "{\"enabled\":true}"));
    int source = cg_json_get(j, doc, "source"), format = cg_json_get(j, doc, "format");
    FZ_CHECK(cg_json_type(j, source) == JSMN_OBJECT && j->tok[source].size == 1);
    char name[32];
    if (out->doc_files && out->doc_files[k]) {
        FZ_CHECK(out->doc_ids[k] == 0 && is_doc_format(j, format));
        int bytes = cg_json_get(j, source, "bytes");
        FZ_CHECK(cg_json_is_str(j, bytes) && is_base64(cg_json_raw(j, bytes)));
        snprintf(name, sizeof(name), "document-%u", ++w->files);
    } else {
        FZ_CHECK(raw_is(j, format, "txt") && cg_json_is_str(j, cg_json_get(j, source, "text")));
        FZ_CHECK(w->source_turn < 0 || w->source_turn == w->turn);
        w->source_turn = w->turn;
        snprintf(name, sizeof(name), "source-%u", out->doc_ids[k]);
    }
    FZ_CHECK(raw_is(j, cg_json_get(j, doc, "name"), name));
}

/* A turn's content: non-empty {text} blocks and, in a user turn, documents. */
static void check_blocks(const cg_json_t *j, int content, bool user, turn_walk_t *w)
{
    FZ_CHECK(cg_json_type(j, content) == JSMN_ARRAY && j->tok[content].size > 0);
    int n = j->tok[content].size;
    for (int q = 0, b = content + 1; q < n; q++, b = cg_json_skip(j, b)) {
        FZ_CHECK(cg_json_type(j, b) == JSMN_OBJECT && j->tok[b].size == 1);
        int text = cg_json_get(j, b, "text");
        if (text >= 0) {
            FZ_CHECK(cg_json_is_str(j, text) && j->tok[text].end > j->tok[text].start);
            continue;
        }
        FZ_CHECK(user);
        check_document(j, cg_json_get(j, b, "document"), w);
    }
}

/* messages: turns of alternating roles; returns how many. */
static int check_turns(const cg_json_t *j, int msgs, turn_walk_t *w)
{
    FZ_CHECK(cg_json_type(j, msgs) == JSMN_ARRAY);
    int n = j->tok[msgs].size;
    bool prev_user = false;
    for (int k = 0, t = msgs + 1; k < n; k++, t = cg_json_skip(j, t)) {
        FZ_CHECK(cg_json_type(j, t) == JSMN_OBJECT && j->tok[t].size == 2);
        int role = cg_json_get(j, t, "role");
        bool user = raw_is(j, role, "user");
        FZ_CHECK(user || raw_is(j, role, "assistant"));
        FZ_CHECK(k == 0 || user != prev_user);
        prev_user = user;
        w->turn = k;
        if (user)
            w->last_user = k;
        check_blocks(j, cg_json_get(j, t, "content"), user, w);
    }
    FZ_CHECK(w->docs == w->out->ndocs);
    FZ_CHECK(w->source_turn < 0 || w->source_turn == w->last_user);
    return n;
}

/* The <source> documents name request sources, in increasing id order. */
static void check_source_ids(const cg_request_t *req, const cg_dialect_req_t *out)
{
    bool any = false;
    unsigned last = 0;
    for (size_t i = 0; i < out->ndocs; i++) {
        if (out->doc_files && out->doc_files[i])
            continue;
        FZ_CHECK(cg_cites_find(&req->sources, out->doc_ids[i]) != NULL);
        FZ_CHECK(!any || last < out->doc_ids[i]);
        last = out->doc_ids[i];
        any = true;
    }
}

static void check_bedrock(const char *body, size_t len, const fz_pick_t *p, const cg_request_t *req,
                          const cg_dialect_req_t *out)
{
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    check_valid_json(&j, out->body.p, out->body.len);
    check_members(&j, bedrock_members);
    turn_walk_t w = {.out = out, .last_user = -1, .source_turn = -1};
    FZ_CHECK(check_turns(&j, cg_json_get(&j, 0, "messages"), &w) <= count_conversation(body, len));
    int system = cg_json_get(&j, 0, "system");
    if (system >= 0) {
        check_parts(&j, system);
        int text = cg_json_get(&j, system + 1, "text");
        FZ_CHECK(j.tok[text].end > j.tok[text].start);
    }
    check_sampling(&j, cg_json_get(&j, 0, "inferenceConfig"), inference_members);
    int t = cg_json_get(&j, 0, "toolConfig");
    FZ_CHECK((t >= 0) == p->extra);
    FZ_CHECK(t < 0 || verbatim(&j, t, tool_config));
    cg_json_free(&j);
    check_source_ids(req, out);
    check_path_model(out, p->model, ":/");
}

/* --- bedrock-kb ---------------------------------------------------------------- */

static void append_decoded(const cg_json_t *j, int i, cg_buf_t *out)
{
    size_t n;
    char *s = cg_json_strdup(j, i, &n);
    if (s)
        cg_buf_put(out, s, n);
    free(s);
}

/* A message's text: a string, or its text parts' texts joined. */
static void append_content_text(const cg_json_t *j, int content, cg_buf_t *text)
{
    if (cg_json_is_str(j, content)) {
        append_decoded(j, content, text);
        return;
    }
    int n = cg_json_type(j, content) == JSMN_ARRAY ? j->tok[content].size : 0;
    for (int q = 0, part = content + 1; q < n; q++, part = cg_json_skip(j, part))
        if (decoded_is(j, cg_json_get(j, part, "type"), "text"))
            append_decoded(j, cg_json_get(j, part, "text"), text);
}

/* The text of the request's last user message, found without the
 * translator (roles and part types decoded); false when there is no user
 * message. */
static bool last_user_text(const char *body, size_t len, cg_buf_t *text)
{
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    int last = -1;
    if (cg_json_parse(&j, body, len) == CG_JSON_OK) {
        int msgs = cg_json_get(&j, 0, "messages");
        int n = cg_json_type(&j, msgs) == JSMN_ARRAY ? j.tok[msgs].size : 0;
        for (int k = 0, i = msgs + 1; k < n; k++, i = cg_json_skip(&j, i))
            if (decoded_is(&j, cg_json_get(&j, i, "role"), "user"))
                last = i;
        if (last >= 0)
            append_content_text(&j, cg_json_get(&j, last, "content"), text);
    }
    cg_json_free(&j);
    return last >= 0;
}

static void check_kb(const char *body, size_t len, bool with_session, const cg_dialect_req_t *out)
{
    cg_json_t j;
    cg_json_init(&j, MAX_TOKENS);
    check_valid_json(&j, out->body.p, out->body.len);
    check_members(&j, kb_members);
    int input = cg_json_get(&j, 0, "input");
    FZ_CHECK(cg_json_type(&j, input) == JSMN_OBJECT && j.tok[input].size == 1);
    int text = cg_json_get(&j, input, "text");
    FZ_CHECK(cg_json_is_str(&j, text));
    cg_buf_t got = {0}, want = {0};
    append_decoded(&j, text, &got);
    FZ_CHECK(last_user_text(body, len, &want));
    /* Knowledge Bases refuse an empty input text: never sent */
    FZ_CHECK(got.len > 0 && got.len == want.len && memcmp(got.p, want.p, got.len) == 0);
    cg_buf_free(&got);
    cg_buf_free(&want);
    FZ_CHECK(verbatim(&j, cg_json_get(&j, 0, "retrieveAndGenerateConfiguration"), kb_config));
    int sid = cg_json_get(&j, 0, "sessionId");
    FZ_CHECK((sid >= 0) == with_session);
    FZ_CHECK(sid < 0 || decoded_is(&j, sid, session));
    cg_json_free(&j);
    FZ_CHECK(out->ndocs == 0 && out->doc_ids == NULL);
}

/* A bedrock-kb refusal for want of a question: there is a user message, and
 * the last one's text is empty. */
static void check_kb_refused(const char *body, size_t len, const cg_dialect_err_t *err)
{
    if (strncmp(err->message, "the last user message", 21) != 0)
        return;
    FZ_CHECK(strcmp(err->code, "missing_required_parameter") == 0);
    FZ_CHECK(strcmp(err->param, "messages") == 0);
    cg_buf_t want = {0};
    FZ_CHECK(last_user_text(body, len, &want) && want.len == 0);
    cg_buf_free(&want);
}

/* --- cohere -------------------------------------------------------------------- */

/* How cohere sends request message msg: its role, "system" for system and
 * developer; its text in *text; NULL when it is left out (a system text
 * that is empty). */
static const char *cohere_role(const cg_json_t *rq, int msg, cg_buf_t *text)
{
    int role = cg_json_get(rq, msg, "role");
    text->len = 0;
    append_content_text(rq, cg_json_get(rq, msg, "content"), text);
    if (decoded_is(rq, role, "user"))
        return "user";
    if (decoded_is(rq, role, "assistant"))
        return "assistant";
    FZ_CHECK(decoded_is(rq, role, "system") || decoded_is(rq, role, "developer"));
    return text->len ? "system" : NULL;
}

/* messages: the request's, in order, each {role, content: its text}. */
static void check_cohere_messages(const cg_json_t *j, int msgs, const cg_json_t *rq)
{
    FZ_CHECK(cg_json_type(j, msgs) == JSMN_ARRAY);
    int rmsgs = cg_json_get(rq, 0, "messages");
    int n = j->tok[msgs].size, rn = rq->tok[rmsgs].size, k = 0, m = msgs + 1;
    cg_buf_t text = {0};
    for (int q = 0, i = rmsgs + 1; q < rn; q++, i = cg_json_skip(rq, i)) {
        const char *role = cohere_role(rq, i, &text);
        if (role == NULL)
            continue;
        FZ_CHECK(k < n && cg_json_type(j, m) == JSMN_OBJECT && j->tok[m].size == 2);
        FZ_CHECK(raw_is(j, cg_json_get(j, m, "role"), role));
        FZ_CHECK(decoded_eq(j, cg_json_get(j, m, "content"), text.p, text.len));
        k++;
        m = cg_json_skip(j, m);
    }
    FZ_CHECK(k == n);
    cg_buf_free(&text);
}

static bool present(const cg_json_t *j, int i)
{
    return i >= 0 && !cg_json_is_null(j, i);
}

/* Member `name` is the request's value token rt byte for byte (a number or
 * boolean sent as it came), absent when rt is absent or null. */
static void check_kept(const cg_json_t *j, const char *name, const cg_json_t *rq, int rt)
{
    int t = cg_json_get(j, 0, name);
    FZ_CHECK((t >= 0) == present(rq, rt));
    if (t < 0)
        return;
    cg_span_t got = cg_json_raw(j, t), want = cg_json_raw(rq, rt);
    FZ_CHECK(cg_json_type(j, t) == JSMN_PRIMITIVE && got.n == want.n &&
             memcmp(got.p, want.p, got.n) == 0);
}

/* stop_sequences: stop's strings (a string: that one), decoded byte for
 * byte; absent when stop is absent or null. */
static void check_stop(const cg_json_t *j, const cg_json_t *rq)
{
    int t = cg_json_get(j, 0, "stop_sequences"), stop = cg_json_get(rq, 0, "stop");
    FZ_CHECK((t >= 0) == present(rq, stop));
    if (t < 0)
        return;
    bool one = cg_json_is_str(rq, stop);
    int n = one ? 1 : rq->tok[stop].size;
    FZ_CHECK(cg_json_type(j, t) == JSMN_ARRAY && j->tok[t].size == n);
    for (int k = 0, s = t + 1, r = one ? stop : stop + 1; k < n;
         k++, s = cg_json_skip(j, s), r = cg_json_skip(rq, r)) {
        cg_buf_t want = {0};
        FZ_CHECK(cg_json_is_str(rq, r));
        append_decoded(rq, r, &want);
        FZ_CHECK(decoded_eq(j, s, want.p, want.len));
        cg_buf_free(&want);
    }
}

/* model: the body's (decoded), else the deployment, else absent; the
 * model the answer's chunks name is the same. */
static void check_cohere_model(const cg_json_t *j, const cg_json_t *rq, cg_span_t deployment,
                               const cg_dialect_req_t *out)
{
    int t = cg_json_get(j, 0, "model"), rm = cg_json_get(rq, 0, "model");
    cg_buf_t want = {0};
    if (cg_json_is_str(rq, rm))
        append_decoded(rq, rm, &want);
    else if (deployment.p)
        cg_buf_put(&want, deployment.p, deployment.n);
    FZ_CHECK((t >= 0) == (cg_json_is_str(rq, rm) || deployment.p != NULL));
    FZ_CHECK(t < 0 || decoded_eq(j, t, want.p, want.len));
    FZ_CHECK(out->model.len == want.len &&
             (want.len == 0 || memcmp(out->model.p, want.p, want.len) == 0));
    cg_buf_free(&want);
}

/* One document: {id: "N", data: {title, snippet, url?}} of source N, its
 * text whole. */
static void check_cohere_document(const cg_json_t *j, int doc, const cg_cites_t *whole, unsigned id)
{
    char name[16];
    snprintf(name, sizeof(name), "%u", id);
    FZ_CHECK(cg_json_type(j, doc) == JSMN_OBJECT && j->tok[doc].size == 2);
    FZ_CHECK(raw_is(j, cg_json_get(j, doc, "id"), name));
    const cg_citation_t *s = cg_cites_find(whole, id);
    FZ_CHECK(s != NULL && s->content[0] != '\0');
    int data = cg_json_get(j, doc, "data");
    FZ_CHECK(cg_json_type(j, data) == JSMN_OBJECT && j->tok[data].size == 2 + (s->url != NULL));
    FZ_CHECK(decoded_is(j, cg_json_get(j, data, "title"), s->title));
    FZ_CHECK(decoded_is(j, cg_json_get(j, data, "snippet"), s->content));
    FZ_CHECK(s->url == NULL || decoded_is(j, cg_json_get(j, data, "url"), s->url));
}

/* documents: a <source> tag with text is one, in increasing id order, with
 * or without a user message (they go beside the messages). Its text is
 * read here without the max_doc_bytes cut: that cut is for what the client
 * is shown. */
static void check_cohere_documents(const cg_json_t *j, const char *body, size_t len,
                                   const cg_request_t *req, const cg_dialect_req_t *out)
{
    cg_request_t whole;
    cg_cite_opts_t all = {SIZE_MAX, false};
    FZ_CHECK(cg_request_parse(&whole, body, len, &all) == 0);
    size_t want = 0;
    for (size_t i = 0; i < whole.sources.n; i++)
        want += whole.sources.v[i].content[0] != '\0' &&
                cg_cites_find(&req->sources, whole.sources.v[i].id) != NULL;
    int docs = cg_json_get(j, 0, "documents");
    FZ_CHECK(out->ndocs == want && (docs >= 0) == (want > 0));
    FZ_CHECK(docs < 0 || (cg_json_type(j, docs) == JSMN_ARRAY && j->tok[docs].size == (int)want));
    int d = docs + 1;
    for (size_t k = 0; k < out->ndocs; k++, d = cg_json_skip(j, d)) {
        FZ_CHECK(k == 0 || out->doc_ids[k - 1] < out->doc_ids[k]);
        FZ_CHECK(cg_cites_find(&req->sources, out->doc_ids[k]) != NULL);
        check_cohere_document(j, d, &whole.sources, out->doc_ids[k]);
    }
    cg_request_free(&whole);
}

/* citation_options: the configured mode, none when it is off. */
static void check_citation_options(const cg_json_t *j, cg_cohere_citations_t mode)
{
    int co = cg_json_get(j, 0, "citation_options");
    FZ_CHECK((co >= 0) == (mode != CG_COHERE_OFF));
    FZ_CHECK(co < 0 || verbatim(j, co,
                                mode == CG_COHERE_ACCURATE ? "{\"mode\":\"accurate\"}"
                                                           : "{\"mode\":\"fast\"}"));
}

static void check_cohere(const char *body, size_t len, const fz_pick_t *p, const cg_request_t *req,
                         const cg_dialect_req_t *out)
{
    cg_json_t j, rq;
    cg_json_init(&j, MAX_TOKENS);
    cg_json_init(&rq, MAX_TOKENS);
    check_valid_json(&j, out->body.p, out->body.len);
    check_members(&j, cohere_members);
    FZ_CHECK(cg_json_parse(&rq, body, len) == CG_JSON_OK);
    check_cohere_model(&j, &rq, p->model, out);
    check_cohere_messages(&j, cg_json_get(&j, 0, "messages"), &rq);
    check_kept(&j, "stream", &rq, cg_json_get(&rq, 0, "stream"));
    int mct = cg_json_get(&rq, 0, "max_completion_tokens");
    check_kept(&j, "max_tokens", &rq, present(&rq, mct) ? mct : cg_json_get(&rq, 0, "max_tokens"));
    check_kept(&j, "temperature", &rq, cg_json_get(&rq, 0, "temperature"));
    check_kept(&j, "p", &rq, cg_json_get(&rq, 0, "top_p"));
    check_stop(&j, &rq);
    check_cohere_documents(&j, body, len, req, out);
    check_citation_options(&j, p->mode);
    cg_json_free(&rq);
    cg_json_free(&j);
}

/* --- the run ------------------------------------------------------------------ */

static fz_pick_t pick(uint8_t b)
{
    static const char *const dialects[4] = {"anthropic", "responses", "openai", "anthropic"};
    static const cg_cohere_citations_t modes[4] = {CG_COHERE_FAST, CG_COHERE_ACCURATE,
                                                   CG_COHERE_OFF, CG_COHERE_FAST};
    bool cohere = b & 0x40, aws = !cohere && (b & 0x20);
    fz_pick_t p = {.name = dialects[b & 3],
                   .gemini = !cohere && !aws && (b & 0x10),
                   .bedrock = aws && !(b & 1),
                   .kb = aws && (b & 1),
                   .cohere = cohere,
                   .mode = modes[b & 3],
                   .model = (b & 4) ? CG_SPAN_LIT("dep") : (cg_span_t){NULL, 0},
                   .opts = {(b & 8) ? 16 : 8192, true}};
    p.extra = (p.gemini || aws) && (b & 2);
    if (cohere)
        p.name = "cohere";
    else if (p.gemini)
        p.name = b & 1 ? "vertex" : "gemini";
    else if (aws)
        p.name = p.kb ? "bedrock-kb" : "bedrock";
    return p;
}

/* The client's header fields, for bedrock-kb: only its session. */
static cg_span_t client_field(void *ctx, const char *name)
{
    (void)ctx;
    if (strcmp(name, "x-bedrock-session-id") == 0)
        return cg_span(session, strlen(session));
    return cg_span(NULL, 0);
}

static void check_refused(const fz_pick_t *p, const cg_dialect_req_t *out,
                          const cg_dialect_err_t *err)
{
    check_refusal(out, err);
    FZ_CHECK(out->model.len == 0 && out->doc_files == NULL);
    FZ_CHECK(strcmp(err->code, "invalid_request") != 0 ||
             ((p->gemini || p->bedrock) && strcmp(err->param, "model") == 0));
}

static void check_taken(const fz_pick_t *p, const cg_dialect_t *d, const char *body, size_t len,
                        const cg_request_t *req, const cg_dialect_req_t *out)
{
    if (!cg_dialect_translates(d))
        FZ_CHECK(out->body.len == len && memcmp(out->body.p, body, len) == 0);
    else if (p->gemini)
        check_gemini(body, len, p->model, p->extra, out);
    else if (p->bedrock)
        check_bedrock(body, len, p, req, out);
    else if (p->kb)
        check_kb(body, len, p->extra, out);
    else if (p->cohere)
        check_cohere(body, len, p, req, out);
    else
        check_translation(p->name, body, len, req, out);
    FZ_CHECK(p->gemini || p->bedrock || p->cohere || out->model.len == 0);
    FZ_CHECK(p->bedrock || out->doc_files == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fz_pick_t p = pick(data[0]);
    const cg_dialect_t *d = dialect_named(p.name);
    size_t len = size - 1;
    char *body = fz_dup(data + 1, len);

    cg_request_t req;
    int req_rc = cg_request_parse(&req, body, len, &p.opts);
    cg_dialect_req_t out, again;
    cg_dialect_err_t err, err2;
    memset(&err, 0, sizeof(err));
    cg_dialect_hdrs_t client = {client_field, NULL, NULL};
    cg_dialect_in_t in = {.req = req_rc == 0 ? &req : NULL,
                          .deployment = p.model,
                          .tools = p.gemini && p.extra ? tools : NULL,
                          .tool_config = p.bedrock && p.extra ? tool_config : NULL,
                          .kb_config = p.kb ? kb_config : NULL,
                          .client = p.kb && p.extra ? &client : NULL,
                          .cohere_citations = p.cohere ? p.mode : CG_COHERE_FAST};
    int rc = cg_dialect_request(d, body, len, &in, &out, &err);
    FZ_CHECK(rc == 0 || rc == -1);
    FZ_CHECK((req_rc != 0) == (rc == -1 && strcmp(err.code, "invalid_json") == 0));
    if (rc != 0) {
        check_refused(&p, &out, &err);
        if (p.kb)
            check_kb_refused(body, len, &err);
    } else {
        FZ_CHECK(err.code == NULL);
        FZ_CHECK(out.stream == req.stream);
        check_taken(&p, d, body, len, &req, &out);
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
