/*
 * The reader: a thread that answers the admin queries of a tracking store
 * (recall, fleet stats) on a connection of its own, so the event loop never
 * waits for the store. Every query carries a deadline: one that waited in
 * the queue past it is not run, and the store gives up at it (connect
 * included). A connection that broke is reopened by the next query.
 *
 * Finished queries are handed back as a list for the event loop to take
 * (it polls while it has queries out: the reader never touches the loop).
 */
#ifndef CITEGATE_READER_H
#define CITEGATE_READER_H

#include "store.h"

typedef struct cg_query {
    bool stats; /* fleet stats; else a recall of q, k */
    char *q;    /* owned; freed by cg_query_free */
    int k;
    cg_vector_t vec; /* q's embedding (owned), or none: lexical recall */
    int64_t deadline_ms; /* CLOCK_MONOTONIC (cg_store_now_ms) */
    int rc;              /* CG_STORE_OK, or an error with err */
    cg_buf_t json;       /* a recall's {"patterns":[…]} */
    cg_stats_t totals;   /* the stats' counters */
    char err[256];
    struct cg_query *next;
} cg_query_t;

/* Frees q's own memory (q itself is the caller's). */
void cg_query_free(cg_query_t *q);

typedef struct cg_reader cg_reader_t;

/* Starts the thread; nothing is opened before the first query. At most
 * max_queued queries wait. NULL when the thread cannot be created. */
cg_reader_t *cg_reader_start(const cg_store_ops_t *ops, const char *target, size_t max_queued);

/* Queues q (the caller keeps ownership until it comes back finished).
 * False when the queue is full. */
bool cg_reader_submit(cg_reader_t *r, cg_query_t *q);

/* Takes the finished queries, oldest first (NULL: none). */
cg_query_t *cg_reader_finished(cg_reader_t *r);

/* Waits for the query running (bounded by its deadline), joins the thread
 * and frees r. Returns every query not taken yet, those
 * that never ran finished with an error. NULL r: NULL. */
cg_query_t *cg_reader_stop(cg_reader_t *r);

#endif
