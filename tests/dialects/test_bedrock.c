/*
 * The bedrock dialect (src/dialects/bedrock.c, SPEC §6a): the chunks its
 * view writes from AWS event-stream messages, byte for byte; citations per
 * block and their references at the block's stop; continued citations;
 * finish reasons and usage; exceptions, error messages and broken framing;
 * a body and the same answer streamed giving the same content; every split
 * of a stream in every profile; and the request translation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dialect_run.h"
#include "evs_enc.h"
#include "profiles.h"
#include "view.h"

#define META                                                                                       \
    "\"id\":\"\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"           \
    "\"us.amazon.nova-pro-v1:0\""

/* <source> id 4 becomes document 0; the model names the path. */
static const char RAG_REQUEST[] =
    "{\"model\":\"us.amazon.nova-pro-v1:0\",\"stream\":true,\"stream_options\":{\"include_usage\":"
    "true},\"messages\":[{\"role\":\"system\",\"content\":\"<source id=\\\"4\\\" name=\\\""
    "https://kb.example/four\\\">Four text.</source>\"},{\"role\":\"user\",\"content\":\"q?\"}]}";

#define DOC_CITE(k, title, text)                                                                   \
    "{\"contentBlockIndex\":0,\"delta\":{\"citation\":{\"title\":\"" title "\",\"sourceContent\":" \
    "[{\"text\":\"" text "\"}],\"location\":{\"documentChar\":{\"documentIndex\":" #k              \
    ",\"start\":0,\"end\":4}}}},\"p\":\"abc\"}"
#define WEB_CITE(i, url, domain)                                                                   \
    "{\"contentBlockIndex\":" #i ",\"delta\":{\"citation\":{\"location\":{\"web\":{\"url\":\"" url \
    "\",\"domain\":\"" domain "\"}}}}}"
#define TEXT(i, s) "{\"contentBlockIndex\":" #i ",\"delta\":{\"text\":\"" s "\"},\"p\":\"abcdef\"}"
#define STOP(i)    "{\"contentBlockIndex\":" #i ",\"p\":\"ab\"}"

/* A grounded answer: a document citation continued over two deltas, a web
 * citation, the same web source cited again by a second block. */
static void grounded(cg_buf_t *s, const char *stop_reason)
{
    char stop[96];
    snprintf(stop, sizeof(stop), "{\"stopReason\":\"%s\",\"p\":\"abcd\"}", stop_reason);
    evs_event(s, "messageStart", "{\"p\":\"abcdefgh\",\"role\":\"assistant\"}");
    evs_event(s, "contentBlockDelta", TEXT(0, "Four is \\\"four\\\" \\u00e9."));
    evs_event(s, "contentBlockDelta", DOC_CITE(0, "source-4", "Four "));
    evs_event(s, "contentBlockDelta",
              "{\"contentBlockIndex\":0,\"delta\":{\"citation\":{\"sourceContent\":[{\"text\":"
              "\"text.\"}]}}}");
    evs_event(s, "contentBlockDelta", WEB_CITE(0, "https://w.example/a", "w.example"));
    evs_event(s, "contentBlockStop", STOP(0));
    evs_event(s, "contentBlockDelta", TEXT(1, " More."));
    evs_event(s, "contentBlockDelta", WEB_CITE(1, "https://w.example/a", "w.example"));
    evs_event(s, "contentBlockStop", STOP(1));
    evs_event(s, "messageStop", stop);
    evs_event(s, "metadata", "{\"usage\":{\"inputTokens\":12,\"outputTokens\":7,\"totalTokens\":19},"
                             "\"metrics\":{\"latencyMs\":40}}");
}

static void run(const char *profile, const char *request, const cg_buf_t *in, cg_buf_t *out,
                cg_xform_stats_t *stats)
{
    dialect_run("bedrock", profile, request, in->p, in->len, out, stats);
}

