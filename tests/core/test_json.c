/*
 * Unit tests of the JSON view and writer (include/citegate/json.h) and of
 * cg_utf8_cut (common.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "citegate/json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

static void assert_bytes_(const char *what, const char *p, size_t n, const char *want, size_t wn,
                          const char *file, int line)
{
    if (n == wn && (n == 0 || memcmp(p, want, n) == 0))
        return;
    print_error("%s: got %zu bytes \"%.*s\", want %zu bytes \"%.*s\"\n", what, n, (int)n,
                n ? p : "", wn, (int)wn, want);
    _fail(file, line);
}

#define ASSERT_BYTES(p, n, lit)                                                                    \
    assert_bytes_(#p, (p), (n), (lit), sizeof(lit) - 1, __FILE__, __LINE__)
#define ASSERT_SPAN(s, lit) ASSERT_BYTES((s).p, (s).n, lit)
#define ASSERT_BUF(b, lit)  ASSERT_BYTES((b).p, (b).len, lit)

/* Parses a literal (which may hold NUL bytes) with a fresh view. */
#define PARSE_LIT(lit, max) parse_n((lit), sizeof(lit) - 1, (max))

static int parse_n(const char *s, size_t n, unsigned max)
{
    cg_json_t j;
    cg_json_init(&j, max);
    int rc = cg_json_parse(&j, s, n);
    cg_json_free(&j);
    return rc;
}

/* "[0,1,...,n-1]" */
static char *int_array(int n, size_t *len)
{
    cg_buf_t b = {0};
    cg_buf_putc(&b, '[');
    for (int i = 0; i < n; i++)
        cg_buf_printf(&b, "%s%d", i ? "," : "", i);
    cg_buf_putc(&b, ']');
    cg_buf_putc(&b, '\0');
    *len = b.len - 1;
    return b.p;
}

/* ---- cg_json_parse ---------------------------------------------------------- */

