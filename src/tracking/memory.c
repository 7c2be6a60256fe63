/*
 * Semantic memory: the SQLite pattern store (memory.h).
 *
 * Schema: `patterns` holds one row per pattern; `patterns_fts` is an FTS5
 * index over patterns.query with external content, kept in step by
 * triggers, so the text is stored once. PRAGMA user_version is the schema
 * version.
 */
#include "memory.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SCHEMA_VERSION  2
#define BUSY_TIMEOUT_MS 5000

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS patterns ("
    " id INTEGER PRIMARY KEY,"
    " kind TEXT NOT NULL CHECK (kind IN ('procedural', 'episodic')),"
    " query TEXT NOT NULL,"
    " citation_rate REAL NOT NULL,"
    " avg_score REAL," /* NULL when no score was known */
    " citations INTEGER NOT NULL,"
    " available INTEGER NOT NULL,"
    " chunk_ids TEXT NOT NULL,"      /* JSON array of the cited ids */
    " created_at INTEGER NOT NULL);" /* unix seconds */
    "CREATE INDEX IF NOT EXISTS patterns_created_at ON patterns (created_at);"
    "CREATE VIRTUAL TABLE IF NOT EXISTS patterns_fts USING fts5"
    " (query, content = 'patterns', content_rowid = 'id');"
    "CREATE TRIGGER IF NOT EXISTS patterns_ai AFTER INSERT ON patterns BEGIN"
    " INSERT INTO patterns_fts (rowid, query) VALUES (new.id, new.query); END;"
    "CREATE TRIGGER IF NOT EXISTS patterns_ad AFTER DELETE ON patterns BEGIN"
    " INSERT INTO patterns_fts (patterns_fts, rowid, query) VALUES ('delete', old.id, old.query);"
    " END;"
    "CREATE TRIGGER IF NOT EXISTS patterns_au AFTER UPDATE OF query ON patterns BEGIN"
    " INSERT INTO patterns_fts (patterns_fts, rowid, query) VALUES ('delete', old.id, old.query);"
    " INSERT INTO patterns_fts (rowid, query) VALUES (new.id, new.query); END;"
    "PRAGMA user_version = 1;";

/* Version 1 to 2: the embedding of each pattern's query (semantic recall),
 * dim float32 little-endian, and the model that made it; NULL without one. */
static const char migrate_v2_sql[] =
    "ALTER TABLE patterns ADD COLUMN embedding BLOB;"
    "ALTER TABLE patterns ADD COLUMN embedding_model TEXT;"
    /* Recall reads the newest vectors of one model: without this index a
     * model with no vectors yet (just changed) would scan the whole table. */
    "CREATE INDEX IF NOT EXISTS patterns_vec ON patterns (embedding_model, created_at)"
    " WHERE embedding IS NOT NULL AND kind = 'procedural';"
    "PRAGMA user_version = 2;";

enum {
    ST_INSERT,
    ST_PRUNE,
    ST_COUNT,
    ST_RECENT,
    ST_CANDIDATES,
    ST_RECENT_VEC,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST__COUNT
};

static const char *const stmt_sql[ST__COUNT] = {
    [ST_INSERT] = "INSERT INTO patterns (kind, query, citation_rate, avg_score, citations,"
                  " available, chunk_ids, created_at, embedding, embedding_model)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_PRUNE] = "DELETE FROM patterns WHERE created_at < ?1",
    [ST_COUNT] = "SELECT count(*) FROM patterns WHERE kind = ?1",
    [ST_RECENT] = "SELECT query, citation_rate, avg_score, citations, available, chunk_ids,"
                  " created_at, embedding, embedding_model FROM patterns WHERE kind = ?1"
                  " ORDER BY created_at DESC, id DESC LIMIT ?2",
    /* Semantic recall's candidates: the lexical matches with their vectors,
     * and the recent procedural patterns with a vector of the query's model
     * and size. Both: id, query, rate, citations, created_at, score,
     * embedding, model. */
    [ST_CANDIDATES] = "SELECT p.id, p.query, p.citation_rate, p.citations, p.created_at, -f.rank,"
                      " p.embedding, p.embedding_model"
                      " FROM (SELECT rowid, rank FROM patterns_fts WHERE patterns_fts MATCH ?1) AS f"
                      " JOIN patterns AS p ON p.id = f.rowid"
                      " WHERE p.kind = 'procedural'"
                      " ORDER BY f.rank, p.id DESC LIMIT ?2",
    [ST_RECENT_VEC] = "SELECT id, query, citation_rate, citations, created_at, 0,"
                      " embedding, embedding_model FROM patterns"
                      " WHERE kind = 'procedural' AND embedding IS NOT NULL"
                      " AND embedding_model = ?1 AND length(embedding) = ?2"
                      " ORDER BY created_at DESC, id DESC LIMIT ?3",
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

struct cg_memory {
    sqlite3 *db;
    sqlite3_stmt *st[ST__COUNT];
    char err[256];
};

static void fmt_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fmt_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Records the connection's last SQLite error as m's error; returns -1. */
static int db_fail(cg_memory_t *m)
{
    fmt_err(m->err, sizeof(m->err), "%s", sqlite3_errmsg(m->db));
    return -1;
}

/* ---- Opening ------------------------------------------------------------ */

/* Creates the folder that will hold `path` (like mkdir -p of its dirname). */
static int make_parent(const char *path, char *err, size_t errlen)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return 0; /* the current folder or the root */
    char *dir = cg_xstrndup(path, (size_t)(slash - path));
    int mkdir_errno = 0;
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            mkdir_errno = errno;
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0) {
        fmt_err(err, errlen, "semantic memory %s: cannot create folder %s: %s", path, dir,
                strerror(mkdir_errno ? mkdir_errno : errno));
        rc = -1;
    } else if (!S_ISDIR(st.st_mode)) {
        fmt_err(err, errlen, "semantic memory %s: %s is not a folder", path, dir);
        rc = -1;
    }
    free(dir);
    return rc;
}