static char *content_of(const char *s, size_t n, bool body)
{
    view_t v;
    if (body)
        assert_int_equal(view_of_body(&v, s, n), 0);
    else
        view_of_stream(&v, s, n);
    cg_buf_t c = {0};
    cg_buf_put(&c, v.content[0].p, v.content[0].len);
    cg_buf_putc(&c, '\0');
    view_free(&v);
    return c.p;
}

static void test_stream_chunks(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    grounded(&in, "end_turn");
    cg_xform_stats_t st;
    run("off", RAG_REQUEST, &in, &out, &st);
    const char *want =
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"
        "\"\"},\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Four is "
        "\\\"four\\\" \\u00e9.\"},\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[4][5]\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" More.\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[5]\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: {" META ",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7,"
        "\"total_tokens\":19}}\n\n"
        "data: [DONE]\n\n";
    assert_string_equal(out.p, want);
    assert_false(st.framing_error);
    assert_int_equal(st.events_in, 11);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Open WebUI: document 0 is <source> 4 (its name and text); the web source
 * is 5, titled by its domain; a continued citation's text is its snippet's
 * rest, and a source cited again is referenced again. */
static void test_sources_in_openwebui(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    grounded(&in, "end_turn");
    run("openwebui", RAG_REQUEST, &in, &out, NULL);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    assert_true(v.ends_done);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "Four is \"four\" \xc3\xa9.[[4]](https://kb.example/four)"
                                        "[[5]](https://w.example/a) More.[[5]](https://w.example/a)");
    cg_buf_putc(&v.sources, '\0');
    assert_non_null(strstr(v.sources.p, "\"name\":\"[5] w.example\""));
    assert_non_null(strstr(v.sources.p, "\"document\":[\"Four text.\"]"));
    view_free(&v);
    /* without the request, document 0 is a source of its own, with the
     * continued snippet */
    run("openwebui", NULL, &in, &out, NULL);
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.sources, '\0');
    assert_non_null(strstr(v.sources.p, "\"document\":[\"Four text.\"]"));
    assert_non_null(strstr(v.sources.p, "\"name\":\"[1] source-4\""));
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

static void test_finish_reasons(void **state)
{
    (void)state;
    static const char *const map[][2] = {
        {"end_turn", "stop"},         {"stop_sequence", "stop"},
        {"max_tokens", "length"},     {"guardrail_intervened", "content_filter"},
        {"content_filtered", "content_filter"}, {"tool_use", "stop"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        cg_buf_t in = {0}, out = {0};
        grounded(&in, map[i][0]);
        run("off", NULL, &in, &out, NULL);
        char want[64];
        snprintf(want, sizeof(want), "\"finish_reason\":\"%s\"", map[i][1]);
        assert_non_null(strstr(out.p, want));
        cg_buf_free(&in);
        cg_buf_free(&out);
    }
}

/* An exception mid-stream: the text so far, then the error event with the
 * exception's type and message, no [DONE]; an error message likewise. */
static void test_exception_and_error(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "messageStart", "{\"role\":\"assistant\"}");
    evs_event(&in, "contentBlockDelta", TEXT(0, "Half"));
    evs_exception(&in, "throttlingException", "{\"message\":\"Too many requests, slow down\"}");
    evs_event(&in, "contentBlockDelta", TEXT(0, " never"));
    run("openwebui", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "\"content\":\"Half\""));
    assert_null(strstr(out.p, "never"));
    assert_null(strstr(out.p, "[DONE]"));
    assert_non_null(strstr(out.p, "data: {\"error\":{\"message\":\"Too many requests, slow down\","
                                  "\"type\":\"upstream_error\",\"code\":\"throttlingException\"}}"));
    in.len = 0;
    evs_event(&in, "contentBlockDelta", TEXT(0, "Half"));
    evs_error(&in, "InternalFailure", "boom \"quoted\"");
    run("off", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "{\"error\":{\"message\":\"boom \\\"quoted\\\"\","
                                  "\"type\":\"upstream_error\",\"code\":\"InternalFailure\"}}"));
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* A corrupt CRC, a length under 16, a header overrun: the messages before
 * it, then the protocol error; nothing after it is read. */
