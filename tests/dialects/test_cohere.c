/*
 * The cohere dialect (src/dialects/cohere.c, SPEC §6a): the request it
 * writes, its keys and path; the answer view's chunks, content and thinking,
 * every finish reason, usage, errors; citations in fast and accurate order,
 * their references at character offsets where characters and bytes differ,
 * the citations that count not (a span past the text, bad offsets, another
 * type, no object, sources without an id), a source cited twice, a tool
 * source, a <source> document; bodies; every split of a stream; citations
 * read without a parse held to the parse, on near misses, every truncation
 * and random edits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dialect_run.h"
#include "dialects/view.h"
#include "profiles.h"
#include "view.h"

/* --- Cohere's events ---------------------------------------------------------- */

#define EV(type, json) "event: " type "\ndata: " json "\n\n"
#define START                                                                                      \
    EV("message-start", "{\"id\":\"m-1\",\"type\":\"message-start\",\"delta\":{\"message\":"       \
                        "{\"role\":\"assistant\",\"content\":[],\"tool_plan\":\"\","               \
                        "\"tool_calls\":[],\"citations\":[]}}}")                                   \
    EV("content-start", "{\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":"          \
                        "{\"content\":{\"type\":\"text\",\"text\":\"\"}}}}")
#define TEXT(s)                                                                                    \
    EV("content-delta", "{\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":"          \
                        "{\"content\":{\"text\":\"" s "\"}}}}")
#define THINK(s)                                                                                   \
    EV("content-delta", "{\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":"          \
                        "{\"content\":{\"thinking\":\"" s "\"}}}}")
/* A citation-start whose citations object is c. */
#define CITATION(c)                                                                                \
    EV("citation-start", "{\"type\":\"citation-start\",\"index\":0,\"delta\":{\"message\":"        \
                         "{\"citations\":" c "}}}")
#define CITE(start, end, sources)                                                                  \
    CITATION("{\"start\":" #start ",\"end\":" #end ",\"text\":\"cited\",\"sources\":[" sources     \
             "],\"type\":\"TEXT_CONTENT\"}")
#define DOC(id, title)                                                                             \
    "{\"type\":\"document\",\"id\":\"" id "\",\"document\":{\"id\":\"" id "\",\"snippet\":\"S " id \
    "\",\"title\":\"" title "\"}}"
#define CONTENT_END EV("content-end", "{\"type\":\"content-end\",\"index\":0}")
#define END_USAGE(reason, usage)                                                                   \
    EV("message-end", "{\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"" reason           \
                      "\",\"usage\":" usage "}}")
#define END(reason)                                                                                \
    END_USAGE(reason, "{\"billed_units\":{\"input_tokens\":18,\"output_tokens\":6},"               \
                      "\"tokens\":{\"input_tokens\":1000,\"output_tokens\":60}}")

#define META                                                                                       \
    "\"id\":\"m-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"        \
    "\"command-a-03-2025\""
#define ROLE_CHUNK                                                                                 \
    "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"     \
    "\"\"},\"finish_reason\":null}]}\n\n"
#define CONTENT_CHUNK(s)                                                                           \
    "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" s "\"},"                 \
    "\"finish_reason\":null}]}\n\n"
#define FINISH_CHUNK(r)                                                                            \
    "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"" r "\"}]}\n\n"

static const char REQUEST[] =
    "{\"model\":\"command-a-03-2025\",\"stream\":true,\"messages\":[{\"role\":\"user\","
    "\"content\":\"q?\"}]}";

static const char USAGE_REQUEST[] =
    "{\"model\":\"command-a-03-2025\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
    "\"messages\":[{\"role\":\"user\",\"content\":\"q?\"}]}";

/* Open WebUI's RAG template: sources 2 and 5. */
static const char RAG_REQUEST[] =
    "{\"model\":\"command-a-03-2025\",\"stream\":true,\"messages\":[{\"role\":\"system\","
    "\"content\":\"<source id=\\\"2\\\" name=\\\"https://kb.example/two\\\">Two text.</source>"
    "<source id=\\\"5\\\" name=\\\"five.md\\\">Five text.</source>\"},"
    "{\"role\":\"user\",\"content\":\"q?\"}]}";

static void run(const char *profile, const char *request, const char *in, cg_buf_t *out,
                cg_xform_stats_t *stats)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("cohere"), request, request ? strlen(request) : 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    dialect_stream(&cfg, &c, in, strlen(in), NULL, 0, out, stats);
    dialect_case_free(&c);
}

static void run_body(const char *profile, const char *request, const char *in, cg_buf_t *out)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("cohere"), request, request ? strlen(request) : 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    assert_int_equal(dialect_body(&cfg, &c, in, strlen(in), out), 0);
    dialect_case_free(&c);
}

/* The concatenated content of choice 0 the client reads (caller frees). */
static char *content_of(const cg_buf_t *out, bool body)
{
    view_t v;
    if (body)
        assert_int_equal(view_of_body(&v, out->p, out->len), 0);
    else
        view_of_stream(&v, out->p, out->len);
    cg_buf_t c = {0};
    cg_buf_put(&c, v.content[0].p, v.content[0].len);
    cg_buf_putc(&c, '\0');
    view_free(&v);
    return c.p;
}

static void same(const char *what, const char *got, const char *want)
{
    if (strcmp(got, want) != 0) {
        print_error("%s\n  got:  %s\n  want: %s\n", what, got, want);
        fail();
    }
}

/* The content a stream gives in profile off (translation only). */
static void stream_content_is(const char *request, const char *in, const char *want)
{
    cg_buf_t out = {0};
    run("off", request, in, &out, NULL);
    char *got = content_of(&out, false);
    same("stream content", got, want);
    free(got);
    cg_buf_free(&out);
}

static void body_content_is(const char *request, const char *in, const char *want)
{
    cg_buf_t out = {0};
    run_body("off", request, in, &out);
    char *got = content_of(&out, true);
    same("body content", got, want);
    free(got);
    cg_buf_free(&out);
}

static bool has(const cg_buf_t *out, const char *s)
{
    return memmem(out->p, out->len, s, strlen(s)) != NULL;
}

/* --- the request ---------------------------------------------------------------- */

static void translate_as(const char *body, cg_cohere_citations_t mode, const char *deployment,
                         const char *want)
{
    cg_dialect_in_t in = {.cohere_citations = mode};
    if (deployment)
        in.deployment = cg_span(deployment, strlen(deployment));
    cg_buf_t path = {0}, out = {0};
    cg_dialect_err_t e;
    assert_int_equal(dialect_translate("cohere", body, in, &path, &out, &e), 0);
    assert_string_equal(path.p, "/v2/chat");
    same("request body", out.p, want);
    cg_buf_free(&path);
    cg_buf_free(&out);
}

static void test_request(void **state)
{
    (void)state;
    /* Every member kept, in place: system and developer messages where they
     * are (an empty one left out), text parts joined with nothing, the
     * <source> tags as documents in id order, members not named not sent. */
    translate_as(
        "{\"model\":\"command-a-03-2025\",\"stream\":true,\"max_tokens\":100,"
        "\"max_completion_tokens\":50,\"temperature\":0.3,\"top_p\":0.75,\"stop\":\"END\","
        "\"n\":1,\"seed\":7,\"user\":\"u\",\"tools\":[],\"messages\":["
        "{\"role\":\"system\",\"content\":\"Be brief.\"},"
        "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Cite \"},"
        "{\"type\":\"text\",\"text\":\"sources.\"}]},{\"role\":\"system\",\"content\":\"\"},"
        "{\"role\":\"user\",\"content\":\"<source id=\\\"7\\\" "
        "name=\\\"https://kb.example/seven\\\">"
        "Seven \\u00e9.</source><source id=\\\"3\\\" name=\\\"three.md\\\">Three.</source>hi\"},"
        "{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"more\"}]}",
        CG_COHERE_FAST, NULL,
        "{\"model\":\"command-a-03-2025\",\"messages\":[{\"role\":\"system\",\"content\":"
        "\"Be brief.\"},{\"role\":\"system\",\"content\":\"Cite sources.\"},"
        "{\"role\":\"user\",\"content\":\"<source id=\\\"7\\\" "
        "name=\\\"https://kb.example/seven\\\">"
        "Seven \xc3\xa9.</source><source id=\\\"3\\\" name=\\\"three.md\\\">Three.</source>hi\"},"
        "{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":\"more\"}],"
        "\"stream\":true,\"max_tokens\":50,\"temperature\":0.3,\"p\":0.75,"
        "\"stop_sequences\":[\"END\"],\"documents\":["
        "{\"id\":\"3\",\"data\":{\"title\":\"three.md\",\"snippet\":\"Three.\"}},"
        "{\"id\":\"7\",\"data\":{\"title\":\"seven\",\"snippet\":\"Seven \xc3\xa9.\","
        "\"url\":\"https://kb.example/seven\"}}],\"citation_options\":{\"mode\":\"fast\"}}");
    /* accurate; stop as a list; max_tokens alone; no model: the deployment. */
    translate_as(
        "{\"max_tokens\":9,\"stop\":[\"a\",\"b\"],\"messages\":[{\"role\":\"user\","
        "\"content\":\"q\"}]}",
        CG_COHERE_ACCURATE, "my-deployment",
        "{\"model\":\"my-deployment\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
        "\"max_tokens\":9,\"stop_sequences\":[\"a\",\"b\"],"
        "\"citation_options\":{\"mode\":\"accurate\"}}");
    /* Documents go beside the messages: a system message's <source> tags
     * are sent with no user message at all. */
    translate_as("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                 "\"<source id=\\\"2\\\" name=\\\"two.md\\\">Two.</source>\"},"
                 "{\"role\":\"assistant\",\"content\":\"a\"}]}",
                 CG_COHERE_FAST, NULL,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                 "\"<source id=\\\"2\\\" name=\\\"two.md\\\">Two.</source>\"},"
                 "{\"role\":\"assistant\",\"content\":\"a\"}],\"documents\":[{\"id\":\"2\","
                 "\"data\":{\"title\":\"two.md\",\"snippet\":\"Two.\"}}],"
                 "\"citation_options\":{\"mode\":\"fast\"}}");
    /* off: no citation_options at all. */
    translate_as("{\"model\":\"m\",\"stream\":false,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"q\"}]}",
                 CG_COHERE_OFF, NULL,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                 "\"stream\":false}");
}

static void refused(const char *body, const char *param)
{
    cg_dialect_req_t dreq;
    cg_dialect_err_t e;
    assert_int_equal(
        cg_dialect_request(dialect_named("cohere"), body, strlen(body), NULL, &dreq, &e), -1);
    assert_string_equal(e.code, "unsupported_parameter");
    assert_string_equal(e.param, param);
    assert_non_null(strstr(e.message, "cohere"));
}

static void test_refusals(void **state)
{
    (void)state;
    refused("{\"model\":\"m\",\"tools\":[{\"type\":\"function\"}],\"messages\":[{\"role\":\"user\","
            "\"content\":\"q\"}]}",
            "tools");
    refused("{\"model\":\"m\",\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", "n");
    refused(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
        "\"image_url\":{\"url\":\"https://x/y.png\"}}]}]}",
        "image_url");
    refused(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
        "\"file\":{\"file_data\":\"data:application/pdf;base64,AAAA\",\"filename\":\"a.pdf\"}}]}]}",
        "file");
    refused(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"tool\","
        "\"tool_call_id\":\"t\",\"content\":\"r\"}]}",
        "tool");
}

typedef struct hdrs {
    const char *auth, *api_key;
    char added[8][160];
    size_t n;
} hdrs_t;

static cg_span_t hdr_get(void *ctx, const char *name)
{
    hdrs_t *h = ctx;
    const char *v = strcmp(name, "authorization") == 0 ? h->auth
                    : strcmp(name, "api-key") == 0     ? h->api_key
                                                       : NULL;
    return v ? cg_span(v, strlen(v)) : cg_span(NULL, 0);
}

static void hdr_add(void *ctx, cg_span_t name, cg_span_t value)
{
    hdrs_t *h = ctx;
    snprintf(h->added[h->n++], sizeof(h->added[0]), "%.*s: %.*s", (int)name.n, name.p, (int)value.n,
             value.p);
}

static void test_keys(void **state)
{
    (void)state;
    const cg_dialect_t *d = dialect_named("cohere");
    assert_true(cg_dialect_forwards_header(d, CG_SPAN_LIT("Authorization")));
    assert_false(cg_dialect_forwards_header(d, CG_SPAN_LIT("Api-Key")));
    assert_true(cg_dialect_forwards_header(d, CG_SPAN_LIT("x-request-id")));
    hdrs_t h = {.auth = "Bearer co-key"};
    cg_dialect_hdrs_t io = {hdr_get, hdr_add, &h};
    cg_dialect_add_headers(d, &io);
    assert_int_equal(h.n, 0); /* it goes as it came */
    h = (hdrs_t){.api_key = " co-key "};
    cg_dialect_add_headers(d, &io);
    assert_int_equal(h.n, 1);
    assert_string_equal(h.added[0], "Authorization: Bearer co-key");
    h = (hdrs_t){.api_key = "a", .auth = "Bearer b"};
    cg_dialect_add_headers(d, &io);
    assert_int_equal(h.n, 0);
    assert_null(cg_dialect_aws_service(d));
    assert_true(cg_dialect_translates(d));
}

/* --- the stream ----------------------------------------------------------------- */

static void test_chunks(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", REQUEST,
        START TEXT("Hel") THINK("not content") TEXT("lo \\u00e9 \\\"q\\\"")
            CONTENT_END EV("citation-end", "{\"type\":\"citation-end\",\"index\":0}")
                EV("tool-plan-delta", "{\"type\":\"tool-plan-delta\",\"delta\":{\"message\":"
                                      "{\"tool_plan\":\"plan\"}}}")
                    EV("debug", "{\"type\":\"debug\"}") ": keep-alive\n\n" END("COMPLETE"),
        &out, &st);
    cg_buf_putc(&out, '\0');
    same("chunks", out.p,
         ROLE_CHUNK CONTENT_CHUNK("Hel") CONTENT_CHUNK(
             "lo \\u00e9 \\\"q\\\"") ": ping\n\n" FINISH_CHUNK("stop") "data: [DONE]\n\n");
    assert_int_equal(st.malformed, 0);
    cg_buf_free(&out);
}

