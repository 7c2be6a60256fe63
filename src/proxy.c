/*
 * Exchanges: one client request forwarded upstream and its answer streamed
 * back, transformed on the chat completion routes (SPEC §4-6, §11).
 */
#include "server.h"

#include "citegate/json.h"
#include "log.h"
#include "metrics.h"
#include "tracking.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void ex_finish(cg_exchange_t *ex);
static void arm_timer(cg_exchange_t *ex);

/* Stops whatever answers this exchange: the demo or an upstream stream. */
static void abort_upstream(cg_exchange_t *ex)
{
    if (ex->demo)
        cg_demo_abort(ex);
    else
        cg_upstream_abort(ex);
}

/* --- routes and request ids ---------------------------------------------------- */

static int classify(const char *path, size_t n)
{
    static const char dep[] = "/openai/deployments/";
    static const char tail[] = "/chat/completions";
    if (n == 20 && memcmp(path, "/v1/chat/completions", 20) == 0)
        return CG_ROUTE_CHAT;
    if (n == 27 && memcmp(path, "/openai/v1/chat/completions", 27) == 0)
        return CG_ROUTE_OPENAI_V1;
    if (n > sizeof(dep) - 1 + sizeof(tail) - 1 && memcmp(path, dep, sizeof(dep) - 1) == 0 &&
        memcmp(path + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0) {
        const char *name = path + sizeof(dep) - 1;
        size_t name_len = n - (sizeof(dep) - 1) - (sizeof(tail) - 1);
        if (name_len > 0 && !memchr(name, '/', name_len))
            return CG_ROUTE_DEPLOYMENT;
    }
    return CG_ROUTE_OTHER;
}

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
    static uint64_t counter;
    uint64_t r = ((uint64_t)rand() << 32) ^ (uint64_t)rand();
    snprintf(ex->rid, sizeof(ex->rid), "cg-%08x%06llx-%llu", (unsigned)(r & 0xffffffffu),
             (unsigned long long)(uv_hrtime() & 0xffffff), (unsigned long long)++counter);
}

/* --- the upstream request ------------------------------------------------------- */

/* Adds AZURE_AI_DATA_SOURCES to a chat body that has no data_sources (SPEC §5). */
static void put_body(cg_exchange_t *ex, const cg_buf_t *body)
{
    cg_buf_t *o = &ex->up_req;
    const char *sources = ex->w->data_sources;
    if (!ex->transform || sources == NULL || ex->req.has_data_sources) {
        cg_buf_put(o, body->p, body->len);
        return;
    }
    /* Insert before the root object's closing brace. */
    size_t end = body->len;
    while (end > 0 && body->p[end - 1] != '}')
        end--;
    size_t k = end - 1;
    while (k > 0 && (body->p[k - 1] == ' ' || body->p[k - 1] == '\n' || body->p[k - 1] == '\r' ||
                     body->p[k - 1] == '\t'))
        k--;
    bool empty = k > 0 && body->p[k - 1] == '{';
    cg_buf_put(o, body->p, end - 1);
    cg_buf_puts(o, empty ? "\"data_sources\":" : ",\"data_sources\":");
    cg_buf_puts(o, sources);
    cg_buf_put(o, body->p + end - 1, body->len - (end - 1));
}

