/*
 * `citegate health`: the container's health probe. GET /readyz on the admin
 * listener; exit 0 when it answers 200 within a second, else 1 with one line
 * on stderr. The image has no shell and no curl: the probe is the binary.
 */
#include "citegate/common.h"
#include "cmd.h"

#include <llhttp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define HEALTH_TIMEOUT_MS     1000
#define HEALTH_DEFAULT_LISTEN "127.0.0.1:9901"

typedef struct probe {
    uv_loop_t loop;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t connect;
    uv_write_t write;
    llhttp_t parser;
    llhttp_settings_t settings;
    char request[400];
    char in[4096];
    int status;    /* the answer's status once its head is read, else 0 */
    char why[300]; /* what went wrong; empty while nothing has */
    bool finished;
} probe_t;

/* Records the first failure (if fmt) and closes both handles: uv_run then
 * returns once their close callbacks have run. */
static void finish(probe_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void finish(probe_t *p, const char *fmt, ...)
{
    if (fmt && p->why[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why, sizeof(p->why), fmt, ap);
        va_end(ap);
    }
    if (p->finished)
        return;
    p->finished = true;
    uv_close((uv_handle_t *)&p->tcp, NULL);
    uv_close((uv_handle_t *)&p->timer, NULL);
}

static int on_headers_complete(llhttp_t *parser)
{
    probe_t *p = parser->data;
    p->status = llhttp_get_status_code(parser);
    return HPE_PAUSED; /* the status is all the probe needs */
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    probe_t *p = h->data;
    (void)suggested;
    *buf = uv_buf_init(p->in, sizeof(p->in));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    probe_t *p = s->data;
    if (nread == UV_EOF) {
        finish(p, "the connection closed before an answer");
        return;
    }
    if (nread < 0) {
        finish(p, "reading: %s", uv_strerror((int)nread));
        return;
    }
    llhttp_errno_t e = llhttp_execute(&p->parser, buf->base, (size_t)nread);
    if (e == HPE_PAUSED && p->status == 200)
        finish(p, NULL);
    else if (e == HPE_PAUSED)
        finish(p, "/readyz answered %d", p->status);
    else if (e != HPE_OK)
        finish(p, "not an HTTP answer (%s)", llhttp_get_error_reason(&p->parser));
}

static void on_write(uv_write_t *w, int status)
{
    probe_t *p = w->data;
    if (status < 0 && status != UV_ECANCELED)
        finish(p, "sending the request: %s", uv_strerror(status));
}

static void on_connect(uv_connect_t *c, int status)
{
    probe_t *p = c->data;
    if (status == UV_ECANCELED)
        return; /* the timer closed the handle */
    if (status < 0) {
        finish(p, "cannot connect: %s", uv_strerror(status));
        return;
    }
    uv_buf_t b = uv_buf_init(p->request, (unsigned)strlen(p->request));
    p->write.data = p;
    int r = uv_write(&p->write, (uv_stream_t *)&p->tcp, &b, 1, on_write);
    if (r == 0)
        r = uv_read_start((uv_stream_t *)&p->tcp, on_alloc, on_read);
    if (r != 0)
        finish(p, "sending the request: %s", uv_strerror(r));
}

static void on_timeout(uv_timer_t *t)
{
    finish(t->data, "no answer from /readyz within %d ms", HEALTH_TIMEOUT_MS);
}

/* The address to probe: ADDR:PORT or [ADDR6]:PORT as CITEGATE_ADMIN_LISTEN
 * takes it, a wildcard address standing for loopback (the admin listener is
 * in this container). Writes the Host header's value into host. */
static int target(const char *listen, struct sockaddr_storage *ss, char *host, size_t hl)
{
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen)
        return -1;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port == 0 || port > 65535)
        return -1;
    char ip[64];
    size_t n = (size_t)(colon - listen);
    if (listen[0] == '[' && n > 2 && listen[n - 1] == ']')
        snprintf(ip, sizeof(ip), "%.*s", (int)(n - 2), listen + 1);
    else if (n < sizeof(ip))
        snprintf(ip, sizeof(ip), "%.*s", (int)n, listen);
    else
        return -1;
    bool v6 = strchr(ip, ':') != NULL;
    if (strcmp(ip, "0.0.0.0") == 0 || strcmp(ip, "::") == 0)
        snprintf(ip, sizeof(ip), "%s", v6 ? "::1" : "127.0.0.1");
    int r = v6 ? uv_ip6_addr(ip, (int)port, (struct sockaddr_in6 *)ss)
               : uv_ip4_addr(ip, (int)port, (struct sockaddr_in *)ss);
    snprintf(host, hl, v6 ? "[%s]:%lu" : "%s:%lu", ip, port);
    return r == 0 ? 0 : -1;
}

