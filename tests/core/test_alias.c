/* Citation aliases (SPEC §7, structured): what is a PATH and a BOX, every
 * spelling and the near misses; the request rewrite (escapes, text parts,
 * member names, clashes, messages left alone); and, over random tool
 * outputs, that every aliased string expands back to exactly itself and
 * the rewritten JSON keeps its shape. */
#include "citegate/alias.h"
#include "citegate/json.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static bool path(const char *s)
{
    return cg_alias_is_path(s, strlen(s));
}

static bool box(const char *s)
{
    return cg_alias_is_box(s, strlen(s));
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(path("/data/lake/a.pdf"));                 /* exactly 16 */
    assert_true(path("abfss://docs@lake.dfs.core.windows.net/contracts/2024/a.pdf"));
    assert_true(path("https://example.com/a"));
    assert_true(path("s3://bucket/key/doc.pdf"));
    assert_true(path("HTTPS://EXAMPLE.COM/X"));
    assert_true(path("git+ssh://host/repo.git"));
    assert_true(path("/caf\xc3\xa9/documents/x")); /* bytes above ASCII are not white space */
    assert_false(path("/data/lake/a.pd"));        /* 15 bytes */
    assert_false(path("/data/lake/a b.pdf"));     /* a space inside */
    assert_false(path("/data/lake/a\tb.pdf"));
    assert_false(path("/data/lake/a.pdf\n"));
    assert_false(path("/data/lake/a\x7f.pdf"));
    assert_false(path("/data/lake/a\x01.pdf"));
    assert_false(path("data/lake/a/b/c.pdf"));    /* relative */
    assert_false(path("https:/example.com/a/b")); /* one slash */
    assert_false(path("://example.com/a/b/c"));   /* no scheme */
    assert_false(path("1http://example.com/a"));  /* a scheme starts with a letter */
    assert_false(path("ht_tp://example.com/ab"));
    assert_false(path(" /data/lake/a.pdf"));
    assert_false(path(""));
    /* a NUL inside is a control byte */
    assert_false(cg_alias_is_path("/data/lake/a\0b.pdf", 18));
}

static void test_boxes(void **state)
{
    (void)state;
    assert_true(box("D(1,1.02,2.33,3.1,2.33,3.1,2.61,1.02,2.61)"));
    assert_true(box("D(1,1.02,2.33,3.1,2.33,3.1,2.61,1.02,2.61);D(2,0,0,8.5,0,8.5,11,0,11)"));
    assert_true(box("D(1, 1.02, 2.33,  3.1, 2.33, 3.1, 2.61, 1.02, 2.61)"));
    assert_true(box("D(12,-0.5,+2,3,4,5,6,7,8)"));
    assert_true(box("D(1,1,1,1,1,1,1,1,1)"));
    assert_false(box("D(1,1.02,2.33,3.1,2.33,3.1,2.61,1.02)"));           /* 8 numbers */
    assert_false(box("D(1,1.02,2.33,3.1,2.33,3.1,2.61,1.02,2.61,4)"));    /* 10 */
    assert_false(box("D(1.5,1,1,1,1,1,1,1,1)"));                          /* page not whole */
    assert_false(box("D(-1,1,1,1,1,1,1,1,1)"));                           /* page signed */
    assert_false(box("D(1 ,1,1,1,1,1,1,1,1)"));                           /* space before */
    assert_false(box("D (1,1,1,1,1,1,1,1,1)"));
    assert_false(box("d(1,1,1,1,1,1,1,1,1)"));
    assert_false(box("D(1,1,1,1,1,1,1,1,1);"));                           /* trailing ; */
    assert_false(box("D(1,1,1,1,1,1,1,1,1); D(2,1,1,1,1,1,1,1,1)"));      /* space after ; */
    assert_false(box("D(1,.5,1,1,1,1,1,1,1)"));
    assert_false(box("D(1,1.,1,1,1,1,1,1,1)"));
    assert_false(box("D(1,1e3,1,1,1,1,1,1,1)"));
    assert_false(box("D(1,1,1,1,1,1,1,1,1"));
    assert_false(box("D(1,1,1,1,1,1,1,1,1)x"));
    assert_false(box("D()"));
    assert_false(box(""));
}

/* --- the request rewrite --------------------------------------------------------- */

typedef struct made {
    cg_request_t req;
    cg_aliases_t *a;
    cg_buf_t out;
} made_t;

