/*
 * Unit tests of the embeddings call (include/citegate/embedding.h): the
 * request body and the reading of an answer. The vector helpers have tests
 * of their own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/embedding.h"
#include "citegate/json.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

/* An OpenAI answer, as api.openai.com sends it, around the vector text. */
#define ANSWER_HEAD "{\n  \"object\": \"list\",\n  \"data\": [\n    {\n      \"object\": \"embedding\",\n" \
                    "      \"index\": 0,\n      \"embedding\": "
#define ANSWER_TAIL "\n    }\n  ],\n  \"model\": \"text-embedding-3-small\",\n" \
                    "  \"usage\": {\n    \"prompt_tokens\": 5,\n    \"total_tokens\": 5\n  }\n}"

/* The answer above with `vector` (JSON text) as data[0].embedding. */
static char *answer(const char *vector, size_t *len)
{
    cg_buf_t b = {0};
    cg_buf_puts(&b, ANSWER_HEAD);
    cg_buf_puts(&b, vector);
    cg_buf_puts(&b, ANSWER_TAIL);
    cg_buf_putc(&b, '\0');
    *len = b.len - 1;
    return b.p;
}

/* The value of element i of the test vectors: both signs, several scales. */
static double value_at(uint32_t i)
{
    return sin((double)i * 0.7) * (i % 3 == 0 ? 1e-3 : 0.25);
}

/* "[v0,v1,…]" of dim values_at(), printed as an endpoint would. */
static char *vector_text(uint32_t dim)
{
    cg_buf_t b = {0};
    cg_buf_putc(&b, '[');
    for (uint32_t i = 0; i < dim; i++)
        cg_buf_printf(&b, "%s%.9g", i ? ", " : "", value_at(i));
    cg_buf_putc(&b, ']');
    cg_buf_putc(&b, '\0');
    return b.p;
}

static int parse_cstr(const char *body, cg_vector_t *v, char *err, size_t errlen)
{
    return cg_embedding_parse(body, strlen(body), v, err, errlen);
}

/* body fails; the reason contains `want`, is one line and never empty, and
 * the vector is left alone. */
static void assert_refused_(const char *body, size_t n, const char *want, const char *file, int line)
{
    cg_vector_t v = {0};
    char err[160];
    memset(err, 'x', sizeof(err));
    int rc = cg_embedding_parse(body, n, &v, err, sizeof(err));
    if (rc != -1 || v.v != NULL || v.dim != 0 || memchr(err, '\0', sizeof(err)) == NULL ||
        strstr(err, want) == NULL || strchr(err, '\n') != NULL || err[0] == '\0') {
        print_error("body \"%.*s\": rc %d, dim %u, err \"%.*s\", want \"%s\"\n", (int)(n < 80 ? n : 80),
                    body, rc, v.dim, (int)sizeof(err), err, want);
        free(v.v);
        _fail(file, line);
    }
}

#define ASSERT_REFUSED(body, want) assert_refused_((body), strlen(body), (want), __FILE__, __LINE__)

/* The decoded "input" and "model" of a request body; the body must be one
 * valid JSON object with exactly those two members. */
static void request_members(const cg_buf_t *b, char **model, char **input, size_t *input_len)
{
    cg_json_t j;
    cg_json_init(&j, 64);
    assert_int_equal(cg_json_parse(&j, b->p, b->len), CG_JSON_OK);
    assert_int_equal(cg_json_type(&j, 0), JSMN_OBJECT);
    assert_int_equal(j.tok[0].size, 2);
    *model = cg_json_strdup(&j, cg_json_get(&j, 0, "model"), NULL);
    *input = cg_json_strdup(&j, cg_json_get(&j, 0, "input"), input_len);
    assert_non_null(*model);
    assert_non_null(*input);
    cg_json_free(&j);
}

static void assert_request(const char *text, size_t n, const char *want_body, const char *want_input,
                           size_t want_len)
{
    cg_buf_t b = {0};
    cg_embedding_request(&b, "text-embedding-3-small", text, n);
    if (want_body) {
        assert_int_equal(b.len, strlen(want_body));
        assert_memory_equal(b.p, want_body, b.len);
    }
    char *model, *input;
    size_t len;
    request_members(&b, &model, &input, &len);
    assert_string_equal(model, "text-embedding-3-small");
    assert_int_equal(len, want_len);
    assert_memory_equal(input, want_input, len);
    free(model);
    free(input);
    cg_buf_free(&b);
}

#define REQ(text, body, input)                                                                     \
    assert_request((text), sizeof(text) - 1, (body), (input), sizeof(input) - 1)

