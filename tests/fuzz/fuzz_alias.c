/*
 * libFuzzer target for the citation aliases (include/citegate/alias.h).
 *
 * Input: byte 0 picks how the chat request body is made, the rest feeds it.
 *   bits 0-1 == 0: the rest is the whole body;
 *   otherwise the rest is cut at each 0xFF (at most 16 pieces, a byte no
 *   UTF-8 body can hold), and each piece becomes one `tool` message's
 *   content, after a system and a user message:
 *     bit 2: as text parts, the piece cut again at each 0xFE, one
 *            {"type":"text","text":...} part per cut;
 *     bit 3: a `"data_sources": null` member after the messages (its
 *            offset must move with the rewritten contents);
 *     bit 4: an assistant message before every tool message but the first;
 *     bit 5: the piece is the content value itself, raw (a parts array the
 *            fuzzer writes, or anything);
 *     bit 6: with bit 2, an image part after every text part.
 * So most inputs reach the tool contents, while the raw mode keeps every
 * request shape in reach.
 *
 * An oracle of the target's own reads every tool output that is one JSON
 * value (wrapped in brackets, always) and classifies its string values
 * (never member names) with PATH and BOX recognizers written apart from
 * alias.c, from the rules in alias.h. It predicts whether anything gets an
 * alias, how many distinct strings, and which. Then:
 *   - cg_alias_is_path / cg_alias_is_box agree with those recognizers on
 *     the input, on every piece, on every decoded tool string value, and on
 *     the input read as box pieces (each byte one of D( 1 23 . , ", " space
 *     - + ) ; D(1, ,1 tab 0, or a control byte), where near-boxes abound;
 *   - NULL exactly when no tool output holds a PATH or BOX string value, or
 *     one holds a string spelled as an alias that would be made (P1..Pn,
 *     B1..Bm), and then `out` untouched;
 *   - otherwise `out` gains a body that is valid UTF-8 and valid JSON,
 *     parses with cg_request_parse to as many tools, is byte for byte the
 *     same outside the tool contents (the gaps between r->tool_at of both
 *     parses), cg_aliases_moved maps those gaps' ends and data_sources_off;
 *     each content keeps its kind (string or parts); a parts array keeps
 *     every token but its text values, whose first carries the whole text
 *     and later ones "" (or the array is as it was); each tool output parses
 *     to the same tokens (types, sizes, parents, member names and
 *     non-string values byte for byte); a string value that is a PATH or
 *     BOX became an alias that cg_aliases_find expands to exactly its
 *     decoded value, of the right letter, cg_aliases_in_tool true for that
 *     tool, every other string value kept byte for byte (and not an alias);
 *     a tool output that is no JSON value decodes the same;
 *   - cg_aliases_count is the number of distinct PATH/BOX strings; P1..Pn
 *     and B1..Bm are all found, distinct ids, n + m == count, P(n+1) and
 *     B(m+1) are not; cg_aliases_in_tool is true exactly for the tools a
 *     string was replaced in; cg_aliases_saved is the sum over replaced
 *     strings of escaped length minus alias length.
 */
#include "citegate/alias.h"
#include "citegate/json.h"
#include "citegate/request.h"

#include "fuzz_common.h"
#include "fuzz_jsonv.h"

#include <inttypes.h>

