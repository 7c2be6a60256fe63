/*
 * Citation tracking in the daemon (SPEC §8): per finished answer, the
 * analysis of track.c goes into the shared stats and metrics, one log line,
 * and, with semantic memory, one or two patterns handed to the worker's
 * store's writer thread. Nothing here waits: a full queue drops the pattern
 * (counted), and no failure reaches the answer, which has already gone out.
 *
 * The store is SQLite (SEMANTIC_MEMORY_DB_PATH), or PostgreSQL with
 * CITEGATE_TRACKING_DSN. With PostgreSQL the answers' counters go to the
 * database too (fleet stats), and the admin queries run on a reader thread:
 * the loop polls for their answers and gives a 503 to one that takes too long.
 *
 * With CITEGATE_EMBEDDINGS_MODEL (semantic recall, SPEC §8) a finished
 * answer's patterns wait for their question's vector from the embeddings
 * client (io/embed.h, through the table the worker hands over) and go to
 * the writer with it, or without it when the call fails or cannot be
 * queued; a recall waits for its query's vector up to
 * CG_TRACKING_EMBED_WAIT_MS, else ranks lexically.
 */
#include "tracking.h"

#include "citegate/track.h"
#include "io/log.h"
#include "io/metrics.h"
#include "memory.h"
#include "reader.h"
#include "store_pg.h"
#include "writer.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_CAP        4096 /* patterns waiting for the writer, per worker */
#define QUERY_QUEUE_CAP  32   /* admin queries waiting for the reader, per worker */
#define QUERY_POLL_MS    10   /* how often the loop looks for their answers */
#define WATCH_FIRST_MS   50   /* how often the loop looks at the writer until its first open */
#define WATCH_MS         1000 /* and from then on */
#define FD_TABLE_PREGROW 32768

/* A query out at the reader. Freed only when the reader hands it back. */
struct cg_track_query {
    cg_query_t job; /* first: the reader's list links these */
    cg_track_query_cb cb;
    void *arg;    /* cb == NULL once answered or cancelled */
    uint64_t due; /* loop time of the 503 */
    cg_ctx_t *ctx;
    struct cg_embed_call *call; /* while its query's vector is awaited */
    uint64_t embed_due;    /* loop time to stop waiting for it */
    cg_list_t link;        /* in the tracking's queries out */
};

typedef struct cg_tracking {
    const cg_store_ops_t *ops; /* &cg_memory_ops or &cg_pg_ops */
    const char *target;        /* the path or the DSN */
    char *shown;               /* the target as logs show it (no password) */
    const char *label, *var;   /* for logs: what it is and its setting */
    cg_writer_t *writer;       /* NULL: nothing is written */
    uint64_t bad;              /* writer drops and failures already counted */
    uint64_t dropped;          /* writer drops already counted */
    uint64_t outages;          /* writer outages already logged */
    bool down;                 /* an outage was logged, its end not yet */
    cg_memory_t *read;         /* SQLite: recall's connection, used on the loop */
    cg_reader_t *reader;       /* PostgreSQL: the admin queries' thread */
    uv_timer_t poll;           /* runs while queries are out */
    uv_timer_t watch;          /* runs while there is a writer: see on_watch */
    cg_list_t out;             /* cg_track_query_t: at the reader, or awaiting a vector */
    const cg_track_embedder_t *em; /* the embeddings client's calls */
    struct cg_embed *embed;        /* semantic recall's embeddings client, or NULL */
} cg_tracking_t;

/* Once a process has a second thread, every growth of its descriptor table
 * waits for an RCU grace period inside accept() (measured 11-16 ms by
 * bench/tracking.py under perf). Growing the table once, before the store's
 * threads exist, keeps those waits off the event loop. */
static void pregrow_fd_table(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 1024)
        return;
    long top = rl.rlim_cur > FD_TABLE_PREGROW ? FD_TABLE_PREGROW : (long)rl.rlim_cur;
    int fd = fcntl(STDERR_FILENO, F_DUPFD, (int)top - 1);
    if (fd >= 0)
        close(fd);
}

