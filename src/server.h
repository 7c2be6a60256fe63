/*
 * The I/O shell: one libuv loop per worker process. Client connections
 * (HTTP/1.1, llhttp) carry exchanges; an exchange forwards one request to
 * an upstream (pooled HTTP/1.1 connection, or the embedded demo) and
 * streams the answer back through the transformer.
 *
 * Lifetimes: a client owns at most one exchange at a time; the exchange
 * owns its upstream side while it runs. Handles are freed only in their
 * close callbacks; nothing is freed while llhttp is on the stack (the
 * parser is paused at message end and closing is deferred by flags).
 */
#ifndef CITEGATE_SERVER_H
#define CITEGATE_SERVER_H

#include "citegate/config.h"
#include "citegate/request.h"
#include "citegate/xform.h"

#include <llhttp.h>
#include <uv.h>

#define CG_CLIENT_HWM (256u << 10) /* stop reading upstream above this */
#define CG_CLIENT_LWM (64u << 10)  /* resume below this */
#define CG_MAX_HEADER_BYTES (64u << 10)
#define CG_MAX_BODY_RESPONSE (64u << 20) /* buffered non-streaming answers */

typedef struct cg_worker cg_worker_t;
typedef struct cg_client cg_client_t;
typedef struct cg_exchange cg_exchange_t;
typedef struct cg_upconn cg_upconn_t;

/* Parsed upstream URL. */
typedef struct cg_upstream_url {
    bool tls;
    char host[256];
    int port;
    char base[1024]; /* path prefix without trailing slash */
    char authority[300];
} cg_upstream_url_t;

int cg_upstream_url_parse(const char *url, cg_upstream_url_t *out);

/* A header of a request or response: offsets into a buffer. */
typedef struct cg_hdr {
    size_t name, name_len, value, value_len;
} cg_hdr_t;

typedef struct cg_hdrs {
    cg_buf_t buf;
    cg_hdr_t *v;
    size_t n, cap;
    bool in_value;
} cg_hdrs_t;

void cg_hdrs_reset(cg_hdrs_t *h);
void cg_hdrs_free(cg_hdrs_t *h);
int cg_hdrs_on_field(cg_hdrs_t *h, const char *p, size_t n);
int cg_hdrs_on_value(cg_hdrs_t *h, const char *p, size_t n);
/* Value of the first header `name` (case-insensitive) as a span, or p == NULL. */
cg_span_t cg_hdrs_get(const cg_hdrs_t *h, const char *name);
cg_span_t cg_hdr_name(const cg_hdrs_t *h, size_t i);
cg_span_t cg_hdr_value(const cg_hdrs_t *h, size_t i);
/* Hop-by-hop (RFC 9110 §7.6.1), including names listed in Connection. */
bool cg_hdr_is_hop(const cg_hdrs_t *h, cg_span_t name);

struct cg_worker {
    uv_loop_t *loop;
    const cg_config_t *cfg;
    cg_upstream_url_t up;
    bool demo;
    struct sockaddr_storage up_addr;
    bool draining;
    int index;
    uv_tcp_t listener, admin;
    bool listener_open;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t grace;
    cg_client_t *clients; /* all open client connections */
    size_t nclients, active;
    /* HTTP/1.1 upstream pool */
    cg_upconn_t *idle;
    unsigned upconns;
    cg_exchange_t *waiting_head, *waiting_tail; /* queued for a connection */
    char *data_sources; /* AZURE_AI_DATA_SOURCES, normalised to an array */
    struct cg_tls_conf *up_tls; /* https:// upstreams */
    struct cg_tls_conf *srv_tls; /* TLS on the client listener */
    bool up_h2;                 /* CITEGATE_UPSTREAM_PROTOCOL=h2 */
    const char *up_sni;         /* TLS server name; NULL for an IP literal */
    struct cg_memwriter *memory; /* semantic memory writer, or NULL */
    uint64_t memory_bad;         /* its drops and failures already counted */
    struct cg_memory *memory_read; /* read connection for /v1/citations/patterns */
    uv_timer_t lag_timer;          /* measures event-loop stalls */
    uint64_t lag_last;             /* when it last fired, uv_hrtime() */
};

/* A client request, as either protocol delivers it. */
typedef struct cg_reqmsg {
    int method;     /* llhttp_method_t */
    cg_buf_t url;   /* path and query */
    cg_hdrs_t hdrs; /* without pseudo-headers */
    cg_buf_t body;
    bool http10, keep_alive;
} cg_reqmsg_t;

/* Where an exchange's answer goes: an HTTP/1.1 connection or an h2 stream.
 * `head` gets the response headers citegate sends (no framing headers);
 * `content_length` is the body length, or -1 when it is streamed. */
typedef struct cg_down_ops {
    void (*head)(cg_exchange_t *ex, int status, const cg_hdrs_t *h, long long content_length);
    void (*data)(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total);
    /* The body is complete (true) or broke off (false). */
    void (*end)(cg_exchange_t *ex, bool complete);
    size_t (*queued)(cg_exchange_t *ex);
    /* The exchange is over; the downstream forgets it. */
    void (*done)(cg_exchange_t *ex);
} cg_down_ops_t;

typedef enum { EX_NEW, EX_UPSTREAM, EX_STREAMING, EX_DONE } ex_state_t;
typedef enum { MODE_PASS, MODE_STREAM, MODE_BODY } ex_mode_t;