#define MAX_PIECES 16
#define FAIL(...)                                                                             \
    do {                                                                                      \
        fprintf(stderr, "fuzz_alias: " __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                                  \
        abort();                                                                              \
    } while (0)

/* --- the rules, written apart from alias.c --------------------------------------- */

static bool o_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* BOX as a state machine over the bytes: D ( page , num x8 ) [; again]. */
static bool o_is_box(const char *s, size_t n)
{
    enum { D, OPEN, PAGE0, PAGE, AFTER_COMMA, SIGN, INT, DOT, FRAC, CLOSED } st = D;
    int nums = 0; /* numbers after the page in this region */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (st) {
        case D:
            if (c != 'D')
                return false;
            st = OPEN;
            break;
        case OPEN:
            if (c != '(')
                return false;
            st = PAGE0;
            nums = 0;
            break;
        case PAGE0:
            if (!o_digit(c))
                return false;
            st = PAGE;
            break;
        case PAGE:
        case INT:
        case FRAC:
            if (o_digit(c))
                break;
            if (c == '.' && st == INT) {
                st = DOT;
                break;
            }
            if (c == ',' && nums < 8) {
                nums++;
                st = AFTER_COMMA;
                break;
            }
            if (c == ')' && nums == 8 && st != PAGE) {
                st = CLOSED;
                break;
            }
            return false;
        case AFTER_COMMA:
            if (c == ' ')
                break;
            if (c == '+' || c == '-') {
                st = SIGN;
                break;
            }
            if (!o_digit(c))
                return false;
            st = INT;
            break;
        case SIGN:
            if (!o_digit(c))
                return false;
            st = INT;
            break;
        case DOT:
            if (!o_digit(c))
                return false;
            st = FRAC;
            break;
        case CLOSED:
            if (c != ';')
                return false;
            st = D;
            break;
        }
    }
    return st == CLOSED;
}

static bool o_alpha(unsigned char c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static bool o_is_path(const char *s, size_t n)
{
    if (n < 16)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] == 0x7f)
            return false;
    if (s[0] == '/')
        return true;
    if (!o_alpha((unsigned char)s[0]))
        return false;
    size_t i = 1;
    while (i < n && (o_alpha((unsigned char)s[i]) || o_digit((unsigned char)s[i]) ||
                     strchr("+-.", s[i]) != NULL))
        i++;
    return n - i >= 3 && s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/';
}

/* 0 PATH, 1 BOX, -1 neither, after checking alias.c agrees. */
static int o_kind(const char *s, size_t n)
{
    bool p = o_is_path(s, n), b = o_is_box(s, n);
    if (cg_alias_is_path(s, n) != p)
        FAIL("cg_alias_is_path(\"%.*s\") = %d, the rules say %d", (int)n, s, !p, p);
    if (cg_alias_is_box(s, n) != b)
        FAIL("cg_alias_is_box(\"%.*s\") = %d, the rules say %d", (int)n, s, !b, b);
    FZ_CHECK(!(p && b));
    return p ? 0 : b ? 1 : -1;
}

/* "P<k>" or "B<k>" as an alias is written (k >= 1, no leading zero): its
 * kind (0 P, 1 B) and k, else -1. k of more than 9 digits: never made. */
static int o_alias_like(const char *s, size_t n, uint64_t *k)
{
    if (n < 2 || n > 10 || (s[0] != 'P' && s[0] != 'B') || s[1] < '1' || s[1] > '9')
        return -1;
    char tmp[16];
    memcpy(tmp, s + 1, n - 1);
    tmp[n - 1] = '\0';
    char *end;
    unsigned long long v = strtoull(tmp, &end, 10);
    if (*end != '\0')
        return -1;
    *k = v;
    return s[0] == 'P' ? 0 : 1;
}

/* --- the oracle's reading of the tool outputs ----------------------------------- */

typedef struct ostr {
    char *s;
    size_t n;
    int kind;
} ostr_t;

typedef struct oracle {
    ostr_t *d; /* distinct PATH/BOX string values, in order of first sight */
    size_t nd, capd;
    size_t nkind[2];
    uint64_t least[2]; /* smallest k of an alias-spelled value, per kind */
} oracle_t;

/* Tool output text as one JSON value: parsed wrapped in brackets, an
 * array of exactly one element. */
static bool one_value(cg_json_t *j, cg_buf_t *w, cg_span_t text)
{
    w->len = 0;
    cg_buf_putc(w, '[');
    cg_buf_put(w, text.p, text.n);
    cg_buf_putc(w, ']');
    return cg_json_parse(j, w->p, w->len) == CG_JSON_OK && j->tok[0].size == 1;
}

