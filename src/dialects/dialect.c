/* Upstream dialects: names, paths, the header rule and the answer views
 * (include/citegate/dialect.h). */
#include "citegate/dialect.h"

#include "views.h"

#include <string.h>
#include <strings.h>

static const char *const names[] = {"openai", "anthropic", "responses"};

bool cg_dialect_parse(const char *s, cg_dialect_t *out)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (cg_dialect_t)i;
            return true;
        }
    }
    return false;
}

const char *cg_dialect_name(cg_dialect_t d)
{
    return (size_t)d < sizeof(names) / sizeof(names[0]) ? names[d] : "openai";
}

const char *cg_dialect_path(cg_dialect_t d)
{
    switch (d) {
    case CG_DIALECT_ANTHROPIC:
        return "/v1/messages";
    case CG_DIALECT_RESPONSES:
        return "/v1/responses";
    default:
        return NULL;
    }
}

static bool name_is(cg_span_t name, const char *lit)
{
    return name.n == strlen(lit) && strncasecmp(name.p, lit, name.n) == 0;
}

bool cg_dialect_forwards_header(cg_dialect_t d, cg_span_t name)
{
    if (d != CG_DIALECT_ANTHROPIC)
        return true;
    return !name_is(name, "api-key") && !name_is(name, "authorization") &&
           !name_is(name, "x-api-key") && !name_is(name, "anthropic-version");
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static cg_span_t trim(cg_span_t s)
{
    while (s.n > 0 && is_ows(s.p[0]))
        s.p++, s.n--;
    while (s.n > 0 && is_ows(s.p[s.n - 1]))
        s.n--;
    return s;
}

cg_span_t cg_dialect_api_key(cg_span_t api_key, cg_span_t authorization)
{
    cg_span_t none = {NULL, 0};
    if (api_key.p) {
        cg_span_t k = trim(api_key);
        if (k.n > 0)
            return k;
    }
    if (authorization.p == NULL)
        return none;
    /* RFC 9110 §11.4: the scheme is case-insensitive, one or more spaces
     * separate it from the credentials. */
    cg_span_t a = trim(authorization);
    if (a.n < 7 || strncasecmp(a.p, "bearer", 6) != 0 || !is_ows(a.p[6]))
        return none;
    cg_span_t k = trim(cg_span(a.p + 6, a.n - 6));
    return k.n > 0 ? k : none;
}

extern const cg_dialect_view_t cg__dialect_responses;

const cg_dialect_view_t *cg_dialect_view(cg_dialect_t d)
{
    switch (d) {
    case CG_DIALECT_ANTHROPIC:
        return &cg__dialect_anthropic;
    case CG_DIALECT_RESPONSES:
        return &cg__dialect_responses;
    default:
        return NULL;
    }
}
