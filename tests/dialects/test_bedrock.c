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
#include "dialects/view.h"
#include "evs_enc.h"
#include "profiles.h"
#include "steady.h"
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

/* --- the steady path: text deltas read without a parse ------------------------------ */

/* Whatever the steady path takes of a contentBlockDelta payload, the parse
 * takes, with the same bytes: the text of its delta (on_block_delta's
 * reading). */
static bool same_as_parse(const char *p, size_t n)
{
    return steady_same_text(cg__bedrock_text_delta, "delta", "text", p, n);
}

/* A text delta of block 0, up to its text */
#define T0           "{\"contentBlockIndex\":0,\"delta\":{\"text\":\""
/* Whatever the steady path takes for a block stop, the parse takes. */
static bool stop_as_parse(const char *p, size_t n)
{
    if (!cg__bedrock_block_stop(p, n))
        return false;
    cg_json_t j;
    cg_json_init(&j, CG_XFORM_MAX_TOKENS);
    assert_int_equal(cg_json_parse(&j, p, n), CG_JSON_OK);
    assert_int_equal(cg_json_type(&j, 0), JSMN_OBJECT);
    cg_json_free(&j);
    return true;
}

#define TAKES(lit)   assert_true(same_as_parse(lit, sizeof(lit) - 1))
#define REFUSES(lit) assert_false(same_as_parse(lit, sizeof(lit) - 1))