static void finish_reason_is(const char *end_event, const char *want)
{
    char in[1024];
    snprintf(in, sizeof(in), "%s%s%s", START, TEXT("a"), end_event);
    cg_buf_t out = {0};
    run("off", REQUEST, in, &out, NULL);
    char chunk[256];
    snprintf(chunk, sizeof(chunk), "\"finish_reason\":\"%s\"", want);
    if (!has(&out, chunk) || !has(&out, "data: [DONE]")) {
        print_error("%s: no %s in\n%.*s\n", end_event, chunk, (int)out.len, out.p);
        fail();
    }
    cg_buf_free(&out);
}

static void test_finish_reasons(void **state)
{
    (void)state;
    finish_reason_is(END("COMPLETE"), "stop");
    finish_reason_is(END("STOP_SEQUENCE"), "stop");
    finish_reason_is(END("TOOL_CALL"), "stop");
    finish_reason_is(END("MAX_TOKENS"), "length");
    finish_reason_is(END("ERROR_TOXIC"), "content_filter");
    finish_reason_is(END("SOMETHING_NEW"), "stop");
    finish_reason_is(EV("message-end", "{\"type\":\"message-end\",\"delta\":{}}"), "stop");
}

static void test_error(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", RAG_REQUEST,
        START TEXT("Partial [2]") EV("message-end", "{\"type\":\"message-end\",\"delta\":"
                                                    "{\"finish_reason\":\"ERROR\",\"error\":"
                                                    "\"internal failure\"}}"),
        &out, NULL);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    assert_true(v.ends_error);
    assert_false(v.ends_done);
    view_free(&v);
    assert_true(has(&out, "data: {\"error\":{\"message\":\"internal failure\",\"type\":"
                          "\"upstream_error\",\"code\":\"ERROR\"}}\n\n"));
    assert_false(has(&out, "finish_reason\":\"stop"));
    assert_true(has(&out, "[[2]](https://kb.example/two)")); /* its source event too */
    assert_true(has(&out, "\"type\":\"source\""));
    cg_buf_free(&out);

    /* No message: a message of ours. */
    run("off", NULL,
        START EV("message-end", "{\"type\":\"message-end\",\"delta\":"
                                "{\"finish_reason\":\"ERROR\"}}"),
        &out, NULL);
    assert_true(has(&out, "\"code\":\"ERROR\""));
    assert_false(has(&out, "[DONE]"));
    cg_buf_free(&out);

    /* The body ends before message-end: truncated. */
    run("off", NULL, START TEXT("cut"), &out, NULL);
    assert_true(has(&out, "\"code\":\"upstream_closed\""));
    assert_false(has(&out, "[DONE]"));
    cg_buf_free(&out);
}

