/*
 * The gemini answer view (src/dialects/gemini.c, SPEC §6a): the chunks it
 * writes, byte for byte; thoughts, finish reasons and usage; the grounding
 * kept, its sources numbered and their references placed at UTF-8 byte
 * offsets (escapes, surrogate pairs, characters of several bytes, offsets
 * inside a character or past the text, text beyond the first bitmap
 * words); error objects as data and on lines of their own; pings and what
 * is left out; non-streaming bodies.
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
    "\"id\":\"r-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":"        \
    "\"gemini-2.5-flash\""
#define TAIL ",\"modelVersion\": \"gemini-2.5-flash\",\"responseId\": \"r-1\"}\r\n\r\n"

/* An event with text parts (a JSON list of parts), and members after the
 * candidate's content (each starting with a comma, or ""). */
#define EV(parts, cand)                                                                            \
    "data: {\"candidates\": [{\"content\": {\"parts\": " parts ",\"role\": \"model\"}" cand        \
    ",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 20}" TAIL
#define TEXT(s)        EV("[{\"text\": \"" s "\"}]", "")
#define TEXT_FINISH(s) EV("[{\"text\": \"" s "\"}]", ",\"finishReason\": \"STOP\"")
#define WEB(id, title)                                                                             \
    "{\"web\": {\"uri\": \"https://vertexaisearch.cloud.google.com/grounding-api-redirect/" id     \
    "\",\"title\": \"" title "\"}}"
#define SUPPORT(end, idx)                                                                          \
    "{\"segment\": {\"endIndex\": " #end "},\"groundingChunkIndices\": " idx "}"
/* The last event: its text, the finish and the grounding. */
#define LAST(s, chunks, supports)                                                                  \
    EV("[{\"text\": \"" s "\"}]",                                                                  \
       ",\"finishReason\": \"STOP\",\"groundingMetadata\": "                                       \
       "{\"groundingChunks\": " chunks ",\"groundingSupports\": " supports "}")

#define ROLE                                                                                       \
    "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"     \
    "\"\"},\"finish_reason\":null}]}\n\n"
#define CONTENT(s)                                                                                 \
    "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" s "\"},"                 \
    "\"finish_reason\":null}]}\n\n"
#define FINISH(r)                                                                                  \
    "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"" r "\"}]}\n\n"

static const char RAG_REQUEST[] =
    "{\"model\":\"gemini-2.5-flash\",\"stream\":true,\"messages\":[{\"role\":\"system\","
    "\"content\":\"<source id=\\\"3\\\" name=\\\"https://kb.example.com/three\\\">Three text."
    "</source>\"},{\"role\":\"user\",\"content\":\"q?\"}]}";

static const char USAGE_REQUEST[] =
    "{\"model\":\"gemini-2.5-flash\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
    "\"messages\":[{\"role\":\"user\",\"content\":\"q?\"}]}";

static void run_n(const char *profile, const char *request, const char *in, size_t n, cg_buf_t *out,
                  cg_xform_stats_t *stats)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("gemini"), request, request ? strlen(request) : 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    dialect_stream(&cfg, &c, in, n, NULL, 0, out, stats);
    dialect_case_free(&c);
}

/* Runs a gemini stream through `profile`; request may be NULL. */
static void run(const char *profile, const char *request, const char *in, cg_buf_t *out,
                cg_xform_stats_t *stats)
{
    run_n(profile, request, in, strlen(in), out, stats);
}

/* The concatenated content of choice 0 the client reads (caller frees). */
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

static void content_is(const char *profile, const char *in, const char *want)
{
    cg_buf_t out = {0};
    run(profile, NULL, in, &out, NULL);
    char *got = content_of(&out);
    if (strcmp(got, want) != 0) {
        print_error("content\n  got:  %s\n  want: %s\n", got, want);
        fail();
    }
    free(got);
    cg_buf_free(&out);
}

static bool has(const cg_buf_t *out, const char *s)
{
    return memmem(out->p, out->len, s, strlen(s)) != NULL;
}

