/* The PostgreSQL tracking store: see store_pg.h. */
#include "store_pg.h"

#include "citegate/config.h"
#include "pgtext.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The server's statement_timeout when the opener gave no deadline. */
#define DEFAULT_STATEMENT_MS 5000
/* The counters of writers that wrote nothing for this long are folded into
 * one row (the sum stays), so replicas that come and go leave few rows. */
#define RETIRED_REPLICA "(retired)"

/* Forward migrations: migrations[v] takes the schema from version v to v+1. */
static const char *const migrations[CG_PG_SCHEMA_VERSION] = {
    "CREATE TABLE IF NOT EXISTS citegate_patterns ("
    " id bigserial PRIMARY KEY,"
    " kind text NOT NULL CHECK (kind IN ('procedural', 'episodic')),"
    " query text NOT NULL,"
    /* 'simple': no stemming and no stop words, like SQLite's FTS5 default,
     * and no language assumed for the users' questions */
    " query_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', query)) STORED,"
    " citation_rate double precision NOT NULL,"
    " avg_score double precision," /* NULL when no score was known */
    " citations integer NOT NULL,"
    " available integer NOT NULL,"
    " chunk_ids text NOT NULL," /* JSON array of the cited ids */
    " created_at bigint NOT NULL,"
    " replica text NOT NULL);"
    "CREATE INDEX IF NOT EXISTS citegate_patterns_query_tsv"
    " ON citegate_patterns USING gin (query_tsv);"
    "CREATE INDEX IF NOT EXISTS citegate_patterns_created_at ON citegate_patterns (created_at);"
    "CREATE TABLE IF NOT EXISTS citegate_replica_stats ("
    " replica text PRIMARY KEY,"
    " answers bigint NOT NULL DEFAULT 0,"
    " answers_skipped bigint NOT NULL DEFAULT 0,"
    " refs bigint NOT NULL DEFAULT 0,"
    " citations_available bigint NOT NULL DEFAULT 0,"
    " citations_cited bigint NOT NULL DEFAULT 0,"
    " seq bigint NOT NULL DEFAULT 0," /* the writer's last batch committed */
    " updated_at timestamptz NOT NULL DEFAULT now());",
    /* 1 to 2: semantic recall's vector of each query (float32 little-endian)
     * and the model that made it; NULL without one. */
    "ALTER TABLE citegate_patterns ADD COLUMN IF NOT EXISTS embedding bytea,"
    " ADD COLUMN IF NOT EXISTS embedding_model text;"
    /* the newest vectors of one model, without scanning the table */
    "CREATE INDEX IF NOT EXISTS citegate_patterns_vec ON citegate_patterns"
    " (embedding_model, created_at) WHERE embedding IS NOT NULL AND kind = 'procedural';",
};

static const char insert_sql[] =
    "INSERT INTO citegate_patterns (kind, query, citation_rate, avg_score, citations, available,"
    " chunk_ids, created_at, embedding, embedding_model, replica)"
    " SELECT k, q, r, s, c, a, i, t, decode(e, 'hex'), m, $11::text FROM unnest($1::text[],"
    " $2::text[], $3::float8[], $4::float8[], $5::int[], $6::int[], $7::text[], $8::bigint[],"
    " $9::text[], $10::text[]) AS u(k, q, r, s, c, a, i, t, e, m)";

static const char stats_sql[] =
    "INSERT INTO citegate_replica_stats AS t (replica, answers, answers_skipped, refs,"
    " citations_available, citations_cited, seq, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, now())"
    " ON CONFLICT (replica) DO UPDATE SET answers = t.answers + EXCLUDED.answers,"
    " answers_skipped = t.answers_skipped + EXCLUDED.answers_skipped,"
    " refs = t.refs + EXCLUDED.refs,"
    " citations_available = t.citations_available + EXCLUDED.citations_available,"
    " citations_cited = t.citations_cited + EXCLUDED.citations_cited,"
    " seq = EXCLUDED.seq, updated_at = now()";

/* A recall's candidates (both: id, query, rate, citations, created_at,
 * score, embedding, model): the lexical matches, and the newest patterns
 * with a vector of the query's model and size (semantic recall). */