static void test_usage(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", USAGE_REQUEST, START TEXT("a") END("COMPLETE"), &out, NULL);
    cg_buf_putc(&out, '\0');
    assert_non_null(strstr(
        out.p, FINISH_CHUNK("stop") "data: {" META ",\"choices\":[],\"usage\":{\"prompt_tokens\""
                                    ":1000,\"completion_tokens\":60,\"total_"
                                    "tokens\":1060}}\n\ndata: [DONE]\n\n"));
    cg_buf_free(&out);
    /* billed_units when there are no tokens. */
    run("off", USAGE_REQUEST,
        START TEXT("a") END_USAGE("COMPLETE", "{\"billed_units\":{\"input_tokens\":18,"
                                              "\"output_tokens\":6}}"),
        &out, NULL);
    assert_true(has(&out, "\"usage\":{\"prompt_tokens\":18,\"completion_tokens\":6,"
                          "\"total_tokens\":24}"));
    cg_buf_free(&out);
    /* Not asked: no usage chunk. */
    run("off", REQUEST, START TEXT("a") END("COMPLETE"), &out, NULL);
    assert_false(has(&out, "usage"));
    cg_buf_free(&out);
}

/* --- citations ------------------------------------------------------------------ */

/* "It is 24°C in Madrid and 28°C in Brasília." as Cohere's own example has
 * it: 28°C at characters 25-29, bytes 26-31. */