/* ---- cg_embedding_request ------------------------------------------------ */

static void test_request_plain(void **state)
{
    (void)state;
    REQ("How do I charge the X100?",
        "{\"model\":\"text-embedding-3-small\",\"input\":\"How do I charge the X100?\"}",
        "How do I charge the X100?");
}

static void test_request_quotes_and_backslashes(void **state)
{
    (void)state;
    REQ("say \"hi\" \\ bye", "{\"model\":\"text-embedding-3-small\",\"input\":\"say \\\"hi\\\" \\\\ bye\"}",
        "say \"hi\" \\ bye");
}

static void test_request_control_chars(void **state)
{
    (void)state;
    REQ("a\nb\tc\rd\x01" "e\x1f" "f\x7f",
        "{\"model\":\"text-embedding-3-small\",\"input\":\"a\\nb\\tc\\rd\\u0001e\\u001ff\x7f\"}",
        "a\nb\tc\rd\x01" "e\x1f" "f\x7f");
    /* a NUL byte inside the text is text too */
    REQ("x\0y", "{\"model\":\"text-embedding-3-small\",\"input\":\"x\\u0000y\"}", "x\0y");
}

static void test_request_valid_utf8_kept(void **state)
{
    (void)state;
    /* 2, 3 and 4 bytes, U+FFFD itself, the last code point and U+2028 */
    REQ("\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBD \xF4\x8F\xBF\xBF \xE2\x80\xA8", NULL,
        "\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBD \xF4\x8F\xBF\xBF \xE2\x80\xA8");
}

