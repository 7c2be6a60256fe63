/*
 * The daemon: configuration, the worker processes (SO_REUSEPORT, one libuv
 * loop each, see io/worker.c) and their supervision (SPEC §2, §9).
 */
#include "citegate/dialect.h"
#include "citegate/sigv4.h"
#include "citegate/version.h"
#include "cmd.h"
#include "io/log.h"
#include "io/metrics.h"
#include "io/tls.h"
#include "io/upstream.h"
#include "io/worker.h"
#include "tracking/store_pg.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
        _exit(cg_worker_run(cfg, index, ds));
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

/* The flags' values into out[0..*n) (room for argc), --demo and --check. */
static int parse_args(int argc, char **argv, cg_config_flag_t *out, size_t *n, bool *demo,
                      bool *check, char *err, size_t el)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--demo") == 0) {
            *demo = true;
            continue;
        }
        if (strcmp(a, "--check") == 0) {
            *check = true;
            continue;
        }
        size_t fl = strcspn(a, "=");
        const char *var = cg_config_flag_var(a, fl, false);
        if (var == NULL) {
            snprintf(err, el, "unknown argument '%s' (see --help)", a);
            return -1;
        }
        const char *value = a[fl] == '=' ? a + fl + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            snprintf(err, el, "%.*s needs a value", (int)fl, a);
            return -1;
        }
        out[(*n)++] = (cg_config_flag_t){var, value};
    }
    return 0;
}

/* An AWS dialect signs with both keys, or with neither sends the client's
 * own; the region must be known, and the keys of a form a signature takes
 * (a test signature; their values are never printed). */
static int validate_aws(const cg_config_t *cfg, char *err, size_t el)
{
    const char *service = cg_dialect_aws_service(cfg->upstream_dialect);
    if (service == NULL || cfg->upstream == NULL || cfg->demo)
        return 0;
    const cg_dialect_t *d = cfg->upstream_dialect;
    if (cg_dialect_kb_config_required(d) && cfg->bedrock_kb == NULL) {
        snprintf(err, el, "CITEGATE_BEDROCK_KB: unset, and the %s dialect needs it (the "
                          "retrieveAndGenerateConfiguration JSON object)", cg_dialect_name(d));
        return -1;
    }
    if (cg_dialect_aws_keys_required(d) && !cg_config_aws_signs(cfg)) {
        const char *missing = cfg->aws_access_key_id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID";
        snprintf(err, el, "%s: unset, and the %s dialect signs every request (SigV4): set "
                          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", missing, cg_dialect_name(d));
        return -1;
    }
    if ((cfg->aws_access_key_id == NULL) != (cfg->aws_secret_access_key == NULL)) {
        snprintf(err, el, "%s is set without %s: set both to sign requests, or neither",
                 cfg->aws_access_key_id ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                 cfg->aws_access_key_id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        return -1;
    }
    if (!cg_config_aws_signs(cfg))
        return 0;
    char region[128];
    cg_sigv4_keys_t k = {cfg->aws_access_key_id, cfg->aws_secret_access_key,
                         cfg->aws_session_token, cg_config_aws_region(cfg, region, sizeof(region)),
                         service};
    if (k.region == NULL) {
        snprintf(err, el, "AWS_REGION: unset, and CITEGATE_UPSTREAM is no "
                          "bedrock-runtime.REGION.amazonaws.com or "
                          "bedrock-agent-runtime.REGION.amazonaws.com host: set AWS_REGION");
        return -1;
    }
    cg_sigv4_t sig = {0};
    cg_sigv4_req_t req = {CG_SPAN_LIT("POST"), CG_SPAN_LIT("/"), CG_SPAN_LIT(""),
                          CG_SPAN_LIT("h"), NULL, 0, CG_SPAN_LIT("")};
    int rc = cg_sigv4_sign(&sig, &k, &req, time(NULL));
    cg_sigv4_free(&sig);
    if (rc != 0) {
        snprintf(err, el, "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or "
                          "AWS_REGION: not of a form a signature takes (visible ASCII only; "
                          "the secret at most %d characters)", CG_SIGV4_MAX_SECRET);
        return -1;
    }
    return 0;
}

/* Checks that need more than one setting, or the file system. */
static int validate(const cg_config_t *cfg, char *err, size_t el)
{
    if (validate_aws(cfg, err, el) != 0)
        return -1;
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
    if (cfg->tracking_dsn && cg_pg_check_dsn(cfg->tracking_dsn, err, el) != 0)
        return -1; /* the syntax only: the database may come later */
    if (cfg->upstream_ca && access(cfg->upstream_ca, R_OK) != 0) {
        snprintf(err, el, "CITEGATE_UPSTREAM_CA: cannot read %s: %s", cfg->upstream_ca,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void startup_line(const cg_config_t *cfg)
{
    const char *proto = cfg->upstream_protocol == CG_PROTO_H2      ? "h2"
                        : cfg->upstream_protocol == CG_PROTO_HTTP1 ? "http1.1"
                                                                   : "auto";
    bool demo = cfg->demo || cfg->upstream == NULL;
    cg_log_info(
        NULL, "citegate %s listening on %s (admin %s), upstream %s (%s), profile %s, workers %u",
        CITEGATE_VERSION, cfg->listen, cfg->admin_listen, demo ? "embedded demo" : cfg->upstream,
        demo ? "in-process" : proto, cfg->profile->name, cfg->workers);
    if (demo) {
        char host[300];
        snprintf(host, sizeof(host), "%s", cfg->listen);
        if (strncmp(host, "0.0.0.0:", 8) == 0)
            snprintf(host, sizeof(host), "127.0.0.1:%s", cfg->listen + 8);
        fprintf(stderr,
                "citegate: no upstream configured, serving the embedded demo. Try:\n"
                "  curl -sN http://%s/v1/chat/completions -H 'Content-Type: application/json' "
                "-d '{\"model\":\"citegate-demo\",\"stream\":true,\"messages\":[{\"role\":"
                "\"user\",\"content\":\"How do I charge the X100?\"}]}'\n",
                host);
    }
    if (cfg->upstream_insecure)
        cg_log_warn(NULL, "CITEGATE_UPSTREAM_INSECURE: upstream certificates are not verified");
}

int cg_main_daemon(int argc, char **argv)
{
    char err[512];
    cg_config_t cfg;
    bool demo = false, check = false;
    cg_config_flag_t *given = cg_xcalloc((size_t)argc, sizeof(*given));
    size_t ngiven = 0;
    int rc = parse_args(argc, argv, given, &ngiven, &demo, &check, err, sizeof(err));
    if (rc == 0)
        rc = cg_config_load(&cfg, given, ngiven, err, sizeof(err));
    free(given);
    if (rc != 0) {
        fprintf(stderr, "citegate: %s\n", err);
        return 2;
    }
    cfg.demo = demo;
    if (validate(&cfg, err, sizeof(err)) != 0) {
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
    rc = cfg.workers == 1 ? cg_worker_run(&cfg, 0, ds) : supervise(&cfg, ds);
    free(ds);
    cg_config_free(&cfg);
    return rc;
}
