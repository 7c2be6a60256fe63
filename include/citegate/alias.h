/*
 * Citation aliases (SPEC §7, profile `structured`).
 *
 * A document-extraction tool returns JSON whose strings include long data
 * lake paths and Document Intelligence bounding-box strings, and the model
 * is asked to cite [PATH, BOXES] pairs copied from it. Copying a 90-byte
 * path or a 60-number box string costs tokens and is where invalid
 * citations come from, so the request goes upstream with each such string
 * replaced by a short alias (P1, B1, ...) and the answer's citations are
 * read with the aliases expanded back.
 *
 * The table lives for one exchange: made from the client's request before
 * it is translated, read by the profile when the answer is checked.
 * Memory is bounded by the request body (each distinct string once, plus
 * one record per occurrence and per tool message it appears in).
 */
#ifndef CITEGATE_ALIAS_H
#define CITEGATE_ALIAS_H

#include "citegate/common.h"
#include "citegate/request.h"

typedef struct cg_aliases cg_aliases_t;

/* BOX: one or more D(PAGE,X1,Y1,...,X4,Y4) joined by ';' (PAGE a whole
 * number, the others decimal numbers, optionally signed, spaces allowed
 * after commas). */
bool cg_alias_is_box(const char *s, size_t n);
/* PATH: at least 16 bytes, no whitespace or control byte, starting with
 * '/' or with a URI scheme and "://". */
bool cg_alias_is_path(const char *s, size_t n);

/* Aliases request r, read from body[0..len). When anything is aliased,
 * returns the table and appends the body to send upstream to out (only
 * the contents of tool messages differ). Returns NULL, with out untouched,
 * when nothing is: no JSON tool output holds a PATH or a BOX, or one
 * already holds a string equal to an alias that would be made. */
cg_aliases_t *cg_aliases_make(const cg_request_t *r, const char *body, size_t len,
                              cg_buf_t *out);
void cg_aliases_free(cg_aliases_t *a);

/* Distinct strings aliased, and the bytes the request lost: for each
 * replaced string, its JSON-escaped length minus its alias's. */
size_t cg_aliases_count(const cg_aliases_t *a);
uint64_t cg_aliases_saved(const cg_aliases_t *a);
/* Where byte `off` of the client's body, outside every tool message's
 * content, is in the body sent upstream. */
size_t cg_aliases_moved(const cg_aliases_t *a, size_t off);

/* When s[0..n) is an alias this request made: its index (>= 0), and the
 * string it stands for in *orig (decoded, valid as long as a). Else -1. */
int cg_aliases_find(const cg_aliases_t *a, const char *s, size_t n, cg_span_t *orig);
/* Whether alias `id` replaced a string of tool message `tool` (the index
 * of r->tools). */
bool cg_aliases_in_tool(const cg_aliases_t *a, int id, size_t tool);

#endif
