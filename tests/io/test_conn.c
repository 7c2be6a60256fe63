/*
 * The connection layer over real loopback sockets: bytes both ways; close
 * only marks (the owner hears of it once, from the close callback, never
 * from inside a call); a peer's reset during writes; the write queue's
 * high and low water marks; a connect that fails.
 */
#include "io/conn.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

typedef struct side {
    cg_conn_t conn;
    cg_buf_t got;
    int ready, closed, drains;
    cg_err_t closed_err;
    bool close_on_read;
    bool in_call; /* the test is inside a call into the layer */
} side_t;

typedef struct pair {
    uv_loop_t loop;
    uv_tcp_t listener;
    side_t server, client;
    bool accepted;
} pair_t;

static void on_read(cg_conn_t *c, const char *p, size_t n)
{
    side_t *s = c->owner;
    assert_false(s->in_call);
    cg_buf_put(&s->got, p, n);
    if (s->close_on_read) {
        cg_conn_close(c, CG_OK);
        /* Marked, not freed: the owner is told later, from libuv. */
        assert_int_equal(s->closed, 0);
        assert_true(c->closing);
    }
}

static void on_ready(cg_conn_t *c)
{
    side_t *s = c->owner;
    assert_false(s->in_call);
    s->ready++;
}

static void on_drain(cg_conn_t *c)
{
    side_t *s = c->owner;
    assert_false(s->in_call);
    s->drains++;
}

static void on_closed(cg_conn_t *c)
{
    side_t *s = c->owner;
    assert_false(s->in_call);
    s->closed++;
    s->closed_err = c->err;
}

static const cg_conn_ops_t ops = {on_read, on_ready, on_drain, on_closed};

static void on_connection(uv_stream_t *l, int status)
{
    pair_t *p = l->data;
    assert_int_equal(status, 0);
    assert_int_equal(cg_conn_accept(&p->server.conn, l, NULL, &ops, &p->server), CG_OK);
    p->accepted = true;
}

static void run_until(pair_t *p, bool (*done)(pair_t *))
{
    for (int i = 0; i < 100000 && !done(p); i++)
        uv_run(&p->loop, UV_RUN_ONCE);
    assert_true(done(p));
}

static bool connected(pair_t *p)
{
    return p->accepted && p->client.ready == 1;
}

static void open_pair(pair_t *p)
{
    memset(p, 0, sizeof(*p));
    uv_loop_init(&p->loop);
    uv_tcp_init(&p->loop, &p->listener);
    p->listener.data = p;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    assert_int_equal(uv_tcp_bind(&p->listener, (struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&p->listener, 8, on_connection), 0);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&p->listener, (struct sockaddr *)&ss, &len);
    cg_conn_connect(&p->client.conn, &p->loop, (struct sockaddr *)&ss, NULL, NULL, &ops,
                    &p->client);
    run_until(p, connected);
}

static bool both_closed(pair_t *p)
{
    return p->server.closed && p->client.closed;
}

static void close_pair(pair_t *p)
{
    cg_conn_close(&p->server.conn, CG_OK);
    cg_conn_close(&p->client.conn, CG_OK);
    run_until(p, both_closed);
    uv_close((uv_handle_t *)&p->listener, NULL);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&p->loop), 0);
    assert_int_equal(p->server.closed, 1);
    assert_int_equal(p->client.closed, 1);
    cg_buf_free(&p->server.got);
    cg_buf_free(&p->client.got);
}

static void write_str(side_t *s, const char *str)
{
    uv_buf_t b = uv_buf_init((char *)str, (unsigned)strlen(str));
    s->in_call = true;
    cg_conn_write(&s->conn, &b, 1);
    s->in_call = false;
}

static bool server_got_hello(pair_t *p)
{
    return p->server.got.len == 5;
}

static void test_bytes_both_ways(void **state)
{
    (void)state;
    pair_t p;
    open_pair(&p);
    write_str(&p.client, "hello");
    run_until(&p, server_got_hello);
    assert_memory_equal(p.server.got.p, "hello", 5);
    close_pair(&p);
}

