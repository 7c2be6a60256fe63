/*
 * Dialect `vertex` (SPEC §6a): Gemini on Vertex AI. The request, its path
 * under the base ({base} = /v1/projects/P/locations/L/publishers/google)
 * and the answer are gemini's (gemini.c); only the keys differ. Vertex
 * takes an OAuth access token: the client's Authorization goes upstream as
 * it came. In express mode it takes an API key instead: the client's
 * x-goog-api-key, else its api-key, goes as x-goog-api-key.
 */
#include "gemini.h"

/* api-key goes as x-goog-api-key, citegate's, once. */
static bool forwards(cg_span_t name)
{
    return !cg__req_field_is(name, "api-key") && !cg__req_field_is(name, "x-goog-api-key");
}

static void headers(const cg_dialect_hdrs_t *h)
{
    cg__gemini_send_key(h, cg_dialect_api_key(h->get(h->ctx, "api-key"), cg_span(NULL, 0)));
}

const cg_dialect_t cg__dialect_vertex = {
    .name = "vertex",
    .request = cg__gemini_request,
    .path = cg__gemini_path,
    .forwards = forwards,
    .headers = headers,
    .view = &cg__gemini_view,
};
