/* Transformer internals shared by xform.c and the profile emitters. */
#ifndef CITEGATE_XFORM_INT_H
#define CITEGATE_XFORM_INT_H

#include "citegate/json.h"
#include "citegate/sse.h"
#include "citegate/xform.h"

#include <sys/types.h>

#define CG_XFORM_TEMPLATE_MAX 4096

typedef struct cg_choice {
    cg_ref_t ref;
    bool finished;
} cg_choice_t;

/* A distinct reference: (form << 16 | N) and how often it was seen. */
typedef struct cg_refrec {
    uint32_t code;
    uint32_t count;
} cg_refrec_t;

struct cg_xform {
    cg_xform_cfg_t cfg;
    const cg_request_t *req;
    cg_sse_t sse;
    cg_json_t json;
    cg_cites_t cites;
    bool cites_set;
    cg_ref_style_t style; /* CG_REF_ANY until the citations' kind is known */

    cg_choice_t *choices;
    size_t nchoices;
    cg_refrec_t *refs; /* first-reference order */
    size_t nrefs, refs_cap;

    cg_buf_t meta_id, meta_created, meta_model; /* raw JSON text */
    cg_buf_t scratch;                           /* multi-line data, LF -> space */
    cg_buf_t tpl;       /* bytes around the content string of the last plain chunk */
    size_t tpl_prefix;  /* tpl[0..tpl_prefix) precedes the content string */
    size_t tpl_choice;
    bool tpl_valid;
    cg_xform_stats_t stats;
    bool ended;     /* citation events and the end of stream went out */
    bool body_mode; /* a non-streaming body */

    /* Per call / per event. */
    cg_out_t *out;
    void (*put)(cg_xform_t *x, const char *p, size_t n); /* data bytes out */
    size_t cur;                 /* next data byte to copy */
    size_t cut_start, cut_end;  /* data bytes of the removed "event" member */
    bool changed;               /* this event's data must be rewritten */
    bool ev_stable;             /* the event lies in the caller's input */
    bool data_stable;           /* data is a span of the event (one data line) */
    bool content_stable;        /* content bytes may be passed by reference */
    bool last_raw;              /* the previous event went out unchanged */
};

void cg__out_span(cg_out_t *o, const char *p, size_t n);
void cg__out_copy(cg_out_t *o, const char *p, size_t n);
void cg__out_str(cg_out_t *o, const char *s);
void cg__out_arena_since(cg_out_t *o, size_t from);
void cg__xform_put_meta(const cg_xform_t *x, cg_buf_t *b);

/* Calls fn for every referenced citation, in first-reference order. */
typedef void (*cg__cited_fn)(cg_xform_t *x, const cg_citation_t *c, void *arg);
size_t cg__xform_each_cited(cg_xform_t *x, cg__cited_fn fn, void *arg);

/* Profile openwebui: source events at the end of a stream (returns whether
 * any went out), and the top-level "sources" member of a body. */
bool cg__openwebui_stream_end(cg_xform_t *x);
void cg__openwebui_body_end(cg_xform_t *x, bool comma);
void cg__openwebui_put_source(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c);

#endif
