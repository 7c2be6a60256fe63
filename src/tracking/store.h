/*
 * The tracking store (SPEC §8 "Store"): where citation-usage patterns and the
 * shared counters of /v1/citations/stats live, behind one table of functions
 * with two implementations: SQLite (memory.c, one file per machine, stats of
 * this process) and PostgreSQL (store_pg.c, one database for every replica,
 * stats of the fleet).
 *
 * A cg_store_t is one connection, used by one thread at a time; every
 * operation may block on the disk or the network. The threads that use it
 * (writer.h, reader.h) keep the event loop away from those waits. Nothing
 * here includes libuv.
 *
 * This file also holds what both implementations share: the pattern, the
 * counters, the bounds on stored text, the words of a recall query, and the
 * JSON of a recalled pattern and of the stats.
 */
#ifndef CITEGATE_STORE_H
#define CITEGATE_STORE_H

#include "citegate/common.h"
#include "citegate/embedding.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest query text stored, in bytes (cut at a UTF-8 boundary). */
#define CG_MEMORY_MAX_QUERY 2048
/* Longest chunk_ids text stored; longer arrays keep their leading ids. */
#define CG_MEMORY_MAX_CHUNK_IDS 8192
/* Most patterns one recall returns, and most words of its query. */
#define CG_STORE_MAX_RECALL 50
#define CG_STORE_MAX_WORDS  32

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
    cg_vector_t vec;      /* the query's embedding (owned), or none (lexical recall only) */
} cg_pattern_t;

/* Frees p's strings and p itself (p was allocated with cg_xmalloc); NULL is a no-op. */
void cg_pattern_free(cg_pattern_t *p);

/* Cuts p's texts to the stored bounds (CG_MEMORY_MAX_QUERY, CG_MEMORY_MAX_CHUNK_IDS). */
void cg_pattern_bound(cg_pattern_t *p);

/* "procedural" or "episodic". */
const char *cg_pattern_kind_name(cg_pattern_kind_t kind);

/* Length of query q[0..n) once cut to CG_MEMORY_MAX_QUERY bytes at a UTF-8 boundary. */
size_t cg_store_query_len(const char *q, size_t n);

/*
 * chunk_ids as stored: s itself when it fits in CG_MEMORY_MAX_CHUNK_IDS bytes
 * (*len set), else a copy in tmp cut after its last whole element that fits,
 * closed with ']' ("[]" when none fits or s is not an array; NULL is "[]").
 */
const char *cg_store_ids_text(const char *s, cg_buf_t *tmp, size_t *len);

/*
 * The next word of a recall query q[0..n) at or after *pos: a run of ASCII
 * letters and digits or non-ASCII bytes, so a word carries no quote, operator
 * or other syntax of either store's query language. Sets *start and *pos
 * (just past the word) and returns its length, or 0 when no word is left.
 */
size_t cg_store_next_word(const char *q, size_t n, size_t *pos, size_t *start);

/* The counters of /v1/citations/stats (SPEC §8). */
typedef struct cg_stats {
    uint64_t answers, answers_skipped, references, citations_available, citations_cited;
} cg_stats_t;

void cg_stats_add(cg_stats_t *to, const cg_stats_t *d);
bool cg_stats_zero(const cg_stats_t *s);

/* Appends the stats object with its citation_rate and "scope":scope. */
void cg_stats_json(cg_buf_t *b, const cg_stats_t *s, const char *scope);

/* Appends one recalled procedural pattern:
 * {"query":…,"kind":"procedural","citation_rate":…,"citations":N,"created_at":ISO-8601,"score":S}
 */
void cg_store_pattern_json(cg_buf_t *b, const char *query, size_t query_len, double rate,
                           long long citations, int64_t created_at, double score);

/* Semantic recall's candidates (SPEC §8): the best lexical matches and the
 * most recent procedural patterns, ranked together by cosine. */
#define CG_RECALL_LEXICAL 50
#define CG_RECALL_RECENT  200

/* One recall: the k (clamped to 1..CG_STORE_MAX_RECALL) stored procedural
 * patterns most like q. With vec, ranked by cosine similarity to it
 * ("ranking":"semantic"); without, or when no candidate has a vector
 * comparable to it, by the store's full-text score ("ranking":"lexical"). */
typedef struct cg_recall {
    const char *q;
    int k;
    const cg_vector_t *vec; /* q's embedding; NULL or empty: lexical */
} cg_recall_t;