static void test_text_delta_shape(void **state)
{
    (void)state;
    TAKES(T0 "Hi\"},\"p\":\"abc\"}");
    TAKES("{\"contentBlockIndex\":17,\"delta\":{\"text\":\"\"},\"p\":\"\"}");
    TAKES("{\"contentBlockIndex\":3,\"delta\":{\"text\":\"x\"},\"p\":\"aZ09\"}");
    TAKES(T0 "x\"}}"); /* no padding */
    /* escapes in the text, as they came */
    TAKES(T0 "a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\"},\"p\":\"q\"}");
    TAKES(T0 "\\u00e9\\uD83D\\ude00\"},\"p\":\"q\"}");
    TAKES(T0 "caf\xc3\xa9 \xe2\x80\x94\"},\"p\":\"q\"}");
    /* escapes the parse refuses too */
    REFUSES(T0 "a\\x\"},\"p\":\"q\"}");
    REFUSES(T0 "a\\u12\"},\"p\":\"q\"}");
    REFUSES(T0 "a\\u12G4\"},\"p\":\"q\"}");
    REFUSES(T0 "a\\'\"},\"p\":\"q\"}");
    REFUSES(T0 "a\\\"},\"p\":\"q\"}");
    REFUSES(T0 "a\x01\"},\"p\":\"q\"}");
    REFUSES(T0 "a\tb\"},\"p\":\"q\"}");
    REFUSES(T0 "a\nb\"},\"p\":\"q\"}");
    /* the index: a plain whole number only */
    REFUSES("{\"contentBlockIndex\":01,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":-1,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":1.0,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":1e2,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":\"1\",\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":1x,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":null,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    /* extra members, anywhere */
    REFUSES(T0 "x\"},\"p\":\"q\",\"r\":1}");
    REFUSES(T0 "x\",\"citation\":{}},\"p\":\"q\"}");
    REFUSES(T0 "x\"},\"delta\":{\"text\":\"y\"},\"p\":\"q\"}");
    REFUSES(T0 "x\"},\"p\":\"q\",\"p\":\"r\"}");
    REFUSES("{\"a\":0,\"contentBlockIndex\":0,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    /* reordered, renamed, escaped names */
    REFUSES("{\"delta\":{\"text\":\"x\"},\"contentBlockIndex\":0,\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0,\"p\":\"q\",\"delta\":{\"text\":\"x\"}}");
    REFUSES("{\"contentBlockIndex\":0,\"\\u0064elta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0,\"delta\":{\"te\\u0078t\":\"x\"},\"p\":\"q\"}");
    REFUSES(T0 "x\"},\"\\u0070\":\"q\"}");
    REFUSES(T0 "x\"},\"P\":\"q\"}");
    /* white space */
    REFUSES(" {\"contentBlockIndex\":0,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES(T0 "x\"},\"p\":\"q\"} ");
    REFUSES(T0 "x\"},\"p\":\"q\"}\n");
    REFUSES("{\"contentBlockIndex\": 0,\"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0, \"delta\":{\"text\":\"x\"},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0,\"delta\":{\"text\" :\"x\"},\"p\":\"q\"}");
    REFUSES(T0 "x\"} ,\"p\":\"q\"}");
    REFUSES(T0 "x\"},\"p\": \"q\"}");
    /* a padding: any well-formed string (the parse reads none of it) */
    TAKES(T0 "x\"},\"p\":\"a\\\"b\"}");
    TAKES(T0 "x\"},\"p\":\"a\\\\b\"}");
    TAKES(T0 "x\"},\"p\":\"a b\"}");
    TAKES(T0 "x\"},\"p\":\"a\xc3\xa9\"}");
    REFUSES(T0 "x\"},\"p\":\"a\\\"}");
    REFUSES(T0 "x\"},\"p\":\"a\\q\"}");
    REFUSES(T0 "x\"},\"p\":\"a\x01\"}");
    REFUSES(T0 "x\"},\"p\":\"a\"\"}");
    REFUSES(T0 "x\"},\"p\":\"\"\"}");
    REFUSES(T0 "x\"},\"p\":\"a\"}\"}");
    REFUSES(T0 "x\"},\"p\":\"a\"b\"}");
    REFUSES(T0 "x\"},\"p\":1}");
    REFUSES(T0 "x\"},\"p\":\"q}");
    /* nested, or not a string */
    REFUSES("{\"contentBlockIndex\":0,\"delta\":{\"text\":{\"text\":\"x\"}},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0,\"delta\":{\"text\":[\"x\"]},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0,\"delta\":{\"text\":null},\"p\":\"q\"}");
    REFUSES("{\"contentBlockIndex\":0,\"delta\":[{\"text\":\"x\"}],\"p\":\"q\"}");
    REFUSES(T0 "x\"},\"p\":\"q\"}}");
    REFUSES(T0 "x\"},\"p\":\"q\"}{}");
    REFUSES(T0 "x\"}},\"p\":\"q\"}");
    /* a NUL byte, which stops jsmn, in the text or the padding */
    static const char nul_text[] = T0 "a\0b\"},\"p\":\"q\"}";
    static const char nul_pad[] = T0 "a\"},\"p\":\"q\0\"}";
    assert_false(same_as_parse(nul_text, sizeof(nul_text) - 1));
    assert_false(same_as_parse(nul_pad, sizeof(nul_pad) - 1));
    /* every cut of a whole one */
    static const char whole[] =
        "{\"contentBlockIndex\":12,\"delta\":{\"text\":\"a\\u00e9\\n\\\"b\"},\"p\":\"xYz\"}";
    steady_refuses_every_cut(whole, sizeof(whole) - 1, same_as_parse);
    TAKES(whole);
}

#define STOP_TAKES(lit)   assert_true(stop_as_parse(lit, sizeof(lit) - 1))
#define STOP_REFUSES(lit) assert_false(stop_as_parse(lit, sizeof(lit) - 1))

static void test_block_stop_shape(void **state)
{
    (void)state;
    STOP_TAKES("{\"contentBlockIndex\":0}");
    STOP_TAKES("{\"contentBlockIndex\":12,\"p\":\"abcXYZ019\"}");
    STOP_TAKES("{\"contentBlockIndex\":3,\"p\":\"\"}");
    STOP_TAKES("{\"contentBlockIndex\":3,\"p\":\"a\\\"b \\u00e9\"}");
    STOP_REFUSES("{\"contentBlockIndex\":01}");
    STOP_REFUSES("{\"contentBlockIndex\":-1}");
    STOP_REFUSES("{\"contentBlockIndex\":}");
    STOP_REFUSES("{\"contentBlockIndex\":1,}");
    STOP_REFUSES("{\"contentBlockIndex\":1}}");
    STOP_REFUSES("{\"contentBlockIndex\":1} ");
    STOP_REFUSES("{\"contentBlockIndex\": 1}");
    STOP_REFUSES("{\"contentBlockIndex\":1 }");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\"");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\"}}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\"b\"}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\\x\"}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\x01\"}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":1}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\",\"q\":2}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"q\":\"a\"}");
    STOP_REFUSES("{\"p\":\"a\",\"contentBlockIndex\":1}");
    STOP_REFUSES("{\"contentBlockIndex\":{\"p\":\"a\"}}");
    STOP_REFUSES("{\"contentBlockIndex\":1,\"p\":\"a\"}\n");
    static const char whole[] = "{\"contentBlockIndex\":7,\"p\":\"abc\"}";
    steady_refuses_every_cut(whole, sizeof(whole) - 1, stop_as_parse);
    STOP_TAKES(whole);
}

