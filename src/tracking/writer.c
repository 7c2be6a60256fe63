/* The tracking store's writer thread: see writer.h. */
#include "writer.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define OPEN_TIMEOUT_MS   3000
#define WRITE_TIMEOUT_MS  5000
#define STATS_DELAY_MS    200  /* counters alone wait this long for company */
#define GATHER_MS         50   /* a first queued pattern waits this long for others */
#define STATS_RETRY_MS    1000 /* after the store refused them */
#define PRUNE_INTERVAL_MS (3600 * 1000)

struct cg_writer {
    pthread_t thread;
    const cg_store_ops_t *ops;
    char *target;
    int prune_days;
    char replica[128];

    pthread_mutex_t mu;
    pthread_cond_t work; /* to the thread: queue non-empty, unpaused or stopping */
    pthread_cond_t done; /* from the thread: an open or a batch finished */
    /* Under mu: */
    cg_pattern_t **ring;
    size_t cap, head, len;
    cg_stats_t stats;     /* counters for the next batch */
    int64_t stats_due_ms; /* when they go even without patterns */
    int64_t batch_due_ms; /* when the queued patterns go, if the queue is not half full */
    uint64_t accepted;    /* patterns ever queued */
    uint64_t finished;    /* queued patterns written, failed or dropped */
    int state;            /* CG_WRITER_* */
    bool stopping, paused;
    char err[512];

    _Atomic uint64_t written, dropped, failed, outages;
};

/* The thread's own state: its connection and the batch in hand. */
typedef struct run {
    cg_store_t *s;
    cg_pattern_t **batch;
    size_t n;
    cg_stats_t stats;
    bool pending; /* a batch is in hand (it may hold counters only) */
    bool retry;   /* its last attempt broke off */
    uint64_t seq;
    unsigned backoff_ms;
    int64_t next_open_ms, last_prune_ms;
} run_t;

unsigned cg__writer_next_backoff(unsigned ms)
{
    return ms >= CG_WRITER_BACKOFF_MAX_MS / 2 ? CG_WRITER_BACKOFF_MAX_MS : ms * 2;
}

/* Waits on `work` until when_ms (CLOCK_MONOTONIC) at the latest. */
static void wait_until(cg_writer_t *w, int64_t when_ms)
{
    struct timespec ts = {.tv_sec = when_ms / 1000, .tv_nsec = (when_ms % 1000) * 1000000};
    pthread_cond_timedwait(&w->work, &w->mu, &ts);
}

static void set_state(cg_writer_t *w, int state, const char *err)
{
    w->state = state;
    if (err != NULL)
        snprintf(w->err, sizeof(w->err), "%s", err);
    pthread_cond_broadcast(&w->done);
}

/* Ends the batch in hand: its patterns are freed and count as finished. */
static void finish_batch(cg_writer_t *w, run_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        cg_pattern_free(r->batch[i]);
    w->finished += r->n;
    r->n = 0;
    r->pending = false;
    r->retry = false;
    pthread_cond_broadcast(&w->done);
}

static void maybe_prune(cg_writer_t *w, run_t *r)
{
    int64_t now = cg_store_now_ms();
    if (r->s == NULL || w->prune_days <= 0 ||
        (r->last_prune_ms != 0 && now - r->last_prune_ms < PRUNE_INTERVAL_MS))
        return;
    r->last_prune_ms = now;
    pthread_mutex_unlock(&w->mu);
    if (w->ops->set_deadline)
        w->ops->set_deadline(r->s, now + WRITE_TIMEOUT_MS);
    w->ops->prune(r->s, (int64_t)time(NULL), w->prune_days);
    pthread_mutex_lock(&w->mu);
}

/* The store is gone for now: note why, and when to try again. */
static void went_down(cg_writer_t *w, run_t *r, const char *err)
{
    if (w->state != CG_WRITER_DOWN)
        atomic_fetch_add(&w->outages, 1);
    set_state(w, CG_WRITER_DOWN, err);
    r->next_open_ms = cg_store_now_ms() + r->backoff_ms;
    r->backoff_ms = cg__writer_next_backoff(r->backoff_ms);
}

/* One open attempt, or a wait for the next one. False at stop with the store
 * down: what is left is dropped, not waited for. */
