/* The tracking store's query thread: see reader.h. */
#include "reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cg_reader {
    pthread_t thread;
    const cg_store_ops_t *ops;
    char *target;
    size_t max_queued;

    pthread_mutex_t mu;
    pthread_cond_t work;
    /* Under mu: */
    cg_query_t *queue, **queue_tail; /* waiting, oldest first */
    size_t queued;
    cg_query_t *done, **done_tail; /* finished, oldest first */
    bool stopping;
};

void cg_query_free(cg_query_t *q)
{
    free(q->q);
    q->q = NULL;
    cg_buf_free(&q->json);
    cg_vector_free(&q->vec);
}

static void fail(cg_query_t *q, const char *why)
{
    q->rc = CG_STORE_FAILED;
    snprintf(q->err, sizeof(q->err), "%s", why);
}

/* Runs q on *s; a connection that broke is closed. */
static void ask(cg_reader_t *r, cg_store_t **s, cg_query_t *q)
{
    if (r->ops->set_deadline)
        r->ops->set_deadline(*s, q->deadline_ms);
    if (q->stats)
        q->rc = r->ops->stats ? r->ops->stats(*s, &q->totals) : CG_STORE_FAILED;
    else
        q->rc = r->ops->recall(*s, &(cg_recall_t){q->q ? q->q : "", q->k, &q->vec}, &q->json);
    if (q->rc != CG_STORE_OK)
        snprintf(q->err, sizeof(q->err), "%s", r->ops->errmsg(*s));
    if (q->rc == CG_STORE_BROKEN) {
        r->ops->close(*s);
        *s = NULL;
    }
}

/* Runs q, opening the connection first when needed. A connection kept from
 * an earlier query may have died since (a server restart): that costs one
 * more try on a new one, within the same deadline. */
static void run(cg_reader_t *r, cg_store_t **s, cg_query_t *q)
{
    for (int tries = 0; tries < 2; tries++) {
        if (cg_store_now_ms() >= q->deadline_ms) {
            if (tries == 0)
                fail(q, "timed out waiting for an earlier query");
            return;
        }
        bool fresh = *s == NULL;
        if (fresh) {
            bool retry;
            *s = r->ops->open(r->target, q->deadline_ms, q->err, sizeof(q->err), &retry);
            if (*s == NULL) {
                q->rc = CG_STORE_FAILED;
                return;
            }
        }
        ask(r, s, q);
        if (q->rc != CG_STORE_BROKEN || fresh)
            return;
    }
}

static void finish(cg_reader_t *r, cg_query_t *q)
{
    q->next = NULL;
    *r->done_tail = q;
    r->done_tail = &q->next;
}

static void *reader_main(void *arg)
{
    cg_reader_t *r = arg;
    cg_store_t *s = NULL;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stopping && r->queue == NULL)
            pthread_cond_wait(&r->work, &r->mu);
        if (r->stopping)
            break;
        cg_query_t *q = r->queue;
        r->queue = q->next;
        if (r->queue == NULL)
            r->queue_tail = &r->queue;
        r->queued--;
        pthread_mutex_unlock(&r->mu);
        run(r, &s, q);
        pthread_mutex_lock(&r->mu);
        finish(r, q);
    }
    pthread_mutex_unlock(&r->mu);
    r->ops->close(s);
    return NULL;
}

cg_reader_t *cg_reader_start(const cg_store_ops_t *ops, const char *target, size_t max_queued)
{
    cg_reader_t *r = cg_xcalloc(1, sizeof(*r));
    r->ops = ops;
    r->target = cg_xstrndup(target ? target : "", target ? strlen(target) : 0);
    r->max_queued = max_queued ? max_queued : 1;
    r->queue_tail = &r->queue;
    r->done_tail = &r->done;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->work, NULL);
    int rc = cg_store_thread(&r->thread, reader_main, r);
    if (rc != 0) {
        pthread_cond_destroy(&r->work);
        pthread_mutex_destroy(&r->mu);
        free(r->target);
        free(r);
        return NULL;
    }
    return r;
}

bool cg_reader_submit(cg_reader_t *r, cg_query_t *q)
{
    bool ok = false;
    pthread_mutex_lock(&r->mu);
    if (!r->stopping && r->queued < r->max_queued) {
        q->next = NULL;
        *r->queue_tail = q;
        r->queue_tail = &q->next;
        r->queued++;
        ok = true;
        pthread_cond_signal(&r->work);
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

cg_query_t *cg_reader_finished(cg_reader_t *r)
{
    pthread_mutex_lock(&r->mu);
    cg_query_t *list = r->done;
    r->done = NULL;
    r->done_tail = &r->done;
    pthread_mutex_unlock(&r->mu);
    return list;
}

cg_query_t *cg_reader_stop(cg_reader_t *r)
{
    if (r == NULL)
        return NULL;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    while (r->queue != NULL) {
        cg_query_t *q = r->queue;
        r->queue = q->next;
        fail(q, "stopping");
        finish(r, q);
    }
    cg_query_t *list = r->done;
    pthread_cond_destroy(&r->work);
    pthread_mutex_destroy(&r->mu);
    free(r->target);
    free(r);
    return list;
}
