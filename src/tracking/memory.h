/*
 * Semantic memory: an SQLite store of citation-usage patterns (SPEC §8).
 *
 * A finished answer's tracking result becomes a pattern: "procedural" when
 * the answer cited something, "episodic" when most references went unused.
 * Patterns are written off the event loop by cg_memwriter_t, a thread with
 * its own connection and a bounded queue, and recalled by full-text
 * similarity of the user's question (FTS5, BM25).
 *
 * The file is shared by every worker process: WAL mode, a busy timeout, one
 * short write transaction per batch. Nothing here includes libuv; every
 * function may block on the disk except cg_memwriter_submit and
 * cg_memwriter_counts, which only take a mutex or read atomics.
 */
#ifndef CITEGATE_MEMORY_H
#define CITEGATE_MEMORY_H

#include "citegate/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest query text stored, in bytes (cut at a UTF-8 boundary). */
#define CG_MEMORY_MAX_QUERY 2048
/* Longest chunk_ids text stored; longer arrays keep their leading ids. */
#define CG_MEMORY_MAX_CHUNK_IDS 8192

typedef enum { CG_PATTERN_PROCEDURAL, CG_PATTERN_EPISODIC } cg_pattern_kind_t;

typedef struct cg_pattern {
    cg_pattern_kind_t kind;
    char *query;          /* the user's last question (owned, may be "") */
    double citation_rate; /* cited / available */
    double avg_score;     /* mean of known scores of cited citations, or -1 when none known */
    unsigned citations;   /* number of citations cited */
    unsigned available;   /* citations available */
    char *chunk_ids;      /* JSON array text of the cited ids, e.g. ["doc1","doc3"] (owned) */
    int64_t created_at;   /* unix seconds */
} cg_pattern_t;

/* Frees p's strings and p itself (p was allocated with cg_xmalloc); NULL is a no-op. */
void cg_pattern_free(cg_pattern_t *p);

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

/* Removes patterns with created_at < now - days*86400; returns rows deleted, or -1
 * (also for days < 0). */
long cg_memory_prune(cg_memory_t *m, int64_t now, int days);

/*
 * Appends to out_json the k (clamped to 1..50) stored procedural patterns
 * most similar to the free text q, best first:
 *   {"patterns":[{"query":…,"kind":"procedural","citation_rate":…,"citations":N,
 *                 "created_at":"2026-11-22T01:02:03Z","score":S}]}
 * S is -bm25(), higher is more similar. Each word of q (a run of ASCII
 * letters and digits or non-ASCII bytes, at most 32 words) becomes a quoted
 * FTS5 string and the words are OR-ed, so no user text is FTS5 syntax; a q
 * without words gives an empty list. Returns 0, or -1 with out_json as it was.
 */
int cg_memory_recall(cg_memory_t *m, const char *q, int k, cg_buf_t *out_json);

/* Rows of one kind, or -1. */
long cg_memory_count(cg_memory_t *m, cg_pattern_kind_t kind);

/*
 * Up to max stored patterns of one kind, newest first, as new patterns in
 * out[0..n) (free each with cg_pattern_free). Returns n, or -1.
 */
long cg_memory_recent(cg_memory_t *m, cg_pattern_kind_t kind, cg_pattern_t **out, size_t max);

/*
 * The writer: a thread owning its own connection and a bounded FIFO of
 * patterns. Start it in the process that submits (after fork).
 */
typedef struct cg_memwriter cg_memwriter_t;

/*
 * Starts the thread, which opens the database at `path` (see
 * cg_memory_open), prunes patterns older than prune_days (0 disables
 * pruning), then writes queued patterns, all patterns queued at once in one
 * transaction, and prunes again at most once an hour. queue_cap (at least 1)
 * bounds the queue. Returns NULL only when the thread cannot be created.
 */
cg_memwriter_t *cg_memwriter_start(const char *path, int prune_days, size_t queue_cap);

/*
 * Queues p and takes ownership of it (allocated with cg_xmalloc, strings
 * too). Never waits beyond the queue's mutex. Returns false, having freed p,
 * when the queue is full (counted as dropped), when the database could not
 * be opened (counted as failed) or after stop began (dropped).
 */
bool cg_memwriter_submit(cg_memwriter_t *w, cg_pattern_t *p);

/* Counters: rows written, patterns dropped (queue full) and failed (open or write error). */
void cg_memwriter_counts(cg_memwriter_t *w, uint64_t *written, uint64_t *dropped, uint64_t *failed);

/*
 * Returns 1 when the database is open, 0 while the thread is still opening
 * it, -1 when opening failed, with the message copied into err. Call
 * cg_memwriter_flush first to wait for the outcome.
 */
int cg_memwriter_status(cg_memwriter_t *w, char *err, size_t errlen);

/* Waits until the open was attempted and every pattern queued so far is written or failed.
 * Must not be called while paused (it would wait forever). */
void cg_memwriter_flush(cg_memwriter_t *w);

/* Writes what is queued, joins the thread, closes the database and frees w. NULL is a no-op. */
void cg_memwriter_stop(cg_memwriter_t *w);

/* Test only: while paused the thread takes nothing from the queue, so a
 * test can fill it deterministically. Stop ends a pause. */
void cg__memwriter_pause(cg_memwriter_t *w, bool paused);

#endif
