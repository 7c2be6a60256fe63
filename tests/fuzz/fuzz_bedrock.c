/*
 * libFuzzer target for the bedrock answer view (src/dialects/bedrock.c)
 * behind the whole transformer and its event-stream reader, as `citegate
 * filter --dialect bedrock` runs it.
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream answer
 * (AWS's event stream, or a Converse JSON body for the body path).
 * Byte 1 picks the variant: bits 0-6 the request, the profile and the
 * caps (fuzz_dialect.h), and
 *   bit 7:    mend both CRCs of every message a length walk finds, so that
 *             mutations reach the headers and JSON payloads behind them
 *
 * Checks, for any input:
 *   - the answer in reads cut by the header's seed and in one read gives
 *     the client the same bytes;
 *   - the output is bounded by the input (a constant factor and a constant);
 *   - every client event is a JSON object or [DONE], a valid one unless a
 *     payload has a raw control byte (which jsmn lets into a string); no line
 *     is longer than 64 KiB;
 *   - the stream ends with exactly one [DONE] or the error event, last; a
 *     framing error always ends it with an error event;
 *   - cg_xform_body on the same bytes: refused and copied unchanged, or a
 *     chat completion whose first choice has a message content string.
 */
#include "fuzz_evs_view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_evs_view_one(data, size, "bedrock", 3);
}