static void choose_store(cg_tracking_t *t, const cg_config_t *cfg)
{
    cg_buf_t shown = {0};
    if (cfg->tracking_dsn) {
        t->ops = &cg_pg_ops;
        t->target = cfg->tracking_dsn;
        t->label = "tracking store";
        t->var = "CITEGATE_TRACKING_DSN";
        cg_dsn_redact(cfg->tracking_dsn, &shown);
    } else {
        t->ops = &cg_memory_ops;
        t->target = cfg->memory_db_path;
        t->label = "semantic memory";
        t->var = "SEMANTIC_MEMORY_DB_PATH";
        cg_buf_puts(&shown, cfg->memory_db_path);
    }
    cg_buf_putc(&shown, '\0');
    t->shown = shown.p;
}

/* Moves the writer's failure and drop counts into the metrics (drops in
 * tracking_failures too, which counts every lost pattern) and logs each
 * outage of the store once, with its reason and the setting that names the
 * store (the DSN without its password), and its end. Repeated failures of
 * one outage (each reopen with backoff) are not logged again. */
static void poll_writer(cg_ctx_t *ctx)
{
    cg_tracking_t *t = ctx->tracking;
    uint64_t written, dropped, failed;
    cg_writer_counts(t->writer, &written, &dropped, &failed);
    uint64_t bad = dropped + failed, outages = cg_writer_outages(t->writer);
    cg_metrics->tracking_dropped += dropped - t->dropped;
    t->dropped = dropped;
    if (bad > t->bad) {
        cg_metrics->tracking_failures += bad - t->bad;
        if (t->bad == 0 && outages == 0)
            cg_log_warn(NULL, "%s: %llu patterns dropped (writer queue full)", t->label,
                        (unsigned long long)dropped);
        t->bad = bad;
    }
    char err[512] = "";
    if (outages > t->outages) {
        t->outages = outages;
        int st = cg_writer_status(t->writer, err, sizeof(err));
        if (st == CG_WRITER_OPEN) /* gone and back between two looks */
            cg_log_warn(NULL, "%s: unreachable for a moment (%s=%s), connected again", t->label,
                        t->var, t->shown);
        else
            cg_log_warn(NULL, "%s: %s (%s=%s)%s; answers are not affected", t->label, err, t->var,
                        t->shown, st == CG_WRITER_DOWN ? "; patterns wait, reconnecting" : "");
        t->down = st == CG_WRITER_DOWN;
    } else if (t->down && cg_writer_status(t->writer, NULL, 0) == CG_WRITER_OPEN) {
        cg_log_info(NULL, "%s: connected again", t->label);
        t->down = false;
    }
}

/* The writer never touches the loop, so the loop looks at it: every answer
 * does, and this timer too, so that a store unreachable at start-up is
 * reported as soon as the first open fails (not at the first answer, or
 * never if none comes), and an outage or its end without traffic as well.
 * Quick until the first open is done (at most its 3 s timeout), then once
 * a second; a look takes the writer's mutex once and reads its counters. */
static void on_watch(uv_timer_t *h)
{
    cg_ctx_t *ctx = h->data;
    poll_writer(ctx);
    if (uv_timer_get_repeat(h) != WATCH_MS &&
        cg_writer_status(ctx->tracking->writer, NULL, 0) != CG_WRITER_OPENING)
        uv_timer_set_repeat(h, WATCH_MS); /* from the next period on */
}

static void watch_writer(cg_ctx_t *ctx)
{
    uv_timer_t *h = &ctx->tracking->watch;
    uv_timer_init(ctx->loop, h);
    h->data = ctx;
    uv_unref((uv_handle_t *)h); /* it never keeps a draining worker alive */
    uv_timer_start(h, on_watch, WATCH_FIRST_MS, WATCH_FIRST_MS);
}

static void on_answer(void *arg, const cg_answer_t *a);

