/*
 * The daemon: configuration, workers (SO_REUSEPORT, one libuv loop each),
 * signals and graceful drain (SPEC §2, §9).
 */
#include "citegate/version.h"
#include "log.h"
#include "main_int.h"
#include "metrics.h"
#include "server.h"
#include "tls.h"
#include "tracking.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

int cg_upstream_url_parse(const char *url, cg_upstream_url_t *out)
{
    memset(out, 0, sizeof(*out));
    const char *rest;
    if (strncasecmp(url, "https://", 8) == 0) {
        out->tls = true;
        rest = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        rest = url + 7;
    } else {
        return -1;
    }
    size_t auth = strcspn(rest, "/?#");
    if (auth == 0 || auth >= sizeof(out->authority))
        return -1;
    memcpy(out->authority, rest, auth);
    const char *hs = rest, *he = rest + auth;
    const char *port = NULL;
    if (*hs == '[') {
        const char *rb = memchr(hs, ']', auth);
        if (rb == NULL)
            return -1;
        port = rb + 1 < he && rb[1] == ':' ? rb + 2 : NULL;
        hs++;
        he = rb;
    } else {
        const char *colon = memchr(hs, ':', auth);
        if (colon) {
            port = colon + 1;
            he = colon;
        }
    }
    if (he <= hs || (size_t)(he - hs) >= sizeof(out->host))
        return -1;
    memcpy(out->host, hs, (size_t)(he - hs));
    out->port = out->tls ? 443 : 80;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (end != rest + auth || p <= 0 || p > 65535)
            return -1;
        out->port = (int)p;
    }
    const char *path = rest + auth;
    size_t plen = strcspn(path, "?#");
    while (plen > 0 && path[plen - 1] == '/')
        plen--;
    if (plen >= sizeof(out->base))
        return -1;
    memcpy(out->base, path, plen);
    return 0;
}

/* --- the worker ------------------------------------------------------------------- */

static cg_worker_t worker;

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void cg_worker_maybe_exit(cg_worker_t *w)
{
    if (!w->draining || w->active > 0)
        return;
    /* Close what is left; client handles close through their own path. */
    for (cg_client_t *c = w->clients; c; c = c->next)
        if (!c->closing)
            cg_client_close(c);
    cg_upstream_close_idle(w);
    uv_stop(w->loop);
}

static void on_grace(uv_timer_t *t)
{
    cg_worker_t *w = t->data;
    cg_log_warn(NULL, "drain time over: ending %zu streams", w->active);
    cg_client_t *next;
    for (cg_client_t *c = w->clients; c; c = next) {
        next = c->next;
        if (c->ex)
            cg_exchange_shutdown(c->ex);
        cg_h2_shutdown_streams(c);
    }
    cg_worker_maybe_exit(w);
}

static void start_drain(cg_worker_t *w)
{
    if (w->draining)
        return;
    w->draining = true;
    cg_log_info(NULL, "draining: %zu streams in flight, up to %u ms", w->active,
                w->cfg->shutdown_grace_ms);
    if (w->listener_open) {
        uv_close((uv_handle_t *)&w->listener, NULL);
        w->listener_open = false;
    }
    cg_client_t *next;
    for (cg_client_t *c = w->clients; c; c = next) {
        next = c->next;
        if (c->admin)
            continue;
        if (cg_h2_busy(c))
            cg_h2_drain(c); /* GOAWAY: no new streams, in-flight ones finish */
        else if (!c->ex)
            cg_client_close(c);
    }
    uv_timer_start(&w->grace, on_grace, w->cfg->shutdown_grace_ms, 0);
    cg_worker_maybe_exit(w);
}

static void on_signal(uv_signal_t *s, int signum)
{
    cg_worker_t *w = s->data;
    if (signum == SIGHUP) {
        cg_log_info(NULL, "SIGHUP: logs go to stderr, nothing to reopen");
        return;
    }
    start_drain(w);
}