#define MADRID_1                                                                                   \
    "It is 24\xc2\xb0"                                                                             \
    "C in Madrid"
#define MADRID_2                                                                                   \
    " and 28\xc2\xb0"                                                                              \
    "C in Bras\xc3\xad"                                                                            \
    "lia."

static void test_fast_and_accurate(void **state)
{
    (void)state;
    /* fast: each citation right after the words it cites. */
    stream_content_is(NULL,
                      START TEXT(MADRID_1) CITE(6, 10, DOC("a", "Weather A")) TEXT(MADRID_2)
                          CITE(25, 29, DOC("b", "Weather B") "," DOC("a", "Weather A"))
                              CONTENT_END END("COMPLETE"),
                      MADRID_1 "[1]" MADRID_2 "[2][1]");
    /* accurate: every citation after the text; the references follow it. */
    stream_content_is(NULL,
                      START TEXT(MADRID_1) TEXT(MADRID_2) CITE(6, 10, DOC("a", "Weather A"))
                          CITE(25, 29, DOC("b", "Weather B") "," DOC("a", "Weather A"))
                              CONTENT_END END("COMPLETE"),
                      MADRID_1 MADRID_2 "[1][2][1]");
    /* A body: at each end, in code points. */
    body_content_is(
        NULL,
        "{\"id\":\"m-1\",\"finish_reason\":\"COMPLETE\",\"message\":{\"role\":\"assistant\","
        "\"content\":[{\"type\":\"text\",\"text\":\"" MADRID_1 MADRID_2 "\"}],\"citations\":["
        "{\"start\":25,\"end\":29,\"text\":\"28\xc2\xb0"
        "C\",\"sources\":[" DOC(
            "b", "B") "],"
                      "\"type\":\"TEXT_CONTENT\"},{\"start\":6,\"end\":10,\"text\":\"24\xc2\xb0"
                      "C\","
                      "\"sources\":[" DOC("a", "A") "]},{\"start\":6,\"end\":10,\"sources\":[" DOC(
                          "b", "B") "]},"
                                    "{\"start\":0,\"end\":42,\"sources\":[" DOC(
                                        "a", "A") "]}]},\"usage\":{\"tokens\":"
                                                  "{\"input_tokens\":3,\"output_tokens\":4}}}",
        "It is 24\xc2\xb0"
        "C[2][1] in Madrid and 28\xc2\xb0"
        "C[1] in Bras\xc3\xad"
        "lia.[2]");
}

static void test_citations_that_count_not(void **state)
{
    (void)state;
    /* Past the text received so far, negative, not whole, not a number,
     * start after end, missing, another type, not an object, no sources
     * with an id: nothing goes out, nothing moves. */
    stream_content_is(
        NULL,
        START TEXT("abc") CITE(0, 4, DOC("a", "A")) CITE(-1, 2, DOC("a", "A"))
            CITE(0, 1.5, DOC("a", "A")) CITE(0, "2", DOC("a", "A")) CITE(3, 2, DOC("a", "A"))
                CITATION("{\"end\":2,\"sources\":[" DOC("a", "A") "]}") CITATION(
                    "{\"start\":0,\"end\":2,\"type\":\"THINKING_CONTENT\",\"sources\":[" DOC(
                        "a", "A") "]}")
                    CITATION(
                        "{\"start\":0,\"end\":2,\"type\":\"PLAN\",\"sources\":[" DOC("a", "A") "]}")
                        CITATION("[{\"start\":0,\"end\":2,\"sources\":[" DOC("a", "A") "]}]")
                            CITATION("null") CITE(0, 2, "{\"type\":\"document\",\"document\":{}}")
                                CITE(0, 2, "{\"id\":7}") CITE(0, 2, "\"x\"") TEXT("d")
                                    CITE(0, 3, DOC("z", "Z")) END("COMPLETE"),
        "abcd[1]");
    /* The same in a body: only the last citation counts. */
    body_content_is(
        NULL,
        "{\"finish_reason\":\"COMPLETE\",\"message\":{\"content\":[{\"type\":\"text\","
        "\"text\":\"ab\"},{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
        "{\"type\":\"text\",\"text\":\"cd\"}],\"citations\":["
        "{\"start\":0,\"end\":5,\"sources\":[" DOC(
            "a",
            "A") "]},"
                 "{\"start\":-1,\"end\":2,\"sources\":[" DOC(
                     "a",
                     "A") "]},"
                          "{\"start\":0,\"end\":2.5,\"sources\":[" DOC(
                              "a",
                              "A") "]},"
                                   "{\"start\":0,\"end\":2,\"type\":\"PLAN\",\"sources\":[" DOC(
                                       "a", "A") "]},"
                                                 "{\"start\":0,\"end\":2,\"sources\":[{\"type\":"
                                                 "\"document\"}]},"
                                                 "7,{\"start\":1,\"end\":4,\"sources\":[" DOC(
                                                     "z", "Z") "]}]}}",
        "abcd[1]");
}