static void test_broken_framing(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        cg_buf_t in = {0}, out = {0};
        evs_event(&in, "contentBlockDelta", TEXT(0, "Before"));
        size_t at = in.len;
        if (kind == 2) /* a header that runs past its section, behind valid CRCs */
            evs_message(&in, CG_SPAN_LIT("\x05:even"), CG_SPAN_LIT(TEXT(0, "Broken")));
        else
            evs_event(&in, "contentBlockDelta", TEXT(0, "Broken"));
        if (kind == 0)
            in.p[in.len - 1] ^= 0x40; /* the message CRC */
        else if (kind == 1)
            memcpy(in.p + at, "\x00\x00\x00\x0f", 4); /* 15 bytes: the prelude CRC fails too */
        evs_event(&in, "contentBlockDelta", TEXT(0, "After"));
        cg_xform_stats_t st;
        run("openwebui", NULL, &in, &out, &st);
        assert_true(st.framing_error);
        assert_non_null(strstr(out.p, "Before"));
        assert_null(strstr(out.p, "Broken"));
        assert_null(strstr(out.p, "After"));
        assert_null(strstr(out.p, "[DONE]"));
        assert_non_null(strstr(out.p, "\"code\":\"upstream_protocol_error\""));
        cg_buf_free(&in);
        cg_buf_free(&out);
    }
}

/* A stream cut short (no messageStop): the error event the transformer
 * writes for an upstream that closed early. */
static void test_cut_short(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "contentBlockDelta", TEXT(0, "Half"));
    evs_event(&in, "contentBlockDelta", TEXT(0, "way"));
    in.len -= 10;
    run("off", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "\"code\":\"upstream_closed\""));
    assert_non_null(strstr(out.p, "Half"));
    assert_null(strstr(out.p, "way"));
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* The JSON body of the same answer: its content is the stream's. */
static const char BODY[] =
    "{\"output\":{\"message\":{\"role\":\"assistant\",\"content\":[{\"citationsContent\":{"
    "\"content\":[{\"text\":\"Four is \\\"four\\\" \\u00e9.\"}],\"citations\":[{\"title\":"
    "\"source-4\",\"sourceContent\":[{\"text\":\"Four text.\"}],\"location\":{\"documentChar\":"
    "{\"documentIndex\":0,\"start\":0,\"end\":4}}},{\"location\":{\"web\":{\"url\":"
    "\"https://w.example/a\",\"domain\":\"w.example\"}}}]}},{\"citationsContent\":{\"content\":"
    "[{\"text\":\" More.\"}],\"citations\":[{\"location\":{\"web\":{\"url\":\"https://w.example/a\","
    "\"domain\":\"w.example\"}}}]}}]}},\"stopReason\":\"end_turn\",\"usage\":{\"inputTokens\":12,"
    "\"outputTokens\":7,\"totalTokens\":19},\"metrics\":{\"latencyMs\":40}}";

static void test_body_matches_stream(void **state)
{
    (void)state;
    static const char *const profiles[] = {"openwebui", "openai", "webchat", "markdown", "off"};
    for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++) {
        cg_buf_t in = {0}, streamed = {0}, body = {0};
        grounded(&in, "end_turn");
        run(profiles[p], RAG_REQUEST, &in, &streamed, NULL);
        dialect_case_t c;
        dialect_case_init(&c, dialect_named("bedrock"), RAG_REQUEST, strlen(RAG_REQUEST));
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named(profiles[p]));
        assert_int_equal(dialect_body(&cfg, &c, BODY, strlen(BODY), &body), 0);
        dialect_case_free(&c);
        char *a = content_of(streamed.p, streamed.len, false), *b = content_of(body.p, body.len, true);
        assert_string_equal(a, b);
        assert_non_null(strstr(body.p, "\"finish_reason\":\"stop\""));
        assert_non_null(strstr(body.p, "\"total_tokens\":19"));
        free(a);
        free(b);
        cg_buf_free(&in);
        cg_buf_free(&streamed);
        cg_buf_free(&body);
    }
    /* not a Converse answer: refused, and copied unchanged */
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("bedrock"), NULL, 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_buf_t out = {0};
    assert_int_equal(dialect_body(&cfg, &c, "{\"message\":\"x\"}", 15, &out), -1);
    assert_string_equal(out.p, "{\"message\":\"x\"}");
    cg_buf_free(&out);
    dialect_case_free(&c);
}

