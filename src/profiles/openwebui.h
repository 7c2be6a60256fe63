/* What profile openai takes over from openwebui (both are in src/profiles). */
#ifndef CITEGATE_PROFILES_OPENWEBUI_H
#define CITEGATE_PROFILES_OPENWEBUI_H

#include "core/xform_int.h"

/* Writes the link `[` + text + `](LINK)` for a reference to c; returns the
 * bytes written (in the output's arena, valid until it grows), or an empty
 * span when c has no link and nothing went out. */
cg_span_t cg__openwebui_link(cg_xform_t *x, const cg_citation_t *c, cg_span_t text);

/* The SOURCE object of c, its snippet cut to max_doc bytes (at a UTF-8
 * boundary; SIZE_MAX for all of it). */
void cg__openwebui_put_source(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c,
                              size_t max_doc);

#endif
