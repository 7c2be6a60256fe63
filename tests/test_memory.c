/*
 * Unit tests of the semantic memory store and its writer thread
 * (src/memory.h, SPEC §8). Each test works in its own folder under /tmp.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tracking/memory.h"
#include "tracking/writer.h"
#include "citegate/json.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define T0 1795309323 /* 2026-11-22T01:02:03Z */

typedef struct fixture {
    char dir[64];
    char db[128];
} fixture_t;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/cg_memory_XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->db, sizeof(f->db), "%s/mem.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static cg_pattern_t *new_pattern(cg_pattern_kind_t kind, const char *query, int64_t created_at)
{
    cg_pattern_t *p = cg_xcalloc(1, sizeof(*p));
    p->kind = kind;
    p->query = cg_xstrndup(query, strlen(query));
    p->citation_rate = 0.5;
    p->avg_score = 2.25;
    p->citations = 1;
    p->available = 2;
    p->chunk_ids = cg_xstrndup("[\"doc1\"]", 8);
    p->created_at = created_at;
    return p;
}

static void put(cg_memory_t *m, cg_pattern_kind_t kind, const char *query, int64_t created_at)
{
    cg_pattern_t *p = new_pattern(kind, query, created_at);
    assert_int_equal(cg_memory_put(m, p), 0);
    cg_pattern_free(p);
}

static cg_memory_t *open_ok(const char *path)
{
    char err[256] = "";
    cg_memory_t *m = cg_memory_open(path, err, sizeof(err));
    if (m == NULL)
        fail_msg("open %s: %s", path, err);
    return m;
}

/* A parsed recall answer: j.tok[arr] is the patterns array. */
typedef struct recall {
    cg_buf_t out;
    cg_json_t j;
    int arr;
    int n;
} recall_t;

/* Recalls q (ranked by vec's cosine when given) and checks the ranking said. */
static void recall_by(cg_memory_t *m, const char *q, int k, const cg_vector_t *vec,
                      const char *ranking, recall_t *r)
{
    memset(r, 0, sizeof(*r));
    cg_recall_t rq = {q, k, vec};
    assert_int_equal(cg_memory_recall(m, &rq, &r->out), 0);
    cg_json_init(&r->j, 4096);
    assert_int_equal(cg_json_parse(&r->j, r->out.p, r->out.len), CG_JSON_OK);
    r->arr = cg_json_get(&r->j, 0, "patterns");
    assert_int_equal(cg_json_type(&r->j, r->arr), JSMN_ARRAY);
    r->n = r->j.tok[r->arr].size;
    char *said = cg_json_strdup(&r->j, cg_json_get(&r->j, 0, "ranking"), NULL);
    assert_non_null(said);
    assert_string_equal(said, ranking);
    free(said);
}

static void recall(cg_memory_t *m, const char *q, int k, recall_t *r)
{
    recall_by(m, q, k, NULL, "lexical", r);
}

/* Token of element i of the patterns array. */
static int recall_item(const recall_t *r, int i)
{
    assert_in_range(i, 0, r->n - 1);
    int t = r->arr + 1;
    while (i-- > 0)
        t = cg_json_skip(&r->j, t);
    return t;
}

/* Decoded string member of item i (caller frees). */
static char *item_str(const recall_t *r, int i, const char *key)
{
    char *s = cg_json_strdup(&r->j, cg_json_get(&r->j, recall_item(r, i), key), NULL);
    assert_non_null(s);
    return s;
}

static double item_num(const recall_t *r, int i, const char *key)
{
    double v;
    assert_true(cg_json_number(&r->j, cg_json_get(&r->j, recall_item(r, i), key), &v));
    return v;
}

static void assert_item_query(const recall_t *r, int i, const char *want)
{
    char *s = item_str(r, i, "query");
    assert_string_equal(s, want);
    free(s);
}

static void recall_free(recall_t *r)
{
    cg_json_free(&r->j);
    cg_buf_free(&r->out);
}

