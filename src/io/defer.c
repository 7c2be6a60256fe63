/* Safe points: see defer.h. */
#include "defer.h"

#include <stddef.h>

/* Rounds of newly queued work one check runs before it leaves the rest to
 * the next iteration, so an item that keeps queueing itself cannot starve
 * the loop. */
#define MAX_ROUNDS 8

static void link_tail(cg_defer_t *head, cg_defer_t *d)
{
    d->prev = head->prev;
    d->next = head;
    head->prev->next = d;
    head->prev = d;
}

static bool empty(const cg_defer_t *head)
{
    return head->next == head;
}

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

void cg_safepoint_run(cg_safepoint_t *sp)
{
    for (int round = 0; round < MAX_ROUNDS && !empty(&sp->queue); round++) {
        /* Take this round's items; what they queue waits for the next. */
        cg_defer_t batch = {&batch, &batch, NULL};
        batch.next = sp->queue.next;
        batch.prev = sp->queue.prev;
        batch.next->prev = &batch;
        batch.prev->next = &batch;
        sp->queue.next = sp->queue.prev = &sp->queue;
        while (!empty(&batch)) {
            cg_defer_t *d = batch.next;
            cg_defer_cancel(d);
            d->fn(d);
        }
    }
    idle_set(sp, !empty(&sp->queue));
}

static void on_check(uv_check_t *h)
{
    cg_safepoint_run(h->data);
}

void cg_safepoint_init(cg_safepoint_t *sp, uv_loop_t *loop)
{
    sp->queue.next = sp->queue.prev = &sp->queue;
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

void cg_defer(cg_safepoint_t *sp, cg_defer_t *d, cg_defer_fn fn)
{
    d->fn = fn;
    if (cg_defer_queued(d))
        return;
    link_tail(&sp->queue, d);
    idle_set(sp, true);
}

void cg_defer_cancel(cg_defer_t *d)
{
    if (!cg_defer_queued(d))
        return;
    d->prev->next = d->next;
    d->next->prev = d->prev;
    d->next = d->prev = NULL;
}