static const char recall_sql[] =
    "SELECT id, query, citation_rate, citations, created_at, ts_rank(query_tsv, tq) AS score,"
    " CASE WHEN $3 THEN embedding END, CASE WHEN $3 THEN embedding_model END"
    " FROM citegate_patterns, websearch_to_tsquery('simple', $1) AS tq"
    " WHERE kind = 'procedural' AND query_tsv @@ tq"
    " ORDER BY score DESC, id DESC LIMIT $2";

static const char recent_sql[] =
    "SELECT id, query, citation_rate, citations, created_at, 0, embedding, embedding_model"
    " FROM citegate_patterns WHERE kind = 'procedural' AND embedding IS NOT NULL"
    " AND embedding_model = $1"
    " AND octet_length(embedding) = $2::int ORDER BY created_at DESC, id DESC LIMIT $3";

static const char sum_sql[] =
    "SELECT coalesce(sum(answers), 0), coalesce(sum(answers_skipped), 0), coalesce(sum(refs), 0),"
    " coalesce(sum(citations_available), 0), coalesce(sum(citations_cited), 0)"
    " FROM citegate_replica_stats";

static const char fold_sql[] =
    "WITH gone AS (DELETE FROM citegate_replica_stats"
    " WHERE updated_at < now() - make_interval(days => $1::int) AND replica <> '" RETIRED_REPLICA
    "' RETURNING *)"
    " INSERT INTO citegate_replica_stats AS t (replica, answers, answers_skipped, refs,"
    " citations_available, citations_cited)"
    " SELECT '" RETIRED_REPLICA "', sum(answers), sum(answers_skipped), sum(refs),"
    " sum(citations_available), sum(citations_cited) FROM gone HAVING count(*) > 0"
    " ON CONFLICT (replica) DO UPDATE SET answers = t.answers + EXCLUDED.answers,"
    " answers_skipped = t.answers_skipped + EXCLUDED.answers_skipped,"
    " refs = t.refs + EXCLUDED.refs,"
    " citations_available = t.citations_available + EXCLUDED.citations_available,"
    " citations_cited = t.citations_cited + EXCLUDED.citations_cited, updated_at = now()";

typedef struct pg {
    PGconn *conn;
    int64_t deadline_ms; /* 0: none */
    char err[512];
} pg_t;

/* ---- Errors --------------------------------------------------------------- */

/* Sets p's error to msg on one line (libpq's messages span lines). */
static void set_err(pg_t *p, const char *msg)
{
    char *o = p->err, *end = p->err + sizeof(p->err) - 1;
    bool space = false;
    for (const char *s = msg; *s && o < end; s++) {
        bool ws = *s == '\n' || *s == '\r' || *s == '\t' || *s == ' ';
        if (ws) {
            space = true;
            continue;
        }
        if (space && o > p->err && o[-1] != ' ' && o < end)
            *o++ = ' ';
        space = false;
        *o++ = *s;
    }
    *o = '\0';
}

/* Records the connection's loss; returns CG_STORE_BROKEN. */
static int broken(pg_t *p, const char *msg)
{
    set_err(p, msg);
    return CG_STORE_BROKEN;
}

/* ---- Waiting with a deadline --------------------------------------------- */

/* Waits until the socket is ready for `events` or the deadline passes; 0, or
 * -1 with p's error set. */
static int wait_socket(pg_t *p, short events)
{
    struct pollfd pfd = {.fd = PQsocket(p->conn), .events = events};
    if (pfd.fd < 0) {
        set_err(p, "no connection to the server");
        return -1;
    }
    for (;;) {
        int timeout = -1;
        if (p->deadline_ms != 0) {
            int64_t left = p->deadline_ms - cg_store_now_ms();
            if (left <= 0) {
                set_err(p, "the server did not answer in time");
                return -1;
            }
            timeout = (int)left;
        }
        int rc = poll(&pfd, 1, timeout);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR) {
            set_err(p, strerror(errno));
            return -1;
        }
    }
}

/* Sends what libpq has buffered (a non-blocking connection may keep some). */
static int flush_out(pg_t *p)
{
    int rc;
    while ((rc = PQflush(p->conn)) == 1) {
        /* The server may be waiting for us to read before it reads more. */
        if (wait_socket(p, POLLIN | POLLOUT) != 0)
            return CG_STORE_BROKEN;
        if (!PQconsumeInput(p->conn))
            return broken(p, PQerrorMessage(p->conn));
    }
    return rc == 0 ? CG_STORE_OK : broken(p, PQerrorMessage(p->conn));
}