/* --- chunks ------------------------------------------------------------------- */

static void test_chunks(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", NULL,
        TEXT("Hel") EV("[{\"text\": \"ignored [1]\", \"thought\": true},{\"text\": \"lo \\u00e9 "
                       "\\\"q\\\" 😀\"}]",
                       ",\"groundingMetadata\": {}") TEXT_FINISH(""),
        &out, &st);
    const char *want =
        ROLE CONTENT("Hel") CONTENT("lo \\u00e9 \\\"q\\\" 😀") FINISH("stop") "data: [DONE]\n\n";
    assert_string_equal(out.p, want);
    assert_true(st.saw_finish);
    assert_false(st.truncated);
    assert_int_equal(st.malformed, 0);
    cg_buf_free(&out);
}

/* Thoughts are no content, whatever the profile: not even in off. */
static void test_thoughts_hidden(void **state)
{
    (void)state;
    static const char *const profiles[] = {"openwebui", "openai",     "webchat",
                                           "markdown",  "structured", "off"};
    for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
        content_is(profiles[i],
                   EV("[{\"text\": \"plan: cite [1]\", \"thought\": true, \"thoughtSignature\": "
                      "\"Cq0B\"}]",
                      "") TEXT("Answer") EV("[{\"text\": \"\", \"thoughtSignature\": \"EqQD\"}]",
                                            ",\"finishReason\": \"STOP\""),
                   "Answer");
}

static void test_finish_reasons(void **state)
{
    (void)state;
    static const struct {
        const char *upstream, *chat;
    } map[] = {
        {"STOP", "stop"},
        {"MAX_TOKENS", "length"},
        {"SAFETY", "content_filter"},
        {"RECITATION", "content_filter"},
        {"BLOCKLIST", "content_filter"},
        {"PROHIBITED_CONTENT", "content_filter"},
        {"SPII", "content_filter"},
        {"LANGUAGE", "content_filter"},
        {"IMAGE_SAFETY", "content_filter"},
        {"IMAGE_PROHIBITED_CONTENT", "content_filter"},
        {"OTHER", "stop"},
        {"MALFORMED_FUNCTION_CALL", "stop"},
        {"FINISH_REASON_UNSPECIFIED", "stop"},
        {"UNEXPECTED_TOOL_CALL", "stop"},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        char in[512], want[256];
        snprintf(in, sizeof(in),
                 "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"x\"}]},"
                 "\"finishReason\": \"%s\"}]}\r\n\r\n",
                 map[i].upstream);
        snprintf(want, sizeof(want), "\"finish_reason\":\"%s\"", map[i].chat);
        cg_buf_t out = {0};
        cg_xform_stats_t st;
        run("openwebui", NULL, in, &out, &st);
        assert_true(has(&out, want));
        assert_true(st.saw_finish);
        cg_buf_free(&out);
    }
    /* No finishReason: the end of the body is a truncation. */
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", NULL, TEXT("cut"), &out, &st);
    assert_true(st.truncated);
    assert_true(has(&out, "\"code\":\"upstream_closed\""));
    assert_false(has(&out, "[DONE]"));
    cg_buf_free(&out);
}

/* A blocked prompt: no candidate, no content, content_filter. */
static void test_blocked_prompt(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", NULL,
        "data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\",\"safetyRatings\": []},"
        "\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 9}" TAIL,
        &out, NULL);
    assert_string_equal(out.p, ROLE FINISH("content_filter") "data: [DONE]\n\n");
    cg_buf_free(&out);
}

/* usageMetadata is a running snapshot: the last one counts, even lower;
 * the usage chunk goes before [DONE] when the client asked. */
