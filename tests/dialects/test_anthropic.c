/*
 * The anthropic answer view (src/dialects/anthropic.c, SPEC §6a): the chunks
 * it writes, byte for byte; finish reasons and usage; how sources are keyed
 * and numbered, and where their references go; errors, truncation, pings
 * and what is left out; non-streaming bodies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dialect_run.h"
#include "profiles.h"
#include "view.h"

#define META                                                                                       \
    "\"id\":\"msg_1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"      \
    "\"claude-x\""

#define START                                                                                      \
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","       \
    "\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\","           \
    "\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
#define TEXT_START(i)                                                                              \
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":" #i            \
    ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
#define TEXT(i, s)                                                                                 \
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":" #i            \
    ",\"delta\":{\"type\":\"text_delta\",\"text\":\"" s "\"}}\n\n"
#define CITE(i, c)                                                                                 \
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":" #i            \
    ",\"delta\":{\"type\":\"citations_delta\",\"citation\":" c "}}\n\n"
#define STOP(i)                                                                                    \
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":" #i "}\n\n"
#define DELTA(reason, out)                                                                         \
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"          \
    "\"" reason "\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":" #out "}}\n\n"
#define MSG_STOP "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

#define DOC(k, title, text)                                                                        \
    "{\"type\":\"char_location\",\"cited_text\":\"" text "\",\"document_index\":" #k               \
    ",\"document_title\":\"" title "\",\"start_char_index\":0,\"end_char_index\":4}"
#define WEB(url, title, text)                                                                      \
    "{\"type\":\"web_search_result_location\",\"url\":\"" url "\",\"title\":\"" title              \
    "\",\"encrypted_index\":\"Eo8B\",\"cited_text\":\"" text "\"}"

/* A request with <source> ids 3 and 7 (documents 0 and 1) and id 1 (empty:
 * no document). */
static const char RAG_REQUEST[] =
    "{\"model\":\"claude-x\",\"stream\":true,\"messages\":[{\"role\":\"system\",\"content\":"
    "\"<source id=\\\"3\\\" name=\\\"https://kb.example.com/three\\\">Three text.</source>"
    "<source id=\\\"7\\\" name=\\\"seven.md\\\">Seven text.</source>"
    "<source id=\\\"1\\\" name=\\\"empty.md\\\"></source>\"},"
    "{\"role\":\"user\",\"content\":\"q?\"}]}";

static const char USAGE_REQUEST[] =
    "{\"model\":\"claude-x\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
    "\"messages\":[{\"role\":\"user\",\"content\":\"q?\"}]}";

/* Runs an anthropic stream through `profile`; request may be NULL. */
static void run(const char *profile, const char *request, const char *in, cg_buf_t *out,
                cg_xform_stats_t *stats)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("anthropic"), request, request ? strlen(request) : 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    dialect_stream(&cfg, &c, in, strlen(in), NULL, 0, out, stats);
    dialect_case_free(&c);
}

/* The concatenated content of choice 0 the client reads. */
static char *content_of(const cg_buf_t *out)
{
    view_t v;
    view_of_stream(&v, out->p, out->len);
    cg_buf_t c = {0};
    cg_buf_put(&c, v.content[0].p, v.content[0].len);
    cg_buf_putc(&c, '\0');
    view_free(&v);
    return c.p;
}

/* --- chunks ------------------------------------------------------------------- */

static void test_plain_text_chunks(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", NULL,
        START TEXT_START(0) "event: ping\ndata: {\"type\": \"ping\"}\n\n" TEXT(0, "Hel")
            TEXT(0, "lo \\u00e9 \\\"q\\\" 😀") STOP(0) DELTA("end_turn", 15) MSG_STOP,
        &out, &st);
    const char *want =
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"
        "\"\"},\"finish_reason\":null}]}\n\n"
        ": ping\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo \\u00e9 \\\"q\\\" "
        "😀\"},\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    assert_string_equal(out.p, want);
    assert_true(st.saw_done);
    assert_false(st.truncated);
    assert_int_equal(st.malformed, 0);
    cg_buf_free(&out);
}

