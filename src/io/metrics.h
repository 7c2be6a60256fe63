/*
 * Prometheus metrics (SPEC §10). Each worker owns one slot of a shared
 * anonymous mapping made before the workers fork, so any worker's admin
 * listener can render totals over all workers. A slot is written only by
 * its worker; readers may see a value one update old, never a torn one
 * (aligned 64-bit stores).
 */
#ifndef CITEGATE_METRICS_H
#define CITEGATE_METRICS_H

#include "citegate/common.h"
#include "citegate/profile.h"
#include "err.h"
#include "route.h"

enum { CG_PROTO_LABEL_HTTP1, CG_PROTO_LABEL_H2, CG_NPROTO_LABELS };
/* upstream_queue_rejections_total{reason} */
enum { CG_QUEUE_FULL, CG_QUEUE_TIMEOUT, CG_NQUEUE_REASONS };
/* passthrough_total{reason}: answers forwarded without transforming */
enum { CG_PASS_ENCODED, CG_PASS_BODY_TOO_LARGE, CG_NPASS_REASONS };
/* http2_goaway_sent_total{reason} */
enum { CG_GOAWAY_SHUTDOWN, CG_GOAWAY_CALM, CG_GOAWAY_PROTOCOL, CG_NGOAWAY_REASONS };

#define CG_HIST_N 12

/*
 * Answers by model: the model the client asked for (its Azure deployment on
 * a deployment route) is a label. A worker labels the first CG_MODEL_LABELS
 * distinct names it meets that are 1 to CG_MODEL_NAME_MAX bytes of
 * A-Z a-z 0-9 . _ - : / @ (nothing to escape in the exposition); every other
 * answer, with no model, a longer or stranger one, the name "other" itself,
 * or a name past the table, counts under model="other". The exposition
 * merges the workers' tables by name: at most workers x CG_MODEL_LABELS + 1
 * series per family.
 */
#define CG_MODEL_LABELS   16
#define CG_MODEL_NAME_MAX 64

typedef struct cg_model_counts {
    uint64_t answers, cited, available;
} cg_model_counts_t;

typedef struct cg_hist {
    uint64_t bucket[CG_HIST_N]; /* cumulative at render time, per-bucket here */
    uint64_t count;
    double sum;
} cg_hist_t;

typedef struct cg_metrics_slot {
    uint64_t requests[CG_NROUTES][600]; /* by status code */
    int64_t active_streams;
    int64_t upstream_connections[CG_NPROTO_LABELS];
    cg_hist_t upstream_duration, ttfb, citation_rate;
    cg_hist_t loop_lag; /* how late the loop's 10 ms tick fired */
    uint64_t sse_in, sse_out, sse_malformed;
    uint64_t refs_linked, refs_unlinked, refs_out_of_range;
    uint64_t citations_emitted[CG_PROFILE_MAX]; /* by cg_profile_index */
    uint64_t tracking_failures;
    uint64_t upstream_errors[CG_E_COUNT]; /* by cg_err_t; rendered by its label */
    uint64_t client_disconnects;
    int64_t upstream_queue_length;
    uint64_t queue_rejections[CG_NQUEUE_REASONS];
    int64_t client_connections;
    uint64_t sse_oversized;
    uint64_t passthrough[CG_NPASS_REASONS];
    uint64_t goaway_sent[CG_NGOAWAY_REASONS];
    /* /v1/citations/stats */
    uint64_t answers, answers_skipped, references, citations_available, citations_cited;
    /* Semantic recall (SPEC §8): embedding calls started, and those that
     * failed or were dropped (their pattern is stored without a vector). */
    uint64_t embedding_requests, embedding_failures;
    /* Backpressure (SPEC §9): times an exchange stopped reading its upstream
     * because its client fell behind, and exchanges paused so now. */
    uint64_t client_stalls;
    int64_t streams_paused;
    /* Citation aliases (SPEC §7): bytes the requests sent upstream lost. */
    uint64_t alias_bytes_saved;
    /* Patterns the tracking writer dropped (its queue full); also in
     * tracking_failures, which counts every loss. */
    uint64_t tracking_dropped;
    /* The names labelled so far: an entry is written whole, then published
     * by a release store of nmodels, and never changes again, so a reader
     * (any worker's exposition) that loads nmodels with acquire sees whole
     * names. models[CG_MODEL_LABELS] is "other". */
    uint32_t nmodels;
    char model_names[CG_MODEL_LABELS][CG_MODEL_NAME_MAX + 1];
    cg_model_counts_t models[CG_MODEL_LABELS + 1];
} cg_metrics_slot_t;

/* Maps room for `workers` slots; call once before forking. */
int cg_metrics_init(unsigned workers);
/* The calling worker's slot; its gauges start at 0 (a worker restarted
 * after a crash does not inherit its predecessor's open streams). */
cg_metrics_slot_t *cg_metrics_select(unsigned worker);
extern cg_metrics_slot_t *cg_metrics;

void cg_metrics_request(int route, int status);
/* One tracked answer of `model` (see CG_MODEL_LABELS; {NULL, 0}: none):
 * the citations it cited of those available. */
void cg_metrics_answer(cg_span_t model, unsigned cited, unsigned available);
void cg_hist_observe(cg_hist_t *h, const double *bounds, double v);
extern const double cg_seconds_buckets[CG_HIST_N];
extern const double cg_rate_buckets[CG_HIST_N];
extern const double cg_lag_buckets[CG_HIST_N];

/* Renders the Prometheus text exposition of all workers' totals. */
void cg_metrics_render(cg_buf_t *b);
/* Renders /v1/citations/stats of this process (summed over its workers). */
void cg_metrics_render_stats(cg_buf_t *b);

#endif
