/* Admin paths: see admin.h. */
#include "admin.h"

#include "http.h"
#include "log.h"
#include "metrics.h"
#include "tracking/tracking.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#define PATTERNS_DEFAULT_K 2
#define PATTERNS_MAX_K     50

static bool path_is(const char *url, size_t len, const char *path)
{
    const char *q = memchr(url, '?', len);
    if (q)
        len = (size_t)(q - url);
    return len == strlen(path) && memcmp(url, path, len) == 0;
}

/* The decoded value of query parameter `name` (form encoding: '+' is a
 * space), or NULL when absent. Caller frees. */
static char *query_param(const char *url, size_t len, const char *name)
{
    const char *end = url + len;
    const char *p = memchr(url, '?', len);
    size_t nl = strlen(name);
    while (p && p < end) {
        p++;
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) >= nl + 1 && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            cg_buf_t v = {0};
            for (const char *s = p + nl + 1; s < stop; s++) {
                int hi, lo;
                if (*s == '%' && stop - s >= 3 && (hi = cg_hex_digit(s[1])) >= 0 &&
                    (lo = cg_hex_digit(s[2])) >= 0) {
                    cg_buf_putc(&v, (char)(hi * 16 + lo));
                    s += 2;
                } else {
                    cg_buf_putc(&v, *s == '+' ? ' ' : *s);
                }
            }
            cg_buf_putc(&v, '\0');
            return v.p;
        }
        p = amp;
    }
    return NULL;
}

static bool parse_k(const char *s, int *k)
{
    if (s == NULL) {
        *k = PATTERNS_DEFAULT_K;
        return true;
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > PATTERNS_MAX_K)
        return false;
    *k = (int)v;
    return true;
}

static void error(cg_admin_resp_t *r, int status, const char *type, const char *code,
                  const char *msg)
{
    r->status = status;
    r->body.len = 0;
    cg_error_json(&r->body, type, code, msg);
}

struct cg_admin_wait {
    cg_admin_done_fn done;
    void *arg;
    bool patterns; /* which query: for the error's code */
    cg_track_query_t *tq;
};

/* A 503 of the tracking store (logged and counted by tracking.c). */
static void unavailable(cg_admin_resp_t *r, bool patterns)
{
    if (patterns)
        error(r, 503, "server_error", "memory_unavailable",
              "semantic memory is unavailable (see the log)");
    else
        error(r, 503, "server_error", "tracking_unavailable",
              "the tracking store is unavailable (see the log)");
}

/* The tracking store answered a wait. */
static void on_tracked(void *wait_arg, int status, cg_buf_t *body)
{
    cg_admin_wait_t *wait = wait_arg;
    cg_admin_resp_t r = {.status = status, .ctype = "application/json", .body = *body};
    if (status != 200)
        unavailable(&r, wait->patterns);
    cg_metrics_request(CG_ROUTE_ADMIN, r.status);
    cg_admin_done_fn done = wait->done;
    void *arg = wait->arg;
    free(wait);
    done(arg, &r);
}

void cg_admin_cancel(cg_admin_wait_t *wait)
{
    cg_tracking_cancel(wait->tq);
    free(wait);
}

/* /v1/citations/stats and /patterns: answered now, or a wait. */
static cg_admin_wait_t *tracked(cg_ctx_t *ctx, bool patterns, const char *url, size_t len,
                                const cg_hdrs_t *hdrs, cg_admin_resp_t *r, cg_admin_done_fn done,
                                void *arg)
{
    char *q = patterns ? query_param(url, len, "q") : NULL;
    char *ks = patterns ? query_param(url, len, "k") : NULL;
    cg_admin_wait_t *wait = cg_xcalloc(1, sizeof(*wait));
    wait->done = done;
    wait->arg = arg;
    wait->patterns = patterns;
    int k;
    if (patterns && !parse_k(ks, &k))
        error(r, 400, "invalid_request_error", "invalid_k", "k must be an integer from 1 to 50");
    else if (patterns)
        wait->tq =
            cg_tracking_patterns(ctx, q ? q : "", k, hdrs, &r->status, &r->body, on_tracked, wait);
    else
        wait->tq = cg_tracking_stats(ctx, &r->status, &r->body, on_tracked, wait);
    free(q);
    free(ks);
    if (wait->tq != NULL)
        return wait;
    free(wait);
    if (r->status == 503)
        unavailable(r, patterns);
    return NULL;
}

cg_admin_wait_t *cg_admin_respond(cg_ctx_t *ctx, int method, const char *url, size_t len,
                                  const cg_hdrs_t *hdrs, cg_admin_resp_t *r, cg_admin_done_fn done,
                                  void *arg)
{
    static const char *const known[] = {
        "/healthz", "/readyz", "/metrics", "/v1/citations/stats", "/v1/citations/patterns", NULL};
    memset(r, 0, sizeof(*r));
    r->status = 200;
    r->ctype = "application/json";
    int which = -1;
    for (int i = 0; known[i] && url; i++)
        if (path_is(url, len, known[i]))
            which = i;
    if (which < 0) {
        error(r, 404, "invalid_request_error", "not_found", "unknown admin path");
    } else if (method != HTTP_GET && method != HTTP_HEAD) {
        error(r, 405, "invalid_request_error", "method_not_allowed",
              "admin endpoints answer GET only");
        r->allow = "GET, HEAD"; /* RFC 9110 §15.5.6: a 405 lists them */
    } else if (which == 0) {
        cg_buf_puts(&r->body, "{\"status\":\"ok\"}");
    } else if (which == 1) {
        cg_buf_puts(&r->body,
                    ctx->draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ready\"}");
        r->status = ctx->draining ? 503 : 200;
    } else if (which == 2) {
        cg_metrics_render(&r->body);
        r->ctype = "text/plain; version=0.0.4; charset=utf-8";
    } else {
        cg_admin_wait_t *wait = tracked(ctx, which == 4, url, len, hdrs, r, done, arg);
        if (wait != NULL)
            return wait; /* counted when answered */
    }
    cg_metrics_request(CG_ROUTE_ADMIN, r->status);
    return NULL;
}
