/*
 * Unit tests of the request side of the upstream dialects
 * (include/citegate/dialect.h, SPEC §6a): names and paths, the header rule
 * and the key fields, every mapping rule and refusal for anthropic,
 * responses, gemini and vertex, the text-part rule for every translating
 * dialect (bedrock's other rules are test_bedrock's), and the golden requests of
 * tests/fixtures/dialects/ (compared as JSON values).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/dialect.h"
#include "citegate/json.h"
#include "dialects.h"
#include "view.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const cg_cite_opts_t opts = {8192, true};
static const cg_span_t no_model = {NULL, 0};

#define O dialect_named("openai")
#define A dialect_named("anthropic")
#define R dialect_named("responses")
#define G dialect_named("gemini")
#define V dialect_named("vertex")
#define B dialect_named("bedrock")

/* The translating dialects, and every one. */
static const char *const translating[] = {"anthropic", "responses", "gemini", "vertex", "cohere"};
#define NTRANSLATING (sizeof(translating) / sizeof(translating[0]))
static const char *const all[] = {"openai", "anthropic", "responses", "gemini", "vertex", "cohere"};
#define NALL (sizeof(all) / sizeof(all[0]))

/* Translates body as the shell would: cg_request_parse (with o) first, for
 * the <source> tags. */
static int run_with(const cg_dialect_t *d, const char *body, size_t n, const cg_cite_opts_t *o,
                    cg_span_t model, cg_dialect_req_t *out, cg_dialect_err_t *err)
{
    cg_request_t req;
    int parsed = cg_request_parse(&req, body, n, o);
    memset(err, 0, sizeof(*err));
    cg_dialect_in_t in = {.req = parsed == 0 ? &req : NULL, .deployment = model};
    int rc = cg_dialect_request(d, body, n, &in, out, err);
    cg_request_free(&req);
    return rc;
}

static int run(const cg_dialect_t *d, const char *body, cg_dialect_req_t *out,
               cg_dialect_err_t *err)
{
    return run_with(d, body, strlen(body), &opts, no_model, out, err);
}

static bool contains(const cg_buf_t *b, const char *s)
{
    return memmem(b->p, b->len, s, strlen(s)) != NULL;
}

static void check_json_equal(const char *what, const char *got, size_t n, const char *want)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    int rc = cg_json_parse(&j, got, n);
    cg_json_free(&j);
    if (rc != CG_JSON_OK || !json_equal(got, n, want, strlen(want))) {
        print_error("%s\n  got:  %.*s\n  want: %s\n", what, (int)n, got, want);
        fail();
    }
}

/* The upstream body of `body` for d must equal `want` as JSON. */
static void expect_body(const cg_dialect_t *d, const char *body, const char *want)
{
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    int rc = run(d, body, &out, &err);
    if (rc != 0) {
        print_error("%s refused %s: %s (%s)\n", cg_dialect_name(d), body, err.message, err.code);
        fail();
    }
    check_json_equal(body, out.body.p, out.body.len, want);
    cg_dialect_req_free(&out);
}

/* The same request in both dialects. */
static void expect_both(const char *body, const char *anthropic, const char *responses)
{
    expect_body(A, body, anthropic);
    expect_body(R, body, responses);
}

/* `body` must be refused with code and param (both dialects), nothing kept. */
static void expect_error(const char *body, const char *code, const char *param)
{
    for (size_t k = 0; k < NTRANSLATING; k++) {
        const cg_dialect_t *d = dialect_named(translating[k]);
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        int rc = run(d, body, &out, &err);
        if (rc != -1 || err.code == NULL || strcmp(err.code, code) != 0 ||
            strcmp(err.param, param) != 0) {
            print_error("%s: %s: rc %d, code %s, param '%s'; want %s '%s'\n", cg_dialect_name(d),
                        body, rc, err.code ? err.code : "(none)", err.param, code, param);
            fail();
        }
        assert_null(out.body.p);
        assert_int_equal(out.body.len, 0);
        assert_null(out.doc_ids);
        assert_int_equal(out.ndocs, 0);
        assert_non_null(strstr(err.message, param)); /* the message names it */
    }
}

/* ---- names, paths, headers --------------------------------------------------- */

/* The path a dialect gives request r, or NULL when the client's is kept. */
static char *path_of(const cg_dialect_t *d, const cg_dialect_req_t *r)
{
    cg_buf_t b = {0};
    if (!cg_dialect_path(d, r, &b))
        return NULL;
    cg_buf_putc(&b, '\0');
    return b.p;
}

static void test_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < NALL; i++) {
        const cg_dialect_t *d = NULL;
        assert_true(cg_dialect_parse(all[i], &d));
        assert_string_equal(cg_dialect_name(d), all[i]);
        assert_non_null(strstr(cg_dialect_list(), all[i]));
    }
    assert_string_equal(cg_dialect_list(), "openai, anthropic, responses, gemini, vertex, bedrock, "
                                           "bedrock-kb, cohere");
    assert_ptr_equal(cg_dialect_default(), O);
    static const char *const bad[] = {"",         "Anthropic", "openai ",   "claude",
                                      "response", "azure",     "bedrock_kb"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const cg_dialect_t *d = A;
        assert_false(cg_dialect_parse(bad[i], &d));
        assert_ptr_equal(d, A); /* untouched */
    }
    cg_dialect_req_t r = {0};
    assert_null(path_of(O, &r));
    char *p = path_of(A, &r);
    assert_string_equal(p, "/v1/messages");
    free(p);
    p = path_of(R, &r);
    assert_string_equal(p, "/v1/responses");
    free(p);
    assert_false(cg_dialect_translates(O));
    assert_null(cg_dialect_view(O));
    for (size_t i = 0; i < NTRANSLATING; i++) {
        assert_true(cg_dialect_translates(dialect_named(translating[i])));
        assert_non_null(cg_dialect_view(dialect_named(translating[i])));
    }
    assert_ptr_equal(cg_dialect_view(G), cg_dialect_view(V)); /* one answer */
}

static cg_span_t span(const char *s)
{
    return s ? cg_span(s, strlen(s)) : (cg_span_t){NULL, 0};
}

/* cg_dialect_api_key(api_key, authorization) must be `want` (NULL: none). */
static void key_is(const char *api_key, const char *authorization, const char *want)
{
    cg_span_t k = cg_dialect_api_key(span(api_key), span(authorization));
    if (want == NULL ? k.p != NULL : (k.p == NULL || !cg_span_eq(k, want))) {
        print_error("api-key %s, authorization %s: got '%.*s', want %s\n",
                    api_key ? api_key : "(none)", authorization ? authorization : "(none)",
                    (int)k.n, k.p ? k.p : "(none)", want ? want : "(none)");
        fail();
    }
}

