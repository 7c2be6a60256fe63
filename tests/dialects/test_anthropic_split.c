/*
 * SPEC §6a, fidelity under every split (dialect_split.h): each anthropic
 * stream fixture, cut at every byte (inside events, line ends and UTF-8
 * sequences) and in random patterns of many reads, gives the client the
 * same bytes as in one read, so the same content per choice, the same
 * citation events and the same end, in every profile.
 */
#include "dialect_split.h"

static const dialect_fixture_t fixtures[] = {
    {"answers/anthropic_text.sse", NULL},
    {"answers/anthropic_usage.sse", "answers/anthropic_usage.request.json"},
    {"answers/anthropic_documents.sse", "rag_sources.request.json"},
    {"answers/anthropic_multi_block.sse", NULL},
    {"answers/anthropic_pages.sse", NULL},
    {"answers/anthropic_search_results.sse", NULL},
    {"answers/anthropic_web_search.sse", "answers/anthropic_usage.request.json"},
    {"answers/anthropic_thinking.sse", NULL},
    {"answers/anthropic_max_tokens.sse", NULL},
    {"answers/anthropic_error.sse", "rag_sources.request.json"},
    {"answers/anthropic_truncated.sse", "rag_sources.request.json"},
};

static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured", "off"};

static dialect_suite_t suite =
    DIALECT_SUITE("anthropic", fixtures, profiles, 0x2545F4914F6CDD1Dull);

static void test_split_content_is_the_answer(void **state)
{
    (void)state;
    dialect_one_byte_reads(
        "anthropic", "answers/anthropic_documents.sse", "rag_sources.request.json", "openwebui",
        "To brew a café crème, heat 60 ml of milk"
        "[[3]](https://kb.example.com/wiki/Caf%C3%A9_Guide), then pull the "
        "espresso. For the X200 itself, the battery sits under four T5 screws[7].",
        true);
}

int main(void)
{
    return dialect_split_main(&suite, test_split_content_is_the_answer);
}