static int resolve(cg_worker_t *w)
{
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof(port), "%d", w->up.port);
    int r = getaddrinfo(w->up.host, port, &hints, &res);
    if (r != 0) {
        cg_log_error(NULL, "CITEGATE_UPSTREAM: cannot resolve %s: %s", w->up.host, gai_strerror(r));
        return -1;
    }
    memcpy(&w->up_addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* A 10 ms tick: how late it fires is how long the loop was blocked (by a
 * slow callback, a synchronous disk write, ...). Unreferenced, so it never
 * keeps a draining worker alive. */
#define LAG_TICK_MS 10

static void on_lag_tick(uv_timer_t *t)
{
    cg_worker_t *w = t->data;
    uint64_t now = uv_hrtime();
    double late = (double)(now - w->lag_last) / 1e9 - LAG_TICK_MS / 1000.0;
    cg_hist_observe(&cg_metrics->loop_lag, cg_lag_buckets, late > 0 ? late : 0);
    w->lag_last = now;
}

static void start_lag_timer(cg_worker_t *w)
{
    uv_timer_init(w->loop, &w->lag_timer);
    w->lag_timer.data = w;
    w->lag_last = uv_hrtime();
    uv_timer_start(&w->lag_timer, on_lag_tick, LAG_TICK_MS, LAG_TICK_MS);
    uv_unref((uv_handle_t *)&w->lag_timer);
}

static int run_worker(const cg_config_t *cfg, int index, char *data_sources)
{
    cg_worker_t *w = &worker;
    memset(w, 0, sizeof(*w));
    w->loop = uv_default_loop();
    w->cfg = cfg;
    w->index = index;
    w->data_sources = data_sources;
    w->demo = cfg->demo || cfg->upstream == NULL;
    cg_log_init(cfg->log_json, cfg->log_level, index);
    cg_metrics_select((unsigned)index);
    signal(SIGPIPE, SIG_IGN);
    if (!w->demo && (cg_upstream_url_parse(cfg->upstream, &w->up) != 0 || resolve(w) != 0))
        return 2;
    /* auto on https: try h2 by ALPN first; the first answer decides (h2up.c). */
    w->up_h2 = cfg->upstream_protocol == CG_PROTO_H2 ||
               (cfg->upstream_protocol == CG_PROTO_AUTO && w->up.tls);
    static cg_tls_conf_t up_tls;
    if (!w->demo && w->up.tls) {
        char err[512];
        if (cg_tls_conf_client(&up_tls, cfg->upstream_ca, cfg->upstream_insecure, err,
                               sizeof(err)) != 0) {
            cg_log_error(NULL, "%s", err);
            return 2;
        }
        w->up_tls = &up_tls;
        if (w->up_h2) {
            bool fallback = cfg->upstream_protocol == CG_PROTO_AUTO;
            up_tls.alpn[0] = "h2";
            up_tls.alpn[1] = fallback ? "http/1.1" : NULL;
            up_tls.alpn[2] = NULL;
            mbedtls_ssl_conf_alpn_protocols(&up_tls.conf, up_tls.alpn);
        }
        /* SNI never carries an IP literal (RFC 6066), and mbedTLS 2.28 cannot
         * match IP addresses in certificates: for those only the chain is
         * verified. */
        struct in6_addr ip;
        bool literal = inet_pton(AF_INET, w->up.host, &ip) == 1 ||
                       inet_pton(AF_INET6, w->up.host, &ip) == 1;
        w->up_sni = literal ? NULL : w->up.host;
        if (literal && !cfg->upstream_insecure)
            cg_log_warn(NULL, "CITEGATE_UPSTREAM: %s is an IP address: its certificate chain is "
                              "verified, its name is not (use a host name for full checks)",
                        w->up.host);
    }
    static cg_tls_conf_t srv_tls;
    if (cfg->tls_cert) {
        char err[512];
        if (cg_tls_conf_server(&srv_tls, cfg->tls_cert, cfg->tls_key, err, sizeof(err)) != 0) {
            cg_log_error(NULL, "%s", err);
            return 2;
        }
        w->srv_tls = &srv_tls;
    }
    int r = cg_server_listen(w, &w->listener, cfg->listen, false);
    if (r != 0) {
        cg_log_error(NULL, "CITEGATE_LISTEN: cannot listen on %s: %s", cfg->listen, uv_strerror(r));
        return 2;
    }
    w->listener_open = true;
    r = cg_server_listen(w, &w->admin, cfg->admin_listen, true);
    if (r != 0) {
        cg_log_error(NULL, "CITEGATE_ADMIN_LISTEN: cannot listen on %s: %s", cfg->admin_listen,
                     uv_strerror(r));
        return 2;
    }
    uv_timer_init(w->loop, &w->grace);
    w->grace.data = w;
    uv_signal_t *sigs[] = {&w->sigterm, &w->sigint, &w->sighup};
    int nums[] = {SIGTERM, SIGINT, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(w->loop, sigs[i]);
        sigs[i]->data = w;
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
    cg_tracking_start(w);
    start_lag_timer(w);
    uv_run(w->loop, UV_RUN_DEFAULT);
    uv_walk(w->loop, close_walk, NULL);
    uv_run(w->loop, UV_RUN_DEFAULT);
    uv_loop_close(w->loop);
    cg_tracking_stop(w);
    cg_admin_close(w);
    cg_log_info(NULL, "worker stopped");
    return 0;
}

/* --- the parent ------------------------------------------------------------------- */

static volatile sig_atomic_t got_signal;

static void parent_signal(int sig)
{
    got_signal = sig;
}

static pid_t spawn(const cg_config_t *cfg, int index, char *ds)
{
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        _exit(run_worker(cfg, index, ds));
    }
    return pid;
}

static int supervise(const cg_config_t *cfg, char *ds)
{
    unsigned n = cfg->workers;
    pid_t *pids = cg_xcalloc(n, sizeof(pid_t));
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = parent_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    for (unsigned i = 0; i < n; i++)
        pids[i] = spawn(cfg, (int)i, ds);
    bool stopping = false;
    unsigned alive = n;
    int rc = 0;
    while (alive > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno != EINTR)
                break;
            int sig = got_signal;
            got_signal = 0;
            if (sig == SIGTERM || sig == SIGINT)
                stopping = true;
            for (unsigned i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], sig);
            continue;
        }
        for (unsigned i = 0; i < n; i++) {
            if (pids[i] != pid)
                continue;
            bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (!stopping && !(WIFEXITED(status) && WEXITSTATUS(status) == 2)) {
                cg_log_error(NULL, "worker %u exited (status %d): restarting", i, status);
                sleep(1);
                pids[i] = spawn(cfg, (int)i, ds);
            } else {
                pids[i] = 0;
                alive--;
                if (!clean)
                    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
            }
        }
    }
    free(pids);
    return rc;
}

