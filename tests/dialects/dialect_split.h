/*
 * SPEC §6a, fidelity under every split, for a dialect's stream fixtures:
 * each fixture, cut into two reads at every byte (a sample of them under
 * ASan, tests/support/split.h) and into 300 random patterns of many reads,
 * gives the client the same bytes as in one read, in every profile. The
 * runs are the same for every dialect; a test_<dialect>_split file names
 * its fixtures and profiles (a dialect_suite_t) and pins what the runs
 * agree on for a fixture or two (dialect_one_byte_reads), so that all of
 * them being wrong the same way shows too.
 */
#ifndef CG_TEST_DIALECT_SPLIT_H
#define CG_TEST_DIALECT_SPLIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dialect_run.h"
#include "profiles.h"
#include "view.h"

#define DIALECT_SPLIT_RANDOM 300

/* A stream and the client's request it is read with (NULL: none), both
 * under tests/fixtures/dialects. */
typedef struct dialect_fixture {
    const char *body, *request;
} dialect_fixture_t;

/* A dialect's fixtures, each run in every one of its profiles. */
typedef struct dialect_suite {
    const char *dialect;
    const dialect_fixture_t *fixtures;
    size_t nfixtures;
    const char *const *profiles;
    size_t nprofiles;
    uint64_t rng; /* the random patterns' state */
} dialect_suite_t;

/* The suite of arrays fixtures[] and profiles[], the random patterns drawn
 * from seed. */
#define DIALECT_SUITE(dialect, fixtures, profiles, seed)                                           \
    {                                                                                              \
        dialect, fixtures, sizeof(fixtures) / sizeof((fixtures)[0]), profiles,                     \
            sizeof(profiles) / sizeof((profiles)[0]), seed                                         \
    }

static inline char *dialect_fixture_read(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/dialects/%s", CG_FIXTURES, name);
    return read_file(path, n);
}

/* What every fixture in one read is: some events, no line over the bound,
 * one end. */
static inline void dialect_suite_check_whole(const cg_buf_t *whole)
{
    view_t v;
    view_of_stream(&v, whole->p, whole->len);
    assert_true(v.events > 0);
    assert_true(v.max_line <= CG_XFORM_LINE_MAX);
    assert_true(v.ends_done != v.ends_error);
    view_free(&v);
}

/* Fixture f of s in profile `profile`: tally NULL, the random patterns;
 * else the cuts of split.h (with this phase when sampled), counted in
 * tally. */
static inline void dialect_suite_run(dialect_suite_t *s, size_t f, const char *profile,
                                     size_t phase, split_tally_t *tally)
{
    const dialect_fixture_t *fx = &s->fixtures[f];
    size_t bn, rn = 0;
    char *body = dialect_fixture_read(fx->body, &bn);
    char *rbody = fx->request ? dialect_fixture_read(fx->request, &rn) : NULL;
    dialect_case_t c;
    dialect_case_init(&c, dialect_named(s->dialect), rbody, rn);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    char what[256];
    snprintf(what, sizeof(what), "%s/%s", fx->body, profile);

    cg_buf_t whole = {0};
    dialect_stream(&cfg, &c, body, bn, NULL, 0, &whole, NULL);
    dialect_suite_check_whole(&whole);

    dialect_split_t ds = {&cfg, &c, what};
    split_case_t sc = dialect_split_case(&ds, body, bn);
    if (tally) {
        split_points_t sp;
        split_points_init(&sp, body, bn, phase);
        split_tally_add(tally, split_every(&sc, &sp, &whole), bn - 1);
        split_points_free(&sp);
    } else {
        split_random(&sc, DIALECT_SPLIT_RANDOM, &s->rng, &whole);
    }
    cg_buf_free(&whole);
    dialect_case_free(&c);
    free(body);
    free(rbody);
}

/* The two properties as cmocka tests of the suite in *state
 * (cmocka_unit_test_prestate); profile k samples with phase k. */
static inline void test_every_byte_split(void **state)
{
    dialect_suite_t *s = *state;
    split_tally_t tally = {0};
    for (size_t f = 0; f < s->nfixtures; f++)
        for (size_t p = 0; p < s->nprofiles; p++)
            dialect_suite_run(s, f, s->profiles[p], p, &tally);
    char what[128];
    snprintf(what, sizeof(what), "%s fixtures x profiles", s->dialect);
    split_tally_print(&tally, what);
}

static inline void test_random_splits(void **state)
{
    dialect_suite_t *s = *state;
    for (size_t f = 0; f < s->nfixtures; f++)
        for (size_t p = 0; p < s->nprofiles; p++)
            dialect_suite_run(s, f, s->profiles[p], 0, NULL);
}

/* Fixture `name` of `dialect` (request: a fixture, or NULL) in `profile`,
 * read a byte at a time: the client's content of choice 0 is want_content,
 * and the stream ends in [DONE] when done, else in the error event. */
static inline void dialect_one_byte_reads(const char *dialect, const char *name,
                                          const char *request, const char *profile,
                                          const char *want_content, bool done)
{
    size_t bn, rn = 0;
    char *body = dialect_fixture_read(name, &bn);
    char *rbody = request ? dialect_fixture_read(request, &rn) : NULL;
    dialect_case_t c;
    dialect_case_init(&c, dialect_named(dialect), rbody, rn);
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
    free(rbody);
}

/* A test_<dialect>_split's main: the two properties over suite s, then
 * its pin of what they agree on. */
static inline int dialect_split_main(dialect_suite_t *s, CMUnitTestFunction pin)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_every_byte_split, s),
        cmocka_unit_test_prestate(test_random_splits, s),
        {.name = "test_split_content_is_the_answer", .test_func = pin},
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