/* The data of the published examples has spaces after colons and commas,
 * and an event may spread its JSON over several data lines. */
static void test_spaced_and_multiline_data(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("off", NULL,
        START "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0,"
              "\ndata:  \"delta\": {\"type\": \"text_delta\", \"text\": \"a\"}}\n\n" TEXT(0, "b")
                  MSG_STOP,
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "ab");
    free(c);
    cg_buf_free(&out);
}

static void test_only_text_deltas_are_content(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", NULL,
        START
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm [1]\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB\"}}\n\n" STOP(
            0) "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
               "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\"\"}}\n\n"
               "event: brand_new\ndata: {\"type\":\"brand_new\",\"text\":\"no\"}\n\n"
               "data: not json\n\n" TEXT_START(2) TEXT(2, "yes") STOP(2) DELTA("end_turn", 3)
                   MSG_STOP,
        &out, &st);
    char *c = content_of(&out);
    assert_string_equal(c, "yes");
    assert_int_equal(st.malformed, 1);
    assert_null(strstr(out.p, "brand_new"));
    assert_null(strstr(out.p, "not json"));
    free(c);
    cg_buf_free(&out);
}

/* A text_delta whose bytes match the previous one's around the text but
 * whose text is no JSON string must not slip through unparsed. */
static void test_broken_text_after_good_ones(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("off", NULL,
        START TEXT(0, "one ") TEXT(0, "a\"b") TEXT(0, "c\\") TEXT(0, "d\\x") TEXT(0, "\\u00e")
            TEXT(0, "two") MSG_STOP,
        &out, &st);
    char *c = content_of(&out);
    assert_string_equal(c, "one two");
    assert_int_equal(st.malformed, 4);
    free(c);
    cg_buf_free(&out);
}

/* The parser stops at a NUL byte; so does the template path. */
static void test_control_bytes_in_text(void **state)
{
    (void)state;
    /* Every raw control byte is not JSON in a string, NUL, TAB and LF too
     * (the last as a text spread over two data lines); the first "one "
     * takes the parse path, the next ones the template path. */
    static const char in[] = START TEXT(0, "one ") TEXT(0, "a\0b") TEXT(0, "c\\\0")
        TEXT(0, "d\te") TEXT(0, "f\ndata: g") TEXT(0, "h\x1f") TEXT(0, "two") MSG_STOP;
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("anthropic"), NULL, 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("off"));
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    dialect_stream(&cfg, &c, in, sizeof(in) - 1, NULL, 0, &out, &st);
    assert_int_equal(st.malformed, 5);
    assert_null(memchr(out.p, '\0', out.len));
    assert_null(memchr(out.p, '\t', out.len));
    assert_null(strstr(out.p, "data: g"));
    char *content = content_of(&out);
    assert_string_equal(content, "one two");
    free(content);
    cg_buf_free(&out);
    dialect_case_free(&c);
}

/* The same with a text of three-byte characters and escaped surrogate
 * pairs, whose cuts never land on the chunk size: no line passes 64 KiB,
 * and no chunk ends inside a pair (each half alone is no character to a
 * client). */
