/*
 * A worker: one process, one libuv loop, and everything the loop serves.
 * The worker owns its state (listeners, clients, the upstream pool, TLS
 * configurations, safe points); the modules reach it through the pointer
 * each of their objects keeps.
 */
#ifndef CITEGATE_IO_WORKER_H
#define CITEGATE_IO_WORKER_H

#include "citegate/config.h"
#include "defer.h"
#include "upstream.h"

#include <uv.h>

typedef struct cg_client cg_client_t;

typedef struct cg_worker {
    uv_loop_t *loop;
    const cg_config_t *cfg;
    int index;
    bool draining;
    cg_safepoint_t safe;

    /* client side */
    uv_tcp_t listener, admin;
    bool listener_open;
    struct cg_tls_conf *srv_tls; /* TLS on the client listener */
    cg_list_t clients;           /* every open client connection (cg_client_t) */
    size_t nclients;
    size_t nserving;         /* of them, on the client listener (capped) */
    bool accept_paused;      /* a connection waits in the listener: at the cap */
    uv_timer_t client_sweep; /* request deadlines (slowloris) */
    size_t active;           /* exchanges not yet done */
    /* The transformers' output, shared: each exchange writes or copies it
     * out before its call returns, so one arena serves every stream. */
    cg_out_t out;

    /* upstream side */
    cg_upstream_target_t target;
    cg_upstream_t *up;    /* the pool in use: HTTP/1.1, h2 or the demo */
    cg_upstream_t *owned; /* the pool the worker frees (h2 frees its fallback) */
    char *data_sources;   /* AZURE_AI_DATA_SOURCES, normalised to an array */

    /* Called at a safe point when `active` drops to zero while draining. */
    cg_defer_t quiet;
    cg_defer_fn on_quiet;

    struct cg_tracking *tracking; /* citation tracking's store and threads (SPEC §8) */
    /* Called for each finished answer to track (tracking.c sets it): the
     * exchange reaches tracking through it, not by name. */
    void (*on_answer)(struct cg_exchange *ex);
    /* Where embedding calls go (SPEC §3): embed_upp is &up, or &embed_up
     * for an endpoint elsewhere; NULL when there is none. */
    cg_upstream_t **embed_upp;
    char *embed_path; /* the calls' path and query on it */
    cg_upstream_target_t embed_target;
    cg_upstream_t *embed_up, *embed_owned;

    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t grace;     /* drain deadline */
    uv_timer_t lag_timer; /* measures event-loop stalls */
    uint64_t lag_last;    /* when it last fired, uv_hrtime() */
    /* Added to the loop's clock; 0 in the daemon. The fuzz drivers move time
     * forward with it (and their timers with it) instead of waiting for a
     * timeout, so every "now" of the shell is read through cg_now_ms(). */
    uint64_t clock_skew;
} cg_worker_t;

/* Runs one worker until it has drained; returns its exit status (2: bad
 * configuration). data_sources: AZURE_AI_DATA_SOURCES prepared, or NULL. */
int cg_worker_run(const cg_config_t *cfg, int index, char *data_sources);

static inline uint64_t cg_now_ms(const cg_worker_t *w)
{
    return uv_now(w->loop) + w->clock_skew;
}

#endif
