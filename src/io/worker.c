/*
 * A worker's life: set up its upstream and listeners, serve until a
 * signal, drain (SPEC §9), then close everything through its own path.
 */
#include "worker.h"

#include "ctx.h"
#include "embed.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "tls.h"
#include "tracking/tracking.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What the worker owns beyond the context its modules share. */
typedef struct cg_worker {
    cg_ctx_t ctx;
    cg_server_t server;
    cg_upstream_target_t target;
    cg_upstream_t *owned; /* the pool the worker frees (h2 frees its fallback) */
    /* An embeddings endpoint elsewhere than the upstream: its own pool. */
    cg_upstream_target_t embed_target;
    cg_upstream_t *embed_up, *embed_owned;
    struct cg_tls_conf *srv_tls; /* TLS on the client listener */
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t grace;     /* drain deadline */
    uv_timer_t lag_timer; /* measures event-loop stalls */
    uv_prepare_t log_flush; /* writes the turn's held log lines */
    uint64_t lag_last;    /* when it last fired, uv_hrtime() */
} cg_worker_t;

static cg_worker_t worker;

/* --- draining ------------------------------------------------------------------ */

static void drain_pools(cg_worker_t *w)
{
    w->ctx.up->ops->drain(w->ctx.up);
    if (w->embed_up)
        w->embed_up->ops->drain(w->embed_up);
}

/* Nothing is in flight: close what is left, each through its own path. */
static void on_quiet(cg_defer_t *d)
{
    cg_worker_t *w = CG_CONTAINER_OF(d, cg_worker_t, ctx.quiet);
    cg_server_close(&w->server);
    drain_pools(w);
    uv_stop(w->ctx.loop);
}

static void on_grace(uv_timer_t *t)
{
    cg_worker_t *w = t->data;
    cg_log_warn(NULL, "drain time over: ending %zu streams", w->ctx.active);
    cg_server_shutdown(&w->server);
    cg_ctx_drain(&w->ctx); /* quiet now, if that ended the last */
}

static void start_drain(cg_worker_t *w)
{
    if (w->ctx.draining)
        return;
    cg_log_info(NULL, "draining: %zu streams in flight, up to %u ms", w->ctx.active,
                w->ctx.cfg->shutdown_grace_ms);
    w->ctx.draining = true;
    cg_server_drain(&w->server);
    cg_tracking_drain(&w->ctx);
    drain_pools(w);
    uv_timer_start(&w->grace, on_grace, w->ctx.cfg->shutdown_grace_ms, 0);
    cg_ctx_drain(&w->ctx);
}

static void on_signal(uv_signal_t *s, int signum)
{
    if (signum == SIGHUP) {
        cg_log_info(NULL, "SIGHUP: logs go to stderr, nothing to reopen");
        return;
    }
    start_drain(s->data);
}

/* --- the event-loop lag ---------------------------------------------------------- */

/* A 10 ms tick: how late it fires is how long the loop was blocked (by a
 * slow callback, a synchronous disk write, ...). It runs while streams are
 * open, whom a stall would delay, so an idle worker is not woken 100 times
 * a second. Unreferenced, so it never keeps a draining worker alive. */
#define LAG_TICK_MS 10

static void on_lag_tick(uv_timer_t *t)
{
    cg_worker_t *w = t->data;
    uint64_t now = uv_hrtime();
    double late = (double)(now - w->lag_last) / 1e9 - LAG_TICK_MS / 1000.0;
    cg_hist_observe(&cg_metrics->loop_lag, cg_lag_buckets, late > 0 ? late : 0);
    w->lag_last = now;
}

/* Before the loop waits: the access lines of this turn go out in one write. */
static void on_log_flush(uv_prepare_t *p)
{
    (void)p;
    cg_log_flush();
}

static void hold_log_lines(cg_worker_t *w)
{
    uv_prepare_init(w->ctx.loop, &w->log_flush);
    uv_prepare_start(&w->log_flush, on_log_flush);
    uv_unref((uv_handle_t *)&w->log_flush);
    cg_log_hold(true);
}

static void lag_clock(cg_ctx_t *ctx, bool busy)
{
    cg_worker_t *w = CG_CONTAINER_OF(ctx, cg_worker_t, ctx);
    if (!busy) {
        uv_timer_stop(&w->lag_timer);
        return;
    }
    w->lag_last = uv_hrtime();
    uv_timer_start(&w->lag_timer, on_lag_tick, LAG_TICK_MS, LAG_TICK_MS);
}

static void start_lag_timer(cg_worker_t *w)
{
    uv_timer_init(w->ctx.loop, &w->lag_timer);
    w->lag_timer.data = w;
    uv_unref((uv_handle_t *)&w->lag_timer);
    w->ctx.on_busy = lag_clock;
}

/* --- setting up ------------------------------------------------------------------- */

static int resolve(cg_upstream_target_t *t, const char *var)
{
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof(port), "%d", t->url.port);
    int r = getaddrinfo(t->url.host, port, &hints, &res);
    if (r != 0) {
        cg_log_error(NULL, "%s: cannot resolve %s: %s", var, t->url.host, gai_strerror(r));
        return -1;
    }
    memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* TLS to an https:// target: ALPN for h2 (with HTTP/1.1 as the fallback
 * on auto), and the server name. CITEGATE_UPSTREAM_CA and _INSECURE hold
 * for every https:// target. */
