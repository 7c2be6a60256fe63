/*
 * Semantic memory: the SQLite pattern store and its writer thread (memory.h).
 *
 * Schema: `patterns` holds one row per pattern; `patterns_fts` is an FTS5
 * index over patterns.query with external content, kept in step by
 * triggers, so the text is stored once. PRAGMA user_version is the schema
 * version.
 */
#include "memory.h"

#include "citegate/json.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SCHEMA_VERSION   1
#define BUSY_TIMEOUT_MS  5000
#define MAX_RECALL       50
#define MAX_WORDS        32
#define PRUNE_INTERVAL_S 3600

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

enum {
    ST_INSERT,
    ST_PRUNE,
    ST_RECALL,
    ST_COUNT,
    ST_RECENT,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST__COUNT
};

static const char *const stmt_sql[ST__COUNT] = {
    [ST_INSERT] = "INSERT INTO patterns (kind, query, citation_rate, avg_score, citations,"
                  " available, chunk_ids, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_PRUNE] = "DELETE FROM patterns WHERE created_at < ?1",
    /* The FTS5 match is the outer loop; rank is bm25() (lower is better). */
    [ST_RECALL] = "SELECT p.query, p.citation_rate, p.citations, p.created_at, -f.rank"
                  " FROM (SELECT rowid, rank FROM patterns_fts WHERE patterns_fts MATCH ?1) AS f"
                  " JOIN patterns AS p ON p.id = f.rowid"
                  " WHERE p.kind = 'procedural'"
                  " ORDER BY f.rank, p.id DESC LIMIT ?2",
    [ST_COUNT] = "SELECT count(*) FROM patterns WHERE kind = ?1",
    [ST_RECENT] = "SELECT query, citation_rate, avg_score, citations, available, chunk_ids,"
                  " created_at FROM patterns WHERE kind = ?1"
                  " ORDER BY created_at DESC, id DESC LIMIT ?2",
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

static const char *kind_name(cg_pattern_kind_t kind)
{
    return kind == CG_PATTERN_EPISODIC ? "episodic" : "procedural";
}

void cg_pattern_free(cg_pattern_t *p)
{
    if (p == NULL)
        return;
    free(p->query);
    free(p->chunk_ids);
    free(p);
}

/* ---- Bounds on stored text ---------------------------------------------- */

/* Length of query q[0..n) once cut to CG_MEMORY_MAX_QUERY bytes at a UTF-8 boundary. */
static size_t query_len(const char *q, size_t n)
{
    return n <= CG_MEMORY_MAX_QUERY ? n : cg_utf8_cut(q, CG_MEMORY_MAX_QUERY);
}

/*
 * Length of the longest prefix of the JSON array text s[0..n) that ends
 * after a whole element and leaves room for a closing ']' within max bytes;
 * the prefix ends just after the '[' when no element fits, and is 0 when s
 * does not start with '['. Only called for n > max.
 */
static size_t ids_prefix(const char *s, size_t n, size_t max)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    if (i >= n || s[i] != '[')
        return 0;
    size_t keep = ++i;
    int depth = 1;
    bool in_str = false, esc = false;
    for (; i < n && i < max; i++) {
        char c = s[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (--depth == 0) {
                keep = i; /* the whole array fits */
                break;
            }
        } else if (c == ',' && depth == 1) {
            keep = i;
        }
    }
    return keep <= max - 1 ? keep : 0;
}

