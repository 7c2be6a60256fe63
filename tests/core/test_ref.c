/* Reference finder: leftmost-match semantics, holding, splits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Renders text as is and references as <kind:N|written>. */
typedef struct rec {
    cg_buf_t out;
    int refs;
} rec_t;

static void on_text(void *ctx, const char *p, size_t n, bool stable)
{
    (void)stable;
    cg_buf_put(&((rec_t *)ctx)->out, p, n);
}

static char kind_letter(cg_ref_style_t kind)
{
    return kind == CG_REF_DOC ? 'd' : kind == CG_REF_CITATION ? 'c' : 'n';
}

static void on_ref(void *ctx, cg_ref_style_t kind, unsigned n, const char *text, size_t len)
{
    rec_t *r = ctx;
    r->refs++;
    cg_buf_printf(&r->out, "<%c:%u|%.*s>", kind_letter(kind), n, (int)len, text);
}

/* Feeds s in pieces of the given size (0: whole), flushes, returns output. */
static char *scan(cg_ref_style_t style, const char *s, size_t piece)
{
    rec_t r = {0};
    cg_ref_sink_t sink = {on_text, on_ref, &r};
    cg_ref_t ref;
    cg_ref_init(&ref, style);
    size_t n = strlen(s);
    if (piece == 0)
        piece = n ? n : 1;
    for (size_t i = 0; i < n; i += piece)
        cg_ref_feed(&ref, s + i, n - i < piece ? n - i : piece, &sink);
    cg_ref_flush(&ref, &sink);
    cg_buf_putc(&r.out, '\0');
    return r.out.p;
}

/* Expected output by an independent, obviously-correct scan (regex semantics). */
static char *oracle(cg_ref_style_t style, const char *s)
{
    cg_buf_t b = {0};
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        cg_ref_style_t kind = 0;
        if (s[j] == '[') {
            j++;
            if ((style & CG_REF_DOC) && strncmp(s + j, "doc", 3) == 0 && s[j + 3] >= '0' &&
                s[j + 3] <= '9') {
                kind = CG_REF_DOC;
                j += 3;
            } else if ((style & CG_REF_CITATION) && strncmp(s + j, "citation:", 9) == 0) {
                kind = CG_REF_CITATION;
                j += 9;
            } else if ((style & CG_REF_NUMERIC) && s[j] >= '0' && s[j] <= '9') {
                kind = CG_REF_NUMERIC;
            }
        }
        if (kind) {
            size_t d = 0;
            unsigned v = 0;
            while (d < 4 && s[j + d] >= '0' && s[j + d] <= '9')
                v = v * 10 + (unsigned)(s[j + d++] - '0');
            if (d >= 1 && s[j + d] == ']') {
                cg_buf_printf(&b, "<%c:%u|%.*s>", kind_letter(kind), v,
                              (int)(j + d + 1 - i), s + i);
                i = j + d + 1;
                continue;
            }
        }
        cg_buf_putc(&b, s[i++]);
    }
    cg_buf_putc(&b, '\0');
    return b.p;
}

static void expect(cg_ref_style_t style, const char *in, const char *want)
{
    for (size_t piece = 0; piece <= 10; piece++) {
        char *got = scan(style, in, piece);
        if (strcmp(got, want) != 0)
            fail_msg("in=\"%s\" piece=%zu\nwant %s\ngot  %s", in, piece, want, got);
        free(got);
    }
}

static void test_doc_basic(void **state)
{
    (void)state;
    expect(CG_REF_DOC, "a [doc1] b", "a <d:1|[doc1]> b");
    expect(CG_REF_DOC, "[doc1][doc22]", "<d:1|[doc1]><d:22|[doc22]>");
    expect(CG_REF_DOC, "[doc0001]", "<d:1|[doc0001]>");
    expect(CG_REF_DOC, "[doc12345]", "[doc12345]");
    expect(CG_REF_DOC, "[doc]", "[doc]");
    expect(CG_REF_DOC, "[1]", "[1]");
    expect(CG_REF_DOC, "**[doc2]**", "**<d:2|[doc2]>**");
}

