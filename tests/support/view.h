/*
 * Test support: the client's view of a response (what the fixtures'
 * expected files record), and JSON value equality.
 *
 * The SSE reading here is deliberately independent of src/sse.c: a plain
 * whole-buffer line splitter, so a tokenizer bug cannot hide itself.
 */
#ifndef CG_TEST_VIEW_H
#define CG_TEST_VIEW_H

#include "citegate/common.h"
#include "citegate/xform.h"

#define VIEW_CHOICES 8

typedef struct view {
    cg_buf_t content[VIEW_CHOICES]; /* concatenated content per choice index */
    bool has_content[VIEW_CHOICES];
    cg_buf_t sources;               /* JSON array of emitted SOURCE objects */
    cg_buf_t extras;                /* raw delta.annotations, top-level entities and citations
                                       (one per line; NUL-terminated, not counted) */
    bool ends_done, ends_error;
    size_t max_line;                /* longest line in the response */
    size_t events;                  /* dispatched events (non-empty data) */
} view_t;

void view_free(view_t *v);
/* Fills v from an SSE response. */
void view_of_stream(view_t *v, const char *s, size_t n);
/* Fills v from a non-streaming JSON body; returns -1 if it is not JSON. */
int view_of_body(view_t *v, const char *s, size_t n);
/* Compares v with an expected file's text; on mismatch returns false
 * and writes a description into why. */
bool view_matches(const view_t *v, const char *expected, size_t n, char *why, size_t whylen);
bool view_equal(const view_t *a, const view_t *b, char *why, size_t whylen);

/* JSON value equality: objects compare as unordered maps, numbers by value,
 * strings after decoding. */
bool json_equal(const char *a, size_t an, const char *b, size_t bn);

/* Reads a whole file (NUL-terminated, aborts on error). */
char *read_file(const char *path, size_t *len);

/* Runs a response through a transformer in the given read sizes (cycled);
 * sizes == NULL means one read. Returns the client body. */
void run_stream(const cg_xform_cfg_t *cfg, const cg_request_t *req, const char *in, size_t n,
                const size_t *sizes, size_t nsizes, cg_buf_t *outbuf);
/* The same, with the last read and the end in one call
 * (cg_xform_feed_finish). */
void run_stream_joined(const cg_xform_cfg_t *cfg, const cg_request_t *req, const char *in, size_t n,
                       const size_t *sizes, size_t nsizes, cg_buf_t *outbuf);

#endif
