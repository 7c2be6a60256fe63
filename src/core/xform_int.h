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
    bool after_ref;   /* webchat: the last content bytes were a renumbered reference */
    char last;        /* the last content byte written */
    uint64_t u16;     /* openai: UTF-16 code units of content written so far */
    uint8_t *used;    /* webchat: bitmap of the positions this choice cites */
    cg_buf_t text;    /* structured: the decoded content of a held stream */
    cg_buf_t fixed;   /* structured: the corrected content, when there is one */
    bool fix_set, fix_sent;
    bool emptied;     /* this event's content already went out in chunks of our own */
    char head[16];    /* the first content bytes (tracking skips "I do not know") */
    uint8_t headlen;
} cg_choice_t;

/* A distinct reference: (form << 16 | N), how often it was seen, and its
 * webchat position (0: none yet). */
typedef struct cg_refrec {
    uint32_t code;
    uint32_t count;
    uint32_t pos;
} cg_refrec_t;

/* openai: one rewritten reference, in UTF-16 offsets of its choice's content. */
typedef struct cg_annot {
    const cg_citation_t *cite;
    size_t choice;
    uint64_t start, end;
} cg_annot_t;

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
    cg_annot_t *annots; /* openai */
    size_t nannots, annots_cap;
    const cg_citation_t **bypos; /* webchat: citation of position i + 1 */
    size_t npos, bypos_cap;
    cg_buf_t hold; /* structured: the held stream */
    size_t max_link; /* longest citation link, once citations are known */
    bool max_link_known;
    /* Splitting a huge content into chunks of our own (SPEC §6 Fidelity 5). */
    bool splitting, split_open;
    size_t split_index, split_from;

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
    cg_choice_t *cur_ch;        /* the choice whose content is being written */
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

/* Calls fn for every referenced citation, in first-reference order;
 * returns how many. */
typedef void (*cg__cited_fn)(cg_xform_t *x, const cg_citation_t *c, void *arg);
size_t cg__xform_each_cited(cg_xform_t *x, cg__cited_fn fn, void *arg);

/* Profile openwebui: source events at the end of a stream (returns whether
 * any went out), and the top-level "sources" member of a body. */
bool cg__openwebui_stream_end(cg_xform_t *x);
void cg__openwebui_body_end(cg_xform_t *x, bool comma);
void cg__openwebui_put_source(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c);
/* The same with the snippet cut to max_doc bytes (at a UTF-8 boundary). */
void cg__openwebui_put_source_cut(const cg_xform_t *x, cg_buf_t *b, const cg_citation_t *c,
                                  size_t max_doc);

/* Profile openai: the annotations chunk; a body's message annotations and
 * top-level "citations". */
bool cg__openai_stream_end(cg_xform_t *x);
void cg__openai_body_message(cg_xform_t *x, int msg, size_t choice);
void cg__openai_body_end(cg_xform_t *x, bool comma);

/* Profile webchat: a choice's Markdown definitions (JSON-escaped, for inside
 * a content string), the definitions and entity chunks, a body's entities. */
void cg__webchat_put_defs(const cg_xform_t *x, const cg_choice_t *ch, cg_buf_t *b);
bool cg__webchat_stream_end(cg_xform_t *x);
void cg__webchat_body_end(cg_xform_t *x, bool comma);

/* Profile structured: the corrected {response, citations} object of one
 * answer's content; false when the content does not have that shape. */
bool cg__structured_fix(const cg_request_t *req, const char *content, size_t n, cg_buf_t *out,
                        unsigned *removed);

/* Copies the current data up to offset `to` (minus a removed member). */
void cg__xform_put_until(cg_xform_t *x, size_t to);

/* A cut point at most max bytes into JSON string bytes p[0..n) that splits
 * neither an escape nor a UTF-8 sequence (p must start at a clean point). */
size_t cg__json_safe_cut(const char *p, size_t n, size_t max);

/* A content-only chunk of our own: its opening up to the content string,
 * then (after the escaped content) its closing. */
void cg__xform_content_open(const cg_xform_t *x, cg_buf_t *b, size_t index);
extern const char cg__xform_content_close[];

/* Writes the opening of one of our chunks: `data: {"id":…,"model":…` */
void cg__xform_chunk_open(const cg_xform_t *x, cg_buf_t *b);

#endif
