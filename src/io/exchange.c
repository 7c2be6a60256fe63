/* Exchanges: see exchange.h. */
#include "exchange.h"

#include "citegate/alias.h"
#include "citegate/json.h"
#include "citegate/sigv4.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define CG_MAX_BODY_RESPONSE (64u << 20) /* non-streaming answers held to transform */

/* The pool in use for the exchange's target. */
#define UP(ex) (*(ex)->upp)

static void finish(cg_exchange_t *ex);
static void arm_timer(cg_exchange_t *ex, uint64_t ms);

static void set_state(cg_exchange_t *ex, cg_ex_state_t to)
{
    /* The queue-length gauge is the number of exchanges in QUEUED. */
    cg_metrics->upstream_queue_length += (to == CG_EX_QUEUED) - (ex->state == CG_EX_QUEUED);
    cg_ex_state_set(&ex->state, to);
}

static bool head_sent(const cg_exchange_t *ex)
{
    return ex->state == CG_EX_STREAMING;
}

/* Has the upstream's answer begun for the client: its head sent, or a
 * stream held to go out at its end? A body held to be transformed has not:
 * until it is whole, an error can still take its place. */
static bool answer_started(const cg_exchange_t *ex)
{
    return head_sent(ex) || (ex->state == CG_EX_HOLDING && ex->mode == CG_MODE_STREAM);
}

/* --- request ids ----------------------------------------------------------------- */

static void make_rid(cg_exchange_t *ex, cg_span_t given)
{
    bool ok = given.p && given.n > 0 && given.n < sizeof(ex->rid);
    for (size_t i = 0; ok && i < given.n; i++)
        ok = given.p[i] > 0x20 && given.p[i] < 0x7F && given.p[i] != '"' && given.p[i] != '\\';
    if (ok) {
        memcpy(ex->rid, given.p, given.n);
        ex->rid[given.n] = '\0';
        return;
    }
    /* A random prefix per process, drawn in the worker itself (after the
     * fork), then a counter: ids unique across workers and restarts. */
    static uint64_t prefix, counter;
    if (counter == 0 && getrandom(&prefix, sizeof(prefix), 0) != (ssize_t)sizeof(prefix))
        prefix = uv_hrtime() ^ ((uint64_t)getpid() << 40);
    snprintf(ex->rid, sizeof(ex->rid), "cg-%016llx-%llu", (unsigned long long)prefix,
             (unsigned long long)++counter);
}

/* --- the upstream request ------------------------------------------------------- */

/* Gives AZURE_AI_DATA_SOURCES to a chat body that has no data_sources
 * (SPEC §5); a member that counts as none is replaced, never repeated. */
static void put_body(cg_exchange_t *ex, const cg_buf_t *body)
{
    const char *sources = ex->ctx->data_sources;
    cg_span_t b = cg_span(body->p, body->len);
    if (!ex->transform || sources == NULL || ex->req.has_data_sources)
        cg_buf_put(&ex->upreq->body, b.p, b.n);
    else
        cg_route_add_sources(&ex->upreq->body, b, sources, ex->req.data_sources_off,
                             ex->req.data_sources_len);
}

/* A request to an AWS API is signed when AWS keys are configured (SPEC
 * §6a): the client's own keys are then nobody's business upstream. */
static bool signs(const cg_exchange_t *ex)
{
    return ex->transform && cg_dialect_aws_service(ex->dialect) && UP(ex)->target &&
           cg_config_aws_signs(ex->ctx->cfg);
}

static bool client_key(cg_span_t name)
{
    return cg_span_ieq(name, "authorization") || cg_span_ieq(name, "api-key");
}

/* Request fields citegate does not forward: framing, routing, its own,
 * and what the upstream's dialect carries otherwise (a key it sends in a
 * field of its own). Expect was answered by the client side: the body is
 * here already. */
static bool drop_request_header(const cg_exchange_t *ex, cg_span_t name)
{
    static const char *const ours[] = {
        "host", "content-length", "x-request-id", "x-citegate-profile", "x-citegate-aliases",
        "expect", NULL};
    if (cg_hdr_is_hop(&ex->msg.hdrs, name))
        return true;
    for (int i = 0; ours[i]; i++)
        if (cg_span_ieq(name, ours[i]))
            return true;
    if (!cg_dialect_forwards_header(ex->dialect, name) || (signs(ex) && client_key(name)))
        return true;
    return ex->transform && cg_span_ieq(name, "accept-encoding");
}

/* The dialect reads the client's fields and adds its own (SPEC §6a). */
static cg_span_t client_field(void *arg, const char *name)
{
    const cg_exchange_t *ex = arg;
    if (signs(ex) && client_key(cg_span(name, strlen(name))))
        return cg_span(NULL, 0);
    return cg_hdrs_get(&ex->msg.hdrs, name);
}

static void add_upstream_field(void *arg, cg_span_t name, cg_span_t value)
{
    cg_exchange_t *ex = arg;
    if (cg_hdrs_add(&ex->upreq->hdrs, name.p, name.n, value.p, value.n) != 0)
        ex->upreq->too_large = true;
}

static void drop_upreq(cg_exchange_t *ex)
{
    if (ex->upreq)
        cg_upreq_free(ex->upreq);
    free(ex->upreq);
    ex->upreq = NULL;
}

/* The upstream request; false when its header fields do not fit (the
 * client's, bounded on arrival, and citegate's own, given room of their
 * own: only a dialect key near that room's size can fail). */