static bool is_value_str(const cg_json_t *j, int t)
{
    if (j->tok[t].type != JSMN_STRING)
        return false;
    int p = j->tok[t].parent;
    return p >= 0 && j->tok[p].type != JSMN_OBJECT;
}

static size_t o_find(const oracle_t *o, const char *s, size_t n)
{
    for (size_t i = 0; i < o->nd; i++)
        if (o->d[i].n == n && memcmp(o->d[i].s, s, n) == 0)
            return i;
    return SIZE_MAX;
}

static void o_read(oracle_t *o, const cg_request_t *r)
{
    o->least[0] = o->least[1] = UINT64_MAX;
    cg_json_t j;
    cg_json_init(&j, 1u << 22);
    cg_buf_t w = {0};
    for (size_t t = 0; t < r->ntools; t++) {
        if (!one_value(&j, &w, r->tools[t]))
            continue;
        for (int i = 1; i < j.ntok; i++) {
            if (!is_value_str(&j, i))
                continue;
            size_t n;
            char *s = cg_json_strdup(&j, i, &n);
            int kind = o_kind(s, n);
            uint64_t k;
            int like;
            if (kind >= 0 && o_find(o, s, n) == SIZE_MAX) {
                o->d = cg_grow(o->d, o->nd, &o->capd, 16, sizeof(*o->d));
                o->d[o->nd++] = (ostr_t){s, n, kind};
                o->nkind[kind]++;
                continue;
            }
            if (kind < 0 && (like = o_alias_like(s, n, &k)) >= 0 && k < o->least[like])
                o->least[like] = k;
            free(s);
        }
    }
    cg_buf_free(&w);
    cg_json_free(&j);
}

static void o_free(oracle_t *o)
{
    for (size_t i = 0; i < o->nd; i++)
        free(o->d[i].s);
    free(o->d);
}

/* --- the body --------------------------------------------------------------------- */

static void put_piece(cg_buf_t *b, const uint8_t *p, size_t n, uint8_t flags)
{
    if (flags & 0x20) {
        cg_buf_put(b, p, n);
        return;
    }
    if (!(flags & 0x04)) {
        cg_json_put_str(b, (const char *)p, n);
        return;
    }
    cg_buf_putc(b, '[');
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != 0xFE)
            continue;
        if (start)
            cg_buf_putc(b, ',');
        cg_buf_puts(b, "{\"type\":\"text\",\"text\":");
        cg_json_put_str(b, (const char *)p + start, i - start);
        cg_buf_putc(b, '}');
        if (flags & 0x40)
            cg_buf_puts(b, ",{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://img.example/a.png\"}}");
        start = i + 1;
    }
    cg_buf_putc(b, ']');
}

static void build_body(cg_buf_t *b, const uint8_t *p, size_t n, uint8_t flags)
{
    cg_buf_puts(b, "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":"
                   "\"Cite [PATH, BOXES].\"},{\"role\":\"user\",\"content\":\"Where?\"}");
    size_t start = 0;
    int piece = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && (p[i] != 0xFF || piece == MAX_PIECES - 1))
            continue;
        if (piece > 0 && (flags & 0x10))
            cg_buf_puts(b, ",{\"role\":\"assistant\",\"content\":\"calling\"}");
        cg_buf_printf(b, ",{\"role\":\"tool\",\"tool_call_id\":\"call_%d\",\"content\":", piece);
        put_piece(b, p + start, i - start, flags);
        cg_buf_putc(b, '}');
        piece++;
        start = i + 1;
    }
    cg_buf_putc(b, ']');
    if (flags & 0x08)
        cg_buf_puts(b, ",\"data_sources\":null");
    cg_buf_puts(b, ",\"stream\":true}");
}

/* --- the checks on an aliased body ------------------------------------------------ */