static void test_sources(void **state)
{
    (void)state;
    /* A source cited twice keeps its number; one cited twice in one citation
     * is referenced once; a tool source; a <source> document is that
     * source, and others come after every number used so far. */
    const char *in = START TEXT("One.") CITE(0, 4, DOC("doc:0", "First") "," DOC("doc:0", "First"))
        TEXT(" Two.") CITE(5, 9, DOC("5", "ignored: the source's own title") "," DOC("doc:0", "F"))
            TEXT(" 20\xc2\xb0"
                 "C.") CITE(10, 14,
                            "{\"type\":\"tool\",\"id\":\"get_weather_1:0\",\"tool_output\":"
                            "{\"temperature\":20,\"title\":\"Weather now\",\"url\":"
                            "\"https://weather.example/now\",\"text\":\"20 degrees\"}}")
                CONTENT_END END("COMPLETE");
    stream_content_is(RAG_REQUEST, in,
                      "One.[6] Two.[5][6] 20\xc2\xb0"
                      "C.[7]");
    cg_buf_t out = {0};
    run("openwebui", RAG_REQUEST, in, &out, NULL);
    assert_true(has(&out, "\"source\":{\"id\":\"6\",\"name\":\"[6] First\"},\"document\":"
                          "[\"S doc:0\"]"));
    assert_true(has(&out, "\"source\":{\"id\":\"5\",\"name\":\"[5] five.md\"},\"document\":"
                          "[\"Five text.\"]"));
    assert_true(has(&out, "\"source\":{\"id\":\"7\",\"name\":\"[7] Weather now\",\"url\":"
                          "\"https://weather.example/now\"},\"document\":[\"20 degrees\"]"));
    assert_true(has(&out, "[[7]](https://weather.example/now)"));
    cg_buf_free(&out);
    /* Snippet: the document's snippet, else its text, else the citation's
     * text; a url that is not absolute is none. */
    run("openwebui", NULL,
        START TEXT("abc")
            CITATION("{\"start\":0,\"end\":1,\"text\":\"the cited words\",\"sources\":["
                     "{\"type\":\"tool\",\"id\":\"t\",\"tool_output\":{\"url\":\"/rel\"}}]}")
                END("COMPLETE"),
        &out, NULL);
    assert_true(has(&out, "\"source\":{\"id\":\"1\",\"name\":\"[1] Unknown Document\"},"
                          "\"document\":[\"the cited words\"]"));
    cg_buf_free(&out);
}

static void test_body(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run_body("off", USAGE_REQUEST,
             "{\"id\":\"m-9\",\"finish_reason\":\"MAX_TOKENS\",\"message\":{\"role\":\"assistant\","
             "\"content\":[{\"type\":\"text\",\"text\":\"a\\\"b\"}]},\"usage\":{\"billed_units\":"
             "{\"input_tokens\":1,\"output_tokens\":2}}}",
             &out);
    cg_buf_putc(&out, '\0');
    same("body", out.p,
         "{\"id\":\"m-9\",\"object\":\"chat.completion\",\"created\":1700000000,\"model\":"
         "\"command-a-03-2025\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
         "\"content\":\"a\\\"b\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":1,"
         "\"completion_tokens\":2,\"total_tokens\":3}}");
    cg_buf_free(&out);
    run_body("off", NULL,
             "{\"id\":\"m-9\",\"finish_reason\":\"ERROR\",\"message\":{\"content\":[]}}", &out);
    cg_buf_putc(&out, '\0');
    same("error body", out.p,
         "{\"error\":{\"message\":\"the upstream reported an error\",\"type\":\"upstream_error\","
         "\"code\":\"ERROR\"}}");
    cg_buf_free(&out);
    /* Not Cohere's: -1, the body goes as it came. */
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("cohere"), NULL, 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    assert_int_equal(dialect_body(&cfg, &c, "{\"error\":1}", 11, &out), -1);
    assert_int_equal(dialect_body(&cfg, &c, "[1]", 3, &out), -1);
    cg_buf_free(&out);
    dialect_case_free(&c);
}

/* --- every split ---------------------------------------------------------------- */

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static void test_every_split(void **state)
{
    (void)state;
    static const char *const profiles[] = {"openwebui", "openai",     "webchat",
                                           "markdown",  "structured", "off"};
    static const char in[] =
        START TEXT(MADRID_1) CITE(6, 10, DOC("5", "Five") "," DOC("doc:1", "One"))
            THINK("th\\u00efnk") TEXT(" and 28\\u00b0C in Bras\xc3\xad"
                                      "lia \\ud83d\\ude00.") CITE(25, 29, DOC("doc:1", "One"))
                CITE(99, 100, DOC("x", "X")) ": ping\r\n\r\n" CONTENT_END END("MAX_TOKENS");
    dialect_every_split("cohere", RAG_REQUEST, in, sizeof(in) - 1, profiles,
                        sizeof(profiles) / sizeof(profiles[0]), 100, &rng);
    stream_content_is(RAG_REQUEST, in,
                      MADRID_1 "[5][6] and 28\xc2\xb0"
                               "C in Bras\xc3\xad"
                               "lia \xf0\x9f\x98\x80.[6]");
}

/* --- citations without a parse ---------------------------------------------------- */

/* Runs stream in (profile openwebui, the RAG request: sources are numbered
 * and sent) with the citation fast path and without it, and fails unless
 * both give the same bytes and counts; returns the events the fast path
 * read. */