static void build_request(cg_exchange_t *ex, cg_span_t path_q)
{
    cg_reqmsg_t *c = ex->msg;
    cg_worker_t *w = ex->w;
    cg_buf_t body = {0};
    cg_buf_t *o = &ex->up_req;
    o->len = 0;
    const char *method = llhttp_method_name((llhttp_method_t)c->method);
    cg_buf_printf(o, "%s %s%.*s HTTP/1.1\r\nHost: %s\r\n", method, w->up.base, (int)path_q.n,
                  path_q.p, w->up.authority);
    for (size_t i = 0; i < c->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&c->hdrs, i);
        if (cg_hdr_is_hop(&c->hdrs, name) || (name.n == 4 && strncasecmp(name.p, "host", 4) == 0) ||
            (name.n == 14 && strncasecmp(name.p, "content-length", 14) == 0) ||
            (name.n == 12 && strncasecmp(name.p, "x-request-id", 12) == 0) ||
            (name.n == 18 && strncasecmp(name.p, "x-citegate-profile", 18) == 0) ||
            (ex->transform && name.n == 15 && strncasecmp(name.p, "accept-encoding", 15) == 0))
            continue;
        cg_span_t v = cg_hdr_value(&c->hdrs, i);
        cg_buf_printf(o, "%.*s: %.*s\r\n", (int)name.n, name.p, (int)v.n, v.p);
    }
    /* The transformer reads the answer, so it must not come compressed. */
    if (ex->transform)
        cg_buf_puts(o, "Accept-Encoding: identity\r\n");
    cg_buf_printf(o, "X-Request-Id: %s\r\n", ex->rid);
    size_t head = o->len;
    cg_buf_puts(o, "Content-Length: 0000000000\r\n\r\n");
    size_t body_at = o->len;
    put_body(ex, &c->body);
    size_t blen = o->len - body_at;
    bool has_body = blen > 0 || c->method == HTTP_POST || c->method == HTTP_PUT ||
                    c->method == HTTP_PATCH;
    if (has_body) {
        char cl[32];
        int n = snprintf(cl, sizeof(cl), "Content-Length: %010zu\r\n", blen);
        memcpy(o->p + head, cl, (size_t)n);
    } else {
        memmove(o->p + head, o->p + body_at - 2, 2);
        o->len = head + 2;
    }
    cg_buf_free(&body);
}

/* --- starting --------------------------------------------------------------------- */

static void put_hdr(cg_hdrs_t *h, const char *name, const char *value, size_t vlen)
{
    cg_hdrs_on_field(h, name, strlen(name));
    cg_hdrs_on_value(h, value, vlen);
}

static void reject(cg_exchange_t *ex, int status, const char *type, const char *code,
                   const char *msg)
{
    cg_buf_t b = {0};
    cg_error_json(&b, type, code, msg);
    cg_hdrs_t h = {0};
    put_hdr(&h, "Content-Type", "application/json", 16);
    put_hdr(&h, "X-Request-Id", ex->rid, strlen(ex->rid));
    ex->status = status;
    if (!ex->gone) {
        ex->down->head(ex, status, &h, (long long)b.len);
        uv_buf_t ub = uv_buf_init(b.p, (unsigned)b.len);
        ex->down->data(ex, &ub, 1, b.len);
        ex->down->end(ex, true);
    }
    ex->head_sent = true;
    cg_hdrs_free(&h);
    cg_buf_free(&b);
    ex_finish(ex);
}

static bool choose_profile(cg_exchange_t *ex)
{
    cg_span_t h = cg_hdrs_get(&ex->msg->hdrs, "x-citegate-profile");
    ex->profile = ex->w->cfg->profile;
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
    reject(ex, 400, "invalid_request_error", "invalid_profile", msg);
    return false;
}

static cg_exchange_t *exchange_new(cg_worker_t *w, cg_reqmsg_t *msg, const cg_down_ops_t *down,
                                   void *ctx)
{
    cg_exchange_t *ex = cg_xcalloc(1, sizeof(*ex));
    ex->w = w;
    ex->msg = msg;
    ex->down = down;
    ex->down_ctx = ctx;
    ex->t_start = ex->last_activity = cg_now_ms(w);
    uv_timer_init(w->loop, &ex->timer);
    ex->timer.data = ex;
    ex->timer_open = true;
    w->active++;
    cg_metrics->active_streams++;
    make_rid(ex, cg_hdrs_get(&msg->hdrs, "x-request-id"));
    return ex;
}

void cg_exchange_reject(cg_worker_t *w, cg_reqmsg_t *msg, const cg_down_ops_t *down, void *ctx,
                        int status, const char *code, const char *message)
{
    cg_exchange_t *ex = exchange_new(w, msg, down, ctx);
    ex->route = CG_ROUTE_OTHER;
    reject(ex, status, "invalid_request_error", code, message);
}

