/*
 * SPEC §6a, fidelity under every split (dialect_split.h): each gemini
 * stream fixture, cut at every byte (inside events, CRLF line ends, JSON
 * escapes, UTF-8 sequences and the error object's lines) and in random
 * patterns of many reads, gives the client the same bytes as in one read,
 * so the same content, the same references at the same places, the same
 * citation events and the same end, in every profile.
 */
#include "dialect_split.h"

static const dialect_fixture_t fixtures[] = {
    {"answers/gemini_google_search.sse", "rag_sources.request.json"},
    {"answers/gemini_file_search.sse", NULL},
    {"answers/gemini_vertex_search.sse", NULL},
    {"answers/gemini_thinking.sse", NULL},
    {"answers/gemini_recitation.sse", NULL},
    {"answers/gemini_safety.sse", NULL},
    {"answers/gemini_blocked.sse", NULL},
    {"answers/gemini_error_503.sse", NULL},
    {"answers/gemini_error_after_finish.sse", NULL},
    {"answers/gemini_error_event.sse", NULL},
    {"answers/gemini_truncated.sse", NULL},
    {"answers/gemini_usage.sse", "answers/gemini_usage.request.json"},
    {"answers/gemini_offsets.sse", NULL},
};

static const char *const profiles[] = {"openwebui", "openai",     "webchat",
                                       "markdown",  "structured", "off"};

static dialect_suite_t suite = DIALECT_SUITE("gemini", fixtures, profiles, 0x9E3779B97F4A7C15ull);

static void test_split_content_is_the_answer(void **state)
{
    (void)state;
    dialect_one_byte_reads(
        "gemini", "answers/gemini_offsets.sse", NULL, "markdown",
        "Na\xc3\xafve caf\xc3\xa9 \xf0\x9f\x98\x80 \xc2\xabquote\xc2\xbb <b>bold</b> "
        "\xe2\x80\x94 the end. "
        "[1](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQb)"
        "[2](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQa)"
        "[3](https://c.example/c)\n\n**Sources**\n"
        "1. [b.example](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQb)\n"
        "2. [a.example](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQa)\n"
        "3. [C](https://c.example/c)",
        true);
    dialect_one_byte_reads(
        "gemini", "answers/gemini_error_503.sse", NULL, "openwebui",
        "The first step is to open the back cover and unscrew the four T5 screws. Then ", false);
}

int main(void)
{
    return dialect_split_main(&suite, test_split_content_is_the_answer);
}
