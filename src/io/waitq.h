/*
 * A FIFO of items waiting for something (exchanges waiting for an upstream
 * connection or stream): an intrusive list (cg_list_t) that counts its
 * items, so a pool can bound its queue.
 */
#ifndef CITEGATE_IO_WAITQ_H
#define CITEGATE_IO_WAITQ_H

#include "citegate/common.h"

typedef struct cg_waitq {
    cg_list_t head;
    size_t len;
} cg_waitq_t;

void cg_waitq_init(cg_waitq_t *q);
void cg_waitq_push(cg_waitq_t *q, cg_list_t *l);
/* Puts l first (an item that was already served once goes ahead). */
void cg_waitq_push_front(cg_waitq_t *q, cg_list_t *l);
/* The first item, removed; NULL when empty. */
cg_list_t *cg_waitq_pop(cg_waitq_t *q);
/* Removes l if it is queued (in q: an item is on one queue at a time). */
void cg_waitq_remove(cg_waitq_t *q, cg_list_t *l);

static inline bool cg_waitq_empty(const cg_waitq_t *q)
{
    return q->len == 0;
}

#endif
