/* Prometheus metrics over per-worker shared slots: see metrics.h. */
#include "metrics.h"

#include "citegate/xform.h"
#include "tracking/store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static cg_metrics_slot_t *slots;
static unsigned nslots;
static cg_metrics_slot_t fallback; /* before init (tests, filter) */
cg_metrics_slot_t *cg_metrics = &fallback;

const double cg_seconds_buckets[CG_HIST_N] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,   1,    2.5,   5,    10,  30};
const double cg_rate_buckets[CG_HIST_N] = {0.05, 0.1, 0.2, 0.3, 0.4,  0.5,
                                           0.6,  0.7, 0.8, 0.9, 0.95, 1};
const double cg_lag_buckets[CG_HIST_N] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                          0.05,   0.1,   0.2,   0.5,   1,    5};

int cg_metrics_init(unsigned workers)
{
    size_t len = sizeof(cg_metrics_slot_t) * workers;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    slots = p;
    nslots = workers;
    cg_metrics = &slots[0];
    return 0;
}

/* A worker that takes its slot has nothing open yet. One restarted after a
 * crash finds the gauges of the streams and connections that died with its
 * predecessor: they are cleared (the counters go on). */
static void clear_gauges(cg_metrics_slot_t *s)
{
    s->active_streams = 0;
    memset(s->upstream_connections, 0, sizeof(s->upstream_connections));
    s->upstream_queue_length = 0;
    s->client_connections = 0;
    s->streams_paused = 0;
}

cg_metrics_slot_t *cg_metrics_select(unsigned worker)
{
    if (slots && worker < nslots) {
        cg_metrics = &slots[worker];
        clear_gauges(cg_metrics);
    }
    return cg_metrics;
}

void cg_metrics_request(int route, int status)
{
    if (status >= 100 && status < 600)
        cg_metrics->requests[route][status]++;
}

/* Bytes a model label may hold: none that the text format escapes. */
static bool model_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '@';
}

static bool model_admissible(cg_span_t m)
{
    if (m.p == NULL || m.n == 0 || m.n > CG_MODEL_NAME_MAX || cg_span_eq(m, "other"))
        return false;
    for (size_t i = 0; i < m.n; i++)
        if (!model_byte((unsigned char)m.p[i]))
            return false;
    return true;
}

/* The entry of s's table for m: found, added while there is room, or
 * CG_MODEL_LABELS ("other"). Only s's worker calls this. */
static unsigned model_index(cg_metrics_slot_t *s, cg_span_t m)
{
    if (!model_admissible(m))
        return CG_MODEL_LABELS;
    unsigned n = s->nmodels;
    for (unsigned i = 0; i < n; i++)
        if (strlen(s->model_names[i]) == m.n && memcmp(s->model_names[i], m.p, m.n) == 0)
            return i;
    if (n == CG_MODEL_LABELS)
        return CG_MODEL_LABELS;
    memcpy(s->model_names[n], m.p, m.n);
    s->model_names[n][m.n] = '\0';
    __atomic_store_n(&s->nmodels, n + 1, __ATOMIC_RELEASE);
    return n;
}

void cg_metrics_answer(cg_span_t model, unsigned cited, unsigned available)
{
    cg_model_counts_t *c = &cg_metrics->models[model_index(cg_metrics, model)];
    c->answers++;
    c->cited += cited;
    c->available += available;
}

void cg_hist_observe(cg_hist_t *h, const double *bounds, double v)
{
    for (int i = 0; i < CG_HIST_N; i++) {
        if (v <= bounds[i]) {
            h->bucket[i]++;
            break;
        }
    }
    h->count++;
    h->sum += v;
}

/* Sums field at byte offset `off` (uint64) over all slots. */
static uint64_t sum_u64(size_t off)
{
    const cg_metrics_slot_t *s = slots ? slots : &fallback;
    unsigned n = slots ? nslots : 1;
    uint64_t t = 0;
    for (unsigned i = 0; i < n; i++)
        t += *(const uint64_t *)((const char *)&s[i] + off);
    return t;
}

#define SUM(field) sum_u64(offsetof(cg_metrics_slot_t, field))

static void header(cg_buf_t *b, const char *name, const char *type, const char *help)
{
    cg_buf_printf(b, "# HELP citegate_%s %s\n# TYPE citegate_%s %s\n", name, help, name, type);
}

