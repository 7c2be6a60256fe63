/* Intrusive wait queue: see waitq.h. */
#include "waitq.h"

void cg_waitq_init(cg_waitq_t *q)
{
    q->head.prev = q->head.next = &q->head;
    q->len = 0;
}

static void insert(cg_waitq_t *q, cg_waitq_link_t *after, cg_waitq_link_t *l)
{
    if (cg_waitq_linked(l))
        return;
    l->prev = after;
    l->next = after->next;
    after->next->prev = l;
    after->next = l;
    q->len++;
}

void cg_waitq_push(cg_waitq_t *q, cg_waitq_link_t *l)
{
    insert(q, q->head.prev, l);
}

void cg_waitq_push_front(cg_waitq_t *q, cg_waitq_link_t *l)
{
    insert(q, &q->head, l);
}

void cg_waitq_remove(cg_waitq_t *q, cg_waitq_link_t *l)
{
    if (!cg_waitq_linked(l))
        return;
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
    q->len--;
}

cg_waitq_link_t *cg_waitq_pop(cg_waitq_t *q)
{
    if (q->len == 0)
        return NULL;
    cg_waitq_link_t *l = q->head.next;
    cg_waitq_remove(q, l);
    return l;
}