static int target_tls(const cg_config_t *cfg, cg_upstream_target_t *t, cg_upstream_proto_t proto, bool h2,
                      const char *var)
{
    cg_tls_conf_t *conf = t->tls = cg_xcalloc(1, sizeof(cg_tls_conf_t));
    char err[512];
    if (cg_tls_conf_client(conf, cfg->upstream_ca, cfg->upstream_insecure, err, sizeof(err)) != 0) {
        cg_log_error(NULL, "%s", err);
        return -1;
    }
    if (h2) {
        conf->alpn[0] = "h2";
        conf->alpn[1] = proto == CG_PROTO_AUTO ? "http/1.1" : NULL;
        conf->alpn[2] = NULL;
        mbedtls_ssl_conf_alpn_protocols(&conf->conf, conf->alpn);
    }
    /* SNI never carries an IP literal (RFC 6066), and mbedTLS 2.28 cannot
     * match IP addresses in certificates: for those only the chain is
     * verified. */
    const char *host = t->url.host;
    struct in6_addr ip;
    bool literal = inet_pton(AF_INET, host, &ip) == 1 || inet_pton(AF_INET6, host, &ip) == 1;
    t->sni = literal ? NULL : host;
    if (literal && !cfg->upstream_insecure)
        cg_log_warn(NULL,
                    "%s: %s is an IP address: its certificate chain is "
                    "verified, its name is not (use a host name for full checks)",
                    var, host);
    return 0;
}

/* Resolves t (its url parsed) and opens its pool into *slot, speaking proto. */
static int open_pool(cg_worker_t *w, cg_upstream_target_t *t, cg_upstream_proto_t proto,
                     cg_upstream_t **slot, const char *var)
{
    if (resolve(t, var) != 0)
        return -1;
    /* auto on https: try h2 by ALPN first; the first answer decides. */
    bool h2 = proto == CG_PROTO_H2 || (proto == CG_PROTO_AUTO && t->url.tls);
    if (t->url.tls && target_tls(w->ctx.cfg, t, proto, h2, var) != 0)
        return -1;
    if (!h2) {
        *slot = cg_up_h1_new(&w->ctx, t, slot);
        return 0;
    }
    cg_upstream_t *fallback = proto == CG_PROTO_AUTO ? cg_up_h1_new(&w->ctx, t, slot) : NULL;
    *slot = cg_up_h2_new(&w->ctx, t, slot, fallback);
    return 0;
}

/* The pool this worker answers from. */
static int setup_upstream(cg_worker_t *w)
{
    const cg_config_t *cfg = w->ctx.cfg;
    if (cfg->demo || cfg->upstream == NULL) {
        w->ctx.up = cg_up_demo_new(&w->ctx);
        return 0;
    }
    if (cg_upstream_url_parse(cfg->upstream, &w->target.url) != 0) {
        cg_log_error(NULL, "CITEGATE_UPSTREAM: '%s' is not a usable URL", cfg->upstream);
        return -1;
    }
    return open_pool(w, &w->target, cfg->upstream_protocol, &w->ctx.up, "CITEGATE_UPSTREAM");
}

/* Is u at the upstream's scheme, host and port, under its base path? Then
 * its calls share the upstream's pool (SPEC §3: the same pools). */
static bool at_upstream(const cg_worker_t *w, const cg_upstream_url_t *u)
{
    const cg_upstream_url_t *up = &w->target.url;
    size_t bl = strlen(up->base);
    return w->ctx.up && w->ctx.up->target && u->tls == up->tls && u->port == up->port &&
           strcasecmp(u->host, up->host) == 0 && strncmp(u->base, up->base, bl) == 0 &&
           (u->base[bl] == '/' || u->base[bl] == '\0');
}

/* The path of the calls, with the URL's query (Azure's api-version=…). */
static char *call_path(const char *path, const char *url)
{
    cg_buf_t b = {0};
    cg_buf_puts(&b, path[0] ? path : "/");
    const char *q = strchr(url, '?'), *frag = strchr(url, '#');
    if (q && (frag == NULL || q < frag))
        cg_buf_put(&b, q, strcspn(q, "#"));
    cg_buf_putc(&b, '\0');
    return b.p;
}

/* Where embedding calls go (SPEC §3 CITEGATE_EMBEDDINGS_URL): the
 * upstream's pool for {upstream}/v1/embeddings or a URL under it, else a
 * pool of their own. Without an endpoint recall stays lexical. */
