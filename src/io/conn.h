/*
 * One connection layer for every socket citegate has: TCP, optional TLS
 * (a memory pipe, tls.h) and a write queue with high and low water marks.
 * Clients, HTTP/1.1 upstream connections and HTTP/2 upstream connections
 * all sit on it, so TLS errors, write failures and closing are handled
 * here once.
 *
 * The ownership rule: cg_conn_close() only marks and asks libuv to close;
 * no callback runs from inside a call into this layer. The owner learns of
 * failures from the read path (`end`, at the top of a libuv callback) or
 * from `closed`, which libuv calls once nothing is on the stack; that is
 * where the owner frees the memory the connection is embedded in.
 */
#ifndef CITEGATE_IO_CONN_H
#define CITEGATE_IO_CONN_H

#include "citegate/common.h"
#include "err.h"

#include <uv.h>

#define CG_CONN_HWM (256u << 10) /* writers above this should wait ... */
#define CG_CONN_LWM (64u << 10)  /* ... until `drain` says it fell below this */

typedef struct cg_conn cg_conn_t;
struct cg_tls_conf;

typedef struct cg_conn_ops {
    /* Plaintext arrived. */
    void (*read)(cg_conn_t *c, const char *p, size_t n);
    /* The connection is usable: connected, and the TLS handshake done. */
    void (*ready)(cg_conn_t *c);
    /* Queued bytes fell below CG_CONN_LWM after passing CG_CONN_HWM. */
    void (*drain)(cg_conn_t *c);
    /* From libuv's close callback: free the owner now. */
    void (*closed)(cg_conn_t *c);
} cg_conn_ops_t;

struct cg_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    struct cg_tls *tls; /* NULL on plain connections */
    const cg_conn_ops_t *ops;
    void *owner;
    size_t queued; /* bytes accepted but not yet written */
    cg_err_t err;  /* why it closed: CG_OK when the owner closed it */
    bool reading, closing, blocked, ready;
    bool shutting; /* closing after a FIN, once queued bytes are written */
    bool outgoing; /* we connected (an upstream), or accepted (a client) */
    /* Set by an owner after connecting: the peer's name in logs (NULL:
     * "upstream" or "client"), and quiet when the owner reports failures
     * itself, so a connect or TLS failure is logged at debug level only. */
    const char *peer;
    bool quiet;
};

/* Accepts a connection from `server` (TLS when conf is not NULL). On
 * failure it returns the error; the connection is closing and `closed`
 * will run. The socket has TCP_NODELAY from its listener
 * (cg_server_listen), so it is not set again here. */
cg_err_t cg_conn_accept(cg_conn_t *c, uv_stream_t *server, struct cg_tls_conf *conf,
                        const cg_conn_ops_t *ops, void *owner);
/* Serves fd, a connected stream socket, as if it had been accepted: the
 * seam through which the tests and fuzzers hand the shell one end of a
 * socketpair (h2o's fuzz drivers do the same). The connection owns fd from
 * now on, even when it fails. */
cg_err_t cg_conn_adopt(cg_conn_t *c, uv_loop_t *loop, int fd, struct cg_tls_conf *conf,
                       const cg_conn_ops_t *ops, void *owner);
/* Connects to addr (TLS with server name sni when conf is not NULL):
 * `ready` when usable, else `closed` with the reason. */
void cg_conn_connect(cg_conn_t *c, uv_loop_t *loop, const struct sockaddr *addr,
                     struct cg_tls_conf *conf, const char *sni, const cg_conn_ops_t *ops,
                     void *owner);

/* Writes all of bufs (encrypted on TLS connections). Bytes the socket does
 * not take at once are copied, so the caller's buffers are free on return.
 * A failure closes the connection; nothing is called back. A plain
 * connection may be written before `ready`: the bytes leave as soon as the
 * socket is connected (at once on loopback), and a failed connect still
 * reaches `closed` as a connect failure. */
void cg_conn_write(cg_conn_t *c, const uv_buf_t *bufs, unsigned n);
/* An owner that stopped writing at CG_CONN_HWM (its own count, which may
 * include bytes the socket then took at once) asks for `drain`: true when
 * it will come, false when nothing is queued and the owner must go on by
 * itself. */
bool cg_conn_wait_drain(cg_conn_t *c);
void cg_conn_read_start(cg_conn_t *c);
void cg_conn_read_stop(cg_conn_t *c);
/* Closes at once (queued bytes are dropped). */
void cg_conn_close(cg_conn_t *c, cg_err_t why);
/* Sends a FIN once queued bytes are written, then closes. */
void cg_conn_shutdown(cg_conn_t *c);
/* The protocol the peer chose by ALPN, or NULL. */
const char *cg_conn_alpn(const cg_conn_t *c);

static inline bool cg_conn_usable(const cg_conn_t *c)
{
    return !c->closing;
}

#endif
