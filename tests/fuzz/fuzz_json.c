/*
 * libFuzzer target for the JSON view and writer (include/citegate/json.h).
 *
 * The whole input is the JSON text. When it parses, the tokens must describe
 * valid JSON (fuzz_jsonv.h), and every token is walked with the view's
 * accessors and checked against the text: bounds, nesting, subtree
 * skipping, member lookup, string decoding. Every string also makes
 * an unescape -> escape -> unescape round trip, which must be the identity
 * on the decoded bytes. A parse with a small token cap must agree with the
 * unbounded one. Finally cg_json_unescape runs on the raw input: its
 * contract (output room of n bytes) holds for any bytes, not just JSON.
 */
#include "citegate/json.h"

#include "fuzz_common.h"
#include "fuzz_jsonv.h"

#include <math.h>

#define SMALL_MAX 8

/* Decodes s[0..n) into an exact n-byte heap buffer (ASan checks the room). */
static char *unescape_exact(const char *s, size_t n, size_t *outn)
{
    char *out = malloc(n ? n : 1);
    FZ_CHECK(out != NULL);
    *outn = cg_json_unescape(s, n, out);
    FZ_CHECK(*outn <= n);
    return out;
}

/* s[0..n) may stand between quotes: no control byte, no bare quote, and
 * every backslash starts a complete escape. */
static void check_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        FZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != '"');
        if (s[i] != '\\')
            continue;
        FZ_CHECK(i + 1 < n && s[i + 1] && strchr("\"\\/bfnrtu", s[i + 1]) != NULL);
        if (s[++i] == 'u') {
            FZ_CHECK(i + 4 < n);
            for (int k = 1; k <= 4; k++)
                FZ_CHECK(s[i + k] && strchr("0123456789abcdefABCDEF", s[i + k]) != NULL);
            i += 4;
        }
    }
}

/* unescape(escape(u)) == u for decoded bytes u of any content. */
static void check_round_trip(const char *u, size_t n)
{
    cg_buf_t esc = {0};
    cg_json_put_escaped(&esc, u, n);
    check_escaped(esc.p, esc.len);
    size_t n2;
    char *u2 = unescape_exact(esc.p, esc.len, &n2);
    FZ_CHECK(n2 == n && memcmp(u2, u, n) == 0);
    free(u2);
    cg_buf_free(&esc);
}

static void check_string(const cg_json_t *j, int i)
{
    cg_span_t raw = cg_json_raw(j, i);
    size_t n;
    char *s = cg_json_strdup(j, i, &n);
    FZ_CHECK(s != NULL && s[n] == '\0');
    size_t un;
    char *u = unescape_exact(raw.p, raw.n, &un);
    FZ_CHECK(un == n && memcmp(u, s, n) == 0);
    check_round_trip(u, un);
    free(u);
    free(s);
    char *ne = cg_json_strdup_nonempty(j, i);
    FZ_CHECK((ne == NULL) == (n == 0));
    free(ne);
}

/* Token i lies in the text, inside its parent, with the right delimiters. */
static void check_bounds(const cg_json_t *j, int i)
{
    const jsmntok_t *t = &j->tok[i];
    FZ_CHECK(t->start >= 0 && t->start <= t->end && (size_t)t->end <= j->len);
    size_t b = cg_json_begin(j, i), e = cg_json_end(j, i);
    FZ_CHECK(b <= e && e <= j->len);
    cg_span_t raw = cg_json_raw(j, i);
    FZ_CHECK(raw.p >= j->js && raw.p + raw.n <= j->js + j->len);
    switch (t->type) {
    case JSMN_STRING:
        FZ_CHECK(t->start >= 1 && (size_t)t->end < j->len);
        FZ_CHECK(j->js[b] == '"' && j->js[e - 1] == '"');
        break;
    case JSMN_OBJECT:
        FZ_CHECK(e > b && j->js[b] == '{' && j->js[e - 1] == '}');
        break;
    case JSMN_ARRAY:
        FZ_CHECK(e > b && j->js[b] == '[' && j->js[e - 1] == ']');
        break;
    case JSMN_PRIMITIVE:
        FZ_CHECK(e > b);
        break;
    default:
        FZ_CHECK(!"token of undefined type");
    }
    int parent = t->parent;
    FZ_CHECK(i == 0 ? parent == -1 : (parent >= 0 && parent < i));
    if (parent >= 0 && j->tok[parent].type == JSMN_STRING) {
        FZ_CHECK(cg_json_end(j, parent) <= b); /* a member's value follows its key */
        FZ_CHECK(cg_json_skip(j, parent) == cg_json_skip(j, i));
    } else if (parent >= 0) {
        FZ_CHECK(cg_json_begin(j, parent) <= b && e <= cg_json_end(j, parent));
        FZ_CHECK(cg_json_skip(j, parent) >= cg_json_skip(j, i));
    }
}

