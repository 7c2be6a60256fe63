/*
 * The writer: a thread that owns one connection to a tracking store
 * (store.h), a bounded FIFO of patterns and the counters that have not
 * reached the store yet. The event loop only queues (cg_writer_submit,
 * cg_writer_add_stats take a mutex, never wait on the store); the thread
 * writes everything queued at once, in one transaction per batch.
 *
 * A store that cannot be opened for good (an SQLite path under a file)
 * fails every pattern from then on. One that may come back (a PostgreSQL
 * server down or restarting) is reopened with backoff while patterns wait
 * in the queue; once the queue is full, new ones are dropped and counted. A
 * batch whose connection broke off is kept and written again after the
 * reconnect, marked as a retry, so the store can recognise one it had
 * already committed.
 *
 * Start it in the process that submits (after fork).
 */
#ifndef CITEGATE_WRITER_H
#define CITEGATE_WRITER_H

#include "store.h"

typedef struct cg_writer cg_writer_t;

/*
 * Starts the thread, which opens `target` with ops (see cg_store_ops_t),
 * prunes patterns older than prune_days (0 disables pruning), then writes
 * what is queued, and prunes again at most once an hour. queue_cap (at least
 * 1) bounds the queue. Returns NULL only when the thread cannot be created.
 */
cg_writer_t *cg_writer_start(const cg_store_ops_t *ops, const char *target, int prune_days,
                             size_t queue_cap);

/*
 * Queues p and takes ownership of it (allocated with cg_xmalloc, strings
 * too), cut to the stored bounds. Never waits beyond the queue's mutex.
 * Returns false, having freed p, when the queue is full or stop began
 * (counted as dropped) or the store could not be opened for good (counted
 * as failed).
 */
bool cg_writer_submit(cg_writer_t *w, cg_pattern_t *p);

/* Adds d to the counters the next batch hands to the store; a batch with
 * counters only is written within about 200 ms. Never waits on the store. */
void cg_writer_add_stats(cg_writer_t *w, const cg_stats_t *d);

/* Counters: rows written, patterns dropped (queue full, or stop with the
 * store down) and failed (the store refused them, or cannot be opened). */
void cg_writer_counts(cg_writer_t *w, uint64_t *written, uint64_t *dropped, uint64_t *failed);

/* How often the store went away: failed opens and broken connections. */
uint64_t cg_writer_outages(cg_writer_t *w);

enum {
    CG_WRITER_OPEN = 1,
    CG_WRITER_OPENING = 0, /* the first open is not done yet */
    CG_WRITER_FAILED = -1, /* cannot be opened; patterns fail */
    CG_WRITER_DOWN = -2,   /* gone for now; reopened with backoff, patterns wait */
};

/* One of the CG_WRITER_ states; for FAILED and DOWN, the reason in err. */
int cg_writer_status(cg_writer_t *w, char *err, size_t errlen);

/* Waits until the first open was attempted and every pattern queued so far
 * is written or failed, or the store is not open. Must not be called while
 * paused (it would wait forever). */
void cg_writer_flush(cg_writer_t *w);

/* Writes what is queued if the store is open (dropping it if not), joins
 * the thread, closes the store and frees w. NULL is a no-op. */
void cg_writer_stop(cg_writer_t *w);

/* Test only: while paused the thread takes nothing from the queue, so a
 * test can fill it deterministically. Stop ends a pause. */
void cg__writer_pause(cg_writer_t *w, bool paused);

/* The reopen backoff: BACKOFF_MIN_MS after the first failure, doubling up to
 * BACKOFF_MAX_MS, so a store that is back is written to within about 2 s. */
#define CG_WRITER_BACKOFF_MIN_MS 250
#define CG_WRITER_BACKOFF_MAX_MS 2000
unsigned cg__writer_next_backoff(unsigned ms);

#endif