static bool is_error(const PGresult *r)
{
    ExecStatusType st = PQresultStatus(r);
    return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY;
}

/* Collects the results of what was sent: the first error, else the last
 * result. NULL when the connection broke or the deadline passed. */
static PGresult *collect(pg_t *p)
{
    PGresult *keep = NULL;
    for (;;) {
        while (PQisBusy(p->conn)) {
            if (wait_socket(p, POLLIN) != 0 || !PQconsumeInput(p->conn)) {
                if (!p->err[0] || PQstatus(p->conn) == CONNECTION_BAD)
                    set_err(p, PQerrorMessage(p->conn));
                PQclear(keep);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(p->conn);
        if (r == NULL)
            break;
        if (keep != NULL && is_error(keep)) {
            PQclear(r);
        } else {
            PQclear(keep);
            keep = r;
        }
    }
    return keep;
}

/* ---- Statements ----------------------------------------------------------- */

/* Runs sql (with n text parameters; several statements when n is 0) and
 * returns its outcome; *out gets the result when the caller wants it. */
static int run(pg_t *p, const char *sql, int n, const char *const *vals, PGresult **out)
{
    p->err[0] = '\0';
    int sent = n > 0 ? PQsendQueryParams(p->conn, sql, n, NULL, vals, NULL, NULL, 0)
                     : PQsendQuery(p->conn, sql);
    if (!sent)
        return broken(p, PQerrorMessage(p->conn));
    if (flush_out(p) != CG_STORE_OK)
        return CG_STORE_BROKEN;
    PGresult *r = collect(p);
    if (r == NULL)
        return CG_STORE_BROKEN;
    int rc = CG_STORE_OK;
    if (is_error(r)) {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        set_err(p, PQresultErrorMessage(r));
        /* class 08: connection exception; 57P0x: the server is shutting down */
        bool gone = PQstatus(p->conn) == CONNECTION_BAD ||
                    (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P0", 4) == 0));
        rc = gone ? CG_STORE_BROKEN : CG_STORE_FAILED;
    }
    if (out != NULL && rc == CG_STORE_OK)
        *out = r;
    else
        PQclear(r);
    return rc;
}

static int exec(pg_t *p, const char *sql)
{
    return run(p, sql, 0, NULL, NULL);
}

/* ---- Opening -------------------------------------------------------------- */

static void quiet(void *arg, const char *message)
{
    (void)arg; /* NOTICEs ("relation already exists, skipping") are not ours to log */
    (void)message;
}

/* Starts connecting. Our settings come before the DSN's, so the DSN wins. */
static PGconn *start(const char *dsn, int64_t deadline_ms)
{
    int64_t ms = deadline_ms ? deadline_ms - cg_store_now_ms() : DEFAULT_STATEMENT_MS;
    char options[64];
    snprintf(options, sizeof(options), "-c statement_timeout=%lld",
             (long long)(ms < 500 ? 500 : ms));
    const char *keys[] = {"options", "client_encoding", "fallback_application_name", "dbname",
                          NULL};
    const char *vals[] = {options, "UTF8", "citegate", dsn, NULL};
    return PQconnectStartParams(keys, vals, 1);
}

/* Drives the connection to its end: the socket is polled before each
 * PQconnectPoll, as libpq's non-blocking connect asks. */
static int finish_connect(pg_t *p)
{
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED) {
            set_err(p, PQerrorMessage(p->conn));
            return -1;
        }
        if (wait_socket(p, st == PGRES_POLLING_READING ? POLLIN : POLLOUT) != 0)
            return -1;
        st = PQconnectPoll(p->conn);
    }
    return 0;
}

/* The version recorded in citegate_schema (0: none), -1 when the query
 * failed (no such table, say), -2 when the connection did. */
static int schema_version(pg_t *p)
{
    PGresult *r = NULL;
    int rc = run(p, "SELECT max(version) FROM citegate_schema", 0, NULL, &r);
    if (rc != CG_STORE_OK)
        return rc == CG_STORE_BROKEN ? -2 : -1;
    int v = PQgetisnull(r, 0, 0) ? 0 : atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* Refuses a schema that a newer citegate migrated to; returns -1. */
static int newer(pg_t *p, int v, bool *retry)
{
    char msg[160];
    snprintf(msg, sizeof(msg), "the database's schema version %d is newer than this citegate's %d",
             v, CG_PG_SCHEMA_VERSION);
    set_err(p, msg);
    *retry = false; /* until citegate is upgraded */
    return -1;
}

/* Creates or migrates the schema in one transaction, replicas one at a time. */
static int migrate(pg_t *p, bool *retry)
{
    if (exec(p, "BEGIN") != CG_STORE_OK ||
        exec(p, "SELECT pg_advisory_xact_lock(hashtext('citegate_schema'))") != CG_STORE_OK ||
        exec(p, "CREATE TABLE IF NOT EXISTS citegate_schema (version integer NOT NULL)") !=
            CG_STORE_OK)
        return -1;
    int v = schema_version(p);
    if (v < 0)
        return -1;
    if (v > CG_PG_SCHEMA_VERSION)
        return newer(p, v, retry);
    for (; v < CG_PG_SCHEMA_VERSION; v++)
        if (exec(p, migrations[v]) != CG_STORE_OK)
            return -1;
    char record[96];
    snprintf(record, sizeof(record),
             "DELETE FROM citegate_schema; INSERT INTO citegate_schema VALUES (%d)",
             CG_PG_SCHEMA_VERSION);
    return exec(p, record) == CG_STORE_OK && exec(p, "COMMIT") == CG_STORE_OK ? 0 : -1;
}

/* A schema at this version is used as it is, without a lock or DDL, so the
 * database user needs no CREATE right once the tables exist. */
static int ensure_schema(pg_t *p, bool *retry)
{
    int v = schema_version(p); /* -1 also when citegate_schema is missing */
    if (v == CG_PG_SCHEMA_VERSION)
        return 0;
    if (v == -2)
        return -1;
    if (v > CG_PG_SCHEMA_VERSION)
        return newer(p, v, retry);
    return migrate(p, retry);
}

static void pg_close(cg_store_t *s)
{
    pg_t *p = (pg_t *)s;
    if (p == NULL)
        return;
    PQfinish(p->conn);
    free(p);
}

int cg_pg_check_dsn(const char *dsn, char *err, size_t errlen)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(dsn, &msg);
    if (opts != NULL) {
        PQconninfoFree(opts);
        return 0;
    }
    cg_buf_t shown = {0};
    cg_dsn_redact(dsn, &shown);
    /* libpq's message may quote the DSN: shown only when it holds no password */
    bool plain = shown.len == strlen(dsn);
    snprintf(err, errlen, "CITEGATE_TRACKING_DSN: '%.*s' is not a valid libpq URI%s%s",
             (int)shown.len, shown.p, plain && msg ? ": " : "", plain && msg ? msg : "");
    size_t n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '))
        err[--n] = '\0';
    cg_buf_free(&shown);
    PQfreemem(msg);
    return -1;
}

static cg_store_t *pg_open(const char *dsn, int64_t deadline_ms, char *err, size_t errlen,
                           bool *retry)
{
    *retry = false;
    if (cg_pg_check_dsn(dsn, err, errlen) != 0)
        return NULL;
    *retry = true;
    pg_t *p = cg_xcalloc(1, sizeof(*p));
    p->deadline_ms = deadline_ms;
    p->conn = start(dsn, deadline_ms);
    if (p->conn == NULL) {
        snprintf(err, errlen, "PostgreSQL: out of memory");
        free(p);
        return NULL;
    }
    PQsetNoticeProcessor(p->conn, quiet, NULL);
    if (PQstatus(p->conn) == CONNECTION_BAD)
        set_err(p, PQerrorMessage(p->conn));
    if (PQstatus(p->conn) == CONNECTION_BAD || finish_connect(p) != 0 ||
        PQsetnonblocking(p->conn, 1) != 0 || ensure_schema(p, retry) != 0) {
        snprintf(err, errlen, "PostgreSQL: %s", p->err[0] ? p->err : "cannot connect");
        pg_close((cg_store_t *)p);
        return NULL;
    }
    return (cg_store_t *)p;
}

static void pg_set_deadline(cg_store_t *s, int64_t deadline_ms)
{
    ((pg_t *)s)->deadline_ms = deadline_ms;
}

static const char *pg_errmsg(cg_store_t *s)
{
    return ((pg_t *)s)->err;
}

/* ---- Writing -------------------------------------------------------------- */

/* Whether this writer's batch seq was committed already (a retry after a
 * connection broke during COMMIT): 1 yes, 0 no, or an error outcome. */
static int committed(pg_t *p, const cg_store_batch_t *b)
{
    const char *vals[] = {b->replica};
    PGresult *r = NULL;
    int rc = run(p, "SELECT seq FROM citegate_replica_stats WHERE replica = $1", 1, vals, &r);
    if (rc != CG_STORE_OK)
        return rc;
    bool done = PQntuples(r) > 0 && strtoull(PQgetvalue(r, 0, 0), NULL, 10) >= b->seq;
    PQclear(r);
    return done ? 1 : 0;
}

/* One INSERT of patterns[0..n), every row taken from arrays. */
static int insert_rows(pg_t *p, cg_pattern_t *const *patterns, size_t n, const char *replica)
{
    cg_pg_rows_t rows = {0};
    cg_pg_rows_build(&rows, patterns, n);
    const char *vals[CG_PG_NCOLS + 1];
    for (int c = 0; c < CG_PG_NCOLS; c++)
        vals[c] = rows.col[c].p;
    vals[CG_PG_NCOLS] = replica;
    int rc = run(p, insert_sql, CG_PG_NCOLS + 1, vals, NULL);
    cg_pg_rows_free(&rows);
    return rc;
}

static int add_stats(pg_t *p, const cg_store_batch_t *b)
{
    char nums[6][24];
    const cg_stats_t *s = &b->stats;
    const uint64_t v[6] = {s->answers,         s->answers_skipped,
                           s->references,      s->citations_available,
                           s->citations_cited, b->seq};
    const char *vals[7] = {b->replica};
    for (int i = 0; i < 6; i++) {
        snprintf(nums[i], sizeof(nums[i]), "%" PRIu64, v[i]);
        vals[i + 1] = nums[i];
    }
    return run(p, stats_sql, 7, vals, NULL);
}

/* The batch's statements inside BEGIN … COMMIT. */
static int write_body(pg_t *p, const cg_store_batch_t *b)
{
    if (b->retry) {
        int done = committed(p, b);
        if (done != 0)
            return done == 1 ? 1 : done;
    }
    for (size_t i = 0, k; i < b->n; i += k) {
        k = cg_pg_chunk(b->patterns + i, b->n - i);
        int rc = insert_rows(p, b->patterns + i, k, b->replica);
        if (rc != CG_STORE_OK)
            return rc;
    }
    /* Always, even with no counters: it records seq for a retry to find. */
    return add_stats(p, b);
}

static long pg_write(cg_store_t *s, const cg_store_batch_t *b)
{
    pg_t *p = (pg_t *)s;
    int rc = exec(p, "BEGIN");
    if (rc != CG_STORE_OK)
        return rc;
    rc = write_body(p, b);
    if (rc == 1) { /* committed by an earlier attempt */
        exec(p, "ROLLBACK");
        return (long)b->n;
    }
    if (rc == CG_STORE_OK)
        rc = exec(p, "COMMIT");
    if (rc == CG_STORE_FAILED) {
        char why[sizeof(p->err)];
        memcpy(why, p->err, sizeof(why));
        if (exec(p, "ROLLBACK") == CG_STORE_BROKEN)
            return CG_STORE_BROKEN;
        memcpy(p->err, why, sizeof(why));
        return CG_STORE_FAILED;
    }
    return rc == CG_STORE_OK ? (long)b->n : rc;
}

static long pg_prune(cg_store_t *s, int64_t now, int days)
{
    pg_t *p = (pg_t *)s;
    char before[24], ndays[16];
    snprintf(before, sizeof(before), "%lld", (long long)(now - (int64_t)days * 86400));
    snprintf(ndays, sizeof(ndays), "%d", days);
    const char *v1[] = {before}, *v2[] = {ndays};
    PGresult *r = NULL;
    if (days < 0 || run(p, "DELETE FROM citegate_patterns WHERE created_at < $1::bigint", 1, v1,
                        &r) != CG_STORE_OK)
        return -1;
    long n = atol(PQcmdTuples(r));
    PQclear(r);
    run(p, fold_sql, 1, v2, NULL);
    return n;
}

/* ---- Reading -------------------------------------------------------------- */

/* The vector of row i's columns col (bytea, in text form) and col + 1. */
static void row_vector(PGresult *r, int i, int col, cg_vector_t *v)
{
    if (PQgetisnull(r, i, col) || PQgetisnull(r, i, col + 1))
        return;
    size_t n;
    unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, col), &n);
    if (bytes && cg_vector_unpack(bytes, n, &v->v, &v->dim) == 0)
        v->model = cg_xstrndup(PQgetvalue(r, i, col + 1), (size_t)PQgetlength(r, i, col + 1));
    PQfreemem(bytes);
}