void cg_tracking_start(cg_ctx_t *ctx, const cg_track_embedder_t *embedder)
{
    const cg_config_t *cfg = ctx->cfg;
    cg_tracking_t *t = ctx->tracking = cg_xcalloc(1, sizeof(*t));
    cg_list_init(&t->out);
    choose_store(t, cfg);
    uv_timer_init(ctx->loop, &t->poll);
    t->poll.data = ctx;
    uv_unref((uv_handle_t *)&t->poll); /* it never keeps a draining worker alive */
    ctx->on_answer = on_answer;
    ctx->on_answer_arg = ctx;
    t->em = embedder;
    bool pg = cfg->tracking_dsn != NULL;
    /* With PostgreSQL the counters need the writer even without semantic memory. */
    bool writes = cfg->citation_tracking && (cfg->semantic_memory || pg);
    if (pg || writes)
        pregrow_fd_table();
    if (pg) {
        t->reader = cg_reader_start(t->ops, t->target, QUERY_QUEUE_CAP);
        if (ctx->index == 0)
            cg_log_info(NULL, "tracking store: PostgreSQL %s, shared by every replica", t->shown);
    }
    if (!writes)
        return;
    t->writer = cg_writer_start(t->ops, t->target, (int)cfg->prune_age_days, QUEUE_CAP);
    if (t->writer == NULL)
        cg_log_warn(NULL, "%s: cannot start the writer thread; patterns are not stored", t->label);
    else
        watch_writer(ctx);
    if (cfg->semantic_memory && embedder)
        t->embed = embedder->open(ctx);
    if (t->embed && ctx->index == 0)
        cg_log_info(NULL, "semantic recall: patterns and recalls are embedded with %s",
                    cfg->embeddings_model);
    /* SQLite's recall connection is opened here, before the loop runs, so the
     * endpoint never waits on an open (a failure is retried, and logged, at
     * the first request). */
    char err[512];
    if (!pg && cfg->semantic_memory)
        t->read = cg_memory_open(cfg->memory_db_path, err, sizeof(err));
    /* A new vector is compared with the stored ones' dimension (SQLite; with
     * PostgreSQL, with the first one this worker gets). */
    if (t->embed)
        embedder->expect_dim(t->embed, cg_memory_vector_dim(t->read));
}

void cg_tracking_drain(cg_ctx_t *ctx)
{
    cg_tracking_t *t = ctx->tracking;
    if (t && t->embed)
        t->em->drain(t->embed);
}

static cg_track_query_t *query_of(cg_list_t *l)
{
    return CG_CONTAINER_OF(l, cg_track_query_t, link);
}

/* Frees a query not linked in t->out. */
static void drop_query(cg_track_query_t *tq)
{
    cg_query_free(&tq->job);
    free(tq);
}

static void free_query(cg_track_query_t *tq)
{
    cg_list_unlink(&tq->link);
    drop_query(tq);
}

void cg_tracking_stop(cg_ctx_t *ctx)
{
    cg_tracking_t *t = ctx->tracking;
    if (t == NULL)
        return;
    /* Every client is gone by now: recalls awaiting a vector are dropped,
     * then the calls still out end, which hands their patterns to the
     * writer, and what the reader returns is only freed. */
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &t->out) {
        cg_track_query_t *tq = query_of(pos);
        if (tq->call) {
            t->em->cancel(tq->call);
            free_query(tq);
        }
    }
    if (t->embed)
        t->em->free(t->embed);
    for (cg_query_t *q = cg_reader_stop(t->reader), *after; q; q = after) {
        after = q->next;
        free_query((cg_track_query_t *)q);
    }
    cg_writer_stop(t->writer);
    cg_memory_close(t->read);
    free(t->shown);
    free(t);
    ctx->tracking = NULL;
}

/* ---- Answers -------------------------------------------------------------- */

static cg_pattern_t *pattern(cg_pattern_kind_t kind, const cg_track_t *t, const char *question)
{
    cg_pattern_t *p = cg_xcalloc(1, sizeof(*p));
    p->kind = kind;
    p->query = cg_xstrndup(question ? question : "", question ? strlen(question) : 0);
    p->citation_rate = t->rate;
    p->avg_score = t->avg_score;
    p->citations = t->cited;
    p->available = t->available;
    p->chunk_ids = cg_xstrndup(t->cited_ids.p, t->cited_ids.len);
    p->created_at = (int64_t)time(NULL);
    return p;
}

/* An answer's patterns (one or two, one question) awaiting its vector. */
typedef struct waiting {
    cg_writer_t *writer;
    cg_pattern_t *p[2];
} waiting_t;