static bool build_request(cg_exchange_t *ex, cg_span_t path_q)
{
    cg_reqmsg_t *m = &ex->msg;
    cg_upreq_t *r = ex->upreq = cg_xcalloc(1, sizeof(*ex->upreq));
    r->hdrs.outgoing = true;
    r->method = cg_reqmsg_method(m);
    cg_buf_puts(&r->target, UP(ex)->target ? UP(ex)->target->url.base : "");
    if (!cg_dialect_path(ex->dialect, &ex->dreq, &r->target))
        cg_buf_put(&r->target, path_q.p, path_q.n);
    for (size_t i = 0; i < m->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&m->hdrs, i), v = cg_hdr_value(&m->hdrs, i);
        if (!drop_request_header(ex, name))
            add_upstream_field(ex, name, v);
    }
    cg_dialect_hdrs_t fields = {client_field, add_upstream_field, ex};
    cg_dialect_add_headers(ex->dialect, &fields);
    /* The transformer reads the answer, so it must not come compressed. */
    if (ex->transform)
        add_upstream_field(ex, CG_SPAN_LIT("Accept-Encoding"), CG_SPAN_LIT("identity"));
    add_upstream_field(ex, CG_SPAN_LIT("X-Request-Id"), cg_span(ex->rid, strlen(ex->rid)));
    if (r->too_large)
        return false;
    if (!cg_dialect_translates(ex->dialect)) {
        put_body(ex, &m->body);
    } else {
        /* Taken, not copied: the answer side needs only dreq's other fields. */
        r->body = ex->dreq.body;
        memset(&ex->dreq.body, 0, sizeof(ex->dreq.body));
    }
    r->has_body = r->body.len > 0 || m->method == HTTP_POST || m->method == HTTP_PUT ||
                  m->method == HTTP_PATCH;
    return true;
}

/* Adds the SigV4 fields, made over the request as it will be sent; false
 * when it could not be signed (the keys were checked at start, so only a
 * failed allocation inside mbedTLS). */
static bool sign_request(cg_exchange_t *ex)
{
    const cg_config_t *cfg = ex->ctx->cfg;
    cg_upreq_t *r = ex->upreq;
    char region[128];
    cg_sigv4_keys_t k = {cfg->aws_access_key_id, cfg->aws_secret_access_key,
                         cfg->aws_session_token, cg_config_aws_region(cfg, region, sizeof(region)),
                         cg_dialect_aws_service(ex->dialect)};
    const char *q = memchr(r->target.p, '?', r->target.len);
    size_t path_len = q ? (size_t)(q - r->target.p) : r->target.len;
    const char *host = UP(ex)->target->url.authority;
    cg_sigv4_req_t req = {
        .method = cg_span(r->method, strlen(r->method)),
        .path = cg_span(r->target.p, path_len),
        .query = q ? cg_span(q + 1, r->target.len - path_len - 1) : cg_span("", 0),
        .host = cg_span(host, strlen(host)),
        .body = cg_span(r->body.p ? r->body.p : "", r->body.len),
    };
    cg_sigv4_t sig = {0};
    int rc = cg_sigv4_sign(&sig, &k, &req, time(NULL));
    for (size_t i = 0; rc == 0 && i < sig.n; i++)
        add_upstream_field(ex, sig.f[i].name, sig.f[i].value);
    cg_sigv4_free(&sig);
    if (rc != 0)
        cg_log_error(ex->rid, "SigV4 signing failed (%d)", rc);
    return rc == 0 && !r->too_large;
}

/* --- CORS (SPEC §4) ------------------------------------------------------------------ */

#define CG_MAX_ORIGIN_BYTES 1024

/* What every answer to an allowed origin carries. A browser reads only
 * the fields listed as exposed: X-Request-Id, and the fields h[from, to)
 * that the dialect adds to its answers (bedrock-kb's session, which a
 * browser chat sends back to go on with the conversation). */
static void cors_expose(const cg_exchange_t *ex, cg_hdrs_t *h, size_t from, size_t to)
{
    if (ex->cors_origin == NULL)
        return;
    cg_buf_t names = {0};
    cg_buf_puts(&names, "X-Request-Id");
    for (size_t i = from; i < to; i++) {
        cg_span_t n = cg_hdr_name(h, i);
        cg_buf_puts(&names, ", ");
        cg_buf_put(&names, n.p, n.n);
    }
    cg_hdrs_add_str(h, "Access-Control-Allow-Origin", ex->cors_origin);
    cg_hdrs_add(h, CG_STRLIT("Access-Control-Expose-Headers"), names.p, names.len);
    cg_hdrs_add_str(h, "Vary", "Origin");
    cg_buf_free(&names);
}

static void cors_headers(const cg_exchange_t *ex, cg_hdrs_t *h)
{
    cors_expose(ex, h, 0, 0);
}