/* Adds r's rows to cs; lexical: they are matches, in order. */
static void add_candidates(PGresult *r, cg_candidates_t *cs, bool lexical)
{
    for (int i = 0; i < PQntuples(r); i++) {
        bool fresh;
        cg_candidate_t *c = cg_candidates_add(cs, atoll(PQgetvalue(r, i, 0)), &fresh);
        if (lexical)
            c->lexical_rank = i;
        if (!fresh)
            continue;
        cg_buf_put(&c->query, PQgetvalue(r, i, 1), (size_t)PQgetlength(r, i, 1));
        c->rate = strtod(PQgetvalue(r, i, 2), NULL);
        c->citations = atoll(PQgetvalue(r, i, 3));
        c->created_at = (int64_t)atoll(PQgetvalue(r, i, 4));
        c->lexical = strtod(PQgetvalue(r, i, 5), NULL);
        row_vector(r, i, 6, &c->vec);
    }
}

/* Runs one candidates query and adds its rows. */
static int fetch(pg_t *p, const char *sql, int nvals, const char *const *vals, cg_candidates_t *cs,
                 bool lexical)
{
    PGresult *r = NULL;
    int rc = run(p, sql, nvals, vals, &r);
    if (rc == CG_STORE_OK)
        add_candidates(r, cs, lexical);
    PQclear(r);
    return rc;
}

