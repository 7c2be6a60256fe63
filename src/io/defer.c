/* Safe points: see defer.h. */
#include "defer.h"

#include <stddef.h>

/* Rounds of newly queued work one check runs before it leaves the rest to
 * the next iteration, so an item that keeps queueing itself cannot starve
 * the loop. */
#define MAX_ROUNDS 8

static void on_idle(uv_idle_t *h)
{
    (void)h; /* only keeps the poll from blocking */
}

static void idle_set(cg_safepoint_t *sp, bool on)
{
    if (on == sp->idle_on || sp->closed)
        return;
    sp->idle_on = on;
    if (on)
        uv_idle_start(&sp->idle, on_idle);
    else
        uv_idle_stop(&sp->idle);
}

static bool pending(const cg_safepoint_t *sp)
{
    return !cg_list_empty(&sp->queue) || !cg_list_empty(&sp->flushes);
}

/* Runs the items queued on q now; what they queue waits for the next call. */
static void run_batch(cg_list_t *q)
{
    if (cg_list_empty(q))
        return;
    cg_list_t batch;
    batch.next = q->next;
    batch.prev = q->prev;
    batch.next->prev = &batch;
    batch.prev->next = &batch;
    cg_list_init(q);
    while (!cg_list_empty(&batch)) {
        cg_defer_t *d = CG_CONTAINER_OF(batch.next, cg_defer_t, link);
        cg_list_unlink(&d->link);
        d->fn(d);
    }
}

void cg_safepoint_run(cg_safepoint_t *sp)
{
    /* Writes first: queued work may close what they write to (a drain's
     * end closes every client), and what work makes is written next round. */
    for (int round = 0; round < MAX_ROUNDS && pending(sp); round++) {
        run_batch(&sp->flushes);
        run_batch(&sp->queue);
    }
    idle_set(sp, pending(sp));
}

void cg_safepoint_flush(cg_safepoint_t *sp)
{
    run_batch(&sp->flushes);
}

static void on_check(uv_check_t *h)
{
    cg_safepoint_run(h->data);
}

void cg_safepoint_init(cg_safepoint_t *sp, uv_loop_t *loop)
{
    cg_list_init(&sp->queue);
    cg_list_init(&sp->flushes);
    sp->idle_on = false;
    sp->closed = false;
    uv_check_init(loop, &sp->check);
    uv_idle_init(loop, &sp->idle);
    sp->check.data = sp;
    uv_check_start(&sp->check, on_check);
    /* The check handle alone must not keep a finished loop alive. */
    uv_unref((uv_handle_t *)&sp->check);
}

void cg_safepoint_close(cg_safepoint_t *sp)
{
    sp->closed = true;
    uv_close((uv_handle_t *)&sp->check, NULL);
    uv_close((uv_handle_t *)&sp->idle, NULL);
}

static void enqueue(cg_safepoint_t *sp, cg_list_t *q, cg_defer_t *d, cg_defer_fn fn)
{
    d->fn = fn;
    if (cg_defer_queued(d))
        return;
    cg_list_insert(q, &d->link);
    idle_set(sp, true);
}

void cg_defer(cg_safepoint_t *sp, cg_defer_t *d, cg_defer_fn fn)
{
    enqueue(sp, &sp->queue, d, fn);
}

void cg_defer_flush(cg_safepoint_t *sp, cg_defer_t *d, cg_defer_fn fn)
{
    enqueue(sp, &sp->flushes, d, fn);
}

void cg_defer_cancel(cg_defer_t *d)
{
    cg_list_unlink(&d->link);
}