/* A preflight is answered here and never forwarded. */
static void answer_preflight(cg_exchange_t *ex)
{
    cg_hdrs_t h = {0};
    cg_hdrs_add_str(&h, "X-Request-Id", ex->rid);
    if (ex->cors_origin) {
        cg_span_t asked = cg_hdrs_get(&ex->msg.hdrs, "access-control-request-headers");
        cg_hdrs_add_str(&h, "Access-Control-Allow-Origin", ex->cors_origin);
        cg_hdrs_add_str(&h, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        if (asked.p)
            cg_hdrs_add(&h, CG_STRLIT("Access-Control-Allow-Headers"), asked.p, asked.n);
        cg_hdrs_add_str(&h, "Access-Control-Max-Age", "600");
    }
    cg_hdrs_add_str(&h, "Vary", "Origin");
    ex->status = 204;
    if (!ex->gone) {
        ex->down->head(ex, 204, &h, 0);
        ex->down->end(ex, true);
    }
    cg_hdrs_free(&h);
    finish(ex);
}

/* Notes the request's Origin when it is allowed. An origin is a scheme,
 * a host name of at most 253 bytes and a port: a longer field is none,
 * and so what the answer echoes always fits in its head beside the
 * upstream's fields (CG_OWN_HEADER_BYTES). */
static void note_origin(cg_exchange_t *ex)
{
    cg_span_t origin = cg_hdrs_get(&ex->msg.hdrs, "origin");
    if (origin.n > CG_MAX_ORIGIN_BYTES)
        return;
    if (ex->cors_origin == NULL && cg_route_cors_allowed(ex->ctx->cfg->cors_origins, origin))
        ex->cors_origin = cg_xstrndup(origin.p, origin.n);
}

/* Notes the request's allowed Origin; true when it was a preflight, now
 * answered. */
static bool cors(cg_exchange_t *ex)
{
    if (ex->ctx->cfg->cors_origins == NULL)
        return false;
    note_origin(ex);
    if (ex->msg.method != HTTP_OPTIONS ||
        cg_hdrs_get(&ex->msg.hdrs, "access-control-request-method").p == NULL)
        return false;
    answer_preflight(ex);
    return true;
}

/* --- answering with an error ------------------------------------------------------ */

static void emit_last(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total);

/* Answers with a JSON body of citegate's own and ends the exchange;
 * retry: the client may try again in a second (SPEC §11's 503). */
static void respond_json(cg_exchange_t *ex, int status, const cg_buf_t *b, bool retry)
{
    cg_hdrs_t h = {0};
    cg_hdrs_add_str(&h, "Content-Type", "application/json");
    cg_hdrs_add_str(&h, "X-Request-Id", ex->rid);
    if (retry)
        cg_hdrs_add_str(&h, "Retry-After", "1");
    cors_headers(ex, &h);
    ex->status = status;
    if (!ex->gone) {
        ex->down->head(ex, status, &h, (long long)b->len);
        uv_buf_t ub = uv_buf_init(b->p, (unsigned)b->len);
        emit_last(ex, &ub, 1, b->len);
    }
    cg_hdrs_free(&h);
    finish(ex);
}

static void respond_error(cg_exchange_t *ex, int status, const char *type, const char *code,
                          const char *msg)
{
    cg_buf_t b = {0};
    cg_error_json(&b, type, code, msg);
    respond_json(ex, status, &b, status == 503 && strcmp(code, "upstream_busy") == 0);
    cg_buf_free(&b);
}

void cg_exchange_set_route(cg_exchange_t *ex, int route)
{
    ex->route = route;
}

/* Draining: nothing new starts, and what has not begun ends with a 503. */
static void respond_draining(cg_exchange_t *ex)
{
    respond_error(ex, 503, "server_error", "draining", "citegate is shutting down");
}

void cg_exchange_reject(cg_exchange_t *ex, int status, const char *code, const char *message)
{
    /* Counted under the route it was for, when its path was read (a 413 on
     * a chat route is a chat request refused). */
    cg_span_t url = cg_span(ex->msg.url.p, ex->msg.url.len);
    if (ex->route == CG_ROUTE_OTHER && url.n)
        ex->route = cg_route_of(cg_span(url.p, cg_route_path_length(url)));
    note_origin(ex); /* a refused request was not run: its answer has CORS all the same */
    respond_error(ex, status, "invalid_request_error", code, message);
}

/* Every upstream connection is busy: say so honestly (SPEC §9, §11). */
static void respond_busy(cg_exchange_t *ex, int reason)
{
    cg_err_t err = reason == CG_QUEUE_FULL ? CG_E_BUSY : CG_E_QUEUE_TIMEOUT;
    cg_metrics->queue_rejections[reason]++;
    ex->err = err;
    if (!ex->internal)
        cg_log_warn(ex->rid, "%s", cg_err_message(err));
    respond_error(ex, 503, "server_error", "upstream_busy", cg_err_message(err));
}

/* --- starting --------------------------------------------------------------------- */

static bool choose_profile(cg_exchange_t *ex)
{
    cg_span_t h = cg_hdrs_get(&ex->msg.hdrs, "x-citegate-profile");
    ex->profile = ex->ctx->cfg->profile;
    if (h.p == NULL)
        return true;
    char name[32];
    if (h.n < sizeof(name)) {
        memcpy(name, h.p, h.n);
        name[h.n] = '\0';
        if (cg_profile_parse(name, &ex->profile))
            return true;
    }
    char msg[200];
    snprintf(msg, sizeof(msg), "unknown X-Citegate-Profile '%.*s'; valid profiles: %s",
             (int)(h.n > 40 ? 40 : h.n), h.p, cg_profile_list());
    respond_error(ex, 400, "invalid_request_error", "invalid_profile", msg);
    return false;
}

/* Citation aliases (SPEC §7): with a profile that reads them, when the
 * configuration or the request's X-Citegate-Aliases turns them on, the
 * body goes on with its tool outputs' paths and boxes aliased; the
 * request keeps the real ones, which the answer is checked against. False
 * when the header is neither on nor off, and the client has its 400. */
static bool alias_request(cg_exchange_t *ex)
{
    cg_reqmsg_t *m = &ex->msg;
    cg_span_t h = cg_hdrs_get(&m->hdrs, "x-citegate-aliases");
    bool on = ex->ctx->cfg->citation_aliases;
    if (h.p && (cg_span_ieq(h, "on") || cg_span_ieq(h, "off"))) {
        on = cg_span_ieq(h, "on");
    } else if (h.p) {
        respond_error(ex, 400, "invalid_request_error", "invalid_aliases",
                      "X-Citegate-Aliases must be on or off");
        return false;
    }
    if (!on || !ex->profile->aliases)
        return true;
    ex->aliasing = true;
    cg_buf_t body = {0};
    ex->aliases = cg_aliases_make(&ex->req, m->body.p ? m->body.p : "", m->body.len, &body);
    if (ex->aliases == NULL) {
        cg_log_debug(ex->rid, "citation aliases: none made");
        return true;
    }
    if (ex->req.data_sources_len)
        ex->req.data_sources_off = (uint32_t)cg_aliases_moved(ex->aliases, ex->req.data_sources_off);
    cg_buf_free(&m->body);
    m->body = body;
    ex->req.aliases = ex->aliases;
    uint64_t saved = cg_aliases_saved(ex->aliases);
    cg_metrics->alias_bytes_saved += saved;
    cg_log_debug(ex->rid, "citation aliases: %zu strings aliased, %llu request bytes saved",
                 cg_aliases_count(ex->aliases), (unsigned long long)saved);
    return true;
}

/* The request in the upstream's dialect (SPEC §6a); false when the
 * dialect cannot carry it, and the client has its 400. */
static bool translate(cg_exchange_t *ex, size_t path_len)
{
    cg_reqmsg_t *m = &ex->msg;
    cg_dialect_err_t e;
    cg_dialect_hdrs_t client = {client_field, NULL, ex};
    cg_dialect_in_t in = {.req = &ex->req,
                          .deployment = cg_route_deployment(cg_span(m->url.p, path_len)),
                          .tools = ex->ctx->cfg->gemini_tools,
                          .tool_config = ex->ctx->cfg->bedrock_tool_config,
                          .kb_config = ex->ctx->cfg->bedrock_kb,
                          .client = &client,
                          .cohere_citations = ex->ctx->cfg->cohere_citations};
    if (cg_dialect_request(ex->dialect, m->body.p ? m->body.p : "", m->body.len, &in, &ex->dreq,
                           &e) == 0)
        return true;
    cg_buf_t b = {0};
    cg_dialect_err_json(&e, &b);
    respond_json(ex, CG_DIALECT_ERR_STATUS, &b, false);
    cg_buf_free(&b);
    return false;
}

static void on_timer(uv_timer_t *t);

static cg_exchange_t *make(cg_ctx_t *ctx, cg_reqmsg_t *msg, const cg_down_ops_t *down, void *arg)
{
    cg_exchange_t *ex = cg_xcalloc(1, sizeof(*ex));
    ex->ctx = ctx;
    ex->upp = &ctx->up;
    cg_reqmsg_move(&ex->msg, msg);
    ex->down = down;
    ex->down_ctx = arg;
    ex->route = CG_ROUTE_OTHER;
    ex->t_start = ex->last_activity = cg_now_ms(ctx);
    uv_timer_init(ctx->loop, &ex->timer);
    ex->timer.data = ex;
    make_rid(ex, cg_hdrs_get(&ex->msg.hdrs, "x-request-id"));
    return ex;
}

cg_exchange_t *cg_exchange_new(cg_ctx_t *ctx, cg_reqmsg_t *msg, const cg_down_ops_t *down,
                               void *arg)
{
    cg_exchange_t *ex = make(ctx, msg, down, arg);
    cg_ctx_begin(ctx);
    cg_metrics->active_streams++;
    return ex;
}

/* Not a stream: a drain does not wait for it, and no gauge counts it. */
cg_exchange_t *cg_exchange_call(cg_ctx_t *ctx, cg_reqmsg_t *msg, cg_upstream_t **upp,
                                const cg_down_ops_t *down, void *arg)
{
    cg_exchange_t *ex = make(ctx, msg, down, arg);
    ex->upp = upp;
    ex->internal = true;
    return ex;
}

/* The request's key, kept when its pattern's embedding call will need it
 * (SPEC §3: without CITEGATE_EMBEDDINGS_API_KEY, the tracked request's own). */
static void keep_keys(cg_exchange_t *ex)
{
    /* embed_upp: embeddings are on and have an endpoint (worker.c) */
    if (!ex->transform || ex->ctx->embed_upp == NULL || ex->ctx->cfg->embeddings_api_key)
        return;
    static const char *const names[] = {"authorization", "api-key"};
    for (int i = 0; i < 2; i++) {
        cg_span_t v = cg_hdrs_get(&ex->msg.hdrs, names[i]);
        if (v.p)
            cg_hdrs_add(&ex->keys, names[i], strlen(names[i]), v.p, v.n);
    }
}

void cg_exchange_run(cg_exchange_t *ex)
{
    cg_ctx_t *ctx = ex->ctx;
    cg_reqmsg_t *m = &ex->msg;
    cg_span_t url = cg_span(m->url.p, m->url.len);
    size_t path_len = cg_route_path_length(url);
    ex->route = cg_route_of(cg_span(url.p, path_len));
    ex->transform = ex->route != CG_ROUTE_OTHER && m->method == HTTP_POST;
    ex->dialect = ex->transform ? ctx->cfg->upstream_dialect : cg_dialect_default();
    if (cors(ex))
        return;
    if (ctx->draining) {
        respond_draining(ex);
        return;
    }
    if (m->method == HTTP_CONNECT) {
        /* A tunnel is a forward proxy's business; forwarded, it could open
         * one through the upstream (RFC 9110 §9.3.6). */
        respond_error(ex, 501, "invalid_request_error", "not_implemented",
                      "CONNECT is not supported");
        return;
    }
    if (url.n == 0 || url.p[0] != '/') {
        respond_error(ex, 400, "invalid_request_error", "bad_request",
                      "request target must be a path");
        return;
    }
    if (cg_route_dot_segment(cg_span(url.p, path_len))) {
        respond_error(ex, 400, "invalid_request_error", "bad_request",
                      "request path has a '.' or '..' segment");
        return;
    }
    if (ex->transform) {
        if (!choose_profile(ex))
            return;
        cg_cite_opts_t o = {ctx->cfg->max_doc_bytes, ctx->cfg->include_search_scores};
        int rc = cg_request_parse(&ex->req, m->body.p ? m->body.p : "", m->body.len, &o);
        if (rc != 0) {
            respond_error(ex, 400, "invalid_request_error", "invalid_json",
                          rc == CG_REQUEST_E_DEEP
                              ? "request body nests arrays and objects deeper than 64 levels"
                              : "request body is not a valid JSON object");
            return;
        }
        if (!alias_request(ex))
            return;
        if (cg_dialect_translates(ex->dialect) && !translate(ex, path_len))
            return;
    }
    if (!build_request(ex, url)) {
        respond_error(ex, 431, "invalid_request_error", "headers_too_large",
                      "request headers leave no room for the upstream request's own fields");
        return;
    }
    if (signs(ex) && !sign_request(ex)) {
        respond_error(ex, 500, "server_error", "signing_failed",
                      "the upstream request could not be signed");
        return;
    }
    keep_keys(ex);
    /* The upstream request has what it needs: only the request line stays
     * (for the log), so an open stream holds no second copy. */
    cg_hdrs_free(&m->hdrs);
    cg_buf_free(&m->body);
    if (UP(ex)->ops->send(UP(ex), ex) == CG_E_BUSY)
        respond_busy(ex, CG_QUEUE_FULL);
}

/* --- the answer ------------------------------------------------------------------- */

static bool ctype_is(cg_span_t ct, const char *prefix)
{
    size_t n = strlen(prefix);
    return ct.p && ct.n >= n && strncasecmp(ct.p, prefix, n) == 0;
}

static bool drop_response_header(const cg_exchange_t *ex, const cg_hdrs_t *h, cg_span_t name)
{
    if (cg_hdr_is_hop(h, name) || cg_span_ieq(name, "content-length") ||
        cg_span_ieq(name, "x-request-id") || (ex->retyped && cg_span_ieq(name, "content-type")))
        return true;
    /* With CORS on, citegate alone speaks it. */
    if (ex->ctx->cfg->cors_origins && name.n > 15 && CG_HAS_IPREFIX(name.p, "access-control-"))
        return true;
    return ex->is_sse &&
           (cg_span_ieq(name, "cache-control") || cg_span_ieq(name, "x-accel-buffering"));
}

/* The dialect reads the upstream answer's fields and adds its own to the
 * client's (SPEC §6a). */
typedef struct answer_fields {
    const cg_hdrs_t *up;
    cg_hdrs_t *out;
} answer_fields_t;

static cg_span_t answer_field(void *arg, const char *name)
{
    const answer_fields_t *a = arg;
    return cg_hdrs_get(a->up, name);
}

static void add_answer_field(void *arg, cg_span_t name, cg_span_t value)
{
    answer_fields_t *a = arg;
    cg_hdrs_add(a->out, name.p, name.n, value.p, value.n);
}

/* Sends the response head: the upstream's end-to-end headers, ours, and
 * the body length when it is known (content_length, else -1). */
static void send_head(cg_exchange_t *ex, const cg_hdrs_t *h, long long content_length)
{
    cg_hdrs_t out = {.outgoing = true}; /* the upstream's fields, bounded, and ours */
    for (size_t i = 0; h && i < h->n; i++) {
        cg_span_t name = cg_hdr_name(h, i), v = cg_hdr_value(h, i);
        if (!drop_response_header(ex, h, name))
            cg_hdrs_add(&out, name.p, name.n, v.p, v.n);
    }
    cg_hdrs_add_str(&out, "X-Request-Id", ex->rid);
    size_t dialect_from = out.n;
    if (ex->transform && h) {
        answer_fields_t a = {h, &out};
        cg_dialect_hdrs_t fields = {answer_field, add_answer_field, &a};
        cg_dialect_add_answer_headers(ex->dialect, &fields);
    }
    cors_expose(ex, &out, dialect_from, out.n);
    if (ex->retyped)
        cg_hdrs_add_str(&out, "Content-Type", "text/event-stream");
    if (ex->is_sse) {
        cg_hdrs_add_str(&out, "Cache-Control", "no-cache");
        cg_hdrs_add_str(&out, "X-Accel-Buffering", "no");
    }
    if (ex->aliasing) {
        char n[24];
        snprintf(n, sizeof(n), "%zu", cg_aliases_count(ex->aliases));
        cg_hdrs_add_str(&out, "X-Citegate-Aliases", n);
    }
    if (ex->xf && cg_xform_stats(ex->xf)->structured) {
        char n[16];
        snprintf(n, sizeof(n), "%u", cg_xform_stats(ex->xf)->citations_removed);
        cg_hdrs_add_str(&out, "X-Citegate-Citations-Removed", n);
    }
    if (!ex->gone)
        ex->down->head(ex, ex->status, &out, content_length);
    cg_hdrs_free(&out);
    set_state(ex, CG_EX_STREAMING);
}

static long long pass_length(const cg_hdrs_t *h)
{
    cg_span_t cl = cg_hdrs_get(h, "content-length");
    if (cl.p == NULL)
        return -1;
    char tmp[24];
    size_t n = cl.n < sizeof(tmp) - 1 ? cl.n : sizeof(tmp) - 1;
    memcpy(tmp, cl.p, n);
    tmp[n] = '\0';
    return strtoll(tmp, NULL, 10);
}

/* An answer in a Content-Encoding citegate did not ask for cannot be read:
 * it goes through unchanged, with its headers (SPEC §6 rule 6). */
static bool encoded(const cg_exchange_t *ex, const cg_hdrs_t *h)
{
    cg_span_t ce = cg_hdrs_get(h, "content-encoding");
    if (ce.p == NULL || cg_span_ieq(ce, "identity"))
        return false;
    cg_log_warn(ex->rid, "upstream answered in Content-Encoding %.*s: forwarded unchanged",
                (int)(ce.n > 40 ? 40 : ce.n), ce.p);
    cg_metrics->passthrough[CG_PASS_ENCODED]++;
    return true;
}

/* Does a chat answer go through the transformer? Another dialect's does in
 * every profile, off too: the client speaks chat completions (SPEC §6a). */
static bool translates(const cg_exchange_t *ex)
{
    return ex->profile->transforms || cg_dialect_translates(ex->dialect);
}

/* An answer in AWS's event stream that the dialect's view reads: the
 * client gets it as SSE. */
static bool reads_event_stream(const cg_exchange_t *ex, const cg_hdrs_t *h)
{
    const cg_dialect_view_t *v = cg_dialect_view(ex->dialect);
    return ex->transform && v && v->message &&
           ctype_is(cg_hdrs_get(h, "content-type"), "application/vnd.amazon.eventstream");
}

void cg_exchange_on_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h)
{
    cg_ctx_t *ctx = ex->ctx;
    ex->status = status;
    drop_upreq(ex);              /* answered: it will not be sent again */
    cg_hdrs_free(&ex->msg.hdrs); /* read only to build, route and log the request */
    ex->last_activity = cg_now_ms(ctx);
    cg_hist_observe(&cg_metrics->ttfb, cg_seconds_buckets,
                    (double)(cg_now_ms(ctx) - ex->t_start) / 1000.0);
    ex->is_sse = ctype_is(cg_hdrs_get(h, "content-type"), "text/event-stream");
    bool evs = reads_event_stream(ex, h);
    ex->mode = CG_MODE_PASS;
    if (ex->transform && translates(ex) && status == 200 && !encoded(ex, h))
        ex->mode = ex->is_sse || evs ? CG_MODE_STREAM : CG_MODE_BODY;
    if (evs && ex->mode == CG_MODE_STREAM)
        ex->is_sse = ex->retyped = true;
    if (ex->mode != CG_MODE_PASS) {
        cg_xform_cfg_t xc;
        cg_config_xform(ctx->cfg, &xc);
        xc.profile = ex->profile;
        ex->xf = cg_xform_new(&xc, &ex->req);
        cg_xform_set_dialect(ex->xf, cg_dialect_view(ex->dialect), &ex->dreq, (int64_t)time(NULL));
    }
    arm_timer(ex, ctx->cfg->idle_timeout_ms);
    /* A body to transform, or a stream held to its end, goes out with its
     * head later: the head reports what the transformer did. */
    bool hold =
        ex->mode == CG_MODE_BODY || (ex->mode == CG_MODE_STREAM && ex->profile->holds_stream);
    if (!hold) {
        send_head(ex, h, ex->mode == CG_MODE_PASS ? pass_length(h) : -1);
        return;
    }
    set_state(ex, CG_EX_HOLDING);
    for (size_t i = 0; i < h->n; i++) {
        cg_span_t name = cg_hdr_name(h, i), value = cg_hdr_value(h, i);
        cg_hdrs_add(&ex->head, name.p, name.n, value.p, value.n);
    }
}