/* chunk_ids as stored: s itself when it fits (*len set), else a cut copy in tmp. */
static const char *ids_text(const char *s, cg_buf_t *tmp, size_t *len)
{
    if (s == NULL) {
        *len = 2;
        return "[]";
    }
    size_t n = strlen(s);
    if (n <= CG_MEMORY_MAX_CHUNK_IDS) {
        *len = n;
        return s;
    }
    size_t keep = ids_prefix(s, n, CG_MEMORY_MAX_CHUNK_IDS);
    tmp->len = 0;
    if (keep == 0) {
        cg_buf_puts(tmp, "[]");
    } else {
        cg_buf_put(tmp, s, keep);
        cg_buf_putc(tmp, ']');
    }
    *len = tmp->len;
    return tmp->p;
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
    if (v == 0) {
        if (sqlite3_exec(m->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK) {
            fmt_err(m->err, sizeof(m->err), "%s: %s", what, sqlite3_errmsg(m->db));
            goto fail;
        }
    } else if (v != SCHEMA_VERSION) {
        fmt_err(m->err, sizeof(m->err), "schema version %ld is not %d (a newer citegate?)", v,
                SCHEMA_VERSION);
        goto fail;
    }
    if (exec_one(m, "COMMIT", what, NULL, 0) != SQLITE_OK)
        goto fail;
    return 0;
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
    size_t qn = query_len(q, strlen(q));
    cg_buf_t tmp = {0};
    size_t idn;
    const char *ids = ids_text(p->chunk_ids, &tmp, &idn);
    double rate = isfinite(p->citation_rate) ? p->citation_rate : 0;

    sqlite3_bind_text(st, 1, kind_name(p->kind), -1, SQLITE_STATIC);
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
    int rc = step_done(m, st);
    sqlite3_clear_bindings(st); /* drop the pointers into p and tmp */
    cg_buf_free(&tmp);
    return rc;
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
    sqlite3_bind_text(st, 1, kind_name(kind), -1, SQLITE_STATIC);
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

long cg_memory_recent(cg_memory_t *m, cg_pattern_kind_t kind, cg_pattern_t **out, size_t max)
{
    sqlite3_stmt *st = m->st[ST_RECENT];
    sqlite3_bind_text(st, 1, kind_name(kind), -1, SQLITE_STATIC);
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

static bool word_byte(unsigned char c)
{
    return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/*
 * Turns free text into an FTS5 query of quoted words joined by OR. A word
 * holds only ASCII letters and digits and non-ASCII bytes, so it can carry
 * no quote and no FTS5 syntax; each is a string to FTS5, tokenized like the
 * indexed text. Returns the number of words.
 */
static int match_query(const char *q, cg_buf_t *out)
{
    size_t n = query_len(q, strlen(q));
    int words = 0;
    size_t i = 0;
    while (i < n && words < MAX_WORDS) {
        while (i < n && !word_byte((unsigned char)q[i]))
            i++;
        size_t start = i;
        while (i < n && word_byte((unsigned char)q[i]))
            i++;
        if (i == start)
            break;
        if (words++ > 0)
            cg_buf_puts(out, " OR ");
        cg_buf_putc(out, '"');
        cg_buf_put(out, q + start, i - start);
        cg_buf_putc(out, '"');
    }
    return words;
}

/* Appends unix seconds t as "YYYY-MM-DDTHH:MM:SSZ" (null when not representable). */
static void put_time(cg_buf_t *b, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    char s[40];
    if (gmtime_r(&tt, &tm) == NULL || strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        cg_buf_puts(b, "null");
        return;
    }
    cg_json_put_cstr(b, s);
}

int cg_memory_recall(cg_memory_t *m, const char *q, int k, cg_buf_t *out_json)
{
    size_t mark = out_json->len;
    k = k < 1 ? 1 : k > MAX_RECALL ? MAX_RECALL : k;
    cg_buf_t match = {0};
    int words = match_query(q ? q : "", &match);

    cg_buf_puts(out_json, "{\"patterns\":[");
    if (words > 0) {
        sqlite3_stmt *st = m->st[ST_RECALL];
        sqlite3_bind_text(st, 1, match.p, (int)match.len, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, k);
        int rc, rows = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (rows++ > 0)
                cg_buf_putc(out_json, ',');
            const unsigned char *query = sqlite3_column_text(st, 0);
            cg_buf_puts(out_json, "{\"query\":\"");
            if (query != NULL)
                cg_json_put_escaped(out_json, (const char *)query,
                                    (size_t)sqlite3_column_bytes(st, 0));
            cg_buf_puts(out_json, "\",\"kind\":\"procedural\",\"citation_rate\":");
            cg_json_put_double(out_json, sqlite3_column_double(st, 1));
            cg_buf_printf(out_json, ",\"citations\":%lld,\"created_at\":",
                          (long long)sqlite3_column_int64(st, 2));
            put_time(out_json, sqlite3_column_int64(st, 3));
            cg_buf_puts(out_json, ",\"score\":");
            cg_json_put_double(out_json, sqlite3_column_double(st, 4));
            cg_buf_putc(out_json, '}');
        }
        if (rc != SQLITE_DONE)
            db_fail(m);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (rc != SQLITE_DONE) {
            out_json->len = mark;
            cg_buf_free(&match);
            return -1;
        }
    }
    cg_buf_puts(out_json, "]}");
    cg_buf_free(&match);
    return 0;
}

/* ---- The writer --------------------------------------------------------- */

struct cg_memwriter {
    pthread_t thread;
    char *path;
    int prune_days;

    pthread_mutex_t mu;
    pthread_cond_t work; /* to the thread: queue non-empty, unpaused or stopping */
    pthread_cond_t done; /* from the thread: open attempted or a batch finished */
    /* Under mu: */
    cg_pattern_t **ring;
    size_t cap, head, len;
    uint64_t accepted; /* patterns ever queued */
    uint64_t finished; /* queued patterns written or failed */
    int state;         /* 0 opening, 1 open, -1 open failed (err set) */
    bool stopping, paused;
    char err[512];

    _Atomic uint64_t written, dropped, failed;
};

static int64_t mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

static void maybe_prune(cg_memwriter_t *w, cg_memory_t *m, int64_t *last, bool force)
{
    if (m == NULL || w->prune_days <= 0)
        return;
    int64_t now = mono_seconds();
    if (!force && now - *last < PRUNE_INTERVAL_S)
        return;
    *last = now;
    cg_memory_prune(m, (int64_t)time(NULL), w->prune_days);
}

/* Writes batch[0..n) in one transaction and counts the outcome. */
static void write_batch(cg_memwriter_t *w, cg_memory_t *m, cg_pattern_t **batch, size_t n)
{
    uint64_t ok = 0, bad = 0;
    if (m == NULL || step_done(m, m->st[ST_BEGIN]) != 0) {
        atomic_fetch_add(&w->failed, n);
        return;
    }
    size_t i;
    for (i = 0; i < n; i++) {
        if (cg_memory_put(m, batch[i]) == 0) {
            ok++;
            continue;
        }
        bad++;
        if (sqlite3_get_autocommit(m->db)) {
            /* The error rolled the whole transaction back (disk full, I/O). */
            bad += ok + (n - i - 1);
            ok = 0;
            break;
        }
    }
    if (i == n && step_done(m, m->st[ST_COMMIT]) != 0) {
        if (!sqlite3_get_autocommit(m->db))
            step_done(m, m->st[ST_ROLLBACK]);
        bad += ok;
        ok = 0;
    }
    atomic_fetch_add(&w->written, ok);
    atomic_fetch_add(&w->failed, bad);
}

static void *writer_main(void *arg)
{
    cg_memwriter_t *w = arg;
    char err[sizeof(w->err)];
    cg_memory_t *m = cg_memory_open(w->path, err, sizeof(err));
    int64_t last_prune = 0;
    maybe_prune(w, m, &last_prune, true);

    pthread_mutex_lock(&w->mu);
    w->state = m ? 1 : -1;
    if (m == NULL)
        memcpy(w->err, err, sizeof(err));
    pthread_cond_broadcast(&w->done);

    cg_pattern_t **batch = cg_xmalloc(w->cap * sizeof(*batch));
    for (;;) {
        while (!w->stopping && (w->len == 0 || w->paused))
            pthread_cond_wait(&w->work, &w->mu);
        size_t n = w->len;
        if (n == 0)
            break; /* stopping, and everything is written */
        for (size_t i = 0; i < n; i++)
            batch[i] = w->ring[(w->head + i) % w->cap];
        w->head = (w->head + n) % w->cap;
        w->len = 0;
        pthread_mutex_unlock(&w->mu);

        write_batch(w, m, batch, n);
        for (size_t i = 0; i < n; i++)
            cg_pattern_free(batch[i]);
        maybe_prune(w, m, &last_prune, false);

        pthread_mutex_lock(&w->mu);
        w->finished += n;
        pthread_cond_broadcast(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    free(batch);
    cg_memory_close(m);
    return NULL;
}

cg_memwriter_t *cg_memwriter_start(const char *path, int prune_days, size_t queue_cap)
{
    cg_memwriter_t *w = cg_xcalloc(1, sizeof(*w));
    w->path = cg_xstrndup(path ? path : "", path ? strlen(path) : 0);
    w->prune_days = prune_days;
    w->cap = queue_cap ? queue_cap : 1;
    w->ring = cg_xcalloc(w->cap, sizeof(*w->ring));
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->done, NULL);

    /* The thread blocks the asynchronous signals, so they reach the event
     * loop's thread; faults stay deliverable (crash reports, sanitizers). */
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGABRT);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&w->done);
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->mu);
        free(w->ring);
        free(w->path);
        free(w);
        return NULL;
    }
    return w;
}