static void test_usage(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", USAGE_REQUEST,
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}]}}],"
        "\"usageMetadata\": {\"promptTokenCount\": 10,\"totalTokenCount\": 30}}\r\n\r\n"
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"b\"}]},"
        "\"finishReason\": \"STOP\"}],"
        "\"usageMetadata\": {\"promptTokenCount\": 8,\"totalTokenCount\": 21,"
        "\"thoughtsTokenCount\": 4}}\r\n\r\n",
        &out, NULL);
    const char *usage = "\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":13,"
                        "\"total_tokens\":21}";
    assert_true(has(&out, usage));
    assert_true(strstr(out.p, usage) < strstr(out.p, "[DONE]"));
    assert_true(strstr(out.p, "\"finish_reason\":\"stop\"") < strstr(out.p, usage));
    cg_buf_free(&out);
    /* Not asked: none. Zero counts are left out upstream: 0. */
    run("openwebui", NULL, TEXT_FINISH("x"), &out, NULL);
    assert_false(has(&out, "\"usage\""));
    cg_buf_free(&out);
    run("openwebui", USAGE_REQUEST,
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"x\"}]},"
        "\"finishReason\": \"STOP\"}],\"usageMetadata\": {\"totalTokenCount\": 3}}\r\n\r\n",
        &out, NULL);
    assert_true(has(&out, "\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":3,"
                          "\"total_tokens\":3}"));
    cg_buf_free(&out);
}

/* The steady path reads a plain event without a parse when it matches the
 * last one read in full but for its text and the numbers seen to change:
 * what the client gets is the same as from the full read, usage included,
 * whatever changes and whatever comes between. */
static void test_steady_path(void **state)
{
    (void)state;
#define PLAIN(text, prompt, cands, total)                                                          \
    "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"" text "\"}],\"role\": "      \
    "\"model\"},\"index\": 0,\"groundingMetadata\": {}}],\"usageMetadata\": "                      \
    "{\"promptTokenCount\": " #prompt ",\"candidatesTokenCount\": " #cands                         \
    ",\"totalTokenCount\": " #total "}" TAIL
    cg_buf_t out = {0};
    run("openwebui", USAGE_REQUEST,
        PLAIN("a", 10, 1, 11) PLAIN("b", 10, 2, 12) PLAIN("c \\\"q\\\"", 10, 3, 13)
            PLAIN("d", 10, 4, 14)
        /* the prompt count changes too: one full read, then steady again */
        PLAIN("\\u00e9", 20, 5, 25) PLAIN("f", 20, 6, 26)
        /* a text that is no JSON string: read in full, and refused */
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"g\\x\"}],\"role\": "
        "\"model\"},\"index\": 0,\"groundingMetadata\": {}}],\"usageMetadata\": "
        "{\"promptTokenCount\": 20,\"candidatesTokenCount\": 7,\"totalTokenCount\": 27}" TAIL
            /* between them, one that is not plain (a thought) and changes the counts */
            EV("[{\"text\": \"t\", \"thought\": true}]", "") PLAIN("h", 20, 8, 28)
        /* a count with an exponent: read in full */
        PLAIN("i", 20, 9, 2.5e1) EV("[{\"text\": \"\"}]", ",\"finishReason\": \"STOP\"")
            PLAIN("j", 30, 10, 40),
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c, "abc \"q\"d\xc3\xa9"
                           "fhij");
    free(c);
    assert_true(has(&out, "\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":10,"
                          "\"total_tokens\":40}"));
    cg_buf_free(&out);
    /* The same with every event a little different, so each one is read in
     * full: the same client bytes. */
    cg_buf_t steady = {0}, full = {0};
    run("openwebui", USAGE_REQUEST,
        PLAIN("a", 10, 1, 11) PLAIN("b", 10, 2, 12) PLAIN("c", 10, 3, 13) PLAIN("d", 20, 4, 9)
            EV("[{\"text\": \"e\"}]", ",\"finishReason\": \"STOP\""),
        &steady, NULL);
    run("openwebui", USAGE_REQUEST,
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a\"}]}}],"
        "\"usageMetadata\": {\"promptTokenCount\": 10,\"totalTokenCount\": 11}" TAIL
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"b\"}]},\"index\": 0}],"
        "\"usageMetadata\": {\"promptTokenCount\": 10,\"totalTokenCount\": 12}" TAIL
        "data: {\"usageMetadata\": {\"promptTokenCount\": 10,\"totalTokenCount\": 13},"
        "\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"c\"}]}}]" TAIL
        "data: {\"candidates\": [{\"index\": 0,\"content\": {\"parts\": [{\"text\": \"d\"}]}}],"
        "\"usageMetadata\": {\"totalTokenCount\": 9,\"promptTokenCount\": 20}" TAIL EV(
            "[{\"text\": \"e\"}]", ",\"finishReason\": \"STOP\""),
        &full, NULL);
    assert_int_equal(steady.len, full.len);
    assert_memory_equal(steady.p, full.p, full.len);
    cg_buf_free(&steady);
    cg_buf_free(&full);
#undef PLAIN
}