static void test_huge_multibyte_text(void **state)
{
    (void)state;
    cg_buf_t in = {0}, text = {0}, want = {0}, out = {0};
    static const char cups[] = "\xe2\x98\x95\xe2\x98\x95\xe2\x98\x95";
    for (int i = 0; i < 9000; i++) {
        cg_buf_puts(&text, i % 7 == 3 ? "\\ud83d\\ude00" : cups);
        cg_buf_puts(&want, i % 7 == 3 ? "\xf0\x9f\x98\x80" : cups); /* as a client reads it */
    }
    cg_buf_puts(&in, START TEXT_START(0));
    cg_buf_printf(&in, TEXT(0, "%.*s"), (int)text.len, text.p);
    cg_buf_puts(&in, STOP(0) MSG_STOP);
    cg_buf_putc(&in, '\0');
    static const char *const profiles[] = {"openwebui", "markdown", "off"};
    for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++) {
        run(profiles[p], NULL, in.p, &out, NULL);
        view_t v;
        view_of_stream(&v, out.p, out.len);
        if (v.max_line > CG_XFORM_LINE_MAX)
            fail_msg("%s: a line of %zu bytes", profiles[p], v.max_line);
        assert_null(strstr(out.p, "\\ud83d\""));          /* a chunk ends on a high half */
        assert_null(strstr(out.p, "\"content\":\"\\ude00")); /* the next opens on a low one */
        assert_int_equal(v.content[0].len, want.len);
        assert_memory_equal(v.content[0].p, want.p, want.len);
        view_free(&v);
    }
    cg_buf_free(&in);
    cg_buf_free(&text);
    cg_buf_free(&want);
    cg_buf_free(&out);
}

/* SPEC §6 rule 5: a text delta far over 64 KiB goes out in several chunks,
 * none of whose lines passes 64 KiB, the text whole and a reference across
 * two deltas still found. */
static void test_huge_text(void **state)
{
    (void)state;
    cg_buf_t in = {0}, text = {0}, out = {0};
    for (int i = 0; i < 20000; i++)
        cg_buf_puts(&text, i % 1000 == 999 ? "[1] \\u00e9 " : "word ");
    cg_buf_puts(&in, START TEXT_START(0) CITE(0, WEB("https://w.example/p", "W", "w")));
    cg_buf_printf(&in, TEXT(0, "%.*s"), (int)text.len, text.p);
    cg_buf_puts(&in, TEXT(0, "[") TEXT(0, "1]") STOP(0) MSG_STOP);
    cg_buf_putc(&in, '\0');
    static const char *const profiles[] = {"openwebui", "structured", "off"};
    for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++) {
        run(profiles[p], NULL, in.p, &out, NULL);
        view_t v;
        view_of_stream(&v, out.p, out.len);
        assert_true(v.max_line <= CG_XFORM_LINE_MAX);
        assert_true(v.ends_done);
        /* Profiles off and structured leave references as written. */
        const char *tail = strcmp(profiles[p], "openwebui") != 0
                               ? "[1] é [1][1]"
                               : "[[1]](https://w.example/p) é [[1]](https://w.example/p)"
                                 "[[1]](https://w.example/p)";
        size_t n = strlen(tail);
        const cg_buf_t *c = &v.content[0];
        if (c->len < 100000 || memcmp(c->p + c->len - n, tail, n) != 0)
            fail_msg("%s: %zu bytes, ends %.*s", profiles[p], c->len, (int)n, c->p + c->len - n);
        view_free(&v);
    }
    cg_buf_free(&in);
    cg_buf_free(&text);
    cg_buf_free(&out);
}

