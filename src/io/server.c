/* The client side of a worker: listeners, accepting, choosing the protocol. See server.h. */
#include "server.h"

#include "log.h"
#include "metrics.h"
#include "tls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN 24

static void choose(cg_client_t *c, const cg_proto_t *proto)
{
    c->proto = proto;
    proto->start(c);
}

/* h2c with prior knowledge shares the port with HTTP/1.1: its preface
 * ("PRI * ...") cannot start a request we serve. Bytes are kept until the
 * first ones tell the two apart, then replayed to the chosen handler. */
static void sniff(cg_client_t *c, const char *p, size_t n)
{
    size_t take = H2_PREFACE_LEN - c->sniff.len;
    if (take > n)
        take = n;
    cg_buf_put(&c->sniff, p, take);
    bool h2 = memcmp(c->sniff.p, H2_PREFACE, c->sniff.len) == 0;
    if (h2 && c->sniff.len < H2_PREFACE_LEN)
        return; /* can't tell yet */
    choose(c, h2 ? &cg_h2_proto : &cg_h1_proto);
    cg_buf_t first = c->sniff;
    memset(&c->sniff, 0, sizeof(c->sniff));
    c->proto->read(c, first.p, first.len);
    cg_buf_free(&first);
    if (take < n && cg_conn_usable(&c->conn))
        c->proto->read(c, p + take, n - take);
}

static void on_read(cg_conn_t *conn, const char *p, size_t n)
{
    cg_client_t *c = conn->owner;
    if (c->proto)
        c->proto->read(c, p, n);
    else
        sniff(c, p, n);
}

/* TLS: the handshake is done and ALPN decides. */
static void on_ready(cg_conn_t *conn)
{
    cg_client_t *c = conn->owner;
    const char *alpn = cg_conn_alpn(conn);
    choose(c, alpn && strcmp(alpn, "h2") == 0 ? &cg_h2_proto : &cg_h1_proto);
}

static void on_drain(cg_conn_t *conn)
{
    cg_client_t *c = conn->owner;
    if (c->proto)
        c->proto->drained(c);
}

static void accept_one(cg_server_t *s, uv_stream_t *listener);

static void on_closed(cg_conn_t *conn)
{
    cg_client_t *c = conn->owner;
    cg_server_t *s = c->server;
    if (c->proto)
        c->proto->closed(c);
    cg_list_unlink(&c->link);
    s->nclients--;
    if (!c->admin) {
        s->nserving--;
        cg_metrics->client_connections--;
    }
    cg_buf_free(&c->sniff);
    free(c);
    /* Below the cap again: take the connection that waits in the listener
     * (libuv stops polling a listener whose connection was not taken). */
    if (s->accept_paused && s->nserving < s->ctx->cfg->max_client_connections && s->listener_open) {
        s->accept_paused = false;
        accept_one(s, (uv_stream_t *)&s->listener);
    }
}

static const cg_conn_ops_t conn_ops = {
    .read = on_read, .ready = on_ready, .drain = on_drain, .closed = on_closed};

/* A new client, counted and listed; its connection is set up next. */
static cg_client_t *client_new(cg_server_t *s, bool admin)
{
    cg_client_t *c = cg_xcalloc(1, sizeof(*c));
    c->ctx = s->ctx;
    c->server = s;
    c->admin = admin;
    if (!c->admin) {
        s->nserving++;
        cg_metrics->client_connections++;
    }
    cg_client_expect_request(c, true);
    cg_list_insert(&s->clients, &c->link);
    s->nclients++;
    return c;
}

/* The connection is set up (err: or failed, and is closing): admin paths
 * speak HTTP/1.1 only, others wait for their first bytes. */
static void client_start(cg_client_t *c, cg_err_t err)
{
    if (err == CG_OK && c->admin)
        choose(c, &cg_h1_proto);
}

static void accept_one(cg_server_t *s, uv_stream_t *listener)
{
    cg_client_t *c = client_new(s, listener == (uv_stream_t *)&s->admin);
    struct cg_tls_conf *tls = c->admin ? NULL : s->tls;
    client_start(c, cg_conn_accept(&c->conn, listener, tls, &conn_ops, c));
}

cg_client_t *cg_server_adopt(cg_server_t *s, int fd, bool admin)
{
    cg_client_t *c = client_new(s, admin);
    client_start(c, cg_conn_adopt(&c->conn, s->ctx->loop, fd, admin ? NULL : s->tls, &conn_ops, c));
    return c;
}