static void test_parse_object(void **state)
{
    (void)state;
    static const char js[] = "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":{\"d\":\"e\"}}";
    cg_json_t j;
    cg_json_init(&j, 1024);
    assert_int_equal(cg_json_parse(&j, js, sizeof(js) - 1), CG_JSON_OK);
    assert_int_equal(j.ntok, 12);
    assert_int_equal(cg_json_type(&j, 0), JSMN_OBJECT);
    assert_int_equal(j.tok[0].size, 3);
    assert_ptr_equal(j.js, js);
    assert_int_equal(j.len, sizeof(js) - 1);
    cg_json_free(&j);
}

static void test_parse_array(void **state)
{
    (void)state;
    static const char js[] = "[1, \"two\", {\"three\": 3}, [], -0.5e-3]";
    cg_json_t j;
    cg_json_init(&j, 1024);
    assert_int_equal(cg_json_parse(&j, js, sizeof(js) - 1), CG_JSON_OK);
    assert_int_equal(cg_json_type(&j, 0), JSMN_ARRAY);
    assert_int_equal(j.tok[0].size, 5);
    assert_int_equal(j.ntok, 8);
    cg_json_free(&j);
}

static void test_parse_whitespace(void **state)
{
    (void)state;
    assert_int_equal(PARSE_LIT("  {\"a\":1}  \r\n\t", 64), CG_JSON_OK);
    assert_int_equal(PARSE_LIT("\n[1 , 2 ]\n", 64), CG_JSON_OK);
    assert_int_equal(PARSE_LIT("{ \"a\" : [ ] }", 64), CG_JSON_OK);
    /* non-JSON white space after the value is not allowed */
    assert_int_equal(PARSE_LIT("{\"a\":1}\v", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":1} x", 64), CG_JSON_E_INVALID);
}

static void test_parse_two_values(void **state)
{
    (void)state;
    assert_int_equal(PARSE_LIT("{} {}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{}{}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[1][2]", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":1}\n{\"a\":2}\n", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("\"a\" \"b\"", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("1 2 ", 64), CG_JSON_E_INVALID);
}

static void test_parse_truncated(void **state)
{
    (void)state;
    assert_int_equal(PARSE_LIT("", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("   ", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":1", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\"", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":\"x", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[1,2", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[[]", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("\"abc", 64), CG_JSON_E_INVALID);
    /* a prefix of a valid document is invalid at every cut */
    static const char js[] = "{\"a\":[1,{\"b\":\"c\"}],\"d\":true}";
    for (size_t n = 0; n < sizeof(js) - 1; n++)
        assert_int_equal(parse_n(js, n, 64), CG_JSON_E_INVALID);
    assert_int_equal(parse_n(js, sizeof(js) - 1, 64), CG_JSON_OK);
}

static void test_parse_nul_byte(void **state)
{
    (void)state;
    assert_int_equal(PARSE_LIT("{}\0", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("\0{}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":\"x\0y\"}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":1}\0 ", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[1,\0 2]", 64), CG_JSON_E_INVALID);
}

static void test_parse_token_growth(void **state)
{
    (void)state;
    size_t len;
    char *js = int_array(200, &len); /* 201 tokens, beyond the initial 64 */
    cg_json_t j;
    cg_json_init(&j, 1000);
    assert_int_equal(cg_json_parse(&j, js, len), CG_JSON_OK);
    assert_int_equal(j.ntok, 201);
    assert_true(j.cap >= 201 && j.cap <= 1000);
    assert_int_equal(j.tok[0].size, 200);
    ASSERT_SPAN(cg_json_raw(&j, 200), "199");
    ASSERT_SPAN(cg_json_raw(&j, 65), "64");
    /* reuse: a small value after a large one */
    assert_int_equal(cg_json_parse(&j, "{\"k\":[1]}", 9), CG_JSON_OK);
    assert_int_equal(j.ntok, 4);
    cg_json_free(&j);

    /* exactly max tokens fits */
    cg_json_init(&j, 201);
    assert_int_equal(cg_json_parse(&j, js, len), CG_JSON_OK);
    assert_int_equal(j.ntok, 201);
    assert_true(j.cap <= 201);
    cg_json_free(&j);

    /* one more than max does not */
    cg_json_init(&j, 200);
    assert_int_equal(cg_json_parse(&j, js, len), CG_JSON_E_TOOBIG);
    assert_true(j.cap <= 200);
    /* the view stays usable */
    assert_int_equal(cg_json_parse(&j, "[1,2]", 5), CG_JSON_OK);
    assert_int_equal(j.ntok, 3);
    cg_json_free(&j);

    /* a max below the initial 64 */
    cg_json_init(&j, 5);
    assert_int_equal(cg_json_parse(&j, "{\"a\":1,\"b\":2}", 13), CG_JSON_OK);
    assert_true(j.cap <= 5);
    assert_int_equal(cg_json_parse(&j, "[1,2,3,4,5]", 11), CG_JSON_E_TOOBIG);
    cg_json_free(&j);
    free(js);
}

/* Parsers take turns with one store's tokens: the array grows once, goes
 * back after each event, and a peak above CG_JSON_STORE_KEEP is given up. */
static void test_store(void **state)
{
    (void)state;
    size_t len;
    char *js = int_array(300, &len);
    cg_json_store_t st = {0};
    cg_json_t a, b;
    cg_json_init(&a, 1u << 16);
    cg_json_init(&b, 1u << 16);
    cg_json_borrow(&a, &st);
    assert_int_equal(cg_json_parse(&a, js, len), CG_JSON_OK);
    assert_int_equal(a.ntok, 301);
    cg_json_give_back(&a, &st);
    assert_null(a.tok);
    assert_int_equal(a.ntok, 0); /* nothing to read once given back */
    assert_true(st.cap >= 301);
    const jsmntok_t *kept = st.tok;
    cg_json_borrow(&b, &st);
    assert_ptr_equal(b.tok, kept); /* the next parser needs no allocation */
    assert_null(st.tok);
    /* A nested borrower starts from nothing; the larger array stays. */
    cg_json_borrow(&a, &st);
    assert_int_equal(cg_json_parse(&a, "[true]", 6), CG_JSON_OK);
    assert_int_equal(cg_json_parse(&b, js, len), CG_JSON_OK);
    cg_json_give_back(&a, &st);
    cg_json_give_back(&b, &st);
    assert_ptr_equal(st.tok, kept);
    free(js);
    /* A peak above the keep is given up. */
    js = int_array(CG_JSON_STORE_KEEP + 10, &len);
    cg_json_borrow(&a, &st);
    assert_int_equal(cg_json_parse(&a, js, len), CG_JSON_OK);
    cg_json_give_back(&a, &st);
    assert_int_equal(st.cap, CG_JSON_STORE_KEEP);
    cg_json_store_free(&st);
    assert_null(st.tok);
    cg_json_free(&a);
    cg_json_free(&b);
    free(js);
}

/* Documents are objects or arrays (json.h): a bare scalar is refused. */
static void test_parse_top_level_scalar(void **state)
{
    (void)state;
    /* Only objects and arrays are documents here, with or without white space. */
    assert_int_equal(PARSE_LIT("\"s\"", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("42 ", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("42", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("true", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT(" null", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT(" [1] ", 64), CG_JSON_OK);
}

/* Not JSON: misspelt literals, malformed numbers, trailing commas. */
static void test_parse_not_json(void **state)
{
    (void)state;
    assert_int_equal(PARSE_LIT("{\"a\":tru}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[nul]", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[1.2.3]", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":x}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{a:1}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[1,]", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":1,}", 64), CG_JSON_E_INVALID);
}

/* A raw control byte is JSON white space between tokens (TAB, LF, CR) and
 * not JSON inside a string, a key's or a value's, where only its escape
 * may stand (RFC 8259 §7; jsmn lets it through). */
static void test_parse_raw_control_in_string(void **state)
{
    (void)state;
    assert_int_equal(PARSE_LIT("{\"a\":\"x\ny\"}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\":\"x\ty\"}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[\"\x01\"]", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("{\"a\x1f\":1}", 64), CG_JSON_E_INVALID);
    assert_int_equal(PARSE_LIT("[\"abcdefghijklmnopq\x7f\\n\\u0001\"]", 64), CG_JSON_OK);
    assert_int_equal(PARSE_LIT("{\t\"a\"\n:\r\"x\\ty\"}", 64), CG_JSON_OK);
}

/* The string scan stops at '"', '\\' and every byte below 0x20, wherever
 * it stands in the eight-byte steps, and at nothing else. */
/* Nesting: padded past CG_JSON_SHALLOW_BYTES, CG_JSON_MAX_DEPTH levels
 * parse and one more is refused; brackets in strings, escaped quotes
 * included, do not count. */
static int nested_json(unsigned depth, const char *inner)
{
    cg_buf_t b = {0};
    cg_buf_puts(&b, "[\"");
    for (int i = 0; i < CG_JSON_SHALLOW_BYTES; i++)
        cg_buf_putc(&b, 'x');
    cg_buf_puts(&b, "\"");
    for (unsigned i = 1; i < depth; i++)
        cg_buf_puts(&b, i == 1 ? ",{\"k\":" : i % 2 ? "{\"k\":" : "[");
    cg_buf_puts(&b, inner);
    for (unsigned i = depth - 1; i >= 1; i--)
        cg_buf_puts(&b, i % 2 ? "}" : "]");
    cg_buf_putc(&b, ']');
    int rc = parse_n(b.p, b.len, 1u << 20);
    cg_buf_free(&b);
    return rc;
}

/* An independent reading of RFC 8259 by recursive descent, for the
 * property below: whether s[*i..n) starts with one value (white space
 * around it), at most `depth` levels of nesting. */
static bool rd_value(const char *s, size_t n, size_t *i, int depth);

static void rd_ws(const char *s, size_t n, size_t *i)
{
    while (*i < n && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\n' || s[*i] == '\r'))
        (*i)++;
}

static bool rd_digits(const char *s, size_t n, size_t *i)
{
    size_t from = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9')
        (*i)++;
    return *i > from;
}

static bool rd_number(const char *s, size_t n, size_t *i)
{
    if (*i < n && s[*i] == '-')
        (*i)++;
    if (*i < n && s[*i] == '0')
        (*i)++;
    else if (*i >= n || s[*i] < '1' || s[*i] > '9' || !rd_digits(s, n, i))
        return false;
    if (*i < n && s[*i] == '.' && (++*i, !rd_digits(s, n, i)))
        return false;
    if (*i < n && (s[*i] == 'e' || s[*i] == 'E')) {
        (*i)++;
        if (*i < n && (s[*i] == '+' || s[*i] == '-'))
            (*i)++;
        return rd_digits(s, n, i);
    }
    return true;
}

static bool rd_string(const char *s, size_t n, size_t *i)
{
    for ((*i)++; *i < n; (*i)++) {
        unsigned char c = (unsigned char)s[*i];
        if (c == '"')
            return ++*i, true;
        if (c < 0x20)
            return false;
        if (c != '\\')
            continue;
        if (++*i >= n)
            return false;
        if (s[*i] == 'u') {
            for (int k = 0; k < 4; k++)
                if (++*i >= n || !isxdigit((unsigned char)s[*i]))
                    return false;
        } else if (!strchr("\"\\/bfnrt", s[*i]) || s[*i] == '\0') {
            return false;
        }
    }
    return false;
}

/* Members or elements up to `close`, the opening bracket read. */
static bool rd_items(const char *s, size_t n, size_t *i, int depth, char close)
{
    (*i)++;
    rd_ws(s, n, i);
    if (*i < n && s[*i] == close)
        return ++*i, true;
    for (;;) {
        if (close == '}') {
            rd_ws(s, n, i);
            if (*i >= n || s[*i] != '"' || !rd_string(s, n, i))
                return false;
            rd_ws(s, n, i);
            if (*i >= n || s[(*i)++] != ':')
                return false;
        }
        if (!rd_value(s, n, i, depth - 1))
            return false;
        if (*i < n && s[*i] == close)
            return ++*i, true;
        if (*i >= n || s[(*i)++] != ',')
            return false;
    }
}

static bool rd_value(const char *s, size_t n, size_t *i, int depth)
{
    rd_ws(s, n, i);
    if (*i >= n || depth < 0)
        return false;
    bool ok;
    char c = s[*i];
    if (c == '{' || c == '[')
        ok = depth > 0 && rd_items(s, n, i, depth, c == '{' ? '}' : ']');
    else if (c == '"')
        ok = rd_string(s, n, i);
    else if (n - *i >= 4 && (memcmp(s + *i, "true", 4) == 0 || memcmp(s + *i, "null", 4) == 0))
        ok = (*i += 4, true);
    else if (n - *i >= 5 && memcmp(s + *i, "false", 5) == 0)
        ok = (*i += 5, true);
    else
        ok = rd_number(s, n, i);
    rd_ws(s, n, i);
    return ok;
}

/* A whole text cg_json_parse takes: one object or array, nothing after. */
static bool rd_document(const char *s, size_t n)
{
    size_t i = 0;
    rd_ws(s, n, &i);
    if (i >= n || (s[i] != '{' && s[i] != '['))
        return false;
    return rd_value(s, n, &i, CG_JSON_MAX_DEPTH) && i == n;
}

/* cg_json_parse takes exactly what the reading above takes, over random
 * edits (the bytes that matter to JSON put in, taken out, changed) of
 * texts with every kind of token, short and over 1 KiB. */
static void test_parse_matches_grammar(void **state)
{
    (void)state;
    static const char *const seeds[] = {
        "{\"a\":[1,-2.5e3,{\"b\":null,\"c\":[true,false,\"x\\u00e9\\n\"]}],\"d\":{}}",
        "[[],{},[[{}]],\"s\",0,-0,1E+2,0.5]",
        "{\"k\":{\"k\":{\"k\":{\"k\":[1,[2,[3,[4]]]]}}},\"e\":\"\\\"\\\\\\/\\b\\f\\r\\t\"}",
        " { \"sp\" : [ 1 , 2 ] , \"x\" : \"y\" } ",
    };
    static const char alphabet[] = "{}[]:,\"\\ \t\n01-.eE+tfnrulsx\x01\x7f";
    char buf[4096];
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    unsigned agree_ok = 0;
    cg_json_t j;
    cg_json_init(&j, 1u << 16);
    for (unsigned round = 0; round < 100000; round++) {
        const char *seed = seeds[round % 4];
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        if (round % 3 == 0) { /* over 1 KiB: an array of 30 copies */
            buf[0] = '[';
            n = 1;
            for (int k = 0; k < 30; k++, n += strlen(seed))
                memcpy(buf + n, seed, strlen(seed)), buf[n + strlen(seed)] = ',', n++;
            buf[n - 1] = ']';
        }
        for (unsigned e = (unsigned)(round % 4); e > 0; e--) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t at = (size_t)(rng % (n + 1));
            char c = alphabet[(rng >> 32) % (sizeof(alphabet) - 1)];
            if ((rng >> 20) % 3 == 0 && n + 1 < sizeof(buf)) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = c, n++;
            } else if ((rng >> 20) % 3 == 1 && at < n) {
                memmove(buf + at, buf + at + 1, n - at - 1), n--;
            } else if (at < n) {
                buf[at] = c;
            }
        }
        bool want = rd_document(buf, n);
        assert_int_equal(cg_json_parse(&j, buf, n) == CG_JSON_OK, want);
        agree_ok += want;
    }
    assert_true(agree_ok > 20000);
    cg_json_free(&j);
}

/* cg_json_opens counts every `{` and `[`, whatever the length and mix:
 * held to a byte-at-a-time count, past the points where its lane counters
 * are summed (every 127 blocks of 16) and with every lane full. */
static void test_opens(void **state)
{
    (void)state;
    static const char mix[] = "{[}]\"a\\ \x01\x7f\xc3\xa9";
    size_t sizes[] = {0, 1, 15, 16, 17, 2031, 2032, 2033, 4064, 4065, 70000};
    char *buf = malloc(70000);
    uint64_t rng = 88172645463325252ull;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (int fill = 0; fill < 3; fill++) {
            size_t n = sizes[k], want = 0;
            for (size_t i = 0; i < n; i++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                buf[i] = fill == 0 ? '{' : fill == 1 ? '[' : mix[rng % (sizeof(mix) - 1)];
                want += buf[i] == '{' || buf[i] == '[';
            }
            assert_int_equal(cg_json_opens(buf, n), want);
        }
    free(buf);
}

static void test_parse_depth(void **state)
{
    (void)state;
    assert_int_equal(nested_json(CG_JSON_MAX_DEPTH, "1"), CG_JSON_OK);
    assert_int_equal(nested_json(CG_JSON_MAX_DEPTH + 1, "1"), CG_JSON_E_DEEP);
    assert_int_equal(nested_json(CG_JSON_MAX_DEPTH, "\"[[[{{{\\\"[[\""), CG_JSON_OK);
    assert_int_equal(nested_json(CG_JSON_MAX_DEPTH, "[]"), CG_JSON_E_DEEP);
    /* A long text that ends inside a string, on a backslash: scanned to its
     * end and no further (ASan watches the scan). */
    char *cut = cg_xmalloc(CG_JSON_SHALLOW_BYTES + 16);
    memcpy(cut, "{\"a\":\"", 6);
    memset(cut + 6, 'a', CG_JSON_SHALLOW_BYTES);
    cut[6 + CG_JSON_SHALLOW_BYTES] = '\\';
    assert_int_equal(parse_n(cut, 7 + CG_JSON_SHALLOW_BYTES, 64), CG_JSON_E_INVALID);
    free(cut);
    /* Closings do not count against the depth: many shallow runs are fine. */
    cg_buf_t b = {0};
    cg_buf_putc(&b, '[');
    for (int i = 0; i < 200; i++)
        cg_buf_puts(&b, i ? ",[[[[[[[[[[]]]]]]]]]]" : "[[[[[[[[[[]]]]]]]]]]");
    cg_buf_putc(&b, ']');
    assert_int_equal(parse_n(b.p, b.len, 1u << 20), CG_JSON_OK);
    cg_buf_free(&b);
}

static void test_plain_len_stops(void **state)
{
    (void)state;
    const unsigned char stops[] = {'"', '\\', 0x00, 0x01, '\t', '\n', 0x1f};
    const unsigned char plain[] = {' ', 0x7f, 0x80, 0xc3, 0xe3, 0xff, 'a'};
    char buf[40];
    for (size_t at = 0; at < 24; at++) {
        for (size_t k = 0; k < sizeof(stops) * sizeof(plain); k++) {
            memset(buf, plain[k / sizeof(stops)], sizeof(buf)); /* around the stop */
            buf[at] = (char)stops[k % sizeof(stops)];
            assert_int_equal(cg_json_plain_len(buf, sizeof(buf)), at);
            assert_int_equal(cg_json_plain_len(buf, at), at); /* the run ends with n */
        }
        for (size_t k = 0; k < sizeof(plain); k++) {
            memset(buf, plain[k], at);
            memset(buf + at, 'y', sizeof(buf) - at);
            assert_int_equal(cg_json_plain_len(buf, sizeof(buf)), sizeof(buf));
        }
    }
}

/* ---- navigation --------------------------------------------------------------- */

static const char nested[] =
    "{\"a\":{\"b\":[1,{\"c\":\"d\"}],\"e\":\"f\\\"g\"},\"b\":2,\"a\":3,\"n\":null}";
/*  tokens: 0 {  1 "a"  2 {  3 "b"  4 [  5 1  6 {  7 "c"  8 "d"  9 "e"  10 "f\"g"
 *          11 "b"  12 2  13 "a"  14 3  15 "n"  16 null */

static void test_get_skip(void **state)
{
    (void)state;
    cg_json_t j;
    cg_json_init(&j, 256);
    assert_int_equal(cg_json_parse(&j, nested, sizeof(nested) - 1), CG_JSON_OK);
    assert_int_equal(j.ntok, 17);

    assert_int_equal(cg_json_get(&j, 0, "a"), 2);  /* first occurrence */
    assert_int_equal(cg_json_get(&j, 0, "b"), 12); /* not the nested "b" */
    assert_int_equal(cg_json_get(&j, 0, "n"), 16);
    assert_int_equal(cg_json_get(&j, 2, "b"), 4);
    assert_int_equal(cg_json_get(&j, 2, "e"), 10);
    assert_int_equal(cg_json_get(&j, 6, "c"), 8);
    assert_int_equal(cg_json_get(&j, 0, "c"), -1);
    assert_int_equal(cg_json_get(&j, 0, "zz"), -1);
    assert_int_equal(cg_json_get(&j, 0, ""), -1);
    assert_int_equal(cg_json_get(&j, 4, "b"), -1);  /* an array */
    assert_int_equal(cg_json_get(&j, 12, "b"), -1); /* a primitive */
    assert_int_equal(cg_json_get(&j, -1, "a"), -1);
    assert_int_equal(cg_json_get(&j, 99, "a"), -1);

    assert_int_equal(cg_json_skip(&j, 0), 17);
    assert_int_equal(cg_json_skip(&j, 2), 11);
    assert_int_equal(cg_json_skip(&j, 4), 9);
    assert_int_equal(cg_json_skip(&j, 5), 6);
    assert_int_equal(cg_json_skip(&j, 6), 9);
    assert_int_equal(cg_json_skip(&j, 1), 11); /* a key with its value */
    assert_int_equal(cg_json_skip(&j, 16), 17);

    assert_true(cg_json_is_str(&j, 10));
    assert_false(cg_json_is_str(&j, 12));
    assert_true(cg_json_is_null(&j, 16));
    assert_false(cg_json_is_null(&j, 12));
    assert_false(cg_json_is_null(&j, 10));
    assert_int_equal(cg_json_type(&j, 4), JSMN_ARRAY);
    assert_int_equal(cg_json_type(&j, -1), JSMN_UNDEFINED);
    assert_int_equal(cg_json_type(&j, 17), JSMN_UNDEFINED);

    /* an object whose member values are containers: get skips their subtrees */
    static const char js2[] = "{\"x\":{\"y\":{\"z\":1}},\"y\":[[1],[2]],\"z\":\"last\"}";
    assert_int_equal(cg_json_parse(&j, js2, sizeof(js2) - 1), CG_JSON_OK);
    int z = cg_json_get(&j, 0, "z");
    assert_true(z > 0);
    ASSERT_SPAN(cg_json_raw(&j, z), "last");
    int y = cg_json_get(&j, 0, "y");
    assert_int_equal(cg_json_type(&j, y), JSMN_ARRAY);
    assert_int_equal(j.tok[y].size, 2);
    cg_json_free(&j);
}

static void test_raw_begin_end(void **state)
{
    (void)state;
    cg_json_t j;
    cg_json_init(&j, 256);
    assert_int_equal(cg_json_parse(&j, nested, sizeof(nested) - 1), CG_JSON_OK);

    ASSERT_SPAN(cg_json_raw(&j, 10), "f\\\"g"); /* escaped bytes, no quotes */
    size_t b = cg_json_begin(&j, 10), e = cg_json_end(&j, 10);
    ASSERT_BYTES(nested + b, e - b, "\"f\\\"g\"");

    b = cg_json_begin(&j, 2);
    e = cg_json_end(&j, 2);
    ASSERT_BYTES(nested + b, e - b, "{\"b\":[1,{\"c\":\"d\"}],\"e\":\"f\\\"g\"}");
    ASSERT_SPAN(cg_json_raw(&j, 2), "{\"b\":[1,{\"c\":\"d\"}],\"e\":\"f\\\"g\"}");

    b = cg_json_begin(&j, 12);
    e = cg_json_end(&j, 12);
    ASSERT_BYTES(nested + b, e - b, "2");
    ASSERT_SPAN(cg_json_raw(&j, 12), "2");

    b = cg_json_begin(&j, 1); /* a key */
    e = cg_json_end(&j, 1);
    ASSERT_BYTES(nested + b, e - b, "\"a\"");

    assert_int_equal(cg_json_begin(&j, 0), 0);
    assert_int_equal(cg_json_end(&j, 0), sizeof(nested) - 1);

    b = cg_json_begin(&j, 4);
    e = cg_json_end(&j, 4);
    ASSERT_BYTES(nested + b, e - b, "[1,{\"c\":\"d\"}]");

    /* empty string */
    assert_int_equal(cg_json_parse(&j, "[\"\"]", 4), CG_JSON_OK);
    assert_int_equal(cg_json_raw(&j, 1).n, 0);
    assert_int_equal(cg_json_begin(&j, 1), 1);
    assert_int_equal(cg_json_end(&j, 1), 3);
    cg_json_free(&j);
}

static void test_number(void **state)
{
    (void)state;
    static const char js[] = "{\"i\":42,\"f\":-1.5e2,\"s\":\"12.41\",\"t\":true,\"n\":null,"
                             "\"x\":\"abc\",\"e\":\"\",\"o\":{},\"a\":[1],\"big\":1e999,"
                             "\"z\":0,\"m\":\"-0.25\",\"sx\":\"12abc\"}";
    cg_json_t j;
    cg_json_init(&j, 256);
    assert_int_equal(cg_json_parse(&j, js, sizeof(js) - 1), CG_JSON_OK);
    double v = 0;
    assert_true(cg_json_number(&j, cg_json_get(&j, 0, "i"), &v));
    assert_true(v == 42.0);
    assert_true(cg_json_number(&j, cg_json_get(&j, 0, "f"), &v));
    assert_true(v == -150.0);
    assert_true(cg_json_number(&j, cg_json_get(&j, 0, "s"), &v));
    assert_true(v == 12.41);
    assert_true(cg_json_number(&j, cg_json_get(&j, 0, "z"), &v));
    assert_true(v == 0.0);
    assert_true(cg_json_number(&j, cg_json_get(&j, 0, "m"), &v));
    assert_true(v == -0.25);

    v = 7.0;
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "t"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "n"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "x"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "e"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "o"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "a"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "big"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "sx"), &v));
    assert_false(cg_json_number(&j, cg_json_get(&j, 0, "missing"), &v));
    assert_true(v == 7.0); /* untouched on failure */
    cg_json_free(&j);
}

/* ---- strings ------------------------------------------------------------------ */

static void test_strdup_escapes(void **state)
{
    (void)state;
    static const char js[] = "{\"s\":\"a\\nb\\\"c\\\\d\\/e\\u00e9\\ud83d\\ude00!\",\"n\":1,"
                             "\"e\":\"\",\"p\":\"plain\"}";
    cg_json_t j;
    cg_json_init(&j, 64);
    assert_int_equal(cg_json_parse(&j, js, sizeof(js) - 1), CG_JSON_OK);
    size_t n = 0;
    char *s = cg_json_strdup(&j, cg_json_get(&j, 0, "s"), &n);
    assert_non_null(s);
    ASSERT_BYTES(s, n, "a\nb\"c\\d/e\xC3\xA9\xF0\x9F\x98\x80!");
    assert_int_equal(s[n], '\0');
    free(s);

    s = cg_json_strdup(&j, cg_json_get(&j, 0, "p"), NULL);
    assert_non_null(s);
    assert_string_equal(s, "plain");
    free(s);

    assert_null(cg_json_strdup(&j, cg_json_get(&j, 0, "n"), &n));
    assert_null(cg_json_strdup(&j, 0, &n));
    assert_null(cg_json_strdup(&j, -1, &n));

    s = cg_json_strdup(&j, cg_json_get(&j, 0, "e"), &n);
    assert_non_null(s);
    assert_int_equal(n, 0);
    free(s);
    assert_null(cg_json_strdup_nonempty(&j, cg_json_get(&j, 0, "e")));
    assert_null(cg_json_strdup_nonempty(&j, cg_json_get(&j, 0, "n")));
    s = cg_json_strdup_nonempty(&j, cg_json_get(&j, 0, "p"));
    assert_non_null(s);
    assert_string_equal(s, "plain");
    free(s);
    cg_json_free(&j);
}

static size_t unescape_lit(const char *s, size_t n, char *out)
{
    size_t r = cg_json_unescape(s, n, out);
    assert_true(r <= n);
    return r;
}

#define UNESCAPE(lit, out) unescape_lit((lit), sizeof(lit) - 1, (out))

static void test_unescape(void **state)
{
    (void)state;
    char out[64];
    size_t n;
    n = UNESCAPE("\\t\\r\\b\\f\\n", out);
    ASSERT_BYTES(out, n, "\t\r\b\f\n");
    n = UNESCAPE("\\u0041\\u00E9\\u20AC", out);
    ASSERT_BYTES(out, n, "A\xC3\xA9\xE2\x82\xAC");
    n = UNESCAPE("x\\ud83d\\ude00y", out);
    ASSERT_BYTES(out, n, "x\xF0\x9F\x98\x80y");
    n = UNESCAPE("\\uD83D\\uDE00", out);
    ASSERT_BYTES(out, n, "\xF0\x9F\x98\x80");
    /* lone surrogates become U+FFFD */
    n = UNESCAPE("\\ud83d", out);
    ASSERT_BYTES(out, n, "\xEF\xBF\xBD");
    n = UNESCAPE("\\ude00", out);
    ASSERT_BYTES(out, n, "\xEF\xBF\xBD");
    n = UNESCAPE("a\\ud83d b", out);
    ASSERT_BYTES(out, n, "a\xEF\xBF\xBD b");
    /* a high surrogate followed by a non-surrogate escape keeps that escape */
    n = UNESCAPE("\\ud83d\\u0041", out);
    ASSERT_BYTES(out, n, "\xEF\xBF\xBD\x41"); /* U+FFFD A */
    /* two high surrogates */
    n = UNESCAPE("\\ud83d\\ud83d\\ude00", out);
    ASSERT_BYTES(out, n, "\xEF\xBF\xBD\xF0\x9F\x98\x80");
    n = UNESCAPE("\\u0000", out);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], '\0');
    n = UNESCAPE("no escapes", out);
    ASSERT_BYTES(out, n, "no escapes");
    n = UNESCAPE("", out);
    assert_int_equal(n, 0);
}

/* The header promises that out needs room for n bytes only. Malformed \u
 * escapes (reachable through the public function) must not write more. */
static void test_unescape_room_invalid_escape(void **state)
{
    (void)state;
    char out[64];
    memset(out, 0, sizeof(out));
    assert_true(cg_json_unescape("\\u", 2, out) <= 2);
    assert_true(cg_json_unescape("\\uZZZZ", 6, out) <= 6);
    assert_true(cg_json_unescape("\\u12", 4, out) <= 4);
}

static void test_put_escaped(void **state)
{
    (void)state;
    cg_buf_t b = {0};
    static const char in[] = "a\"b\\c/\n\r\t\b\f\x01\x1f\x7f \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    cg_json_put_escaped(&b, in, sizeof(in) - 1);
    ASSERT_BUF(
        b, "a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
    b.len = 0;
    static const char nul[] = "x\0y";
    cg_json_put_escaped(&b, nul, 3);
    ASSERT_BUF(b, "x\\u0000y");
    b.len = 0;
    cg_json_put_escaped(&b, "\x0b\x0e\x10", 3);
    ASSERT_BUF(b, "\\u000b\\u000e\\u0010");
    b.len = 0;
    cg_json_put_escaped(&b, "", 0);
    assert_int_equal(b.len, 0);
    cg_json_put_str(&b, "q\"", 2);
    ASSERT_BUF(b, "\"q\\\"\"");
    b.len = 0;
    cg_json_put_cstr(&b, "hi");
    ASSERT_BUF(b, "\"hi\"");
    cg_buf_free(&b);
}

/* Escaping then parsing and decoding gives back every byte. */
static void test_escape_roundtrip(void **state)
{
    (void)state;
    char in[160];
    size_t n = 0;
    for (int c = 0; c < 128; c++)
        in[n++] = (char)c;
    static const char utf8[] = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xE2\x80\xA8";
    memcpy(in + n, utf8, sizeof(utf8) - 1);
    n += sizeof(utf8) - 1;

    cg_buf_t b = {0};
    cg_buf_puts(&b, "{\"k\":");
    cg_json_put_str(&b, in, n);
    cg_buf_putc(&b, '}');
    cg_json_t j;
    cg_json_init(&j, 16);
    assert_int_equal(cg_json_parse(&j, b.p, b.len), CG_JSON_OK);
    size_t m = 0;
    char *s = cg_json_strdup(&j, cg_json_get(&j, 0, "k"), &m);
    assert_non_null(s);
    assert_int_equal(m, n);
    assert_memory_equal(s, in, n);
    /* no raw control byte in the escaped text */
    for (size_t i = 0; i < b.len; i++)
        assert_true((unsigned char)b.p[i] >= 0x20);
    free(s);
    cg_json_free(&j);
    cg_buf_free(&b);
}

static void put_double_is(double v, const char *want)
{
    cg_buf_t b = {0};
    cg_json_put_double(&b, v);
    cg_buf_putc(&b, '\0');
    if (strcmp(b.p, want) != 0) {
        print_error("cg_json_put_double(%.17g): got \"%s\", want \"%s\"\n", v, b.p, want);
        cg_buf_free(&b);
        fail();
    }
    cg_buf_free(&b);
}

static void test_put_double(void **state)
{
    (void)state;
    put_double_is(0.8, "0.8");
    put_double_is(0.675, "0.675");
    put_double_is(0.1241, "0.1241");
    volatile double score = 12.41;
    put_double_is(score / 100, "0.1241");
    put_double_is(0.1 + 0.2, "0.3");
    put_double_is(1.0, "1");
    put_double_is(0.0, "0");
    put_double_is(100.0, "100");
    put_double_is(-2.5, "-2.5");
    put_double_is(1.0 / 3.0, "0.333333333333333");
    put_double_is(3.2 / 4, "0.8");

    /* non-finite values still give a JSON number */
    cg_buf_t b = {0};
    cg_buf_putc(&b, '[');
    cg_json_put_double(&b, NAN);
    cg_buf_putc(&b, ',');
    cg_json_put_double(&b, INFINITY);
    cg_buf_putc(&b, ',');
    cg_json_put_double(&b, 1e300 * 1e10);
    cg_buf_putc(&b, ']');
    cg_json_t j;
    cg_json_init(&j, 16);
    assert_int_equal(cg_json_parse(&j, b.p, b.len), CG_JSON_OK);
    double v = 1;
    assert_true(cg_json_number(&j, 1, &v));
    assert_true(isfinite(v));
    cg_json_free(&j);
    cg_buf_free(&b);
}

/* A cut never falls inside an escape, a surrogate pair's two escapes or a
 * UTF-8 sequence; a lone half is one escape. */
static void test_safe_cut_keeps_characters(void **state)
{
    (void)state;
    static const char s[] = "ab\\ud83d\\ude00c\xe2\x98\x95\\u00e9\\ud83dx\\n";
    /* offsets: a0 b1 pair 2..13 c14 cup 15..17 e-acute 18..23 lone 24..29 x30 \n 31..32 */
    static const size_t at[] = {0, 1, 2, 14, 15, 18, 24, 30, 31, 33};
    size_t n = sizeof(s) - 1;
    for (size_t max = 1; max < n; max++) {
        size_t cut = cg_json_safe_cut(s, n, max), want = 0;
        for (size_t k = 0; k < sizeof(at) / sizeof(at[0]) && at[k] <= max; k++)
            want = at[k];
        if (cut != want)
            fail_msg("max %zu: cut at %zu, want %zu", max, cut, want);
    }
    assert_int_equal(cg_json_safe_cut(s, n, n), n);
    assert_int_equal(cg_json_safe_cut(s + 2, n - 2, 5), 12); /* the pair, though over max */
}

/* ---- cg_utf8_cut -------------------------------------------------------------- */

static void test_utf8_cut(void **state)
{
    (void)state;
    static const char two[] = "a\xC3\xA9";            /* a é */
    static const char three[] = "ab\xE2\x82\xAC";     /* ab € */
    static const char four[] = "abc\xF0\x9F\x98\x80"; /* abc 😀 */
    static const char mixed[] = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z";

    assert_int_equal(cg_utf8_cut("hello", 5), 5);
    assert_int_equal(cg_utf8_cut("hello", 3), 3);
    assert_int_equal(cg_utf8_cut("", 0), 0);

    assert_int_equal(cg_utf8_cut(two, 1), 1);
    assert_int_equal(cg_utf8_cut(two, 2), 1); /* inside é */
    assert_int_equal(cg_utf8_cut(two, 3), 3);

    assert_int_equal(cg_utf8_cut(three, 2), 2);
    assert_int_equal(cg_utf8_cut(three, 3), 2);
    assert_int_equal(cg_utf8_cut(three, 4), 2);
    assert_int_equal(cg_utf8_cut(three, 5), 5);

    assert_int_equal(cg_utf8_cut(four, 3), 3);
    assert_int_equal(cg_utf8_cut(four, 4), 3);
    assert_int_equal(cg_utf8_cut(four, 5), 3);
    assert_int_equal(cg_utf8_cut(four, 6), 3);
    assert_int_equal(cg_utf8_cut(four, 7), 7);

    assert_int_equal(cg_utf8_cut(mixed, 1), 0);
    assert_int_equal(cg_utf8_cut(mixed, 2), 2);
    assert_int_equal(cg_utf8_cut(mixed, 3), 2);
    assert_int_equal(cg_utf8_cut(mixed, 4), 2);
    assert_int_equal(cg_utf8_cut(mixed, 5), 5);
    assert_int_equal(cg_utf8_cut(mixed, 6), 5);
    assert_int_equal(cg_utf8_cut(mixed, 8), 5);
    assert_int_equal(cg_utf8_cut(mixed, 9), 9);
    assert_int_equal(cg_utf8_cut(mixed, 10), 10);

    /* every cut of a mixed string ends on a boundary and never grows */
    for (size_t n = 0; n <= sizeof(mixed) - 1; n++) {
        size_t c = cg_utf8_cut(mixed, n);
        assert_true(c <= n);
        assert_true(n - c < 4);
        assert_true(c == 0 || c == 2 || c == 5 || c == 9 || c == 10);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_object),
        cmocka_unit_test(test_parse_array),
        cmocka_unit_test(test_parse_whitespace),
        cmocka_unit_test(test_parse_two_values),
        cmocka_unit_test(test_parse_truncated),
        cmocka_unit_test(test_parse_nul_byte),
        cmocka_unit_test(test_parse_token_growth),
        cmocka_unit_test(test_store),
        cmocka_unit_test(test_parse_top_level_scalar),
        cmocka_unit_test(test_parse_not_json),
        cmocka_unit_test(test_parse_raw_control_in_string),
        cmocka_unit_test(test_parse_depth),
        cmocka_unit_test(test_opens),
        cmocka_unit_test(test_parse_matches_grammar),
        cmocka_unit_test(test_plain_len_stops),
        cmocka_unit_test(test_get_skip),
        cmocka_unit_test(test_raw_begin_end),
        cmocka_unit_test(test_number),
        cmocka_unit_test(test_strdup_escapes),
        cmocka_unit_test(test_unescape),
        cmocka_unit_test(test_unescape_room_invalid_escape),
        cmocka_unit_test(test_put_escaped),
        cmocka_unit_test(test_escape_roundtrip),
        cmocka_unit_test(test_put_double),
        cmocka_unit_test(test_safe_cut_keeps_characters),
        cmocka_unit_test(test_utf8_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