static void test_leftmost(void **state)
{
    (void)state;
    expect(CG_REF_DOC, "[[doc1]]", "[<d:1|[doc1]>]");
    expect(CG_REF_DOC, "[doc1[doc2]", "[doc1<d:2|[doc2]>");
    expect(CG_REF_DOC, "[do[doc3]", "[do<d:3|[doc3]>");
    expect(CG_REF_NUMERIC, "[[2]", "[<n:2|[2]>");
    expect(CG_REF_NUMERIC, "[12345][1]", "[12345]<n:1|[1]>");
}

static void test_numeric_and_any(void **state)
{
    (void)state;
    expect(CG_REF_NUMERIC, "x [2][3].", "x <n:2|[2]><n:3|[3]>.");
    expect(CG_REF_NUMERIC, "[doc1]", "[doc1]");
    expect(CG_REF_ANY, "[doc1] and [2]", "<d:1|[doc1]> and <n:2|[2]>");
}

static void test_citation(void **state)
{
    (void)state;
    expect(CG_REF_CITATION, "a [citation:1] b", "a <c:1|[citation:1]> b");
    expect(CG_REF_CITATION, "[citation:1][citation:0042]",
           "<c:1|[citation:1]><c:42|[citation:0042]>");
    expect(CG_REF_CITATION, "[citation:12345]", "[citation:12345]");
    expect(CG_REF_CITATION, "[citation:]", "[citation:]");
    expect(CG_REF_CITATION, "[citation 1] [Citation:1] [citations:1]",
           "[citation 1] [Citation:1] [citations:1]");
    expect(CG_REF_CITATION, "[1] [doc1]", "[1] [doc1]");
    expect(CG_REF_CITATION, "[citat[citation:3]", "[citat<c:3|[citation:3]>");
    expect(CG_REF_CITATION, "[[citation:9]]", "[<c:9|[citation:9]>]");
    expect(CG_REF_NUMERIC, "[citation:1]", "[citation:1]");
    expect(CG_REF_ANY, "[doc1] [2] [citation:3] [c4]",
           "<d:1|[doc1]> <n:2|[2]> <c:3|[citation:3]> [c4]");
    expect(CG_REF_NUMERIC | CG_REF_CITATION, "[doc1][citation:2][3]",
           "[doc1]<c:2|[citation:2]><n:3|[3]>");
}

/* Cut anywhere, in two and in three pieces: the same references. */
static void test_citation_every_split(void **state)
{
    (void)state;
    static const char in[] = "x[citation:1234][citation:5]y[citat[citation:06]";
    static const char want[] =
        "x<c:1234|[citation:1234]><c:5|[citation:5]>y[citat<c:6|[citation:06]>";
    size_t n = sizeof(in) - 1;
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            rec_t r = {0};
            cg_ref_sink_t sink = {on_text, on_ref, &r};
            cg_ref_t ref;
            cg_ref_init(&ref, CG_REF_ANY);
            cg_ref_feed(&ref, in, a, &sink);
            cg_ref_feed(&ref, in + a, b - a, &sink);
            cg_ref_feed(&ref, in + b, n - b, &sink);
            cg_ref_flush(&ref, &sink);
            cg_buf_putc(&r.out, '\0');
            if (strcmp(r.out.p, want) != 0)
                fail_msg("cuts %zu,%zu\nwant %s\ngot  %s", a, b, want, r.out.p);
            cg_buf_free(&r.out);
        }
    }
}

/* The longest candidate fits the held bytes, and one more digit ends it. */
static void test_citation_held_bound(void **state)
{
    (void)state;
    rec_t r = {0};
    cg_ref_sink_t sink = {on_text, on_ref, &r};
    cg_ref_t ref;
    cg_ref_init(&ref, CG_REF_CITATION);
    cg_ref_feed(&ref, "[citation:1234", 14, &sink);
    assert_int_equal(cg_ref_held(&ref), CG_REF_HELD_MAX);
    assert_int_equal(r.out.len, 0);
    cg_ref_feed(&ref, "5", 1, &sink);
    assert_int_equal(cg_ref_held(&ref), 0);
    cg_ref_feed(&ref, "[citation:", 10, &sink);
    assert_int_equal(cg_ref_held(&ref), 10);
    cg_ref_feed(&ref, "7]", 2, &sink);
    assert_int_equal(r.refs, 1);
    cg_buf_putc(&r.out, '\0');
    assert_string_equal(r.out.p, "[citation:12345<c:7|[citation:7]>");
    cg_buf_free(&r.out);
}