/* --- command line ------------------------------------------------------------------ */

static const struct {
    const char *flag, *var;
} flags[] = {
    {"--listen", "CITEGATE_LISTEN"},     {"--admin-listen", "CITEGATE_ADMIN_LISTEN"},
    {"--upstream", "CITEGATE_UPSTREAM"}, {"--workers", "CITEGATE_WORKERS"},
    {"--profile", "CITEGATE_PROFILE"},
};

static int parse_args(int argc, char **argv, cg_config_t *cfg, bool *check, char *err, size_t el)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--demo") == 0) {
            cfg->demo = true;
            continue;
        }
        if (strcmp(a, "--check") == 0) {
            *check = true;
            continue;
        }
        size_t k;
        for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
            size_t fl = strlen(flags[k].flag);
            if (strncmp(a, flags[k].flag, fl) == 0 && (a[fl] == '\0' || a[fl] == '='))
                break;
        }
        if (k == sizeof(flags) / sizeof(flags[0])) {
            snprintf(err, el, "unknown argument '%s' (see --help)", a);
            return -1;
        }
        const char *value = strchr(a, '=') ? strchr(a, '=') + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            snprintf(err, el, "%s needs a value", flags[k].flag);
            return -1;
        }
        if (cg_config_set(cfg, flags[k].var, value, err, el) != 0)
            return -1;
    }
    return 0;
}

