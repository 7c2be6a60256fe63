/*
 * libFuzzer target for the anthropic answer view (src/dialects/anthropic.c)
 * behind the whole transformer, as `citegate filter --dialect anthropic`
 * runs it. Input, variants and checks: fuzz_sse_dialect.h.
 */
#include "fuzz_sse_dialect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_sse_dialect_input("anthropic", data, size);
}