static void make(made_t *m, const char *body)
{
    cg_cite_opts_t o = {8192, true};
    memset(m, 0, sizeof(*m));
    assert_int_equal(cg_request_parse(&m->req, body, strlen(body), &o), 0);
    m->a = cg_aliases_make(&m->req, body, strlen(body), &m->out);
    cg_buf_putc(&m->out, '\0');
}

static void unmake(made_t *m)
{
    cg_aliases_free(m->a);
    cg_request_free(&m->req);
    cg_buf_free(&m->out);
}

static void expands(const made_t *m, const char *alias, const char *want, size_t tool)
{
    cg_span_t orig;
    int id = cg_aliases_find(m->a, alias, strlen(alias), &orig);
    assert_true(id >= 0);
    if (orig.n != strlen(want) || memcmp(orig.p, want, orig.n) != 0)
        fail_msg("%s stands for '%.*s', want '%s'", alias, (int)orig.n, orig.p, want);
    assert_true(cg_aliases_in_tool(m->a, id, tool));
}

#define BOX1 "D(1,1.02,2.33,3.1,2.33,3.1,2.61,1.02,2.61)"
#define BOX2 "D(2,0,0,8.5,0,8.5,11,0,11)"

static void test_rewrites_tool_messages_only(void **state)
{
    (void)state;
    made_t m;
    make(&m, "{\"model\":\"m\",\"messages\":["
             "{\"role\":\"user\",\"content\":\"cite /data/lake/contracts/a.pdf\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":"
             "\"{\\\"/data/lake/contracts/key.pdf\\\": 1, \\\"fields\\\": [{\\\"path\\\": "
             "\\\"/data/lake/contracts/a.pdf\\\", \\\"box\\\": \\\"" BOX1 "\\\", \\\"n\\\": 2.5},"
             " {\\\"path\\\": \\\"/data/lake/contracts/a.pdf\\\", \\\"box\\\": \\\"" BOX2 "\\\"}]}\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"2\",\"content\":\"not json /data/lake/contracts/a.pdf\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"3\",\"content\":[{\"type\":\"text\",\"text\":"
             "\"[\\\"/data/lake/contracts/b.pdf\\\", \"},{\"type\":\"text\",\"text\":\"\\\"" BOX1
             "\\\"]\"}]}],\"stream\":true}");
    assert_non_null(m.a);
    assert_string_equal(m.out.p,
        "{\"model\":\"m\",\"messages\":["
        "{\"role\":\"user\",\"content\":\"cite /data/lake/contracts/a.pdf\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":"
        "\"{\\\"/data/lake/contracts/key.pdf\\\": 1, \\\"fields\\\": [{\\\"path\\\": \\\"P1\\\", "
        "\\\"box\\\": \\\"B1\\\", \\\"n\\\": 2.5}, {\\\"path\\\": \\\"P1\\\", \\\"box\\\": \\\"B2\\\"}]}\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"2\",\"content\":\"not json /data/lake/contracts/a.pdf\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"3\",\"content\":[{\"type\":\"text\",\"text\":"
        "\"[\\\"P2\\\", \\\"B1\\\"]\"},{\"type\":\"text\",\"text\":\"\"}]}],\"stream\":true}");
    assert_int_equal(cg_aliases_count(m.a), 4);
    /* 3 PATH and 3 BOX occurrences, each its raw length minus its alias's */
    uint64_t want = 3 * (26 - 2) + 2 * (sizeof(BOX1) - 1 - 2) + (sizeof(BOX2) - 1 - 2);
    assert_int_equal(cg_aliases_saved(m.a), want);
    expands(&m, "P1", "/data/lake/contracts/a.pdf", 0);
    expands(&m, "P2", "/data/lake/contracts/b.pdf", 2);
    expands(&m, "B1", BOX1, 0);
    expands(&m, "B1", BOX1, 2);
    expands(&m, "B2", BOX2, 0);
    cg_span_t orig;
    int p1 = cg_aliases_find(m.a, "P1", 2, &orig);
    assert_false(cg_aliases_in_tool(m.a, p1, 1)); /* not JSON: nothing was aliased there */
    assert_false(cg_aliases_in_tool(m.a, p1, 2));
    assert_int_equal(cg_aliases_find(m.a, "P3", 2, &orig), -1);
    assert_int_equal(cg_aliases_find(m.a, "B3", 2, &orig), -1);
    assert_int_equal(cg_aliases_find(m.a, "P01", 3, &orig), -1);
    assert_int_equal(cg_aliases_find(m.a, "P0", 2, &orig), -1);
    assert_int_equal(cg_aliases_find(m.a, "p1", 2, &orig), -1);
    assert_int_equal(cg_aliases_find(m.a, "P1 ", 3, &orig), -1);
    unmake(&m);
}