static bool same(cg_span_t a, cg_span_t b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

/* Body bytes outside the tool contents, and cg_aliases_moved on them. */
static void check_gaps(const cg_aliases_t *a, const cg_request_t *r0, const char *b0,
                       size_t len0, const cg_request_t *r1, const char *b1, size_t len1)
{
    size_t from0 = 0, from1 = 0;
    for (size_t t = 0; t <= r0->ntools; t++) {
        size_t to0 = t < r0->ntools ? r0->tool_at[t].off : len0;
        size_t to1 = t < r1->ntools ? r1->tool_at[t].off : len1;
        FZ_CHECK(to0 >= from0 && to1 >= from1);
        if (!same(cg_span(b0 + from0, to0 - from0), cg_span(b1 + from1, to1 - from1)))
            FAIL("body bytes before tool %zu differ: [%zu,%zu) became [%zu,%zu)", t, from0, to0,
                 from1, to1);
        if (to0 > from0) {
            FZ_CHECK(cg_aliases_moved(a, from0) == from1);
            FZ_CHECK(cg_aliases_moved(a, to0 - 1) == to1 - 1);
        }
        if (t < r0->ntools) {
            from0 = to0 + r0->tool_at[t].len;
            from1 = to1 + r1->tool_at[t].len;
            /* a content keeps its kind */
            FZ_CHECK((b0[to0] == '"') == (b1[to1] == '"'));
        }
    }
    FZ_CHECK(r1->data_sources_len == r0->data_sources_len);
    if (r0->data_sources_len) {
        FZ_CHECK(cg_aliases_moved(a, r0->data_sources_off) == r1->data_sources_off);
        FZ_CHECK(memcmp(b0 + r0->data_sources_off, b1 + r1->data_sources_off,
                        r0->data_sources_len) == 0);
    }
}

/* The text tokens of a parts array: tok[k] set where token k is a part's
 * "text" string, as cg_request_parse reads them. */
static void text_tokens(const cg_json_t *j, bool *mark)
{
    int n = j->tok[0].size;
    for (int k = 0, i = 1; k < n; k++, i = cg_json_skip(j, i)) {
        int t = cg_json_get(j, i, "text");
        if (cg_json_is_str(j, t))
            mark[t] = true;
    }
}

/* A parts array keeps every token; its text values are as they came, or
 * the first carries the whole text and later ones are "". */
static void check_parts(cg_span_t v0, cg_span_t v1, cg_span_t text1)
{
    if (same(v0, v1))
        return;
    cg_json_t j0, j1;
    cg_json_init(&j0, 1u << 22);
    cg_json_init(&j1, 1u << 22);
    FZ_CHECK(cg_json_parse(&j0, v0.p, v0.n) == CG_JSON_OK);
    FZ_CHECK(cg_json_parse(&j1, v1.p, v1.n) == CG_JSON_OK);
    FZ_CHECK(j0.ntok == j1.ntok && j0.tok[0].type == JSMN_ARRAY && j1.tok[0].type == JSMN_ARRAY);
    bool *m0 = cg_xcalloc((size_t)j0.ntok, 1), *m1 = cg_xcalloc((size_t)j1.ntok, 1);
    text_tokens(&j0, m0);
    text_tokens(&j1, m1);
    bool first = true;
    for (int i = 0; i < j0.ntok; i++) {
        const jsmntok_t *a = &j0.tok[i], *b = &j1.tok[i];
        FZ_CHECK(a->type == b->type && a->size == b->size && a->parent == b->parent);
        FZ_CHECK(m0[i] == m1[i]);
        if (m1[i]) {
            size_t n;
            char *s = cg_json_strdup(&j1, i, &n);
            if (first)
                FZ_CHECK(same(cg_span(s, n), text1));
            else if (n != 0)
                FAIL("text part %d after the first is not empty", i);
            free(s);
            first = false;
        } else if (a->type == JSMN_STRING || a->type == JSMN_PRIMITIVE) {
            FZ_CHECK(same(cg_json_raw(&j0, i), cg_json_raw(&j1, i)));
        }
    }
    free(m0);
    free(m1);
    cg_json_free(&j0);
    cg_json_free(&j1);
}

typedef struct tally {
    bool *in;      /* in[id * ntools + t]: id replaced a string of tool t */
    uint64_t saved;
} tally_t;

/* One tool output, before (text0) and after (text1). */
static void check_tool(const cg_aliases_t *a, const oracle_t *o, size_t t, size_t ntools,
                       cg_span_t text0, cg_span_t text1, tally_t *ty)
{
    cg_json_t j0, j1;
    cg_json_init(&j0, 1u << 22);
    cg_json_init(&j1, 1u << 22);
    cg_buf_t w0 = {0}, w1 = {0};
    if (!one_value(&j0, &w0, text0)) {
        if (!same(text0, text1))
            FAIL("tool %zu: an output that is no JSON value changed", t);
        goto out;
    }
    if (!one_value(&j1, &w1, text1))
        FAIL("tool %zu: its output is no JSON value any more: %.*s", t, (int)text1.n, text1.p);
    if (j0.ntok != j1.ntok)
        FAIL("tool %zu: %d tokens became %d", t, j0.ntok, j1.ntok);
    for (int i = 1; i < j0.ntok; i++) {
        const jsmntok_t *x = &j0.tok[i], *y = &j1.tok[i];
        if (x->type != y->type || x->size != y->size || x->parent != y->parent)
            FAIL("tool %zu: token %d changed its type, size or parent", t, i);
        cg_span_t raw0 = cg_json_raw(&j0, i), raw1 = cg_json_raw(&j1, i);
        if (!is_value_str(&j0, i)) {
            if (x->type != JSMN_OBJECT && x->type != JSMN_ARRAY && !same(raw0, raw1))
                FAIL("tool %zu: token %d \"%.*s\" became \"%.*s\"", t, i, (int)raw0.n, raw0.p,
                     (int)raw1.n, raw1.p);
            continue;
        }
        size_t n0;
        char *s0 = cg_json_strdup(&j0, i, &n0);
        int kind = o_kind(s0, n0);
        size_t n1;
        char *s1 = cg_json_strdup(&j1, i, &n1);
        cg_span_t orig;
        int id = cg_aliases_find(a, s1, n1, &orig);
        if (kind < 0) {
            if (!same(raw0, raw1))
                FAIL("tool %zu: string \"%.*s\", neither PATH nor BOX, became \"%.*s\"", t,
                     (int)raw0.n, raw0.p, (int)raw1.n, raw1.p);
            if (id >= 0)
                FAIL("tool %zu: string \"%.*s\" kept is found as an alias", t, (int)raw0.n,
                     raw0.p);
        } else {
            if (id < 0)
                FAIL("tool %zu: %s \"%.*s\" became \"%.*s\", no alias", t,
                     kind ? "BOX" : "PATH", (int)raw0.n, raw0.p, (int)raw1.n, raw1.p);
            if (raw1.p[0] != (kind ? 'B' : 'P'))
                FAIL("tool %zu: %s \"%.*s\" aliased as %.*s", t, kind ? "BOX" : "PATH",
                     (int)raw0.n, raw0.p, (int)raw1.n, raw1.p);
            if (!same(orig, cg_span(s0, n0)))
                FAIL("tool %zu: %.*s expands to \"%.*s\", replaced \"%.*s\"", t, (int)raw1.n,
                     raw1.p, (int)orig.n, orig.p, (int)n0, s0);
            if (!cg_aliases_in_tool(a, id, t))
                FAIL("tool %zu: %.*s replaced a string here, cg_aliases_in_tool says no", t,
                     (int)raw1.n, raw1.p);
            FZ_CHECK((size_t)id < o->nd);
            ty->in[(size_t)id * ntools + t] = true;
            if (!same(raw1, cg_span(s1, n1)))
                FAIL("tool %zu: alias written with escapes: %.*s", t, (int)raw1.n, raw1.p);
            ty->saved += raw0.n - raw1.n;
        }
        free(s0);
        free(s1);
    }
out:
    cg_buf_free(&w0);
    cg_buf_free(&w1);
    cg_json_free(&j0);
    cg_json_free(&j1);
}

/* The table: count, every alias found, no other. */
static void check_table(const cg_aliases_t *a, const oracle_t *o)
{
    if (cg_aliases_count(a) != o->nd)
        FAIL("cg_aliases_count = %zu, %zu distinct PATH/BOX strings", cg_aliases_count(a), o->nd);
    bool *seen = cg_xcalloc(o->nd + 1, 1);
    size_t found = 0;
    for (int kind = 0; kind < 2; kind++) {
        for (size_t k = 1; k <= o->nkind[kind] + 1; k++) {
            char name[24];
            int nn = snprintf(name, sizeof(name), "%c%zu", kind ? 'B' : 'P', k);
            cg_span_t orig = {0};
            int id = cg_aliases_find(a, name, (size_t)nn, &orig);
            if (k > o->nkind[kind]) {
                if (id >= 0)
                    FAIL("%s found, only %zu of its kind", name, o->nkind[kind]);
                continue;
            }
            if (id < 0 || (size_t)id >= o->nd || seen[id])
                FAIL("%s: id %d (count %zu)", name, id, o->nd);
            seen[id] = true;
            size_t at = o_find(o, orig.p, orig.n);
            if (at == SIZE_MAX || o->d[at].kind != kind)
                FAIL("%s expands to \"%.*s\", not a %s of the tool outputs", name, (int)orig.n,
                     orig.p, kind ? "BOX" : "PATH");
            found++;
        }
    }
    FZ_CHECK(found == o->nd);
    free(seen);
    /* not aliases: spellings alias.c must not take */
    static const char *const not_alias[] = {"P0", "P01", "B0", "p1", "P", "B", "P1 ", "PB1", ""};
    for (size_t i = 0; i < sizeof(not_alias) / sizeof(*not_alias); i++) {
        cg_span_t orig;
        FZ_CHECK(cg_aliases_find(a, not_alias[i], strlen(not_alias[i]), &orig) < 0);
    }
}

static void check_aliased(const cg_aliases_t *a, const oracle_t *o, const cg_request_t *r0,
                          const char *b0, size_t len0, const char *b1, size_t len1)
{
    if (!cg_utf8_valid(b1, len1))
        FAIL("the aliased body is not UTF-8");
    cg_json_t j;
    cg_json_init(&j, 1u << 22);
    if (cg_json_parse(&j, b1, len1) != CG_JSON_OK)
        FAIL("the aliased body is not JSON: %.*s", (int)len1, b1);
    const char *why = fz_json_invalid(&j);
    if (why)
        FAIL("the aliased body is not valid JSON: %s", why);
    cg_json_free(&j);

    cg_cite_opts_t opts = {8192, true};
    cg_request_t r1;
    if (cg_request_parse(&r1, b1, len1, &opts) != 0)
        FAIL("cg_request_parse refuses the aliased body");
    if (r1.ntools != r0->ntools)
        FAIL("%zu tools became %zu", r0->ntools, r1.ntools);
    check_gaps(a, r0, b0, len0, &r1, b1, len1);

    tally_t ty = {cg_xcalloc(o->nd * r0->ntools + 1, 1), 0};
    for (size_t t = 0; t < r0->ntools; t++) {
        check_tool(a, o, t, r0->ntools, r0->tools[t], r1.tools[t], &ty);
        cg_body_range_t at0 = r0->tool_at[t], at1 = r1.tool_at[t];
        if (b0[at0.off] != '"')
            check_parts(cg_span(b0 + at0.off, at0.len), cg_span(b1 + at1.off, at1.len),
                        r1.tools[t]);
    }
    for (size_t id = 0; id < o->nd; id++)
        for (size_t t = 0; t < r0->ntools; t++)
            if (cg_aliases_in_tool(a, (int)id, t) != ty.in[id * r0->ntools + t])
                FAIL("cg_aliases_in_tool(%zu, %zu) = %d, wrong", id, t, !ty.in[id * r0->ntools + t]);
    FZ_CHECK(!cg_aliases_in_tool(a, (int)o->nd, 0) && !cg_aliases_in_tool(a, -1, 0));
    if (cg_aliases_saved(a) != ty.saved)
        FAIL("cg_aliases_saved = %" PRIu64 ", the replaced strings saved %" PRIu64,
             cg_aliases_saved(a), ty.saved);
    free(ty.in);
    cg_request_free(&r1);
}

/* --- the input -------------------------------------------------------------------- */

/* The input read as box pieces, one per byte, so that near-boxes (a tab,
 * a sign or a dot out of place, a region too short) come often. */
static void cross_check_box_words(const uint8_t *p, size_t n)
{
    static const char *const word[16] = {"D(",  "1", "23", ".", ",",  ", ", " ", "-",
                                         "+",   ")", ";",  "D(1,", ",1", "\t", "0", NULL};
    cg_buf_t b = {0};
    for (size_t i = 0; i < n; i++) {
        const char *w = word[p[i] & 15];
        if (w)
            cg_buf_puts(&b, w);
        else
            cg_buf_putc(&b, (char)(p[i] >> 4 == 15 ? 0x7f : p[i] >> 4));
    }
    char *s = fz_dup((const uint8_t *)b.p, b.len);
    (void)o_kind(s, b.len);
    free(s);
    cg_buf_free(&b);
}

static void cross_check_pieces(const uint8_t *p, size_t n)
{
    (void)o_kind((const char *)p, n);
    cross_check_box_words(p, n);
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != 0xFF && p[i] != 0xFE)
            continue;
        if (start > 0 || i < n)
            (void)o_kind((const char *)p + start, i - start);
        start = i + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    cross_check_pieces(p, n);

    cg_buf_t made = {0};
    if (flags & 3)
        build_body(&made, p, n, flags);
    else
        cg_buf_put(&made, p, n);
    /* an exact-size copy: ASan sees a read past the body's end */
    size_t len = made.len;
    char *body = fz_dup((const uint8_t *)made.p, len);
    cg_buf_free(&made);

    cg_cite_opts_t opts = {8192, true};
    cg_request_t r;
    if (cg_request_parse(&r, body, len, &opts) != 0) {
        free(body);
        return 0;
    }
    oracle_t o = {0};
    o_read(&o, &r);
    bool clash = o.least[0] <= o.nkind[0] || o.least[1] <= o.nkind[1];
    bool expect = o.nd > 0 && !clash;

    static int debug = -1; /* FZ_ALIAS_DEBUG=1: what each input gave */
    if (debug < 0)
        debug = getenv("FZ_ALIAS_DEBUG") != NULL;
    cg_buf_t out = {0};
    cg_buf_puts(&out, "kept"); /* out is appended to, and untouched on NULL */
    cg_aliases_t *a = cg_aliases_make(&r, body, len, &out);
    if (debug)
        fprintf(stderr, "%zu tools, %zu PATH, %zu BOX, %s: %s\n%.*s\n", r.ntools, o.nkind[0],
                o.nkind[1], clash ? "clash" : "no clash", a ? "aliased" : "NULL",
                (int)(out.len - 4), out.p + 4);
    if (a == NULL) {
        if (expect)
            FAIL("NULL, yet %zu PATH and %zu BOX strings and no clash", o.nkind[0], o.nkind[1]);
        FZ_CHECK(out.len == 4 && memcmp(out.p, "kept", 4) == 0);
    } else {
        if (!expect)
            FAIL("aliased, yet %s", o.nd ? "a tool output holds a would-be alias"
                                         : "no tool output holds a PATH or BOX string");
        FZ_CHECK(out.len >= 4 && memcmp(out.p, "kept", 4) == 0);
        size_t len1 = out.len - 4;
        char *b1 = fz_dup((const uint8_t *)out.p + 4, len1);
        check_table(a, &o);
        check_aliased(a, &o, &r, body, len, b1, len1);
        free(b1);
        cg_aliases_free(a);
    }
    cg_buf_free(&out);
    o_free(&o);
    cg_request_free(&r);
    free(body);
    return 0;
}