static void hist(cg_buf_t *b, const char *name, const char *help, size_t off, const double *bounds)
{
    header(b, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < CG_HIST_N; i++) {
        cum += sum_u64(off + offsetof(cg_hist_t, bucket) + (size_t)i * sizeof(uint64_t));
        cg_buf_printf(b, "citegate_%s_bucket{le=\"%g\"} %llu\n", name, bounds[i],
                      (unsigned long long)cum);
    }
    uint64_t count = sum_u64(off + offsetof(cg_hist_t, count));
    double sum = 0;
    const cg_metrics_slot_t *s = slots ? slots : &fallback;
    for (unsigned i = 0; i < (slots ? nslots : 1); i++)
        sum += ((const cg_hist_t *)((const char *)&s[i] + off))->sum;
    cg_buf_printf(b, "citegate_%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)count);
    cg_buf_printf(b, "citegate_%s_sum %.6f\ncitegate_%s_count %llu\n", name, sum, name,
                  (unsigned long long)count);
}

static const char *const route_names[CG_NROUTES] = {
    "/v1/chat/completions", "/openai/deployments/{deployment}/chat/completions",
    "/openai/v1/chat/completions", "other", "admin"};

static void labelled(cg_buf_t *b, const char *name, const char *label, const char *const *values,
                     size_t off, int n)
{
    for (int i = 0; i < n; i++)
        cg_buf_printf(b, "citegate_%s{%s=\"%s\"} %llu\n", name, label, values[i],
                      (unsigned long long)sum_u64(off + (size_t)i * sizeof(uint64_t)));
}

/* Admission control, hostile input and pass-through (SPEC §9, §10). */
static void render_overload(cg_buf_t *b)
{
    static const char *const queue[] = {"full", "timeout"};
    static const char *const pass[] = {"encoded", "body_too_large"};
    static const char *const goaway[] = {"shutdown", "enhance_your_calm", "protocol_error"};
    header(b, "upstream_queue_length", "gauge",
           "Requests waiting for an upstream connection or stream.");
    cg_buf_printf(b, "citegate_upstream_queue_length %lld\n",
                  (long long)SUM(upstream_queue_length));
    header(b, "upstream_queue_rejections_total", "counter", "Requests answered 503 upstream_busy.");
    labelled(b, "upstream_queue_rejections_total", "reason", queue,
             offsetof(cg_metrics_slot_t, queue_rejections), CG_NQUEUE_REASONS);
    header(b, "client_connections", "gauge", "Open client connections.");
    cg_buf_printf(b, "citegate_client_connections %lld\n", (long long)SUM(client_connections));
    header(b, "sse_oversized_total", "counter",
           "Upstream SSE events over CITEGATE_MAX_EVENT_BYTES, forwarded unchanged.");
    cg_buf_printf(b, "citegate_sse_oversized_total %llu\n", (unsigned long long)SUM(sse_oversized));
    header(b, "passthrough_total", "counter",
           "Answers on transformed routes forwarded unchanged, by reason.");
    labelled(b, "passthrough_total", "reason", pass, offsetof(cg_metrics_slot_t, passthrough),
             CG_NPASS_REASONS);
    header(b, "http2_goaway_sent_total", "counter",
           "GOAWAY frames sent to HTTP/2 clients, by reason.");
    labelled(b, "http2_goaway_sent_total", "reason", goaway,
             offsetof(cg_metrics_slot_t, goaway_sent), CG_NGOAWAY_REASONS);
}

/* One model's counts over the workers that label it. */
typedef struct model_sum {
    const char *name;
    cg_model_counts_t c;
} model_sum_t;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const model_sum_t *)a)->name, ((const model_sum_t *)b)->name);
}

static void add_counts(cg_model_counts_t *to, const cg_model_counts_t *c)
{
    to->answers += c->answers;
    to->cited += c->cited;
    to->available += c->available;
}

/* Every worker's labelled names with their counts, merged by name and
 * sorted, into all (room for every entry of every slot); *other gets the
 * "other" counts. Returns the number of names. */
static size_t merge_models(model_sum_t *all, cg_model_counts_t *other)
{
    const cg_metrics_slot_t *s = slots ? slots : &fallback;
    unsigned nw = slots ? nslots : 1;
    size_t n = 0;
    for (unsigned w = 0; w < nw; w++) {
        uint32_t names = __atomic_load_n(&s[w].nmodels, __ATOMIC_ACQUIRE);
        for (uint32_t i = 0; i < names && i < CG_MODEL_LABELS; i++)
            all[n++] = (model_sum_t){s[w].model_names[i], s[w].models[i]};
        add_counts(other, &s[w].models[CG_MODEL_LABELS]);
    }
    qsort(all, n, sizeof(*all), by_name);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && strcmp(all[m - 1].name, all[i].name) == 0)
            add_counts(&all[m - 1].c, &all[i].c);
        else
            all[m++] = all[i];
    }
    return m;
}