static void test_escapes_on_both_sides(void **state)
{
    (void)state;
    made_t m;
    /* The outer string escapes the inner one's escapes: \/ , \u00e9 and a
     * surrogate pair (U+1F600) inside the path, and é written as \u00e9 in
     * the outer string only. */
    make(&m, "{\"messages\":[{\"role\":\"tool\",\"content\":"
             "\"[\\\"abfss:\\\\/\\\\/c@lake\\\\/caf\\\\u00e9\\\\/\\\\ud83d\\\\ude00.pdf\\\","
             " \\\"\\u00e9t\\u00e9 /data/lake/x\\\"]\"}]}");
    assert_non_null(m.a);
    assert_string_equal(m.out.p, "{\"messages\":[{\"role\":\"tool\",\"content\":"
                                 "\"[\\\"P1\\\", \\\"\xc3\xa9t\xc3\xa9 /data/lake/x\\\"]\"}]}");
    expands(&m, "P1", "abfss://c@lake/caf\xc3\xa9/\xf0\x9f\x98\x80.pdf", 0);
    /* escaped as written: the inner raw string minus "P1" */
    assert_int_equal(cg_aliases_saved(m.a),
                     strlen("abfss:\\/\\/c@lake\\/caf\\u00e9\\/\\ud83d\\ude00.pdf") - 2);
    unmake(&m);
}

static void test_nothing_to_alias(void **state)
{
    (void)state;
    made_t m;
    static const char *const bodies[] = {
        /* a would-be alias already in a tool output */
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"[\\\"/data/lake/contracts/a.pdf\\\"]\"},"
        "{\"role\":\"tool\",\"content\":\"{\\\"ref\\\":\\\"P1\\\"}\"}]}",
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"[\\\"" BOX1 "\\\", \\\"" BOX2 "\\\", \\\"B2\\\"]\"}]}",
        /* not JSON, or nothing that is a PATH or a BOX */
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"{\\\"a\\\": /data/lake/contracts/a.pdf}\"}]}",
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"[\\\"/short\\\", 1, true, null]\"}]}",
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"[1] [2]\"}]}",
        /* in a member name only */
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"{\\\"/data/lake/contracts/a.pdf\\\": 1}\"}]}",
        /* other roles */
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"[\\\"/data/lake/contracts/a.pdf\\\"]\"},"
        "{\"role\":\"user\",\"content\":\"\\\"/data/lake/contracts/a.pdf\\\"\"}]}",
        "{\"messages\":[]}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        make(&m, bodies[i]);
        if (m.a != NULL)
            fail_msg("aliased: %s", bodies[i]);
        assert_int_equal(m.out.len, 1); /* untouched but for our NUL */
        unmake(&m);
    }
    /* A higher number than would be made is no clash; nor is a name. */
    make(&m, "{\"messages\":[{\"role\":\"tool\",\"content\":"
             "\"{\\\"P1\\\": [\\\"/data/lake/contracts/a.pdf\\\", \\\"P2\\\", \\\"B1\\\"]}\"}]}");
    assert_non_null(m.a);
    assert_string_equal(m.out.p, "{\"messages\":[{\"role\":\"tool\",\"content\":"
                                 "\"{\\\"P1\\\": [\\\"P1\\\", \\\"P2\\\", \\\"B1\\\"]}\"}]}");
    unmake(&m);
}

static void test_bare_string_and_moved(void **state)
{
    (void)state;
    made_t m;
    const char *body = "{\"messages\":[{\"role\":\"tool\",\"content\":\"\\\"s3://bucket/contracts/a.pdf\\\"\"}],"
                       "\"data_sources\":null}";
    make(&m, body);
    assert_non_null(m.a);
    assert_string_equal(m.out.p, "{\"messages\":[{\"role\":\"tool\",\"content\":\"\\\"P1\\\"\"}],"
                                 "\"data_sources\":null}");
    size_t off = m.req.data_sources_off;
    assert_memory_equal(body + off, "null", 4);
    assert_memory_equal(m.out.p + cg_aliases_moved(m.a, off), "null", 4);
    unmake(&m);
}

/* A tool output nested up to CG_JSON_MAX_DEPTH is read like any other;
 * deeper, it is not JSON to the parser, as a request would not be, and goes
 * as it came (quickly: 100,000 levels). */