/* --- grounding ------------------------------------------------------------------ */

/* Sources numbered in the order first cited: supports by endIndex, then as
 * listed; a chunk no support cites is no citation; the references go in
 * one delta after the last text, before the finish. */
static void test_grounding_stream(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("off", NULL,
        TEXT("One. ")
            LAST("Two.",
                 "[" WEB("a", "a.example") "," WEB("b", "b.example") "," WEB("c", "c.example") "]",
                 "[" SUPPORT(9, "[2]") "," SUPPORT(5, "[1]") "," SUPPORT(9, "[0, 2]") "]"),
        &out, NULL);
    assert_string_equal(out.p, ROLE CONTENT("One. ") CONTENT("Two.") CONTENT(" [1][2][3]")
                                   FINISH("stop") "data: [DONE]\n\n");
    cg_buf_free(&out);
    /* openwebui: b is 1, c is 2, a is 3; their links and source events. */
    run("openwebui", NULL,
        TEXT("One. ")
            LAST("Two.",
                 "[" WEB("a", "a.example") "," WEB("b", "b.example") "," WEB("c", "c.example") "]",
                 "[" SUPPORT(9, "[2]") "," SUPPORT(5, "[1]") "," SUPPORT(9, "[0, 2]") "]"),
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(
        c, "One. Two. [[1]](https://vertexaisearch.cloud.google.com/grounding-api-redirect/b)"
           "[[2]](https://vertexaisearch.cloud.google.com/grounding-api-redirect/c)"
           "[[3]](https://vertexaisearch.cloud.google.com/grounding-api-redirect/a)");
    assert_true(has(&out, "\"name\":\"[1] b.example\""));
    assert_true(has(&out, "\"name\":\"[3] a.example\""));
    free(c);
    cg_buf_free(&out);
}

/* Offsets count UTF-8 bytes of the decoded text: escapes are their bytes,
 * a surrogate pair four, a lone surrogate U+FFFD's three. An offset inside
 * a character or past the text is ignored; the end of the text counts. */
static void test_byte_offsets(void **state)
{
    (void)state;
    /* "\u00e9" é (2), "\ud83d\ude00" 😀 (4), "\ud800" U+FFFD (3), "\n" (1):
     * "é😀x\ufffd\n" is 2 + 4 + 1 + 3 + 1 = 11 bytes. */
#define ODD_TEXT "\\u00e9\\ud83d\\ude00x\\ud800\\n"
    static const struct {
        const char *supports, *want;
    } cases[] = {
        {"[" SUPPORT(2, "[0]") "]", " [1]"},  /* after é */
        {"[" SUPPORT(1, "[0]") "]", ""},      /* inside é */
        {"[" SUPPORT(4, "[0]") "]", ""},      /* inside 😀 */
        {"[" SUPPORT(6, "[0]") "]", " [1]"},  /* after 😀 */
        {"[" SUPPORT(8, "[0]") "]", ""},      /* inside U+FFFD */
        {"[" SUPPORT(11, "[0]") "]", " [1]"}, /* the end */
        {"[" SUPPORT(12, "[0]") "]", ""},     /* past it */
        {"[" SUPPORT(0, "[0]") "]", " [1]"},  /* the start */
        {"[{\"segment\": {\"text\": \"\"},\"groundingChunkIndices\": [0]}]", " [1]"}, /* 0 */
        {"[{\"segment\": {\"endIndex\": -1},\"groundingChunkIndices\": [0]}]", ""},
        {"[" SUPPORT(2.5, "[0]") "]", ""}, /* not a byte offset */
        {"[{\"segment\": {\"endIndex\": \"2\"},\"groundingChunkIndices\": [0]}]", ""},
        {"[" SUPPORT(2, "[1, -1, 0.5, \"0\", 9]") "]", ""}, /* no such chunks */
        {"[" SUPPORT(2, "{}") "]", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char in[2048], want[256];
        snprintf(in, sizeof(in),
                 "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"" ODD_TEXT
                 "\"}]},\"finishReason\": \"STOP\",\"groundingMetadata\": {\"groundingChunks\": "
                 "[" WEB("a", "a.example") "],\"groundingSupports\": %s}}]}\r\n\r\n",
                 cases[i].supports);
        snprintf(want, sizeof(want), "\xc3\xa9\xf0\x9f\x98\x80x\xef\xbf\xbd\n%s", cases[i].want);
        content_is("off", in, want);
    }
}

/* A text longer than the first bitmap words, in characters of 3 bytes:
 * offsets far into it are still checked. */
static void test_long_text_offsets(void **state)
{
    (void)state;
    cg_buf_t in = {0};
    size_t bytes = 0;
    for (int e = 0; e < 400; e++) {
        cg_buf_puts(&in, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"");
        for (int k = 0; k < 30; k++)
            cg_buf_puts(&in, "\xe2\x82\xac"); /* € */
        bytes += 90;
        cg_buf_puts(&in, "\"}]}}]}\r\n\r\n");
    }
    /* The supports: inside a €, after one, at the end of the text. */
    cg_buf_puts(&in,
                "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}]},"
                "\"finishReason\": \"STOP\",\"groundingMetadata\": {\"groundingChunks\": "
                "[" WEB("a", "a") "," WEB("b", "b") "," WEB("c", "c") "],"
                                                                      "\"groundingSupports\": [");
    size_t ends[3] = {bytes - 31, bytes - 30, bytes};
    for (int k = 0; k < 3; k++)
        cg_buf_printf(&in, "%s{\"segment\": {\"endIndex\": %zu},\"groundingChunkIndices\": [%d]}",
                      k ? "," : "", ends[k], k);
    cg_buf_puts(&in, "]}}]}\r\n\r\n");
    cg_buf_t out = {0};
    run_n("off", NULL, in.p, in.len, &out, NULL);
    char *c = content_of(&out);
    assert_int_equal(strlen(c), bytes + strlen(" [1][2]"));
    assert_string_equal(c + bytes, " [1][2]"); /* bytes - 31 is inside a € */
    free(c);
    cg_buf_free(&out);
    cg_buf_free(&in);
}

/* The last non-empty groundingMetadata counts: {} never replaces one, a
 * later non-empty one does; references come at the end, whenever the
 * grounding came. */
static void test_grounding_replaced(void **state)
{
    (void)state;
    content_is(
        "off",
        EV("[{\"text\": \"a\"}]", ",\"groundingMetadata\": {\"groundingChunks\": [" WEB(
                                      "x", "x") "],\"groundingSupports\": [" SUPPORT(1, "[0]") "]}")
            TEXT("b")
                EV("[{\"text\": \"c\"}]", ",\"finishReason\": \"STOP\",\"groundingMetadata\": {}"),
        "abc [1]");
    cg_buf_t out = {0};
    run("openwebui", NULL,
        EV("[{\"text\": \"a\"}]", ",\"groundingMetadata\": {\"groundingChunks\": [" WEB(
                                      "x", "x") "],\"groundingSupports\": [" SUPPORT(1, "[0]") "]}")
            LAST("b", "[" WEB("y", "y.example") "]",
                 "[" SUPPORT(2, "[0]") "]") "data: {\"usageMetadata\": {\"promptTokenCount\": "
                                            "1,\"totalTokenCount\": 3}}"
                                            "\r\n\r\n",
        &out, NULL);
    assert_true(has(&out, "[1] y.example"));
    assert_false(has(&out, "grounding-api-redirect/x"));
    cg_buf_free(&out);
}

/* Sources: web and retrievedContext (snippet = text; without a uri the key
 * is customMetadata's source_url, else the title); anything else is none. */
static void test_source_kinds(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", NULL,
        LAST("Text.",
             "[{\"retrievedContext\": {\"title\": \"manual.pdf\",\"text\": \"Charge it.\","
             "\"customMetadata\": [{\"key\": \"year\",\"numericValue\": 2025},{\"key\": "
             "\"source_url\",\"stringValue\": \"kb://manual\"}]}},"
             "{\"retrievedContext\": {\"uri\": \"gs://bucket/terms.pdf\",\"text\": \"Terms.\"}},"
             "{\"maps\": {\"uri\": \"https://maps.google.com/?cid=1\",\"title\": \"Place\"}},"
             "{\"retrievedContext\": {\"title\": \"notes\",\"text\": \"N.\"}}]",
             "[" SUPPORT(5, "[0, 1, 2, 3]") "]"),
        &out, NULL);
    assert_true(has(&out, "\"source\":\"1:kb://manual\""));
    assert_true(has(&out, "\"document\":[\"Charge it.\"]"));
    assert_true(has(&out, "\"name\":\"[2] terms.pdf\""));
    assert_true(has(&out, "\"source\":\"2:gs://bucket/terms.pdf\""));
    assert_true(has(&out, "\"source\":\"3:notes\""));
    assert_false(has(&out, "Place"));
    char *c = content_of(&out);
    assert_string_equal(c, "Text. [1][2][3]");
    free(c);
    cg_buf_free(&out);
}

/* Request-side <source> ids come first: Gemini's sources take the numbers
 * after them, and a model-written [3] is that source. */
static void test_numbers_after_request_sources(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    run("openwebui", RAG_REQUEST,
        TEXT("Three [3]. ") LAST("Web.", "[" WEB("w", "w.example") "]", "[" SUPPORT(15, "[0]") "]"),
        &out, NULL);
    char *c = content_of(&out);
    assert_string_equal(c,
                        "Three [[3]](https://kb.example.com/three). Web. "
                        "[[4]](https://vertexaisearch.cloud.google.com/grounding-api-redirect/w)");
    free(c);
    cg_buf_free(&out);
}

/* citationMetadata marks recitation: no source, no reference. */
static void test_recitation_is_no_source(void **state)
{
    (void)state;
    content_is("openwebui",
               EV("[{\"text\": \"Quoted [1].\"}]",
                  ",\"finishReason\": \"STOP\",\"citationMetadata\": {\"citationSources\": "
                  "[{\"startIndex\": 0,\"endIndex\": 6,\"uri\": \"https://q.example\"}]}"),
               "Quoted [1].");
}

/* --- errors --------------------------------------------------------------------- */

static void error_is(const char *in, const char *content, const char *error)
{
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", NULL, in, &out, &st);
    char *c = content_of(&out);
    assert_string_equal(c, content);
    free(c);
    assert_true(st.truncated);
    assert_false(has(&out, "[DONE]"));
    char want[512];
    snprintf(want, sizeof(want), "data: {\"error\":%s}\n\n", error);
    size_t n = strlen(want);
    if (out.len < n || memcmp(out.p + out.len - n, want, n) != 0) {
        print_error("ends with:\n%s\nwant:\n%s", out.len > 300 ? out.p + out.len - 300 : out.p,
                    want);
        fail();
    }
    cg_buf_free(&out);
}

#define OVERLOADED                                                                                 \
    "{\"message\":\"The model is "                                                                 \
    "overloaded.\",\"type\":\"upstream_error\",\"code\":\"UNAVAILABLE\"}"

static void test_error_objects(void **state)
{
    (void)state;
    /* As an event's data. */
    error_is(TEXT("a") "data: {\"error\": {\"code\": 503,\"message\": \"The model is "
                       "overloaded.\",\"status\": \"UNAVAILABLE\"}}\r\n\r\n" TEXT("never"),
             "a", OVERLOADED);
    /* On lines of its own, pretty-printed, no blank line after it. */
    error_is(TEXT("a") "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is "
                       "overloaded.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n",
             "a", OVERLOADED);
    /* ... with CRLF and a blank line after it, then more that is not read. */
    error_is(
        TEXT("a") "{\r\n  \"error\": {\r\n    \"code\": 503,\r\n    \"message\": \"The model "
                  "is overloaded.\",\r\n    \"status\": \"UNAVAILABLE\"\r\n  }\r\n}\r\n\r\n" TEXT(
                      "never") TEXT_FINISH("never"),
        "a", OVERLOADED);
    /* On one line, with no line end at all, right after the event. */
    error_is(TEXT("a") "{\"error\":{\"code\":503,\"message\":\"The model is overloaded.\","
                       "\"status\":\"UNAVAILABLE\"}}",
             "a", OVERLOADED);
    /* Without status: the code as a string; without message: ours. */
    error_is(TEXT("a") "{\"error\": {\"code\": 429}}\n", "a",
             "{\"message\":\"the upstream reported an error\",\"type\":\"upstream_error\","
             "\"code\":\"429\"}");
    error_is(TEXT("a") "{\"error\": {}}\n", "a",
             "{\"message\":\"the upstream reported an error\",\"type\":\"upstream_error\","
             "\"code\":\"upstream_error\"}");
    /* Before anything else: the error alone. */
    cg_buf_t out = {0};
    run("openwebui", NULL, "{\"error\": {\"code\": 400,\"status\": \"INVALID_ARGUMENT\"}}", &out,
        NULL);
    assert_string_equal(out.p, "data: {\"error\":{\"message\":\"the upstream reported an error\","
                               "\"type\":\"upstream_error\",\"code\":\"INVALID_ARGUMENT\"}}\n\n");
    cg_buf_free(&out);
}

/* After the finishReason event: the references and the finish go out
 * first, then the error; no [DONE]. */
static void test_error_after_finish(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("off", NULL,
        LAST("Done.", "[" WEB("a", "a") "]",
             "[" SUPPORT(5, "[0]") "]") "{\"error\": {\"code\": 500,\"message\": \"Internal "
                                        "error.\",\"status\": \"INTERNAL\"}}\n",
        &out, &st);
    assert_string_equal(
        out.p, ROLE CONTENT("Done.") CONTENT(" [1]")
                   FINISH("stop") "data: {\"error\":{\"message\":\"Internal error.\",\"type\":"
                                  "\"upstream_error\",\"code\":\"INTERNAL\"}}\n\n");
    assert_true(st.truncated);
    cg_buf_free(&out);
}

/* Lines that never make an error object, data that is not JSON: counted,
 * left out, and the stream goes on; a comment is a ping. */
static void test_noise(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    cg_xform_stats_t st;
    run("openwebui", NULL,
        ": keep-alive\r\n\r\n" TEXT("a") "{\"note\": 1}\r\n\r\n"
                                         "data: not json\r\n\r\n"
                                         "  \"dangling\": true\r\n\r\n" TEXT(
                                             "b") "event: x\r\nid: 4\r\n\r\n" TEXT_FINISH("c"),
        &out, &st);
    char *c = content_of(&out);
    assert_string_equal(c, "abc");
    free(c);
    assert_true(has(&out, ": ping\n\n"));
    assert_true(st.saw_finish);
    assert_int_equal(st.malformed, 3); /* the object, the data, the dangling line */
    cg_buf_free(&out);
}

/* --- bodies -------------------------------------------------------------------- */

static int body(const char *profile, const char *in, cg_buf_t *out)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("gemini"), NULL, 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    int rc = dialect_body(&cfg, &c, in, strlen(in), out);
    dialect_case_free(&c);
    return rc;
}

