/* Intrusive wait queue: see waitq.h. */
#include "waitq.h"

void cg_waitq_init(cg_waitq_t *q)
{
    cg_list_init(&q->head);
    q->len = 0;
}

void cg_waitq_push(cg_waitq_t *q, cg_list_t *l)
{
    if (cg_list_linked(l))
        return;
    cg_list_insert(&q->head, l);
    q->len++;
}

void cg_waitq_push_front(cg_waitq_t *q, cg_list_t *l)
{
    if (cg_list_linked(l))
        return;
    cg_list_insert(q->head.next, l);
    q->len++;
}

void cg_waitq_remove(cg_waitq_t *q, cg_list_t *l)
{
    if (!cg_list_linked(l))
        return;
    cg_list_unlink(l);
    q->len--;
}

cg_list_t *cg_waitq_pop(cg_waitq_t *q)
{
    if (q->len == 0)
        return NULL;
    cg_list_t *l = q->head.next;
    cg_waitq_remove(q, l);
    return l;
}