/* Every stored field comes back, through recent() and through recall(). */
static void test_round_trip(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    cg_pattern_t in = {
        .kind = CG_PATTERN_PROCEDURAL,
        .query = "What is \"Azure AI Search\"?\n",
        .citation_rate = 0.75,
        .avg_score = 3.5,
        .citations = 3,
        .available = 4,
        .chunk_ids = "[\"doc1\",\"doc3\",\"doc4\"]",
        .created_at = T0,
    };
    assert_int_equal(cg_memory_put(m, &in), 0);
    cg_pattern_t second = in;
    second.query = "";
    second.avg_score = -1;
    second.chunk_ids = NULL;
    second.kind = CG_PATTERN_EPISODIC;
    assert_int_equal(cg_memory_put(m, &second), 0);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_PROCEDURAL), 1);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_EPISODIC), 1);

    cg_pattern_t *out[4];
    assert_int_equal(cg_memory_recent(m, CG_PATTERN_PROCEDURAL, out, 4), 1);
    assert_int_equal(out[0]->kind, CG_PATTERN_PROCEDURAL);
    assert_string_equal(out[0]->query, in.query);
    assert_true(out[0]->citation_rate == 0.75);
    assert_true(out[0]->avg_score == 3.5);
    assert_int_equal(out[0]->citations, 3);
    assert_int_equal(out[0]->available, 4);
    assert_string_equal(out[0]->chunk_ids, in.chunk_ids);
    assert_int_equal(out[0]->created_at, T0);
    cg_pattern_free(out[0]);
    assert_int_equal(cg_memory_recent(m, CG_PATTERN_EPISODIC, out, 4), 1);
    assert_string_equal(out[0]->query, "");
    assert_true(out[0]->avg_score == -1);
    assert_string_equal(out[0]->chunk_ids, "[]");
    cg_pattern_free(out[0]);

    recall_t r;
    recall(m, "azure search", 2, &r);
    assert_int_equal(r.n, 1);
    assert_item_query(&r, 0, in.query);
    char *kind = item_str(&r, 0, "kind");
    assert_string_equal(kind, "procedural");
    free(kind);
    char *when = item_str(&r, 0, "created_at");
    assert_string_equal(when, "2026-11-22T01:02:03Z");
    free(when);
    assert_true(item_num(&r, 0, "citation_rate") == 0.75);
    assert_true(item_num(&r, 0, "citations") == 3);
    assert_true(item_num(&r, 0, "score") > 0);
    recall_free(&r);

    /* Appends: what was in the buffer stays. */
    cg_buf_t out_json = {0};
    cg_buf_puts(&out_json, "X");
    cg_recall_t none = {"nothing matches this", 2, NULL};
    assert_int_equal(cg_memory_recall(m, &none, &out_json), 0);
    const char *want = "X{\"patterns\":[],\"ranking\":\"lexical\"}";
    assert_int_equal(out_json.len, strlen(want));
    assert_memory_equal(out_json.p, want, out_json.len);
    cg_buf_free(&out_json);
    cg_memory_close(m);

    /* The rows are on disk: a new connection sees them. */
    m = open_ok(f->db);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_PROCEDURAL), 1);
    cg_memory_close(m);

    /* ":memory:" is a private store with the same schema. */
    m = open_ok(":memory:");
    assert_int_equal(cg_memory_count(m, CG_PATTERN_PROCEDURAL), 0);
    assert_int_equal(cg_memory_put(m, &in), 0);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_PROCEDURAL), 1);
    cg_memory_close(m);
}

static void test_recall_ranking(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    put(m, CG_PATTERN_PROCEDURAL, "router firmware update steps", T0);
    put(m, CG_PATTERN_PROCEDURAL, "how do I reset my router password", T0);
    put(m, CG_PATTERN_PROCEDURAL, "best pizza in Naples", T0);
    put(m, CG_PATTERN_EPISODIC, "reset router password", T0);
    put(m, CG_PATTERN_EPISODIC, "reset router password now", T0);

    recall_t r;
    recall(m, "reset router password", 2, &r);
    assert_int_equal(r.n, 2);
    assert_item_query(&r, 0, "how do I reset my router password");
    assert_item_query(&r, 1, "router firmware update steps");
    assert_true(item_num(&r, 0, "score") > item_num(&r, 1, "score"));
    recall_free(&r);

    /* k larger than the matches: only matching procedural rows, never episodic ones. */
    recall(m, "RESET Router", 10, &r);
    assert_int_equal(r.n, 2);
    for (int i = 0; i < r.n; i++) {
        char *k = item_str(&r, i, "kind");
        assert_string_equal(k, "procedural");
        free(k);
    }
    recall_free(&r);

    recall(m, "pizza", 2, &r);
    assert_int_equal(r.n, 1);
    assert_item_query(&r, 0, "best pizza in Naples");
    recall_free(&r);
    cg_memory_close(m);
}

