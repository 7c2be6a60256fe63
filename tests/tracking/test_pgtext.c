/*
 * Unit tests of the PostgreSQL store's parameter texts (src/tracking/pgtext.h):
 * array literals of a batch, the bounds that cut a batch into statements,
 * the full-text query of a recall, and the UTF-8 repair of user text. No
 * server: these are the exact strings libpq would send.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tracking/pgtext.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FFFD "\xEF\xBF\xBD"

static void assert_buf(const cg_buf_t *b, const char *want)
{
    assert_int_equal(b->len, strlen(want));
    assert_memory_equal(b->p, want, b->len);
}

static void utf8_is(const char *in, size_t n, const char *want)
{
    cg_buf_t b = {0};
    cg_pg_put_utf8(&b, in, n);
    assert_buf(&b, want);
    cg_buf_free(&b);
}

static void test_utf8_repair(void **state)
{
    (void)state;
    utf8_is("plain", 5, "plain");
    utf8_is("d\xC3\xA9j\xC3\xA0 \xE2\x82\xAC \xF0\x9F\x98\x80", 15,
            "d\xC3\xA9j\xC3\xA0 \xE2\x82\xAC \xF0\x9F\x98\x80");
    utf8_is("a\xFF"
            "b",
            3, "a" FFFD "b");
    utf8_is("cut \xC3", 5, "cut " FFFD);                 /* truncated at the end */
    utf8_is("\xC0\xAF", 2, FFFD FFFD);                   /* overlong '/' */
    utf8_is("\xED\xA0\x80", 3, FFFD FFFD FFFD);          /* a UTF-16 surrogate */
    utf8_is("\xF4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD); /* above U+10FFFF */
    utf8_is("\xE2\x82"
            "x",
            3, FFFD FFFD "x"); /* cut inside a sequence */
    utf8_is("", 0, "");
}

static void elem_is(const char *in, const char *want)
{
    cg_buf_t b = {0};
    cg_pg_array_elem(&b, in, strlen(in));
    assert_buf(&b, want);
    cg_buf_free(&b);
}

static void test_array_elements(void **state)
{
    (void)state;
    elem_is("a\"b\\c", "\"a\\\"b\\\\c\"");
    elem_is("{x,y}", "\"{x,y}\""); /* braces and commas need only the quotes */
    elem_is("NULL", "\"NULL\"");   /* quoted: the text, not a null */
    elem_is("", "\"\"");
    elem_is("bad \xFF", "\"bad " FFFD "\"");
}

static cg_pattern_t *pattern(cg_pattern_kind_t kind, const char *q, const char *ids)
{
    cg_pattern_t *p = cg_xcalloc(1, sizeof(*p));
    p->kind = kind;
    p->query = q ? cg_xstrndup(q, strlen(q)) : NULL;
    p->chunk_ids = ids ? cg_xstrndup(ids, strlen(ids)) : NULL;
    p->citation_rate = 0.5;
    p->avg_score = -1;
    p->citations = 1;
    p->available = 2;
    p->created_at = 1795309323;
    return p;
}

static void test_rows(void **state)
{
    (void)state;
    cg_pattern_t *p[2] = {pattern(CG_PATTERN_PROCEDURAL, "How \"so\"?", "[\"doc1\"]"),
                          pattern(CG_PATTERN_EPISODIC, NULL, NULL)};
    p[1]->citation_rate = NAN;
    p[1]->avg_score = 0.25;
    p[1]->citations = 0;
    p[1]->available = 7;
    p[1]->created_at = -1;
    p[0]->vec.v = cg_xmalloc(2 * sizeof(float));
    p[0]->vec.v[0] = 1.0f; /* 0x3f800000, stored little-endian */
    p[0]->vec.v[1] = -2.0f; /* 0xc0000000 */
    p[0]->vec.dim = 2;
    p[0]->vec.model = cg_xstrndup("emb \"v1\"", 8);
    cg_pg_rows_t rows = {0};
    cg_pg_rows_build(&rows, p, 2);
    /* each column is one NUL-terminated array literal */
    const char *want[CG_PG_NCOLS] = {
        [CG_PG_KIND] = "{procedural,episodic}",
        [CG_PG_QUERY] = "{\"How \\\"so\\\"?\",\"\"}",
        [CG_PG_RATE] = "{0.5,0}",
        [CG_PG_SCORE] = "{NULL,0.25}",
        [CG_PG_CITATIONS] = "{1,0}",
        [CG_PG_AVAILABLE] = "{2,7}",
        [CG_PG_IDS] = "{\"[\\\"doc1\\\"]\",\"[]\"}",
        [CG_PG_CREATED] = "{1795309323,-1}",
        [CG_PG_VEC] = "{0000803f000000c0,NULL}",
        [CG_PG_MODEL] = "{\"emb \\\"v1\\\"\",NULL}",
    };
    for (int c = 0; c < CG_PG_NCOLS; c++)
        assert_string_equal(rows.col[c].p, want[c]);

    /* built again into the same buffers: emptied first */
    cg_pg_rows_build(&rows, p, 1);
    assert_string_equal(rows.col[CG_PG_KIND].p, "{procedural}");
    cg_pg_rows_free(&rows);
    cg_pattern_free(p[0]);
    cg_pattern_free(p[1]);
}

