/* Test support: JSON value equality over jsmn tokens. */
#include "view.h"

#include "citegate/json.h"

#include <stdlib.h>
#include <string.h>

static bool tok_equal(const cg_json_t *a, int i, const cg_json_t *b, int k);

static bool str_equal(const cg_json_t *a, int i, const cg_json_t *b, int k)
{
    size_t la, lb;
    char *sa = cg_json_strdup(a, i, &la), *sb = cg_json_strdup(b, k, &lb);
    bool eq = la == lb && memcmp(sa, sb, la) == 0;
    free(sa);
    free(sb);
    return eq;
}

static bool prim_equal(const cg_json_t *a, int i, const cg_json_t *b, int k)
{
    double x, y;
    if (cg_json_number(a, i, &x) && cg_json_number(b, k, &y))
        return x == y;
    cg_span_t ra = cg_json_raw(a, i), rb = cg_json_raw(b, k);
    return ra.n == rb.n && memcmp(ra.p, rb.p, ra.n) == 0;
}

static int find_key(const cg_json_t *b, int obj, const cg_json_t *a, int key)
{
    int n = b->tok[obj].size;
    for (int m = 0, i = obj + 1; m < n; m++, i = cg_json_skip(b, i + 1)) {
        if (str_equal(a, key, b, i))
            return i + 1;
    }
    return -1;
}

static bool obj_equal(const cg_json_t *a, int i, const cg_json_t *b, int k)
{
    if (a->tok[i].size != b->tok[k].size)
        return false;
    int n = a->tok[i].size;
    for (int m = 0, key = i + 1; m < n; m++, key = cg_json_skip(a, key + 1)) {
        int val = find_key(b, k, a, key);
        if (val < 0 || !tok_equal(a, key + 1, b, val))
            return false;
    }
    return true;
}

static bool arr_equal(const cg_json_t *a, int i, const cg_json_t *b, int k)
{
    if (a->tok[i].size != b->tok[k].size)
        return false;
    int n = a->tok[i].size;
    for (int m = 0, x = i + 1, y = k + 1; m < n; m++) {
        if (!tok_equal(a, x, b, y))
            return false;
        x = cg_json_skip(a, x);
        y = cg_json_skip(b, y);
    }
    return true;
}

static bool tok_equal(const cg_json_t *a, int i, const cg_json_t *b, int k)
{
    int ta = cg_json_type(a, i);
    if (ta != cg_json_type(b, k))
        return false;
    switch (ta) {
    case JSMN_OBJECT: return obj_equal(a, i, b, k);
    case JSMN_ARRAY: return arr_equal(a, i, b, k);
    case JSMN_STRING: return str_equal(a, i, b, k);
    default: return prim_equal(a, i, b, k);
    }
}

bool json_equal(const char *a, size_t an, const char *b, size_t bn)
{
    cg_json_t ja, jb;
    cg_json_init(&ja, 1u << 20);
    cg_json_init(&jb, 1u << 20);
    bool eq = cg_json_parse(&ja, a, an) == CG_JSON_OK && cg_json_parse(&jb, b, bn) == CG_JSON_OK &&
              tok_equal(&ja, 0, &jb, 0);
    cg_json_free(&ja);
    cg_json_free(&jb);
    return eq;
}