static void on_connection(uv_stream_t *listener, int status)
{
    cg_server_t *s = listener->data;
    if (status < 0)
        return;
    bool admin = listener == (uv_stream_t *)&s->admin;
    if (!admin && s->nserving >= s->ctx->cfg->max_client_connections) {
        /* At the cap: leave the connection in the listener; libuv stops
         * polling it until accept_one() takes it (no busy loop). */
        s->accept_paused = true;
        return;
    }
    accept_one(s, listener);
}

/* Connections that did not finish a TLS handshake and a request head in
 * time (slowloris), and idle keep-alive ones, are closed. One timer for the
 * worker instead of one per connection. */
static void on_sweep(uv_timer_t *t)
{
    cg_server_t *s = t->data;
    uint64_t now = cg_now_ms(s->ctx);
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &s->clients)
    {
        cg_client_t *c = cg_client_of(pos);
        if (c->deadline == 0 || now < c->deadline || uv_is_closing((uv_handle_t *)&c->conn.tcp))
            continue;
        cg_log_debug(NULL, "client sent no request in %u ms: closing",
                     s->ctx->cfg->request_timeout_ms);
        c->deadline = 0;
        if (c->proto && cg_conn_usable(&c->conn))
            c->proto->expire(c);
        else
            cg_conn_close(&c->conn, CG_E_TIMEOUT);
    }
}

void cg_server_sweep_start(cg_server_t *s)
{
    unsigned every = s->ctx->cfg->request_timeout_ms / 4;
    every = every < 10 ? 10 : every > 1000 ? 1000 : every;
    uv_timer_init(s->ctx->loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, on_sweep, every, every);
    uv_unref((uv_handle_t *)&s->sweep);
    s->sweeping = true;
}

void cg_server_init(cg_server_t *s, cg_ctx_t *ctx, struct cg_tls_conf *tls)
{
    memset(s, 0, sizeof(*s));
    s->ctx = ctx;
    s->tls = tls;
    cg_list_init(&s->clients);
}

/* Draining: a busy connection finishes what is in flight (h1: its answer
 * ends with Connection: close; h2: GOAWAY), an idle one closes now. */
static void drain_one(cg_client_t *c)
{
    if (c->admin || !cg_conn_usable(&c->conn))
        return;
    if (c->proto && c->proto->busy(c))
        c->proto->drain(c);
    else
        cg_conn_close(&c->conn, CG_OK);
}

void cg_server_drain(cg_server_t *s)
{
    if (s->listener_open) {
        uv_close((uv_handle_t *)&s->listener, NULL);
        s->listener_open = false;
    }
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &s->clients) drain_one(cg_client_of(pos));
}

void cg_server_shutdown(cg_server_t *s)
{
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &s->clients)
    {
        cg_client_t *c = cg_client_of(pos);
        if (c->proto)
            c->proto->shutdown(c);
    }
}

void cg_server_close(cg_server_t *s)
{
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &s->clients) cg_conn_close(&cg_client_of(pos)->conn, CG_OK);
    if (s->sweeping && !uv_is_closing((uv_handle_t *)&s->sweep))
        uv_close((uv_handle_t *)&s->sweep, NULL);
}

static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (colon == NULL)
        return UV_EINVAL;
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof(host))
        return UV_EINVAL;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    int port = atoi(colon + 1);
    char *h = host;
    if (h[0] == '[' && hl > 1 && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
    }
    if (strchr(h, ':'))
        return uv_ip6_addr(h, port, (struct sockaddr_in6 *)ss);
    if (strcmp(h, "localhost") == 0)
        h = "127.0.0.1";
    return uv_ip4_addr(h, port, (struct sockaddr_in *)ss);
}

int cg_server_listen(cg_server_t *s, bool admin, const char *addr)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    int r = parse_addr(addr, &ss);
    if (r != 0)
        return r;
    /* libuv 1.44 cannot set SO_REUSEPORT, so the socket is made here and
     * handed over; every worker binds its own and the kernel spreads
     * connections across them. */
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    /* Linux hands TCP_NODELAY down to every accepted socket: one call here
     * instead of one per connection (cg_conn_accept). */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    socklen_t len =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        r = -errno;
        close(fd);
        return r;
    }
    uv_tcp_t *h = admin ? &s->admin : &s->listener;
    uv_tcp_init(s->ctx->loop, h);
    h->data = s;
    *(admin ? &s->admin_open : &s->listener_open) = true;
    if ((r = uv_tcp_open(h, fd)) != 0)
        return r;
    return uv_listen((uv_stream_t *)h, 1024, on_connection);
}