/* References go in at each support's endIndex (one offset: supports in
 * their order, a number not repeated), thoughts are left out. */
static void test_body(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    assert_int_equal(
        body(
            "off",
            "{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"think [9]\",\"thought\": "
            "true},{\"text\": \"Caf\\u00e9 \"},{\"text\": \"ok.\"}],\"role\": \"model\"},"
            "\"finishReason\": \"MAX_TOKENS\",\"groundingMetadata\": {\"groundingChunks\": [" WEB("a", "a") "," WEB("b", "b") "],\"groundingSupports\": [" SUPPORT(
                5,
                "[1]") "," SUPPORT(9,
                                   "[0]") "," SUPPORT(5,
                                                      "[0, 1]") "," SUPPORT(4,
                                                                            "[0]") "]}}],"
                                                                                   "\"usageMetadata"
                                                                                   "\": "
                                                                                   "{\"promptTokenC"
                                                                                   "ount\": "
                                                                                   "3,"
                                                                                   "\"totalTokenCou"
                                                                                   "nt\": 10},"
                                                                                   "\"modelVersion"
                                                                                   "\": "
                                                                                   "\"gemini-2.5-"
                                                                                   "flash\","
                                                                                   "\"responseId\":"
                                                                                   " \"r-1\"}",
            &out),
        0);
    assert_string_equal(out.p, "{\"id\":\"r-1\",\"object\":\"chat.completion\",\"created\":"
                               "1700000000,\"model\":\"gemini-2.5-flash\",\"choices\":[{\"index\""
                               ":0,\"message\":{\"role\":\"assistant\",\"content\":\"Caf\xc3\xa9"
                               "[1][2] ok.[2]\"},\"finish_reason\":\"length\"}],\"usage\":{"
                               "\"prompt_tokens\":3,\"completion_tokens\":7,\"total_tokens\":10}}");
    cg_buf_free(&out);
}