static bool connect_step(cg_writer_t *w, run_t *r)
{
    if (w->stopping && w->state != CG_WRITER_OPENING)
        return false;
    int64_t now = cg_store_now_ms();
    if (now < r->next_open_ms) {
        wait_until(w, r->next_open_ms);
        return true;
    }
    char err[sizeof(w->err)] = "";
    bool retry = false;
    pthread_mutex_unlock(&w->mu);
    cg_store_t *s = w->ops->open(w->target, now + OPEN_TIMEOUT_MS, err, sizeof(err), &retry);
    pthread_mutex_lock(&w->mu);
    if (s == NULL) {
        if (retry) {
            went_down(w, r, err);
        } else {
            atomic_fetch_add(&w->outages, 1);
            set_state(w, CG_WRITER_FAILED, err);
        }
        return true;
    }
    r->s = s;
    r->backoff_ms = CG_WRITER_BACKOFF_MIN_MS;
    maybe_prune(w, r);
    set_state(w, CG_WRITER_OPEN, NULL);
    return true;
}

static bool stats_due(cg_writer_t *w)
{
    return !cg_stats_zero(&w->stats) && (w->stopping || cg_store_now_ms() >= w->stats_due_ms);
}

static bool gathered(const cg_writer_t *w)
{
    return w->len == 0 || w->paused || w->stopping || w->len >= w->cap / 2 ||
           cg_store_now_ms() >= w->batch_due_ms;
}

/* Waits for work and takes it: every queued pattern and the counters. False
 * when stopping with nothing left. */
static bool take_batch(cg_writer_t *w, run_t *r)
{
    while ((w->len == 0 || w->paused) && !stats_due(w)) {
        if (w->stopping && w->len == 0)
            return false;
        if (cg_stats_zero(&w->stats))
            pthread_cond_wait(&w->work, &w->mu);
        else
            wait_until(w, w->stats_due_ms);
    }
    /* Answers that end together are stored together: one transaction for
     * many rows costs the store (and the CPU the gateway shares with it on
     * small hosts) far less than one each. */
    while (!gathered(w))
        wait_until(w, w->batch_due_ms);
    size_t n = w->paused ? 0 : w->len;
    for (size_t i = 0; i < n; i++)
        r->batch[i] = w->ring[(w->head + i) % w->cap];
    w->head = (w->head + n) % w->cap;
    w->len -= n;
    r->n = n;
    r->stats = w->stats;
    memset(&w->stats, 0, sizeof(w->stats));
    r->pending = true;
    r->retry = false;
    r->seq++;
    return true;
}

/* Counters the store refused wait for a later batch. */
static void keep_stats(cg_writer_t *w, const cg_stats_t *s)
{
    if (cg_stats_zero(s))
        return;
    if (cg_stats_zero(&w->stats))
        w->stats_due_ms = cg_store_now_ms() + STATS_RETRY_MS;
    cg_stats_add(&w->stats, s);
}

/* Writes the batch in hand and counts the outcome. */
static void write_step(cg_writer_t *w, run_t *r)
{
    long rc = CG_STORE_FAILED;
    if (r->s != NULL) {
        cg_store_batch_t b = {.patterns = r->batch,
                              .n = r->n,
                              .stats = r->stats,
                              .replica = w->replica,
                              .seq = r->seq,
                              .retry = r->retry};
        pthread_mutex_unlock(&w->mu);
        if (w->ops->set_deadline)
            w->ops->set_deadline(r->s, cg_store_now_ms() + WRITE_TIMEOUT_MS);
        rc = w->ops->write(r->s, &b);
        pthread_mutex_lock(&w->mu);
    }
    if (rc == CG_STORE_BROKEN) {
        cg_store_t *s = r->s;
        went_down(w, r, w->ops->errmsg(s));
        r->s = NULL;
        r->retry = true; /* the batch stays in hand */
        pthread_mutex_unlock(&w->mu);
        w->ops->close(s);
        pthread_mutex_lock(&w->mu);
        return;
    }
    uint64_t ok = rc > 0 ? (uint64_t)rc : 0;
    atomic_fetch_add(&w->written, ok);
    atomic_fetch_add(&w->failed, r->n - ok);
    /* Counters wait for a later batch, unless there is none: no store, or stop. */
    if (rc == CG_STORE_FAILED && r->s != NULL && !w->stopping)
        keep_stats(w, &r->stats);
    finish_batch(w, r);
    maybe_prune(w, r);
}

/* At stop with the store down: the batch in hand and the queue are dropped. */
static void drop_rest(cg_writer_t *w, run_t *r)
{
    while (w->len > 0) {
        cg_pattern_free(w->ring[w->head]);
        w->head = (w->head + 1) % w->cap;
        w->len--;
        w->finished++;
        atomic_fetch_add(&w->dropped, 1);
    }
    atomic_fetch_add(&w->dropped, r->n);
    finish_batch(w, r);
}