void cg_exchange_start(cg_worker_t *w, cg_reqmsg_t *c, const cg_down_ops_t *down, void *ctx)
{
    cg_exchange_t *ex = exchange_new(w, c, down, ctx);
    if (down == &cg_h1_down)
        ((cg_client_t *)ctx)->ex = ex;
    else
        cg__h2_attach(ctx, ex);
    cg_span_t url = cg_span(c->url.p, c->url.len);
    const char *q = memchr(url.p, '?', url.n);
    size_t path_len = q ? (size_t)(q - url.p) : url.n;
    ex->route = classify(url.p, path_len);
    ex->transform = ex->route != CG_ROUTE_OTHER && c->method == HTTP_POST;
    if (w->draining) {
        reject(ex, 503, "server_error", "draining", "citegate is shutting down");
        return;
    }
    if (url.n == 0 || url.p[0] != '/') {
        reject(ex, 400, "invalid_request_error", "bad_request", "request target must be a path");
        return;
    }
    if (ex->transform) {
        if (!choose_profile(ex))
            return;
        cg_cite_opts_t o = {w->cfg->max_doc_bytes, w->cfg->include_search_scores};
        if (cg_request_parse(&ex->req, c->body.p ? c->body.p : "", c->body.len, &o) != 0) {
            reject(ex, 400, "invalid_request_error", "invalid_json",
                   "request body is not a valid JSON object");
            return;
        }
    }
    build_request(ex, url);
    ex->state = EX_UPSTREAM;
    ex->t_upstream = cg_now_ms(w);
    arm_timer(ex);
    if (w->demo)
        cg_demo_send(ex);
    else
        cg_upstream_send(ex);
}

/* --- the answer ------------------------------------------------------------------- */

static bool ctype_is(cg_span_t ct, const char *prefix)
{
    size_t n = strlen(prefix);
    return ct.p && ct.n >= n && strncasecmp(ct.p, prefix, n) == 0;
}

static bool drop_response_header(const cg_exchange_t *ex, const cg_hdrs_t *h, cg_span_t name)
{
    static const char *const ours[] = {"content-length", "x-request-id", NULL};
    static const char *const sse[] = {"cache-control", "x-accel-buffering", NULL};
    if (cg_hdr_is_hop(h, name))
        return true;
    for (int i = 0; ours[i]; i++)
        if (name.n == strlen(ours[i]) && strncasecmp(name.p, ours[i], name.n) == 0)
            return true;
    if (ex->is_sse)
        for (int i = 0; sse[i]; i++)
            if (name.n == strlen(sse[i]) && strncasecmp(name.p, sse[i], name.n) == 0)
                return true;
    return false;
}

/* Sends the response head: the upstream's end-to-end headers, ours, and
 * the body length when it is known (content_length, else -1). */
static void send_head(cg_exchange_t *ex, const cg_hdrs_t *h, long long content_length)
{
    cg_hdrs_t out = {0};
    for (size_t i = 0; h && i < h->n; i++) {
        cg_span_t name = cg_hdr_name(h, i);
        if (drop_response_header(ex, h, name))
            continue;
        cg_span_t v = cg_hdr_value(h, i);
        cg_hdrs_on_field(&out, name.p, name.n);
        cg_hdrs_on_value(&out, v.p, v.n);
    }
    put_hdr(&out, "X-Request-Id", ex->rid, strlen(ex->rid));
    if (ex->is_sse) {
        put_hdr(&out, "Cache-Control", "no-cache", 8);
        put_hdr(&out, "X-Accel-Buffering", "no", 2);
    }
    if (ex->xf && cg_xform_stats(ex->xf)->structured) {
        char n[16];
        int len = snprintf(n, sizeof(n), "%u", cg_xform_stats(ex->xf)->citations_removed);
        put_hdr(&out, "X-Citegate-Citations-Removed", n, (size_t)len);
    }
    if (!ex->gone)
        ex->down->head(ex, ex->status, &out, content_length);
    cg_hdrs_free(&out);
    ex->head_sent = true;
}

static bool no_body_status(const cg_exchange_t *ex)
{
    return ex->status < 200 || ex->status == 204 || ex->status == 304 ||
           ex->msg->method == HTTP_HEAD;
}