static void emit(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    if (total > 0 && !ex->gone)
        ex->down->data(ex, bufs, n, total);
}

/* The last bytes of a complete body, and its end. */
static void emit_last(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    if (ex->gone)
        return;
    if (ex->down->last) {
        ex->down->last(ex, bufs, n, total);
        return;
    }
    emit(ex, bufs, n, total);
    ex->down->end(ex, true);
}

/* Sends o's bytes; with `fin`, and the end of the complete body. */
static void emit_out(cg_exchange_t *ex, const cg_out_t *o, bool fin)
{
    if (!head_sent(ex))
        send_head(ex, &ex->head, -1); /* a held stream's head */
    uv_buf_t stackv[16];
    uv_buf_t *v = o->nseg <= 16 ? stackv : cg_xmalloc(o->nseg * sizeof(uv_buf_t));
    size_t total = 0;
    for (size_t i = 0; i < o->nseg; i++) {
        v[i] = uv_buf_init((char *)o->seg[i].p, (unsigned)o->seg[i].n);
        total += o->seg[i].n;
    }
    if (fin)
        emit_last(ex, v, (unsigned)o->nseg, total);
    else
        emit(ex, v, (unsigned)o->nseg, total);
    if (v != stackv)
        free(v);
}

/* The streams_paused gauge counts exchanges whose `paused` is set and that
 * are not done: it rises here, and falls when the client drains or, for
 * whatever reason, the exchange finishes paused (finish()). */