static void model_family(cg_buf_t *b, const char *name, const char *help, const model_sum_t *all,
                         size_t n, const cg_model_counts_t *other, size_t field)
{
    header(b, name, "counter", help);
    for (size_t i = 0; i <= n; i++) {
        const cg_model_counts_t *c = i < n ? &all[i].c : other;
        uint64_t v = *(const uint64_t *)((const char *)c + field);
        cg_buf_printf(b, "citegate_%s{model=\"%s\"} %llu\n", name, i < n ? all[i].name : "other",
                      (unsigned long long)v);
    }
}

/* Citation use by model (see CG_MODEL_LABELS): rate = cited / available,
 * density = cited per answer. */
static void render_models(cg_buf_t *b)
{
    unsigned nw = slots ? nslots : 1;
    model_sum_t *all = cg_xmalloc(sizeof(*all) * nw * CG_MODEL_LABELS);
    cg_model_counts_t other = {0};
    size_t n = merge_models(all, &other);
    model_family(b, "answers_total",
                 "Answers tracked for citations (skipped ones are not), by the model asked for.",
                 all, n, &other, offsetof(cg_model_counts_t, answers));
    model_family(b, "answer_citations_total",
                 "Citations the tracked answers cited (unique per answer), by model.", all, n,
                 &other, offsetof(cg_model_counts_t, cited));
    model_family(b, "answer_sources_total",
                 "Citations available to the tracked answers, by model.", all, n, &other,
                 offsetof(cg_model_counts_t, available));
    free(all);
}

/* Clients that fell behind their stream (SPEC §9 backpressure). */
static void render_backpressure(cg_buf_t *b)
{
    header(b, "client_stalls_total", "counter",
           "Times a stream stopped reading its upstream because its client fell behind.");
    cg_buf_printf(b, "citegate_client_stalls_total %llu\n", (unsigned long long)SUM(client_stalls));
    header(b, "streams_paused", "gauge", "Streams waiting for their client to read now.");
    cg_buf_printf(b, "citegate_streams_paused %lld\n", (long long)SUM(streams_paused));
}

/* Citation aliases (SPEC §7, structured). */
static void render_aliases(cg_buf_t *b)
{
    header(b, "alias_bytes_saved_total", "counter",
           "Request bytes saved by sending tool outputs' paths and boxes as aliases.");
    cg_buf_printf(b, "citegate_alias_bytes_saved_total %llu\n",
                  (unsigned long long)SUM(alias_bytes_saved));
}

/* One series per kind label; errors that share a label add up. */
static void render_upstream_errors(cg_buf_t *b)
{
    for (int e = 0; e < CG_E_COUNT; e++) {
        const char *label = cg_err_label((cg_err_t)e);
        bool first = label != NULL;
        for (int k = 0; first && k < e; k++)
            first =
                cg_err_label((cg_err_t)k) == NULL || strcmp(cg_err_label((cg_err_t)k), label) != 0;
        if (!first)
            continue;
        uint64_t sum = 0;
        for (int k = e; k < CG_E_COUNT; k++)
            if (cg_err_label((cg_err_t)k) && strcmp(cg_err_label((cg_err_t)k), label) == 0)
                sum += SUM(upstream_errors[k]);
        cg_buf_printf(b, "citegate_upstream_errors_total{kind=\"%s\"} %llu\n", label,
                      (unsigned long long)sum);
    }
}