static void test_finish_reasons(void **state)
{
    (void)state;
    static const struct {
        const char *stop, *finish;
    } cases[] = {
        {"end_turn", "stop"},       {"stop_sequence", "stop"},
        {"max_tokens", "length"},   {"model_context_window_exceeded", "length"},
        {"tool_use", "tool_calls"}, {"refusal", "content_filter"},
        {"pause_turn", "stop"},     {"something_new", "stop"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char in[1024], want[128];
        snprintf(in, sizeof(in),
                 START "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
                       "{\"stop_reason\":\"%s\"},\"usage\":{\"output_tokens\":2}}\n\n" MSG_STOP,
                 cases[i].stop);
        snprintf(want, sizeof(want), "\"delta\":{},\"finish_reason\":\"%s\"}]}", cases[i].finish);
        cg_buf_t out = {0};
        run("openwebui", NULL, in, &out, NULL);
        if (strstr(out.p, want) == NULL)
            fail_msg("%s: %s not in %s", cases[i].stop, want, out.p);
        cg_buf_free(&out);
    }
}

static void test_usage_chunk(void **state)
{
    (void)state;
    const char *in = START TEXT_START(0) TEXT(0, "Hi") STOP(
        0) "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
           "\"end_turn\"},\"usage\":{\"input_tokens\":30,\"output_tokens\":7}}\n\n" MSG_STOP;
    cg_buf_t out = {0};
    run("openwebui", USAGE_REQUEST, in, &out, NULL);
    const char *want = "data: {" META ",\"choices\":[],\"usage\":{\"prompt_tokens\":30,"
                       "\"completion_tokens\":7,\"total_tokens\":37}}\n\ndata: [DONE]\n\n";
    assert_non_null(strstr(out.p, want));
    /* Not asked for: no usage chunk. */
    run("openwebui", RAG_REQUEST, in, &out, NULL);
    assert_null(strstr(out.p, "\"usage\""));
    run("openwebui", NULL, in, &out, NULL);
    assert_null(strstr(out.p, "\"usage\""));
    /* message_start's input count when message_delta has none. */
    run("openwebui", USAGE_REQUEST, START DELTA("end_turn", 9) MSG_STOP, &out, NULL);
    assert_non_null(
        strstr(out.p, "{\"prompt_tokens\":25,\"completion_tokens\":9,\"total_tokens\":34}"));
    cg_buf_free(&out);
}

/* --- sources ---------------------------------------------------------------- */

static void test_documents_are_request_sources(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", RAG_REQUEST,
        START TEXT_START(0) TEXT(0, "Intro [1]. ") STOP(0) TEXT_START(1)
            CITE(1, DOC(1, "seven.md", "Seven")) CITE(1, DOC(0, "three", "Three"))
                CITE(1, DOC(1, "seven.md", "Seven again")) TEXT(1, "cited") STOP(1)
                    DELTA("end_turn", 5) MSG_STOP,
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "Intro [1]. cited[7][[3]](https://kb.example.com/three)");
    view_t v;
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.sources, '\0');
    /* Sources in first-reference order: 1 (the model's own), 7, 3, with the
     * request's titles and texts, not the upstream's. */
    const char *one = strstr(v.sources.p, "\"id\":\"1\"");
    const char *seven = strstr(v.sources.p, "\"id\":\"7\"");
    const char *three = strstr(v.sources.p, "\"id\":\"3\"");
    assert_true(one && seven && three && one < seven && seven < three);
    assert_non_null(strstr(v.sources.p, "\"document\":[\"Seven text.\"]"));
    assert_null(strstr(v.sources.p, "Seven again"));
    view_free(&v);
    free(c);
    cg_buf_free(&out);
}

/* Sources that are not request documents take the numbers after every id in
 * use, in first-citation order; the same url is one source however it is
 * escaped; a document index past the request's documents is another source. */
static void test_new_sources_numbered_after_ids(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", RAG_REQUEST,
        START TEXT_START(0) CITE(0, WEB("https://a.example/x", "A", "a says"))
            CITE(0, DOC(2, "Extra PDF", "pdf says")) TEXT(0, "one") STOP(0) TEXT_START(1)
                CITE(1, WEB("https:\\/\\/a.example\\/x", "A again", "again"))
                    CITE(1, "{\"type\":\"search_result_location\",\"source\":\"kb://x\","
                            "\"title\":\"KB\",\"cited_text\":\"kb says\",\"search_result_index\":0,"
                            "\"start_block_index\":0,\"end_block_index\":1}")
                        CITE(1, "{\"type\":\"char_location\",\"cited_text\":\"no key\"}")
                            TEXT(1, " two") STOP(1) MSG_STOP,
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "one[[8]](https://a.example/x)[9] two[[8]](https://a.example/x)[10]");
    view_t v;
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.sources, '\0');
    assert_non_null(strstr(v.sources.p, "\"name\":\"[8] A\""));
    assert_non_null(strstr(v.sources.p, "\"document\":[\"a says\"]"));
    assert_non_null(strstr(v.sources.p, "\"name\":\"[9] Extra PDF\""));
    /* kb://x is no http(s) url: no url, and the title is the key. */
    assert_non_null(strstr(v.sources.p, "\"source\":{\"id\":\"10\",\"name\":\"[10] KB\"}"));
    assert_non_null(strstr(v.sources.p, "\"source\":\"10:KB\""));
    assert_null(strstr(v.sources.p, "no key"));
    view_free(&v);
    free(c);
    cg_buf_free(&out);
}