/* Cuts p's texts to the stored bounds, so the queue's memory is bounded too. */
static void bound_pattern(cg_pattern_t *p)
{
    if (p->query != NULL) {
        size_t n = strlen(p->query);
        size_t keep = query_len(p->query, n);
        if (keep < n) {
            p->query[keep] = '\0';
            p->query = cg_xrealloc(p->query, keep + 1);
        }
    }
    if (p->chunk_ids != NULL && strlen(p->chunk_ids) > CG_MEMORY_MAX_CHUNK_IDS) {
        cg_buf_t tmp = {0};
        size_t n;
        const char *ids = ids_text(p->chunk_ids, &tmp, &n);
        char *cut = cg_xstrndup(ids, n);
        cg_buf_free(&tmp);
        free(p->chunk_ids);
        p->chunk_ids = cut;
    }
}

bool cg_memwriter_submit(cg_memwriter_t *w, cg_pattern_t *p)
{
    if (p == NULL)
        return false;
    bound_pattern(p);
    bool queued = false;
    pthread_mutex_lock(&w->mu);
    if (w->state == -1) {
        atomic_fetch_add(&w->failed, 1);
    } else if (w->stopping || w->len == w->cap) {
        atomic_fetch_add(&w->dropped, 1);
    } else {
        w->ring[(w->head + w->len) % w->cap] = p;
        w->len++;
        w->accepted++;
        queued = true;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    if (!queued)
        cg_pattern_free(p);
    return queued;
}

void cg_memwriter_counts(cg_memwriter_t *w, uint64_t *written, uint64_t *dropped, uint64_t *failed)
{
    if (written)
        *written = atomic_load(&w->written);
    if (dropped)
        *dropped = atomic_load(&w->dropped);
    if (failed)
        *failed = atomic_load(&w->failed);
}

int cg_memwriter_status(cg_memwriter_t *w, char *err, size_t errlen)
{
    pthread_mutex_lock(&w->mu);
    int state = w->state;
    if (state == -1)
        fmt_err(err, errlen, "%s", w->err);
    pthread_mutex_unlock(&w->mu);
    return state;
}

void cg_memwriter_flush(cg_memwriter_t *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->accepted;
    while (w->state == 0 || w->finished < target)
        pthread_cond_wait(&w->done, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void cg__memwriter_pause(cg_memwriter_t *w, bool paused)
{
    pthread_mutex_lock(&w->mu);
    w->paused = paused;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
}

void cg_memwriter_stop(cg_memwriter_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    /* The thread drained the queue before leaving. */
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->mu);
    free(w->ring);
    free(w->path);
    free(w);
}
