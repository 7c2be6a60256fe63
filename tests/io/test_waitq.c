/* The intrusive wait queue: order, removal from anywhere, no double entry. */
#include "io/waitq.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

typedef struct item {
    int id;
    cg_list_t link;
} item_t;

static int id_of(cg_list_t *l)
{
    return l ? CG_CONTAINER_OF(l, item_t, link)->id : -1;
}

static void test_fifo_order(void **state)
{
    (void)state;
    cg_waitq_t q;
    cg_waitq_init(&q);
    item_t it[4] = {{1, {0}}, {2, {0}}, {3, {0}}, {4, {0}}};
    for (int i = 0; i < 4; i++)
        cg_waitq_push(&q, &it[i].link);
    assert_int_equal(q.len, 4);
    for (int i = 1; i <= 4; i++)
        assert_int_equal(id_of(cg_waitq_pop(&q)), i);
    assert_null(cg_waitq_pop(&q));
    assert_true(cg_waitq_empty(&q));
}

static void test_push_front_goes_first(void **state)
{
    (void)state;
    cg_waitq_t q;
    cg_waitq_init(&q);
    item_t a = {1, {0}}, b = {2, {0}}, c = {3, {0}};
    cg_waitq_push(&q, &a.link);
    cg_waitq_push(&q, &b.link);
    cg_waitq_push_front(&q, &c.link);
    assert_int_equal(id_of(cg_waitq_pop(&q)), 3);
    assert_int_equal(id_of(cg_waitq_pop(&q)), 1);
    assert_int_equal(id_of(cg_waitq_pop(&q)), 2);
}

static void test_remove_middle_and_absent(void **state)
{
    (void)state;
    cg_waitq_t q;
    cg_waitq_init(&q);
    item_t a = {1, {0}}, b = {2, {0}}, c = {3, {0}}, out = {9, {0}};
    cg_waitq_push(&q, &a.link);
    cg_waitq_push(&q, &b.link);
    cg_waitq_push(&q, &c.link);
    cg_waitq_remove(&q, &b.link);
    assert_false(cg_list_linked(&b.link));
    cg_waitq_remove(&q, &b.link);   /* twice: no effect */
    cg_waitq_remove(&q, &out.link); /* never queued: no effect */
    assert_int_equal(q.len, 2);
    assert_int_equal(id_of(cg_waitq_pop(&q)), 1);
    assert_int_equal(id_of(cg_waitq_pop(&q)), 3);
}

static void test_push_twice_is_once(void **state)
{
    (void)state;
    cg_waitq_t q;
    cg_waitq_init(&q);
    item_t a = {1, {0}};
    cg_waitq_push(&q, &a.link);
    cg_waitq_push(&q, &a.link);
    cg_waitq_push_front(&q, &a.link);
    assert_int_equal(q.len, 1);
    assert_int_equal(id_of(cg_waitq_pop(&q)), 1);
    assert_true(cg_waitq_empty(&q));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_push_front_goes_first),
        cmocka_unit_test(test_remove_middle_and_absent),
        cmocka_unit_test(test_push_twice_is_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