static void submit(waiting_t *wt, const cg_vector_t *vec)
{
    for (int i = 0; i < 2; i++) {
        if (wt->p[i] == NULL)
            continue;
        if (vec)
            cg_vector_copy(&wt->p[i]->vec, vec);
        cg_writer_submit(wt->writer, wt->p[i]);
    }
}

/* The question's vector came back, or not (then recall finds these
 * patterns lexically). Failures were logged and counted by the client. */
static void on_pattern_vector(void *arg, cg_vector_t *vec, const char *why)
{
    (void)why;
    waiting_t *wt = arg;
    submit(wt, vec);
    free(wt);
}

/* Hands the patterns to the writer, through an embedding call when recall
 * is semantic: one call per answer, whatever the number of its patterns. */
static void store(cg_ctx_t *ctx, waiting_t *wt, const char *question, const cg_hdrs_t *keys)
{
    cg_tracking_t *t = ctx->tracking;
    size_t n = question ? cg_store_query_len(question, strlen(question)) : 0;
    if (t->embed && n > 0) {
        waiting_t *held = cg_xmalloc(sizeof(*held));
        *held = *wt;
        if (t->em->ask(t->embed, question, n, keys, false, on_pattern_vector, held))
            return;
        free(held); /* refused (counted): stored without a vector */
    }
    submit(wt, NULL);
}

/* Counts one answer in this process's stats and its model's metrics, and in
 * the fleet's stats with PostgreSQL. */
static void count(cg_ctx_t *ctx, const cg_track_t *t, cg_span_t model)
{
    cg_stats_t d = {0};
    if (t->skipped) {
        d.answers_skipped = 1;
    } else {
        d.answers = 1;
        d.references = t->references;
        d.citations_available = t->available;
        d.citations_cited = t->cited;
        cg_metrics_answer(model, t->cited, t->available);
    }
    cg_metrics->answers += d.answers;
    cg_metrics->answers_skipped += d.answers_skipped;
    cg_metrics->references += d.references;
    cg_metrics->citations_available += d.citations_available;
    cg_metrics->citations_cited += d.citations_cited;
    cg_tracking_t *tr = ctx->tracking;
    if (tr->writer && tr->ops->stats)
        cg_writer_add_stats(tr->writer, &d);
}

static void track(cg_ctx_t *ctx, const cg_answer_t *a)
{
    const cg_request_t *req = a->req;
    const char *rid = a->rid;
    cg_track_t t;
    cg_track_answer(a->xf, &t);
    if (!t.tracked)
        return;
    count(ctx, &t, a->model);
    if (t.skipped) {
        cg_track_free(&t);
        return;
    }
    if (t.available)
        cg_hist_observe(&cg_metrics->citation_rate, cg_rate_buckets, t.rate);
    cg_log_info(rid, "citation usage: %u/%u references cited", t.cited, t.available);
    cg_log_debug(rid, "citation usage detail: cited %.*s, per citation %.*s", (int)t.cited_ids.len,
                 t.cited_ids.p, (int)t.detail.len, t.detail.p);
    cg_writer_t *writer = ctx->tracking->writer;
    if (writer && ctx->cfg->semantic_memory && t.available) {
        waiting_t wt = {writer, {NULL, NULL}};
        if (t.rate > 0)
            wt.p[0] = pattern(CG_PATTERN_PROCEDURAL, &t, req->question);
        if ((t.available - t.cited) * 2 >= t.available)
            wt.p[1] = pattern(CG_PATTERN_EPISODIC, &t, req->question);
        store(ctx, &wt, req->question, a->keys);
    }
    if (writer)
        poll_writer(ctx);
    cg_track_free(&t);
}

/* A finished answer of the worker (ctx->on_answer). */
static void on_answer(void *arg, const cg_answer_t *a)
{
    cg_ctx_t *ctx = arg;
    if (ctx->cfg->citation_tracking)
        track(ctx, a);
}

/* ---- Admin queries -------------------------------------------------------- */

static void unavailable(cg_ctx_t *ctx, const char *why)
{
    cg_tracking_t *t = ctx->tracking;
    cg_log_warn(NULL, "%s: %s", t->label, why);
    cg_metrics->tracking_failures++;
}