/* Narrowing the forms drops a candidate of another form to text. */
static void test_narrowing(void **state)
{
    (void)state;
    rec_t r = {0};
    cg_ref_sink_t sink = {on_text, on_ref, &r};
    cg_ref_t ref;
    cg_ref_init(&ref, CG_REF_ANY);
    cg_ref_feed(&ref, "[cita", 5, &sink);
    cg_ref_set_styles(&ref, CG_REF_NUMERIC);
    cg_ref_feed(&ref, "tion:1] [2]", 11, &sink);
    cg_buf_putc(&r.out, '\0');
    assert_string_equal(r.out.p, "[citation:1] <n:2|[2]>");
    cg_buf_free(&r.out);
}

static void test_unfinished_flushes(void **state)
{
    (void)state;
    expect(CG_REF_DOC, "tail [doc", "tail [doc");
    expect(CG_REF_DOC, "tail [doc12", "tail [doc12");
    expect(CG_REF_NUMERIC, "[", "[");
    expect(CG_REF_CITATION, "tail [citation:12", "tail [citation:12");
}

static void test_holds_only_prefix(void **state)
{
    (void)state;
    rec_t r = {0};
    cg_ref_sink_t sink = {on_text, on_ref, &r};
    cg_ref_t ref;
    cg_ref_init(&ref, CG_REF_DOC);
    cg_ref_feed(&ref, "abc [do", 7, &sink);
    assert_int_equal(cg_ref_held(&ref), 3);
    assert_int_equal(r.out.len, 4); /* "abc " went out at once */
    cg_ref_feed(&ref, "x", 1, &sink);
    assert_int_equal(cg_ref_held(&ref), 0);
    cg_ref_feed(&ref, "[doc9", 5, &sink);
    assert_int_equal(cg_ref_held(&ref), 5);
    cg_ref_feed(&ref, "]", 1, &sink);
    assert_int_equal(cg_ref_held(&ref), 0);
    assert_int_equal(r.refs, 1);
    cg_buf_putc(&r.out, '\0');
    assert_string_equal(r.out.p, "abc [dox<d:9|[doc9]>");
    cg_buf_free(&r.out);
}

/* Random strings over a reference-heavy alphabet (whole words of the forms,
 * pieces of them, digits), random splits: the finder must agree with the
 * oracle. */
static void test_random_against_oracle(void **state)
{
    (void)state;
    static const char *const pieces[] = {"[", "[", "]", "]", "d", "doc", "c", "citat", "citation:",
                                         ":", "0", "1", "23", "4567", " ", "x", "\\n"};
    const int npieces = (int)(sizeof(pieces) / sizeof(pieces[0]));
    srand(7);
    char s[160];
    for (int round = 0; round < 40000; round++) {
        size_t n = 0, want_n = (size_t)(rand() % 60);
        while (n < want_n) {
            const char *p = pieces[rand() % npieces];
            size_t len = strlen(p);
            if (n + len >= sizeof(s))
                break;
            memcpy(s + n, p, len);
            n += len;
        }
        s[n] = '\0';
        cg_ref_style_t style = (cg_ref_style_t)(1 + rand() % 7);
        char *want = oracle(style, s);
        char *got = scan(style, s, (size_t)(rand() % 6));
        if (strcmp(want, got) != 0)
            fail_msg("style %d in \"%s\"\nwant %s\ngot  %s", style, s, want, got);
        free(want);
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doc_basic),
        cmocka_unit_test(test_leftmost),
        cmocka_unit_test(test_numeric_and_any),
        cmocka_unit_test(test_citation),
        cmocka_unit_test(test_citation_every_split),
        cmocka_unit_test(test_citation_held_bound),
        cmocka_unit_test(test_narrowing),
        cmocka_unit_test(test_unfinished_flushes),
        cmocka_unit_test(test_holds_only_prefix),
        cmocka_unit_test(test_random_against_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