/* A recall's candidate, as a store read it: a procedural pattern with its
 * vector (if any). */
typedef struct cg_candidate {
    int64_t id;
    cg_buf_t query;
    double rate;
    long long citations;
    int64_t created_at;
    double lexical;   /* the store's full-text score, higher is better */
    int lexical_rank; /* its place among the lexical matches; -1: a recent one only */
    cg_vector_t vec;
    double cosine; /* filled by the ranking, with: */
    int group;     /* 0 ranked by cosine, 1 a lexical match after them, 2 not shown */
} cg_candidate_t;

typedef struct cg_candidates {
    cg_candidate_t *c;
    size_t n, cap;
} cg_candidates_t;

/* The candidate of row id: a new empty one (*fresh), or the one added
 * before (each pattern is ranked once, whichever list found it). */
cg_candidate_t *cg_candidates_add(cg_candidates_t *cs, int64_t id, bool *fresh);
void cg_candidates_free(cg_candidates_t *cs);

/* Appends the recall's JSON from its candidates (SPEC §8): with r->vec and
 * at least one candidate whose vector is comparable to it, those ranked by
 * cosine (score = the cosine), then the lexical matches without such a
 * vector in lexical order with score 0, "ranking":"semantic"; else the
 * lexical matches in their order with their score, "ranking":"lexical".
 * Sorts cs. */
void cg_store_rank_json(cg_candidates_t *cs, const cg_recall_t *r, cg_buf_t *out);

/* ---- The interface -------------------------------------------------------- */

typedef struct cg_store cg_store_t;

/* What one write hands to the store: patterns and counters, in one transaction. */
typedef struct cg_store_batch {
    cg_pattern_t *const *patterns;
    size_t n;
    cg_stats_t stats;    /* to add to this replica's shared counters (fleet stores) */
    const char *replica; /* this writer's name among the replicas */
    uint64_t seq;        /* grows with every batch of this writer */
    bool retry;          /* an earlier attempt broke off: it may have been committed */
} cg_store_batch_t;

/* Results of write, recall and stats. */
enum {
    CG_STORE_OK = 0,
    CG_STORE_FAILED = -1, /* the store refused (disk full, constraint); nothing was written */
    CG_STORE_BROKEN = -2, /* the connection is gone: close it, reopen, try again */
};

typedef struct cg_store_ops {
    const char *name;  /* for logs: "SQLite", "PostgreSQL" */
    const char *scope; /* of its stats: "process" or "fleet" */
    /*
     * Opens target (a path or a DSN) and creates or migrates the schema,
     * giving up at deadline_ms (CLOCK_MONOTONIC; 0: no deadline). NULL on
     * failure, with a one-line message in err and *retry set when it may
     * pass by itself (a server down) rather than by a change of settings.
     */
    cg_store_t *(*open)(const char *target, int64_t deadline_ms, char *err, size_t errlen,
                        bool *retry);
    /* Operations from now on give up at deadline_ms (0: none). NULL: no deadlines. */
    void (*set_deadline)(cg_store_t *s, int64_t deadline_ms);
    /* Writes a batch in one transaction. Returns the rows written (the others
     * were refused one by one), CG_STORE_FAILED when the transaction was
     * refused (counters included), or CG_STORE_BROKEN. */
    long (*write)(cg_store_t *s, const cg_store_batch_t *b);
    /* Removes patterns created before now - days; rows deleted, or -1. */
    long (*prune)(cg_store_t *s, int64_t now, int days);
    /* Appends {"patterns":[…],"ranking":"semantic"|"lexical"} (cg_memory_recall's
     * shape) for r, best first; out as it was on failure. CG_STORE_OK, _FAILED
     * or _BROKEN. */
    int (*recall)(cg_store_t *s, const cg_recall_t *r, cg_buf_t *out_json);
    /* The counters summed over every replica; NULL for a store of one process. */
    int (*stats)(cg_store_t *s, cg_stats_t *out);
    /* The last error on s (valid until the next call). */
    const char *(*errmsg)(cg_store_t *s);
    void (*close)(cg_store_t *s); /* NULL is a no-op */
} cg_store_ops_t;

/* CLOCK_MONOTONIC in milliseconds: the clock of deadlines. */
int64_t cg_store_now_ms(void);

/* Starts a thread of a store (writer, reader) with the asynchronous signals
 * blocked, so they reach the event loop's thread; faults stay deliverable
 * (crash reports, sanitizers). Returns pthread_create's result. */
int cg_store_thread(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