static void test_request_invalid_utf8_replaced(void **state)
{
    (void)state;
    /* one U+FFFD per byte that starts no valid sequence */
    REQ("a\xFF" "b", "{\"model\":\"text-embedding-3-small\",\"input\":\"a\xEF\xBF\xBD" "b\"}",
        "a\xEF\xBF\xBD" "b");
    REQ("\xC3", NULL, "\xEF\xBF\xBD");                             /* cut at the end */
    REQ("\xC3(", NULL, "\xEF\xBF\xBD(");                           /* missing continuation */
    REQ("\x80x", NULL, "\xEF\xBF\xBDx");                           /* stray continuation */
    REQ("\xC0\x80", NULL, "\xEF\xBF\xBD\xEF\xBF\xBD");             /* overlong NUL */
    REQ("\xE0\x80\xAF", NULL, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* overlong '/' */
    REQ("\xED\xA0\x80", NULL, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* a surrogate */
    REQ("\xF4\x90\x80\x80", NULL,
        "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");         /* over U+10FFFF */
    REQ("\xF5\"", NULL, "\xEF\xBF\xBD\"");                          /* never a lead; a quote after */
    REQ("ok \xE2\x82", NULL, "ok \xEF\xBF\xBD\xEF\xBF\xBD");         /* a cut 3-byte sequence */
}

static void test_request_empty(void **state)
{
    (void)state;
    REQ("", "{\"model\":\"text-embedding-3-small\",\"input\":\"\"}", "");
    cg_buf_t b = {0};
    cg_embedding_request(&b, "m", NULL, 0);
    assert_int_equal(b.len, strlen("{\"model\":\"m\",\"input\":\"\"}"));
    assert_memory_equal(b.p, "{\"model\":\"m\",\"input\":\"\"}", b.len);
    cg_buf_free(&b);
}

static void test_request_model_escaped_and_appended(void **state)
{
    (void)state;
    cg_buf_t b = {0};
    cg_buf_puts(&b, "kept:");
    cg_embedding_request(&b, "a\"b", "t", 1);
    static const char want[] = "kept:{\"model\":\"a\\\"b\",\"input\":\"t\"}";
    assert_int_equal(b.len, sizeof(want) - 1);
    assert_memory_equal(b.p, want, b.len);
    cg_buf_free(&b);
}

/* ---- cg_embedding_parse: answers that are read ---------------------------- */

static void test_parse_openai_answer(void **state)
{
    (void)state;
    static const char body[] =
        "{\n  \"object\": \"list\",\n  \"data\": [\n    {\n      \"object\": \"embedding\",\n"
        "      \"index\": 0,\n      \"embedding\": [\n        -0.006929283495992422,\n"
        "        -0.005336422007530928,\n        0.00024047505110502243,\n"
        "        -0.024047505110502243\n      ]\n    }\n  ],\n"
        "  \"model\": \"text-embedding-ada-002\",\n"
        "  \"usage\": {\n    \"prompt_tokens\": 5,\n    \"total_tokens\": 5\n  }\n}\n";
    cg_vector_t v = {0};
    char err[128] = "";
    assert_int_equal(cg_embedding_parse(body, sizeof(body) - 1, &v, err, sizeof(err)), 0);
    assert_int_equal(v.dim, 4);
    assert_null(v.model); /* the caller names the model */
    assert_true(v.v[0] == (float)-0.006929283495992422);
    assert_true(v.v[1] == (float)-0.005336422007530928);
    assert_true(v.v[2] == (float)0.00024047505110502243);
    assert_true(v.v[3] == (float)-0.024047505110502243);
    free(v.v);
}

static void test_parse_member_order_and_extra_members(void **state)
{
    (void)state;
    /* embedding before index, unknown members, a second data element (ignored) */
    static const char body[] =
        "{\"usage\":{\"prompt_tokens\":1,\"total_tokens\":1},\"model\":\"m\",\"data\":"
        "[{\"embedding\":[0.5,-0.25],\"extra\":{\"a\":[1,2]},\"index\":0,\"object\":\"embedding\"},"
        "{\"embedding\":[1,2,3],\"index\":1}],\"object\":\"list\"}";
    cg_vector_t v = {0};
    char err[128];
    assert_int_equal(parse_cstr(body, &v, err, sizeof(err)), 0);
    assert_int_equal(v.dim, 2);
    assert_true(v.v[0] == 0.5f && v.v[1] == -0.25f);
    free(v.v);
}

static void test_parse_1536_dims(void **state)
{
    (void)state;
    char *vec = vector_text(1536);
    size_t n;
    char *body = answer(vec, &n);
    cg_vector_t v = {0};
    char err[128];
    assert_int_equal(cg_embedding_parse(body, n, &v, err, sizeof(err)), 0);
    assert_int_equal(v.dim, 1536);
    for (uint32_t i = 0; i < v.dim; i++)
        assert_true(fabs(v.v[i] - value_at(i)) <= 1e-7 + 1e-6 * fabs(value_at(i)));
    free(v.v);
    free(body);
    free(vec);
}

static void test_parse_number_forms(void **state)
{
    (void)state;
    size_t n;
    char *body = answer("[-1.5e-3, 2E+2, -0, 0.0, 1e-40, 3.4e38, -3.4E38, 7, 0.1e1, 1E-2]", &n);
    cg_vector_t v = {0};
    char err[128];
    assert_int_equal(cg_embedding_parse(body, n, &v, err, sizeof(err)), 0);
    /* as strtod reads them, then rounded to float */
    static const double want[] = {-1.5e-3, 200, -0.0, 0.0, 1e-40, 3.4e38, -3.4e38, 7, 1, 0.01};
    assert_int_equal(v.dim, sizeof(want) / sizeof(want[0]));
    for (uint32_t i = 0; i < v.dim; i++) {
        assert_true(isfinite(v.v[i]));
        assert_true(v.v[i] == (float)want[i]);
    }
    assert_true(signbit(v.v[2])); /* -0 kept as read */
    free(v.v);
    free(body);
}

static void test_parse_dimension_bound(void **state)
{
    (void)state;
    /* exactly at the bound: read */
    char *vec = vector_text(CG_EMBED_MAX_DIM);
    size_t n;
    char *body = answer(vec, &n);
    cg_vector_t v = {0};
    char err[128];
    assert_int_equal(cg_embedding_parse(body, n, &v, err, sizeof(err)), 0);
    assert_int_equal(v.dim, CG_EMBED_MAX_DIM);
    assert_true(fabs(v.v[CG_EMBED_MAX_DIM - 1] - value_at(CG_EMBED_MAX_DIM - 1)) < 1e-6);
    free(v.v);
    free(body);
    free(vec);

    /* one over: refused, and the reason names the dimension */
    vec = vector_text(CG_EMBED_MAX_DIM + 1);
    body = answer(vec, &n);
    char want[64];
    snprintf(want, sizeof(want), "dimension %u over %u", CG_EMBED_MAX_DIM + 1, CG_EMBED_MAX_DIM);
    assert_refused_(body, n, want, __FILE__, __LINE__);
    free(body);
    free(vec);

    /* far over: refused before the elements are read */
    vec = vector_text(3 * CG_EMBED_MAX_DIM);
    body = answer(vec, &n);
    assert_refused_(body, n, "dimension over", __FILE__, __LINE__);
    free(body);
    free(vec);
}

/* ---- cg_embedding_parse: answers that are refused ------------------------- */

static void test_parse_not_json(void **state)
{
    (void)state;
    assert_refused_("", 0, "empty answer", __FILE__, __LINE__);
    ASSERT_REFUSED("   ", "not JSON");
    ASSERT_REFUSED("<html><body>502 Bad Gateway</body></html>", "not JSON (41 bytes, starting \"<html><body>\")");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[1,2]}]", "not JSON");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[1,2,]}]}", "not JSON");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[NaN]}]}", "not JSON");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[Infinity]}]}", "not JSON");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[.5]}]}", "not JSON");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[01]}]}", "not JSON");
    ASSERT_REFUSED("{} {}", "not JSON");
    ASSERT_REFUSED("\"a string\"", "not JSON");
    /* the hint is short and printable: a NUL, a newline and quotes become '?' */
    static const char odd[] = "\n\"x\\\n\0\x01yzabcdefghijklmnop";
    assert_refused_(odd, sizeof(odd) - 1, "starting \"?x???", __FILE__, __LINE__);
}