/* k is clamped to 1..50. */
static void test_recall_k_clamp(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    char q[64];
    for (int i = 0; i < 60; i++) {
        snprintf(q, sizeof(q), "router question %d", i);
        put(m, CG_PATTERN_PROCEDURAL, q, T0 + i);
    }
    recall_t r;
    recall(m, "router", 0, &r);
    assert_int_equal(r.n, 1);
    recall_free(&r);
    recall(m, "router", -5, &r);
    assert_int_equal(r.n, 1);
    recall_free(&r);
    recall(m, "router", 1000, &r);
    assert_int_equal(r.n, 50);
    recall_free(&r);
    cg_memory_close(m);
}

/* User text is never FTS5 syntax, and text without words matches nothing. */
static void test_recall_fts_syntax(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    put(m, CG_PATTERN_PROCEDURAL, "near the router AND the modem", T0);
    put(m, CG_PATTERN_PROCEDURAL, "unrelated", T0);

    static const char *const hostile[] = {
        "\"AND OR NEAR( *",
        "NOT router",
        "router NOT",
        "query:router",
        "{query}: router",
        "^router",
        "rout*",
        "\"\"\"",
        "AND",
        "NEAR(router modem, 2)",
        "router\" OR \"x",
        "'; DROP TABLE patterns; --",
        "caf\xc3\xa9 \xe2\x80\x94 \xff\xfe router",
    };
    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
        recall_t r;
        recall(m, hostile[i], 5, &r);
        assert_in_range(r.n, 0, 1);
        if (r.n == 1)
            assert_item_query(&r, 0, "near the router AND the modem");
        recall_free(&r);
    }
    /* "NOT router" finds the router row: NOT is a plain word. */
    recall_t r;
    recall(m, "NOT router", 5, &r);
    assert_int_equal(r.n, 1);
    recall_free(&r);
    recall(m, "router\" OR \"x", 5, &r);
    assert_int_equal(r.n, 1);
    recall_free(&r);

    static const char *const empty[] = {"", "   ", "*", "\"\"", "()!?-+^:", "\t\n"};
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        recall(m, empty[i], 5, &r);
        assert_int_equal(r.n, 0);
        const char *want = "{\"patterns\":[],\"ranking\":\"lexical\"}";
        assert_int_equal(r.out.len, strlen(want));
        assert_memory_equal(r.out.p, want, r.out.len);
        recall_free(&r);
    }
    recall(m, NULL, 5, &r);
    assert_int_equal(r.n, 0);
    recall_free(&r);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_PROCEDURAL), 2);
    cg_memory_close(m);
}

/* Old rows go, recent ones stay, and the index follows. */
static void test_prune(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    int64_t now = T0;
    put(m, CG_PATTERN_PROCEDURAL, "old router question", now - 31 * 86400);
    put(m, CG_PATTERN_EPISODIC, "old episodic router", now - 40 * 86400);
    put(m, CG_PATTERN_PROCEDURAL, "edge router question", now - 30 * 86400);
    put(m, CG_PATTERN_PROCEDURAL, "new router question", now - 5);

    assert_int_equal(cg_memory_prune(m, now, 30), 2);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_PROCEDURAL), 2);
    assert_int_equal(cg_memory_count(m, CG_PATTERN_EPISODIC), 0);
    assert_int_equal(cg_memory_prune(m, now, 30), 0);
    assert_int_equal(cg_memory_prune(m, now, -1), -1);

    recall_t r;
    recall(m, "router question", 10, &r);
    assert_int_equal(r.n, 2);
    for (int i = 0; i < r.n; i++) {
        char *q = item_str(&r, i, "query");
        assert_null(strstr(q, "old"));
        free(q);
    }
    recall_free(&r);
    recall(m, "old", 10, &r);
    assert_int_equal(r.n, 0);
    recall_free(&r);
    cg_memory_close(m);
}