static uint64_t fast_same(const char *in, size_t n)
{
    cg_buf_t out[2] = {{0}, {0}};
    cg_xform_stats_t st[2];
    uint64_t reads = 0;
    for (int k = 0; k < 2; k++) {
        dialect_case_t c;
        dialect_case_init(&c, dialect_named("cohere"), RAG_REQUEST, strlen(RAG_REQUEST));
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named("openwebui"));
        cg__cohere_fast_off = k == 1;
        uint64_t before = cg__cohere_fast_reads;
        dialect_stream(&cfg, &c, in, n, NULL, 0, &out[k], &st[k]);
        if (k == 0)
            reads = cg__cohere_fast_reads - before;
        else
            assert_true(cg__cohere_fast_reads == before);
        dialect_case_free(&c);
    }
    cg__cohere_fast_off = false;
    if (out[0].len != out[1].len || memcmp(out[0].p, out[1].p, out[0].len) != 0) {
        print_error("fast and parsed citations differ on\n%.*s\n  fast:   %.*s\n  parsed: %.*s\n",
                    (int)n, in, (int)out[0].len, out[0].p, (int)out[1].len, out[1].p);
        fail();
    }
    assert_true(st[0].events_in == st[1].events_in && st[0].events_out == st[1].events_out &&
                st[0].malformed == st[1].malformed && st[0].refs_linked == st[1].refs_linked &&
                st[0].refs_unlinked == st[1].refs_unlinked &&
                st[0].citations_emitted == st[1].citations_emitted);
    cg_buf_free(&out[0]);
    cg_buf_free(&out[1]);
    return reads;
}

#define FAST_DOC0 DOC("doc:0", "Zero")
#define FAST_DOC5 DOC("5", "Five")
/* Before the event under test: text, and a citation whose sources the fast
 * path may then meet again. */
#define FAST_PRE                                                                                   \
    START TEXT("One two three four five.") CITE(0, 4, FAST_DOC0 "," FAST_DOC5)                     \
        TEXT(" Six \xc3\xa9t\\u00e9.")
#define FAST_POST TEXT(" End.") CONTENT_END END("COMPLETE")
/* The citation-start data that the fast path reads after FAST_PRE. */
#define FAST_DATA                                                                                  \
    "{\"type\":\"citation-start\",\"index\":1,\"delta\":{\"message\":{\"citations\":"              \
    "{\"start\":5,\"end\":30,\"text\":\"cited \\\"w\\u00f6rds\\\"\",\"sources\":[" FAST_DOC5       \
    "," FAST_DOC0 "," FAST_DOC5 "],\"type\":\"TEXT_CONTENT\"}}}}"

/* FAST_PRE, event data d[0..n) (as one data line, or as given when raw),
 * FAST_POST: the reads of the fast path, both paths alike. */
static uint64_t fast_event(const char *d, size_t n, bool raw)
{
    cg_buf_t in = {0};
    cg_buf_puts(&in, FAST_PRE);
    if (!raw)
        cg_buf_puts(&in, "event: citation-start\ndata: ");
    cg_buf_put(&in, d, n);
    if (!raw)
        cg_buf_puts(&in, "\n\n");
    cg_buf_puts(&in, FAST_POST);
    uint64_t r = fast_same(in.p, in.len);
    cg_buf_free(&in);
    return r;
}

static uint64_t fast_data(const char *d)
{
    return fast_event(d, strlen(d), false);
}

/* FAST_DATA with its first `from` replaced by `to`. */
static uint64_t fast_edit(const char *from, const char *to)
{
    static const char d[] = FAST_DATA;
    const char *at = strstr(d, from);
    assert_non_null(at);
    cg_buf_t b = {0};
    cg_buf_put(&b, d, (size_t)(at - d));
    cg_buf_puts(&b, to);
    cg_buf_puts(&b, at + strlen(from));
    uint64_t r = fast_event(b.p, b.len, false);
    cg_buf_free(&b);
    return r;
}

