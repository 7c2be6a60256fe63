/* Admin paths: see admin.h. */
#include "admin.h"

#include "http.h"
#include "log.h"
#include "metrics.h"
#include "tracking/memory.h"
#include "tracking/writer.h"

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

/* Recall runs on the loop: it is one indexed read (WAL readers never wait
 * for the writer threads), bounded by k. This worker's queued patterns are
 * written first, so an answer that just finished can be recalled at once;
 * the queue is bounded, and this is an operator's request, not a stream. */
static void patterns(cg_worker_t *w, const char *url, size_t len, cg_admin_resp_t *r)
{
    char *q = query_param(url, len, "q"), *ks = query_param(url, len, "k");
    int k;
    if (!parse_k(ks, &k)) {
        error(r, 400, "invalid_request_error", "invalid_k", "k must be an integer from 1 to 50");
    } else if (!w->cfg->citation_tracking || !w->cfg->semantic_memory) {
        cg_buf_puts(&r->body, "{\"patterns\":[]}");
    } else {
        char err[512] = "";
        if (w->memory)
            cg_writer_flush(w->memory);
        if (w->memory_read == NULL)
            w->memory_read = cg_memory_open(w->cfg->memory_db_path, err, sizeof(err));
        if (w->memory_read == NULL ||
            cg_memory_recall(w->memory_read, q ? q : "", k, &r->body) != 0) {
            cg_log_warn(NULL, "semantic memory: %s",
                        w->memory_read ? cg_memory_errmsg(w->memory_read) : err);
            cg_metrics->tracking_failures++;
            error(r, 503, "server_error", "memory_unavailable",
                  "semantic memory is unavailable (see the log)");
        }
    }
    free(q);
    free(ks);
}

void cg_admin_close(cg_worker_t *w)
{
    cg_memory_close(w->memory_read);
    w->memory_read = NULL;
}

void cg_admin_respond(cg_worker_t *w, int method, const char *url, size_t len, cg_admin_resp_t *r)
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
    } else if (which == 0) {
        cg_buf_puts(&r->body, "{\"status\":\"ok\"}");
    } else if (which == 1) {
        cg_buf_puts(&r->body, w->draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ready\"}");
        r->status = w->draining ? 503 : 200;
    } else if (which == 2) {
        cg_metrics_render(&r->body);
        r->ctype = "text/plain; version=0.0.4; charset=utf-8";
    } else if (which == 3) {
        cg_metrics_render_stats(&r->body);
    } else {
        patterns(w, url, len, r);
    }
    cg_metrics_request(CG_ROUTE_ADMIN, r->status);
}