/* Every cut of the grounded stream, and random patterns, in every profile:
 * the same client bytes. */
static void test_every_split(void **state)
{
    (void)state;
    static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured", "off"};
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    cg_buf_t in = {0};
    grounded(&in, "end_turn");
    evs_exception(&in, "modelStreamErrorException", "{\"message\":\"late\"}");
    dialect_every_split("bedrock", RAG_REQUEST, in.p, in.len, profiles, sizeof(profiles) / sizeof(profiles[0]),
                        100, &rng);
    cg_buf_free(&in);
}

/* --- the request ----------------------------------------------------------------- */

static void translate(const char *body, const char *tool_config, cg_buf_t *path, cg_buf_t *out,
                      cg_dialect_err_t *err, int want_rc)
{
    cg_request_t r;
    cg_cite_opts_t o = {8192, true};
    assert_int_equal(cg_request_parse(&r, body, strlen(body), &o), 0);
    cg_dialect_in_t in = {.req = &r, .tool_config = tool_config};
    cg_dialect_req_t dreq;
    const cg_dialect_t *d = dialect_named("bedrock");
    assert_int_equal(cg_dialect_request(d, body, strlen(body), &in, &dreq, err), want_rc);
    path->len = out->len = 0;
    if (want_rc == 0) {
        cg_dialect_path(d, &dreq, path);
        cg_buf_put(out, dreq.body.p, dreq.body.len);
        cg_buf_putc(path, '\0');
        cg_buf_putc(out, '\0');
        cg_dialect_req_free(&dreq);
    }
    cg_request_free(&r);
}

