/* Metrics (src/io/metrics.c): slots shared by the workers, the exposition's
 * sums over them, and what a worker finds in its slot when it starts. */
#include "io/metrics.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_sums_over_slots, setup),
        cmocka_unit_test_setup(test_restarted_worker_clears_its_gauges, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