static void test_api_key(void **state)
{
    (void)state;
    key_is("sk-ant-1", NULL, "sk-ant-1");
    key_is("sk-ant-1", "Bearer other", "sk-ant-1"); /* api-key first */
    key_is(NULL, "Bearer sk-ant-2", "sk-ant-2");
    key_is(NULL, "bearer sk-ant-2", "sk-ant-2"); /* the scheme in any case */
    key_is(NULL, "BEARER\tsk-ant-2", "sk-ant-2");
    key_is(NULL, "  Bearer   sk-ant-2  ", "sk-ant-2");
    key_is("", "Bearer sk-ant-3", "sk-ant-3"); /* an empty api-key is no key */
    key_is("  ", "Bearer sk-ant-3", "sk-ant-3");
    key_is(" sk-ant-4\t", NULL, "sk-ant-4");
    key_is(NULL, "Basic dXNlcjpwYXNz", NULL);
    key_is(NULL, "Bearer", NULL);
    key_is(NULL, "Bearer   ", NULL);
    key_is(NULL, "Bearersk-ant-5", NULL);
    key_is(NULL, "", NULL);
    key_is(NULL, NULL, NULL);
    key_is("", NULL, NULL);
}

static void test_forwards_header(void **state)
{
    (void)state;
    static const char *const dropped[] = {"api-key",          "API-Key",   "authorization",
                                          "Authorization",    "x-api-key", "X-Api-Key",
                                          "anthropic-version"};
    static const char *const kept[] = {
        "content-type",           "accept",   "anthropic-beta", "user-agent", "openai-organization",
        "x-ms-client-request-id", "api-keys", "authorization2"};
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++) {
        assert_false(cg_dialect_forwards_header(A, span(dropped[i])));
        assert_true(cg_dialect_forwards_header(R, span(dropped[i])));
        assert_true(cg_dialect_forwards_header(O, span(dropped[i])));
    }
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        for (size_t k = 0; k < NALL; k++)
            assert_true(cg_dialect_forwards_header(dialect_named(all[k]), span(kept[i])));
    assert_string_equal(CG_ANTHROPIC_VERSION, "2023-06-01");
}

/* ---- mapping ------------------------------------------------------------------- */

static void test_system_join(void **state)
{
    (void)state;
    expect_both("{\"messages\":[{\"role\":\"system\",\"content\":\"a\"},"
                "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"b\"},"
                "{\"type\":\"text\",\"text\":\"c\"}]},"
                "{\"role\":\"user\",\"content\":\"q\"},"
                "{\"role\":\"system\",\"content\":\"d\"}]}",
                "{\"system\":\"a\\n\\nbc\\n\\nd\",\"messages\":[{\"role\":\"user\","
                "\"content\":\"q\"}],\"max_tokens\":4096}",
                "{\"instructions\":\"a\\n\\nbc\\n\\nd\",\"input\":[{\"role\":\"user\","
                "\"content\":\"q\"}]}");
    /* Empty ones add no blank line; none at all: no member. */
    expect_both("{\"messages\":[{\"role\":\"system\",\"content\":\"\"},"
                "{\"role\":\"system\",\"content\":null},{\"role\":\"system\",\"content\":[]},"
                "{\"role\":\"system\",\"content\":\"x\"},{\"role\":\"system\"},"
                "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"\"}]},"
                "{\"role\":\"user\",\"content\":\"q\"}]}",
                "{\"system\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                "\"max_tokens\":4096}",
                "{\"instructions\":\"x\",\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    expect_both("{\"messages\":[{\"role\":\"system\",\"content\":\"\"},"
                "{\"role\":\"user\",\"content\":\"q\"}]}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":4096}",
                "{\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    /* Two empty text parts are an empty text: no instructions. */
    expect_body(
        R,
        "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"\"},"
        "{\"type\":\"text\",\"text\":\"\"}]},{\"role\":\"user\",\"content\":\"q\"}]}",
        "{\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}");
}

static void test_message_content(void **state)
{
    (void)state;
    /* Strings, text parts one after the other, null and absent content as "",
     * empty strings kept, a final assistant message kept (anthropic: prefill). */
    expect_both("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                "{\"type\":\"text\",\"text\":\"\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                "{\"role\":\"assistant\",\"content\":null},{\"role\":\"user\",\"content\":\"\"},"
                "{\"role\":\"assistant\"},{\"role\":\"user\",\"content\":[]},"
                "{\"role\":\"assistant\",\"content\":\"The answer is\"}]}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"},"
                "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"},"
                "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"},"
                "{\"role\":\"assistant\",\"content\":\"The answer is\"}],\"max_tokens\":4096}",
                "{\"input\":[{\"role\":\"user\",\"content\":\"ab\"},"
                "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"},"
                "{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"},"
                "{\"role\":\"assistant\",\"content\":\"The answer is\"}]}");
    /* Only assistant messages are still a conversation. */
    expect_body(R, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"hi\"}]}",
                "{\"input\":[{\"role\":\"assistant\",\"content\":\"hi\"}]}");
    /* Other members of messages and parts are not sent. */
    expect_body(
        A,
        "{\"messages\":[{\"role\":\"user\",\"name\":\"bob\",\"content\":[{\"type\":\"text\","
        "\"text\":\"x\",\"cache_control\":{\"type\":\"ephemeral\"}}],\"extra\":1}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":4096}");
}

