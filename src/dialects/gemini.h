/*
 * What dialect `vertex` (vertex.c) shares with dialect `gemini` (gemini.c):
 * the same request, path and answer, other key header fields.
 */
#ifndef CG_DIALECTS_GEMINI_H
#define CG_DIALECTS_GEMINI_H

#include "chatreq.h"

int cg__gemini_request(cg_chatreq_t *c, cg_dialect_err_t *err);
void cg__gemini_path(const cg_dialect_req_t *r, cg_buf_t *out);
extern const cg_dialect_view_t cg__gemini_view;

/* Adds x-goog-api-key: the client's own x-goog-api-key, trimmed, when it
 * sent a non-empty one, else `otherwise` (a key cg_dialect_api_key found
 * by the dialect's rule; {NULL, 0}: none, and no field is added). */
void cg__gemini_send_key(const cg_dialect_hdrs_t *h, cg_span_t otherwise);

#endif
