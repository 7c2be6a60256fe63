/* Citation tracking in the daemon (SPEC §8): stats, metrics, semantic memory. */
#ifndef CITEGATE_TRACKING_H
#define CITEGATE_TRACKING_H

#include "citegate/request.h"
#include "citegate/xform.h"
#include "io/worker.h"

/* Starts the worker's semantic-memory writer when tracking and memory are on. */
void cg_tracking_start(cg_worker_t *w);
/* Writes what is queued and stops the writer. */
void cg_tracking_stop(cg_worker_t *w);
/* Accounts one finished answer. */
void cg_tracking_answer(cg_worker_t *w, const char *rid, const cg_xform_t *xf,
                        const cg_request_t *req);

#endif