/* Checks that need more than one setting, or the file system. */
static int validate(const cg_config_t *cfg, char *err, size_t el)
{
    cg_upstream_url_t up;
    if (cfg->upstream && cg_upstream_url_parse(cfg->upstream, &up) != 0) {
        snprintf(err, el, "CITEGATE_UPSTREAM: '%s' is not a valid URL", cfg->upstream);
        return -1;
    }
    if (cfg->upstream && !cfg->demo && up.tls) {
        cg_tls_conf_t tc;
        int rc = cg_tls_conf_client(&tc, cfg->upstream_ca, cfg->upstream_insecure, err, el);
        cg_tls_conf_free(&tc);
        if (rc != 0)
            return -1;
    }
    if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL)) {
        snprintf(err, el, "%s: set both CITEGATE_TLS_CERT and CITEGATE_TLS_KEY",
                 cfg->tls_cert ? "CITEGATE_TLS_KEY" : "CITEGATE_TLS_CERT");
        return -1;
    }
    if (cfg->tls_cert) {
        cg_tls_conf_t tc;
        int rc = cg_tls_conf_server(&tc, cfg->tls_cert, cfg->tls_key, err, el);
        cg_tls_conf_free(&tc);
        if (rc != 0)
            return -1;
    }
    if (cfg->upstream_ca && access(cfg->upstream_ca, R_OK) != 0) {
        snprintf(err, el, "CITEGATE_UPSTREAM_CA: cannot read %s: %s", cfg->upstream_ca, strerror(errno));
        return -1;
    }
    return 0;
}

static void startup_line(const cg_config_t *cfg)
{
    const char *proto = cfg->upstream_protocol == CG_PROTO_H2 ? "h2"
                        : cfg->upstream_protocol == CG_PROTO_HTTP1 ? "http1.1"
                                                                   : "auto";
    bool demo = cfg->demo || cfg->upstream == NULL;
    cg_log_info(NULL, "citegate %s listening on %s (admin %s), upstream %s (%s), profile %s, workers %u",
                CITEGATE_VERSION, cfg->listen, cfg->admin_listen,
                demo ? "embedded demo" : cfg->upstream, demo ? "in-process" : proto,
                cfg->profile->name, cfg->workers);
    if (demo) {
        char host[300];
        snprintf(host, sizeof(host), "%s", cfg->listen);
        if (strncmp(host, "0.0.0.0:", 8) == 0)
            snprintf(host, sizeof(host), "127.0.0.1:%s", cfg->listen + 8);
        fprintf(stderr,
                "citegate: no upstream configured, serving the embedded demo. Try:\n"
                "  curl -sN http://%s/v1/chat/completions -H 'Content-Type: application/json' "
                "-d '{\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"How do I charge the X100?\"}]}'\n",
                host);
    }
    if (cfg->upstream_insecure)
        cg_log_warn(NULL, "CITEGATE_UPSTREAM_INSECURE: upstream certificates are not verified");
}

int cg_main_daemon(int argc, char **argv)
{
    char err[512];
    cg_config_t cfg;
    bool check = false;
    if (cg_config_from_env(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "citegate: %s\n", err);
        return 2;
    }
    if (parse_args(argc, argv, &cfg, &check, err, sizeof(err)) != 0 ||
        validate(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "citegate: %s\n", err);
        cg_config_free(&cfg);
        return 2;
    }
    if (check) {
        printf("configuration is valid\n");
        cg_config_free(&cfg);
        return 0;
    }
    char *ds = NULL;
    if (cfg.data_sources)
        ds = cg_data_sources_prepare(cfg.data_sources, cfg.include_search_scores);
    cg_log_init(cfg.log_json, cfg.log_level, 0);
    startup_line(&cfg);
    if (cg_metrics_init(cfg.workers) != 0) {
        fprintf(stderr, "citegate: cannot map metrics: %s\n", strerror(errno));
        return 1;
    }
    int rc = cfg.workers == 1 ? run_worker(&cfg, 0, ds) : supervise(&cfg, ds);
    free(ds);
    cg_config_free(&cfg);
    return rc;
}