/* No request: sources are numbered from 1; a search result's absolute
 * `source` is its url; a block's own `citations` count like deltas. */
static void test_sources_without_request(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", NULL,
        START "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
              "\"content_block\":{\"type\":\"text\",\"text\":\"\",\"citations\":["
              "{\"type\":\"search_result_location\",\"source\":\"https://docs.example.com/auth\","
              "\"title\":\"Auth\",\"cited_text\":\"Keys.\",\"search_result_index\":4,"
              "\"start_block_index\":0,\"end_block_index\":1}]}}\n\n" CITE(0, DOC(0, "Doc", "d"))
                  TEXT(0, "x") STOP(0) MSG_STOP,
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "x[[1]](https://docs.example.com/auth)[2]");
    free(c);
    cg_buf_free(&out);
}

/* A citation with a key and nothing else, first of its stream (found by
 * fuzz_anthropic under UBSan): a source of its own, titled by SPEC §7's
 * fallback. */
static void test_bare_citation(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", NULL,
        START TEXT_START(0) CITE(0, "{\"document_index\":5}") TEXT(0, "x") STOP(0) MSG_STOP, &out,
        NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "x[1]");
    assert_non_null(strstr(out.p, "\"source\":{\"id\":\"1\",\"name\":\"[1] Unknown Document\"}"));
    free(c);
    cg_buf_free(&out);
}

