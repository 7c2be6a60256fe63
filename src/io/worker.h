/*
 * A worker: one process, one libuv loop, and everything the loop serves.
 * worker.c is the wiring at the top of the shell: it fills the loop
 * context every module shares (ctx.h), opens the upstream pools and the
 * listeners, starts tracking, and runs the loop until a signal's drain is
 * over. Only the daemon (src/cmd) includes this header.
 */
#ifndef CITEGATE_IO_WORKER_H
#define CITEGATE_IO_WORKER_H

#include "citegate/config.h"

/* Runs one worker until it has drained; returns its exit status (2: bad
 * configuration). data_sources: AZURE_AI_DATA_SOURCES prepared, or NULL. */
int cg_worker_run(const cg_config_t *cfg, int index, char *data_sources);

#endif
