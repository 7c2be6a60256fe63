/*
 * The client side of a worker: its listeners (the client listener, TLS on
 * it when configured, and the admin listener), the connections they
 * accept, and what a worker does to all of them at once (drain, shut down,
 * close). Accepting picks each connection's protocol (client.h): HTTP/2 by
 * ALPN or by its preface, else HTTP/1.1; admin connections speak HTTP/1.1.
 * A sweep closes connections past their request deadline (slowloris), and
 * at CITEGATE_MAX_CLIENT_CONNECTIONS accepting pauses until one closes.
 */
#ifndef CITEGATE_IO_SERVER_H
#define CITEGATE_IO_SERVER_H

#include "client.h"

typedef struct cg_server {
    cg_ctx_t *ctx;
    uv_tcp_t listener, admin;
    bool listener_open, admin_open;
    bool accept_paused;      /* a connection waits in the listener: at the cap */
    struct cg_tls_conf *tls; /* TLS on the client listener, or NULL */
    cg_list_t clients;       /* every open connection (cg_client_t, by link) */
    size_t nclients;
    size_t nserving;  /* of them, on the client listener (capped) */
    uv_timer_t sweep; /* request deadlines */
    bool sweeping;
} cg_server_t;

/* Sets s up, with no listener yet (tls: the client listener's, or NULL). */
void cg_server_init(cg_server_t *s, cg_ctx_t *ctx, struct cg_tls_conf *tls);
/* Listens on addr (SO_REUSEPORT): the client listener, or the admin one. */
int cg_server_listen(cg_server_t *s, bool admin, const char *addr);
/* Serves fd, a connected socket, as a connection of the client listener
 * (or the admin one): what accepting does, for a socket that came from no
 * listener. Tests and fuzzers drive the real protocols through it over a
 * socketpair, as h2o's fuzz drivers do. The client is freed when its
 * connection closes; the pointer is valid until then. */
cg_client_t *cg_server_adopt(cg_server_t *s, int fd, bool admin);
/* Starts the sweep that closes connections past their request deadline. */
void cg_server_sweep_start(cg_server_t *s);
/* Draining: the client listener closes; busy connections finish what is in
 * flight and take nothing new, idle ones close. */
void cg_server_drain(cg_server_t *s);
/* Drain time is over: what is in flight ends now. */
void cg_server_shutdown(cg_server_t *s);
/* Closes every connection (the worker is quiet) and the sweep. */
void cg_server_close(cg_server_t *s);

#endif