static void backpressure(cg_exchange_t *ex)
{
    if (!ex->paused && !ex->gone && ex->down->queued(ex) > CG_CONN_HWM) {
        ex->paused = true;
        cg_metrics->client_stalls++;
        cg_metrics->streams_paused++;
        UP(ex)->ops->pause(UP(ex), ex, true);
    }
}

void cg_exchange_client_drained(cg_exchange_t *ex)
{
    if (ex->paused && !cg_exchange_done(ex)) {
        ex->paused = false;
        cg_metrics->streams_paused--;
        UP(ex)->ops->pause(UP(ex), ex, false);
    }
}

static void account(cg_exchange_t *ex);

/* An event-stream upstream broke its framing (SPEC §6a): nothing after the
 * break can be read, so the upstream goes (its connection closed, or over
 * h2 its stream reset: the neighbours' streams are whole) and the answer
 * ends with the error event the transformer wrote, or is a 502 when
 * nothing of it went out yet. */
static void end_broken_framing(cg_exchange_t *ex)
{
    cg_log_warn(ex->rid, "upstream event stream broke its framing: answer ended");
    UP(ex)->ops->abort(UP(ex), ex);
    if (!head_sent(ex)) {
        respond_error(ex, 502, "upstream_error", "upstream_protocol_error",
                      "upstream event stream framing is broken");
        return;
    }
    account(ex);
    emit_out(ex, &ex->ctx->out, true);
    finish(ex);
}