/* One turn of the thread, with mu held; false when it is time to leave. */
static bool step(cg_writer_t *w, run_t *r)
{
    if (r->s == NULL && w->state != CG_WRITER_FAILED)
        return connect_step(w, r);
    if (!r->pending && !take_batch(w, r))
        return false;
    write_step(w, r);
    return true;
}

static void *writer_main(void *arg)
{
    cg_writer_t *w = arg;
    run_t r = {.batch = cg_xmalloc(w->cap * sizeof(*r.batch)),
               .backoff_ms = CG_WRITER_BACKOFF_MIN_MS};
    pthread_mutex_lock(&w->mu);
    while (step(w, &r))
        ;
    drop_rest(w, &r);
    pthread_mutex_unlock(&w->mu);
    w->ops->close(r.s);
    free(r.batch);
    return NULL;
}

/* host/pid/random: this writer among the replicas that share a store. */
static void name_replica(char *out, size_t len)
{
    char host[64] = "";
    uint32_t rnd = 0;
    gethostname(host, sizeof(host) - 1);
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
        rnd = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 16;
    snprintf(out, len, "%s/%ld/%08x", host[0] ? host : "localhost", (long)getpid(), rnd);
}

static void destroy(cg_writer_t *w)
{
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->mu);
    free(w->ring);
    free(w->target);
    free(w);
}

cg_writer_t *cg_writer_start(const cg_store_ops_t *ops, const char *target, int prune_days,
                             size_t queue_cap)
{
    cg_writer_t *w = cg_xcalloc(1, sizeof(*w));
    w->ops = ops;
    w->target = cg_xstrndup(target ? target : "", target ? strlen(target) : 0);
    w->prune_days = prune_days;
    w->cap = queue_cap ? queue_cap : 1;
    w->ring = cg_xcalloc(w->cap, sizeof(*w->ring));
    name_replica(w->replica, sizeof(w->replica));
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the clock of wait_until */
    pthread_cond_init(&w->work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->done, NULL);
    if (cg_store_thread(&w->thread, writer_main, w) != 0) {
        destroy(w);
        return NULL;
    }
    return w;
}

bool cg_writer_submit(cg_writer_t *w, cg_pattern_t *p)
{
    if (p == NULL)
        return false;
    cg_pattern_bound(p); /* so the queue's memory is bounded too */
    bool queued = false;
    pthread_mutex_lock(&w->mu);
    if (w->state == CG_WRITER_FAILED) {
        atomic_fetch_add(&w->failed, 1);
    } else if (w->stopping || w->len == w->cap) {
        atomic_fetch_add(&w->dropped, 1);
    } else {
        if (w->len == 0)
            w->batch_due_ms = cg_store_now_ms() + GATHER_MS;
        w->ring[(w->head + w->len) % w->cap] = p;
        w->len++;
        w->accepted++;
        queued = true;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    if (!queued)
        cg_pattern_free(p);
    return queued;
}

void cg_writer_add_stats(cg_writer_t *w, const cg_stats_t *d)
{
    pthread_mutex_lock(&w->mu);
    if (w->state == CG_WRITER_FAILED) { /* no store to count in */
        pthread_mutex_unlock(&w->mu);
        return;
    }
    if (cg_stats_zero(&w->stats)) {
        w->stats_due_ms = cg_store_now_ms() + STATS_DELAY_MS;
        pthread_cond_signal(&w->work); /* from an untimed wait to a timed one */
    }
    cg_stats_add(&w->stats, d);
    pthread_mutex_unlock(&w->mu);
}

void cg_writer_counts(cg_writer_t *w, uint64_t *written, uint64_t *dropped, uint64_t *failed)
{
    if (written)
        *written = atomic_load(&w->written);
    if (dropped)
        *dropped = atomic_load(&w->dropped);
    if (failed)
        *failed = atomic_load(&w->failed);
}

uint64_t cg_writer_outages(cg_writer_t *w)
{
    return atomic_load(&w->outages);
}

int cg_writer_status(cg_writer_t *w, char *err, size_t errlen)
{
    pthread_mutex_lock(&w->mu);
    int state = w->state;
    if (state < 0 && err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", w->err);
    pthread_mutex_unlock(&w->mu);
    return state;
}

void cg_writer_flush(cg_writer_t *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->accepted;
    /* A store that failed for good still fails what was queued before. */
    while (w->state == CG_WRITER_OPENING || (w->state != CG_WRITER_DOWN && w->finished < target))
        pthread_cond_wait(&w->done, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void cg__writer_pause(cg_writer_t *w, bool paused)
{
    pthread_mutex_lock(&w->mu);
    w->paused = paused;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
}

void cg_writer_stop(cg_writer_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    w->paused = false;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    destroy(w);
}