/*
 * Runs one statement and copies the first column of its first row (if any)
 * into out. On failure sets m's error to "<what>: <SQLite message>" and
 * returns the SQLite result code; SQLITE_OK (0) on success.
 */
static int exec_one(cg_memory_t *m, const char *sql, const char *what, char *out, size_t outlen)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(m->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (out != NULL && outlen > 0) {
            const unsigned char *t = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
            snprintf(out, outlen, "%s", t ? (const char *)t : "");
        }
        if (rc == SQLITE_ROW || rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK)
        fmt_err(m->err, sizeof(m->err), "%s: %s", what, sqlite3_errmsg(m->db));
    sqlite3_finalize(st); /* NULL when prepare failed: a no-op */
    return rc;
}

/*
 * Switches the file to WAL mode. When several processes open a new file at
 * once, the switch can fail with SQLITE_BUSY without calling the busy
 * handler (it needs an exclusive lock while others hold shared ones), so it
 * is retried here for up to the busy timeout; once one process switched the
 * file, the others find it in WAL mode already.
 */
static int set_wal(cg_memory_t *m, char *mode, size_t modelen)
{
    int rc;
    for (int waited_ms = 0;; waited_ms += 10) {
        /* The first statement reads the file: "file is not a database" shows here. */
        rc = exec_one(m, "PRAGMA journal_mode = WAL", "cannot set WAL mode", mode, modelen);
        if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= BUSY_TIMEOUT_MS)
            return rc;
        sqlite3_sleep(10);
    }
}

/* Creates the schema, or checks its version, inside one write transaction so
 * that workers opening a new file at the same time do not race. */
