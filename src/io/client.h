/*
 * A client connection, as the protocols that serve it see it: its
 * connection, its protocol's state (HTTP/1.1 in place, HTTP/2 behind a
 * pointer), its request deadline, and the table through which the server
 * (server.c, above the protocols) hands it bytes and events. The server
 * accepts it, chooses its protocol (ALPN on TLS, else the HTTP/2 preface
 * sniffed on the same port) and frees it in its connection's close
 * callback. There is no client.c: this header is below h1.c and h2.c,
 * which serve a client, and server.c, which picks between them.
 */
#ifndef CITEGATE_IO_CLIENT_H
#define CITEGATE_IO_CLIENT_H

#include "conn.h"
#include "ctx.h"
#include "defer.h"
#include "http.h"

#include <llhttp.h>

typedef struct cg_client cg_client_t;
typedef struct cg_exchange cg_exchange_t;

/* What a protocol does with a client connection. */
typedef struct cg_proto {
    void (*start)(cg_client_t *c);
    void (*read)(cg_client_t *c, const char *p, size_t n);
    /* The write queue fell below its low-water mark. */
    void (*drained)(cg_client_t *c);
    /* From the close callback: end what is in flight, free the state. */
    void (*closed)(cg_client_t *c);
    bool (*busy)(const cg_client_t *c);
    /* Draining began: finish what is in flight, take nothing new. */
    void (*drain)(cg_client_t *c);
    /* Drain time is over: end what is in flight now. */
    void (*shutdown)(cg_client_t *c);
    /* No request came in time (CITEGATE_REQUEST_TIMEOUT_MS): close. */
    void (*expire)(cg_client_t *c);
} cg_proto_t;

/* HTTP/1.1: one request at a time. */
typedef struct cg_h1 {
    llhttp_t parser;
    cg_reqmsg_t msg;  /* the request being read */
    cg_buf_t pending; /* bytes after a request, kept while it is served */
    cg_exchange_t *ex;
    struct cg_admin_wait *admin_wait; /* an admin answer that comes later */
    int reject;                       /* status to answer with instead of serving */
    const char *why;                  /* and why, for the error's message */
    char version[3];                  /* the request line's, as read so far */
    uint8_t version_len;
    int method;                       /* of the request being answered */
    bool keep_alive, http10, message_done, chunked;
    bool bodiless; /* the response has no body (HEAD, 204, 304) */
    /* The bytes llhttp is parsing, and the last byte before them that is
     * not a space or tab: where a header value begins (obs-fold). */
    const char *in;
    char before;
    cg_defer_t next; /* parses the pending bytes at a safe point */
    /* A response head waits here for the first body bytes or the end of
     * the same answer, to leave in one write with them; at the latest at
     * the next safe point (`flush`). Empty (and freed) otherwise. */
    cg_buf_t head;
    cg_defer_t flush;
} cg_h1_t;

struct cg_client {
    cg_conn_t conn;
    cg_ctx_t *ctx;
    bool admin;
    /* A request head (and the TLS handshake before it) must arrive by
     * then; 0 while a request is being answered. */
    uint64_t deadline;
    const cg_proto_t *proto; /* NULL until chosen */
    cg_buf_t sniff;          /* first bytes, until the preface is told apart */
    cg_h1_t h1;
    struct cg_h2conn *h2;
    struct cg_server *server; /* that accepted it */
    cg_list_t link;           /* in the server's clients */
};

static inline cg_client_t *cg_client_of(cg_list_t *link)
{
    return CG_CONTAINER_OF(link, cg_client_t, link);
}

extern const cg_proto_t cg_h1_proto;
extern const cg_proto_t cg_h2_proto;

/* The connection waits for a request from now on (or, with false, not). */
static inline void cg_client_expect_request(cg_client_t *c, bool expect)
{
    c->deadline = expect ? cg_now_ms(c->ctx) + c->ctx->cfg->request_timeout_ms : 0;
}

#endif