static int setup_embeddings(cg_worker_t *w)
{
    const cg_config_t *cfg = w->ctx.cfg;
    if (!cfg->embeddings_model || !cfg->citation_tracking || !cfg->semantic_memory)
        return 0;
    cg_upstream_url_t u;
    if (cfg->embeddings_url == NULL) {
        if (!w->ctx.up->target || cg_dialect_translates(cfg->upstream_dialect)) {
            if (w->ctx.index == 0)
                cg_log_warn(NULL, "CITEGATE_EMBEDDINGS_MODEL is set but there is no embeddings "
                                  "endpoint (set CITEGATE_EMBEDDINGS_URL): recall stays lexical");
            return 0;
        }
        w->ctx.embed_upp = &w->ctx.up;
        w->ctx.embed_path = cg_xstrndup(CG_STRLIT("/v1/embeddings"));
        return 0;
    }
    if (cg_upstream_url_parse(cfg->embeddings_url, &u) != 0) {
        cg_log_error(NULL, "CITEGATE_EMBEDDINGS_URL: '%s' is not a usable URL", cfg->embeddings_url);
        return -1;
    }
    if (at_upstream(w, &u)) {
        w->ctx.embed_upp = &w->ctx.up;
        w->ctx.embed_path = call_path(u.base + strlen(w->target.url.base), cfg->embeddings_url);
        return 0;
    }
    w->ctx.embed_path = call_path(u.base, cfg->embeddings_url);
    u.base[0] = '\0'; /* the path is the call's own */
    w->embed_target.url = u;
    w->embed_target.name = "embeddings endpoint";
    w->embed_target.quiet = true; /* embed.c logs failures, once a minute */
    if (open_pool(w, &w->embed_target, CG_PROTO_AUTO, &w->embed_up, "CITEGATE_EMBEDDINGS_URL") != 0)
        return -1;
    w->embed_owned = w->embed_up;
    w->ctx.embed_upp = &w->embed_up;
    return 0;
}

static int setup_listeners(cg_worker_t *w)
{
    const cg_config_t *cfg = w->ctx.cfg;
    if (cfg->tls_cert) {
        char err[512];
        w->srv_tls = cg_xcalloc(1, sizeof(cg_tls_conf_t));
        if (cg_tls_conf_server(w->srv_tls, cfg->tls_cert, cfg->tls_key, err, sizeof(err)) != 0) {
            cg_log_error(NULL, "%s", err);
            return -1;
        }
    }
    cg_server_init(&w->server, &w->ctx, w->srv_tls);
    int r = cg_server_listen(&w->server, false, cfg->listen);
    if (r != 0) {
        cg_log_error(NULL, "CITEGATE_LISTEN: cannot listen on %s: %s", cfg->listen, uv_strerror(r));
        return -1;
    }
    r = cg_server_listen(&w->server, true, cfg->admin_listen);
    if (r != 0) {
        cg_log_error(NULL, "CITEGATE_ADMIN_LISTEN: cannot listen on %s: %s", cfg->admin_listen,
                     uv_strerror(r));
        return -1;
    }
    return 0;
}

static void setup_signals(cg_worker_t *w)
{
    uv_signal_t *sigs[] = {&w->sigterm, &w->sigint, &w->sighup};
    int nums[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(w->ctx.loop, sigs[i]);
        sigs[i]->data = w;
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void tls_conf_free(struct cg_tls_conf *c)
{
    if (c) {
        cg_tls_conf_free(c);
        free(c);
    }
}

/* The loop stopped: close the handles left (each owner's close callback
 * frees it), let those callbacks run, then free the pools and the TLS
 * configurations their connections used. */
static void teardown(cg_worker_t *w)
{
    cg_safepoint_close(&w->ctx.safe);
    uv_walk(w->ctx.loop, close_walk, NULL);
    uv_run(w->ctx.loop, UV_RUN_DEFAULT);
    w->owned->ops->free(w->owned);
    if (w->embed_owned)
        w->embed_owned->ops->free(w->embed_owned);
    free(w->ctx.embed_path);
    tls_conf_free(w->target.tls);
    tls_conf_free(w->embed_target.tls);
    tls_conf_free(w->srv_tls);
    uv_loop_close(w->ctx.loop);
    cg_ctx_free(&w->ctx);
    cg_tracking_stop(&w->ctx);
}

int cg_worker_run(const cg_config_t *cfg, int index, char *data_sources)
{
    cg_worker_t *w = &worker;
    memset(w, 0, sizeof(*w));
    cg_ctx_init(&w->ctx, uv_default_loop(), cfg, index);
    w->ctx.data_sources = data_sources;
    w->ctx.on_quiet = on_quiet;
    cg_log_init(cfg->log_json, cfg->log_level, index);
    cg_metrics_select((unsigned)index);
    signal(SIGPIPE, SIG_IGN);
    if (setup_upstream(w) != 0)
        return 2;
    w->owned = w->ctx.up;
    if (setup_embeddings(w) != 0 || setup_listeners(w) != 0)
        return 2;
    uv_timer_init(w->ctx.loop, &w->grace);
    w->grace.data = w;
    setup_signals(w);
    cg_server_sweep_start(&w->server);
    cg_tracking_start(&w->ctx, &cg_embed_tracking);
    start_lag_timer(w);
    hold_log_lines(w);
    uv_run(w->ctx.loop, UV_RUN_DEFAULT);
    teardown(w);
    cg_log_hold(false);
    cg_log_info(NULL, "worker stopped");
    return 0;
}
