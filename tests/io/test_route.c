/* Routes and request checks (src/io/route.c): the pure helpers the exchange
 * decides with, each on its edges. */
#include "io/route.h"

#include "citegate/request.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static cg_span_t S(const char *s)
{
    return cg_span(s, strlen(s));
}

static void test_routes(void **state)
{
    (void)state;
    assert_int_equal(cg_route_of(S("/v1/chat/completions")), CG_ROUTE_CHAT);
    assert_int_equal(cg_route_of(S("/openai/v1/chat/completions")), CG_ROUTE_OPENAI_V1);
    assert_int_equal(cg_route_of(S("/openai/deployments/gpt-4o/chat/completions")),
                     CG_ROUTE_DEPLOYMENT);
    const char *other[] = {"/v1/chat/completions/",
                           "/v1/chat/completion",
                           "/V1/chat/completions",
                           "/openai/deployments//chat/completions",
                           "/openai/deployments/a/b/chat/completions",
                           "/v1/models",
                           "",
                           "/"};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        assert_int_equal(cg_route_of(S(other[i])), CG_ROUTE_OTHER);
    assert_int_equal(cg_route_of(cg_span(NULL, 0)), CG_ROUTE_OTHER);
}

static void test_path_and_deployment(void **state)
{
    (void)state;
    assert_int_equal(cg_route_path_length(S("/v1/chat/completions?api-version=1")), 20);
    assert_int_equal(cg_route_path_length(S("/a?b?c")), 2);
    assert_int_equal(cg_route_path_length(S("/a")), 2);
    assert_int_equal(cg_route_path_length(cg_span(NULL, 0)), 0);
    cg_span_t d = cg_route_deployment(S("/openai/deployments/my%20gpt/chat/completions"));
    assert_int_equal(d.n, 8);
    assert_memory_equal(d.p, "my%20gpt", 8);
    assert_null(cg_route_deployment(S("/openai/deployments/chat/completions")).p);
    assert_null(cg_route_deployment(S("/openai/deployments/x/y/chat/completions")).p);
}

static void test_dot_segments(void **state)
{
    (void)state;
    const char *dotted[] = {"/a/../b",   "/a/./b",   "/..",   "/.", "/a/%2e%2e/b", "/a/%2E/b",
                            "/a/.%2e/b", "/a/%2e./", "/a/..", "..", "./x"};
    for (size_t i = 0; i < sizeof(dotted) / sizeof(dotted[0]); i++)
        assert_true(cg_route_dot_segment(S(dotted[i])));
    const char *clean[] = {"/a/.../b",
                           "/a/..b/c",
                           "/a/b.",
                           "/.well-known/x",
                           "/a/%2e%2e%2e",
                           "/a/%2f../b",
                           "/a/%2",
                           "/a/%2ex",
                           "/",
                           "",
                           "/v1/chat/completions"};
    for (size_t i = 0; i < sizeof(clean) / sizeof(clean[0]); i++)
        assert_false(cg_route_dot_segment(S(clean[i])));
}

static void test_cors(void **state)
{
    (void)state;
    const char *list = "https://a.example, https://B.example ,http://c:8080";
    assert_true(cg_route_cors_allowed(list, S("https://a.example")));
    assert_true(cg_route_cors_allowed(list, S("https://b.EXAMPLE")));
    assert_true(cg_route_cors_allowed(list, S("http://c:8080")));
    assert_false(cg_route_cors_allowed(list, S("https://a.example.evil")));
    assert_false(cg_route_cors_allowed(list, S("https://a.exampl")));
    assert_false(cg_route_cors_allowed(list, S("http://c")));
    assert_false(cg_route_cors_allowed(list, S("")));
    assert_false(cg_route_cors_allowed(list, cg_span(NULL, 0)));
    assert_false(cg_route_cors_allowed(NULL, S("https://a.example")));
    assert_true(cg_route_cors_allowed("*", S("https://anything")));
    assert_true(cg_route_cors_allowed("https://x, *", S("https://y")));
    assert_false(cg_route_cors_allowed("**", S("https://y")));
    assert_false(cg_route_cors_allowed(",, ,", S("https://y")));
}

static void check_sources(const char *body, const char *want)
{
    cg_buf_t out = {0};
    cg_request_t r;
    cg_cite_opts_t o = {1024, false};
    bool json = cg_request_parse(&r, body, strlen(body), &o) == 0;
    cg_route_add_sources(&out, S(body), "[{\"type\":\"azure_search\"}]",
                         json ? r.data_sources_off : 0, json ? r.data_sources_len : 0);
    cg_request_free(&r);
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.p, want, out.len);
    cg_buf_free(&out);
}

static void test_add_sources(void **state)
{
    (void)state;
    check_sources("{\"a\":1}", "{\"a\":1,\"data_sources\":[{\"type\":\"azure_search\"}]}");
    check_sources("{}", "{\"data_sources\":[{\"type\":\"azure_search\"}]}");
    check_sources("{ \n\t}", "{ \n\t\"data_sources\":[{\"type\":\"azure_search\"}]}");
    check_sources("{\"m\":{\"x\":{}}}\n",
                  "{\"m\":{\"x\":{}},\"data_sources\":[{\"type\":\"azure_search\"}]}\n");
    check_sources("{\"s\":\"}\"} ",
                  "{\"s\":\"}\",\"data_sources\":[{\"type\":\"azure_search\"}]} ");
    check_sources("[1]", "[1]"); /* no object: as it came */
}

/* A data_sources member that counts as none is replaced where it stands:
 * the upstream never sees the name twice, whichever its parser keeps. */
static void test_sources_replace_empty_member(void **state)
{
    (void)state;
    static const char *const none[] = {"[]", "null", "{}", "{\"type\":\"x\"}", "\"s\"", "0",
                                       "[ ]", "false"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        char body[128], want[160];
        snprintf(body, sizeof(body), "{\"a\":1,\"data_sources\": %s ,\"m\":[]}", none[i]);
        snprintf(want, sizeof(want),
                 "{\"a\":1,\"data_sources\": [{\"type\":\"azure_search\"}] ,\"m\":[]}");
        check_sources(body, want);
    }
    check_sources("{\"data_sources\":null}", "{\"data_sources\":[{\"type\":\"azure_search\"}]}");
    /* "data_sources" as a string value or inside another member is not the member */
    check_sources("{\"x\":\"data_sources\",\"y\":{\"data_sources\":[]}}",
                  "{\"x\":\"data_sources\",\"y\":{\"data_sources\":[]},"
                  "\"data_sources\":[{\"type\":\"azure_search\"}]}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),       cmocka_unit_test(test_path_and_deployment),
        cmocka_unit_test(test_dot_segments), cmocka_unit_test(test_cors),
        cmocka_unit_test(test_add_sources), cmocka_unit_test(test_sources_replace_empty_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
