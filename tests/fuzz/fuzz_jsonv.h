/*
 * An independent check that a token array from cg_json_parse() describes
 * valid JSON: the fuzzers' oracle for "CG_JSON_OK means one complete JSON
 * value" (json.h), which the walkers in the core rely on (an object's
 * children are keys with one value each, cg_json_skip pairs them).
 *
 * It checks the structure and the text between tokens (exactly one ',' or
 * ':' where the grammar needs one, white space elsewhere) and the grammar
 * of literals and numbers, and that no string holds a raw control byte
 * (jsmn passes them; JSON allows them only escaped).
 */
#ifndef CG_FUZZ_JSONV_H
#define CG_FUZZ_JSONV_H

#include "citegate/json.h"

#include <string.h>

static inline bool fz_json_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* js[from..to) is white space around exactly nsep copies of sep. */
static inline bool fz_json_gap(const char *js, size_t from, size_t to, char sep, int nsep)
{
    if (from > to)
        return false;
    int seen = 0;
    for (size_t i = from; i < to; i++) {
        if (sep && js[i] == sep)
            seen++;
        else if (!fz_json_ws(js[i]))
            return false;
    }
    return seen == nsep;
}

static inline size_t fz_json_digits(const char *s, size_t n, size_t i)
{
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    return i;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static inline bool fz_json_number(const char *s, size_t n)
{
    size_t i = (n > 0 && s[0] == '-') ? 1 : 0;
    size_t d = fz_json_digits(s, n, i);
    if (d == i || (s[i] == '0' && d - i > 1))
        return false;
    i = d;
    if (i < n && s[i] == '.') {
        d = fz_json_digits(s, n, i + 1);
        if (d == i + 1)
            return false;
        i = d;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        d = fz_json_digits(s, n, i);
        if (d == i)
            return false;
        i = d;
    }
    return i == n;
}

static inline bool fz_json_literal(cg_span_t v)
{
    return cg_span_eq(v, "true") || cg_span_eq(v, "false") || cg_span_eq(v, "null") ||
           fz_json_number(v.p, v.n);
}

/* Where the text of token i's subtree ends (a key's includes its value). */
static inline size_t fz_json_tree_end(const cg_json_t *j, int i)
{
    if (j->tok[i].type == JSMN_STRING && j->tok[i].size == 1 && i + 1 < j->ntok)
        return cg_json_end(j, i + 1);
    return cg_json_end(j, i);
}

/* The children of container i, and the text between them. */
static inline const char *fz_json_container(const cg_json_t *j, int i)
{
    const char *js = j->js;
    bool obj = j->tok[i].type == JSMN_OBJECT;
    size_t at = cg_json_begin(j, i) + 1;
    int c = i + 1;
    for (int k = 0; k < j->tok[i].size; k++) {
        if (c >= j->ntok || j->tok[c].parent != i)
            return "container size does not match its children";
        if (obj && !(j->tok[c].type == JSMN_STRING && j->tok[c].size == 1))
            return "object member without exactly one value";
        if (!fz_json_gap(js, at, cg_json_begin(j, c), ',', k > 0))
            return "missing or extra separator between values";
        at = fz_json_tree_end(j, c);
        c = cg_json_skip(j, c);
    }
    if (!fz_json_gap(js, at, cg_json_end(j, i) - 1, 0, 0))
        return "stray text before a closing bracket";
    return NULL;
}

/* NULL if the tokens describe valid JSON, else what is wrong. */
static inline const char *fz_json_invalid(const cg_json_t *j)
{
    if (j->ntok < 1 || !fz_json_gap(j->js, 0, cg_json_begin(j, 0), 0, 0))
        return "text before the value";
    for (int i = 0; i < j->ntok; i++) {
        const jsmntok_t *t = &j->tok[i];
        int ptype = t->parent >= 0 ? (int)j->tok[t->parent].type : JSMN_UNDEFINED;
        switch (t->type) {
        case JSMN_OBJECT:
        case JSMN_ARRAY: {
            const char *why = fz_json_container(j, i);
            if (why)
                return why;
            break;
        }
        case JSMN_STRING:
            if (ptype != JSMN_OBJECT && t->size != 0)
                return "key outside an object";
            if (ptype == JSMN_OBJECT &&
                !fz_json_gap(j->js, cg_json_end(j, i), cg_json_begin(j, i + 1), ':', 1))
                return "missing ':' after a key";
            for (int k = t->start; k < t->end; k++)
                if ((unsigned char)j->js[k] < 0x20)
                    return "raw control byte in a string";
            break;
        case JSMN_PRIMITIVE:
            if (t->size != 0)
                return "primitive used as a key";
            if (!fz_json_literal(cg_json_raw(j, i)))
                return "primitive is neither a literal nor a number";
            break;
        default:
            return "token of undefined type";
        }
    }
    return NULL;
}

#endif