static void test_parse_wrong_shape(void **state)
{
    (void)state;
    ASSERT_REFUSED("[{\"embedding\":[1]}]", "not a JSON object");
    ASSERT_REFUSED("{}", "no data array");
    ASSERT_REFUSED("{\"object\":\"list\",\"data\":{\"embedding\":[1]}}", "no data array");
    ASSERT_REFUSED("{\"data\":null}", "no data array");
    ASSERT_REFUSED("{\"data\":[]}", "data is empty");
    ASSERT_REFUSED("{\"data\":[[0.1,0.2]]}", "data[0] is not an object");
    ASSERT_REFUSED("{\"data\":[1]}", "data[0] is not an object");
    ASSERT_REFUSED("{\"data\":[{\"object\":\"embedding\",\"index\":0}]}", "no data[0].embedding");
    ASSERT_REFUSED("{\"data\":[{}, {\"embedding\":[1]}]}", "no data[0].embedding");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":\"AACAPwAAAEA=\"}]}", "is a string (base64?)");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":{\"0\":1}}]}", "data[0].embedding is not an array");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":null}]}", "data[0].embedding is not an array");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":0.5}]}", "data[0].embedding is not an array");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[]}]}", "data[0].embedding is empty");
    ASSERT_REFUSED("{\"error\":{\"message\":\"Incorrect API key provided: sk-abc\",\"type\":"
                   "\"invalid_request_error\",\"code\":\"invalid_api_key\"}}",
                   "an error object");
}

static void test_parse_bad_elements(void **state)
{
    (void)state;
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[1,\"2\"]}]}", "data[0].embedding[1] is not a number");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[true]}]}", "data[0].embedding[0] is not a number");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[0.5,false]}]}", "embedding[1] is not a number");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[null,1]}]}", "embedding[0] is not a number");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[1,[2],3]}]}", "embedding[1] is not a number");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[1,2,{\"a\":[3,4,5,6]}]}]}", "embedding[2] is not a number");
    /* finite as text, infinite as a double or as a float */
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[1e999]}]}", "embedding[0] is out of a float's range");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[0,-1e309]}]}", "embedding[1] is out of a float's range");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[3.5e38]}]}", "embedding[0] is out of a float's range");
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[0.1,-1e39]}]}", "embedding[1] is out of a float's range");
    /* a number longer than any float needs */
    cg_buf_t b = {0};
    cg_buf_puts(&b, "{\"data\":[{\"embedding\":[0.");
    for (int i = 0; i < 80; i++)
        cg_buf_putc(&b, '1');
    cg_buf_puts(&b, "]}]}");
    assert_refused_(b.p, b.len, "embedding[0] is a number too long", __FILE__, __LINE__);
    cg_buf_free(&b);
}

/* The largest float, printed as an endpoint prints it (%.9g rounds up past
 * FLT_MAX), is the largest float again; only what rounds past it is refused. */
static void test_parse_float_max_edge(void **state)
{
    (void)state;
    char body[128];
    snprintf(body, sizeof(body), "{\"data\":[{\"embedding\":[%.9g,-%.9g,3.4028234e38]}]}", (double)FLT_MAX,
             (double)FLT_MAX);
    cg_vector_t v = {0};
    char err[160] = "";
    assert_int_equal(parse_cstr(body, &v, err, sizeof(err)), 0);
    assert_int_equal(v.dim, 3);
    assert_true(v.v[0] == FLT_MAX && v.v[1] == -FLT_MAX && v.v[2] == FLT_MAX);
    free(v.v);
    /* FLT_MAX + half an ulp (2^103) rounds to infinity */
    ASSERT_REFUSED("{\"data\":[{\"embedding\":[3.4028236e38]}]}", "embedding[0] is out of a float's range");
}