static void test_max_tokens(void **state)
{
    (void)state;
    static const char q[] = "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]";
    static const char rq[] = "\"input\":[{\"role\":\"user\",\"content\":\"q\"}]";
    static const struct {
        const char *members, *anthropic, *responses;
    } cases[] = {
        {"\"max_completion_tokens\":300,\"max_tokens\":100", "300", "300"},
        {"\"max_tokens\":100,\"max_completion_tokens\":300", "300", "300"},
        {"\"max_tokens\":100", "100", "100"},
        {"\"max_completion_tokens\":null,\"max_tokens\":100", "100", "100"},
        {"\"max_completion_tokens\":7,\"max_tokens\":null", "7", "7"},
        {"\"max_tokens\":null", "4096", NULL},
        {"\"seed\":1", "4096", NULL},
        {"\"max_tokens\":0", "0", "0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256], a[256], r[256];
        snprintf(body, sizeof(body), "{%s,%s}", q, cases[i].members);
        snprintf(a, sizeof(a), "{%s,\"max_tokens\":%s}", q, cases[i].anthropic);
        if (cases[i].responses)
            snprintf(r, sizeof(r), "{%s,\"max_output_tokens\":%s}", rq, cases[i].responses);
        else
            snprintf(r, sizeof(r), "{%s}", rq);
        expect_both(body, a, r);
    }
}

static void test_kept_fields(void **state)
{
    (void)state;
    expect_both("{\"model\":\"m\",\"temperature\":0,\"top_p\":1e-1,\"stream\":false,"
                "\"stop\":\"END\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                "\"max_tokens\":4096,\"temperature\":0,\"top_p\":0.1,\"stop_sequences\":[\"END\"],"
                "\"stream\":false}",
                "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"q\"}],"
                "\"temperature\":0,\"top_p\":0.1,\"stream\":false}");
    /* null is absent */
    expect_both("{\"model\":null,\"temperature\":null,\"top_p\":null,\"stream\":null,"
                "\"stop\":null,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":4096}",
                "{\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    /* stop as a list, also empty */
    expect_body(A,
                "{\"stop\":[\"a\",\"\\n\",\"\\u00e9\"],\"messages\":[{\"role\":\"user\","
                "\"content\":\"q\"}]}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":4096,"
                "\"stop_sequences\":[\"a\",\"\\n\",\"\xc3\xa9\"]}");
    expect_body(A, "{\"stop\":[],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":4096,"
                "\"stop_sequences\":[]}");
}

/* Request fields not named in SPEC §6a are not sent, whatever they are. */
static void test_nothing_else(void **state)
{
    (void)state;
    static const char body[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"n\":1,\"tools\":null,"
        "\"functions\":[],\"tool_choice\":\"none\",\"function_call\":\"none\","
        "\"parallel_tool_calls\":true,\"response_format\":{\"type\":\"json_object\"},"
        "\"seed\":3,\"user\":\"u\",\"logprobs\":true,\"top_logprobs\":2,\"logit_bias\":{},"
        "\"presence_penalty\":1,\"frequency_penalty\":1,\"metadata\":{\"a\":\"b\"},"
        "\"store\":true,\"modalities\":[\"text\"],\"prediction\":null,"
        "\"stream_options\":{\"include_usage\":true},\"data_sources\":[{\"type\":\"x\"}],"
        "\"reasoning_effort\":\"high\",\"service_tier\":\"auto\",\"web_search_options\":{},"
        "\"max_completion_tokens\":null,\"top_k\":5,\"system\":\"no\",\"input\":\"no\","
        "\"instructions\":\"no\",\"stop_sequences\":[\"no\"],\"max_output_tokens\":9,"
        "\"\\u0074ools\":[{\"type\":\"function\"}]}";
    expect_both(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":4096}",
                "{\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}");
}

static void test_model(void **state)
{
    (void)state;
    static const char with[] =
        "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    static const char without[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    static const char null_model[] =
        "{\"model\":null,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    cg_span_t deployment = CG_SPAN_LIT("my \"deployment\"");
    /* The body's model wins over the route's deployment name. */
    assert_int_equal(run_with(A, with, strlen(with), &opts, deployment, &out, &err), 0);
    check_json_equal("model", out.body.p, out.body.len,
                     "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                     "\"max_tokens\":4096}");
    cg_dialect_req_free(&out);
    assert_int_equal(run_with(R, without, strlen(without), &opts, deployment, &out, &err), 0);
    check_json_equal("deployment", out.body.p, out.body.len,
                     "{\"model\":\"my \\\"deployment\\\"\",\"input\":[{\"role\":\"user\","
                     "\"content\":\"q\"}]}");
    cg_dialect_req_free(&out);
    assert_int_equal(run_with(A, null_model, strlen(null_model), &opts, deployment, &out, &err), 0);
    check_json_equal("null model", out.body.p, out.body.len,
                     "{\"model\":\"my \\\"deployment\\\"\",\"messages\":[{\"role\":\"user\","
                     "\"content\":\"q\"}],\"max_tokens\":4096}");
    cg_dialect_req_free(&out);
}

/* Every string is decoded and escaped again: the upstream gets valid JSON
 * with the same text, whatever escapes the client used. */
static void test_escapes(void **state)
{
    (void)state;
    static const char body[] =
        "{\"model\":\"m\\u00e9\\/x\",\"messages\":["
        "{\"r\\u006fle\":\"x\",\"role\":\"us\\u0065r\",\"content\":"
        "\"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f"
        "\\u00e9\\ud83d\\ude00\\ud800x\\udc00\xe2\x82\xac\"},"
        "{\"role\":\"\\u0061ssistant\","
        "\"content\":[{\"type\":\"t\\u0065xt\",\"text\":\"\\u2028\"}]},"
        "{\"role\":\"system\",\"content\":\"s\\u0000\"}],\"stop\":\"\\u0007\"}";
    static const char anthropic[] =
        "{\"model\":\"m\xc3\xa9/x\",\"system\":\"s\\u0000\","
        "\"messages\":[{\"role\":\"user\",\"content\":"
        "\"q\\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f"
        "\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx\xef\xbf\xbd\xe2\x82\xac\"},"
        "{\"role\":\"assistant\",\"content\":\"\xe2\x80\xa8\"}],\"max_tokens\":4096,"
        "\"stop_sequences\":[\"\\u0007\"]}";
    expect_body(A, body, anthropic);
    /* Nothing is copied raw: no escaped solidus, no lone surrogate, no
     * control byte. */
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    assert_int_equal(run(A, body, &out, &err), 0);
    for (size_t i = 0; i < out.body.len; i++) {
        assert_true((unsigned char)out.body.p[i] >= 0x20);
        if (out.body.p[i] != '\\')
            continue;
        char c = out.body.p[++i];
        assert_true(c != '/');
        assert_true(c != 'u' || (out.body.p[i + 1] != 'd' && out.body.p[i + 1] != 'D'));
    }
    cg_dialect_req_free(&out);
}

/* ---- documents (anthropic) ------------------------------------------------------- */

static void test_documents(void **state)
{
    (void)state;
    /* In id order, before the text of the last user message (a string here),
     * empty sources left out, the first element of an id wins. */
    static const char body[] =
        "{\"messages\":["
        "{\"role\":\"system\",\"content\":\"<source id=\\\"5\\\" name=\\\"five.md\\\">Five</source>"
        "<source id=\\\"2\\\">Two \\\"quoted\\\"</source><source id=\\\"4\\\" "
        "name=\\\"e\\\"></source>"
        "<source id=\\\"5\\\" name=\\\"dup\\\">no</source>\"},"
        "{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":\"ok\"},"
        "{\"role\":\"user\",\"content\":\"second\"},{\"role\":\"assistant\",\"content\":\"Pre\"}]}";
    static const char want[] =
        "{\"system\":\"<source id=\\\"5\\\" name=\\\"five.md\\\">Five</source>"
        "<source id=\\\"2\\\">Two \\\"quoted\\\"</source><source id=\\\"4\\\" name=\\\"e\\\">"
        "</source><source id=\\\"5\\\" name=\\\"dup\\\">no</source>\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":\"ok\"},"
        "{\"role\":\"user\",\"content\":["
        "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\","
        "\"data\":\"Two \\\"quoted\\\"\"},\"title\":\"Unknown Document\","
        "\"citations\":{\"enabled\":true}},"
        "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\","
        "\"data\":\"Five\"},\"title\":\"five.md\",\"citations\":{\"enabled\":true}},"
        "{\"type\":\"text\",\"text\":\"second\"}]},"
        "{\"role\":\"assistant\",\"content\":\"Pre\"}],\"max_tokens\":4096}";
    expect_body(A, body, want);
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    assert_int_equal(run(A, body, &out, &err), 0);
    assert_int_equal(out.ndocs, 2);
    assert_int_equal(out.doc_ids[0], 2);
    assert_int_equal(out.doc_ids[1], 5);
    cg_dialect_req_free(&out);
    /* responses: no documents, the text as it is. */
    assert_int_equal(run(R, body, &out, &err), 0);
    assert_int_equal(out.ndocs, 0);
    assert_null(out.doc_ids);
    assert_false(contains(&out.body, "document"));
    cg_dialect_req_free(&out);
}

static void test_documents_edges(void **state)
{
    (void)state;
    /* The last user message's text is empty: the documents alone. */
    expect_body(
        A,
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
        "\"<source id=\\\"1\\\">One</source>\"}]},{\"role\":\"user\",\"content\":null}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"<source id=\\\"1\\\">One</source>\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":{\"type\":\"text\","
        "\"media_type\":\"text/plain\",\"data\":\"One\"},\"title\":\"Unknown Document\","
        "\"citations\":{\"enabled\":true}}]}],\"max_tokens\":4096}");
    /* No user message: no document, nothing to put it in. */
    static const char no_user[] =
        "{\"messages\":[{\"role\":\"system\",\"content\":\"<source id=\\\"1\\\">One</source>\"},"
        "{\"role\":\"assistant\",\"content\":\"a\"}]}";
    expect_body(A, no_user,
                "{\"system\":\"<source id=\\\"1\\\">One</source>\",\"messages\":[{\"role\":"
                "\"assistant\",\"content\":\"a\"}],\"max_tokens\":4096}");
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    assert_int_equal(run(A, no_user, &out, &err), 0);
    assert_int_equal(out.ndocs, 0);
    cg_dialect_req_free(&out);
    /* Without the parsed request there are no sources to send. */
    static const char one[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"<source id=\\\"1\\\">One</source>\"}]}";
    assert_int_equal(cg_dialect_request(A, one, strlen(one), NULL, &out, &err), 0);
    assert_int_equal(out.ndocs, 0);
    assert_false(contains(&out.body, "document"));
    cg_dialect_req_free(&out);
}

/* A document carries the source's whole text, not the snippet cut to
 * max_doc_bytes that citations show the client. */
static void test_documents_whole_text(void **state)
{
    (void)state;
    cg_buf_t body = {0}, text = {0};
    for (int i = 0; i < 3000; i++)
        cg_buf_puts(&text, "\xc3\xa9"); /* the cut falls on a character boundary */
    cg_buf_puts(&body, "{\"messages\":[{\"role\":\"user\",\"content\":\"<source id=\\\"3\\\" "
                       "name=\\\"https://x.example/a%20b.pdf\\\">");
    cg_buf_put(&body, text.p, text.len);
    cg_buf_puts(&body, "</source>q\"}]}");
    cg_cite_opts_t small = {16, true};
    cg_request_t req;
    assert_int_equal(cg_request_parse(&req, body.p, body.len, &small), 0);
    assert_int_equal(strlen(req.sources.v[0].content), 16);
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    cg_dialect_in_t in = {.req = &req};
    assert_int_equal(cg_dialect_request(A, body.p, body.len, &in, &out, &err), 0);
    cg_buf_t want = {0};
    cg_buf_puts(&want, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\","
                       "\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"");
    cg_buf_put(&want, text.p, text.len);
    cg_buf_puts(&want, "\"},\"title\":\"a b.pdf\",\"citations\":{\"enabled\":true}},"
                       "{\"type\":\"text\",\"text\":\"<source id=\\\"3\\\" "
                       "name=\\\"https://x.example/a%20b.pdf\\\">");
    cg_buf_put(&want, text.p, text.len);
    cg_buf_puts(&want, "</source>q\"}]}],\"max_tokens\":4096}");
    cg_buf_putc(&want, '\0');
    check_json_equal("whole text", out.body.p, out.body.len, want.p);
    assert_int_equal(out.ndocs, 1);
    assert_int_equal(out.doc_ids[0], 3);
    cg_dialect_req_free(&out);
    cg_request_free(&req);
    cg_buf_free(&want);
    cg_buf_free(&text);
    cg_buf_free(&body);
}

/* ---- refusals ------------------------------------------------------------------------ */

static void test_refusals(void **state)
{
    (void)state;
    static const char user[] = "{\"role\":\"user\",\"content\":\"q\"}";
    char body[512];
    static const struct {
        const char *root, *message, *param;
    } cases[] = {
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", NULL, "tools"},
        {"\"tools\":{}", NULL, "tools"},
        {"\"tools\":\"auto\"", NULL, "tools"},
        {"\"functions\":[{\"name\":\"f\"}]", NULL, "functions"},
        {"\"n\":2", NULL, "n"},
        {"\"n\":1.5", NULL, "n"},
        {"\"n\":\"3\"", NULL, "n"},
        {NULL, "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"r\"}", "tool"},
        {NULL, "{\"role\":\"function\",\"name\":\"f\",\"content\":\"r\"}", "function"},
        {NULL, "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\"}]}", "tool_calls"},
        {NULL, "{\"role\":\"assistant\",\"tool_calls\":{}}", "tool_calls"},
        {NULL, "{\"role\":\"assistant\",\"function_call\":{\"name\":\"f\"}}", "function_call"},
        {NULL, "{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}",
         "image_url"},
        {NULL, "{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}", "input_audio"},
        {NULL, "{\"role\":\"user\",\"content\":[{\"type\":\"file\",\"file\":{}}]}", "file"},
        {NULL, "{\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"no\"}]}",
         "refusal"},
        {NULL, "{\"role\":\"system\",\"content\":[{\"type\":\"im\\u0061ge_url\"}]}", "image_url"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].root)
            snprintf(body, sizeof(body), "{\"messages\":[%s],%s}", user, cases[i].root);
        else
            snprintf(body, sizeof(body), "{\"messages\":[%s,%s]}", user, cases[i].message);
        expect_error(body, "unsupported_parameter", cases[i].param);
    }
    /* Not refused: what asks for nothing. */
    static const char *const fine[] = {
        "\"tools\":null", "\"tools\":[]", "\"functions\":null",
        "\"n\":1",        "\"n\":null",   "\"tool_choice\":\"required\"",
    };
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        snprintf(body, sizeof(body), "{\"messages\":[%s],%s}", user, fine[i]);
        expect_both(body,
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"max_tokens\":4096}",
                    "{\"input\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    }
    expect_both("{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\",\"tool_calls\":null,"
                "\"function_call\":null},{\"role\":\"user\",\"content\":\"q\"}]}",
                "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"user\","
                "\"content\":\"q\"}],\"max_tokens\":4096}",
                "{\"input\":[{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"user\","
                "\"content\":\"q\"}]}");
}

static void test_refusal_messages(void **state)
{
    (void)state;
    static const struct {
        const char *d;
        const char *body, *message;
    } cases[] = {
        {"anthropic", "{\"tools\":[{}],\"messages\":[]}",
         "tools is not supported with the anthropic upstream dialect"},
        {"responses", "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"n\":4}",
         "n > 1 is not supported with the responses upstream dialect"},
        {"anthropic", "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"tool\"}]}",
         "a tool message is not supported with the anthropic upstream dialect (messages[1])"},
        {"responses",
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
         "{\"type\":\"input_audio\"}]}]}",
         "input_audio is not supported with the responses upstream dialect "
         "(messages[0].content[1])"},
    };
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(run(dialect_named(cases[i].d), cases[i].body, &out, &err), -1);
        assert_string_equal(err.message, cases[i].message);
    }
    /* A part type that is not a plain name is named by its place. */
    static const char *const odd[] = {"", "\xc3\xa9", "a b", "\\u0000",
                                      "abcdefghijabcdefghijabcdefghijabcdefghijx"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"%s\"}]}]}", odd[i]);
        assert_int_equal(run(A, body, &out, &err), -1);
        assert_string_equal(err.code, "unsupported_parameter");
        assert_string_equal(err.param, "messages[0].content[0].type");
        assert_string_equal(err.message, "messages[0].content[0].type is not supported with the "
                                         "anthropic upstream dialect");
    }
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                 "\"abcdefghijabcdefghijabcdefghijabcdefghij\"}]}]}",
                 "unsupported_parameter", "abcdefghijabcdefghijabcdefghijabcdefghij");
    /* Top-level refusals come first, then the messages in order. */
    assert_int_equal(
        run(R, "{\"messages\":[{\"role\":\"tool\"}],\"n\":2,\"tools\":[{}]}", &out, &err), -1);
    assert_string_equal(err.param, "tools");
    assert_int_equal(run(R,
                         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\"}]},"
                         "{\"role\":\"tool\"}]}",
                         &out, &err),
                     -1);
    assert_string_equal(err.param, "file");
}

static void test_invalid(void **state)
{
    (void)state;
    expect_error("", "invalid_json", "");
    expect_error("not json", "invalid_json", "");
    expect_error("[{\"role\":\"user\",\"content\":\"q\"}]", "invalid_json", "");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]", "invalid_json", "");
    /* not UTF-8, as cg_request_parse refuses it (RFC 8259 §8.1) */
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\xff\"}]}", "invalid_json", "");
    expect_error("{}", "missing_required_parameter", "messages");
    expect_error("{\"messages\":null}", "invalid_type", "messages");
    expect_error("{\"messages\":{\"role\":\"user\"}}", "invalid_type", "messages");
    expect_error("{\"messages\":[]}", "invalid_value", "messages");
    expect_error("{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}", "invalid_value",
                 "messages");
    expect_error("{\"messages\":[\"hi\"]}", "invalid_type", "messages[0]");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"critic\"}]}",
                 "invalid_value", "messages[1].role");
    expect_error("{\"messages\":[{\"content\":\"q\"}]}", "invalid_value", "messages[0].role");
    expect_error("{\"messages\":[{\"role\":1,\"content\":\"q\"}]}", "invalid_value",
                 "messages[0].role");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "invalid_type",
                 "messages[0].content");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":{\"text\":\"q\"}}]}",
                 "invalid_type", "messages[0].content");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":[\"q\"]}]}", "invalid_type",
                 "messages[0].content[0]");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"q\"}]}]}",
                 "invalid_type", "messages[0].content[0]");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
                 "invalid_type", "messages[0].content[0]");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                 "\"text\":null}]}]}",
                 "invalid_type", "messages[0].content[0]");
    static const char *const typed[][2] = {
        {"\"temperature\":\"hot\"", "temperature"},
        {"\"top_p\":true", "top_p"},
        {"\"max_tokens\":\"100\"", "max_tokens"},
        {"\"max_completion_tokens\":[1]", "max_completion_tokens"},
        {"\"stream\":\"yes\"", "stream"},
        {"\"stream\":1", "stream"},
        {"\"model\":5", "model"},
    };
    for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],%s}",
                 typed[i][0]);
        expect_error(body, "invalid_type", typed[i][1]);
    }
}

