/* Routes and request checks, pure: see route.h. */
#include "route.h"

#include <string.h>
#include <strings.h>

size_t cg_route_path_length(cg_span_t target)
{
    const char *q = target.n ? memchr(target.p, '?', target.n) : NULL;
    return q ? (size_t)(q - target.p) : target.n;
}

cg_span_t cg_route_deployment(cg_span_t path)
{
    static const char prefix[] = "/openai/deployments/", tail[] = "/chat/completions";
    size_t pl = sizeof(prefix) - 1, tl = sizeof(tail) - 1;
    if (path.n <= pl + tl || memcmp(path.p, prefix, pl) != 0 ||
        memcmp(path.p + path.n - tl, tail, tl) != 0)
        return cg_span(NULL, 0);
    cg_span_t name = cg_span(path.p + pl, path.n - pl - tl);
    return memchr(name.p, '/', name.n) ? cg_span(NULL, 0) : name;
}

int cg_route_of(cg_span_t path)
{
    if (cg_span_eq(path, "/v1/chat/completions"))
        return CG_ROUTE_CHAT;
    if (cg_span_eq(path, "/openai/v1/chat/completions"))
        return CG_ROUTE_OPENAI_V1;
    return cg_route_deployment(path).p ? CG_ROUTE_DEPLOYMENT : CG_ROUTE_OTHER;
}

/* Is seg (between two slashes) "." or "..", dots also as %2e? */
static bool dots_only(const char *p, size_t n)
{
    size_t dots = 0;
    for (size_t i = 0; i < n; dots++) {
        if (p[i] == '.')
            i++;
        else if (n - i >= 3 && p[i] == '%' && p[i + 1] == '2' &&
                 (p[i + 2] == 'e' || p[i + 2] == 'E'))
            i += 3;
        else
            return false;
    }
    return dots == 1 || dots == 2;
}

bool cg_route_dot_segment(cg_span_t path)
{
    size_t start = 0;
    for (size_t i = 0; i <= path.n; i++) {
        if (i < path.n && path.p[i] != '/')
            continue;
        if (dots_only(path.p + start, i - start))
            return true;
        start = i + 1;
    }
    return false;
}

bool cg_route_cors_allowed(const char *list, cg_span_t origin)
{
    if (list == NULL || origin.p == NULL)
        return false;
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ","), k = n;
        while (k > 0 && p[k - 1] == ' ')
            k--;
        if ((k == 1 && p[0] == '*') || (k == origin.n && strncasecmp(p, origin.p, k) == 0))
            return true;
        p += n;
    }
    return false;
}

static bool json_space(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

void cg_route_add_sources(cg_buf_t *out, cg_span_t body, const char *sources, size_t off,
                          size_t len)
{
    if (len > 0 && off + len <= body.n) { /* a member that counts as none: its value goes */
        cg_buf_put(out, body.p, off);
        cg_buf_puts(out, sources);
        cg_buf_put(out, body.p + off + len, body.n - off - len);
        return;
    }
    /* The root object's closing brace is its last one; an empty object
     * gets no comma. */
    size_t end = body.n;
    while (end > 0 && body.p[end - 1] != '}')
        end--;
    if (end == 0) { /* not an object after all: as it came */
        cg_buf_put(out, body.p, body.n);
        return;
    }
    size_t k = end - 1;
    while (k > 0 && json_space(body.p[k - 1]))
        k--;
    bool empty = k > 0 && body.p[k - 1] == '{';
    cg_buf_put(out, body.p, end - 1);
    cg_buf_puts(out, empty ? "\"data_sources\":" : ",\"data_sources\":");
    cg_buf_puts(out, sources);
    cg_buf_put(out, body.p + end - 1, body.n - (end - 1));
}