/* Children of i are consecutive subtrees; the last one ends where i does. */
static void check_children(const cg_json_t *j, int i)
{
    int end = cg_json_skip(j, i);
    FZ_CHECK(end > i && end <= j->ntok);
    int c = i + 1;
    for (int k = 0; k < j->tok[i].size; k++) {
        FZ_CHECK(c < end && j->tok[c].parent == i);
        c = cg_json_skip(j, c);
    }
    FZ_CHECK(c == end);
}

/* Every string key is found by cg_json_get, at its first occurrence. */
static void check_members(const cg_json_t *j, int obj)
{
    int c = obj + 1;
    for (int k = 0; k < j->tok[obj].size; k++, c = cg_json_skip(j, c)) {
        if (j->tok[c].type != JSMN_STRING || j->tok[c].size != 1)
            continue;
        cg_span_t key = cg_json_raw(j, c);
        char *ks = cg_xstrndup(key.p, key.n);
        int v = cg_json_get(j, obj, ks);
        FZ_CHECK(v > obj && v - 1 <= c && v < j->ntok);
        FZ_CHECK(j->tok[v - 1].parent == obj);
        cg_span_t found = cg_json_raw(j, v - 1);
        FZ_CHECK(found.n == key.n && memcmp(found.p, key.p, key.n) == 0);
        free(ks);
    }
}

static void check_token(const cg_json_t *j, int i)
{
    check_bounds(j, i);
    check_children(j, i);
    int type = cg_json_type(j, i);
    if (type == JSMN_OBJECT)
        check_members(j, i);
    if (type == JSMN_STRING)
        check_string(j, i);
    FZ_CHECK(cg_json_is_str(j, i) == (type == JSMN_STRING));
    double v;
    if (cg_json_number(j, i, &v))
        FZ_CHECK(isfinite(v));
    (void)cg_json_is_null(j, i);
}

static void walk(const cg_json_t *j)
{
    FZ_CHECK(j->ntok >= 1);
    FZ_CHECK(cg_json_skip(j, 0) == j->ntok);
    /* CG_JSON_OK promises valid JSON; every walker in the core relies on it. */
    const char *why = fz_json_invalid(j);
    if (why)
        fprintf(stderr, "cg_json_parse accepted invalid JSON: %s\n", why);
    FZ_CHECK(why == NULL);
    for (int i = 0; i < j->ntok; i++)
        check_token(j, i);
    /* Out-of-range indices are "no such token", not a crash. */
    FZ_CHECK(cg_json_type(j, -1) == JSMN_UNDEFINED && cg_json_type(j, j->ntok) == JSMN_UNDEFINED);
    FZ_CHECK(cg_json_get(j, -1, "a") == -1);
}

/* A parse capped at SMALL_MAX tokens agrees with the unbounded one, also
 * when its tokens are borrowed from a store that a larger parse grew. */
static void check_small(const char *js, size_t len, int rc, int ntok)
{
    cg_json_t s;
    cg_json_init(&s, SMALL_MAX);
    int src = cg_json_parse(&s, js, len);
    if (rc == CG_JSON_OK && ntok <= SMALL_MAX)
        FZ_CHECK(src == CG_JSON_OK && s.ntok == ntok);
    else if (rc == CG_JSON_OK)
        FZ_CHECK(src == CG_JSON_E_TOOBIG);
    else
        FZ_CHECK(src != CG_JSON_OK);
    cg_json_free(&s);
    static cg_json_store_t store; /* kept across inputs, as a worker keeps its own */
    cg_json_borrow(&s, &store);
    int again = cg_json_parse(&s, js, len);
    FZ_CHECK(again == src && (src != CG_JSON_OK || s.ntok == ntok));
    cg_json_give_back(&s, &store);
    FZ_CHECK(s.tok == NULL && s.ntok == 0 && store.cap <= CG_JSON_STORE_KEEP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *js = fz_dup(data, size);
    cg_json_t j;
    cg_json_init(&j, 1u << 16);
    int rc = cg_json_parse(&j, js, size);
    FZ_CHECK(rc == CG_JSON_OK || rc == CG_JSON_E_INVALID || rc == CG_JSON_E_TOOBIG ||
             rc == CG_JSON_E_DEEP);
    if (rc == CG_JSON_OK)
        walk(&j);
    check_small(js, size, rc, rc == CG_JSON_OK ? j.ntok : 0);
    cg_json_free(&j);

    size_t un;
    free(unescape_exact(js, size, &un));
    free(js);
    return 0;
}