static void test_fast_citations(void **state)
{
    (void)state;
    /* The shape Cohere sends, its sources seen before: read without a
     * parse, as the parse reads it. */
    assert_int_equal(fast_data(FAST_DATA), 1);
    stream_content_is(RAG_REQUEST, FAST_PRE "event: citation-start\ndata: " FAST_DATA "\n\n",
                      "One two three four five.[6][5] Six \xc3\xa9t\xc3\xa9.[5][6]");
    /* One that counts not (past the text, end before start) is read and
     * nothing goes out; so are no sources, and a valid index of any form. */
    assert_int_equal(fast_edit("\"end\":30", "\"end\":31"), 1);
    assert_int_equal(fast_edit("\"end\":30", "\"end\":4"), 1);
    assert_int_equal(fast_edit("\"start\":5", "\"start\":0"), 1);
    assert_int_equal(fast_edit("\"end\":30", "\"end\":999999999999999"), 1);
    assert_int_equal(fast_edit("[" FAST_DOC5 "," FAST_DOC0 "," FAST_DOC5 "]", "[]"), 1);
    assert_int_equal(fast_edit("\"index\":1", "\"index\":-0.5e+3"), 1);
    assert_int_equal(fast_edit("\"text\":\"cited \\\"w\\u00f6rds\\\"\"", "\"text\":\"\""), 1);

    /* Near misses: each goes through the parse, which reads it the same,
     * otherwise or not at all. */
    static const char *const edits[][2] = {
        /* another shape: reordered, missing, added or repeated members */
        {"{\"start\":5,\"end\":30,", "{\"end\":30,\"start\":5,"},
        {"\"type\":\"citation-start\",\"index\":1,", "\"index\":1,\"type\":\"citation-start\","},
        {"\"index\":1,", ""},
        {",\"type\":\"TEXT_CONTENT\"}", "}"},
        {",\"type\":\"TEXT_CONTENT\"}", ",\"type\":\"TEXT_CONTENT\",\"end\":5}"},
        {",\"type\":\"TEXT_CONTENT\"}", ",\"type\":\"TEXT_CONTENT\",\"type\":\"PLAN\"}"},
        {",\"type\":\"TEXT_CONTENT\"}", ",\"type\":null}"},
        {",\"type\":\"TEXT_CONTENT\"}", ",\"type\":\"PLAN\"}"},
        {",\"type\":\"TEXT_CONTENT\"}", ",\"type\":\"TEXT_CONTENT\\u0020\"}"},
        {"\"start\":5,", "\"start\":5,\"start\":0,"},
        {"{\"citations\":", "{\"citations\":{},\"citations\":"},
        {"{\"message\":", "{\"message\":{},\"message\":"},
        {"{\"type\":\"citation-start\",", "{\"type\":\"citation-start\",\"type\":\"x\","},
        {"\"citation-start\"", "\"citation-end\""},
        {"\"citation-start\"", "\"citation\\u002dstart\""},
        {"\"start\":", "\"st\\u0061rt\":"},
        /* white space */
        {"\"start\":5", "\"start\": 5"},
        {"\"end\":30,", "\"end\":30 ,"},
        {"{\"type\"", " {\"type\""},
        {"{\"type\"", "\t{\"type\""},
        {"}}}}", "}}}} "},
        {"}}}}", "}}}}\r"},
        {"],\"type\"", " ],\"type\""},
        {"[" FAST_DOC5, "[ " FAST_DOC5},
        /* numbers */
        {"\"start\":5", "\"start\":05"},
        {"\"start\":5", "\"start\":-5"},
        {"\"start\":5", "\"start\":5.0"},
        {"\"start\":5", "\"start\":5e0"},
        {"\"start\":5", "\"start\":\"5\""},
        {"\"end\":30", "\"end\":1000000000000000"},
        {"\"end\":30", "\"end\":30."},
        {"\"end\":30", "\"end\":3O"},
        {"\"index\":1", "\"index\":01"},
        {"\"index\":1", "\"index\":1."},
        {"\"index\":1", "\"index\":-"},
        {"\"index\":1", "\"index\":1e"},
        {"\"index\":1", "\"index\":tru"},
        {"\"index\":1", "\"index\":true"},
        {"\"index\":1", "\"index\":\"1\""},
        /* the text */
        {"cited ", "cited\\x"},
        {"cited ", "cited\\u12"},
        {"cited ", "cited\\u12g4"},
        {"cited ", "cited\x01"},
        {"cited ", "cited\t"},
        {"cited ", "cited\\/\\b\\f\\n\\r\\t\\\\ "},
        {"rds\\\"\"", "rds\\\""},
        {"rds\\\"\"", "rds\\\"\"\""},
        /* the sources */
        {"\"S 5\"", "\"S \\u0035\""},
        {"\"S 5\"", "\"S 6\""},
        {"\"id\":\"5\",\"document\"", "\"id\":\"5\",\"id\":\"6\",\"document\""},
        {"\"id\":\"5\",\"document\"", "\"id\":\"doc:0\",\"document\""},
        {"\"id\":\"5\",\"document\"", "\"id\":\"\\u0035\",\"document\""},
        {"\"id\":\"5\",\"document\"", "\"id\":\"55\",\"document\""},
        {"\"id\":\"5\",\"document\"", "\"id\":5,\"document\""},
        {"\"title\":\"Five\"}}", "\"title\":\"Five\"} }"},
        {"\"title\":\"Five\"}}", "\"title\":\"Five\"}}}"},
        {"\"title\":\"Five\"}}", "\"title\":\"Five\"}"},
        {"],\"type\"", ",],\"type\""},
        {"],\"type\"", ",1],\"type\""},
        {"],\"type\"", ",null],\"type\""},
        {"],\"type\"", "," FAST_DOC5 "],\"type\""},
        {"[" FAST_DOC5 ",", "[1," FAST_DOC5 ","},
        {"[" FAST_DOC5 ",", "[" FAST_DOC5 FAST_DOC5 ","},
        {"[" FAST_DOC5 ",", "[" DOC("doc:9", "Nine") ","},
        {"[" FAST_DOC5 ",", "[{}"
                            ","},
        {"[" FAST_DOC5 "," FAST_DOC0 "," FAST_DOC5 "]", "{}"},
        {"[" FAST_DOC5 "," FAST_DOC0 "," FAST_DOC5 "]", "null"},
        /* the frame */
        {"}}}}", "}}}"},
        {"}}}}", "}}}}}"},
        {"}}}}", "}}}},"},
        {"}}}}", "}}}}{}"},
        {"}}}}", "}}},\"x\":1}"},
    };
    for (size_t k = 0; k < sizeof(edits) / sizeof(edits[0]); k++)
        fast_edit(edits[k][0], edits[k][1]);
    /* Those the fast path must not read: the parse reads them otherwise
     * (another shape) or not at all. */
    assert_int_equal(fast_edit("\"start\":5,", "\"start\":5,\"start\":0,"), 0);
    assert_int_equal(fast_edit("\"S 5\"", "\"S \\u0035\""), 0);
    assert_int_equal(fast_edit("\"S 5\"", "\"S 6\""), 0);
    assert_int_equal(fast_edit("\"start\":5", "\"start\":05"), 0);
    assert_int_equal(fast_edit("\"index\":1", "\"index\":01"), 0);
    assert_int_equal(fast_edit("cited ", "cited\x01"), 0);
    assert_int_equal(fast_edit("}}}}", "}}}} "), 0);
    assert_int_equal(fast_edit("],\"type\"", "," FAST_DOC5 FAST_DOC5 "],\"type\""), 0);
    assert_int_equal(fast_edit("\"title\":\"Five\"}}", "\"title\":\"Five\"}}}"), 0);
    /* Sixteen sources are read, seventeen are parsed. */
    cg_buf_t many = {0};
    cg_buf_puts(&many, FAST_DOC0);
    for (int k = 1; k < 16; k++)
        cg_buf_puts(&many, "," FAST_DOC5);
    cg_buf_putc(&many, '\0');
    assert_int_equal(fast_edit(FAST_DOC5 "," FAST_DOC0 "," FAST_DOC5, many.p), 1);
    many.len--;
    cg_buf_puts(&many, "," FAST_DOC5);
    cg_buf_putc(&many, '\0');
    assert_int_equal(fast_edit(FAST_DOC5 "," FAST_DOC0 "," FAST_DOC5, many.p), 0);
    cg_buf_free(&many);

    /* Every truncation of the data, every split into two data lines. */
    static const char d[] = FAST_DATA;
    size_t n = sizeof(d) - 1;
    for (size_t k = 0; k < n; k++)
        assert_int_equal(fast_event(d, k, false), 0);
    for (size_t k = 1; k < n; k++) {
        cg_buf_t b = {0};
        cg_buf_puts(&b, "data: ");
        cg_buf_put(&b, d, k);
        cg_buf_puts(&b, "\ndata: ");
        cg_buf_put(&b, d + k, n - k);
        cg_buf_puts(&b, "\n\n");
        assert_int_equal(fast_event(b.p, b.len, true), 0);
        cg_buf_free(&b);
    }

    /* A source kept from a stream's first citation is only its bytes there:
     * sources too large or too deep to keep are parsed each time. */
    cg_buf_t big = {0};
    cg_buf_puts(&big, START TEXT("abcdef") "data: {\"type\":\"citation-start\",\"index\":0,"
                                           "\"delta\":{\"message\":{\"citations\":{\"start\":0,"
                                           "\"end\":3,\"text\":\"t\",\"sources\":[");
    size_t src_at = big.len;
    cg_buf_puts(&big, "{\"type\":\"document\",\"id\":\"big\",\"document\":{\"snippet\":\"");
    for (int k = 0; k < 4096; k++)
        cg_buf_putc(&big, 'x');
    cg_buf_puts(&big, "\"}}");
    size_t src_len = big.len - src_at;
    cg_buf_puts(&big, "],\"type\":\"TEXT_CONTENT\"}}}}\n\ndata: {\"type\":\"citation-start\","
                      "\"index\":1,\"delta\":{\"message\":{\"citations\":{\"start\":3,\"end\":6,"
                      "\"text\":\"t\",\"sources\":[");
    char *src_copy = cg_xstrndup(big.p + src_at, src_len); /* big may move */
    cg_buf_put(&big, src_copy, src_len);
    free(src_copy);
    cg_buf_puts(&big, "],\"type\":\"TEXT_CONTENT\"}}}}\n\n" FAST_POST);
    assert_int_equal(fast_same(big.p, big.len), 0);
    cg_buf_free(&big);
#define DEEP_CITE(start, end, src)                                                                 \
    "data: {\"type\":\"citation-start\",\"index\":0,\"delta\":{\"message\":{\"citations\":"        \
    "{\"start\":" #start ",\"end\":" #end ",\"text\":\"t\",\"sources\":[" src                      \
    "],\"type\":\"TEXT_CONTENT\"}}}}\n\n"
    /* The source, its document and seven arrays: nine deep, one too many. */
#define DEEP_SRC(arrays) "{\"type\":\"document\",\"id\":\"deep\",\"document\":{\"a\":" arrays "}}"
    static const char deep[] = START TEXT("abcdef") DEEP_CITE(0, 3, DEEP_SRC("[[[[[[[1]]]]]]]"))
        DEEP_CITE(3, 6, DEEP_SRC("[[[[[[[1]]]]]]]")) FAST_POST;
    static const char shallow[] = START TEXT("abcdef") DEEP_CITE(0, 3, DEEP_SRC("[[[[[[1]]]]]]"))
        DEEP_CITE(3, 6, DEEP_SRC("[[[[[[1]]]]]]")) FAST_POST;
    assert_int_equal(fast_same(deep, sizeof(deep) - 1), 0);
    assert_int_equal(fast_same(shallow, sizeof(shallow) - 1), 1);

    /* Random edits of the data: inserted, removed and replaced bytes, JSON's
     * own most of all. */
    static const char alphabet[] = "{}[]\":,\\ \t0123456789.-+eEtrufalsn\x01\xc3\xa9"
                                   "abcdxyzu";
    uint64_t r = 0x9E3779B97F4A7C15ull, fast = 0;
    for (int round = 0; round < 20000; round++) {
        cg_buf_t b = {0};
        cg_buf_put(&b, d, n);
        int edits_n = 1 + (int)((r >> 60) & 1);
        for (int e = 0; e < edits_n; e++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            size_t at = (size_t)(r % (b.len + 1));
            char c = alphabet[(r >> 32) % (sizeof(alphabet) - 1)];
            unsigned op = (unsigned)((r >> 40) % 3);
            if (op == 0 || at == b.len) { /* insert */
                cg_buf_putc(&b, ' ');
                memmove(b.p + at + 1, b.p + at, b.len - at - 1);
                b.p[at] = c;
            } else if (op == 1) { /* remove */
                memmove(b.p + at, b.p + at + 1, b.len - at - 1);
                b.len--;
            } else {
                b.p[at] = c;
            }
        }
        fast += fast_event(b.p, b.len, false);
        cg_buf_free(&b);
    }
    assert_true(fast > 0); /* some edits keep the shape (the text, a number) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_finish_reasons),
        cmocka_unit_test(test_error),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_fast_and_accurate),
        cmocka_unit_test(test_citations_that_count_not),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_body),
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_fast_citations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
