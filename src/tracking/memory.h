/*
 * Semantic memory: an SQLite store of citation-usage patterns (SPEC §8).
 *
 * A finished answer's tracking result becomes a pattern: "procedural" when
 * the answer cited something, "episodic" when most references went unused.
 * Patterns are written off the event loop by the writer thread (writer.h)
 * through cg_memory_ops, and recalled by full-text similarity of the user's
 * question (FTS5, BM25).
 *
 * The file is shared by every worker process: WAL mode, a busy timeout, one
 * short write transaction per batch. Nothing here includes libuv; every
 * function may block on the disk.
 */
#ifndef CITEGATE_MEMORY_H
#define CITEGATE_MEMORY_H

#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One SQLite connection; use it from one thread at a time. */
typedef struct cg_memory cg_memory_t;

/*
 * Opens the store at `path`, creating its folder and the file when missing;
 * sets WAL mode and a busy timeout (several worker processes may write the
 * same file) and creates the schema on first use. Returns NULL with a
 * one-line message naming the path in err (e.g. the folder cannot be
 * created, the file is read-only or not a database). ":memory:" gives a
 * private in-memory store.
 */
cg_memory_t *cg_memory_open(const char *path, char *err, size_t errlen);
void cg_memory_close(cg_memory_t *m);

/* The last error of a failed call on m, for logs (valid until the next call on m). */
const char *cg_memory_errmsg(cg_memory_t *m);

/*
 * Stores one pattern: query cut to CG_MEMORY_MAX_QUERY bytes, chunk_ids cut
 * to CG_MEMORY_MAX_CHUNK_IDS bytes at an element boundary (NULL stores "[]").
 * Returns 0 or -1.
 */
int cg_memory_put(cg_memory_t *m, const cg_pattern_t *p);

/* The dimension of the newest stored vector (of any model), or 0 when no
 * pattern has one (or on an error): what a new vector's is compared with,
 * to tell that the embeddings endpoint changed models. */
uint32_t cg_memory_vector_dim(cg_memory_t *m);

/* Removes patterns with created_at < now - days*86400; returns rows deleted, or -1
 * (also for days < 0). */
long cg_memory_prune(cg_memory_t *m, int64_t now, int days);

/*
 * Appends to out_json the r->k (clamped to 1..50) stored procedural patterns
 * most similar to the free text r->q, best first:
 *   {"patterns":[{"query":…,"kind":"procedural","citation_rate":…,"citations":N,
 *                 "created_at":"2026-11-22T01:02:03Z","score":S}],"ranking":"lexical"}
 * Lexically S is -bm25(), higher is more similar. Each word of q (a run of
 * ASCII letters and digits or non-ASCII bytes, at most 32 words) becomes a
 * quoted FTS5 string and the words are OR-ed, so no user text is FTS5
 * syntax; a q without words matches nothing. With r->vec the candidates
 * (the 50 best lexical matches and the 200 newest patterns with a vector of
 * its model and size) are ranked by cg_store_rank_json. Returns 0, or -1
 * with out_json as it was.
 */
int cg_memory_recall(cg_memory_t *m, const cg_recall_t *r, cg_buf_t *out_json);

/* Rows of one kind, or -1. */
long cg_memory_count(cg_memory_t *m, cg_pattern_kind_t kind);

/*
 * Up to max stored patterns of one kind, newest first, as new patterns in
 * out[0..n) (free each with cg_pattern_free). Returns n, or -1.
 */
long cg_memory_recent(cg_memory_t *m, cg_pattern_kind_t kind, cg_pattern_t **out, size_t max);

/* The SQLite store as a cg_store_ops_t (scope "process"; no stats of its own:
 * those live in the shared metrics slots). */
extern const cg_store_ops_t cg_memory_ops;

#endif
