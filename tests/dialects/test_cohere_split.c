/*
 * SPEC §6a, fidelity under every split: each cohere stream fixture, cut
 * into two reads at every byte (inside events, JSON escapes, UTF-8
 * sequences, the offsets of a citation; a sample of them under ASan,
 * tests/support/split.h) and into 300 random patterns of many reads,
 * gives the client the same bytes as in one read, so the same content, the
 * same references at the same places, the same citation events and the
 * same end, in every profile.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dialect_run.h"
#include "profiles.h"
#include "view.h"

static const struct {
    const char *body, *request; /* under tests/fixtures/dialects; request may be NULL */
} fixtures[] = {
    {"answers/cohere_documents_fast.sse", "rag_sources.request.json"},
    {"answers/cohere_documents_accurate.sse", "rag_sources.request.json"},
    {"answers/cohere_tool_fast.sse", NULL},
    {"answers/cohere_tool_accurate.sse", "answers/cohere_usage.request.json"},
    {"answers/cohere_cited_twice_fast.sse", NULL},
    {"answers/cohere_bad_spans.sse", NULL},
    {"answers/cohere_error.sse", "rag_sources.request.json"},
    {"answers/cohere_max_tokens.sse", "answers/cohere_usage.request.json"},
    {"answers/cohere_thinking.sse", "rag_sources.request.json"},
    {"answers/cohere_truncated.sse", "rag_sources.request.json"},
};

static const char *const profiles[] = {"openwebui", "openai",     "webchat",
                                       "markdown",  "structured", "off"};

static char *fixture(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/dialects/%s", CG_FIXTURES, name);
    return read_file(path, n);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* tally NULL: 300 random patterns; else the cuts of split.h (with this
 * phase when sampled), counted in tally. */
static void run_fixture(size_t f, const char *profile, size_t phase, split_tally_t *tally)
{
    size_t bn, rn = 0;
    char *body = fixture(fixtures[f].body, &bn);
    char *rbody = fixtures[f].request ? fixture(fixtures[f].request, &rn) : NULL;
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("cohere"), rbody, rn);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    char what[256];
    snprintf(what, sizeof(what), "%s/%s", fixtures[f].body, profile);

    cg_buf_t whole = {0};
    dialect_stream(&cfg, &c, body, bn, NULL, 0, &whole, NULL);
    view_t v;
    view_of_stream(&v, whole.p, whole.len);
    assert_true(v.events > 0);
    assert_true(v.max_line <= CG_XFORM_LINE_MAX);
    assert_true(v.ends_done != v.ends_error);
    view_free(&v);

    dialect_split_t ds = {&cfg, &c, what};
    split_case_t sc = dialect_split_case(&ds, body, bn);
    if (tally) {
        split_points_t sp;
        split_points_init(&sp, body, bn, phase);
        split_tally_add(tally, split_every(&sc, &sp, &whole), bn - 1);
        split_points_free(&sp);
    } else {
        split_random(&sc, 300, &rng, &whole);
    }
    cg_buf_free(&whole);
    dialect_case_free(&c);
    free(body);
    free(rbody);
}

static void test_every_byte_split(void **state)
{
    (void)state;
    split_tally_t tally = {0};
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], p, &tally);
    split_tally_print(&tally, "cohere fixtures x profiles");
}

static void test_random_splits(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], 0, NULL);
}

/* The property above compares runs with each other; this pins what they
 * agree on for two fixtures, read a byte at a time, so that all of them
 * being wrong the same way shows too. */
static void one_byte_reads(const char *name, const char *profile, const char *want_content,
                           bool done)
{
    size_t bn;
    char *body = fixture(name, &bn);
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("cohere"), NULL, 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    cg_buf_t out = {0};
    size_t sizes[] = {1};
    dialect_stream(&cfg, &c, body, bn, sizes, 1, &out, NULL);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, want_content);
    assert_int_equal(v.ends_done, done);
    assert_int_equal(v.ends_error, !done);
    view_free(&v);
    cg_buf_free(&out);
    dialect_case_free(&c);
    free(body);
}

static void test_split_content_is_the_answer(void **state)
{
    (void)state;
    one_byte_reads("answers/cohere_tool_fast.sse", "markdown",
                   "It is 24\xc2\xb0"
                   "C in Madrid[1](https://weather.example/madrid) and "
                   "28\xc2\xb0"
                   "C in Bras\xc3\xadlia.[2]\n\n**Sources**\n"
                   "1. [Weather in Madrid](https://weather.example/madrid)\n2. Unknown Document",
                   true);
    one_byte_reads("answers/cohere_truncated.sse", "off", "Half an ans[1]", false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte_split),
        cmocka_unit_test(test_random_splits),
        cmocka_unit_test(test_split_content_is_the_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