/* A body too large to transform: forwarded unchanged from here on. */
static void give_up_body(cg_exchange_t *ex, const char *p, size_t n)
{
    cg_metrics->passthrough[CG_PASS_BODY_TOO_LARGE]++;
    ex->mode = CG_MODE_PASS;
    send_head(ex, &ex->head, -1);
    uv_buf_t both[2] = {uv_buf_init(ex->body.p, (unsigned)ex->body.len),
                        uv_buf_init((char *)p, (unsigned)n)};
    emit(ex, both, 2, ex->body.len + n);
    cg_buf_free(&ex->body);
}

void cg_exchange_on_body(cg_exchange_t *ex, const char *p, size_t n)
{
    ex->last_activity = cg_now_ms(ex->ctx);
    ex->resp_bytes += n;
    if (cg_status_no_body(ex->status, ex->msg.method))
        return;
    switch (ex->mode) {
    case CG_MODE_STREAM:
        cg_xform_feed(ex->xf, p, n, &ex->ctx->out);
        if (cg_xform_stats(ex->xf)->framing_error) {
            end_broken_framing(ex);
            return;
        }
        if (head_sent(ex) || ex->ctx->out.nseg)
            emit_out(ex, &ex->ctx->out, false);
        break;
    case CG_MODE_BODY:
        if (ex->body.len + n <= CG_MAX_BODY_RESPONSE) {
            cg_buf_put(&ex->body, p, n);
            return;
        }
        give_up_body(ex, p, n);
        break;
    case CG_MODE_PASS: {
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
        emit(ex, &b, 1, n);
        break;
    }
    }
    backpressure(ex);
}

