/* Citation tracking in the daemon (SPEC §8): stats, metrics, the tracking
 * store (SQLite, or PostgreSQL with CITEGATE_TRACKING_DSN) and its queries. */
#ifndef CITEGATE_TRACKING_H
#define CITEGATE_TRACKING_H

#include "citegate/embedding.h"
#include "citegate/request.h"
#include "citegate/xform.h"
#include "io/hdrs.h"
#include "io/ctx.h"

/*
 * How tracking reaches the embeddings client (io/embed.h): a table the
 * worker hands it, so tracking depends on no exchange and no pool. The
 * calls are io/embed.h's cg_embed_* (see there); `open` gives NULL when
 * there is no embeddings endpoint.
 */
struct cg_embed;
struct cg_embed_call;
typedef void (*cg_track_vector_cb)(void *arg, cg_vector_t *vec, const char *why);
typedef struct cg_track_embedder {
    struct cg_embed *(*open)(cg_ctx_t *ctx);
    struct cg_embed_call *(*ask)(struct cg_embed *e, const char *text, size_t n,
                                 const cg_hdrs_t *keys, bool urgent, cg_track_vector_cb cb,
                                 void *arg);
    void (*cancel)(struct cg_embed_call *c);
    void (*drain)(struct cg_embed *e);
    void (*free)(struct cg_embed *e);
    void (*expect_dim)(struct cg_embed *e, uint32_t dim);
} cg_track_embedder_t;

/* Starts the worker's store threads (writer, and for PostgreSQL the reader)
 * and, with semantic memory, the embeddings client through embedder (NULL:
 * none), as the configuration asks, and takes the worker's finished answers
 * (ctx->on_answer). Never waits for the store. */
void cg_tracking_start(cg_ctx_t *ctx, const cg_track_embedder_t *embedder);
/* Shutdown began: embedding calls end now (their patterns are kept
 * without a vector). */
void cg_tracking_drain(cg_ctx_t *ctx);
/* After the loop ended: writes what is queued (if the store is there), stops
 * the threads and frees what tracking holds. */
void cg_tracking_stop(cg_ctx_t *ctx);

/*
 * The admin queries: GET /v1/citations/stats and /v1/citations/patterns.
 * Answered now (SQLite, process stats, memory off, or a refusal): returns
 * NULL with *status and body filled (200 and the JSON, or 503 with body
 * untouched). Answered by the PostgreSQL reader: returns a pending query;
 * cb(arg, status, body) runs later from the loop, within about 2 s whatever
 * the database does, and owns body. Cancel a pending query whose arg goes
 * away first. A 503 is logged and counted here.
 */
typedef struct cg_track_query cg_track_query_t;
typedef void (*cg_track_query_cb)(void *arg, int status, cg_buf_t *body);

cg_track_query_t *cg_tracking_stats(cg_ctx_t *ctx, int *status, cg_buf_t *body,
                                    cg_track_query_cb cb, void *arg);
/* keys: the admin request's fields, whose Authorization or api-key its
 * embedding call carries when CITEGATE_EMBEDDINGS_API_KEY is unset. With
 * embeddings the recall waits for q's vector (at most
 * CG_TRACKING_EMBED_WAIT_MS, then it ranks lexically), so it is pending. */
cg_track_query_t *cg_tracking_patterns(cg_ctx_t *ctx, const char *q, int k, const cg_hdrs_t *keys,
                                       int *status, cg_buf_t *body, cg_track_query_cb cb,
                                       void *arg);
void cg_tracking_cancel(cg_track_query_t *tq);

/* Longest wait for a PostgreSQL admin query: the reader gives up after
 * QUERY_STORE_MS, the loop answers 503 after QUERY_ANSWER_MS regardless. */
#define CG_TRACKING_QUERY_STORE_MS  1500
#define CG_TRACKING_QUERY_ANSWER_MS 1800
/* Longest wait of a recall for its query's embedding. */
#define CG_TRACKING_EMBED_WAIT_MS 1000

#endif
