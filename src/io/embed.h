/*
 * The embeddings client (SPEC §8 "Semantic recall"): POST {"model","input"}
 * to the embeddings endpoint through the worker's own upstream machinery
 * (an internal exchange on the upstream's pool, or on the endpoint's own
 * pool: HTTP/1.1 or h2, TLS, the same connect and first-byte timeouts).
 *
 * Bounded per worker: at most CG_EMBED_IN_FLIGHT calls run, at most
 * CG_EMBED_QUEUE wait; a call that cannot be queued is refused at once
 * (counted as a failure), and one running longer than its timeout is
 * abandoned. Nothing here is on an answer's path: a caller asks, and its
 * callback runs later from the loop, never inside cg_embed_ask.
 */
#ifndef CITEGATE_IO_EMBED_H
#define CITEGATE_IO_EMBED_H

#include "citegate/embedding.h"
#include "ctx.h"
#include "hdrs.h"
#include "tracking/tracking.h"

#define CG_EMBED_IN_FLIGHT  8
#define CG_EMBED_QUEUE      1024
#define CG_EMBED_TIMEOUT_MS 10000

typedef struct cg_embed cg_embed_t;
typedef struct cg_embed_call cg_embed_call_t;

/* The outcome of a call: vec (with its model) to take, or NULL with why,
 * a one-line reason without the key or the endpoint's answer. */
typedef void (*cg_embed_cb)(void *arg, cg_vector_t *vec, const char *why);

/* The worker's client, or NULL when it has no embeddings endpoint
 * (CITEGATE_EMBEDDINGS_MODEL unset, or nowhere to send the calls). */
cg_embed_t *cg_embed_new(cg_ctx_t *ctx);

/*
 * Queues a call embedding text[0..n). keys: the Authorization and api-key
 * fields to send when CITEGATE_EMBEDDINGS_API_KEY is unset (copied; NULL:
 * none). urgent calls (a recall waits for them) go ahead of the queue.
 * Returns NULL when the queue is full or the worker drains (counted as a
 * failure; cb never runs), else the call, whose cb runs exactly once
 * unless it is cancelled first.
 */
cg_embed_call_t *cg_embed_ask(cg_embed_t *e, const char *text, size_t n, const cg_hdrs_t *keys,
                              bool urgent, cg_embed_cb cb, void *arg);

/* The dimension of the vectors stored so far (0: none). A vector of
 * another dimension (the endpoint's model changed: recall can compare it
 * with none of them) is still handed out, but counted as a failure and
 * logged once per change, with both dimensions (SPEC §8). */
void cg_embed_expect_dim(cg_embed_t *e, uint32_t dim);

/* Forgets a call whose callback has not run: it never will. */
void cg_embed_cancel(cg_embed_call_t *c);

/* These calls, as tracking takes them (tracking/tracking.h). */
extern const cg_track_embedder_t cg_embed_tracking;

/* Shutdown: every queued and running call ends now, failed. */
void cg_embed_drain(cg_embed_t *e);

/* Once the loop has ended: the outcomes not handed out yet are (calls that
 * never finished fail), then e is freed. NULL: no-op. */
void cg_embed_free(cg_embed_t *e);

#endif