static void test_body_ends(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    /* A blocked prompt. */
    assert_int_equal(
        body("openwebui",
             "{\"promptFeedback\": {\"blockReason\": \"OTHER\"},\"responseId\": \"b\"}", &out),
        0);
    assert_true(has(&out, "\"content\":\"\"},\"finish_reason\":\"content_filter\""));
    cg_buf_free(&out);
    /* An error: SPEC §6's error, as the body. */
    assert_int_equal(body("off",
                          "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"Busy.\",\n"
                          "    \"status\": \"UNAVAILABLE\"\n  }\n}\n",
                          &out),
                     0);
    assert_string_equal(out.p, "{\"error\":{\"message\":\"Busy.\",\"type\":\"upstream_error\","
                               "\"code\":\"UNAVAILABLE\"}}");
    cg_buf_free(&out);
    /* Not JSON: goes through unchanged. */
    assert_int_equal(body("openwebui", "[{\"candidates\": []}]x", &out), -1);
    assert_string_equal(out.p, "[{\"candidates\": []}]x");
    cg_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_thoughts_hidden),
        cmocka_unit_test(test_finish_reasons),
        cmocka_unit_test(test_blocked_prompt),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_steady_path),
        cmocka_unit_test(test_grounding_stream),
        cmocka_unit_test(test_byte_offsets),
        cmocka_unit_test(test_long_text_offsets),
        cmocka_unit_test(test_grounding_replaced),
        cmocka_unit_test(test_source_kinds),
        cmocka_unit_test(test_numbers_after_request_sources),
        cmocka_unit_test(test_recitation_is_no_source),
        cmocka_unit_test(test_error_objects),
        cmocka_unit_test(test_error_after_finish),
        cmocka_unit_test(test_noise),
        cmocka_unit_test(test_body),
        cmocka_unit_test(test_body_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
