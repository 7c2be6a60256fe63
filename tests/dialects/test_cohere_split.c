/*
 * SPEC §6a, fidelity under every split (dialect_split.h): each cohere
 * stream fixture, cut at every byte (inside events, JSON escapes, UTF-8
 * sequences, the offsets of a citation) and in random patterns of many
 * reads, gives the client the same bytes as in one read, so the same
 * content, the same references at the same places, the same citation
 * events and the same end, in every profile.
 */
#include "dialect_split.h"

static const dialect_fixture_t fixtures[] = {
    {"answers/cohere_documents_fast.sse", "rag_sources.request.json"},
    {"answers/cohere_documents_accurate.sse", "rag_sources.request.json"},
    {"answers/cohere_tool_fast.sse", NULL},
    {"answers/cohere_tool_accurate.sse", "answers/cohere_usage.request.json"},
    {"answers/cohere_cited_twice_fast.sse", NULL},
    {"answers/cohere_bad_spans.sse", NULL},
    {"answers/cohere_error.sse", "rag_sources.request.json"},
    {"answers/cohere_max_tokens.sse", "answers/cohere_usage.request.json"},
    {"answers/cohere_thinking.sse", "rag_sources.request.json"},
    {"answers/cohere_truncated.sse", "rag_sources.request.json"},
};

static const char *const profiles[] = {"openwebui", "openai",     "webchat",
                                       "markdown",  "structured", "off"};

static dialect_suite_t suite = DIALECT_SUITE("cohere", fixtures, profiles, 0x9E3779B97F4A7C15ull);

static void test_split_content_is_the_answer(void **state)
{
    (void)state;
    dialect_one_byte_reads("cohere", "answers/cohere_tool_fast.sse", NULL, "markdown",
                           "It is 24\xc2\xb0"
                           "C in Madrid[1](https://weather.example/madrid) and "
                           "28\xc2\xb0"
                           "C in Bras\xc3\xadlia.[2]\n\n**Sources**\n"
                           "1. [Weather in Madrid](https://weather.example/madrid)\n2. Unknown "
                           "Document",
                           true);
    dialect_one_byte_reads("cohere", "answers/cohere_truncated.sse", NULL, "off", "Half an ans[1]",
                           false);
}

int main(void)
{
    return dialect_split_main(&suite, test_split_content_is_the_answer);
}