/* stop is checked only where it is sent. */
static void test_stop_types(void **state)
{
    (void)state;
    static const char *const bad[] = {"5", "[1]", "[\"a\",null]", "{}", "true"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"stop\":%s}", bad[i]);
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        assert_int_equal(run(A, body, &out, &err), -1);
        assert_string_equal(err.code, "invalid_type");
        assert_string_equal(err.param, "stop");
        assert_int_equal(run(R, body, &out, &err), 0);
        cg_dialect_req_free(&out);
    }
}

static void test_err_json(void **state)
{
    (void)state;
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    cg_buf_t b = {0};
    assert_int_equal(run(A, "{\"messages\":[],\"tools\":[{}]}", &out, &err), -1);
    cg_dialect_err_json(&err, &b);
    check_json_equal("error", b.p, b.len,
                     "{\"error\":{\"message\":\"tools is not supported with the anthropic upstream "
                     "dialect\",\"type\":\"invalid_request_error\",\"param\":\"tools\","
                     "\"code\":\"unsupported_parameter\"}}");
    b.len = 0;
    assert_int_equal(run(R, "[]", &out, &err), -1);
    cg_dialect_err_json(&err, &b);
    check_json_equal(
        "error", b.p, b.len,
        "{\"error\":{\"message\":\"request body is not a valid JSON object\","
        "\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_json\"}}");
    assert_int_equal(CG_DIALECT_ERR_STATUS, 400);
    cg_buf_free(&b);
}