struct cg_exchange {
    cg_worker_t *w;
    cg_reqmsg_t *msg;
    const cg_down_ops_t *down;
    void *down_ctx; /* cg_client_t or h2 stream */
    bool gone;      /* the client went away */
    char rid[64];
    int route;
    bool transform;
    const cg_profile_t *profile;
    cg_request_t req;
    cg_buf_t up_req;   /* serialized upstream request head + body */
    ex_state_t state;
    ex_mode_t mode;
    cg_xform_t *xf;
    cg_out_t out;
    cg_buf_t body;     /* buffered non-streaming answer */
    cg_hdrs_t head;    /* its upstream headers */
    int status;
    bool head_sent, is_sse;
    uint64_t t_start, t_upstream, last_activity;
    uv_timer_t timer;
    bool timer_open;
    /* upstream side */
    cg_upconn_t *up;
    struct cg_demo *demo;
    cg_exchange_t *next_waiting;
    bool paused;
    bool up_connected_hint; /* connected and request written */
    bool up_retried, queued;
    /* HTTP/2 upstream stream (h2up.c) */
    void *h2up;
    int32_t h2_id;
    int h2_status;
    bool h2_head_done;
    uint8_t h2_resent;          /* times refused unprocessed and sent again */
    cg_hdrs_t h2_hdrs;
    size_t h2_body_off, h2_unconsumed;
    cg_exchange_t *h2_prev, *h2_next;
    size_t resp_bytes;
};

struct cg_client {
    cg_worker_t *w;
    uv_tcp_t tcp;
    llhttp_t parser;
    bool admin;
    cg_reqmsg_t msg;
    cg_buf_t pending; /* bytes after a paused message */
    int reject;       /* status to answer with instead of proxying */
    const char *reject_msg;
    cg_exchange_t *ex;
    size_t queued;    /* bytes written but not yet flushed */
    struct cg_tls *tls; /* NULL on plain connections */
    bool reading, closing, message_done, chunked, sniffed;
    struct cg_h2conn *h2; /* non-NULL once the connection speaks h2 */
    cg_client_t *prev, *next;
};

/* server.c: client connections */
int cg_server_listen(cg_worker_t *w, uv_tcp_t *h, const char *addr, bool admin);
void cg_client_write(cg_client_t *c, const uv_buf_t *bufs, unsigned n);
void cg_client_response_done(cg_client_t *c);
void cg_client_close(cg_client_t *c);
void cg_send_simple(cg_client_t *c, int status, const char *ctype, const char *body, size_t len,
                    const char *rid);
void cg_client_write_raw(cg_client_t *c, const uv_buf_t *bufs, unsigned n);
/* Appends the OpenAI-style error body (SPEC §11). */
void cg_error_json(cg_buf_t *b, const char *type, const char *code, const char *msg);
void cg_send_error(cg_client_t *c, int status, const char *type, const char *code,
                   const char *msg, const char *rid);
const char *cg_status_text(int status);
uint64_t cg_now_ms(const cg_worker_t *w);

/* proxy.c: exchanges */
void cg_exchange_start(cg_worker_t *w, cg_reqmsg_t *msg, const cg_down_ops_t *down, void *ctx);
void cg_exchange_reject(cg_worker_t *w, cg_reqmsg_t *msg, const cg_down_ops_t *down, void *ctx,
                        int status, const char *code, const char *message);
extern const cg_down_ops_t cg_h1_down;
void cg_exchange_client_gone(cg_exchange_t *ex);
void cg_exchange_client_drained(cg_exchange_t *ex);
void cg_exchange_shutdown(cg_exchange_t *ex);
void cg_exchange_upstream_ready(cg_exchange_t *ex);
void cg_worker_maybe_exit(cg_worker_t *w);
/* upstream callbacks */
void cg_ex_on_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h);
void cg_ex_on_body(cg_exchange_t *ex, const char *p, size_t n);
void cg_ex_on_end(cg_exchange_t *ex, int uerr); /* -1: clean end; else CG_UERR_* */

/* upstream.c: HTTP/1.1 upstream pool */
void cg_upstream_send(cg_exchange_t *ex);
void cg_upstream_abort(cg_exchange_t *ex);
void cg_upstream_pause(cg_exchange_t *ex, bool pause);
void cg_upstream_close_idle(cg_worker_t *w);

/* h2up.c: HTTP/2 upstream pool */
void cg_h2up_send(cg_exchange_t *ex);
void cg_h2up_abort(cg_exchange_t *ex);
void cg_h2up_pause(cg_exchange_t *ex, bool pause);

/* demo.c: embedded demo upstream */
void cg_demo_send(cg_exchange_t *ex);
void cg_demo_abort(cg_exchange_t *ex);
void cg_demo_pause(cg_exchange_t *ex, bool pause);

/* h2.c: HTTP/2 client connections (h2c prior knowledge, h2 over TLS) */
#define CG_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
int cg_h2_start(cg_client_t *c);
void cg_h2_feed(cg_client_t *c, const char *p, size_t n);
void cg_h2_free(cg_client_t *c);
void cg_h2_flush(cg_client_t *c);
void cg__h2_attach(void *stream, cg_exchange_t *ex);
bool cg_h2_busy(const cg_client_t *c);
void cg_h2_drain(cg_client_t *c);
void cg_h2_shutdown_streams(cg_client_t *c);

/* admin.c */
void cg_admin_handle(cg_client_t *c);
/* Closes what the admin endpoints opened (the semantic-memory reader). */
void cg_admin_close(cg_worker_t *w);

#endif
