/*
 * The PostgreSQL tracking store (SPEC §8 "Store", CITEGATE_TRACKING_DSN): one
 * database shared by every replica, through libpq.
 *
 * Tables (created if missing, under an advisory lock so replicas starting
 * together do not race; citegate_schema holds the version, and each newer
 * version is a forward migration):
 *   citegate_patterns       one row per pattern, with a tsvector of its query
 *                           (GIN index) for full-text recall, ranked by ts_rank
 *   citegate_replica_stats  one row per writer: its counters, added to in
 *                           each batch; /v1/citations/stats is their sum
 *
 * Every wait has a deadline (cg_store_ops_t.set_deadline): connect, send and
 * receive run on a non-blocking connection polled up to it, and the server's
 * statement_timeout matches it, so a slow or vanished server costs a bounded
 * time. A connection that timed out or broke is reported as CG_STORE_BROKEN
 * and not used again.
 */
#ifndef CITEGATE_STORE_PG_H
#define CITEGATE_STORE_PG_H

#include "store.h"

/* The newest schema version this citegate writes and migrates to. */
#define CG_PG_SCHEMA_VERSION 2

extern const cg_store_ops_t cg_pg_ops;

/* Checks the syntax of a DSN with libpq's parser (no connection). 0, or -1
 * with a one-line message (which never repeats a password). */
int cg_pg_check_dsn(const char *dsn, char *err, size_t errlen);

#endif
