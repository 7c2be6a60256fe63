/*
 * A worker's streams share one cg_out_t (its arena and the JSON tokens every
 * call borrows): a stream must not find another stream's tokens or bytes
 * there, nor leave anything it needs later. Streams of every dialect are fed
 * read by read in turn through one cg_out_t, and each must give the client
 * exactly what it gives when run alone. Some end with their last read and
 * the end in one call (cg_xform_feed_finish), which must change nothing.
 */
#include "dialect_run.h"
#include "profiles.h"
#include "view.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct stream {
    const char *file; /* under tests/fixtures */
    const char *d;
    size_t read; /* bytes per read */
    bool join_end; /* the last read and the end in one call */
    char *in;
    size_t n;
    dialect_case_t c;
    cg_xform_t *x;
    size_t pos;
    cg_buf_t alone, together;
} stream_t;

static stream_t streams[] = {
    {.file = "azure_oyd_stream.sse", .d = "openai", .read = 7},
    {.file = "dialects/answers/anthropic_web_search.sse",
     .d = "anthropic",
     .read = 11,
     .join_end = true},
    {.file = "perplexity_stream.sse", .d = "openai", .read = 64, .join_end = true},
    {.file = "dialects/answers/responses_foundry.sse", .d = "responses", .read = 5},
    {.file = "dialects/answers/anthropic_multi_block.sse", .d = "anthropic", .read = 3},
    {.file = "dialects/answers/responses_web_search.sse",
     .d = "responses",
     .read = 17,
     .join_end = true},
    {.file = "azure_oyd_filters_crlf.sse", .d = "openai", .read = 13, .join_end = true},
    {.file = "dialects/answers/gemini_google_search.sse",
     .d = "gemini",
     .read = 19,
     .join_end = true},
    {.file = "dialects/answers/gemini_error_event.sse", .d = "gemini", .read = 9},
};
#define NSTREAMS (sizeof(streams) / sizeof(streams[0]))

static char *fixture(const char *rel, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", CG_FIXTURES, rel);
    return read_file(path, n);
}

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSTREAMS; i++) {
        stream_t *s = &streams[i];
        s->in = fixture(s->file, &s->n);
        dialect_case_init(&s->c, dialect_named(s->d), NULL, 0);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < NSTREAMS; i++) {
        stream_t *s = &streams[i];
        free(s->in);
        dialect_case_free(&s->c);
        cg_buf_free(&s->alone);
        cg_buf_free(&s->together);
    }
    return 0;
}

/* One read of stream s through the shared out; false once it has ended. */
static bool step(stream_t *s, cg_out_t *o)
{
    if (s->pos == s->n) {
        cg_xform_finish(s->x, CG_END_EOF, o);
        dialect_collect(&s->together, o);
        cg_xform_free(s->x);
        s->x = NULL;
        return false;
    }
    size_t len = s->n - s->pos < s->read ? s->n - s->pos : s->read;
    char *copy = cg_xmalloc(len); /* freed at once: nothing may point into it later */
    memcpy(copy, s->in + s->pos, len);
    s->pos += len;
    bool last = s->join_end && s->pos == s->n;
    if (last)
        cg_xform_feed_finish(s->x, copy, len, CG_END_EOF, o);
    else
        cg_xform_feed(s->x, copy, len, o);
    dialect_collect(&s->together, o);
    free(copy);
    if (last) {
        cg_xform_free(s->x);
        s->x = NULL;
    }
    return !last;
}

static void run_profile(const char *name)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(name));
    for (size_t i = 0; i < NSTREAMS; i++) {
        stream_t *s = &streams[i];
        dialect_stream(&cfg, &s->c, s->in, s->n, &s->read, 1, &s->alone, NULL);
        assert_true(s->alone.len > 0);
        s->x = dialect_xform(&cfg, &s->c);
        s->pos = 0;
        s->together.len = 0;
    }
    cg_out_t shared = {0};
    for (size_t live = NSTREAMS; live > 0;) {
        live = 0;
        for (size_t i = 0; i < NSTREAMS; i++)
            if (streams[i].x && step(&streams[i], &shared))
                live++;
    }
    /* Tokens and arena stayed with the out, within their bounds. */
    assert_true(shared.toks[0].cap > 0 && shared.toks[0].cap <= CG_JSON_STORE_KEEP);
    assert_true(shared.toks[1].cap > 0 && shared.toks[1].cap <= CG_JSON_STORE_KEEP);
    cg_out_free(&shared);
    for (size_t i = 0; i < NSTREAMS; i++) {
        stream_t *s = &streams[i];
        if (s->together.len != s->alone.len || memcmp(s->together.p, s->alone.p, s->alone.len) != 0)
            fail_msg("%s, profile %s: %zu bytes with other streams on one out, %zu alone", s->file,
                     name, s->together.len, s->alone.len);
    }
}

/* Each case's state is the name of its profile. */
static void test_profile(void **state)
{
    run_profile(*state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_profile, "openwebui"),
        cmocka_unit_test_prestate(test_profile, "markdown"),
        cmocka_unit_test_prestate(test_profile, "webchat"),
        cmocka_unit_test_prestate(test_profile, "openai"),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