/* Answers tq from the reader's result, or with a 503 when why is set. */
static void answer(cg_ctx_t *ctx, cg_track_query_t *tq, const char *why)
{
    cg_track_query_cb cb = tq->cb;
    cg_query_t *q = &tq->job;
    cg_buf_t body = {0};
    int status = 200;
    tq->cb = NULL;
    if (why == NULL && q->rc != CG_STORE_OK)
        why = q->err;
    if (why != NULL) {
        unavailable(ctx, why);
        status = 503;
    } else if (q->stats) {
        cg_stats_json(&body, &q->totals, ctx->tracking->ops->scope);
    } else {
        body = q->json;
        memset(&q->json, 0, sizeof(q->json));
    }
    cb(tq->arg, status, &body);
}

static void stop_waiting(cg_ctx_t *ctx, cg_track_query_t *tq);

/* While queries are out: answers what the reader finished, and a 503 to
 * what is overdue (the reader may still be waiting for the database); a
 * recall whose vector is late goes on without it. */
static void on_poll(uv_timer_t *h)
{
    cg_ctx_t *ctx = h->data;
    cg_tracking_t *t = ctx->tracking;
    cg_query_t *done = t->reader ? cg_reader_finished(t->reader) : NULL;
    for (cg_query_t *q = done, *after; q; q = after) {
        after = q->next;
        cg_track_query_t *tq = (cg_track_query_t *)q;
        if (tq->cb)
            answer(ctx, tq, NULL);
        free_query(tq);
    }
    uint64_t now = cg_now_ms(ctx);
    cg_list_t *pos, *next;
    cg_list_each(pos, next, &t->out) {
        cg_track_query_t *tq = query_of(pos);
        if (tq->call && now >= tq->embed_due)
            stop_waiting(ctx, tq);
        else if (!tq->call && tq->cb && now >= tq->due)
            answer(ctx, tq, "no answer from the database in time");
    }
    if (cg_list_empty(&t->out))
        uv_timer_stop(h);
}

static void link_query(cg_ctx_t *ctx, cg_track_query_t *tq)
{
    cg_tracking_t *t = ctx->tracking;
    cg_list_insert(t->out.next, &tq->link);
    if (!uv_is_active((uv_handle_t *)&t->poll))
        uv_timer_start(&t->poll, on_poll, QUERY_POLL_MS, QUERY_POLL_MS);
}

static cg_track_query_t *new_query(cg_ctx_t *ctx, bool stats, const char *q, int k,
                                   cg_track_query_cb cb, void *arg)
{
    cg_track_query_t *tq = cg_xcalloc(1, sizeof(*tq));
    tq->ctx = ctx;
    tq->job.stats = stats;
    tq->job.q = q ? cg_xstrndup(q, strlen(q)) : NULL;
    tq->job.k = k;
    tq->cb = cb;
    tq->arg = arg;
    tq->due = cg_now_ms(ctx) + CG_TRACKING_QUERY_ANSWER_MS;
    return tq;
}

/* Hands tq (not linked) to the reader; false, tq freed and *status 503,
 * when it cannot take it. */
static bool ask(cg_ctx_t *ctx, cg_track_query_t *tq, int *status)
{
    cg_tracking_t *t = ctx->tracking;
    tq->job.deadline_ms = cg_store_now_ms() + CG_TRACKING_QUERY_STORE_MS;
    if (t->reader == NULL || !cg_reader_submit(t->reader, &tq->job)) {
        drop_query(tq);
        unavailable(ctx, "too many queries waiting for the database");
        *status = 503;
        return false;
    }
    link_query(ctx, tq);
    return true;
}

void cg_tracking_cancel(cg_track_query_t *tq)
{
    tq->cb = NULL; /* freed when the reader, or the embeddings client, hands it back */
}

cg_track_query_t *cg_tracking_stats(cg_ctx_t *ctx, int *status, cg_buf_t *body,
                                    cg_track_query_cb cb, void *arg)
{
    if (ctx->tracking->ops->stats) {
        cg_track_query_t *tq = new_query(ctx, true, NULL, 0, cb, arg);
        return ask(ctx, tq, status) ? tq : NULL;
    }
    *status = 200;
    cg_metrics_render_stats(body);
    return NULL;
}