/* At most BLOCK_REFS (128) distinct sources of one block get a reference. */
static void test_block_reference_bound(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    cg_buf_puts(&in, START TEXT_START(0));
    for (int k = 0; k < 200; k++)
        cg_buf_printf(&in,
                      CITE(0, "{\"type\":\"char_location\",\"document_index\":%d,"
                              "\"cited_text\":\"t\"}"),
                      k);
    cg_buf_puts(&in, TEXT(0, "x") STOP(0) MSG_STOP);
    cg_buf_putc(&in, '\0');
    run("off", NULL, in.p, &out, NULL);
    char *c = content_of(&out);
    assert_non_null(strstr(c, "[127][128]"));
    assert_null(strstr(c, "[129]"));
    free(c);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Citations that arrive after references resolved grow (and move) the
 * citation table under profiles that remember citations (run under ASan). */
static void test_profiles_with_growing_citations(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    cg_buf_puts(&in, START);
    for (int k = 0; k < 40; k++)
        cg_buf_printf(&in,
                      TEXT_START(0) CITE(0, "{\"type\":\"web_search_result_location\",\"url\":"
                                            "\"https://s%d.example/p\",\"title\":\"S%d\","
                                            "\"cited_text\":\"c\"}") TEXT(0, "t") STOP(0),
                      k, k);
    cg_buf_puts(&in, MSG_STOP);
    cg_buf_putc(&in, '\0');

    run("webchat", NULL, in.p, &out, NULL);
    char *c = content_of(&out);
    assert_non_null(strstr(c, "t[1]t[2]t[3]"));
    assert_non_null(strstr(c, "[40]: https://s39.example/p \"S39\""));
    assert_non_null(strstr(out.p, "{\"@type\":\"Claim\",\"position\":\"40\",\"appearance\":"
                                  "{\"@type\":\"DigitalDocument\",\"name\":\"S39\""));
    free(c);

    run("openai", NULL, in.p, &out, NULL);
    assert_non_null(
        strstr(out.p, "\"url_citation\":{\"url\":\"https://s0.example/p\",\"title\":\"S0\""));
    assert_non_null(
        strstr(out.p, "\"url_citation\":{\"url\":\"https://s39.example/p\",\"title\":\"S39\""));
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* --- ends ---------------------------------------------------------------------- */

static void test_error_event(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", RAG_REQUEST,
        START TEXT_START(0) TEXT(0, "Hi [7") "event: error\ndata: {\"type\": \"error\", \"error\": "
                                             "{\"type\": \"overloaded_error\", \"message\": "
                                             "\"Over\\\"loaded\"}}\n\n" TEXT(0, "never") MSG_STOP,
        &out, &st);
    char *c = content_of(&out);
    assert_string_equal(c, "Hi [7");
    const char *tail =
        "data: {\"error\":{\"message\":\"Over\\\"loaded\",\"type\":\"upstream_error\","
        "\"code\":\"overloaded_error\"}}\n\n";
    size_t n = strlen(tail);
    assert_true(out.len >= n && strcmp(out.p + out.len - n, tail) == 0);
    assert_null(strstr(out.p, "[DONE]"));
    assert_true(st.truncated);
    free(c);
    cg_buf_free(&out);
}

/* An error whose message is 100 KB still goes out on one line under 64 KiB
 * (SPEC §6 rule 5): the message is cut, whole characters, and marked. */
static void test_huge_error_message_cut(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    cg_buf_puts(&in, START TEXT_START(0) TEXT(0, "Hi") "event: error\ndata: {\"type\":\"error\","
                                                       "\"error\":{\"type\":\"overloaded_error\","
                                                       "\"message\":\"");
    for (int i = 0; i < 20000; i++)
        cg_buf_puts(&in, "\xe2\x98\x95 \\u00e9");
    cg_buf_puts(&in, "\"}}\n\n");
    cg_buf_putc(&in, '\0');
    run("openwebui", NULL, in.p, &out, NULL);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    if (v.max_line > CG_XFORM_LINE_MAX)
        fail_msg("a line of %zu bytes", v.max_line);
    const char *err = strstr(out.p, "data: {\"error\":{\"message\":\"\xe2\x98\x95 \\u00e9");
    assert_non_null(err);
    assert_non_null(strstr(err, "\xe2\x80\xa6\",\"type\":\"upstream_error\",\"code\":\"overloaded_error\"}}"));
    assert_true(v.ends_error);
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Nothing after message_stop is read, also where the profile holds the
 * stream (and so has not ended it when the view's [DONE] goes by). */
static void test_nothing_after_message_stop(void **state)
{
    (void)state;
    static const char *const profiles[] = {"structured", "openwebui"};
    for (size_t p = 0; p < 2; p++) {
        cg_buf_t out = {0};
        run(profiles[p], NULL, START TEXT(0, "one") MSG_STOP TEXT(0, "two") MSG_STOP, &out, NULL);
        char *c = content_of(&out);
        assert_string_equal(c, "one");
        const char *done = strstr(out.p, "data: [DONE]");
        assert_non_null(done);
        assert_null(strstr(done + strlen("data: [DONE]"), "[DONE]"));
        free(c);
        cg_buf_free(&out);
    }
}

static void test_truncated_streams(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    /* Stop reason seen: complete but for [DONE], which citegate adds after
     * the usage chunk. */
    run("openwebui", USAGE_REQUEST, START TEXT_START(0) TEXT(0, "Hi") STOP(0) DELTA("end_turn", 2),
        &out, NULL);
    const char *tail = "\"choices\":[],\"usage\":{\"prompt_tokens\":25,\"completion_tokens\":2,"
                       "\"total_tokens\":27}}\n\ndata: [DONE]\n\n";
    assert_true(out.len > strlen(tail) && strcmp(out.p + out.len - strlen(tail), tail) == 0);
    /* Ended inside a text block: its references never come, the error
     * event does. */
    run("openwebui", RAG_REQUEST,
        START TEXT_START(0) CITE(0, DOC(0, "three", "t"))
            TEXT(0, "Hi") "event: content_block_delta\n",
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "Hi");
    assert_non_null(strstr(out.p, "\"code\":\"upstream_closed\"}}\n\n"));
    assert_null(strstr(out.p, "[DONE]"));
    assert_null(strstr(out.p, "\"type\":\"source\""));
    free(c);
    cg_buf_free(&out);
}

/* --- bodies -------------------------------------------------------------------- */

static void test_body(void **state)
{
    (void)state;
    const char *body =
        "{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\","
        "\"content\":[{\"type\":\"thinking\",\"thinking\":\"no\",\"signature\":\"s\"},"
        "{\"type\":\"text\",\"text\":\"A \\u00e9 \"},{\"type\":\"text\",\"text\":\"cited\","
        "\"citations\":[" DOC(1, "seven.md", "s") "," WEB(
            "https://w.example/p", "W",
            "w") "]},"
                 "{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\","
                 "\"input\":{}},"
                 "{\"type\":\"text\",\"text\":\".\"}],\"stop_reason\":\"max_tokens\",\"stop_"
                 "sequence\":null,"
                 "\"usage\":{\"input_tokens\":11,\"output_tokens\":22}}";
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("anthropic"), RAG_REQUEST, strlen(RAG_REQUEST));
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("off"));
    cg_buf_t out = {0};
    assert_int_equal(dialect_body(&cfg, &c, body, strlen(body), &out), 0);
    const char *want =
        "{\"id\":\"msg_b\",\"object\":\"chat.completion\",\"created\":1700000000,\"model\":"
        "\"claude-x\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "\"A \\u00e9 "
        "cited[7][8].\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":11,"
        "\"completion_tokens\":22,\"total_tokens\":33}}";
    assert_string_equal(out.p, want);

    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    assert_int_equal(dialect_body(&cfg, &c, body, strlen(body), &out), 0);
    view_t v;
    assert_int_equal(view_of_body(&v, out.p, out.len), 0);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "A é cited[7][[8]](https://w.example/p).");
    view_free(&v);

    /* Not a message (an error object): refused, the body passes unchanged. */
    const char *err = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                      "\"message\":\"Overloaded\"}}";
    assert_int_equal(dialect_body(&cfg, &c, err, strlen(err), &out), -1);
    assert_string_equal(out.p, err);
    dialect_case_free(&c);
    cg_buf_free(&out);
}

