/*
 * libFuzzer target for the cohere answer view (src/dialects/cohere.c)
 * behind the whole transformer, as `citegate filter --dialect cohere` runs
 * it: Cohere v2 Chat streams (citation-start offsets in characters, a
 * `citations` object of any shape, sources of any shape) and bodies (their
 * citations inserted at character offsets). Input, variants and checks:
 * fuzz_sse_dialect.h.
 */
#include "fuzz_sse_dialect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_sse_dialect_input("cohere", data, size);
}
