/* Admin listener: /healthz, /readyz, /metrics, /v1/citations/stats and
 * /v1/citations/patterns (SPEC §4, §8, §10). */
#include "server.h"

#include "log.h"
#include "memory.h"
#include "metrics.h"

#include <stdlib.h>
#include <string.h>

#define PATTERNS_DEFAULT_K 2
#define PATTERNS_MAX_K     50

static bool path_is(const cg_client_t *c, const char *path)
{
    size_t n = strlen(path);
    size_t len = c->msg.url.len;
    const char *q = memchr(c->msg.url.p, '?', len);
    if (q)
        len = (size_t)(q - c->msg.url.p);
    return len == n && memcmp(c->msg.url.p, path, n) == 0;
}

static void done(cg_client_t *c, int status)
{
    cg_metrics_request(CG_ROUTE_ADMIN, status);
    cg_client_response_done(c);
}

static void send_json(cg_client_t *c, int status, const cg_buf_t *b)
{
    cg_send_simple(c, status, "application/json", b->p, b->len, NULL);
    done(c, status);
}

/* The decoded value of query parameter `name` (form encoding: '+' is a
 * space), or NULL when absent. Caller frees. */
static char *query_param(const cg_client_t *c, const char *name)
{
    const char *url = c->msg.url.p, *end = url + c->msg.url.len;
    const char *p = memchr(url, '?', c->msg.url.len);
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

/* Recall runs on the loop: it is one indexed read (WAL readers never wait
 * for the writer threads), bounded by k. This worker's queued patterns are
 * written first, so an answer that just finished can be recalled at once;
 * the queue is bounded, and this is an operator's request, not a stream. */
static void patterns(cg_client_t *c)
{
    cg_worker_t *w = c->w;
    char *q = query_param(c, "q"), *ks = query_param(c, "k");
    int k;
    cg_buf_t b = {0};
    if (!parse_k(ks, &k)) {
        cg_send_error(c, 400, "invalid_request_error", "invalid_k",
                      "k must be an integer from 1 to 50", NULL);
        done(c, 400);
    } else if (!w->cfg->citation_tracking || !w->cfg->semantic_memory) {
        cg_buf_puts(&b, "{\"patterns\":[]}");
        send_json(c, 200, &b);
    } else {
        char err[512] = "";
        if (w->memory)
            cg_memwriter_flush(w->memory);
        if (w->memory_read == NULL)
            w->memory_read = cg_memory_open(w->cfg->memory_db_path, err, sizeof(err));
        if (w->memory_read == NULL || cg_memory_recall(w->memory_read, q ? q : "", k, &b) != 0) {
            const char *why = w->memory_read ? cg_memory_errmsg(w->memory_read) : err;
            cg_log_warn(NULL, "semantic memory: %s", why);
            cg_metrics->tracking_failures++;
            cg_send_error(c, 503, "server_error", "memory_unavailable",
                          "semantic memory is unavailable (see the log)", NULL);
            done(c, 503);
        } else {
            send_json(c, 200, &b);
        }
    }
    cg_buf_free(&b);
    free(q);
    free(ks);
}

void cg_admin_close(cg_worker_t *w)
{
    cg_memory_close(w->memory_read);
    w->memory_read = NULL;
}

void cg_admin_handle(cg_client_t *c)
{
    static const char *const known[] = {"/healthz", "/readyz", "/metrics", "/v1/citations/stats",
                                        "/v1/citations/patterns", NULL};
    int which = -1;
    for (int i = 0; known[i]; i++)
        if (path_is(c, known[i]))
            which = i;
    if (which < 0) {
        cg_send_error(c, 404, "invalid_request_error", "not_found", "unknown admin path", NULL);
        done(c, 404);
        return;
    }
    if (c->parser.method != HTTP_GET && c->parser.method != HTTP_HEAD) {
        cg_send_error(c, 405, "invalid_request_error", "method_not_allowed",
                      "admin endpoints answer GET only", NULL);
        done(c, 405);
        return;
    }
    cg_buf_t b = {0};
    switch (which) {
    case 0:
        cg_buf_puts(&b, "{\"status\":\"ok\"}");
        send_json(c, 200, &b);
        break;
    case 1:
        cg_buf_puts(&b, c->w->draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ready\"}");
        send_json(c, c->w->draining ? 503 : 200, &b);
        break;
    case 2:
        cg_metrics_render(&b);
        cg_send_simple(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len, NULL);
        done(c, 200);
        break;
    case 3:
        cg_metrics_render_stats(&b);
        send_json(c, 200, &b);
        break;
    default:
        patterns(c);
        break;
    }
    cg_buf_free(&b);
}