static void deep_tool(unsigned depth, bool aliased)
{
    cg_buf_t body = {0};
    cg_buf_puts(&body, "{\"messages\":[{\"role\":\"tool\",\"content\":\"[\\\"");
    for (int i = 0; i < CG_JSON_SHALLOW_BYTES; i++) /* past the size that is not scanned */
        cg_buf_putc(&body, 'x');
    cg_buf_puts(&body, "\\\"");
    for (unsigned i = 1; i < depth; i++)
        cg_buf_puts(&body, i == 1 ? ",{\\\"k\\\":" : i % 2 ? "{\\\"k\\\":" : "[");
    cg_buf_puts(&body, "\\\"/data/lake/contracts/a.pdf\\\"");
    for (unsigned i = depth - 1; i >= 1; i--)
        cg_buf_puts(&body, i % 2 ? "}" : "]");
    cg_buf_puts(&body, "]\"}]}");
    cg_buf_putc(&body, '\0');
    made_t m;
    make(&m, body.p);
    if (aliased) {
        assert_non_null(m.a);
        assert_int_equal(m.out.len, body.len - 26 + 2); /* the path became P1; the NULs cancel */
        assert_non_null(strstr(m.out.p, "{\\\"k\\\":\\\"P1\\\"}"));
    } else {
        assert_null(m.a);
    }
    unmake(&m);
    cg_buf_free(&body);
}

static void test_deep_nesting(void **state)
{
    (void)state;
    deep_tool(CG_JSON_MAX_DEPTH, true);
    deep_tool(CG_JSON_MAX_DEPTH + 1, false);
    deep_tool(100000, false);
}

/* Every tool message counts, however many: a would-be alias in the 300th
 * stops aliasing, and a PATH in the 299th gets its alias there. */
static void test_many_tool_messages(void **state)
{
    (void)state;
    for (int clash = 0; clash < 2; clash++) {
        cg_buf_t body = {0};
        cg_buf_puts(&body, "{\"messages\":[");
        for (int i = 0; i < 300; i++)
            cg_buf_printf(&body, "%s{\"role\":\"tool\",\"content\":\"[\\\"%s\\\"]\"}",
                          i ? "," : "",
                          i == 298 ? "/data/lake/contracts/a.pdf" : i == 299 && clash ? "P1" : "x");
        cg_buf_puts(&body, "]}");
        cg_buf_putc(&body, '\0');
        made_t m;
        make(&m, body.p);
        assert_int_equal(m.req.ntools, 300);
        if (clash) {
            assert_null(m.a);
        } else {
            assert_non_null(m.a);
            expands(&m, "P1", "/data/lake/contracts/a.pdf", 298);
        }
        unmake(&m);
        cg_buf_free(&body);
    }
}

/* --- property: alias, then expand --------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;

static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A random string value, decoded into s; PATHs and BOXes from a small set
 * so that they repeat. */
static void random_string(cg_buf_t *s)
{
    static const char *const paths[] = {
        "/data/lake/contracts/a.pdf", "abfss://docs@lake.dfs.core.windows.net/x/y.pdf",
        "https://example.com/caf\xc3\xa9/\xf0\x9f\x98\x80", "s3://bucket/\"quoted\"\\/key.pdf"};
    static const char *const boxes[] = {BOX1, BOX2, BOX1 ";" BOX2, "D(3, -1, +2, 3.5, 4, 5, 6, 7, 8)"};
    static const char *const others[] = {"", "P", "value", "/short", "D(1,2)", "x y /data/lake/a.pdf",
                                         "\x01\n\t", "B0", "P01"};
    switch (rnd(3)) {
    case 0: cg_buf_puts(s, paths[rnd(4)]); break;
    case 1: cg_buf_puts(s, boxes[rnd(4)]); break;
    default: cg_buf_puts(s, others[rnd(9)]); break;
    }
}

/* Writes s as a JSON string, with a random choice of escapes. */
static void put_random_escaped(cg_buf_t *o, const char *s, size_t n)
{
    cg_buf_putc(o, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) /* UTF-8 goes as it is */
            cg_buf_putc(o, (char)c);
        else if (c == '"' || c == '\\' || c < 0x20 || rnd(8) == 0)
            cg_buf_printf(o, rnd(2) && c == '/' ? "\\/" : "\\u%04x", c);
        else
            cg_buf_putc(o, (char)c);
    }
    cg_buf_putc(o, '"');
}

