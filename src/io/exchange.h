/*
 * Exchanges: one client request forwarded upstream and its answer streamed
 * back, transformed on the chat completion routes (SPEC §4-6, §11).
 *
 * An exchange owns its request (taken from the connection that read it),
 * so it outlives nothing it borrowed. Its client side is reached through
 * cg_down_ops_t (HTTP/1.1 connection or h2 stream), its upstream through
 * the worker's cg_upstream_t. Its memory is freed in its timer's close
 * callback, after DONE: a pointer to it stays valid through the callback
 * that finished it.
 */
#ifndef CITEGATE_IO_EXCHANGE_H
#define CITEGATE_IO_EXCHANGE_H

#include "citegate/dialect.h"
#include "citegate/profile.h"
#include "citegate/request.h"
#include "citegate/xform.h"
#include "err.h"
#include "exstate.h"
#include "http.h"
#include "upreq.h"
#include "waitq.h"
#include "ctx.h"

/* Where an exchange's answer goes. `head` gets the response headers
 * citegate sends (no framing headers); content_length is the body length,
 * or -1 when it is streamed. None of these may call back into the
 * exchange. */
typedef struct cg_down_ops {
    void (*head)(cg_exchange_t *ex, int status, const cg_hdrs_t *h, long long content_length);
    void (*data)(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total);
    /* The last bytes and then the end of a complete body: `data` then
     * `end(true)`, in one write where the protocol can (NULL: those two). */
    void (*last)(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total);
    /* The body is complete (true) or broke off (false). */
    void (*end)(cg_exchange_t *ex, bool complete);
    size_t (*queued)(cg_exchange_t *ex);
    /* The exchange is over; the downstream forgets it. */
    void (*done)(cg_exchange_t *ex);
} cg_down_ops_t;

typedef enum { CG_MODE_PASS, CG_MODE_STREAM, CG_MODE_BODY } cg_ex_mode_t;

/* What the upstream pool serving an exchange keeps in it. */
typedef struct cg_upslot {
    void *handle;   /* the pool's connection or stream */
    cg_list_t wait; /* in the pool's queue */
    uint8_t resent;       /* times sent again after a refusal */
} cg_upslot_t;

struct cg_exchange {
    cg_ctx_t *ctx;
    /* The pool that answers it: the worker's upstream, or the embeddings
     * endpoint's (embed.c). A pointer to the worker's slot, which an h2 pool
     * turns to its HTTP/1.1 fallback. */
    cg_upstream_t **upp;
    /* citegate's own call (an embedding), not a client's request: it is
     * neither counted in the request metrics nor logged as an access. */
    bool internal;
    cg_err_t err; /* why the upstream side failed, or CG_OK */
    cg_ex_state_t state;
    cg_ex_mode_t mode;
    cg_reqmsg_t msg;
    const cg_down_ops_t *down;
    void *down_ctx;
    bool gone;      /* the client went away */
    bool transform; /* a chat completion route */
    bool paused;    /* the client is behind: the upstream waits */
    bool is_sse;    /* the client's answer is SSE */
    bool retyped;   /* ... made of AWS's event stream: its Content-Type is ours */
    bool accounted; /* counted, logged and tracked: once, before its last bytes */
    char rid[64];
    char *cors_origin; /* an allowed Origin to answer with, or NULL */
    int route, status;
    const cg_profile_t *profile;
    cg_request_t req;
    /* Citation aliases (SPEC §7): on for this request, and the table of
     * what went upstream aliased (NULL: nothing was); req points at it. */
    bool aliasing;
    struct cg_aliases *aliases;
    /* The upstream's API for this exchange: the configured dialect on the
     * chat routes, the default (as is) on every other path. */
    const cg_dialect_t *dialect;
    /* The translated request; the transformer reads it to the end. */
    cg_dialect_req_t dreq;
    /* The request as it goes upstream: from its building to the answer's
     * head (it may be sent again until then), NULL before and after. */
    cg_upreq_t *upreq;
    cg_upslot_t up;
    /* The request's own key (Authorization, api-key), kept to the end for
     * its embedding call when no CITEGATE_EMBEDDINGS_API_KEY is set. */
    cg_hdrs_t keys;
    cg_xform_t *xf; /* writes into the worker's out, emitted before it returns */
    cg_buf_t body;  /* a non-streaming answer, held to be transformed */
    cg_hdrs_t head; /* its upstream headers */
    uint64_t t_start, t_queued, t_upstream, last_activity;
    uv_timer_t timer;
    size_t resp_bytes;
};

/* Makes an exchange for msg (taken over: msg is left empty). The caller
 * keeps the pointer, then calls cg_exchange_run(); from `done` on it must
 * forget it. */
cg_exchange_t *cg_exchange_new(cg_ctx_t *ctx, cg_reqmsg_t *msg, const cg_down_ops_t *down,
                               void *arg);
/* Makes an exchange for a call of citegate's own (an embedding) through the
 * pool *upp; the caller runs it like a client's. */
cg_exchange_t *cg_exchange_call(cg_ctx_t *ctx, cg_reqmsg_t *msg, cg_upstream_t **upp,
                                const cg_down_ops_t *down, void *arg);
void cg_exchange_run(cg_exchange_t *ex);
/* The route the exchange is counted under, where its path says otherwise
 * (a refusal on the admin listener). */
void cg_exchange_set_route(cg_exchange_t *ex, int route);
/* Answers with an error instead (a request the client side refused). */
void cg_exchange_reject(cg_exchange_t *ex, int status, const char *code, const char *message);

/* From the client side. */
void cg_exchange_client_gone(cg_exchange_t *ex);
void cg_exchange_client_drained(cg_exchange_t *ex);
/* Drain time is over: end the answer now. */
void cg_exchange_shutdown(cg_exchange_t *ex);

/* From the upstream side. */
void cg_exchange_upstream_queued(cg_exchange_t *ex);     /* it waits for a connection */
void cg_exchange_upstream_connecting(cg_exchange_t *ex); /* a connection is made for it */
void cg_exchange_upstream_sent(cg_exchange_t *ex);       /* the request is on its way */
void cg_exchange_on_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h);
void cg_exchange_on_body(cg_exchange_t *ex, const char *p, size_t n);
/* The answer ended: CG_OK when complete, else why it broke off. */
void cg_exchange_on_end(cg_exchange_t *ex, cg_err_t err);
/* The body's last bytes (n may be 0) and its complete end, in one read:
 * cg_exchange_on_body then cg_exchange_on_end(CG_OK), in one write.
 * Returns false when those bytes broke an event stream's framing: the
 * connection they came on must not carry another request. */
bool cg_exchange_on_last(cg_exchange_t *ex, const char *p, size_t n);

static inline bool cg_exchange_done(const cg_exchange_t *ex)
{
    return ex->state == CG_EX_DONE;
}

#endif