/* ---- gemini and vertex --------------------------------------------------------- */

/* The gemini body of `body` on the Azure route of deployment "gm-1". */
static void expect_gemini(const char *body, const char *want)
{
    for (int v = 0; v < 2; v++) {
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        int rc = run_with(v ? V : G, body, strlen(body), &opts, CG_SPAN_LIT("gm-1"), &out, &err);
        if (rc != 0) {
            print_error("refused %s: %s (%s)\n", body, err.message, err.code);
            fail();
        }
        check_json_equal(body, out.body.p, out.body.len, want);
        assert_int_equal(out.model.len, 4);
        assert_memory_equal(out.model.p, "gm-1", 4);
        cg_dialect_req_free(&out);
    }
}

static void test_gemini_body(void **state)
{
    (void)state;
    /* system and developer joined into systemInstruction, assistant is
     * "model", generationConfig from max_completion_tokens, temperature,
     * top_p and stop; model and stream are not members. */
    expect_gemini("{\"model\":\"ignored\",\"stream\":true,\"messages\":["
                  "{\"role\":\"system\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"q1\"},"
                  "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"r\"},"
                  "{\"type\":\"text\",\"text\":\"s\"}]},{\"role\":\"developer\",\"content\":\"b\"},"
                  "{\"role\":\"user\",\"content\":\"q2\"}],\"max_tokens\":5,"
                  "\"max_completion_tokens\":9,\"temperature\":0.5,\"top_p\":1,\"stop\":\"X\"}",
                  "{\"systemInstruction\":{\"parts\":[{\"text\":\"a\\n\\nb\"}]},\"contents\":["
                  "{\"role\":\"user\",\"parts\":[{\"text\":\"q1\"}]},"
                  "{\"role\":\"model\",\"parts\":[{\"text\":\"rs\"}]},"
                  "{\"role\":\"user\",\"parts\":[{\"text\":\"q2\"}]}],"
                  "\"generationConfig\":{\"maxOutputTokens\":9,\"temperature\":0.5,\"topP\":1,"
                  "\"stopSequences\":[\"X\"]}}");
    /* Nothing to configure: no generationConfig; no system text: no
     * systemInstruction; null members are absent. */
    expect_gemini("{\"messages\":[{\"role\":\"system\",\"content\":\"\"},"
                  "{\"role\":\"user\",\"content\":null}],\"temperature\":null,\"stop\":null,"
                  "\"max_tokens\":null,\"n\":1,\"seed\":3,\"tools\":[],\"user\":\"u\"}",
                  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"\"}]}]}");
    expect_gemini("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"stop\":[\"a\",\"b\"]}",
                  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"q\"}]}],"
                  "\"generationConfig\":{\"stopSequences\":[\"a\",\"b\"]}}");
    /* Request-side <source> tags stay in the text: no documents. */
    expect_gemini("{\"messages\":[{\"role\":\"user\",\"content\":\"<source id=\\\"1\\\">One"
                  "</source> q\"}]}",
                  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"<source id=\\\"1\\\">"
                  "One</source> q\"}]}]}");
}

