/*
 * The texts the PostgreSQL store hands to the server as query parameters,
 * built without libpq so they can be tested alone: array literals that carry
 * a batch of patterns into one INSERT … SELECT FROM unnest(…), the bounds
 * that cut a batch into such statements, and the full-text query of a
 * recall. User text only ever travels as a parameter, never inside SQL, and
 * is made valid UTF-8 first (a server in UTF-8 would refuse the whole
 * statement for one bad byte).
 */
#ifndef CITEGATE_PGTEXT_H
#define CITEGATE_PGTEXT_H

#include "store.h"

/* Rows of one INSERT: a batch of at most this many patterns and about this
 * many bytes of array text, so one statement stays small for the server and
 * for the deadline it runs under. */
#define CG_PG_MAX_ROWS  1000
#define CG_PG_MAX_BYTES (4u << 20)

/* Appends s[0..n) with every invalid UTF-8 sequence replaced by U+FFFD. */
void cg_pg_put_utf8(cg_buf_t *b, const char *s, size_t n);

/* Appends s[0..n) as one double-quoted element of an array literal. */
void cg_pg_array_elem(cg_buf_t *b, const char *s, size_t n);

/* The columns of citegate_patterns that an INSERT takes from arrays. */
enum {
    CG_PG_KIND,
    CG_PG_QUERY,
    CG_PG_RATE,
    CG_PG_SCORE,
    CG_PG_CITATIONS,
    CG_PG_AVAILABLE,
    CG_PG_IDS,
    CG_PG_CREATED,
    CG_PG_VEC,   /* hex of the packed vector, or NULL */
    CG_PG_MODEL, /* the model that made it, or NULL */
    CG_PG_NCOLS
};

/* One array literal per column, each NUL-terminated (libpq's text form). */
typedef struct cg_pg_rows {
    cg_buf_t col[CG_PG_NCOLS];
} cg_pg_rows_t;

/*
 * How many of p[0..n) go into the next INSERT: at most CG_PG_MAX_ROWS, and
 * as many as fit in CG_PG_MAX_BYTES of text, but at least one (a pattern is
 * bounded by CG_MEMORY_MAX_QUERY + CG_MEMORY_MAX_CHUNK_IDS). 0 only for n = 0.
 */
size_t cg_pg_chunk(cg_pattern_t *const *p, size_t n);

/*
 * Fills rows (emptied first) with the arrays of p[0..n): kind, query (cut as
 * SQLite cuts it), citation_rate (0 when not finite), avg_score (NULL when
 * unknown), citations, available, chunk_ids (cut at an element), created_at,
 * the vector as hex of its stored form and its model (both NULL without one).
 */
void cg_pg_rows_build(cg_pg_rows_t *rows, cg_pattern_t *const *p, size_t n);
void cg_pg_rows_free(cg_pg_rows_t *rows);

/*
 * The text for websearch_to_tsquery that matches any word of q: its words
 * (cg_store_next_word, at most CG_STORE_MAX_WORDS) joined by " or ", the word
 * "or" itself left out (it is that function's operator). NUL-terminated in
 * out; returns the number of words (0: match nothing).
 */
int cg_pg_or_query(const char *q, cg_buf_t *out);

#endif
