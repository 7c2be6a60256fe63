/*
 * Unit tests of the writer thread (src/tracking/writer.h) over a fake store
 * whose faults the test controls: a store that is down keeps patterns in
 * the bounded queue, then drops and counts; it is reopened with backoff; a
 * batch whose connection broke is written again, marked as a retry; counters
 * alone reach the store; a store that fails for good fails everything.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tracking/writer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The fake store's controls and what it saw, under mu. */
static struct {
    pthread_mutex_t mu;
    bool down, bad;
    int refusals; /* writes left that the store refuses */
    int breaks;   /* writes left that break the connection */
    int opens;    /* successful opens */
    int writes;   /* write calls */
    int retries;  /* write calls marked retry */
    uint64_t seqs[64];
    char rows[64][32];
    int nrows;
    cg_stats_t stats;
} fake = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int handle; /* what open returns: any non-NULL pointer */

static cg_store_t *fake_open(const char *target, int64_t deadline_ms, char *err, size_t errlen,
                             bool *retry)
{
    (void)target;
    (void)deadline_ms;
    pthread_mutex_lock(&fake.mu);
    bool down = fake.down, bad = fake.bad;
    if (!down && !bad)
        fake.opens++;
    pthread_mutex_unlock(&fake.mu);
    *retry = !bad;
    if (down || bad) {
        snprintf(err, errlen, "%s", bad ? "bad settings" : "server down");
        return NULL;
    }
    return (cg_store_t *)&handle;
}

static long fake_write(cg_store_t *s, const cg_store_batch_t *b)
{
    (void)s;
    long rc;
    pthread_mutex_lock(&fake.mu);
    if (fake.writes < 64)
        fake.seqs[fake.writes] = b->seq;
    fake.writes++;
    fake.retries += b->retry;
    if (fake.breaks > 0) {
        fake.breaks--;
        rc = CG_STORE_BROKEN;
    } else if (fake.refusals > 0) {
        fake.refusals--;
        rc = CG_STORE_FAILED;
    } else {
        for (size_t i = 0; i < b->n && fake.nrows < 64; i++)
            snprintf(fake.rows[fake.nrows++], sizeof(fake.rows[0]), "%s", b->patterns[i]->query);
        cg_stats_add(&fake.stats, &b->stats);
        rc = (long)b->n;
    }
    pthread_mutex_unlock(&fake.mu);
    return rc;
}

static long fake_prune(cg_store_t *s, int64_t now, int days)
{
    (void)s;
    (void)now;
    (void)days;
    return 0;
}

static int fake_recall(cg_store_t *s, const cg_recall_t *r, cg_buf_t *out)
{
    (void)s;
    (void)r;
    (void)out;
    return CG_STORE_FAILED;
}

static const char *fake_errmsg(cg_store_t *s)
{
    (void)s;
    return "connection lost";
}

static void fake_close(cg_store_t *s)
{
    (void)s;
}

static const cg_store_ops_t fake_ops = {
    .name = "fake",
    .scope = "fleet",
    .open = fake_open,
    .write = fake_write,
    .prune = fake_prune,
    .recall = fake_recall,
    .errmsg = fake_errmsg,
    .close = fake_close,
};

static int reset(void **state)
{
    (void)state;
    pthread_mutex_lock(&fake.mu);
    fake.down = fake.bad = false;
    fake.refusals = fake.breaks = fake.opens = fake.writes = fake.retries = fake.nrows = 0;
    memset(&fake.stats, 0, sizeof(fake.stats));
    pthread_mutex_unlock(&fake.mu);
    return 0;
}

static void set_down(bool down)
{
    pthread_mutex_lock(&fake.mu);
    fake.down = down;
    pthread_mutex_unlock(&fake.mu);
}

static cg_pattern_t *pattern(const char *query)
{
    cg_pattern_t *p = cg_xcalloc(1, sizeof(*p));
    p->query = cg_xstrndup(query, strlen(query));
    p->chunk_ids = cg_xstrndup("[]", 2);
    p->avg_score = -1;
    return p;
}