static void test_request(void **state)
{
    (void)state;
    cg_buf_t path = {0}, out = {0};
    cg_dialect_err_t e;
    translate("{\"model\":\"anthropic.claude-3-5-sonnet-20240620-v1:0\",\"stream\":true,"
              "\"max_tokens\":100,\"max_completion_tokens\":50,\"temperature\":0.5,\"top_p\":0.9,"
              "\"stop\":\"x\",\"n\":1,\"user\":\"u\",\"messages\":["
              "{\"role\":\"system\",\"content\":\"Be brief.\"},"
              "{\"role\":\"developer\",\"content\":\"Cite. <source id=\\\"2\\\" name=\\\"a.md\\\">"
              "Alpha</source>\"},"
              "{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"\"},"
              "{\"role\":\"user\",\"content\":\"more\"},{\"role\":\"assistant\",\"content\":\"ok\"},"
              "{\"role\":\"user\",\"content\":\"last\"}]}",
              "{\"tools\":[{\"systemTool\":{\"name\":\"nova_grounding\"}}]}", &path, &out, &e, 0);
    assert_string_equal(path.p, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
    assert_string_equal(
        out.p,
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"hi\"},{\"text\":\"more\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"text\":\"ok\"}]},{\"role\":\"user\",\"content\":["
        "{\"document\":{\"name\":\"source-2\",\"format\":\"txt\",\"source\":{\"text\":\"Alpha\"},"
        "\"citations\":{\"enabled\":true}}},{\"text\":\"last\"}]}],"
        "\"system\":[{\"text\":\"Be brief.\\n\\nCite. <source id=\\\"2\\\" name=\\\"a.md\\\">Alpha"
        "</source>\"}],\"inferenceConfig\":{\"maxTokens\":50,\"temperature\":0.5,\"topP\":0.9,"
        "\"stopSequences\":[\"x\"]},\"toolConfig\":{\"tools\":[{\"systemTool\":{\"name\":"
        "\"nova_grounding\"}}]}}");
    /* an ARN: `:` and `/` encoded in one segment; no stream, no config */
    translate("{\"model\":\"arn:aws:bedrock:us-east-1:1:inference-profile/us.x-v1:0\","
              "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
              NULL, &path, &out, &e, 0);
    assert_string_equal(path.p,
                        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x-v1%3A0"
                        "/converse");
    assert_string_equal(out.p, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"hi\"}]}]}");
    /* models that cannot be a path segment */
    static const char *const bad[] = {"", "../x", "a b", "a?b", "a%3Ab", "a..b", "\\u00e9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char body[160];
        snprintf(body, sizeof(body),
                 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", bad[i]);
        translate(body, NULL, &path, &out, &e, -1);
        assert_string_equal(e.code, "invalid_request");
        assert_string_equal(e.param, "model");
    }
    /* file parts of user messages are documents, numbered over the request,
     * after the last user message's <source> documents; the text parts join
     * with nothing between them */
    translate("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"file\",\"file\":{\"file_data\":\"data:application/pdf;base64,QUJD\","
              "\"filename\":\"Guide.PDF\"}},{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
              "\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":\"ok\"},"
              "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"<source "
              "id=\\\"3\\\" name=\\\"n\\\">Three</source> q\"},{\"type\":\"file\",\"file\":"
              "{\"file_data\":\"data:text/markdown;base64,IyBI\",\"filename\":\"notes.md\"}}]}]}",
              NULL, &path, &out, &e, 0);
    assert_string_equal(
        out.p,
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"document\":{\"name\":"
        "\"document-1\",\"format\":\"pdf\",\"source\":{\"bytes\":\"QUJD\"},\"citations\":"
        "{\"enabled\":true}}},{\"text\":\"ab\"}]},{\"role\":\"assistant\",\"content\":"
        "[{\"text\":\"ok\"}]},{\"role\":\"user\",\"content\":[{\"document\":{\"name\":"
        "\"source-3\",\"format\":\"txt\",\"source\":{\"text\":\"Three\"},\"citations\":"
        "{\"enabled\":true}}},{\"document\":{\"name\":\"document-2\",\"format\":\"md\","
        "\"source\":{\"bytes\":\"IyBI\"},\"citations\":{\"enabled\":true}}},{\"text\":"
        "\"<source id=\\\"3\\\" name=\\\"n\\\">Three</source> q\"}]}]}");
    /* a file of no document format, a file that is no base64 data: URL, a
     * file in an assistant message */
    static const char *const bad_files[] = {
        "{\"role\":\"user\",\"content\":[{\"type\":\"file\",\"file\":{\"file_data\":"
        "\"data:x;base64,QQ==\",\"filename\":\"a.exe\"}}]}",
        "{\"role\":\"user\",\"content\":[{\"type\":\"file\",\"file\":{\"file_data\":"
        "\"https://x/a.pdf\",\"filename\":\"a.pdf\"}}]}",
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"file\",\"file\":{\"file_data\":"
        "\"data:x;base64,QQ==\",\"filename\":\"a.pdf\"}}]},{\"role\":\"user\",\"content\":\"q\"}",
    };
    static const char *const codes[] = {"unsupported_parameter", "invalid_value",
                                        "unsupported_parameter"};
    for (size_t i = 0; i < 3; i++) {
        char body[512];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":[%s]}", bad_files[i]);
        translate(body, NULL, &path, &out, &e, -1);
        assert_string_equal(e.code, codes[i]);
    }
    /* what every translating dialect refuses */
    translate("{\"model\":\"m\",\"tools\":[{}],\"messages\":[{\"role\":\"user\",\"content\":\"h\"}]}",
              NULL, &path, &out, &e, -1);
    assert_string_equal(e.code, "unsupported_parameter");
    cg_buf_free(&path);
    cg_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_chunks),      cmocka_unit_test(test_sources_in_openwebui),
        cmocka_unit_test(test_finish_reasons),     cmocka_unit_test(test_exception_and_error),
        cmocka_unit_test(test_broken_framing),     cmocka_unit_test(test_cut_short),
        cmocka_unit_test(test_body_matches_stream), cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
