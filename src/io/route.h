/*
 * What a client request's target and headers say, without I/O: the route
 * a path takes (SPEC §4), an Azure deployment's name, a `.` or `..`
 * segment, whether an Origin is allowed (CORS), and the body with
 * AZURE_AI_DATA_SOURCES added (SPEC §5). The exchange decides with them;
 * tests/io/test_route.c checks them alone.
 */
#ifndef CITEGATE_IO_ROUTE_H
#define CITEGATE_IO_ROUTE_H

#include "citegate/common.h"

/* The routes requests are counted by (citegate_requests_total{path}). */
enum {
    CG_ROUTE_CHAT,       /* /v1/chat/completions */
    CG_ROUTE_DEPLOYMENT, /* /openai/deployments/{name}/chat/completions */
    CG_ROUTE_OPENAI_V1,  /* /openai/v1/chat/completions */
    CG_ROUTE_OTHER,      /* forwarded as is */
    CG_ROUTE_ADMIN,      /* the admin listener's */
    CG_NROUTES
};

/* The length of a target's path: up to its query. */
size_t cg_route_path_length(cg_span_t target);

/* The route of a path (no query): one of the chat routes, else OTHER. */
int cg_route_of(cg_span_t path);

/* The deployment name of /openai/deployments/{name}/chat/completions, as
 * written (percent-encoding kept); {NULL, 0} for any other path. */
cg_span_t cg_route_deployment(cg_span_t path);

/* Does the path (no query) have a segment `.` or `..`, also written with
 * %2e / %2E? Upstream, with a base path, it would reach beyond it. */
bool cg_route_dot_segment(cg_span_t path);

/* Is origin in list, CITEGATE_CORS_ORIGINS (comma-separated, blanks around
 * entries ignored, any case; "*" allows every origin)? NULL list or
 * origin: no. */
bool cg_route_cors_allowed(const char *list, cg_span_t origin);

/* Appends the JSON object body (valid JSON, as the request parser found it)
 * to out with sources (a JSON array) as its data_sources: in place of the
 * bytes [off, off + len) when len > 0 (the value of a data_sources member
 * that counts as none), else as a member added last, before the closing
 * brace. */
void cg_route_add_sources(cg_buf_t *out, cg_span_t body, const char *sources, size_t off,
                          size_t len);

#endif
