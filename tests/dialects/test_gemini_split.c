/*
 * SPEC §6a, fidelity under every split: each gemini stream fixture, cut
 * into two reads at every byte (inside events, CRLF line ends, JSON escapes,
 * UTF-8 sequences and the error object's lines; a sample of them under
 * ASan, tests/support/split.h) and into 300 random patterns of many reads,
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
    {"answers/gemini_google_search.sse", "rag_sources.request.json"},
    {"answers/gemini_file_search.sse", NULL},
    {"answers/gemini_vertex_search.sse", NULL},
    {"answers/gemini_thinking.sse", NULL},
    {"answers/gemini_recitation.sse", NULL},
    {"answers/gemini_safety.sse", NULL},
    {"answers/gemini_blocked.sse", NULL},
    {"answers/gemini_error_503.sse", NULL},
    {"answers/gemini_error_after_finish.sse", NULL},
    {"answers/gemini_error_event.sse", NULL},
    {"answers/gemini_truncated.sse", NULL},
    {"answers/gemini_usage.sse", "answers/gemini_usage.request.json"},
    {"answers/gemini_offsets.sse", NULL},
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
    dialect_case_init(&c, dialect_named("gemini"), rbody, rn);
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
    split_tally_print(&tally, "gemini fixtures x profiles");
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
    dialect_case_init(&c, dialect_named("gemini"), NULL, 0);
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
    one_byte_reads(
        "answers/gemini_offsets.sse", "markdown",
        "Na\xc3\xafve caf\xc3\xa9 \xf0\x9f\x98\x80 \xc2\xabquote\xc2\xbb <b>bold</b> "
        "\xe2\x80\x94 the end. "
        "[1](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQb)"
        "[2](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQa)"
        "[3](https://c.example/c)\n\n**Sources**\n"
        "1. [b.example](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQb)\n"
        "2. [a.example](https://vertexaisearch.cloud.google.com/grounding-api-redirect/AUZIYQa)\n"
        "3. [C](https://c.example/c)",
        true);
    one_byte_reads("answers/gemini_error_503.sse", "openwebui",
                   "The first step is to open the back cover and unscrew the four T5 screws. Then ",
                   false);
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
