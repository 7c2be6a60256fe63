/*
 * The upstream interface. Three implementations answer exchanges: the
 * HTTP/1.1 pool (up_h1.c), the HTTP/2 pool (up_h2.c) and the embedded demo
 * (up_demo.c). The exchange calls them only through this table; they answer
 * through cg_exchange_on_head/body/end and cg_exchange_upstream_sent (exchange.h).
 *
 * None of these calls back into the calling exchange before returning:
 * sending, aborting and pausing only queue work, and whatever ends an
 * exchange arrives later, from the loop.
 */
#ifndef CITEGATE_IO_UPSTREAM_H
#define CITEGATE_IO_UPSTREAM_H

#include "err.h"

#include <stdbool.h>
#include <sys/socket.h>

typedef struct cg_exchange cg_exchange_t;
typedef struct cg_upstream cg_upstream_t;
struct cg_ctx;
struct cg_tls_conf;

typedef struct cg_upstream_ops {
    const char *name;
    /* Takes the exchange: starts its request, or queues it. CG_E_BUSY
     * when the queue is full (the exchange was not taken). */
    cg_err_t (*send)(cg_upstream_t *up, cg_exchange_t *ex);
    /* Forgets the exchange (its client went away, or it timed out): its
     * stream is reset or its connection closed. */
    void (*abort)(cg_upstream_t *up, cg_exchange_t *ex);
    /* Backpressure: stop, or resume, delivering this exchange's body. */
    void (*pause)(cg_upstream_t *up, cg_exchange_t *ex, bool pause);
    /* Drain: close idle connections, and each busy one once it is idle. */
    void (*drain)(cg_upstream_t *up);
    /* Frees the pool once the loop has stopped. */
    void (*free)(cg_upstream_t *up);
} cg_upstream_ops_t;

struct cg_upstream {
    const cg_upstream_ops_t *ops;
    struct cg_ctx *ctx;
    const struct cg_upstream_target *target; /* where it connects (NULL: the demo) */
    /* The worker's pointer to the pool in use for this target, which an h2
     * pool turns to its HTTP/1.1 fallback when ALPN says so. */
    cg_upstream_t **slot;
};

/* Where the upstream is: parsed from CITEGATE_UPSTREAM. */
typedef struct cg_upstream_url {
    bool tls;
    char host[256];
    int port;
    char base[1024]; /* path prefix without trailing slash */
    char authority[300];
} cg_upstream_url_t;

int cg_upstream_url_parse(const char *url, cg_upstream_url_t *out);

/* What every pool of a worker shares about its upstream. */
typedef struct cg_upstream_target {
    cg_upstream_url_t url;
    struct sockaddr_storage addr;
    struct cg_tls_conf *tls; /* https:// upstreams */
    const char *sni;         /* TLS server name; NULL for an IP literal */
    const char *name;        /* for logs: NULL ("upstream"), "embeddings endpoint" */
    bool quiet; /* its calls' owner reports failures: connections log them at debug level */
} cg_upstream_target_t;

/* The pools: each serves one target, and *slot names the pool in use for it. */
cg_upstream_t *cg_up_h1_new(struct cg_ctx *ctx, const cg_upstream_target_t *t,
                            cg_upstream_t **slot);
/* `fallback`: the HTTP/1.1 pool to hand everything to when an https://
 * upstream does not choose h2 by ALPN (NULL: that is an error). */
cg_upstream_t *cg_up_h2_new(struct cg_ctx *ctx, const cg_upstream_target_t *t, cg_upstream_t **slot,
                            cg_upstream_t *fallback);
cg_upstream_t *cg_up_demo_new(struct cg_ctx *ctx);

#endif