/* Random edits of text deltas and a block stop (bytes that matter to JSON
 * put in, taken out, changed): the steady path takes no payload the parse
 * refuses or reads otherwise, and takes the unedited ones. */
static void test_text_delta_mutations(void **state)
{
    (void)state;
    static const char *const fixed[] = {
        "{\"contentBlockIndex\":105,\"delta\":{\"text\":\"\\\"q\\\" \\u00e9\\\\n\"},\"p\":\"z\"}",
        "{\"contentBlockIndex\":7,\"delta\":{\"text\":\"x\"}}",
    };
    /* text and padding lengths around where the scans change their ways
     * (8 and 16 bytes at a time, 48-byte windows, short payloads) */
    static const unsigned text_lens[] = {0, 1, 7, 8, 13, 30, 47, 48, 49, 60};
    static const unsigned pad_lens[] = {0, 1, 20, 39, 40, 41, 47, 48, 60};
    enum {
        NT = sizeof(text_lens) / sizeof(text_lens[0]),
        NP = sizeof(pad_lens) / sizeof(pad_lens[0]),
    };
    static const char alphabet[] = "{}[]:,\"\\ \t\n0123456789-.eEpPtxu\x01\x7f\xc3\xa9";
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    unsigned taken = 0, stops = 0;
    char seeds[2 + NT * NP + 1][256];
    size_t nseeds = 0;
    for (size_t k = 0; k < 2; k++)
        snprintf(seeds[nseeds++], sizeof(seeds[0]), "%s", fixed[k]);
    for (size_t t = 0; t < NT; t++) {
        for (size_t q = 0; q < NP; q++) {
            char text[64], pad[64];
            for (unsigned i = 0; i < text_lens[t]; i++) /* an escape in one text in four */
                text[i] = (t + q) % 4 == 0 && i + 2 == text_lens[t] ? '\\' : (char)('a' + i % 26);
            if ((t + q) % 4 == 0 && text_lens[t] >= 2)
                text[text_lens[t] - 1] = 'n';
            for (unsigned i = 0; i < pad_lens[q]; i++)
                pad[i] = (char)("AbZ09q"[i % 6]);
            snprintf(seeds[nseeds++], sizeof(seeds[0]), T0 "%.*s\"},\"p\":\"%.*s\"}",
                     (int)text_lens[t], text, (int)pad_lens[q], pad);
        }
    }
    snprintf(seeds[nseeds++], sizeof(seeds[0]), "{\"contentBlockIndex\":42,\"p\":\"abcdefgh\"}");
    for (size_t k = 0; k + 1 < nseeds; k++)
        assert_true(same_as_parse(seeds[k], strlen(seeds[k])));
    assert_true(stop_as_parse(seeds[nseeds - 1], strlen(seeds[nseeds - 1])));
    for (unsigned round = 0; round < 300000; round++) {
        size_t n;
        char *p = steady_edited(seeds[round % nseeds], sizeof(seeds[0]), alphabet, &rng, &n);
        taken += same_as_parse(p, n);
        stops += stop_as_parse(p, n);
        free(p);
    }
    assert_true(taken > 0);
    assert_true(stops > 0);
}

/* Through the view: text deltas the steady path takes and their near
 * misses, which the parse reads, give the same content as one would. */
