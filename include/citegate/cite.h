/*
 * Citation model: the sources a stream's references point at, read from
 * Azure "On Your Data" context, Perplexity-style top-level lists, or the
 * client's own <source> tags, normalised to one shape (SPEC §5, §7).
 *
 * Memory: every string is decoded and kept in the table's string store:
 * blocks that never move, so a field stays valid, where it is, for the
 * table's life. Snippets are cut to max_doc_bytes and other fields to
 * CG_CITE_MAX_FIELD bytes (a link, its URL escaped, to six times that). A
 * snippet that grows in pieces grows in place when it can, else moves to
 * room for twice its length, so its moves leave at most twice
 * max_doc_bytes behind. At most CG_CITE_MAX citations are kept, so the
 * strings take at most
 * H = CG_CITE_MAX * (3 * max_doc_bytes + 12 * CG_CITE_MAX_FIELD) bytes.
 * A block is the largest of 1 KiB, twice the last block and the string it
 * is made for (a dialect's first citation makes one of 4 KiB; a copy's one
 * block fits its strings), and is left only for a string longer than its
 * rest, so the blocks are at most
 * 4 * (H + 2 * max_doc_bytes + 6 * CG_CITE_MAX_FIELD) + 8 KiB, made in
 * O(log H) allocations.
 */
#ifndef CITEGATE_CITE_H
#define CITEGATE_CITE_H

#include "citegate/common.h"
#include "citegate/json.h"

#define CG_CITE_MAX       1000 /* citations kept per stream */
#define CG_CITE_MAX_FIELD 4096 /* bytes kept of a title, URL, file path or chunk id */
#define CG_REF_MAX_N      9999 /* references carry 1 to 4 digits */

typedef enum cg_cites_kind {
    CG_CITES_NONE = 0,
    CG_CITES_AZURE,   /* choices[i].delta.context.citations */
    CG_CITES_WEB,     /* top-level citations / search_results */
    CG_CITES_REQUEST, /* <source id="N"> tags of the client's request */
    CG_CITES_DIALECT, /* named by the upstream as it answers: chat annotations,
                         Anthropic citations, Responses annotations (SPEC §6, §6a) */
} cg_cites_kind_t;

typedef struct cg_citation {
    unsigned id;    /* the N references use: position (1-based) or <source> id */
    char *title;    /* after the fallback rule, never NULL */
    char *content;  /* snippet, cut to max_doc_bytes at a UTF-8 boundary */
    char *url;      /* absolute http(s) URL, or NULL */
    char *link;     /* url percent-encoded for Markdown and escaped for JSON, or NULL */
    char *key;      /* metadata key: filepath, else url, else title, then #chunk_id */
    char *filepath; /* or NULL */
    char *chunk_id; /* or NULL */
    char *page;     /* a page number, digits only (Open WebUI metadata `page`), or NULL */
    double score;   /* in [0,1] when has_score */
    bool has_score;
    size_t content_cap; /* the table's: store bytes content may fill, NUL included
                           (0: its length and the NUL) */
} cg_citation_t;

struct cg_cite_block; /* of the string store (cite.c) */

/* A table; all zero is an empty one. Fields are carved from the store and
 * freed with it, never one by one. */
typedef struct cg_cites {
    cg_citation_t *v;
    size_t n, cap;
    cg_cites_kind_t kind;
    struct cg_cite_block *block; /* the store's newest block; each links the one before */
} cg_cites_t;

typedef struct cg_cite_opts {
    size_t max_doc_bytes;
    bool scores; /* AZURE_AI_INCLUDE_SEARCH_SCORES */
} cg_cite_opts_t;

void cg_cites_free(cg_cites_t *c);
/* Deep copy into an empty dst, its strings in one block of dst's own store
 * (request-side sources are parsed once and adopted per stream). */
void cg_cites_copy(cg_cites_t *dst, const cg_cites_t *src);

/* Reads an Azure context object (with citations and all_retrieved_documents).
 * Returns the number of citations read; 0 leaves the table empty. */
size_t cg_cites_from_azure(cg_cites_t *c, const cg_json_t *j, int context,
                           const cg_cite_opts_t *o);
/* Reads top-level `citations` (URLs) and `search_results` of a chunk or body. */
size_t cg_cites_from_web(cg_cites_t *c, const cg_json_t *j, int root, const cg_cite_opts_t *o);
/* Adds one request-side source; the first one of an id wins. */
void cg_cites_add_source(cg_cites_t *c, unsigned id, const char *name, size_t name_len,
                         const char *text, size_t text_len, const cg_cite_opts_t *o);

/* A citation as an upstream dialect names it: decoded strings, any of
 * them empty. The title falls back as SPEC §7 says; url counts when it is
 * absolute; key, when not empty, replaces the metadata key (SPEC §7 KEY);
 * chunk_id goes after the key as Azure's does; page is a page number's
 * digits. */
typedef struct cg_cite_in {
    unsigned id; /* the N its references use */
    cg_span_t title, url, content, key;
    cg_span_t chunk_id, page;
} cg_cite_in_t;

/* Adds a citation numbered in->id unless one of that id is there. A table
 * of request-side sources keeps its kind; an empty one becomes
 * CG_CITES_DIALECT. Returns the citation, or NULL when the table is full. */
const cg_citation_t *cg_cites_add(cg_cites_t *c, const cg_cite_in_t *in, const cg_cite_opts_t *o);
/* Appends more to the snippet of citation `id`, cut to o->max_doc_bytes
 * at a UTF-8 boundary as a snippet is; nothing when there is no such
 * citation. For an upstream that sends a citation's text in pieces. */
void cg_cites_append_content(cg_cites_t *c, unsigned id, cg_span_t more, const cg_cite_opts_t *o);
/* The largest id in the table (0 when empty). */
unsigned cg_cites_max_id(const cg_cites_t *c);

/* The citation that reference number n points at, or NULL. */
const cg_citation_t *cg_cites_find(const cg_cites_t *c, unsigned n);

/* Helpers shared with the profiles and tests. */
bool cg_url_is_absolute(const char *s);
/* Appends s with space, parentheses and angle brackets percent-encoded. */
void cg_url_put_link(cg_buf_t *b, const char *s);

#endif