/* ---- text parts (SPEC §6a): a message's text is its text parts in order with
 * nothing added between them; only separate system and developer messages
 * are joined, with a blank line. One test per translating dialect. ------------ */

/* A system message and a developer message, a user message of parts "a"
 * and "b", an assistant message of parts "c", "" and "d". */
static const char text_parts[] =
    "{\"model\":\"m\",\"messages\":["
    "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"s\"},"
    "{\"type\":\"text\",\"text\":\"t\"}]},{\"role\":\"developer\",\"content\":\"u\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
    "{\"type\":\"text\",\"text\":\"b\"}]},"
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"c\"},"
    "{\"type\":\"text\",\"text\":\"\"},{\"type\":\"text\",\"text\":\"d\"}]}]}";

static void test_text_parts_anthropic(void **state)
{
    (void)state;
    expect_body(A, text_parts,
                "{\"model\":\"m\",\"system\":\"st\\n\\nu\",\"messages\":["
                "{\"role\":\"user\",\"content\":\"ab\"},"
                "{\"role\":\"assistant\",\"content\":\"cd\"}],\"max_tokens\":4096}");
    /* The message that carries the documents: its text block too. */
    expect_body(A,
                "{\"messages\":[{\"role\":\"system\",\"content\":\"<source id=\\\"1\\\">One"
                "</source>\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                "{\"type\":\"text\",\"text\":\"b\"}]}]}",
                "{\"system\":\"<source id=\\\"1\\\">One</source>\",\"messages\":["
                "{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":{\"type\":"
                "\"text\",\"media_type\":\"text/plain\",\"data\":\"One\"},"
                "\"title\":\"Unknown Document\","
                "\"citations\":{\"enabled\":true}},{\"type\":\"text\",\"text\":\"ab\"}]}],"
                "\"max_tokens\":4096}");
}

static void test_text_parts_responses(void **state)
{
    (void)state;
    expect_body(R, text_parts,
                "{\"model\":\"m\",\"instructions\":\"st\\n\\nu\",\"input\":["
                "{\"role\":\"user\",\"content\":\"ab\"},"
                "{\"role\":\"assistant\",\"content\":\"cd\"}]}");
}

static void test_text_parts_gemini(void **state)
{
    (void)state;
    expect_gemini(text_parts, /* and vertex */
                  "{\"systemInstruction\":{\"parts\":[{\"text\":\"st\\n\\nu\"}]},\"contents\":["
                  "{\"role\":\"user\",\"parts\":[{\"text\":\"ab\"}]},"
                  "{\"role\":\"model\",\"parts\":[{\"text\":\"cd\"}]}]}");
}

static void test_text_parts_bedrock(void **state)
{
    (void)state;
    expect_body(B, text_parts,
                "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"ab\"}]},"
                "{\"role\":\"assistant\",\"content\":[{\"text\":\"cd\"}]}],"
                "\"system\":[{\"text\":\"st\\n\\nu\"}]}");
}

static void test_gemini_tools(void **state)
{
    (void)state;
    static const char body[] =
        "{\"model\":\"gemini-2.5-flash\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    static const char tools[] = "[{\"googleSearch\":{}}]";
    cg_request_t req;
    assert_int_equal(cg_request_parse(&req, body, strlen(body), &opts), 0);
    for (int v = 0; v < 2; v++) {
        cg_dialect_in_t in = {.req = &req, .tools = tools};
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        assert_int_equal(cg_dialect_request(v ? V : G, body, strlen(body), &in, &out, &err), 0);
        check_json_equal("tools", out.body.p, out.body.len,
                         "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"q\"}]}],"
                         "\"tools\":[{\"googleSearch\":{}}]}");
        cg_dialect_req_free(&out);
        /* Only gemini and vertex send them. */
        assert_int_equal(cg_dialect_request(v ? A : R, body, strlen(body), &in, &out, &err), 0);
        assert_false(contains(&out.body, "googleSearch"));
        cg_dialect_req_free(&out);
    }
    /* A client's own tools are still refused. */
    static const char own[] = "{\"model\":\"m\",\"tools\":[{\"type\":\"function\"}],"
                              "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    cg_dialect_in_t in = {.tools = tools};
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    assert_int_equal(cg_dialect_request(G, own, strlen(own), &in, &out, &err), -1);
    assert_string_equal(err.param, "tools");
    assert_string_equal(err.code, "unsupported_parameter");
    cg_request_free(&req);
}

/* The model names the upstream path: the deployment of an Azure route
 * wins, else the body's (decoded), and only A-Z a-z 0-9 . _ - pass. */
static void test_gemini_model(void **state)
{
    (void)state;
    static const struct {
        const char *body_model; /* JSON value, or NULL: none */
        const char *deployment; /* NULL: not an Azure route */
        const char *want;       /* NULL: refused */
    } cases[] = {
        {"\"gemini-2.5-flash\"", NULL, "gemini-2.5-flash"},
        {"\"gemini\\u002d2.5_pro.001\"", NULL, "gemini-2.5_pro.001"},
        {"\"body\"", "dep-1", "dep-1"},
        {NULL, "dep-1", "dep-1"},
        {"null", "d", "d"},
        {"\".x\"", NULL, ".x"},
        {NULL, NULL, NULL},
        {"null", NULL, NULL},
        {"\"\"", NULL, NULL},
        {"\"models/gemini-2.5-flash\"", NULL, NULL},
        {"\"a..b\"", NULL, NULL},
        {"\"..\"", NULL, NULL},
        {"\"gemini%2F..\"", NULL, NULL},
        {"\"gemini?alt=json\"", NULL, NULL},
        {"\"gemini 2\"", NULL, NULL},
        {"\"gemini\\u0000\"", NULL, NULL},
        {"\"g\xc3\xa9mini\"", NULL, NULL},
        {"\"gemini:streamGenerateContent\"", NULL, NULL},
        {"\"ok\"", "dep/../x", NULL},
        {"\"ok\"", "dep%2e", NULL},
        {"\"ok\"", "", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        if (cases[i].body_model)
            snprintf(body, sizeof(body),
                     "{\"model\":%s,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}",
                     cases[i].body_model);
        else
            snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
        cg_span_t dep = cases[i].deployment ? span(cases[i].deployment) : no_model;
        for (int v = 0; v < 2; v++) {
            cg_dialect_req_t out;
            cg_dialect_err_t err;
            int rc = run_with(v ? V : G, body, strlen(body), &opts, dep, &out, &err);
            if (cases[i].want == NULL) {
                if (rc != -1 || strcmp(err.code, "invalid_request") != 0 ||
                    strcmp(err.param, "model") != 0) {
                    print_error("case %zu: rc %d, %s\n", i, rc, rc ? err.code : out.model.p);
                    fail();
                }
                assert_non_null(strstr(err.message, "model"));
                assert_int_equal(out.body.len, 0); /* nothing to send */
                assert_int_equal(out.model.len, 0);
                continue;
            }
            assert_int_equal(rc, 0);
            assert_int_equal(out.model.len, strlen(cases[i].want));
            assert_memory_equal(out.model.p, cases[i].want, out.model.len);
            cg_dialect_req_free(&out);
        }
    }
    /* The other dialects name no model in a path. */
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    assert_int_equal(run(A, "{\"model\":\"a/b\",\"messages\":[{\"role\":\"user\",\"content\":"
                            "\"q\"}]}",
                         &out, &err),
                     0);
    assert_int_equal(out.model.len, 0);
    cg_dialect_req_free(&out);
}

static void test_gemini_path(void **state)
{
    (void)state;
    static const char stream[] = "{\"model\":\"gemini-2.5-flash\",\"stream\":true,"
                                 "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    static const char body[] = "{\"model\":\"gemini-2.5-flash\",\"stream\":false,"
                               "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    for (int v = 0; v < 2; v++) {
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        assert_int_equal(run(v ? V : G, stream, &out, &err), 0);
        char *p = path_of(v ? V : G, &out);
        assert_string_equal(p, "/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
        free(p);
        cg_dialect_req_free(&out);
        assert_int_equal(run(v ? V : G, body, &out, &err), 0);
        p = path_of(v ? V : G, &out);
        assert_string_equal(p, "/models/gemini-2.5-flash:generateContent");
        free(p);
        cg_dialect_req_free(&out);
    }
}

/* A client's header fields for the key tests: name, value pairs. */
typedef struct fields {
    const char *const *client; /* NULL-terminated pairs */
    char added[512];           /* "name=value;" for each field added */
} fields_t;

static cg_span_t get_field(void *ctx, const char *name)
{
    fields_t *f = ctx;
    for (size_t i = 0; f->client[i]; i += 2)
        if (strcasecmp(f->client[i], name) == 0)
            return span(f->client[i + 1]);
    return no_model;
}

static void add_field(void *ctx, cg_span_t name, cg_span_t value)
{
    fields_t *f = ctx;
    size_t n = strlen(f->added);
    snprintf(f->added + n, sizeof(f->added) - n, "%.*s=%.*s;", (int)name.n, name.p, (int)value.n,
             value.p);
}

/* The fields dialect d adds for the client's fields. */
static void added_is(const cg_dialect_t *d, const char *const *client, const char *want)
{
    fields_t f = {client, ""};
    cg_dialect_hdrs_t h = {get_field, add_field, &f};
    cg_dialect_add_headers(d, &h);
    if (strcmp(f.added, want) != 0) {
        print_error("%s: added '%s', want '%s'\n", cg_dialect_name(d), f.added, want);
        fail();
    }
}

static void test_gemini_keys(void **state)
{
    (void)state;
    static const char *const all_three[] = {"x-goog-api-key", " k-goog ", "api-key", "k-azure",
                                            "authorization",  "Bearer k-bearer", NULL};
    static const char *const azure_bearer[] = {"api-key", "k-azure", "authorization",
                                               "Bearer k-bearer", NULL};
    static const char *const empty_key[] = {"x-goog-api-key", "", "api-key", " ",
                                            "authorization",  "bearer k-b", NULL};
    static const char *const oauth[] = {"authorization", "Bearer ya29.token", NULL};
    static const char *const basic[] = {"authorization", "Basic dXNlcjpwdw==", NULL};
    static const char *const none[] = {NULL};
    /* gemini: x-goog-api-key, else api-key, else the Bearer credentials. */
    added_is(G, all_three, "x-goog-api-key=k-goog;");
    added_is(G, azure_bearer, "x-goog-api-key=k-azure;");
    added_is(G, empty_key, "x-goog-api-key=k-b;");
    added_is(G, oauth, "x-goog-api-key=ya29.token;");
    added_is(G, basic, "");
    added_is(G, none, "");
    /* vertex: Authorization goes as it came; an API key (express mode) as
     * x-goog-api-key, never from the Bearer value. */
    added_is(V, all_three, "x-goog-api-key=k-goog;");
    added_is(V, azure_bearer, "x-goog-api-key=k-azure;");
    added_is(V, empty_key, "");
    added_is(V, oauth, "");
    added_is(V, none, "");
    /* anthropic's, through the same callbacks; the others add none. */
    added_is(A, azure_bearer, "anthropic-version=2023-06-01;x-api-key=k-azure;");
    added_is(R, azure_bearer, "");
    added_is(O, azure_bearer, "");

    static const char *const gemini_drops[] = {"api-key", "Authorization", "x-goog-api-key",
                                               "X-Goog-Api-Key"};
    for (size_t i = 0; i < sizeof(gemini_drops) / sizeof(gemini_drops[0]); i++) {
        assert_false(cg_dialect_forwards_header(G, span(gemini_drops[i])));
        assert_true(cg_dialect_forwards_header(A, span(gemini_drops[i])) ||
                    strcasecmp(gemini_drops[i], "x-goog-api-key") != 0);
    }
    assert_false(cg_dialect_forwards_header(V, span("api-key")));
    assert_false(cg_dialect_forwards_header(V, span("x-goog-api-key")));
    assert_true(cg_dialect_forwards_header(V, span("authorization")));
    assert_true(cg_dialect_forwards_header(V, span("x-goog-user-project")));
    assert_true(cg_dialect_forwards_header(G, span("x-goog-user-project")));
    assert_true(cg_dialect_forwards_header(G, span("x-api-key")));
}

/* stop is checked where it is sent: gemini and vertex refuse a bad one. */
static void test_gemini_refusals(void **state)
{
    (void)state;
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    static const char bad_stop[] =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"stop\":[1]}";
    assert_int_equal(run(G, bad_stop, &out, &err), -1);
    assert_string_equal(err.param, "stop");
    assert_string_equal(err.code, "invalid_type");
    assert_int_equal(run(V, "{\"model\":\"m\",\"n\":3,\"messages\":[{\"role\":\"user\","
                            "\"content\":\"q\"}]}",
                         &out, &err),
                     -1);
    assert_string_equal(err.message, "n > 1 is not supported with the vertex upstream dialect");
    /* What every dialect refuses comes before the model. */
    assert_int_equal(run(G, "{\"model\":\"a/b\",\"messages\":[{\"role\":\"tool\"}]}", &out, &err),
                     -1);
    assert_string_equal(err.param, "tool");
}

/* ---- what the answer side needs; openai ----------------------------------------------- */

static void test_stream_flags(void **state)
{
    (void)state;
    static const struct {
        const char *members;
        bool stream, usage;
    } cases[] = {
        {"\"stream\":true,\"stream_options\":{\"include_usage\":true}", true, true},
        {"\"stream\":true,\"stream_options\":{\"include_usage\":false}", true, false},
        {"\"stream\":true,\"stream_options\":null", true, false},
        {"\"stream\":true", true, false},
        {"\"stream\":false,\"stream_options\":{\"include_usage\":true}", false, true},
        {"\"stream_options\":{\"include_usage\":\"true\"}", false, false},
        {"\"stream\":false,\"stream\":true", false, false}, /* the first one, like request.c */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],%s}",
                 cases[i].members);
        cg_request_t req;
        assert_int_equal(cg_request_parse(&req, body, strlen(body), &opts), 0);
        for (size_t k = 0; k < NALL; k++) {
            cg_dialect_req_t out;
            cg_dialect_err_t err;
            assert_int_equal(run(dialect_named(all[k]), body, &out, &err), 0);
            assert_int_equal(out.stream, cases[i].stream);
            assert_int_equal(out.stream, req.stream);
            assert_int_equal(out.include_usage, cases[i].usage);
            cg_dialect_req_free(&out);
        }
        cg_request_free(&req);
    }
}

static void test_openai_unchanged(void **state)
{
    (void)state;
    static const char body[] =
        " {\"model\":\"m\",\"tools\":[{}],\"n\":5,\"messages\":[{\"role\":\"tool\"}],\"x\":1}\n";
    cg_dialect_req_t out;
    cg_dialect_err_t err;
    assert_int_equal(run(O, body, &out, &err), 0);
    assert_int_equal(out.body.len, strlen(body));
    assert_memory_equal(out.body.p, body, out.body.len);
    assert_int_equal(out.ndocs, 0);
    cg_dialect_req_free(&out);
    assert_int_equal(run(O, "[]", &out, &err), -1);
    assert_string_equal(err.code, "invalid_json");
}

/* Duplicate members: the first one counts, as in cg_request_parse, and the
 * upstream gets each member once. */
static void test_duplicate_keys(void **state)
{
    (void)state;
    expect_both("{\"messages\":[{\"role\":\"user\",\"content\":\"first\"}],\"tools\":null,"
                "\"tools\":[{}],\"messages\":[{\"role\":\"tool\"}],\"temperature\":1,"
                "\"temperature\":\"x\",\"max_tokens\":5,\"max_tokens\":6}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"first\"}],\"max_tokens\":5,"
                "\"temperature\":1}",
                "{\"input\":[{\"role\":\"user\",\"content\":\"first\"}],\"max_output_tokens\":5,"
                "\"temperature\":1}");
    expect_both("{\"messages\":[{\"role\":\"user\",\"role\":\"tool\",\"content\":\"a\","
                "\"content\":[{\"type\":\"image_url\"}]}]}",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":4096}",
                "{\"input\":[{\"role\":\"user\",\"content\":\"a\"}]}");
}

/* Large bodies: many messages, many members; all linear. */
static void test_large(void **state)
{
    (void)state;
    enum { N = 20000 };
    cg_buf_t b = {0};
    cg_buf_puts(&b, "{\"messages\":[");
    for (int i = 0; i < N; i++)
        cg_buf_printf(&b, "%s{\"role\":\"%s\",\"content\":\"message %d\"}", i ? "," : "",
                      i % 2 ? "assistant" : "user", i);
    cg_buf_puts(&b, "],\"junk\":{");
    for (int i = 0; i < N; i++)
        cg_buf_printf(&b, "%s\"k%d\":[%d]", i ? "," : "", i, i);
    cg_buf_puts(&b, "}");
    for (int i = 0; i < N; i++)
        cg_buf_printf(&b, ",\"m%d\":%d", i, i);
    cg_buf_puts(&b, "}");
    /* Its list of turns, and how many members the body has. */
    static const struct {
        const char *list;
        int members;
    } shape[NTRANSLATING] = {{"messages", 3}, {"input", 2}, {"contents", 1}, {"contents", 1},
                             {"messages", 3}};
    for (size_t k = 0; k < NTRANSLATING; k++) {
        const cg_dialect_t *d = dialect_named(translating[k]);
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        assert_int_equal(run_with(d, b.p, b.len, &opts, CG_SPAN_LIT("m"), &out, &err), 0);
        cg_json_t j;
        cg_json_init(&j, 1u << 22);
        assert_int_equal(cg_json_parse(&j, out.body.p, out.body.len), CG_JSON_OK);
        int msgs = cg_json_get(&j, 0, shape[k].list);
        assert_int_equal(j.tok[msgs].size, N);
        assert_int_equal(j.tok[0].size, shape[k].members);
        cg_json_free(&j);
        cg_dialect_req_free(&out);
    }
    cg_buf_free(&b);
}

/* ---- fixtures ------------------------------------------------------------------------------ */

/* NAME.request.json against NAME.DIALECT.json for every translating
 * dialect: an upstream body, or the error the client gets. Requests are translated as
 * if they came on the deployment route of "my-deployment". */
static void check_fixture(const char *name)
{
    char path[512];
    size_t n, en;
    snprintf(path, sizeof(path), "%s/dialects/%s.request.json", CG_FIXTURES, name);
    char *body = read_file(path, &n);
    for (size_t k = 0; k < NTRANSLATING; k++) {
        const cg_dialect_t *d = dialect_named(translating[k]);
        snprintf(path, sizeof(path), "%s/dialects/%s.%s.json", CG_FIXTURES, name,
                 cg_dialect_name(d));
        char *want = read_file(path, &en);
        cg_json_t j;
        cg_json_init(&j, 1u << 16);
        assert_int_equal(cg_json_parse(&j, want, en), CG_JSON_OK);
        bool error = cg_json_get(&j, 0, "error") >= 0;
        cg_json_free(&j);
        cg_dialect_req_t out;
        cg_dialect_err_t err;
        int rc = run_with(d, body, n, &opts, CG_SPAN_LIT("my-deployment"), &out, &err);
        if (rc != (error ? -1 : 0)) {
            print_error("%s: rc %d (%s)\n", path, rc, rc ? err.message : "");
            fail();
        }
        if (error)
            cg_dialect_err_json(&err, &out.body);
        check_json_equal(path, out.body.p, out.body.len, want);
        cg_dialect_req_free(&out);
        free(want);
    }
    free(body);
}

static void test_fixtures(void **state)
{
    (void)state;
    static const char suffix[] = ".request.json";
    DIR *dir = opendir(CG_FIXTURES "/dialects");
    assert_non_null(dir);
    int sets = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name), sn = sizeof(suffix) - 1;
        if (n <= sn || strcmp(e->d_name + n - sn, suffix) != 0)
            continue;
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)(n - sn), e->d_name);
        check_fixture(name);
        sets++;
    }
    closedir(dir);
    assert_true(sets >= 12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_api_key),
        cmocka_unit_test(test_forwards_header),
        cmocka_unit_test(test_system_join),
        cmocka_unit_test(test_message_content),
        cmocka_unit_test(test_max_tokens),
        cmocka_unit_test(test_kept_fields),
        cmocka_unit_test(test_nothing_else),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_documents_edges),
        cmocka_unit_test(test_documents_whole_text),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_refusal_messages),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_stop_types),
        cmocka_unit_test(test_err_json),
        cmocka_unit_test(test_stream_flags),
        cmocka_unit_test(test_openai_unchanged),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_text_parts_anthropic),
        cmocka_unit_test(test_text_parts_responses),
        cmocka_unit_test(test_text_parts_gemini),
        cmocka_unit_test(test_text_parts_bedrock),
        cmocka_unit_test(test_gemini_body),
        cmocka_unit_test(test_gemini_tools),
        cmocka_unit_test(test_gemini_model),
        cmocka_unit_test(test_gemini_path),
        cmocka_unit_test(test_gemini_keys),
        cmocka_unit_test(test_gemini_refusals),
        cmocka_unit_test(test_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