static void end_body(cg_exchange_t *ex, bool complete)
{
    if (!ex->gone)
        ex->down->end(ex, complete);
}

static void end_body_mode(cg_exchange_t *ex)
{
    cg_xform_body(ex->xf, ex->body.p ? ex->body.p : "", ex->body.len, &ex->ctx->out);
    account(ex);
    send_head(ex, &ex->head, (long long)cg_out_len(&ex->ctx->out));
    emit_out(ex, &ex->ctx->out, true);
}

/* No answer reached the client: say why, as the SPEC's 502/504 (504 only
 * when the upstream took the request and never answered). */
static void fail_before_head(cg_exchange_t *ex, cg_err_t err)
{
    bool first_byte = err == CG_E_TIMEOUT && ex->state == CG_EX_WAITING;
    respond_error(ex, first_byte ? 504 : 502, "upstream_error",
                  first_byte ? "upstream_timeout" : "upstream_unavailable", cg_err_message(err));
}

static cg_end_t end_reason(cg_err_t err)
{
    return err == CG_OK ? CG_END_EOF : err == CG_E_TIMEOUT ? CG_END_TIMEOUT : CG_END_RESET;
}

/* Ends an answer that began (or a body held whole), why it ended: a
 * transformed stream gets the profile's end, or SPEC §6's error event when
 * it broke off; a held body goes out transformed; a forwarded body that
 * broke off is cut, and only closing tells the client. `last`, the last
 * bytes of a streamed body that came with its end, leave in the same write
 * (empty: none). */
static void end_answer(cg_exchange_t *ex, cg_end_t why, cg_span_t last)
{
    /* The answer is counted and tracked before its last bytes leave: a
     * client that has its whole answer finds it in the stats. */
    if (ex->mode == CG_MODE_STREAM) {
        if (last.n)
            cg_xform_feed_finish(ex->xf, last.p, last.n, why, &ex->ctx->out);
        else
            cg_xform_finish(ex->xf, why, &ex->ctx->out);
        account(ex);
        emit_out(ex, &ex->ctx->out, true);
    } else if (ex->mode == CG_MODE_BODY) {
        end_body_mode(ex);
    } else if (last.n) {
        account(ex);
        uv_buf_t b = uv_buf_init((char *)last.p, (unsigned)last.n);
        emit_last(ex, &b, 1, last.n);
    } else {
        account(ex);
        end_body(ex, why == CG_END_EOF);
    }
    finish(ex);
}

void cg_exchange_on_end(cg_exchange_t *ex, cg_err_t err)
{
    if (cg_exchange_done(ex))
        return;
    if (err == CG_E_BUSY) {
        respond_busy(ex, CG_QUEUE_FULL);
        return;
    }
    if (err != CG_OK) {
        ex->err = err;
        /* An internal call's caller counts and reports its failures. */
        if (cg_err_label(err) && !ex->internal)
            cg_metrics->upstream_errors[err]++;
        if (!ex->internal)
            cg_log_warn(ex->rid, "%s", cg_err_message(err));
    }
    /* A body held whole is the answer; anything less that has not begun
     * is a failure to say. */
    bool whole_body = ex->state == CG_EX_HOLDING && ex->mode == CG_MODE_BODY && err == CG_OK;
    if (!answer_started(ex) && !whole_body) {
        fail_before_head(ex, err == CG_OK ? CG_E_PROTOCOL : err);
        return;
    }
    end_answer(ex, end_reason(err), cg_span(NULL, 0));
}

/* One read brought the body's last bytes and its end: they leave in one
 * write with what the profile adds at the end (a client over HTTP/1.1 gets
 * one writev, not a second write for the terminator). */
/* Did the upstream's event stream break its framing? The exchange is
 * finished by then, but it is freed only once its timer has closed. */
static bool framing_broke(const cg_exchange_t *ex)
{
    return ex->xf && cg_xform_stats(ex->xf)->framing_error;
}

bool cg_exchange_on_last(cg_exchange_t *ex, const char *p, size_t n)
{
    if (cg_exchange_done(ex))
        return true; /* nothing more is written for it */
    bool joinable = n > 0 && answer_started(ex) && ex->mode != CG_MODE_BODY &&
                    !cg_status_no_body(ex->status, ex->msg.method);
    if (!joinable) {
        if (n > 0)
            cg_exchange_on_body(ex, p, n);
        cg_exchange_on_end(ex, CG_OK);
        return !framing_broke(ex);
    }
    ex->last_activity = cg_now_ms(ex->ctx);
    ex->resp_bytes += n;
    end_answer(ex, CG_END_EOF, cg_span(p, n));
    if (!framing_broke(ex))
        return true;
    cg_log_warn(ex->rid, "upstream event stream broke its framing: answer ended");
    return false;
}

void cg_exchange_upstream_queued(cg_exchange_t *ex)
{
    if (ex->state == CG_EX_QUEUED)
        return; /* moved from one pool's queue to another's: still waiting */
    set_state(ex, CG_EX_QUEUED);
    ex->t_queued = cg_now_ms(ex->ctx);
    arm_timer(ex, ex->ctx->cfg->upstream_queue_timeout_ms);
}

void cg_exchange_upstream_connecting(cg_exchange_t *ex)
{
    set_state(ex, CG_EX_CONNECTING);
    ex->t_upstream = cg_now_ms(ex->ctx);
    arm_timer(ex, ex->ctx->cfg->connect_timeout_ms);
}

void cg_exchange_upstream_sent(cg_exchange_t *ex)
{
    set_state(ex, CG_EX_WAITING);
    ex->t_upstream = cg_now_ms(ex->ctx);
    arm_timer(ex, ex->ctx->cfg->first_byte_timeout_ms);
}

/* --- timers ------------------------------------------------------------------------ */

