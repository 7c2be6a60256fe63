/*
 * Test support for a view's steady path (events read without a parse,
 * src/dialects/view.h): what the parse reads of a payload, to hold the
 * steady path to it; every cut of a payload it takes; random edits of
 * payloads. bedrock's and bedrock-kb's tests use them alike. Include
 * cmocka.h first.
 */
#ifndef CG_TEST_STEADY_H
#define CG_TEST_STEADY_H

#include "citegate/xform.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A steady path that reads a text: whether it takes payload p[0..n), and
 * the text's JSON string bytes when it does. */
typedef bool (*steady_text_fn)(const char *p, size_t n, cg_span_t *text);

/* What the parse reads from payload p[0..n): the JSON string bytes of
 * member `name` of the object's member `outer` (NULL: of the object), when
 * p is a JSON object and that member a string. */
static inline bool steady_parsed_text(const char *p, size_t n, const char *outer,
                                      const char *name, cg_span_t *text)
{
    cg_json_t j;
    cg_json_init(&j, CG_XFORM_MAX_TOKENS);
    bool ok = cg_json_parse(&j, p, n) == CG_JSON_OK && cg_json_type(&j, 0) == JSMN_OBJECT;
    int t = -1;
    if (ok)
        t = cg_json_get(&j, outer ? cg_json_get(&j, 0, outer) : 0, name);
    ok = cg_json_is_str(&j, t);
    if (ok)
        *text = cg_json_raw(&j, t);
    cg_json_free(&j);
    return ok;
}

/* Whatever fast takes, the parse takes, with the very same bytes (as
 * steady_parsed_text reads them); returns whether fast took p[0..n). */
static inline bool steady_same_text(steady_text_fn fast, const char *outer, const char *name,
                                    const char *p, size_t n)
{
    cg_span_t got = {0}, want = {0};
    if (!fast(p, n, &got))
        return false;
    assert_true(steady_parsed_text(p, n, outer, name, &want));
    assert_ptr_equal(got.p, want.p);
    assert_int_equal(got.n, want.n);
    return true;
}

/* A check of one payload; true when the steady path took it. */
typedef bool (*steady_check_fn)(const char *p, size_t n);

/* check takes no proper prefix of whole[0..n): each is in a heap block of
 * exactly its size, so that a read past it is ASan's to see. */
static inline void steady_refuses_every_cut(const char *whole, size_t n, steady_check_fn check)
{
    for (size_t k = 0; k < n; k++) {
        char *cut = malloc(k ? k : 1);
        memcpy(cut, whole, k);
        assert_false(check(cut, k));
        free(cut);
    }
}

static inline uint64_t steady_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Edits buf[0..*n) one to three times, drawn from *rng: a byte of alphabet
 * put in (while under cap bytes), a byte taken out or changed. */
static inline void steady_edit(char *buf, size_t *n, size_t cap, const char *alphabet,
                               uint64_t *rng)
{
    size_t na = strlen(alphabet);
    for (unsigned edits = 1 + (unsigned)(steady_rng(rng) % 3); edits > 0; edits--) {
        size_t at = (size_t)(steady_rng(rng) % (*n + 1));
        char c = alphabet[steady_rng(rng) % na];
        switch (steady_rng(rng) % 3) {
        case 0: /* put in */
            if (*n + 1 < cap) {
                memmove(buf + at + 1, buf + at, *n - at);
                buf[at] = c;
                (*n)++;
            }
            break;
        case 1: /* take out */
            if (at < *n) {
                memmove(buf + at, buf + at + 1, *n - at - 1);
                (*n)--;
            }
            break;
        default: /* change */
            if (at < *n)
                buf[at] = c;
        }
    }
}

/* seed (under cap bytes), edited by steady_edit, in a heap block of
 * exactly its length *len (at least one byte): free it. */
static inline char *steady_edited(const char *seed, size_t cap, const char *alphabet,
                                  uint64_t *rng, size_t *len)
{
    char *buf = malloc(cap);
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    steady_edit(buf, &n, cap, alphabet, rng);
    char *p = malloc(n ? n : 1);
    memcpy(p, buf, n);
    free(buf);
    *len = n;
    return p;
}

#endif