static int ensure_schema(cg_memory_t *m)
{
    const char *what = "cannot create the schema";
    char version[32];
    /* Fast path without the write lock: an existing file opens without waiting for writers. */
    if (exec_one(m, "PRAGMA user_version", what, version, sizeof(version)) != SQLITE_OK)
        return -1;
    if (strtol(version, NULL, 10) == SCHEMA_VERSION)
        return 0;
    if (exec_one(m, "BEGIN IMMEDIATE", what, NULL, 0) != SQLITE_OK)
        return -1;
    if (exec_one(m, "PRAGMA user_version", what, version, sizeof(version)) != SQLITE_OK)
        goto fail;
    long v = strtol(version, NULL, 10);
    if (v == 0 && sqlite3_exec(m->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK)
        goto sql_fail;
    if (v <= 1 && sqlite3_exec(m->db, migrate_v2_sql, NULL, NULL, NULL) != SQLITE_OK)
        goto sql_fail;
    if (v > SCHEMA_VERSION) {
        fmt_err(m->err, sizeof(m->err), "schema version %ld is not %d (a newer citegate?)", v,
                SCHEMA_VERSION);
        goto fail;
    }
    if (exec_one(m, "COMMIT", what, NULL, 0) != SQLITE_OK)
        goto fail;
    return 0;
sql_fail:
    fmt_err(m->err, sizeof(m->err), "%s: %s", what, sqlite3_errmsg(m->db));
fail:
    if (!sqlite3_get_autocommit(m->db))
        sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

static int init_db(cg_memory_t *m, bool in_memory)
{
    char mode[32];
    sqlite3_busy_timeout(m->db, BUSY_TIMEOUT_MS);
    if (sqlite3_db_readonly(m->db, "main") == 1) {
        fmt_err(m->err, sizeof(m->err), "the file is read-only");
        return -1;
    }
    if (set_wal(m, mode, sizeof(mode)) != SQLITE_OK)
        return -1;
    if (strcmp(mode, "wal") != 0 && !(in_memory && strcmp(mode, "memory") == 0)) {
        fmt_err(m->err, sizeof(m->err), "cannot set WAL mode (journal mode is '%s')", mode);
        return -1;
    }
    /* In WAL mode NORMAL is crash-safe; a power cut may lose the last patterns only. */
    if (exec_one(m, "PRAGMA synchronous = NORMAL", "cannot set synchronous mode", NULL, 0) !=
        SQLITE_OK)
        return -1;
    if (ensure_schema(m) != 0)
        return -1;
    for (int i = 0; i < ST__COUNT; i++) {
        if (sqlite3_prepare_v3(m->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &m->st[i],
                               NULL) != SQLITE_OK) {
            fmt_err(m->err, sizeof(m->err), "cannot prepare statements: %s", sqlite3_errmsg(m->db));
            return -1;
        }
    }
    return 0;
}

cg_memory_t *cg_memory_open(const char *path, char *err, size_t errlen)
{
    if (path == NULL || *path == '\0') {
        fmt_err(err, errlen, "semantic memory: empty database path");
        return NULL;
    }
    if (!sqlite3_threadsafe()) {
        fmt_err(err, errlen, "semantic memory %s: SQLite was built without thread support", path);
        return NULL;
    }
    bool in_memory = strcmp(path, ":memory:") == 0;
    if (!in_memory && make_parent(path, err, errlen) != 0)
        return NULL;

    cg_memory_t *m = cg_xcalloc(1, sizeof(*m));
    int rc = sqlite3_open_v2(
        path, &m->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        fmt_err(err, errlen, "semantic memory %s: cannot open: %s", path,
                m->db ? sqlite3_errmsg(m->db) : sqlite3_errstr(rc));
        cg_memory_close(m);
        return NULL;
    }
    if (init_db(m, in_memory) != 0) {
        fmt_err(err, errlen, "semantic memory %s: %s", path, m->err);
        cg_memory_close(m);
        return NULL;
    }
    return m;
}

void cg_memory_close(cg_memory_t *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(m->st[i]);
    sqlite3_close(m->db); /* NULL is a no-op; every statement is finalized */
    free(m);
}

const char *cg_memory_errmsg(cg_memory_t *m)
{
    return m->err;
}

/* ---- Statements --------------------------------------------------------- */

/* Steps a statement that returns no rows, then resets it; 0 or -1. */
static int step_done(cg_memory_t *m, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        db_fail(m);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

int cg_memory_put(cg_memory_t *m, const cg_pattern_t *p)
{
    sqlite3_stmt *st = m->st[ST_INSERT];
    const char *q = p->query ? p->query : "";
    size_t qn = cg_store_query_len(q, strlen(q));
    cg_buf_t tmp = {0};
    size_t idn;
    const char *ids = cg_store_ids_text(p->chunk_ids, &tmp, &idn);
    double rate = isfinite(p->citation_rate) ? p->citation_rate : 0;

    sqlite3_bind_text(st, 1, cg_pattern_kind_name(p->kind), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, q, (int)qn, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, rate);
    if (p->avg_score >= 0 && isfinite(p->avg_score))
        sqlite3_bind_double(st, 4, p->avg_score);
    else
        sqlite3_bind_null(st, 4);
    sqlite3_bind_int64(st, 5, p->citations);
    sqlite3_bind_int64(st, 6, p->available);
    sqlite3_bind_text(st, 7, ids, (int)idn, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, p->created_at);
    cg_buf_t vec = {0};
    if (p->vec.v && p->vec.dim && p->vec.model) {
        cg_vector_pack(p->vec.v, p->vec.dim, &vec);
        sqlite3_bind_blob(st, 9, vec.p, (int)vec.len, SQLITE_STATIC);
        sqlite3_bind_text(st, 10, p->vec.model, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(st, 9);
        sqlite3_bind_null(st, 10);
    }
    int rc = step_done(m, st);
    sqlite3_clear_bindings(st); /* drop the pointers into p, tmp and vec */
    cg_buf_free(&tmp);
    cg_buf_free(&vec);
    return rc;
}

uint32_t cg_memory_vector_dim(cg_memory_t *m)
{
    static const char sql[] = "SELECT length(embedding) FROM patterns"
                              " WHERE embedding IS NOT NULL ORDER BY id DESC LIMIT 1";
    sqlite3_stmt *st;
    if (m == NULL || sqlite3_prepare_v2(m->db, sql, -1, &st, NULL) != SQLITE_OK)
        return 0;
    uint32_t dim = 0;
    if (sqlite3_step(st) == SQLITE_ROW)
        dim = (uint32_t)(sqlite3_column_int64(st, 0) / 4);
    sqlite3_finalize(st);
    return dim;
}

long cg_memory_prune(cg_memory_t *m, int64_t now, int days)
{
    if (days < 0) {
        fmt_err(m->err, sizeof(m->err), "negative prune age %d", days);
        return -1;
    }
    sqlite3_stmt *st = m->st[ST_PRUNE];
    sqlite3_bind_int64(st, 1, now - (int64_t)days * 86400);
    if (step_done(m, st) != 0)
        return -1;
    return (long)sqlite3_changes(m->db);
}

long cg_memory_count(cg_memory_t *m, cg_pattern_kind_t kind)
{
    sqlite3_stmt *st = m->st[ST_COUNT];
    sqlite3_bind_text(st, 1, cg_pattern_kind_name(kind), -1, SQLITE_STATIC);
    long n = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        n = (long)sqlite3_column_int64(st, 0);
    else
        db_fail(m);
    sqlite3_reset(st);
    return n;
}

static char *column_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return cg_xstrndup(t ? (const char *)t : "", (size_t)sqlite3_column_bytes(st, col));
}

/* The vector of columns col (blob) and col + 1 (model), if both are sound. */
static void column_vector(sqlite3_stmt *st, int col, cg_vector_t *v)
{
    const void *blob = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);
    const unsigned char *model = sqlite3_column_text(st, col + 1);
    if (blob == NULL || model == NULL || cg_vector_unpack(blob, (size_t)n, &v->v, &v->dim) != 0)
        return;
    v->model = cg_xstrndup((const char *)model, (size_t)sqlite3_column_bytes(st, col + 1));
}

long cg_memory_recent(cg_memory_t *m, cg_pattern_kind_t kind, cg_pattern_t **out, size_t max)
{
    sqlite3_stmt *st = m->st[ST_RECENT];
    sqlite3_bind_text(st, 1, cg_pattern_kind_name(kind), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, max > INT32_MAX ? INT32_MAX : (int64_t)max);
    size_t n = 0;
    int rc = SQLITE_DONE;
    while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        cg_pattern_t *p = cg_xcalloc(1, sizeof(*p));
        p->kind = kind;
        p->query = column_dup(st, 0);
        p->citation_rate = sqlite3_column_double(st, 1);
        p->avg_score =
            sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 2);
        p->citations = (unsigned)sqlite3_column_int64(st, 3);
        p->available = (unsigned)sqlite3_column_int64(st, 4);
        p->chunk_ids = column_dup(st, 5);
        p->created_at = sqlite3_column_int64(st, 6);
        column_vector(st, 7, &p->vec);
        out[n++] = p;
    }
    if (n < max && rc != SQLITE_DONE) {
        db_fail(m);
        sqlite3_reset(st);
        while (n > 0)
            cg_pattern_free(out[--n]);
        return -1;
    }
    sqlite3_reset(st);
    return (long)n;
}

