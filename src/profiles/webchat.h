/* What profile markdown takes over from webchat (both are in src/profiles):
 * dense positions in first-reference order, a choice's set of them, and
 * Markdown appended to a choice's content at the end of a stream. */
#ifndef CITEGATE_PROFILES_WEBCHAT_H
#define CITEGATE_PROFILES_WEBCHAT_H

#include "core/xform_int.h"

/* Citations numbered 1, 2, … in the order their first rewritten reference
 * went out. It keeps indexes into the stream's citation table, not
 * pointers: a dialect view adds citations while the stream runs, and the
 * table moves when it grows. Bounded: two 2-byte entries per citation of
 * the table (at most CG_CITE_MAX). */
typedef struct cg_positions {
    uint16_t *cite; /* citation index of position p, at cite[p - 1] */
    uint16_t *pos;  /* position of citation index k, 0: none yet */
    size_t n, cap;
} cg_positions_t;

void cg__webchat_positions_free(cg_positions_t *t);
/* The position of citation c (of x->cites); the next free one the first
 * time c is asked for. */
size_t cg__webchat_position(cg_positions_t *t, const cg_xform_t *x, const cg_citation_t *c);
/* The citation at position p, 1 <= p <= t->n. */
const cg_citation_t *cg__webchat_position_cite(const cg_positions_t *t, const cg_xform_t *x,
                                               size_t p);
/* Whether citation c has a position yet. */
bool cg__webchat_position_known(const cg_positions_t *t, const cg_xform_t *x,
                                const cg_citation_t *c);

/* The positions one choice cites: a bitmap of CG_CITE_MAX bits (125 bytes),
 * allocated when the first one is added; NULL while it cites none. */
void cg__webchat_use(uint8_t **set, size_t pos);
bool cg__webchat_uses(const uint8_t *set, size_t pos);

/* Appends Markdown that is already JSON-escaped to choice `index`, in
 * content chunks of our own of at most CG_XFORM_SPLIT_CHUNK bytes each, so
 * no line passes 64 KiB however long it is (SPEC §6 rule 5). */
void cg__webchat_put_content(cg_xform_t *x, size_t index, const char *esc, size_t n);

#endif
