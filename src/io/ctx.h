/*
 * A worker's loop context: what every module of the shell that runs on one
 * libuv loop shares. The loop and the configuration, the clock, the safe
 * point, the transformers' shared output, the count of exchanges in flight
 * and the drain that waits for it, the upstream pool in use and where
 * embedding calls go, and the hook that hands finished answers to
 * tracking. It sits below every module of the shell; the worker (worker.c)
 * fills it, and sits above them all.
 */
#ifndef CITEGATE_IO_CTX_H
#define CITEGATE_IO_CTX_H

#include "citegate/config.h"
#include "citegate/request.h"
#include "citegate/xform.h"
#include "defer.h"
#include "hdrs.h"
#include "upstream.h"

#include <uv.h>

/* A finished answer, as tracking reads it (SPEC §8). */
typedef struct cg_answer {
    const char *rid;
    cg_xform_t *xf;          /* its transformer: statistics, cited ids */
    const cg_request_t *req; /* the client's request (its question, its sources) */
    const cg_hdrs_t *keys;   /* its Authorization and api-key, for an embedding call */
    cg_span_t model;         /* the model asked for: the Azure deployment, or "model" */
} cg_answer_t;

typedef struct cg_ctx {
    uv_loop_t *loop;
    const cg_config_t *cfg;
    int index; /* the worker's number (0 says what all of them would) */
    bool draining;
    cg_safepoint_t safe;
    /* Added to the loop's clock; 0 in the daemon. The fuzz drivers move time
     * forward with it (and their timers with it) instead of waiting for a
     * timeout, so every "now" of the shell is read through cg_now_ms(). */
    uint64_t clock_skew;
    /* The transformers' output, shared: each exchange writes or copies it
     * out before its call returns, so one arena serves every stream. */
    cg_out_t out;

    size_t active; /* exchanges not yet done */
    /* Told when the first exchange begins (busy) and the last is done, so
     * that what only matters while streams are open can sleep with them. */
    void (*on_busy)(struct cg_ctx *ctx, bool busy);
    /* Run at a safe point when `active` drops to zero while draining. */
    cg_defer_t quiet;
    cg_defer_fn on_quiet;

    cg_upstream_t *up;  /* the pool in use: HTTP/1.1, h2 or the demo */
    char *data_sources; /* AZURE_AI_DATA_SOURCES, normalised to an array */
    /* Where embedding calls go (SPEC §3): &up, or a pool of their own;
     * NULL when there is none. embed_path is the calls' path and query. */
    cg_upstream_t **embed_upp;
    char *embed_path;

    /* A finished answer to track: tracking sets it, the exchange calls it. */
    void (*on_answer)(void *arg, const cg_answer_t *a);
    void *on_answer_arg;
    struct cg_tracking *tracking; /* tracking's state, for the admin queries */
} cg_ctx_t;

/* Sets up ctx for loop and cfg (the safe point included). */
void cg_ctx_init(cg_ctx_t *ctx, uv_loop_t *loop, const cg_config_t *cfg, int index);
/* An exchange is under way, or done: when the last one of a drain is done,
 * on_quiet runs at the next safe point. */
void cg_ctx_begin(cg_ctx_t *ctx);
void cg_ctx_end(cg_ctx_t *ctx);
/* Draining began: if nothing is in flight, on_quiet runs at once (at the
 * next safe point). */
void cg_ctx_drain(cg_ctx_t *ctx);
/* After the loop ended: frees what ctx owns (the shared output). */
void cg_ctx_free(cg_ctx_t *ctx);

static inline uint64_t cg_now_ms(const cg_ctx_t *ctx)
{
    return uv_now(ctx->loop) + ctx->clock_skew;
}

#endif