void cg_ex_on_head(cg_exchange_t *ex, int status, const cg_hdrs_t *h)
{
    cg_worker_t *w = ex->w;
    ex->status = status;
    ex->state = EX_STREAMING;
    ex->last_activity = cg_now_ms(w);
    cg_hist_observe(&cg_metrics->ttfb, cg_seconds_buckets,
                    (double)(cg_now_ms(w) - ex->t_start) / 1000.0);
    cg_span_t ct = cg_hdrs_get(h, "content-type");
    ex->is_sse = ctype_is(ct, "text/event-stream");
    ex->mode = MODE_PASS;
    if (ex->transform && ex->profile->transforms && status == 200)
        ex->mode = ex->is_sse ? MODE_STREAM : MODE_BODY;
    if (ex->mode != MODE_PASS) {
        cg_xform_cfg_t xc;
        cg_config_xform(w->cfg, &xc);
        xc.profile = ex->profile;
        ex->xf = cg_xform_new(&xc, &ex->req);
    }
    cg_span_t cl = cg_hdrs_get(h, "content-length");
    long long length = -1;
    if (cl.p && ex->mode == MODE_PASS) {
        char tmp[24];
        size_t n = cl.n < sizeof(tmp) - 1 ? cl.n : sizeof(tmp) - 1;
        memcpy(tmp, cl.p, n);
        tmp[n] = '\0';
        length = strtoll(tmp, NULL, 10);
    }
    /* Profile structured holds a stream to its end, and its head too: the
     * head reports how many citations were removed. */
    bool hold_head = ex->mode == MODE_STREAM && ex->profile->holds_stream;
    if (ex->mode != MODE_BODY && !hold_head) {
        send_head(ex, h, length);
        return;
    }
    /* The head goes out with the transformed body: keep the upstream's. */
    ex->body.len = 0;
    cg_hdrs_reset(&ex->head);
    for (size_t i = 0; i < h->n; i++) {
        cg_span_t name = cg_hdr_name(h, i), value = cg_hdr_value(h, i);
        cg_hdrs_on_field(&ex->head, name.p, name.n);
        cg_hdrs_on_value(&ex->head, value.p, value.n);
    }
}

static void emit(cg_exchange_t *ex, const uv_buf_t *bufs, unsigned n, size_t total)
{
    if (total > 0 && !ex->gone)
        ex->down->data(ex, bufs, n, total);
}

static void emit_out(cg_exchange_t *ex, const cg_out_t *o)
{
    if (!ex->head_sent)
        send_head(ex, &ex->head, -1); /* a held stream's head */
    uv_buf_t stackv[16];
    uv_buf_t *v = o->nseg <= 16 ? stackv : cg_xmalloc(o->nseg * sizeof(uv_buf_t));
    size_t total = 0;
    for (size_t i = 0; i < o->nseg; i++) {
        v[i] = uv_buf_init((char *)o->seg[i].p, (unsigned)o->seg[i].n);
        total += o->seg[i].n;
    }
    emit(ex, v, (unsigned)o->nseg, total);
    if (v != stackv)
        free(v);
}

static void backpressure(cg_exchange_t *ex)
{
    if (!ex->paused && !ex->gone && ex->down->queued(ex) > CG_CLIENT_HWM) {
        ex->paused = true;
        if (ex->demo)
            cg_demo_pause(ex, true);
        else
            cg_upstream_pause(ex, true);
    }
}

void cg_exchange_client_drained(cg_exchange_t *ex)
{
    if (ex->paused && ex->state == EX_STREAMING) {
        ex->paused = false;
        if (ex->demo)
            cg_demo_pause(ex, false);
        else
            cg_upstream_pause(ex, false);
    }
}