/* The folder is created (several levels), and the database is in WAL mode. */
static void test_creates_folder(void **state)
{
    fixture_t *f = *state;
    char path[320], dir[256], wal[400];
    snprintf(dir, sizeof(dir), "%s/a/b/c", f->dir);
    snprintf(path, sizeof(path), "%s/mem.db", dir);
    struct stat st;
    assert_int_not_equal(stat(dir, &st), 0);
    cg_memory_t *m = open_ok(path);
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(stat(path, &st), 0);
    put(m, CG_PATTERN_PROCEDURAL, "q", T0);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    assert_int_equal(stat(wal, &st), 0);
    cg_memory_close(m);
}

static void assert_open_fails(const char *path, const char *expect)
{
    char err[256] = "";
    cg_memory_t *m = cg_memory_open(path, err, sizeof(err));
    assert_null(m);
    assert_non_null(strstr(err, "semantic memory"));
    assert_non_null(strstr(err, expect));
}

static void test_open_failures(void **state)
{
    fixture_t *f = *state;
    char file[128], path[192];

    /* The parent is a regular file (root ignores chmod, so no permission test). */
    snprintf(file, sizeof(file), "%s/plain", f->dir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fputs("not a folder\n", fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/mem.db", file);
    assert_open_fails(path, "is not a folder");
    snprintf(path, sizeof(path), "%s/sub/mem.db", file);
    assert_open_fails(path, "cannot create folder");
    assert_open_fails("/proc/cg-no-such-dir/mem.db", "/proc/cg-no-such-dir");

    /* An existing file that is not SQLite. */
    fp = fopen(f->db, "w");
    assert_non_null(fp);
    for (int i = 0; i < 200; i++)
        fputs("this is certainly not an sqlite database file\n", fp);
    fclose(fp);
    assert_open_fails(f->db, "not a database");

    assert_open_fails("", "empty");
    /* A tiny buffer gets a terminated prefix. */
    char err[8];
    memset(err, 'X', sizeof(err));
    assert_null(cg_memory_open(path, err, sizeof(err)));
    assert_non_null(memchr(err, '\0', sizeof(err)));
}

/* Query text is cut to 2048 bytes at a UTF-8 boundary; long chunk_ids keep whole ids. */
static void test_bounds(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    cg_buf_t q = {0}, ids = {0};
    cg_buf_putc(&q, 'a');
    for (int i = 0; i < 1500; i++)
        cg_buf_puts(&q, "\xc3\xa9"); /* é */
    cg_buf_putc(&q, '\0');
    cg_buf_putc(&ids, '[');
    for (int i = 0; i < 2000; i++)
        cg_buf_printf(&ids, "%s\"doc%d \\\" ,]\"", i ? "," : "", i);
    cg_buf_puts(&ids, "]");

    cg_pattern_t p = {.kind = CG_PATTERN_PROCEDURAL,
                      .query = q.p,
                      .chunk_ids = ids.p,
                      .avg_score = -1,
                      .created_at = T0};
    assert_int_equal(cg_memory_put(m, &p), 0);

    /* Through the writer too (bounded in the queue). */
    cg_writer_t *w = cg_writer_start(&cg_memory_ops, f->db, 0, 4);
    assert_non_null(w);
    cg_pattern_t *hp = cg_xcalloc(1, sizeof(*hp));
    *hp = p;
    hp->kind = CG_PATTERN_EPISODIC;
    hp->query = cg_xstrndup(q.p, strlen(q.p));
    hp->chunk_ids = cg_xstrndup(ids.p, ids.len);
    assert_true(cg_writer_submit(w, hp));
    cg_writer_stop(w);

    for (int kind = CG_PATTERN_PROCEDURAL; kind <= CG_PATTERN_EPISODIC; kind++) {
        cg_pattern_t *out[1];
        assert_int_equal(cg_memory_recent(m, (cg_pattern_kind_t)kind, out, 1), 1);
        size_t n = strlen(out[0]->query);
        assert_int_equal(n, 2047); /* 'a' + 1023 whole é */
        assert_memory_equal(out[0]->query, q.p, n);
        size_t idn = strlen(out[0]->chunk_ids);
        assert_true(idn <= CG_MEMORY_MAX_CHUNK_IDS);
        assert_true(idn > CG_MEMORY_MAX_CHUNK_IDS - 32);
        cg_json_t j;
        cg_json_init(&j, 4096);
        assert_int_equal(cg_json_parse(&j, out[0]->chunk_ids, idn), CG_JSON_OK);
        assert_int_equal(cg_json_type(&j, 0), JSMN_ARRAY);
        assert_true(j.tok[0].size > 100);
        /* Every kept id is whole and in order. */
        int t = 1;
        for (int i = 0; i < j.tok[0].size; i++, t = cg_json_skip(&j, t)) {
            char want[32], *got = cg_json_strdup(&j, t, NULL);
            snprintf(want, sizeof(want), "doc%d \" ,]", i);
            assert_string_equal(got, want);
            free(got);
        }
        cg_json_free(&j);
        cg_pattern_free(out[0]);
    }
    cg_buf_free(&q);
    cg_buf_free(&ids);
    cg_memory_close(m);
}

/* A too-long chunk_ids that is not an array becomes []. */
static void test_bounds_not_array(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    char *junk = cg_xmalloc(CG_MEMORY_MAX_CHUNK_IDS + 10);
    memset(junk, 'x', CG_MEMORY_MAX_CHUNK_IDS + 9);
    junk[CG_MEMORY_MAX_CHUNK_IDS + 9] = '\0';
    cg_pattern_t p = {.kind = CG_PATTERN_PROCEDURAL, .query = "q", .chunk_ids = junk};
    assert_int_equal(cg_memory_put(m, &p), 0);
    cg_pattern_t *out[1];
    assert_int_equal(cg_memory_recent(m, CG_PATTERN_PROCEDURAL, out, 1), 1);
    assert_string_equal(out[0]->chunk_ids, "[]");
    cg_pattern_free(out[0]);
    free(junk);
    cg_memory_close(m);
}

static long count_at(const char *path, cg_pattern_kind_t kind)
{
    cg_memory_t *m = open_ok(path);
    long n = cg_memory_count(m, kind);
    cg_memory_close(m);
    return n;
}

static void test_writer_1000(void **state)
{
    fixture_t *f = *state;
    cg_writer_t *w = cg_writer_start(&cg_memory_ops, f->db, 30, 1024);
    assert_non_null(w);
    char q[64];
    for (int i = 0; i < 1000; i++) {
        snprintf(q, sizeof(q), "question number %d", i);
        assert_true(cg_writer_submit(w, new_pattern(CG_PATTERN_PROCEDURAL, q, time(NULL))));
    }
    cg_writer_flush(w);
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(written, 1000);
    assert_int_equal(dropped, 0);
    assert_int_equal(failed, 0);
    assert_int_equal(cg_writer_status(w, NULL, 0), 1);
    assert_int_equal(count_at(f->db, CG_PATTERN_PROCEDURAL), 1000);
    assert_false(cg_writer_submit(w, NULL));
    cg_writer_stop(w);
    cg_writer_stop(NULL);
}

/* The writer prunes at start with its prune_days. */
static void test_writer_prunes(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = open_ok(f->db);
    int64_t now = time(NULL);
    put(m, CG_PATTERN_PROCEDURAL, "ancient", now - 10 * 86400);
    put(m, CG_PATTERN_PROCEDURAL, "recent", now - 3600);
    cg_memory_close(m);

    cg_writer_t *w = cg_writer_start(&cg_memory_ops, f->db, 7, 8);
    cg_writer_flush(w);
    cg_writer_stop(w);
    assert_int_equal(count_at(f->db, CG_PATTERN_PROCEDURAL), 1);

    w = cg_writer_start(&cg_memory_ops, f->db, 0, 8); /* 0 disables pruning */
    cg_writer_flush(w);
    cg_writer_stop(w);
    assert_int_equal(count_at(f->db, CG_PATTERN_PROCEDURAL), 1);
}

/* A full queue drops (deterministically, with the thread paused). */
static void test_writer_queue_full(void **state)
{
    fixture_t *f = *state;
    cg_writer_t *w = cg_writer_start(&cg_memory_ops, f->db, 0, 4);
    assert_non_null(w);
    cg_writer_flush(w); /* open and idle */
    cg__writer_pause(w, true);
    for (int i = 0; i < 4; i++)
        assert_true(cg_writer_submit(w, new_pattern(CG_PATTERN_EPISODIC, "kept", T0)));
    for (int i = 0; i < 3; i++)
        assert_false(cg_writer_submit(w, new_pattern(CG_PATTERN_EPISODIC, "dropped", T0)));
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(written, 0);
    assert_int_equal(dropped, 3);
    cg__writer_pause(w, false);
    cg_writer_flush(w);
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(written, 4);
    assert_int_equal(dropped, 3);
    assert_int_equal(failed, 0);
    /* Room again after the drain. */
    assert_true(cg_writer_submit(w, new_pattern(CG_PATTERN_EPISODIC, "kept", T0)));
    /* Stop writes what is queued, even while paused. */
    cg__writer_pause(w, true);
    assert_true(cg_writer_submit(w, new_pattern(CG_PATTERN_EPISODIC, "kept", T0)));
    cg_writer_stop(w);
    assert_int_equal(count_at(f->db, CG_PATTERN_EPISODIC), 6);
}

/* A writer whose database cannot be opened fails every pattern, never blocks. */
static void test_writer_bad_path(void **state)
{
    fixture_t *f = *state;
    char file[128], path[192], err[256] = "";
    snprintf(file, sizeof(file), "%s/plain", f->dir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/sub/mem.db", file);

    cg_writer_t *w = cg_writer_start(&cg_memory_ops, path, 30, 4);
    assert_non_null(w);
    /* Before the open is known these may be queued; afterwards they fail at once. */
    for (int i = 0; i < 3; i++)
        cg_writer_submit(w, new_pattern(CG_PATTERN_PROCEDURAL, "q", T0));
    cg_writer_flush(w);
    assert_int_equal(cg_writer_status(w, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot create folder"));
    assert_non_null(strstr(err, path));
    for (int i = 0; i < 100; i++)
        assert_false(cg_writer_submit(w, new_pattern(CG_PATTERN_PROCEDURAL, "q", T0)));
    cg_writer_flush(w);
    uint64_t written, dropped, failed;
    cg_writer_counts(w, &written, &dropped, &failed);
    assert_int_equal(written, 0);
    assert_int_equal(dropped, 0);
    assert_int_equal(failed, 103);
    cg_writer_stop(w);
}

typedef struct submitter {
    cg_writer_t *w;
    int id;
    int n;
    int accepted;
} submitter_t;

static void *submit_many(void *arg)
{
    submitter_t *s = arg;
    char q[64];
    for (int i = 0; i < s->n; i++) {
        snprintf(q, sizeof(q), "worker %d question %d", s->id, i);
        if (cg_writer_submit(s->w, new_pattern(CG_PATTERN_PROCEDURAL, q, T0)))
            s->accepted++;
        if (i % 50 == 0)
            cg_writer_flush(s->w); /* many small transactions, interleaved */
    }
    return NULL;
}

/* Two writers (two connections) on one file at once, like worker processes. */
static void test_two_writers(void **state)
{
    fixture_t *f = *state;
    enum { N = 600 };
    submitter_t s[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        s[i] = (submitter_t){.w = cg_writer_start(&cg_memory_ops, f->db, 30, N), .id = i, .n = N};
        assert_non_null(s[i].w);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, submit_many, &s[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    uint64_t written[2], dropped[2], failed[2];
    for (int i = 0; i < 2; i++) {
        cg_writer_flush(s[i].w);
        cg_writer_counts(s[i].w, &written[i], &dropped[i], &failed[i]);
        cg_writer_stop(s[i].w); /* before any assertion can leave the test */
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(s[i].accepted, N);
        assert_int_equal(written[i], N);
        assert_int_equal(dropped[i] + failed[i], 0);
    }
    assert_int_equal(count_at(f->db, CG_PATTERN_PROCEDURAL), 2 * N);
    cg_memory_t *m = open_ok(f->db);
    recall_t r;
    recall(m, "worker 1 question 599", 50, &r);
    assert_int_equal(r.n, 50);
    assert_item_query(&r, 0, "worker 1 question 599");
    recall_free(&r);
    cg_memory_close(m);
}

typedef struct opener {
    pthread_barrier_t *start;
    const char *path;
    bool ok;
    char err[256];
} opener_t;

static void *open_at_once(void *arg)
{
    opener_t *o = arg;
    pthread_barrier_wait(o->start);
    cg_memory_t *m = cg_memory_open(o->path, o->err, sizeof(o->err));
    o->ok = m != NULL && cg_memory_count(m, CG_PATTERN_PROCEDURAL) == 0;
    cg_memory_close(m);
    return NULL;
}

/* Workers starting together all open a new file (WAL switch and schema race). */
static void test_concurrent_open(void **state)
{
    fixture_t *f = *state;
    enum { ROUNDS = 100, THREADS = 4 };
    char path[192];
    int failures = 0;
    char first_err[256] = "";
    for (int round = 0; round < ROUNDS; round++) {
        snprintf(path, sizeof(path), "%s/r%d/mem.db", f->dir, round);
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, THREADS);
        opener_t o[THREADS];
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++) {
            o[i] = (opener_t){.start = &start, .path = path};
            assert_int_equal(pthread_create(&t[i], NULL, open_at_once, &o[i]), 0);
        }
        for (int i = 0; i < THREADS; i++) {
            pthread_join(t[i], NULL);
            if (!o[i].ok && failures++ == 0)
                memcpy(first_err, o[i].err, sizeof(first_err));
        }
        pthread_barrier_destroy(&start);
    }
    if (failures > 0)
        fail_msg("%d of %d opens failed, first: %s", failures, ROUNDS * THREADS, first_err);
}

/* Two worker processes open a new file at the same moment and write to it. */
static void test_two_processes(void **state)
{
    fixture_t *f = *state;
    enum { N = 300, PROCS = 3 };
    char path[192];
    snprintf(path, sizeof(path), "%s/data/mem.db", f->dir); /* the folder is made by both */
    pid_t pid[PROCS];
    int forked = 0;
    for (; forked < PROCS; forked++) {
        pid[forked] = fork();
        if (pid[forked] < 0)
            break;
        if (pid[forked] == 0) {
            cg_writer_t *w = cg_writer_start(&cg_memory_ops, path, 30, N);
            if (w == NULL)
                _exit(2);
            submitter_t sub = {.w = w, .id = forked, .n = N};
            submit_many(&sub);
            cg_writer_flush(w);
            uint64_t written, dropped, failed;
            cg_writer_counts(w, &written, &dropped, &failed);
            char err[256] = "";
            if (cg_writer_status(w, err, sizeof(err)) != 1)
                fprintf(stderr, "child %d: %s\n", forked, err);
            cg_writer_stop(w);
            _exit(sub.accepted == N && written == N && dropped + failed == 0 ? 0 : 1);
        }
    }
    /* Reap every child before any assertion can end the test. */
    int status[PROCS];
    for (int i = 0; i < forked; i++) {
        if (waitpid(pid[i], &status[i], 0) != pid[i])
            status[i] = -1;
    }
    assert_int_equal(forked, PROCS);
    for (int i = 0; i < PROCS; i++) {
        assert_true(WIFEXITED(status[i]));
        assert_int_equal(WEXITSTATUS(status[i]), 0);
    }
    assert_int_equal(count_at(path, CG_PATTERN_PROCEDURAL), PROCS * N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_ranking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_k_clamp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_fts_syntax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
        cmocka_unit_test_setup_teardown(test_creates_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds_not_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_1000, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_prunes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_queue_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_bad_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
