/* Admin listener: /healthz, /readyz, /metrics (SPEC §4, §10). */
#include "server.h"

#include "metrics.h"

#include <string.h>

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

void cg_admin_handle(cg_client_t *c)
{
    static const char *const known[] = {"/healthz", "/readyz", "/metrics", NULL};
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
    if (which == 0) {
        cg_send_simple(c, 200, "application/json", "{\"status\":\"ok\"}", 15, NULL);
        done(c, 200);
    } else if (which == 1) {
        bool ready = !c->w->draining;
        const char *body = ready ? "{\"status\":\"ready\"}" : "{\"status\":\"draining\"}";
        cg_send_simple(c, ready ? 200 : 503, "application/json", body, strlen(body), NULL);
        done(c, ready ? 200 : 503);
    } else {
        cg_buf_t b = {0};
        cg_metrics_render(&b);
        cg_send_simple(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len, NULL);
        cg_buf_free(&b);
        done(c, 200);
    }
}
