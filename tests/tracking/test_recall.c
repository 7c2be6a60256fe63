/*
 * Semantic recall (SPEC §8): vectors kept with patterns in the SQLite store,
 * recall ranked by cosine over the lexical and recent candidates, the
 * fallbacks to lexical ranking, the shared ranking alone, the stored form of
 * a vector, and the migration of a database made before vectors existed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "citegate/json.h"
#include "tracking/memory.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0  1795309323 /* 2026-11-22T01:02:03Z */
#define DIM 8

typedef struct fixture {
    char dir[64];
    char db[128];
    cg_memory_t *m;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/cg_recall_XXXXXX");
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
    cg_memory_close(f->m);
    char path[160];
    static const char *const tails[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s%s", f->db, tails[i]);
        unlink(path);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static cg_memory_t *open_ok(const char *path)
{
    char err[256] = "";
    cg_memory_t *m = cg_memory_open(path, err, sizeof(err));
    if (m == NULL)
        fail_msg("open %s: %s", path, err);
    return m;
}

/* A unit vector of DIM along axis a, tilted a little towards axis b. */
static void direction(cg_vector_t *v, const char *model, int a, int b, float tilt)
{
    v->v = cg_xcalloc(DIM, sizeof(float));
    v->dim = DIM;
    v->v[a] = 1.0f;
    v->v[b] += tilt;
    v->model = cg_xstrndup(model, strlen(model));
}

/* Stores a procedural pattern, with vec (copied) or without (NULL). */
static void put(cg_memory_t *m, const char *query, int64_t at, const cg_vector_t *vec)
{
    cg_pattern_t p = {.kind = CG_PATTERN_PROCEDURAL,
                      .query = (char *)query,
                      .citation_rate = 0.5,
                      .avg_score = -1,
                      .citations = 1,
                      .available = 2,
                      .chunk_ids = "[\"doc1\"]",
                      .created_at = at};
    if (vec)
        cg_vector_copy(&p.vec, vec);
    assert_int_equal(cg_memory_put(m, &p), 0);
    cg_vector_free(&p.vec);
}

typedef struct result {
    cg_buf_t out;
    cg_json_t j;
    int arr, n;
    char *ranking;
} result_t;

static void recall(cg_memory_t *m, const char *q, int k, const cg_vector_t *vec, result_t *r)
{
    memset(r, 0, sizeof(*r));
    cg_recall_t rq = {q, k, vec};
    assert_int_equal(cg_memory_recall(m, &rq, &r->out), 0);
    cg_json_init(&r->j, 1024);
    assert_int_equal(cg_json_parse(&r->j, r->out.p, r->out.len), CG_JSON_OK);
    r->arr = cg_json_get(&r->j, 0, "patterns");
    assert_int_equal(cg_json_type(&r->j, r->arr), JSMN_ARRAY);
    r->n = r->j.tok[r->arr].size;
    r->ranking = cg_json_strdup(&r->j, cg_json_get(&r->j, 0, "ranking"), NULL);
    assert_non_null(r->ranking);
}

static int item(const result_t *r, int i)
{
    assert_in_range(i, 0, r->n - 1);
    int t = r->arr + 1;
    while (i-- > 0)
        t = cg_json_skip(&r->j, t);
    return t;
}

static void assert_query(const result_t *r, int i, const char *want)
{
    char *s = cg_json_strdup(&r->j, cg_json_get(&r->j, item(r, i), "query"), NULL);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
}

static double score(const result_t *r, int i)
{
    double v;
    assert_true(cg_json_number(&r->j, cg_json_get(&r->j, item(r, i), "score"), &v));
    return v;
}

static void result_free(result_t *r)
{
    free(r->ranking);
    cg_json_free(&r->j);
    cg_buf_free(&r->out);
}

#define CHARGE "How do I charge the X100?"
#define REFUND "What is the refund policy?"
#define CABLE  "Which charge cable fits?"

/* The SPEC's example: the stored questions and their directions. */
static void store_examples(cg_memory_t *m, const char *model)
{
    cg_vector_t charge, refund;
    direction(&charge, model, 0, 1, 0.2f);
    direction(&refund, model, 2, 3, 0.1f);
    put(m, CHARGE, T0, &charge);
    put(m, REFUND, T0 + 1, &refund);
    cg_vector_free(&charge);
    cg_vector_free(&refund);
}

/* A paraphrase sharing no word is found through the recent candidates,
 * first, with its cosine as score; the unrelated question ranks below. */
static void test_paraphrase_first(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = f->m = open_ok(f->db);
    store_examples(m, "emb-1");
    cg_vector_t q;
    direction(&q, "emb-1", 0, 1, 0.25f);
    result_t r;
    recall(m, "power up my handset", 2, &q, &r);
    assert_string_equal(r.ranking, "semantic");
    assert_int_equal(r.n, 2);
    assert_query(&r, 0, CHARGE);
    assert_query(&r, 1, REFUND);
    double want = (1.0 + 0.2 * 0.25) / (sqrt(1.04) * sqrt(1.0625));
    assert_true(fabs(score(&r, 0) - want) < 1e-6);
    assert_true(fabs(score(&r, 1)) < 1e-6);
    result_free(&r);
    recall(m, "power up my handset", 1, &q, &r);
    assert_int_equal(r.n, 1);
    assert_query(&r, 0, CHARGE);
    result_free(&r);
    /* without the vector the same words find nothing */
    recall(m, "power up my handset", 2, NULL, &r);
    assert_string_equal(r.ranking, "lexical");
    assert_int_equal(r.n, 0);
    result_free(&r);
    cg_vector_free(&q);
}

/* A query vector of another model, or of another size, compares with
 * nothing: the answer is the lexical one and says so. */
static void test_other_model_or_size_is_lexical(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = f->m = open_ok(f->db);
    store_examples(m, "emb-1");
    cg_vector_t other;
    direction(&other, "emb-2", 0, 1, 0.2f);
    result_t r;
    recall(m, "refund charge", 2, &other, &r);
    assert_string_equal(r.ranking, "lexical");
    assert_int_equal(r.n, 2);
    assert_true(score(&r, 0) > 0); /* -bm25 */
    result_free(&r);
    cg_vector_t small = {cg_xcalloc(4, sizeof(float)), 4, cg_xstrndup("emb-1", 5)};
    small.v[0] = 1;
    recall(m, "refund", 2, &small, &r);
    assert_string_equal(r.ranking, "lexical");
    assert_int_equal(r.n, 1);
    assert_query(&r, 0, REFUND);
    result_free(&r);
    cg_vector_free(&other);
    cg_vector_free(&small);
}

/* A lexical match stored without a vector follows the ranked ones with
 * score 0; a recent pattern without one, not matching, is not returned. */
static void test_patterns_without_vector(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = f->m = open_ok(f->db);
    store_examples(m, "emb-1");
    put(m, CABLE, T0 + 2, NULL);
    put(m, "Unrelated and unembedded", T0 + 3, NULL);
    cg_vector_t q;
    direction(&q, "emb-1", 2, 3, 0.0f);
    result_t r;
    recall(m, "charge", 5, &q, &r);
    assert_string_equal(r.ranking, "semantic");
    assert_int_equal(r.n, 3);
    assert_query(&r, 0, REFUND); /* the vector decides, not the words */
    assert_query(&r, 1, CHARGE);
    assert_query(&r, 2, CABLE);
    assert_true(score(&r, 2) == 0);
    result_free(&r);
    cg_vector_free(&q);
}

/* Vectors come back as they were stored. */
static void test_vector_round_trip(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = f->m = open_ok(f->db);
    cg_vector_t v;
    direction(&v, "emb-1", 5, 6, -0.75f);
    v.v[7] = 1e-30f;
    put(m, CHARGE, T0, &v);
    put(m, REFUND, T0 - 1, NULL);
    cg_pattern_t *out[2];
    assert_int_equal(cg_memory_recent(m, CG_PATTERN_PROCEDURAL, out, 2), 2);
    assert_int_equal(out[0]->vec.dim, DIM);
    assert_memory_equal(out[0]->vec.v, v.v, DIM * sizeof(float));
    assert_string_equal(out[0]->vec.model, "emb-1");
    assert_null(out[1]->vec.v);
    cg_pattern_free(out[0]);
    cg_pattern_free(out[1]);
    cg_vector_free(&v);
}

/* Many candidates: only the 200 newest with a vector are looked at, and k
 * of them come back, best first. */
static void test_recent_bound_and_k(void **state)
{
    fixture_t *f = *state;
    cg_memory_t *m = f->m = open_ok(f->db);
    cg_vector_t best, other;
    direction(&best, "emb-1", 0, 1, 0.0f);
    direction(&other, "emb-1", 1, 2, 0.0f);
    put(m, "oldest and closest", T0 - 1000, &best);
    char q[64];
    for (int i = 0; i < CG_RECALL_RECENT; i++) {
        other.v[0] = (float)i / 1000.0f; /* newer ones closer */
        snprintf(q, sizeof(q), "pattern %d", i);
        put(m, q, T0 + i, &other);
    }
    result_t r;
    recall(m, "no word in common", 3, &best, &r);
    assert_string_equal(r.ranking, "semantic");
    assert_int_equal(r.n, 3);
    assert_query(&r, 0, "pattern 199"); /* the oldest fell out of the 200 */
    assert_query(&r, 1, "pattern 198");
    assert_true(score(&r, 0) > score(&r, 1));
    result_free(&r);
    /* as a lexical match the oldest is a candidate again, and wins */
    recall(m, "closest", 3, &best, &r);
    assert_query(&r, 0, "oldest and closest");
    assert_true(fabs(score(&r, 0) - 1.0) < 1e-9);
    result_free(&r);
    cg_vector_free(&best);
    cg_vector_free(&other);
}

/* A file made before vectors existed (schema 1) opens, is migrated, keeps
 * its rows, and takes vectors from then on. */
static void test_migrates_schema_1(void **state)
{
    fixture_t *f = *state;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    const char *v1 =
        "CREATE TABLE patterns (id INTEGER PRIMARY KEY,"
        " kind TEXT NOT NULL CHECK (kind IN ('procedural', 'episodic')), query TEXT NOT NULL,"
        " citation_rate REAL NOT NULL, avg_score REAL, citations INTEGER NOT NULL,"
        " available INTEGER NOT NULL, chunk_ids TEXT NOT NULL, created_at INTEGER NOT NULL);"
        "CREATE VIRTUAL TABLE patterns_fts USING fts5 (query, content = 'patterns',"
        " content_rowid = 'id');"
        "CREATE TRIGGER patterns_ai AFTER INSERT ON patterns BEGIN"
        " INSERT INTO patterns_fts (rowid, query) VALUES (new.id, new.query); END;"
        "INSERT INTO patterns (kind, query, citation_rate, citations, available, chunk_ids,"
        " created_at) VALUES ('procedural', 'What is the refund policy?', 1, 1, 1, '[]', 1);"
        "PRAGMA user_version = 1;";
    assert_int_equal(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    cg_memory_t *m = f->m = open_ok(f->db);
    cg_vector_t charge;
    direction(&charge, "emb-1", 0, 1, 0.0f);
    put(m, CHARGE, T0, &charge);
    result_t r;
    recall(m, "refund", 2, NULL, &r);
    assert_int_equal(r.n, 1);
    assert_query(&r, 0, REFUND);
    result_free(&r);
    recall(m, "handset", 2, &charge, &r);
    assert_string_equal(r.ranking, "semantic");
    assert_query(&r, 0, CHARGE);
    result_free(&r);
    cg_vector_free(&charge);

    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* opened again: nothing to migrate */
    cg_memory_close(m);
    f->m = open_ok(f->db);
}

/* ---- The ranking alone ---------------------------------------------------- */

static cg_candidate_t *cand(cg_candidates_t *cs, int64_t id, const char *q, int lexical_rank,
                            const cg_vector_t *vec)
{
    bool fresh;
    cg_candidate_t *c = cg_candidates_add(cs, id, &fresh);
    if (fresh) {
        cg_buf_puts(&c->query, q);
        c->created_at = T0 + id;
        c->lexical = 10.0 - lexical_rank;
        if (vec)
            cg_vector_copy(&c->vec, vec);
    }
    if (lexical_rank >= 0)
        c->lexical_rank = lexical_rank;
    return c;
}

/* One row found twice is one candidate; ties go to the newer; k holds. */
static void test_rank_dedup_ties_k(void **state)
{
    (void)state;
    cg_candidates_t cs = {0};
    cg_vector_t a, b;
    direction(&a, "m", 0, 1, 0.0f);
    direction(&b, "m", 1, 2, 0.0f);
    cand(&cs, 1, "old twin", 0, &a);
    cand(&cs, 2, "new twin", -1, &a);
    cand(&cs, 3, "far", -1, &b);
    cand(&cs, 1, "old twin", -1, &a); /* also among the recent ones */
    assert_int_equal(cs.n, 3);
    cg_buf_t out = {0};
    cg_recall_t r = {"q", 2, &a};
    cg_store_rank_json(&cs, &r, &out);
    cg_buf_putc(&out, '\0');
    const char *want_new = "{\"patterns\":[{\"query\":\"new twin\"";
    assert_memory_equal(out.p, want_new, strlen(want_new));
    assert_non_null(strstr(out.p, "\"old twin\""));
    assert_null(strstr(out.p, "\"far\""));
    assert_non_null(strstr(out.p, "],\"ranking\":\"semantic\"}"));
    cg_buf_free(&out);
    cg_candidates_free(&cs);
    cg_vector_free(&a);
    cg_vector_free(&b);
}

/* No candidates at all, with or without a vector: an empty lexical list. */
static void test_rank_empty(void **state)
{
    (void)state;
    cg_candidates_t cs = {0};
    cg_vector_t a;
    direction(&a, "m", 0, 1, 0.0f);
    cg_buf_t out = {0};
    cg_recall_t r = {"", 5, &a};
    cg_store_rank_json(&cs, &r, &out);
    cg_buf_putc(&out, '\0');
    assert_string_equal(out.p, "{\"patterns\":[],\"ranking\":\"lexical\"}");
    cg_buf_free(&out);
    cg_vector_free(&a);
}

/* ---- Vectors -------------------------------------------------------------- */

static void test_vector_helpers(void **state)
{
    (void)state;
    float v[3] = {1.0f, -2.0f, 0.5f};
    cg_buf_t packed = {0};
    cg_vector_pack(v, 3, &packed);
    assert_int_equal(packed.len, 12);
    assert_memory_equal(packed.p, "\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x3f", 12);
    float *back;
    uint32_t dim;
    assert_int_equal(cg_vector_unpack(packed.p, packed.len, &back, &dim), 0);
    assert_int_equal(dim, 3);
    assert_memory_equal(back, v, sizeof(v));
    free(back);
    assert_int_equal(cg_vector_unpack(packed.p, 11, &back, &dim), -1);
    assert_int_equal(cg_vector_unpack(packed.p, 0, &back, &dim), -1);
    memcpy(packed.p + 4, "\x00\x00\x80\x7f", 4); /* +inf */
    assert_int_equal(cg_vector_unpack(packed.p, packed.len, &back, &dim), -1);
    cg_buf_free(&packed);
    char big[(CG_EMBED_MAX_DIM + 1) * 4] = {0};
    assert_int_equal(cg_vector_unpack(big, sizeof(big), &back, &dim), -1);
    assert_int_equal(cg_vector_unpack(big, sizeof(big) - 4, &back, &dim), 0);
    free(back);

    float a[2] = {3, 4}, b[2] = {-3, -4}, z[2] = {0, 0};
    assert_true(fabs(cg_vector_cosine(a, a, 2) - 1) < 1e-12);
    assert_true(fabs(cg_vector_cosine(a, b, 2) + 1) < 1e-12);
    assert_true(cg_vector_cosine(a, z, 2) == 0);

    cg_vector_t x = {a, 2, "m"}, y = {b, 2, "m"}, w = {b, 2, "n"}, s = {b, 1, "m"}, none = {0};
    assert_true(cg_vector_comparable(&x, &y));
    assert_false(cg_vector_comparable(&x, &w));
    assert_false(cg_vector_comparable(&x, &s));
    assert_false(cg_vector_comparable(&x, &none));
    cg_vector_t copy;
    cg_vector_copy(&copy, &x);
    assert_true(copy.v != x.v && copy.model != x.model);
    assert_true(cg_vector_comparable(&copy, &x));
    cg_vector_free(&copy);
    assert_null(copy.v);
    cg_vector_copy(&copy, &none);
    assert_null(copy.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_paraphrase_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_model_or_size_is_lexical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patterns_without_vector, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vector_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recent_bound_and_k, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_schema_1, setup, teardown),
        cmocka_unit_test(test_rank_dedup_ties_k),
        cmocka_unit_test(test_rank_empty),
        cmocka_unit_test(test_vector_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
