/*
 * Citation tracking of one finished answer (SPEC §8), read from the
 * transformer's own per-stream reference table: no second pass over the
 * content. Pure: no I/O.
 */
#ifndef CITEGATE_TRACK_H
#define CITEGATE_TRACK_H

#include "citegate/common.h"
#include "citegate/xform.h"

typedef struct cg_track {
    bool tracked;          /* false: the profile does not look for references */
    bool skipped;          /* the answer starts with "I do not know" */
    unsigned available;    /* V: citations available to the answer */
    unsigned cited;        /* C: distinct citations referenced */
    uint64_t references;   /* R: references that name a citation, repeats included */
    double rate;           /* C / V, 0 when V = 0 */
    double avg_score;      /* mean score of the cited citations that have one, or -1 */
    cg_buf_t cited_ids;    /* JSON array of the cited labels, first-appearance order */
    cg_buf_t detail;       /* JSON array: per available citation, label, was_cited, density */
} cg_track_t;

/* Analyses the answer a transformer has seen. Call after the end of the
 * stream (or the body); t is overwritten, free it with cg_track_free. */
void cg_track_answer(const cg_xform_t *x, cg_track_t *t);
void cg_track_free(cg_track_t *t);

#endif