static void test_parse_body_bound(void **state)
{
    (void)state;
    size_t n = CG_EMBED_MAX_BODY + 1;
    char *body = cg_xmalloc(n);
    memset(body, ' ', n);
    memcpy(body, "{\"data\":[{\"embedding\":[1]}]}", 28);
    assert_refused_(body, n, "over 1048576", __FILE__, __LINE__);
    /* the same answer within the bound is read: the refusal was the size */
    cg_vector_t v = {0};
    assert_int_equal(cg_embedding_parse(body, CG_EMBED_MAX_BODY, &v, NULL, 0), 0);
    assert_int_equal(v.dim, 1);
    free(v.v);
    free(body);
}

/* A reason never carries the answer's strings: only its length and a hint
 * of the first bytes when it is not JSON. */
static void test_parse_reason_echoes_no_content(void **state)
{
    (void)state;
    static const char *bodies[] = {
        "{\"error\":{\"message\":\"sk-secret-key\"}}",
        "{\"data\":[{\"embedding\":\"sk-secret-key\"}]}",
        "{\"data\":[{\"embedding\":[\"sk-secret-key\"]}]}",
        "{\"data\":[{\"embedding\":[1,2],\"x\":\"sk-secret-key\"]}",
        "{\"data\":[{\"sk-secret-key\":[1]}]}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        cg_vector_t v = {0};
        char err[256] = "";
        assert_int_equal(parse_cstr(bodies[i], &v, err, sizeof(err)), -1);
        assert_null(strstr(err, "secret"));
    }
}

/* Every proper prefix of an answer is refused cleanly (never a crash, never
 * a vector), the whole of it is read. Under ASan each prefix is an exact
 * heap copy, so a read past its end is a report. */
static void test_parse_cut_at_every_byte(void **state)
{
    (void)state;
    char *vec = vector_text(24);
    size_t n;
    char *body = answer(vec, &n);
    for (size_t cut = 0; cut < n; cut++) {
        char *part = cg_xmalloc(cut ? cut : 1);
        memcpy(part, body, cut);
        cg_vector_t v = {0};
        char err[128] = "";
        int rc = cg_embedding_parse(part, cut, &v, err, sizeof(err));
        if (rc != -1 || v.v != NULL || err[0] == '\0') {
            print_error("cut at %zu: rc %d, err \"%s\"\n", cut, rc, err);
            fail();
        }
        free(part);
    }
    cg_vector_t v = {0};
    assert_int_equal(cg_embedding_parse(body, n, &v, NULL, 0), 0);
    assert_int_equal(v.dim, 24);
    free(v.v);
    free(body);
    free(vec);
}

static void test_parse_err_buffer_edges(void **state)
{
    (void)state;
    cg_vector_t v = {0};
    /* no room for a reason: still refused */
    assert_int_equal(parse_cstr("{}", &v, NULL, 0), -1);
    char tiny[8];
    memset(tiny, 'x', sizeof(tiny));
    assert_int_equal(parse_cstr("{}", &v, tiny, sizeof(tiny)), -1);
    assert_string_equal(tiny, "no data");
    char none[1] = {'x'};
    assert_int_equal(parse_cstr("{}", &v, none, 0), -1);
    assert_int_equal(none[0], 'x'); /* errlen 0: not written */
    assert_null(v.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_plain),
        cmocka_unit_test(test_request_quotes_and_backslashes),
        cmocka_unit_test(test_request_control_chars),
        cmocka_unit_test(test_request_valid_utf8_kept),
        cmocka_unit_test(test_request_invalid_utf8_replaced),
        cmocka_unit_test(test_request_empty),
        cmocka_unit_test(test_request_model_escaped_and_appended),
        cmocka_unit_test(test_parse_openai_answer),
        cmocka_unit_test(test_parse_member_order_and_extra_members),
        cmocka_unit_test(test_parse_1536_dims),
        cmocka_unit_test(test_parse_number_forms),
        cmocka_unit_test(test_parse_dimension_bound),
        cmocka_unit_test(test_parse_not_json),
        cmocka_unit_test(test_parse_wrong_shape),
        cmocka_unit_test(test_parse_bad_elements),
        cmocka_unit_test(test_parse_float_max_edge),
        cmocka_unit_test(test_parse_body_bound),
        cmocka_unit_test(test_parse_reason_echoes_no_content),
        cmocka_unit_test(test_parse_cut_at_every_byte),
        cmocka_unit_test(test_parse_err_buffer_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
