/*
 * A FIFO of items waiting for something (exchanges waiting for an upstream
 * connection or stream), intrusive: the link lives in the item, so joining
 * and leaving cost no allocation and leaving from the middle is O(1).
 */
#ifndef CITEGATE_IO_WAITQ_H
#define CITEGATE_IO_WAITQ_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cg_waitq_link {
    struct cg_waitq_link *prev, *next; /* NULL while not queued */
} cg_waitq_link_t;

typedef struct cg_waitq {
    cg_waitq_link_t head; /* sentinel */
    size_t len;
} cg_waitq_t;

void cg_waitq_init(cg_waitq_t *q);
void cg_waitq_push(cg_waitq_t *q, cg_waitq_link_t *l);
/* Puts l first (an item that was already served once goes ahead). */
void cg_waitq_push_front(cg_waitq_t *q, cg_waitq_link_t *l);
/* The first item, removed; NULL when empty. */
cg_waitq_link_t *cg_waitq_pop(cg_waitq_t *q);
/* Removes l if it is queued in q. */
void cg_waitq_remove(cg_waitq_t *q, cg_waitq_link_t *l);

static inline bool cg_waitq_linked(const cg_waitq_link_t *l)
{
    return l->next != NULL;
}

static inline bool cg_waitq_empty(const cg_waitq_t *q)
{
    return q->len == 0;
}

#endif