static int64_t now_ms(void)
{
    return cg_store_now_ms();
}

static int nrows(void)
{
    pthread_mutex_lock(&fake.mu);
    int n = fake.nrows;
    pthread_mutex_unlock(&fake.mu);
    return n;
}

/* Polls until the fake holds n rows; false after timeout_ms. */
static bool wait_rows(int n, int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    while (nrows() < n && now_ms() < end)
        usleep(5000);
    return nrows() >= n;
}

static void wait_state(cg_writer_t *w, int state)
{
    int64_t end = now_ms() + 5000;
    while (cg_writer_status(w, NULL, 0) != state && now_ms() < end)
        usleep(5000);
    assert_int_equal(cg_writer_status(w, NULL, 0), state);
}

/* Down: patterns wait in the queue up to its bound, the next ones are dropped
 * and counted; once the store is back every waiting one is written, in order. */
static void test_down_queues_then_drops(void **state)
{
    (void)state;
    set_down(true);
    cg_writer_t *w = cg_writer_start(&fake_ops, "x", 0, 4);
    wait_state(w, CG_WRITER_DOWN);
    char err[64] = "";
    assert_int_equal(cg_writer_status(w, err, sizeof(err)), CG_WRITER_DOWN);
    assert_string_equal(err, "server down");
    assert_int_equal(cg_writer_outages(w), 1);
    const char *q[] = {"a", "b", "c", "d", "e", "f"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(cg_writer_submit(w, pattern(q[i])), i < 4);
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(dropped, 2);
    assert_int_equal(written + failed, 0);

    int64_t back = now_ms();
    set_down(false);
    assert_true(wait_rows(4, 5000));
    /* the backoff never exceeds its cap: back within it plus a margin */
    assert_true(now_ms() - back < CG_WRITER_BACKOFF_MAX_MS + 1000);
    wait_state(w, CG_WRITER_OPEN);
    for (int i = 0; i < 4; i++)
        assert_string_equal(fake.rows[i], q[i]);
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(written, 4);
    cg_writer_stop(w);
}

/* A batch whose connection broke is kept, and written once after the
 * reopen, with the same seq and marked as a retry. */
static void test_broken_batch_is_retried(void **state)
{
    (void)state;
    cg_writer_t *w = cg_writer_start(&fake_ops, "x", 0, 16);
    cg_writer_flush(w);
    pthread_mutex_lock(&fake.mu);
    fake.breaks = 1;
    pthread_mutex_unlock(&fake.mu);
    assert_true(cg_writer_submit(w, pattern("kept")));
    assert_true(wait_rows(1, 5000));
    pthread_mutex_lock(&fake.mu);
    assert_int_equal(fake.writes, 2);
    assert_int_equal(fake.retries, 1);
    assert_int_equal(fake.seqs[0], fake.seqs[1]);
    assert_int_equal(fake.opens, 2);
    pthread_mutex_unlock(&fake.mu);
    assert_string_equal(fake.rows[0], "kept");
    assert_int_equal(cg_writer_outages(w), 1);
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(written, 1);
    assert_int_equal(dropped + failed, 0);
    cg_writer_stop(w);
}

static cg_stats_t fake_stats(void)
{
    pthread_mutex_lock(&fake.mu);
    cg_stats_t s = fake.stats;
    pthread_mutex_unlock(&fake.mu);
    return s;
}

/* Counters without patterns reach the store within a fraction of a second;
 * counters the store refused come with a later batch. */
static void test_counters_reach_the_store(void **state)
{
    (void)state;
    cg_writer_t *w = cg_writer_start(&fake_ops, "x", 0, 16);
    cg_writer_flush(w);
    cg_stats_t d = {.answers = 2,
                    .answers_skipped = 1,
                    .references = 7,
                    .citations_available = 5,
                    .citations_cited = 3};
    int64_t t0 = now_ms();
    cg_writer_add_stats(w, &d);
    while (fake_stats().answers < 2 && now_ms() - t0 < 5000)
        usleep(5000);
    assert_true(now_ms() - t0 < 1000);
    cg_stats_t got = fake_stats();
    assert_memory_equal(&got, &d, sizeof(d));

    pthread_mutex_lock(&fake.mu);
    fake.refusals = 1;
    pthread_mutex_unlock(&fake.mu);
    cg_writer_add_stats(w, &d);
    assert_true(cg_writer_submit(w, pattern("refused")));
    t0 = now_ms();
    while (fake_stats().answers < 4 && now_ms() - t0 < 5000)
        usleep(5000);
    got = fake_stats();
    assert_int_equal(got.answers, 4);
    assert_int_equal(got.references, 14);
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(failed, 1);
    assert_int_equal(nrows(), 0);
    cg_writer_stop(w);
}

/* Stop with the store down drops what waits, at once. */
static void test_stop_while_down(void **state)
{
    (void)state;
    set_down(true);
    cg_writer_t *w = cg_writer_start(&fake_ops, "x", 0, 8);
    wait_state(w, CG_WRITER_DOWN);
    for (int i = 0; i < 3; i++)
        assert_true(cg_writer_submit(w, pattern("lost")));
    cg_writer_flush(w); /* returns: the store is not open */
    int64_t t0 = now_ms();
    cg_writer_stop(w);
    assert_true(now_ms() - t0 < 500);
    assert_int_equal(nrows(), 0);
}

/* A store that cannot be opened for good fails every pattern. */
static void test_failed_for_good(void **state)
{
    (void)state;
    pthread_mutex_lock(&fake.mu);
    fake.bad = true;
    pthread_mutex_unlock(&fake.mu);
    cg_writer_t *w = cg_writer_start(&fake_ops, "x", 0, 8);
    cg_writer_flush(w);
    char err[64];
    assert_int_equal(cg_writer_status(w, err, sizeof(err)), CG_WRITER_FAILED);
    assert_string_equal(err, "bad settings");
    assert_false(cg_writer_submit(w, pattern("q")));
    cg_stats_t d = {.answers = 1};
    cg_writer_add_stats(w, &d); /* nowhere to go: dropped */
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(failed, 1);
    assert_int_equal(written + dropped, 0);
    int64_t t0 = now_ms();
    cg_writer_stop(w);
    assert_true(now_ms() - t0 < 500);
}

/* A store that refuses every write: counters wait for later batches, but stop
 * does not wait for them. */
static void test_stop_while_refused(void **state)
{
    (void)state;
    pthread_mutex_lock(&fake.mu);
    fake.refusals = 1000000;
    pthread_mutex_unlock(&fake.mu);
    cg_writer_t *w = cg_writer_start(&fake_ops, "x", 0, 8);
    cg_writer_flush(w);
    cg_stats_t d = {.answers = 1};
    cg_writer_add_stats(w, &d);
    assert_true(cg_writer_submit(w, pattern("refused")));
    cg_writer_flush(w);
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(failed, 1);
    int64_t t0 = now_ms();
    cg_writer_stop(w);
    assert_true(now_ms() - t0 < 500);
    assert_int_equal(fake_stats().answers, 0);
}

static void test_backoff_doubles_to_its_cap(void **state)
{
    (void)state;
    unsigned ms = CG_WRITER_BACKOFF_MIN_MS, seen[8];
    for (int i = 0; i < 8; i++) {
        seen[i] = ms;
        ms = cg__writer_next_backoff(ms);
    }
    assert_int_equal(seen[0], 250);
    assert_int_equal(seen[1], 500);
    assert_int_equal(seen[2], 1000);
    assert_int_equal(seen[3], 2000);
    assert_int_equal(seen[7], CG_WRITER_BACKOFF_MAX_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_down_queues_then_drops, reset),
        cmocka_unit_test_setup(test_broken_batch_is_retried, reset),
        cmocka_unit_test_setup(test_counters_reach_the_store, reset),
        cmocka_unit_test_setup(test_stop_while_down, reset),
        cmocka_unit_test_setup(test_failed_for_good, reset),
        cmocka_unit_test_setup(test_stop_while_refused, reset),
        cmocka_unit_test_setup(test_backoff_doubles_to_its_cap, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
