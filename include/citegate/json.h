/*
 * JSON view over jsmn tokens, and a small escaping writer.
 *
 * The view never copies: tokens are offsets into the caller's text, valid as
 * long as that text is. Keys are matched on their raw (escaped) bytes, which
 * is exact for the plain ASCII member names of the APIs we read.
 */
#ifndef CITEGATE_JSON_H
#define CITEGATE_JSON_H

#include "citegate/common.h"

#include <string.h>

#ifndef JSMN_PARENT_LINKS
#define JSMN_PARENT_LINKS
#endif
#ifndef JSMN_STRICT
#define JSMN_STRICT
#endif
#ifndef JSMN_HEADER
#define JSMN_HEADER
#endif
#include <jsmn.h>

/* Tokens a parser starts with; it doubles them on demand up to its max. */
#define CG_JSON_FIRST_TOKENS 64

enum {
    CG_JSON_OK = 0,
    CG_JSON_E_INVALID = -1, /* not one complete JSON value */
    CG_JSON_E_TOOBIG = -2,  /* more tokens than max_tokens */
    CG_JSON_E_DEEP = -3,    /* nested deeper than CG_JSON_MAX_DEPTH */
};

/*
 * Deepest nesting of arrays and objects a parse accepts. jsmn finds the
 * container a closing bracket ends by walking up from the last token it
 * made, so each bracket costs up to the depth, and an input nested D deep
 * costs about its length times D / 4 steps: 80 KB of brackets held the
 * loop for seconds. Chat requests and answers nest a dozen levels; at 64,
 * the worst 8 MiB body (brackets 64 deep throughout) parses in about 8
 * times a flat one's time. Inputs up to CG_JSON_SHALLOW_BYTES are not
 * scanned for it: their worst case is a few thousand steps more than a
 * flat parse.
 */
#define CG_JSON_MAX_DEPTH     64
#define CG_JSON_SHALLOW_BYTES 1024

/* How many bytes of p[0..n) open an object or array (`{` or `[`, in
 * strings too): the text nests no deeper than that. */
size_t cg_json_opens(const char *p, size_t n);

typedef struct cg_json {
    const char *js;
    size_t len;
    jsmntok_t *tok;
    int ntok;
    unsigned cap; /* allocated tokens; grows on demand up to max */
    unsigned max;
} cg_json_t;

/*
 * Token memory that parsers take turns with. An event's tokens are needed
 * only while that event is handled, so one store per worker serves all of
 * its streams, and a stream keeps no tokens between calls: borrow before
 * parsing, give back when the event is done. A parser that borrows while
 * the store is lent starts from nothing, and the larger array is kept.
 */
typedef struct cg_json_store {
    jsmntok_t *tok;
    unsigned cap;
} cg_json_store_t;

/* Tokens a store keeps between events; a larger event's peak is given up. */
#define CG_JSON_STORE_KEEP 4096

void cg_json_init(cg_json_t *j, unsigned max_tokens);
void cg_json_free(cg_json_t *j);
/* j must hold no tokens of its own (cg_json_init, or given back). */
void cg_json_borrow(cg_json_t *j, cg_json_store_t *s);
/* j's tokens, grown or not, go back to s; j is empty after. */
void cg_json_give_back(cg_json_t *j, cg_json_store_t *s);
void cg_json_store_free(cg_json_store_t *s);

/* Parses exactly one JSON object or array (surrounding whitespace allowed);
 * a bare scalar is CG_JSON_E_INVALID, as no caller has a use for one. */
int cg_json_parse(cg_json_t *j, const char *js, size_t len);

/* Index of the first token after the subtree rooted at i. */
int cg_json_skip(const cg_json_t *j, int i);
/* Value of member `key` of object i (first occurrence), or -1. */
int cg_json_get(const cg_json_t *j, int obj, const char *key);
static inline int cg_json_type(const cg_json_t *j, int i)
{
    return (i >= 0 && i < j->ntok) ? (int)j->tok[i].type : JSMN_UNDEFINED;
}
bool cg_json_is_str(const cg_json_t *j, int i);
bool cg_json_is_null(const cg_json_t *j, int i);
/* Raw text of a token: for strings, the escaped bytes between the quotes. */
cg_span_t cg_json_raw(const cg_json_t *j, int i);
/* Start and end offsets of a token including a string's quotes. */
size_t cg_json_begin(const cg_json_t *j, int i);
size_t cg_json_end(const cg_json_t *j, int i);
/* Numeric value of a primitive or numeric string; false if not a number. */
bool cg_json_number(const cg_json_t *j, int i, double *out);
/* Decoded string value (NUL-terminated, caller frees), or NULL for non-strings. */
char *cg_json_strdup(const cg_json_t *j, int i, size_t *len);
/* Decoded string value if a non-empty string, else NULL. */
char *cg_json_strdup_nonempty(const cg_json_t *j, int i);

/* Decodes JSON string escapes of s[0..n) into out (room for n bytes); returns the length. */
size_t cg_json_unescape(const char *s, size_t n, char *out);
/* A cut point at most max bytes into JSON string bytes p[0..n) that splits
 * neither an escape, nor the two escapes of a surrogate pair, nor a UTF-8
 * sequence (p must start at a clean point);
 * when no such point lies within max, the end of the first character. */
size_t cg_json_safe_cut(const char *p, size_t n, size_t max);
/* Length of the run at p[0..n) before the first byte that stops a JSON
 * string scan: '"', '\\' or a control byte (below 0x20, NUL included),
 * which JSON allows in a string only escaped. Eight bytes at a time,
 * inline: the strings it serves (deltas, keys) are too short for memchr
 * or a call to pay. Relies on little-endian loads, as the targets are. */
static inline size_t cg_json_plain_len(const char *p, size_t n)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        uint64_t q = v ^ (ones * '"'), bs = v ^ (ones * '\\');
        /* a byte below 0x20 of v, or a zero byte of q or bs, sets its high
         * bit; only bytes above a true one can be set falsely (a borrow),
         * so the lowest set bit is exact */
        uint64_t m = (((v - ones * 0x20) & ~v) | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & highs;
        if (m)
            return i + ((size_t)__builtin_ctzll(m) >> 3);
    }
    while (i < n && p[i] != '"' && p[i] != '\\' && (unsigned char)p[i] >= 0x20)
        i++;
    return i;
}
/* Appends s[0..n) escaped for a JSON string, without quotes. */
void cg_json_put_escaped(cg_buf_t *b, const char *s, size_t n);
/* Appends "s" with quotes. */
void cg_json_put_str(cg_buf_t *b, const char *s, size_t n);
void cg_json_put_cstr(cg_buf_t *b, const char *s);
/* Appends a number in its shortest usual form (at most 15 significant digits). */
void cg_json_put_double(cg_buf_t *b, double v);

#endif
