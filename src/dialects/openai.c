/*
 * Dialect `openai` (SPEC §5-7): an OpenAI-compatible chat-completions
 * upstream, the default. The client already speaks it: its path, headers
 * and body go as they came (AZURE_AI_DATA_SOURCES aside, which the shell
 * adds), and the transformer reads the answer itself.
 */
#include "citegate/dialect.h"

const cg_dialect_t cg__dialect_openai = {
    .name = "openai",
};