/* Under the auto style, [N] is the anthropic answer's reference even when
 * the request has Azure data_sources (which make an openai stream [docN]). */
static void test_numeric_despite_data_sources(void **state)
{
    (void)state;
    const char *req =
        "{\"model\":\"m\",\"stream\":true,\"data_sources\":[{\"type\":\"azure_search\"}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}";
    cg_buf_t out = {0};
    run("openwebui", req,
        START TEXT_START(0) CITE(0, WEB("https://w.example/p", "W", "w")) TEXT(0, "x") STOP(0)
            MSG_STOP,
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "x[[1]](https://w.example/p)");
    free(c);
    cg_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_text_chunks),
        cmocka_unit_test(test_spaced_and_multiline_data),
        cmocka_unit_test(test_only_text_deltas_are_content),
        cmocka_unit_test(test_broken_text_after_good_ones),
        cmocka_unit_test(test_control_bytes_in_text),
        cmocka_unit_test(test_huge_text),
        cmocka_unit_test(test_huge_multibyte_text),
        cmocka_unit_test(test_finish_reasons),
        cmocka_unit_test(test_usage_chunk),
        cmocka_unit_test(test_documents_are_request_sources),
        cmocka_unit_test(test_new_sources_numbered_after_ids),
        cmocka_unit_test(test_sources_without_request),
        cmocka_unit_test(test_bare_citation),
        cmocka_unit_test(test_block_reference_bound),
        cmocka_unit_test(test_profiles_with_growing_citations),
        cmocka_unit_test(test_error_event),
        cmocka_unit_test(test_huge_error_message_cut),
        cmocka_unit_test(test_nothing_after_message_stop),
        cmocka_unit_test(test_truncated_streams),
        cmocka_unit_test(test_body),
        cmocka_unit_test(test_numeric_despite_data_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