/* A random JSON value; every string value's decoded form goes to vals. */
static void random_value(cg_buf_t *o, int depth, cg_buf_t *vals, size_t *nvals)
{
    unsigned k = depth > 4 ? 2 + rnd(3) : rnd(5);
    cg_buf_t s = {0};
    switch (k) {
    case 0:
    case 1: {
        bool obj = k == 0;
        cg_buf_putc(o, obj ? '{' : '[');
        unsigned n = rnd(5);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                cg_buf_puts(o, rnd(2) ? "," : " , ");
            if (obj) {
                random_string(&s);
                put_random_escaped(o, s.p, s.len); /* a name: never aliased */
                s.len = 0;
                cg_buf_putc(o, ':');
            }
            random_value(o, depth + 1, vals, nvals);
        }
        cg_buf_putc(o, obj ? '}' : ']');
        break;
    }
    case 2:
    case 3:
        random_string(&s);
        put_random_escaped(o, s.p, s.len);
        cg_buf_put(vals, s.p, s.len);
        cg_buf_putc(vals, '\0');
        (*nvals)++;
        break;
    default: cg_buf_puts(o, rnd(2) ? "-12.5e3" : "null"); break;
    }
    cg_buf_free(&s);
}

/* Walks the string values of tool text t in order, checking each against
 * the next decoded original. */
static void check_tool(const made_t *m, size_t tool, cg_span_t t, const char **want)
{
    cg_buf_t wrap = {0};
    cg_buf_putc(&wrap, '[');
    cg_buf_put(&wrap, t.p, t.n);
    cg_buf_putc(&wrap, ']');
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    assert_int_equal(cg_json_parse(&j, wrap.p, wrap.len), CG_JSON_OK);
    for (int i = 1; i < j.ntok; i++) {
        int p = j.tok[i].parent;
        if (j.tok[i].type != JSMN_STRING || (p >= 0 && j.tok[p].type == JSMN_OBJECT))
            continue;
        size_t n;
        char *s = cg_json_strdup(&j, i, &n);
        size_t wn = strlen(*want);
        bool aliased = cg_alias_is_path(*want, wn) || cg_alias_is_box(*want, wn);
        if (aliased) {
            cg_span_t orig;
            int id = cg_aliases_find(m->a, s, n, &orig);
            assert_true(id >= 0);
            assert_int_equal(orig.n, wn);
            assert_memory_equal(orig.p, *want, wn);
            assert_true(cg_aliases_in_tool(m->a, id, tool));
        } else {
            assert_int_equal(n, wn);
            assert_memory_equal(s, *want, n);
        }
        *want += wn + 1;
        free(s);
    }
    cg_json_free(&j);
    cg_buf_free(&wrap);
}

static void test_property_alias_then_expand(void **state)
{
    (void)state;
    int aliased = 0;
    for (int round = 0; round < 400; round++) {
        cg_buf_t body = {0}, vals = {0};
        size_t nvals = 0, ntools = 1 + rnd(4);
        cg_buf_puts(&body, "{\"messages\":[");
        for (size_t t = 0; t < ntools; t++) {
            cg_buf_t tool = {0};
            random_value(&tool, 0, &vals, &nvals);
            cg_buf_puts(&body, t ? ",{\"role\":\"tool\",\"content\":" : "{\"role\":\"tool\",\"content\":");
            cg_json_put_str(&body, tool.p, tool.len);
            cg_buf_putc(&body, '}');
            cg_buf_free(&tool);
        }
        cg_buf_puts(&body, "]}");
        cg_buf_putc(&body, '\0');
        made_t m;
        make(&m, body.p);
        if (m.a) {
            aliased++;
            /* the body sent upstream parses, and its tools hold the same values */
            cg_cite_opts_t o = {8192, true};
            cg_request_t up;
            assert_int_equal(cg_request_parse(&up, m.out.p, m.out.len - 1, &o), 0);
            assert_int_equal(up.ntools, ntools);
            const char *want = vals.p;
            for (size_t t = 0; t < ntools; t++)
                check_tool(&m, t, up.tools[t], &want);
            cg_request_free(&up);
        }
        unmake(&m);
        cg_buf_free(&body);
        cg_buf_free(&vals);
    }
    assert_true(aliased > 100); /* the rounds test what they are for */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_boxes),
        cmocka_unit_test(test_rewrites_tool_messages_only),
        cmocka_unit_test(test_escapes_on_both_sides),
        cmocka_unit_test(test_nothing_to_alias),
        cmocka_unit_test(test_bare_string_and_moved),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_many_tool_messages),
        cmocka_unit_test(test_property_alias_then_expand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
