/* Metrics (src/io/metrics.c): slots shared by the workers, the exposition's
 * sums over them, and what a worker finds in its slot when it starts. */
#include "io/metrics.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* The exposition, NUL-terminated (the caller frees it). */
static char *render(void)
{
    cg_buf_t b = {0};
    cg_metrics_render(&b);
    cg_buf_putc(&b, '\0');
    return b.p;
}

/* The value of the sample line that starts with `series ` in text. */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    fail_msg("no sample %s", series);
    return -1;
}

static int setup(void **state)
{
    (void)state;
    static bool mapped;
    if (!mapped && cg_metrics_init(2) != 0)
        return -1;
    mapped = true;
    /* Each test starts from empty slots. */
    memset(cg_metrics_select(0), 0, sizeof(cg_metrics_slot_t));
    memset(cg_metrics_select(1), 0, sizeof(cg_metrics_slot_t));
    return 0;
}

static void test_sums_over_slots(void **state)
{
    (void)state;
    cg_metrics_slot_t *a = cg_metrics_select(0), *b = cg_metrics_select(1);
    a->client_stalls = 2;
    b->client_stalls = 3;
    a->streams_paused = 1;
    b->streams_paused = 4;
    char *text = render();
    assert_true(sample(text, "citegate_client_stalls_total") == 5);
    assert_true(sample(text, "citegate_streams_paused") == 5);
    free(text);
}

static void test_restarted_worker_clears_its_gauges(void **state)
{
    (void)state;
    cg_metrics_slot_t *s = cg_metrics_select(1);
    s->active_streams = 3;
    s->upstream_connections[CG_PROTO_LABEL_H2] = 2;
    s->upstream_queue_length = 7;
    s->client_connections = 4;
    s->streams_paused = 2;
    s->client_stalls = 9;
    s->client_disconnects = 6;
    cg_metrics_select(0)->active_streams = 1; /* another worker's: kept */
    assert_ptr_equal(cg_metrics_select(1), s);
    assert_int_equal(s->active_streams, 0);
    assert_int_equal(s->upstream_connections[CG_PROTO_LABEL_H2], 0);
    assert_int_equal(s->upstream_queue_length, 0);
    assert_int_equal(s->client_connections, 0);
    assert_int_equal(s->streams_paused, 0);
    assert_int_equal(s->client_stalls, 9);
    assert_int_equal(s->client_disconnects, 6);
    char *text = render();
    assert_true(sample(text, "citegate_active_streams") == 1);
    assert_true(sample(text, "citegate_client_stalls_total") == 9);
    free(text);
}

static cg_span_t S(const char *s)
{
    return cg_span(s, strlen(s));
}

/* Lines of text that start with prefix. */
static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        n += strncmp(p, prefix, pl) == 0;
    return n;
}

static void test_model_labels_are_bounded(void **state)
{
    (void)state;
    cg_metrics_select(0);
    cg_metrics_answer(S("gpt-4o"), 2, 3);
    cg_metrics_answer(S("gpt-4o"), 1, 3);
    cg_metrics_answer(S("claude-3-5-sonnet@20240620"), 0, 5);
    /* 14 more names fill the table of 16; the 17th and later are "other". */
    char name[16];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "m%02d", i);
        cg_metrics_answer(S(name), 1, 1);
    }
    char long_name[CG_MODEL_NAME_MAX + 2];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    /* Names that are never labels, even with room in the table. */
    cg_metrics_select(1);
    const char *strange[] = {"a\"b", "a\nb", "a\\b", "a b", "a\x01", "caf\xc3\xa9", "a{b}",
                             "a,b", "other", "", long_name};
    for (size_t i = 0; i < sizeof(strange) / sizeof(strange[0]); i++)
        cg_metrics_answer(S(strange[i]), 1, 2);
    cg_metrics_answer(cg_span("a\0b", 3), 1, 2);
    cg_metrics_answer(cg_span(NULL, 0), 1, 2);
    long_name[CG_MODEL_NAME_MAX] = '\0'; /* 64 bytes: a label */
    cg_metrics_answer(S(long_name), 4, 4);
    assert_int_equal(cg_metrics_select(0)->nmodels, CG_MODEL_LABELS);
    assert_int_equal(cg_metrics_select(1)->nmodels, 1);

    char *text = render();
    assert_true(sample(text, "citegate_answers_total{model=\"gpt-4o\"}") == 2);
    assert_true(sample(text, "citegate_answer_citations_total{model=\"gpt-4o\"}") == 3);
    assert_true(sample(text, "citegate_answer_sources_total{model=\"gpt-4o\"}") == 6);
    assert_true(
        sample(text, "citegate_answer_sources_total{model=\"claude-3-5-sonnet@20240620\"}") == 5);
    assert_true(sample(text, "citegate_answers_total{model=\"m13\"}") == 1);
    /* m14..m19: past the table; 13 strange names */
    assert_true(sample(text, "citegate_answers_total{model=\"other\"}") == 6 + 13);
    assert_true(sample(text, "citegate_answer_citations_total{model=\"other\"}") == 6 + 13);
    assert_true(sample(text, "citegate_answer_sources_total{model=\"other\"}") == 6 + 26);
    char series[128];
    snprintf(series, sizeof(series), "citegate_answers_total{model=\"%s\"}", long_name);
    assert_true(sample(text, series) == 1);
    assert_int_equal(count_lines(text, "citegate_answers_total{model=\"m14\"}"), 0);
    /* 16 names of worker 0, 1 of worker 1, and other: one series each. */
    assert_int_equal(count_lines(text, "citegate_answers_total{"), CG_MODEL_LABELS + 2);
    assert_int_equal(count_lines(text, "citegate_answers_total{model=\"other\"}"), 1);
    assert_int_equal(count_lines(text, "# TYPE citegate_answers_total counter"), 1);
    free(text);
}

static void test_workers_tables_merge_by_name(void **state)
{
    (void)state;
    cg_metrics_select(0);
    cg_metrics_answer(S("b"), 1, 2);
    cg_metrics_answer(S("a"), 1, 1);
    cg_metrics_answer(S("x\ty"), 0, 1);
    cg_metrics_select(1);
    cg_metrics_answer(S("c"), 0, 3);
    cg_metrics_answer(S("b"), 2, 2);
    cg_metrics_answer(S("b"), 0, 2);
    cg_metrics_answer(S(""), 1, 1);
    char *text = render();
    const char *want = "citegate_answers_total{model=\"a\"} 1\n"
                       "citegate_answers_total{model=\"b\"} 3\n"
                       "citegate_answers_total{model=\"c\"} 1\n"
                       "citegate_answers_total{model=\"other\"} 2\n";
    assert_non_null(strstr(text, want));
    assert_true(sample(text, "citegate_answer_citations_total{model=\"b\"}") == 3);
    assert_true(sample(text, "citegate_answer_sources_total{model=\"b\"}") == 6);
    assert_true(sample(text, "citegate_answer_sources_total{model=\"other\"}") == 2);
    free(text);
    /* No answer yet: "other" alone, at 0. */
    setup(NULL);
    text = render();
    assert_int_equal(count_lines(text, "citegate_answer_sources_total{"), 1);
    assert_true(sample(text, "citegate_answer_sources_total{model=\"other\"}") == 0);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_sums_over_slots, setup),
        cmocka_unit_test_setup(test_restarted_worker_clears_its_gauges, setup),
        cmocka_unit_test_setup(test_model_labels_are_bounded, setup),
        cmocka_unit_test_setup(test_workers_tables_merge_by_name, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