void cg_ex_on_body(cg_exchange_t *ex, const char *p, size_t n)
{
    ex->last_activity = cg_now_ms(ex->w);
    ex->resp_bytes += n;
    if (no_body_status(ex))
        return;
    switch (ex->mode) {
    case MODE_STREAM:
        cg_xform_feed(ex->xf, p, n, &ex->out);
        if (ex->head_sent || ex->out.nseg)
            emit_out(ex, &ex->out);
        break;
    case MODE_BODY:
        if (ex->body.len + n <= CG_MAX_BODY_RESPONSE) {
            cg_buf_put(&ex->body, p, n);
            return;
        }
        /* Too large to transform: forward it unchanged from here on. */
        ex->mode = MODE_PASS;
        send_head(ex, &ex->head, -1);
        uv_buf_t both[2] = {uv_buf_init(ex->body.p, (unsigned)ex->body.len),
                            uv_buf_init((char *)p, (unsigned)n)};
        emit(ex, both, 2, ex->body.len + n);
        cg_buf_free(&ex->body);
        break;
    case MODE_PASS: {
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
        emit(ex, &b, 1, n);
        break;
    }
    }
    backpressure(ex);
}

static const char *uerr_message(int uerr, bool connected)
{
    switch (uerr) {
    case CG_UERR_CONNECT: return "upstream connect failed";
    case CG_UERR_TLS: return "upstream TLS handshake failed";
    case CG_UERR_TIMEOUT: return connected ? "upstream did not answer in time" : "upstream connect timed out";
    case CG_UERR_RESET: return "upstream closed the connection";
    default: return "upstream protocol error";
    }
}

static void end_chunked(cg_exchange_t *ex)
{
    if (!ex->gone)
        ex->down->end(ex, true);
}

static void end_body_mode(cg_exchange_t *ex)
{
    cg_xform_body(ex->xf, ex->body.p ? ex->body.p : "", ex->body.len, &ex->out);
    size_t total = cg_out_len(&ex->out);
    send_head(ex, &ex->head, (long long)total);
    emit_out(ex, &ex->out);
}

void cg_ex_on_end(cg_exchange_t *ex, int uerr)
{
    if (ex->state == EX_DONE)
        return;
    if (uerr >= 0) {
        cg_metrics->upstream_errors[uerr]++;
        cg_log_warn(ex->rid, "%s", uerr_message(uerr, ex->state == EX_STREAMING));
    }
    if (!ex->head_sent && ex->mode != MODE_BODY && ex->state != EX_STREAMING) {
        bool first_byte = uerr == CG_UERR_TIMEOUT && ex->up_connected_hint;
        reject(ex, first_byte ? 504 : 502, "upstream_error",
               first_byte ? "upstream_timeout" : "upstream_unavailable",
               uerr_message(uerr, first_byte));
        return;
    }
    if (uerr < 0) {
        if (ex->mode == MODE_STREAM) {
            cg_xform_finish(ex->xf, CG_END_EOF, &ex->out);
            emit_out(ex, &ex->out);
        } else if (ex->mode == MODE_BODY) {
            end_body_mode(ex);
        }
        end_chunked(ex);
    } else if (ex->mode == MODE_STREAM) {
        cg_xform_finish(ex->xf, uerr == CG_UERR_TIMEOUT ? CG_END_TIMEOUT : CG_END_RESET, &ex->out);
        emit_out(ex, &ex->out);
        end_chunked(ex);
    } else {
        /* A forwarded body broke off: only closing tells the client. */
        if (!ex->head_sent) {
            reject(ex, 502, "upstream_error", "upstream_unavailable", uerr_message(uerr, true));
            return;
        }
        if (!ex->gone)
            ex->down->end(ex, false);
    }
    ex_finish(ex);
}

/* --- timers ------------------------------------------------------------------------ */

static void on_timer(uv_timer_t *t)
{
    cg_exchange_t *ex = t->data;
    const cg_config_t *cfg = ex->w->cfg;
    uint64_t now = cg_now_ms(ex->w);
    uint64_t deadline;
    if (ex->state == EX_UPSTREAM)
        deadline = ex->t_upstream +
                   (ex->up_connected_hint ? cfg->first_byte_timeout_ms : cfg->connect_timeout_ms);
    else
        deadline = ex->last_activity + cfg->idle_timeout_ms;
    if (now < deadline) {
        uv_timer_start(t, on_timer, deadline - now, 0);
        return;
    }
    abort_upstream(ex);
    cg_ex_on_end(ex, CG_UERR_TIMEOUT);
}

static void arm_timer(cg_exchange_t *ex)
{
    const cg_config_t *cfg = ex->w->cfg;
    uint64_t first = cfg->connect_timeout_ms < cfg->idle_timeout_ms ? cfg->connect_timeout_ms
                                                                   : cfg->idle_timeout_ms;
    uv_timer_start(&ex->timer, on_timer, first, 0);
}