static void test_rows_bound_text(void **state)
{
    (void)state;
    char *q = malloc(CG_MEMORY_MAX_QUERY + 100);
    memset(q, 'q', CG_MEMORY_MAX_QUERY + 99);
    q[CG_MEMORY_MAX_QUERY + 99] = '\0';
    cg_pattern_t *p = pattern(CG_PATTERN_PROCEDURAL, q, NULL);
    cg_pg_rows_t rows = {0};
    cg_pg_rows_build(&rows, &p, 1);
    /* {"qqq…"}: the query cut to CG_MEMORY_MAX_QUERY, as SQLite stores it */
    assert_int_equal(strlen(rows.col[CG_PG_QUERY].p), CG_MEMORY_MAX_QUERY + 4);
    cg_pg_rows_free(&rows);
    cg_pattern_free(p);
    free(q);
}

static void test_chunks(void **state)
{
    (void)state;
    enum { N = 1500 };
    cg_pattern_t **small = calloc(N, sizeof(*small));
    for (int i = 0; i < N; i++)
        small[i] = pattern(CG_PATTERN_PROCEDURAL, "short question", "[]");
    assert_int_equal(cg_pg_chunk(small, 0), 0);
    assert_int_equal(cg_pg_chunk(small, 7), 7);
    assert_int_equal(cg_pg_chunk(small, N), CG_PG_MAX_ROWS); /* rows bound */
    assert_int_equal(cg_pg_chunk(small + CG_PG_MAX_ROWS, N - CG_PG_MAX_ROWS), N - CG_PG_MAX_ROWS);

    /* patterns at the largest stored size: the bytes bound cuts first, and the
     * arrays built from a chunk stay within it even when every byte is escaped */
    char *q = malloc(CG_MEMORY_MAX_QUERY + 1), *ids = malloc(CG_MEMORY_MAX_CHUNK_IDS + 1);
    memset(q, '"', CG_MEMORY_MAX_QUERY);
    q[CG_MEMORY_MAX_QUERY] = '\0';
    ids[0] = '[';
    memset(ids + 1, '\\', CG_MEMORY_MAX_CHUNK_IDS - 2);
    ids[CG_MEMORY_MAX_CHUNK_IDS - 1] = ']';
    ids[CG_MEMORY_MAX_CHUNK_IDS] = '\0';
    for (int i = 0; i < N; i++) {
        cg_pattern_free(small[i]);
        small[i] = pattern(CG_PATTERN_PROCEDURAL, q, ids);
    }
    size_t k = cg_pg_chunk(small, N);
    assert_in_range(k, 2, CG_PG_MAX_ROWS - 1);
    cg_pg_rows_t rows = {0};
    cg_pg_rows_build(&rows, small, k);
    size_t total = 0;
    for (int c = 0; c < CG_PG_NCOLS; c++)
        total += rows.col[c].len;
    assert_true(total <= CG_PG_MAX_BYTES);
    cg_pg_rows_free(&rows);
    assert_int_equal(cg_pg_chunk(small, 1), 1); /* never 0 for a non-empty batch */
    for (int i = 0; i < N; i++)
        cg_pattern_free(small[i]);
    free(small);
    free(q);
    free(ids);
}

static void or_is(const char *q, int words, const char *want)
{
    cg_buf_t b = {0};
    assert_int_equal(cg_pg_or_query(q, &b), words);
    assert_string_equal(b.p, want); /* NUL-terminated */
    cg_buf_free(&b);
}

static void test_or_query(void **state)
{
    (void)state;
    or_is("How do I charge the X100-battery?", 7,
          "How or do or I or charge or the or X100 or battery");
    /* websearch_to_tsquery's syntax cannot come through: quotes, '-', "or" */
    or_is("\"exact phrase\" -not or OR Or x", 4, "exact or phrase or not or x");
    or_is("'; DROP TABLE citegate_patterns; --", 4, "DROP or TABLE or citegate or patterns");
    or_is("", 0, "");
    or_is("!!! ... ???", 0, "");
    or_is("caf\xC3\xA9 \xFF"
          "x",
          2, "caf\xC3\xA9 or " FFFD "x");

    char many[400] = "";
    for (int i = 0; i < 40; i++)
        strcat(many, "w ");
    cg_buf_t b = {0};
    assert_int_equal(cg_pg_or_query(many, &b), CG_STORE_MAX_WORDS);
    cg_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_repair), cmocka_unit_test(test_array_elements),
        cmocka_unit_test(test_rows),        cmocka_unit_test(test_rows_bound_text),
        cmocka_unit_test(test_chunks),      cmocka_unit_test(test_or_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