/* SQLite's recall, on the loop: one indexed read (WAL readers never wait for
 * the writer threads), bounded by k and the candidates. This worker's queued
 * patterns are written first, so an answer that just finished can be
 * recalled at once; the queue is bounded, and this is an operator's request,
 * not a stream. */
static void recall_here(cg_ctx_t *ctx, const cg_recall_t *r, int *status, cg_buf_t *body)
{
    cg_tracking_t *t = ctx->tracking;
    char err[512] = "";
    if (t->writer)
        cg_writer_flush(t->writer);
    if (t->read == NULL)
        t->read = cg_memory_open(t->target, err, sizeof(err));
    *status = 200;
    if (t->read == NULL || cg_memory_recall(t->read, r, body) != 0) {
        unavailable(ctx, t->read ? cg_memory_errmsg(t->read) : err);
        *status = 503;
    }
}

/* A recall's vector is in (or will not come): the store ranks with it, or
 * lexically. tq is unlinked and owned here. */
static void recall_with(cg_ctx_t *ctx, cg_track_query_t *tq)
{
    cg_tracking_t *t = ctx->tracking;
    if (tq->cb == NULL) { /* the admin client went away meanwhile */
        drop_query(tq);
        return;
    }
    if (t->reader) {
        cg_track_query_cb cb = tq->cb;
        void *arg = tq->arg;
        int status;
        cg_buf_t none = {0};
        if (!ask(ctx, tq, &status)) /* tq was freed */
            cb(arg, status, &none);
        return;
    }
    cg_recall_t r = {tq->job.q, tq->job.k, tq->job.vec.v ? &tq->job.vec : NULL};
    cg_buf_t body = {0};
    int status;
    recall_here(ctx, &r, &status, &body);
    tq->cb(tq->arg, status, &body);
    drop_query(tq);
}

static void on_query_vector(void *arg, cg_vector_t *vec, const char *why)
{
    (void)why;
    cg_track_query_t *tq = arg;
    cg_ctx_t *ctx = tq->ctx;
    if (vec) {
        tq->job.vec = *vec;
        memset(vec, 0, sizeof(*vec));
    }
    tq->call = NULL;
    cg_list_unlink(&tq->link);
    recall_with(ctx, tq);
}

/* The vector is late: the recall goes on lexically, and the call is left
 * to finish on its own (counted then). */
static void stop_waiting(cg_ctx_t *ctx, cg_track_query_t *tq)
{
    ctx->tracking->em->cancel(tq->call);
    tq->call = NULL;
    cg_list_unlink(&tq->link);
    recall_with(ctx, tq);
}

cg_track_query_t *cg_tracking_patterns(cg_ctx_t *ctx, const char *q, int k, const cg_hdrs_t *keys,
                                       int *status, cg_buf_t *body, cg_track_query_cb cb, void *arg)
{
    cg_tracking_t *t = ctx->tracking;
    *status = 200;
    if (!ctx->cfg->citation_tracking || !ctx->cfg->semantic_memory) {
        cg_buf_puts(body, "{\"patterns\":[],\"ranking\":\"lexical\"}");
        return NULL;
    }
    size_t n = cg_store_query_len(q, strlen(q));
    cg_track_query_t *tq = NULL;
    if (t->embed && n > 0) {
        tq = new_query(ctx, false, q, k, cb, arg);
        tq->call = t->em->ask(t->embed, q, n, keys, true, on_query_vector, tq);
        if (tq->call) {
            tq->embed_due = cg_now_ms(ctx) + CG_TRACKING_EMBED_WAIT_MS;
            link_query(ctx, tq);
            return tq;
        }
    }
    if (t->reader) {
        if (tq == NULL)
            tq = new_query(ctx, false, q, k, cb, arg);
        return ask(ctx, tq, status) ? tq : NULL;
    }
    if (tq) /* its call was refused (counted): lexical, now */
        drop_query(tq);
    cg_recall_t r = {q, k, NULL};
    recall_here(ctx, &r, status, body);
    return NULL;
}
