/*
 * Reference finder: one per choice, fed the raw (JSON-escaped) bytes of that
 * choice's content as they arrive, event after event.
 *
 * It finds exactly what the leftmost, non-overlapping regex
 * \[doc([0-9]{1,4})\] (doc style), \[([0-9]{1,4})\] (numeric style) or
 * \[citation:([0-9]{1,4})\] (citation style, DeepSeek / Higress) finds in the
 * concatenated content, however the content is split; with several styles,
 * their union (no two forms can overlap: each starts with the only "[" it
 * has, and the byte after it tells them apart). It holds back only bytes
 * that may still start a reference (at most CG_REF_HELD_MAX:
 * "[citation:1234"), and hands everything else to the caller as soon as it
 * is seen.
 */
#ifndef CITEGATE_REF_H
#define CITEGATE_REF_H

#include "citegate/common.h"

/* One bit per form: a set of them is the forms a stream may still use. */
typedef enum cg_ref_style {
    CG_REF_DOC = 1,      /* [docN] */
    CG_REF_NUMERIC = 2,  /* [N] */
    CG_REF_CITATION = 4, /* [citation:N] */
    CG_REF_ANY = 7,      /* every form, while a stream's style is still open */
} cg_ref_style_t;

/* Whether a set holds more than one form (the style is not decided yet). */
static inline bool cg_ref_style_open(cg_ref_style_t s)
{
    return (s & (s - 1)) != 0;
}

/* The longest candidate held back: "[citation:1234" (the "]" completes it). */
#define CG_REF_HELD_MAX 14

typedef struct cg_ref_sink {
    /* Bytes to pass on unchanged. `stable` is true when p points into the
     * caller's input (zero copy), false when it points into the finder's own
     * held bytes, which the sink must copy before returning. */
    void (*text)(void *ctx, const char *p, size_t n, bool stable);
    /* A complete reference of `kind`, number n, written as text[0..len). */
    void (*ref)(void *ctx, cg_ref_style_t kind, unsigned n, const char *text, size_t len);
    void *ctx;
} cg_ref_sink_t;

typedef struct cg_ref {
    uint8_t styles; /* which forms to find */
    uint8_t state;
    uint8_t kind;   /* form of the candidate in progress */
    uint8_t word;   /* bytes of its word ("doc", "citation:") seen so far */
    uint8_t digits;
    uint8_t nheld;
    char held[CG_REF_HELD_MAX];
    unsigned num;
} cg_ref_t;

void cg_ref_init(cg_ref_t *r, cg_ref_style_t styles);
/* Narrows the forms to find (a stream's style became known); a candidate in
 * progress of the other form is dropped to text on the next byte. */
void cg_ref_set_styles(cg_ref_t *r, cg_ref_style_t styles);
/* Feeds content bytes; calls the sink for every byte that is no longer held. */
void cg_ref_feed(cg_ref_t *r, const char *s, size_t n, const cg_ref_sink_t *sink);
/* Releases held bytes as text (end of content). */
void cg_ref_flush(cg_ref_t *r, const cg_ref_sink_t *sink);
static inline size_t cg_ref_held(const cg_ref_t *r)
{
    return r->nheld;
}

#endif