/* Called by upstream.c once the connection is up and the request written. */
void cg_exchange_upstream_ready(cg_exchange_t *ex)
{
    ex->up_connected_hint = true;
    ex->t_upstream = cg_now_ms(ex->w);
    uv_timer_start(&ex->timer, on_timer, ex->w->cfg->first_byte_timeout_ms, 0);
}

/* --- ending ------------------------------------------------------------------------- */

static void on_timer_close(uv_handle_t *h)
{
    cg_exchange_t *ex = h->data;
    cg_request_free(&ex->req);
    cg_xform_free(ex->xf);
    cg_out_free(&ex->out);
    cg_buf_free(&ex->body);
    cg_buf_free(&ex->up_req);
    cg_hdrs_free(&ex->head);
    cg_hdrs_free(&ex->h2_hdrs);
    free(ex);
}

static void account(cg_exchange_t *ex)
{
    cg_worker_t *w = ex->w;
    cg_metrics_request(ex->route, ex->status);
    uint64_t ms = cg_now_ms(w) - ex->t_start;
    if (ex->state != EX_NEW)
        cg_hist_observe(&cg_metrics->upstream_duration, cg_seconds_buckets,
                        (double)(cg_now_ms(w) - ex->t_upstream) / 1000.0);
    if (ex->xf) {
        const cg_xform_stats_t *s = cg_xform_stats(ex->xf);
        cg_metrics->sse_in += s->events_in;
        cg_metrics->sse_out += s->events_out;
        cg_metrics->sse_malformed += s->malformed;
        cg_metrics->refs_linked += s->refs_linked;
        cg_metrics->refs_unlinked += s->refs_unlinked;
        cg_metrics->refs_out_of_range += s->refs_out_of_range;
        cg_metrics->citations_emitted[cg_profile_index(ex->profile)] += s->citations_emitted;
        /* Only an answer that finished is tracked (SPEC §8). */
        bool finished = s->saw_finish || s->saw_done || ex->mode == MODE_BODY;
        if (!ex->gone && !s->truncated && !s->passthrough && finished)
            cg_tracking_answer(w, ex->rid, ex->xf, &ex->req);
    }
    const char *method = llhttp_method_name((llhttp_method_t)ex->msg->method);
    cg_log_info(ex->rid, "%s %.*s -> %d in %llu ms, %zu upstream bytes", method,
                (int)(ex->msg->url.len > 200 ? 200 : ex->msg->url.len), ex->msg->url.p,
                ex->status, (unsigned long long)ms, ex->resp_bytes);
}

static void ex_finish(cg_exchange_t *ex)
{
    if (ex->state == EX_DONE)
        return;
    account(ex);
    ex->state = EX_DONE;
    cg_worker_t *w = ex->w;
    w->active--;
    cg_metrics->active_streams--;
    ex->down->done(ex);
    uv_timer_stop(&ex->timer);
    uv_close((uv_handle_t *)&ex->timer, on_timer_close);
    cg_worker_maybe_exit(w);
}

void cg_exchange_client_gone(cg_exchange_t *ex)
{
    if (ex->state == EX_DONE)
        return;
    abort_upstream(ex);
    if (ex->status == 0)
        ex->status = 499; /* the client closed before an answer (nginx's code) */
    ex->gone = true;
    ex_finish(ex);
}

void cg_exchange_shutdown(cg_exchange_t *ex)
{
    if (ex->state == EX_DONE)
        return;
    abort_upstream(ex);
    if (!ex->head_sent && ex->mode != MODE_BODY && ex->state != EX_STREAMING) {
        reject(ex, 503, "server_error", "draining", "citegate is shutting down");
        return;
    }
    if (ex->mode == MODE_STREAM) {
        cg_xform_finish(ex->xf, CG_END_SHUTDOWN, &ex->out);
        emit_out(ex, &ex->out);
        end_chunked(ex);
    } else if (!ex->gone) {
        ex->down->end(ex, false);
    }
    ex_finish(ex);
}
