/*
 * Citation tracking in the daemon (SPEC §8): per finished answer, the
 * analysis of track.c goes into the shared stats and metrics, one log line,
 * and, with semantic memory, one or two patterns handed to the worker's
 * store's writer thread. Nothing here waits: a full queue drops the pattern
 * (counted), and no failure reaches the answer, which has already gone out.
 */
#include "tracking.h"

#include "citegate/json.h"
#include "citegate/track.h"
#include "io/log.h"
#include "io/metrics.h"
#include "memory.h"
#include "writer.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_CAP        4096 /* patterns waiting for the writer, per worker */
#define FD_TABLE_PREGROW 32768

/* Once a process has a second thread, every growth of its descriptor table
 * waits for an RCU grace period inside accept() (measured 11-16 ms by
 * bench/tracking.py under perf). Growing the table once, before the writer
 * thread exists, keeps those waits off the event loop. */
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

void cg_tracking_start(cg_worker_t *w)
{
    const cg_config_t *cfg = w->cfg;
    if (!cfg->citation_tracking || !cfg->semantic_memory)
        return;
    pregrow_fd_table();
    w->memory =
        cg_writer_start(&cg_memory_ops, cfg->memory_db_path, (int)cfg->prune_age_days, QUEUE_CAP);
    if (w->memory == NULL)
        cg_log_warn(NULL,
                    "semantic memory: cannot start the writer thread; patterns are not stored");
    /* The reader for /v1/citations/patterns is opened here, before the loop
     * runs, so the endpoint never waits on an open (a failure is retried,
     * and logged, at the first request). */
    char err[512];
    w->memory_read = cg_memory_open(cfg->memory_db_path, err, sizeof(err));
}

void cg_tracking_stop(cg_worker_t *w)
{
    cg_writer_stop(w->memory);
    w->memory = NULL;
}

/* Moves the writer's failure and drop counts into the metrics; the first
 * failure is logged with its reason. */
static void poll_writer(cg_worker_t *w)
{
    uint64_t written, dropped, failed;
    cg_writer_counts(w->memory, &written, &dropped, &failed);
    uint64_t bad = dropped + failed;
    if (bad <= w->memory_bad)
        return;
    cg_metrics->tracking_failures += bad - w->memory_bad;
    if (w->memory_bad == 0) {
        char err[512] = "";
        if (cg_writer_status(w->memory, err, sizeof(err)) == CG_WRITER_FAILED)
            cg_log_warn(
                NULL, "semantic memory: %s (SEMANTIC_MEMORY_DB_PATH=%s); answers are not affected",
                err, w->cfg->memory_db_path);
        else
            cg_log_warn(NULL, "semantic memory: %llu patterns dropped (writer queue full)",
                        (unsigned long long)dropped);
    }
    w->memory_bad = bad;
}

static void store(cg_worker_t *w, cg_pattern_kind_t kind, const cg_track_t *t, const char *question)
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
    cg_writer_submit(w->memory, p);
}

void cg_tracking_answer(cg_worker_t *w, const char *rid, const cg_xform_t *xf,
                        const cg_request_t *req)
{
    if (!w->cfg->citation_tracking)
        return;
    cg_track_t t;
    cg_track_answer(xf, &t);
    if (!t.tracked)
        return;
    if (t.skipped) {
        cg_metrics->answers_skipped++;
        cg_track_free(&t);
        return;
    }
    cg_metrics->answers++;
    cg_metrics->references += t.references;
    cg_metrics->citations_available += t.available;
    cg_metrics->citations_cited += t.cited;
    if (t.available)
        cg_hist_observe(&cg_metrics->citation_rate, cg_rate_buckets, t.rate);
    cg_log_info(rid, "citation usage: %u/%u references cited", t.cited, t.available);
    cg_log_debug(rid, "citation usage detail: cited %.*s, per citation %.*s", (int)t.cited_ids.len,
                 t.cited_ids.p, (int)t.detail.len, t.detail.p);
    if (w->memory && t.available) {
        if (t.rate > 0)
            store(w, CG_PATTERN_PROCEDURAL, &t, req->question);
        if ((t.available - t.cited) * 2 >= t.available)
            store(w, CG_PATTERN_EPISODIC, &t, req->question);
        poll_writer(w);
    }
    cg_track_free(&t);
}
