/*
 * Safe points. Work that must not run inside a protocol library's callback
 * or inside a caller that keeps going afterwards (sending HTTP/2 frames,
 * starting a client's next request) is queued here and runs once the I/O
 * callbacks of this loop iteration have returned: a uv_check handle runs
 * the queue, and a uv_idle handle keeps the poll from blocking while work
 * waits (work queued from a timer runs in the same iteration's check).
 *
 * An item lives inside its owner; the owner cancels it before it is freed.
 */
#ifndef CITEGATE_IO_DEFER_H
#define CITEGATE_IO_DEFER_H

#include "citegate/common.h"

#include <uv.h>

typedef struct cg_defer cg_defer_t;
typedef void (*cg_defer_fn)(cg_defer_t *d);

struct cg_defer {
    cg_list_t link; /* unlinked while not queued */
    cg_defer_fn fn;
};

typedef struct cg_safepoint {
    uv_check_t check;
    uv_idle_t idle;
    cg_list_t queue;
    cg_list_t flushes; /* writes of ready frames: see cg_defer_flush() */
    bool idle_on;
    bool closed; /* the loop is ending: queued work no longer runs */
} cg_safepoint_t;

void cg_safepoint_init(cg_safepoint_t *sp, uv_loop_t *loop);
/* Runs what is queued now (also done by the check handle). */
void cg_safepoint_run(cg_safepoint_t *sp);
void cg_safepoint_close(cg_safepoint_t *sp);

/* Queues d to call fn at the next safe point; a queued item stays queued once. */
void cg_defer(cg_safepoint_t *sp, cg_defer_t *d, cg_defer_fn fn);
void cg_defer_cancel(cg_defer_t *d);
/* Queues a write of frames that are ready (a client's HTTP/2 session): it
 * runs at the next safe point, or sooner, when a multiplexed upstream's
 * read has been taken in (cg_safepoint_flush()), so what one upstream read
 * made for many clients leaves as soon as that read is done, not at the
 * end of a loop turn that may read many more. */
void cg_defer_flush(cg_safepoint_t *sp, cg_defer_t *d, cg_defer_fn fn);
/* Runs the queued writes now. Call it only where the safe point could
 * run: outside every protocol library's callbacks. */
void cg_safepoint_flush(cg_safepoint_t *sp);
static inline bool cg_defer_queued(const cg_defer_t *d)
{
    return cg_list_linked(&d->link);
}

#endif