static int candidates(pg_t *p, const cg_recall_t *rq, const cg_vector_t *vec, cg_candidates_t *cs)
{
    cg_buf_t words = {0};
    int rc = CG_STORE_OK;
    char limit[16], size[16], recent[16];
    int k = rq->k < 1 ? 1 : rq->k > CG_STORE_MAX_RECALL ? CG_STORE_MAX_RECALL : rq->k;
    snprintf(limit, sizeof(limit), "%d", vec ? CG_RECALL_LEXICAL : k);
    if (cg_pg_or_query(rq->q ? rq->q : "", &words) > 0) {
        const char *vals[] = {words.p, limit, vec ? "true" : "false"};
        rc = fetch(p, recall_sql, 3, vals, cs, true);
    }
    cg_buf_free(&words);
    if (rc != CG_STORE_OK || vec == NULL)
        return rc;
    snprintf(size, sizeof(size), "%u", vec->dim * 4);
    snprintf(recent, sizeof(recent), "%d", CG_RECALL_RECENT);
    const char *vals[] = {vec->model, size, recent};
    return fetch(p, recent_sql, 3, vals, cs, false);
}

static int pg_recall(cg_store_t *s, const cg_recall_t *rq, cg_buf_t *out_json)
{
    const cg_vector_t *vec = rq->vec && rq->vec->v && rq->vec->model ? rq->vec : NULL;
    cg_candidates_t cs = {0};
    int rc = candidates((pg_t *)s, rq, vec, &cs);
    if (rc == CG_STORE_OK)
        cg_store_rank_json(&cs, rq, out_json);
    cg_candidates_free(&cs);
    return rc;
}

static int pg_stats(cg_store_t *s, cg_stats_t *out)
{
    pg_t *p = (pg_t *)s;
    PGresult *r = NULL;
    int rc = run(p, sum_sql, 0, NULL, &r);
    if (rc != CG_STORE_OK)
        return rc;
    uint64_t *f[] = {&out->answers, &out->answers_skipped, &out->references,
                     &out->citations_available, &out->citations_cited};
    for (int i = 0; i < 5; i++)
        *f[i] = strtoull(PQgetvalue(r, 0, i), NULL, 10);
    PQclear(r);
    return CG_STORE_OK;
}

const cg_store_ops_t cg_pg_ops = {
    .name = "PostgreSQL",
    .scope = "fleet",
    .open = pg_open,
    .set_deadline = pg_set_deadline,
    .write = pg_write,
    .prune = pg_prune,
    .recall = pg_recall,
    .stats = pg_stats,
    .errmsg = pg_errmsg,
    .close = pg_close,
};