/* The deadline of the current state: connect, first byte, or idle. */
static uint64_t deadline(const cg_exchange_t *ex)
{
    const cg_config_t *cfg = ex->ctx->cfg;
    switch (ex->state) {
    case CG_EX_QUEUED: return ex->t_queued + cfg->upstream_queue_timeout_ms;
    case CG_EX_CONNECTING: return ex->t_upstream + cfg->connect_timeout_ms;
    case CG_EX_WAITING: return ex->t_upstream + cfg->first_byte_timeout_ms;
    default: return ex->last_activity + cfg->idle_timeout_ms;
    }
}

static void on_timer(uv_timer_t *t)
{
    cg_exchange_t *ex = t->data;
    uint64_t now = cg_now_ms(ex->ctx), due = deadline(ex);
    if (now < due) {
        arm_timer(ex, due - now);
        return;
    }
    UP(ex)->ops->abort(UP(ex), ex);
    if (ex->state == CG_EX_QUEUED)
        respond_busy(ex, CG_QUEUE_TIMEOUT);
    else
        cg_exchange_on_end(ex, ex->state == CG_EX_CONNECTING ? CG_E_CONNECT_TIMEOUT : CG_E_TIMEOUT);
}

static void arm_timer(cg_exchange_t *ex, uint64_t ms)
{
    uv_timer_start(&ex->timer, on_timer, ms, 0);
}

/* --- ending ------------------------------------------------------------------------- */

static void on_timer_close(uv_handle_t *h)
{
    cg_exchange_t *ex = h->data;
    cg_reqmsg_free(&ex->msg);
    cg_request_free(&ex->req);
    cg_dialect_req_free(&ex->dreq);
    drop_upreq(ex);
    cg_xform_free(ex->xf);
    cg_aliases_free(ex->aliases);
    cg_buf_free(&ex->body);
    cg_hdrs_free(&ex->head);
    cg_hdrs_free(&ex->keys);
    free(ex->cors_origin);
    free(ex);
}

/* The model the client asked for: the deployment its Azure route names,
 * else its body's "model" ({NULL, 0} when none). */
static cg_span_t asked_model(const cg_exchange_t *ex)
{
    cg_span_t url = cg_span(ex->msg.url.p, ex->msg.url.len);
    cg_span_t dep = cg_route_deployment(cg_span(url.p, cg_route_path_length(url)));
    return dep.p ? dep : cg_span(ex->req.model, ex->req.model_len);
}

static void account(cg_exchange_t *ex)
{
    cg_ctx_t *ctx = ex->ctx;
    if (ex->accounted)
        return;
    ex->accounted = true;
    if (ex->internal) {
        cg_log_debug(ex->rid, "citegate's own call %.*s -> %d in %llu ms",
                     (int)(ex->msg.url.len > 200 ? 200 : ex->msg.url.len),
                     ex->msg.url.p ? ex->msg.url.p : "", ex->status,
                     (unsigned long long)(cg_now_ms(ctx) - ex->t_start));
        return;
    }
    cg_metrics_request(ex->route, ex->status);
    if (ex->t_upstream)
        cg_hist_observe(&cg_metrics->upstream_duration, cg_seconds_buckets,
                        (double)(cg_now_ms(ctx) - ex->t_upstream) / 1000.0);
    if (ex->xf) {
        const cg_xform_stats_t *s = cg_xform_stats(ex->xf);
        cg_metrics->sse_in += s->events_in;
        cg_metrics->sse_out += s->events_out;
        cg_metrics->sse_malformed += s->malformed;
        cg_metrics->sse_oversized += s->oversized;
        cg_metrics->refs_linked += s->refs_linked;
        cg_metrics->refs_unlinked += s->refs_unlinked;
        cg_metrics->refs_out_of_range += s->refs_out_of_range;
        cg_metrics->citations_emitted[cg_profile_index(ex->profile)] += s->citations_emitted;
        /* Only an answer that finished is tracked (SPEC §8). */
        bool finished = s->saw_finish || s->saw_done || ex->mode == CG_MODE_BODY;
        if (!ex->gone && !s->truncated && !s->passthrough && finished && ctx->on_answer) {
            cg_answer_t a = {ex->rid, ex->xf, &ex->req, &ex->keys, asked_model(ex)};
            ctx->on_answer(ctx->on_answer_arg, &a);
        }
    }
    cg_log_info(ex->rid, "%s %.*s -> %d in %llu ms, %zu upstream bytes", cg_reqmsg_method(&ex->msg),
                (int)(ex->msg.url.len > 200 ? 200 : ex->msg.url.len),
                ex->msg.url.p ? ex->msg.url.p : "", ex->status,
                (unsigned long long)(cg_now_ms(ctx) - ex->t_start), ex->resp_bytes);
}

static void finish(cg_exchange_t *ex)
{
    if (cg_exchange_done(ex))
        return;
    account(ex);
    /* `paused` stays as it is (the upstream side may still read it in this
     * callback); once DONE, cg_exchange_client_drained() leaves it alone. */
    if (ex->paused)
        cg_metrics->streams_paused--;
    set_state(ex, CG_EX_DONE);
    if (!ex->internal) {
        cg_ctx_end(ex->ctx);
        cg_metrics->active_streams--;
    }
    ex->down->done(ex);
    uv_timer_stop(&ex->timer);
    uv_close((uv_handle_t *)&ex->timer, on_timer_close);
}

void cg_exchange_client_gone(cg_exchange_t *ex)
{
    if (cg_exchange_done(ex))
        return;
    UP(ex)->ops->abort(UP(ex), ex);
    if (ex->status == 0)
        ex->status = 499; /* the client closed before an answer (nginx's code) */
    ex->gone = true;
    finish(ex);
}

void cg_exchange_shutdown(cg_exchange_t *ex)
{
    if (cg_exchange_done(ex))
        return;
    UP(ex)->ops->abort(UP(ex), ex);
    if (!answer_started(ex))
        respond_draining(ex);
    else
        end_answer(ex, CG_END_SHUTDOWN, cg_span(NULL, 0));
}
