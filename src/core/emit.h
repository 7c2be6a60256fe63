/*
 * Writing a transformer's output, for the transformer and the profiles
 * alike: output segments, chunks of our own, the current event's data, and
 * the walk over the citations the answer cites. Depends on neither the
 * transformer nor any profile, so both can use it.
 *
 * New bytes go into the output's arena and become a segment with
 * cg__emit_arena_since; a writer notes arena.len first, appends, then calls it.
 */
#ifndef CITEGATE_EMIT_H
#define CITEGATE_EMIT_H

#include "xform_int.h"

/* Appends a span of the caller's input (kept by reference). */
void cg__emit_span(cg_out_t *o, const char *p, size_t n);
/* Appends a copy of p[0..n) (or of the string s). */
void cg__emit_copy(cg_out_t *o, const char *p, size_t n);
void cg__emit_str(cg_out_t *o, const char *s);
/* Makes arena bytes [from, arena.len) the next output segment. */
void cg__emit_arena_since(cg_out_t *o, size_t from);

/* Writes the members "id", "object", "created", "model" of our chunks:
 * the upstream's (raw JSON values), else empty ones. */
void cg__emit_meta(const cg_xform_t *x, cg_buf_t *b);
/* Writes the opening of one of our chunks: `data: {"id":…,"model":…`. */
void cg__emit_chunk_open(const cg_xform_t *x, cg_buf_t *b);
/* A content-only chunk of our own: its opening up to the content string,
 * then (after the escaped content) its closing. */
void cg__emit_content_open(const cg_xform_t *x, cg_buf_t *b, size_t index);
extern const char cg__emit_content_close[];

/* Copies the current event's (or body's) data from x->cur up to offset `to`,
 * minus the removed "event" members (x->cuts). */
void cg__emit_data_until(cg_xform_t *x, size_t to);
/* Writes the data up to content string token `content`, which then goes out
 * as "" (its bytes went, or go, elsewhere). */
void cg__emit_drop_content(cg_xform_t *x, int content);

/* Calls fn (unless NULL) once for every citation the answer references
 * (mentions included), in first-reference order; returns how many. */
typedef void (*cg__cited_fn)(cg_xform_t *x, const cg_citation_t *c, void *arg);
size_t cg__emit_each_cited(cg_xform_t *x, cg__cited_fn fn, void *arg);

#endif
