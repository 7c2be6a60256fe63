/* Safe points: deferred work runs after the callback that queued it, in
 * order, once per queueing; cancelled work never runs; a queue filled from
 * a timer does not wait for the poll. Queued writes run when flushed, or at
 * the safe point after the work that may make frames. */
#include "io/defer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct ctx {
    cg_safepoint_t sp;
    cg_defer_t a, b, c;
    int order[8], n;
    bool in_timer;
    uint64_t queued_at, ran_at;
} ctx_t;

static ctx_t *ctx_of_sp(cg_safepoint_t *sp)
{
    return (ctx_t *)((char *)sp - offsetof(ctx_t, sp));
}

static void run_c(cg_defer_t *d);

static void run_a(cg_defer_t *d)
{
    ctx_t *x = (ctx_t *)((char *)d - offsetof(ctx_t, a));
    assert_false(x->in_timer);
    x->order[x->n++] = 1;
    x->ran_at = uv_hrtime();
    cg_defer(&x->sp, &x->c, run_c); /* queued while running: a later round */
}

static void run_b(cg_defer_t *d)
{
    ctx_t *x = (ctx_t *)((char *)d - offsetof(ctx_t, b));
    x->order[x->n++] = 2;
}

static void run_c(cg_defer_t *d)
{
    ctx_t *x = (ctx_t *)((char *)d - offsetof(ctx_t, c));
    x->order[x->n++] = 3;
}

static void on_timer(uv_timer_t *t)
{
    ctx_t *x = t->data;
    x->in_timer = true;
    cg_defer(&x->sp, &x->a, run_a);
    cg_defer(&x->sp, &x->a, run_a); /* twice: runs once */
    cg_defer(&x->sp, &x->b, run_b);
    x->queued_at = uv_hrtime();
    x->in_timer = false;
}

static void on_long(uv_timer_t *t)
{
    (void)t;
}

static void test_runs_after_callback_in_order(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    ctx_t x = {0};
    cg_safepoint_init(&x.sp, &loop);
    uv_timer_t t, longt;
    uv_timer_init(&loop, &t);
    uv_timer_init(&loop, &longt);
    t.data = &x;
    uv_timer_start(&t, on_timer, 1, 0);
    uv_timer_start(&longt, on_long, 300, 0); /* the poll would wait for this */
    while (x.n < 3)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(x.n, 3);
    assert_int_equal(x.order[0], 1);
    assert_int_equal(x.order[1], 2);
    assert_int_equal(x.order[2], 3);
    /* Not held up by the 300 ms timer. */
    assert_true(x.ran_at - x.queued_at < 100 * 1000000ull);
    uv_timer_stop(&longt);
    uv_close((uv_handle_t *)&t, NULL);
    uv_close((uv_handle_t *)&longt, NULL);
    cg_safepoint_close(&x.sp);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    (void)ctx_of_sp;
}

static void never(cg_defer_t *d)
{
    (void)d;
    fail_msg("a cancelled item ran");
}

static void test_cancel(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    ctx_t x = {0};
    cg_safepoint_init(&x.sp, &loop);
    cg_defer(&x.sp, &x.a, never);
    assert_true(cg_defer_queued(&x.a));
    cg_defer_cancel(&x.a);
    assert_false(cg_defer_queued(&x.a));
    cg_defer_cancel(&x.a); /* twice: no effect */
    cg_safepoint_run(&x.sp);
    cg_safepoint_close(&x.sp);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void flush_b(cg_defer_t *d)
{
    ctx_t *x = (ctx_t *)((char *)d - offsetof(ctx_t, b));
    x->order[x->n++] = 2;
}

/* Work at the safe point queues a write: it runs in the same safe point. */
static void work_a(cg_defer_t *d)
{
    ctx_t *x = (ctx_t *)((char *)d - offsetof(ctx_t, a));
    x->order[x->n++] = 1;
    cg_defer_flush(&x->sp, &x->b, flush_b);
}

static void test_flush(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    ctx_t x = {0};
    cg_safepoint_init(&x.sp, &loop);
    /* A write flushed ahead of the safe point runs once, then not again. */
    cg_defer_flush(&x.sp, &x.b, flush_b);
    cg_defer_flush(&x.sp, &x.b, flush_b);
    cg_safepoint_flush(&x.sp);
    assert_int_equal(x.n, 1);
    assert_false(cg_defer_queued(&x.b));
    cg_safepoint_run(&x.sp);
    assert_int_equal(x.n, 1);
    /* Flushing runs writes only; the safe point runs both, writes first,
     * and the writes that work queues in a later round of the same run. */
    x.n = 0;
    cg_defer(&x.sp, &x.a, work_a);
    cg_safepoint_flush(&x.sp);
    assert_int_equal(x.n, 0);
    cg_safepoint_run(&x.sp);
    assert_int_equal(x.n, 2);
    assert_int_equal(x.order[0], 1);
    assert_int_equal(x.order[1], 2);
    /* A cancelled write never runs. */
    cg_defer_flush(&x.sp, &x.c, never);
    cg_defer_cancel(&x.c);
    cg_safepoint_flush(&x.sp);
    cg_safepoint_run(&x.sp);
    cg_safepoint_close(&x.sp);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_after_callback_in_order),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