static bool server_closed(pair_t *p)
{
    return p->server.closed == 1;
}

/* The owner closes from inside its read callback: nothing is freed under
 * it, and it hears of the close once, later. */
static void test_close_inside_read_is_deferred(void **state)
{
    (void)state;
    pair_t p;
    open_pair(&p);
    p.server.close_on_read = true;
    write_str(&p.client, "hello");
    run_until(&p, server_closed);
    assert_int_equal(p.server.closed_err, CG_OK);
    close_pair(&p);
}

/* The peer resets while we write: the failure reaches the owner once, from
 * the close callback, never from inside cg_conn_write. */
static void test_peer_reset_during_writes(void **state)
{
    (void)state;
    pair_t p;
    open_pair(&p);
    struct linger lg = {1, 0};
    uv_os_fd_t fd;
    uv_fileno((uv_handle_t *)&p.client.conn.tcp, &fd);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    cg_conn_close(&p.client.conn, CG_OK); /* RST */
    static char big[65536];
    for (int i = 0; i < 400 && p.server.closed == 0; i++) {
        uv_buf_t b = uv_buf_init(big, sizeof(big));
        p.server.in_call = true;
        cg_conn_write(&p.server.conn, &b, 1);
        p.server.in_call = false;
        uv_run(&p.loop, UV_RUN_NOWAIT);
    }
    run_until(&p, both_closed);
    assert_int_equal(p.server.closed, 1);
    assert_true(p.server.closed_err == CG_E_WRITE || p.server.closed_err == CG_E_RESET ||
                p.server.closed_err == CG_E_CLOSED);
    close_pair(&p);
}

static bool server_blocked(pair_t *p)
{
    return p->server.conn.blocked;
}

static bool server_drained(pair_t *p)
{
    return p->server.drains == 1;
}

/* A reader that stops: the queue passes the high-water mark and the writer
 * is told once it fell below the low one. */
static void test_water_marks(void **state)
{
    (void)state;
    pair_t p;
    open_pair(&p);
    cg_conn_read_stop(&p.client.conn);
    static char big[65536];
    for (int i = 0; i < 256 && !p.server.conn.blocked; i++) {
        uv_buf_t b = uv_buf_init(big, sizeof(big));
        cg_conn_write(&p.server.conn, &b, 1);
        uv_run(&p.loop, UV_RUN_NOWAIT);
    }
    run_until(&p, server_blocked);
    assert_true(p.server.conn.queued > CG_CONN_HWM);
    assert_int_equal(p.server.drains, 0);
    cg_conn_read_start(&p.client.conn);
    run_until(&p, server_drained);
    assert_true(p.server.conn.queued < CG_CONN_LWM);
    assert_false(p.server.conn.blocked);
    close_pair(&p);
}

static bool client_closed(pair_t *p)
{
    return p->client.closed == 1;
}

static void test_connect_refused(void **state)
{
    (void)state;
    pair_t p;
    memset(&p, 0, sizeof(p));
    uv_loop_init(&p.loop);
    /* A port nobody listens on: bind one, and close it again. */
    uv_tcp_t probe;
    uv_tcp_init(&p.loop, &probe);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_bind(&probe, (struct sockaddr *)&a, 0);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&probe, (struct sockaddr *)&ss, &len);
    uv_close((uv_handle_t *)&probe, NULL);
    uv_run(&p.loop, UV_RUN_DEFAULT);
    p.client.in_call = true;
    cg_conn_connect(&p.client.conn, &p.loop, (struct sockaddr *)&ss, NULL, NULL, &ops, &p.client);
    p.client.in_call = false;
    run_until(&p, client_closed);
    assert_int_equal(p.client.ready, 0);
    assert_int_equal(p.client.closed_err, CG_E_CONNECT);
    uv_run(&p.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&p.loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_both_ways),
        cmocka_unit_test(test_close_inside_read_is_deferred),
        cmocka_unit_test(test_peer_reset_during_writes),
        cmocka_unit_test(test_water_marks),
        cmocka_unit_test(test_connect_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