static void test_text_delta_stream(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "messageStart", "{\"p\":\"abcdefgh\",\"role\":\"assistant\"}");
    evs_event(&in, "contentBlockDelta", TEXT(0, "One "));
    evs_event(&in, "contentBlockDelta", "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"two \"}}");
    evs_event(&in, "contentBlockDelta",
              "{\"contentBlockIndex\": 0,\"delta\":{\"text\":\"three \"},\"p\":\"a\"}");
    evs_event(&in, "contentBlockDelta",
              "{\"delta\":{\"text\":\"four \"},\"contentBlockIndex\":0,\"p\":\"a\"}");
    evs_event(&in, "contentBlockDelta",
              "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"five \"},\"delta\":{\"text\":\"no\"},"
              "\"p\":\"a\"}");
    evs_event(&in, "contentBlockDelta",
              "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"bad\\x\"},\"p\":\"a\"}");
    evs_event(&in, "contentBlockDelta",
              "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"six \"},\"p\":\"a b\"}");
    evs_event(&in, "contentBlockDelta", TEXT(0, "\\u00e9\\\"seven\\\""));
    evs_event(&in, "contentBlockStop", STOP(0));
    evs_event(&in, "messageStop", "{\"stopReason\":\"end_turn\",\"p\":\"abcd\"}");
    cg_xform_stats_t st;
    run("openwebui", RAG_REQUEST, &in, &out, &st);
    char *content = content_of(out.p, out.len, false);
    assert_string_equal(content, "One two three four five six \xc3\xa9\"seven\"");
    assert_int_equal(st.malformed, 1);
    assert_int_equal(st.events_in, 11);
    free(content);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Block stops the steady path takes and ones the parse reads give the same
 * references; a stop that is not JSON gives none and counts. */
static void test_block_stop_stream(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "messageStart", "{\"p\":\"abcdefgh\",\"role\":\"assistant\"}");
    evs_event(&in, "contentBlockDelta", TEXT(0, "A."));
    evs_event(&in, "contentBlockDelta", WEB_CITE(0, "https://w.example/a", "w.example"));
    evs_event(&in, "contentBlockStop", "{\"contentBlockIndex\": 0}");
    evs_event(&in, "contentBlockDelta", TEXT(1, " B."));
    evs_event(&in, "contentBlockDelta", WEB_CITE(1, "https://w.example/b", "w.example"));
    evs_event(&in, "contentBlockStop", STOP(1));
    evs_event(&in, "contentBlockDelta", TEXT(2, " C."));
    evs_event(&in, "contentBlockDelta", WEB_CITE(2, "https://w.example/a", "w.example"));
    evs_event(&in, "contentBlockStop", "{\"contentBlockIndex\":2}");
    evs_event(&in, "contentBlockDelta", TEXT(3, " D."));
    evs_event(&in, "contentBlockDelta", WEB_CITE(3, "https://w.example/b", "w.example"));
    evs_event(&in, "contentBlockStop", "{\"contentBlockIndex\":3,\"p\":\"a\"}}");
    evs_event(&in, "messageStop", "{\"stopReason\":\"end_turn\",\"p\":\"abcd\"}");
    cg_xform_stats_t st;
    run("off", RAG_REQUEST, &in, &out, &st);
    char *content = content_of(out.p, out.len, false);
    assert_string_equal(content, "A.[5] B.[6] C.[5] D.");
    assert_int_equal(st.malformed, 1);
    free(content);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* --- the request ----------------------------------------------------------------- */

static void translate(const char *body, const char *tool_config, cg_buf_t *path, cg_buf_t *out,
                      cg_dialect_err_t *err, int want_rc)
{
    cg_dialect_in_t in = {.tool_config = tool_config};
    assert_int_equal(dialect_translate("bedrock", body, in, path, out, err), want_rc);
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
        cmocka_unit_test(test_request),           cmocka_unit_test(test_text_delta_shape),
        cmocka_unit_test(test_text_delta_mutations), cmocka_unit_test(test_text_delta_stream),
        cmocka_unit_test(test_block_stop_shape),     cmocka_unit_test(test_block_stop_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