/* Starts the connection and the one-second timer; on failure fills why. */
static void probe_start(probe_t *p, const struct sockaddr_storage *ss, const char *host)
{
    llhttp_settings_init(&p->settings);
    p->settings.on_headers_complete = on_headers_complete;
    llhttp_init(&p->parser, HTTP_RESPONSE, &p->settings);
    p->parser.data = p;
    snprintf(p->request, sizeof(p->request),
             "GET /readyz HTTP/1.1\r\nHost: %s\r\nUser-Agent: citegate-health\r\n"
             "Connection: close\r\n\r\n",
             host);
    uv_loop_init(&p->loop);
    uv_tcp_init(&p->loop, &p->tcp);
    uv_timer_init(&p->loop, &p->timer);
    p->tcp.data = p->timer.data = p->connect.data = p;
    uv_timer_start(&p->timer, on_timeout, HEALTH_TIMEOUT_MS, 0);
    int r = uv_tcp_connect(&p->connect, &p->tcp, (const struct sockaddr *)ss, on_connect);
    if (r != 0)
        finish(p, "cannot connect: %s", uv_strerror(r));
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "citegate health: %s (usage: citegate health [--admin-listen ADDR:PORT])\n",
            msg);
    return 1;
}

/* --admin-listen ADDR, else CITEGATE_ADMIN_LISTEN, else the default; NULL
 * (after a message, or the usage for --help) on a bad argument. */
static const char *listen_arg(int argc, char **argv, bool *help)
{
    const char *listen = getenv("CITEGATE_ADMIN_LISTEN");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: citegate health [--admin-listen ADDR:PORT]\n"
                   "GET /readyz on the admin listener (--admin-listen, else "
                   "CITEGATE_ADMIN_LISTEN, else %s;\n"
                   "a wildcard address means loopback): exit 0 when it answers 200 within "
                   "%d ms, else 1.\n",
                   HEALTH_DEFAULT_LISTEN, HEALTH_TIMEOUT_MS);
            *help = true;
            return NULL;
        }
        if (strncmp(a, "--admin-listen=", 15) == 0) {
            listen = a + 15;
        } else if (strcmp(a, "--admin-listen") == 0 && i + 1 < argc) {
            listen = argv[++i];
        } else if (strcmp(a, "--admin-listen") == 0) {
            usage_error("%s needs a value", a);
            return NULL;
        } else {
            usage_error("unknown argument '%s'", a);
            return NULL;
        }
    }
    return listen && listen[0] ? listen : HEALTH_DEFAULT_LISTEN;
}

/* Exit status 1 for every failure, usage included: Docker reserves 2 in a
 * HEALTHCHECK, and a probe that cannot run has not found citegate ready. */
int cg_main_health(int argc, char **argv)
{
    bool help = false;
    const char *listen = listen_arg(argc, argv, &help);
    if (listen == NULL)
        return help ? 0 : 1;
    struct sockaddr_storage ss;
    char host[96];
    memset(&ss, 0, sizeof(ss));
    if (target(listen, &ss, host, sizeof(host)) != 0)
        return usage_error("CITEGATE_ADMIN_LISTEN: '%s' is not ADDRESS:PORT", listen);
    probe_t *p = cg_xcalloc(1, sizeof(*p));
    probe_start(p, &ss, host);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    uv_loop_close(&p->loop);
    bool ok = p->status == 200 && p->why[0] == '\0';
    if (!ok)
        fprintf(stderr, "citegate health: %s: %s\n", listen,
                p->why[0] ? p->why : "no answer from /readyz");
    free(p);
    return ok ? 0 : 1;
}