/* ---- Recall ------------------------------------------------------------- */

/*
 * Turns free text into an FTS5 query of quoted words joined by OR. A word
 * (cg_store_next_word) can carry no quote and no FTS5 syntax; each is a
 * string to FTS5, tokenized like the indexed text. Returns the number of
 * words.
 */
static int match_query(const char *q, cg_buf_t *out)
{
    size_t n = cg_store_query_len(q, strlen(q));
    size_t pos = 0, start, len;
    int words = 0;
    while (words < CG_STORE_MAX_WORDS && (len = cg_store_next_word(q, n, &pos, &start)) > 0) {
        if (words++ > 0)
            cg_buf_puts(out, " OR ");
        cg_buf_putc(out, '"');
        cg_buf_put(out, q + start, len);
        cg_buf_putc(out, '"');
    }
    return words;
}

/* Adds the rows of st (ST_CANDIDATES' columns) to cs; lexical: they are
 * matches, in order. SQLITE_DONE, or the error. */
static int read_candidates(sqlite3_stmt *st, cg_candidates_t *cs, bool lexical)
{
    int rc, rank = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        bool fresh;
        cg_candidate_t *c = cg_candidates_add(cs, sqlite3_column_int64(st, 0), &fresh);
        if (lexical)
            c->lexical_rank = rank++;
        if (!fresh)
            continue;
        const unsigned char *q = sqlite3_column_text(st, 1);
        cg_buf_put(&c->query, q ? (const char *)q : "", (size_t)sqlite3_column_bytes(st, 1));
        c->rate = sqlite3_column_double(st, 2);
        c->citations = sqlite3_column_int64(st, 3);
        c->created_at = sqlite3_column_int64(st, 4);
        c->lexical = sqlite3_column_double(st, 5);
        column_vector(st, 6, &c->vec);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

/* The lexical matches of the query's words (limit rows), and with a vector
 * the recent patterns that have one like it. 0 or -1. */
static int candidates(cg_memory_t *m, const cg_buf_t *match, int limit, const cg_vector_t *vec,
                      cg_candidates_t *cs)
{
    if (match->len > 0) {
        sqlite3_stmt *st = m->st[ST_CANDIDATES];
        sqlite3_bind_text(st, 1, match->p, (int)match->len, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, limit);
        if (read_candidates(st, cs, true) != SQLITE_DONE)
            return db_fail(m);
    }
    if (vec == NULL)
        return 0;
    sqlite3_stmt *st = m->st[ST_RECENT_VEC];
    sqlite3_bind_text(st, 1, vec->model, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)vec->dim * 4);
    sqlite3_bind_int(st, 3, CG_RECALL_RECENT);
    return read_candidates(st, cs, false) == SQLITE_DONE ? 0 : db_fail(m);
}

