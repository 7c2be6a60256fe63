/*
 * libFuzzer target for the bedrock-kb answer view
 * (src/dialects/bedrock_kb.c) behind the whole transformer and its
 * event-stream reader, as `citegate filter --dialect bedrock-kb` runs it:
 * Knowledge Bases' output, citation and guardrail events, and a
 * RetrieveAndGenerate body for the body path, whose references go in at
 * character offsets of the text.
 *
 * The input's two header bytes and the checks are fuzz_bedrock.c's
 * (fuzz_evs_view.h): the same client bytes split or whole, output bounded
 * by the input, valid events, exactly one end, last; a refused body
 * unchanged, a taken one a chat completion with a content string.
 */
#include "fuzz_evs_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_evs_view_one(data, size, "bedrock-kb", 0);
}