void cg_metrics_render(cg_buf_t *b)
{
    header(b, "requests_total", "counter", "Client requests by route and response status.");
    for (int r = 0; r < CG_NROUTES; r++)
        for (int st = 100; st < 600; st++) {
            uint64_t v = sum_u64(offsetof(cg_metrics_slot_t, requests) +
                                 ((size_t)r * 600 + (size_t)st) * sizeof(uint64_t));
            if (v)
                cg_buf_printf(b, "citegate_requests_total{path=\"%s\",status=\"%d\"} %llu\n",
                              route_names[r], st, (unsigned long long)v);
        }
    header(b, "active_streams", "gauge", "Client requests being proxied now.");
    cg_buf_printf(b, "citegate_active_streams %lld\n", (long long)SUM(active_streams));
    header(b, "upstream_connections", "gauge", "Open upstream connections by protocol.");
    cg_buf_printf(b, "citegate_upstream_connections{protocol=\"http1.1\"} %lld\n",
                  (long long)SUM(upstream_connections[CG_PROTO_LABEL_HTTP1]));
    cg_buf_printf(b, "citegate_upstream_connections{protocol=\"h2\"} %lld\n",
                  (long long)SUM(upstream_connections[CG_PROTO_LABEL_H2]));
    hist(b, "upstream_request_duration_seconds",
         "Upstream request duration, first byte sent to last byte received.",
         offsetof(cg_metrics_slot_t, upstream_duration), cg_seconds_buckets);
    hist(b, "time_to_first_byte_seconds", "Client request to first response byte.",
         offsetof(cg_metrics_slot_t, ttfb), cg_seconds_buckets);
    header(b, "sse_events_total", "counter", "SSE events by direction.");
    cg_buf_printf(b, "citegate_sse_events_total{direction=\"in\"} %llu\n",
                  (unsigned long long)SUM(sse_in));
    cg_buf_printf(b, "citegate_sse_events_total{direction=\"out\"} %llu\n",
                  (unsigned long long)SUM(sse_out));
    header(b, "sse_malformed_total", "counter",
           "Upstream SSE events whose data is not a JSON object.");
    cg_buf_printf(b, "citegate_sse_malformed_total %llu\n", (unsigned long long)SUM(sse_malformed));
    header(b, "citation_refs_total", "counter", "References found in answers, by result.");
    cg_buf_printf(b, "citegate_citation_refs_total{result=\"linked\"} %llu\n",
                  (unsigned long long)SUM(refs_linked));
    cg_buf_printf(b, "citegate_citation_refs_total{result=\"unlinked\"} %llu\n",
                  (unsigned long long)SUM(refs_unlinked));
    cg_buf_printf(b, "citegate_citation_refs_total{result=\"out_of_range\"} %llu\n",
                  (unsigned long long)SUM(refs_out_of_range));
    header(b, "citations_emitted_total", "counter", "Citations emitted to clients, by profile.");
    for (size_t p = 0; p < cg_profile_count(); p++) {
        if (!cg_profile_at(p)->transforms)
            continue;
        const char *name = cg_profile_at(p)->name;
        cg_buf_printf(b, "citegate_citations_emitted_total{profile=\"%s\"} %llu\n", name,
                      (unsigned long long)SUM(citations_emitted[p]));
    }
    hist(b, "event_loop_lag_seconds",
         "How late a worker's 10 ms loop tick fired: time the loop spent blocked.",
         offsetof(cg_metrics_slot_t, loop_lag), cg_lag_buckets);
    hist(b, "citation_rate", "Per answer: cited citations / available citations.",
         offsetof(cg_metrics_slot_t, citation_rate), cg_rate_buckets);
    header(b, "tracking_failures_total", "counter",
           "Citation tracking failures (answers unaffected).");
    cg_buf_printf(b, "citegate_tracking_failures_total %llu\n",
                  (unsigned long long)SUM(tracking_failures));
    header(b, "tracking_writes_dropped_total", "counter",
           "Tracking patterns dropped unwritten: the writer's queue was full.");
    cg_buf_printf(b, "citegate_tracking_writes_dropped_total %llu\n",
                  (unsigned long long)SUM(tracking_dropped));
    header(b, "embedding_requests_total", "counter", "Embedding calls started (semantic recall).");
    cg_buf_printf(b, "citegate_embedding_requests_total %llu\n",
                  (unsigned long long)SUM(embedding_requests));
    header(b, "embedding_failures_total", "counter",
           "Embedding calls that failed or were dropped: lexical recall for them.");
    cg_buf_printf(b, "citegate_embedding_failures_total %llu\n",
                  (unsigned long long)SUM(embedding_failures));
    header(b, "upstream_errors_total", "counter", "Upstream failures by kind.");
    render_upstream_errors(b);
    header(b, "client_disconnects_total", "counter",
           "Clients that went away before their response ended.");
    cg_buf_printf(b, "citegate_client_disconnects_total %llu\n",
                  (unsigned long long)SUM(client_disconnects));
    render_overload(b);
    render_backpressure(b);
    render_aliases(b);
    render_models(b);
}

void cg_metrics_render_stats(cg_buf_t *b)
{
    cg_stats_t s = {.answers = SUM(answers),
                    .answers_skipped = SUM(answers_skipped),
                    .references = SUM(references),
                    .citations_available = SUM(citations_available),
                    .citations_cited = SUM(citations_cited)};
    cg_stats_json(b, &s, "process");
}