int cg_memory_recall(cg_memory_t *m, const cg_recall_t *r, cg_buf_t *out_json)
{
    int k = r->k < 1 ? 1 : r->k > CG_STORE_MAX_RECALL ? CG_STORE_MAX_RECALL : r->k;
    const cg_vector_t *vec = r->vec && r->vec->v && r->vec->model ? r->vec : NULL;
    cg_buf_t match = {0};
    match_query(r->q ? r->q : "", &match);
    cg_candidates_t cs = {0};
    /* Lexically only the k best are needed; semantically 50 are candidates. */
    int rc = candidates(m, &match, vec ? CG_RECALL_LEXICAL : k, vec, &cs);
    if (rc == 0)
        cg_store_rank_json(&cs, r, out_json);
    cg_candidates_free(&cs);
    cg_buf_free(&match);
    return rc;
}

/* ---- As a store (store.h) ---------------------------------------------- */

static cg_store_t *ops_open(const char *path, int64_t deadline_ms, char *err, size_t errlen,
                            bool *retry)
{
    (void)deadline_ms; /* a local file: the busy timeout bounds the waits */
    *retry = false;    /* a path that cannot be opened needs a change of settings */
    return (cg_store_t *)cg_memory_open(path, err, errlen);
}

/* Writes b's patterns in one transaction. A row that fails alone is counted
 * alone; an error that rolled the transaction back (disk full, I/O) fails
 * them all. The counters are not kept here: SQLite's stats are the process's. */
static long ops_write(cg_store_t *s, const cg_store_batch_t *b)
{
    cg_memory_t *m = (cg_memory_t *)s;
    if (step_done(m, m->st[ST_BEGIN]) != 0)
        return CG_STORE_FAILED;
    long ok = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (cg_memory_put(m, b->patterns[i]) == 0)
            ok++;
        else if (sqlite3_get_autocommit(m->db))
            return CG_STORE_FAILED; /* rolled back, rows before it included */
    }
    if (step_done(m, m->st[ST_COMMIT]) != 0) {
        if (!sqlite3_get_autocommit(m->db))
            step_done(m, m->st[ST_ROLLBACK]);
        return CG_STORE_FAILED;
    }
    return ok;
}

static long ops_prune(cg_store_t *s, int64_t now, int days)
{
    return cg_memory_prune((cg_memory_t *)s, now, days);
}

static int ops_recall(cg_store_t *s, const cg_recall_t *r, cg_buf_t *out_json)
{
    return cg_memory_recall((cg_memory_t *)s, r, out_json) == 0 ? CG_STORE_OK : CG_STORE_FAILED;
}

static const char *ops_errmsg(cg_store_t *s)
{
    return cg_memory_errmsg((cg_memory_t *)s);
}

static void ops_close(cg_store_t *s)
{
    cg_memory_close((cg_memory_t *)s);
}

const cg_store_ops_t cg_memory_ops = {
    .name = "SQLite",
    .scope = "process",
    .open = ops_open,
    .write = ops_write,
    .prune = ops_prune,
    .recall = ops_recall,
    .errmsg = ops_errmsg,
    .close = ops_close,
};
