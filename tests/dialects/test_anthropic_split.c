/*
 * SPEC §6a, fidelity under every split: each anthropic stream fixture, cut
 * into two reads at every byte (inside events, line ends and UTF-8
 * sequences; a sample of them under ASan, tests/support/split.h) and into
 * 300 random patterns of many reads, gives the client the same bytes as in
 * one read, so the same content per choice, the same citation events and
 * the same end, in every profile.
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
    {"answers/anthropic_text.sse", NULL},
    {"answers/anthropic_usage.sse", "answers/anthropic_usage.request.json"},
    {"answers/anthropic_documents.sse", "rag_sources.request.json"},
    {"answers/anthropic_multi_block.sse", NULL},
    {"answers/anthropic_pages.sse", NULL},
    {"answers/anthropic_search_results.sse", NULL},
    {"answers/anthropic_web_search.sse", "answers/anthropic_usage.request.json"},
    {"answers/anthropic_thinking.sse", NULL},
    {"answers/anthropic_max_tokens.sse", NULL},
    {"answers/anthropic_error.sse", "rag_sources.request.json"},
    {"answers/anthropic_truncated.sse", "rag_sources.request.json"},
};

static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured", "off"};

static char *fixture(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/dialects/%s", CG_FIXTURES, name);
    return read_file(path, n);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;

/* tally NULL: 300 random patterns; else the cuts of split.h (with this
 * phase when sampled), counted in tally. */
static void run_fixture(size_t f, const char *profile, size_t phase, split_tally_t *tally)
{
    size_t bn, rn = 0;
    char *body = fixture(fixtures[f].body, &bn);
    char *rbody = fixtures[f].request ? fixture(fixtures[f].request, &rn) : NULL;
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("anthropic"), rbody, rn);
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
    split_tally_print(&tally, "anthropic fixtures x profiles");
}

static void test_random_splits(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], 0, NULL);
}

/* The property above compares runs with each other; this pins what they
 * agree on for one fixture, so that all of them being wrong the same way
 * shows too. */
static void test_split_content_is_the_answer(void **state)
{
    (void)state;
    size_t bn, rn;
    char *body = fixture("answers/anthropic_documents.sse", &bn);
    char *rbody = fixture("rag_sources.request.json", &rn);
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("anthropic"), rbody, rn);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_buf_t out = {0};
    size_t sizes[] = {1};
    dialect_stream(&cfg, &c, body, bn, sizes, 1, &out, NULL);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p,
                        "To brew a café crème, heat 60 ml of milk"
                        "[[3]](https://kb.example.com/wiki/Caf%C3%A9_Guide), then pull the "
                        "espresso. For the X200 itself, the battery sits under four T5 screws[7].");
    assert_true(v.ends_done);
    view_free(&v);
    cg_buf_free(&out);
    dialect_case_free(&c);
    free(body);
    free(rbody);
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
