/* Citation tracking of one answer (SPEC §8), from the transformer's tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/track.h"
#include "citegate/xform.h"
#include "profiles.h"

#include <stdlib.h>
#include <string.h>

/* Three citations: doc1 and doc3 have scores (rerank 2.0 -> 0.5, 3.0 -> 0.75). */
static const char *CTX =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":["
    "{\"title\":\"A\",\"url\":\"https://a.example/\",\"filepath\":\"a\",\"chunk_id\":\"0\"},"
    "{\"title\":\"B\",\"filepath\":\"b\",\"chunk_id\":\"0\"},"
    "{\"title\":\"C\",\"filepath\":\"c\",\"chunk_id\":\"0\"}],"
    "\"all_retrieved_documents\":["
    "{\"title\":\"A\",\"filepath\":\"a\",\"chunk_id\":\"0\",\"rerank_score\":2.0},"
    "{\"title\":\"C\",\"filepath\":\"c\",\"chunk_id\":\"0\",\"rerank_score\":3.0}]}}}]}\n\n";

static void track(const char *profile, const char *ctx, const char *content, cg_track_t *t)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    cg_buf_t in = {0};
    if (ctx)
        cg_buf_puts(&in, ctx);
    cg_buf_printf(&in,
                  "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},"
                  "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
                  content);
    cg_xform_feed(x, in.p, in.len, &out);
    cg_xform_finish(x, CG_END_EOF, &out);
    cg_track_answer(x, t);
    cg_out_free(&out);
    cg_buf_free(&in);
    cg_xform_free(x);
}

static void test_counts_repeats_and_unique_citations(void **state)
{
    (void)state;
    cg_track_t t;
    track("openwebui", CTX, "x [doc3] y [doc1][doc3] z [doc3] [doc9] [doc0] [1]", &t);
    assert_true(t.tracked);
    assert_false(t.skipped);
    assert_int_equal(t.available, 3);
    assert_int_equal(t.cited, 2);
    assert_int_equal(t.references, 4); /* [doc9], [doc0] and [1] name no citation */
    assert_true(t.rate > 0.666 && t.rate < 0.667);
    assert_true(t.avg_score > 0.624 && t.avg_score < 0.626); /* (0.75 + 0.5) / 2 */
    assert_int_equal(t.cited_ids.len, strlen("[\"doc3\",\"doc1\"]"));
    assert_memory_equal(t.cited_ids.p, "[\"doc3\",\"doc1\"]", t.cited_ids.len);
    cg_buf_putc(&t.detail, '\0');
    assert_non_null(strstr(t.detail.p, "{\"id\":\"doc1\",\"was_cited\":true,\"citation_density\":0.25}"));
    assert_non_null(strstr(t.detail.p, "{\"id\":\"doc2\",\"was_cited\":false,\"citation_density\":0}"));
    assert_non_null(strstr(t.detail.p, "{\"id\":\"doc3\",\"was_cited\":true,\"citation_density\":0.75}"));
    cg_track_free(&t);
}

/* Annotation-sourced citations count as referenced once each (SPEC §6):
 * cited, with density; a text reference to one adds to its count, and the
 * citation is still cited once. */
static void test_annotations_count_as_cited(void **state)
{
    (void)state;
    static const char *ANNS =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"annotations\":["
        "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://a.example/\",\"title\":\"A\"}},"
        "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://b.example/\",\"title\":\"B\"}},"
        "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://a.example/\",\"title\":\"A\"}},"
        "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://c.example/\",\"title\":\"C\"}}"
        "]}}]}\n\n";
    cg_track_t t;
    track("openai", ANNS, "Linked text, and [2] again.", &t);
    assert_int_equal(t.available, 3);
    assert_int_equal(t.cited, 3);
    assert_int_equal(t.references, 4); /* three mentions, one reference */
    assert_true(t.rate == 1);
    assert_int_equal(t.cited_ids.len, strlen("[\"1\",\"2\",\"3\"]"));
    assert_memory_equal(t.cited_ids.p, "[\"1\",\"2\",\"3\"]", t.cited_ids.len);
    cg_buf_putc(&t.detail, '\0');
    assert_non_null(strstr(t.detail.p, "{\"id\":\"2\",\"was_cited\":true,\"citation_density\":0.5}"));
    assert_non_null(strstr(t.detail.p, "{\"id\":\"3\",\"was_cited\":true,\"citation_density\":0.25}"));
    cg_track_free(&t);
}

static void test_no_citations_available(void **state)
{
    (void)state;
    cg_track_t t;
    track("webchat", NULL, "Nothing to cite [doc1] [1].", &t);
    assert_true(t.tracked);
    assert_int_equal(t.available, 0);
    assert_int_equal(t.cited, 0);
    assert_int_equal(t.references, 0);
    assert_true(t.rate == 0);
    assert_true(t.avg_score < 0);
    cg_track_free(&t);
}

static void test_dont_know_is_skipped(void **state)
{
    (void)state;
    cg_track_t t;
    track("openai", CTX, "I do not know. [doc1]", &t);
    assert_true(t.skipped);
    cg_track_free(&t);
    track("openai", CTX, "I do know [doc1].", &t);
    assert_false(t.skipped);
    assert_int_equal(t.cited, 1);
    cg_track_free(&t);
}

static void test_profiles_without_references_are_not_tracked(void **state)
{
    (void)state;
    cg_track_t t;
    track("structured", CTX, "[doc1]", &t);
    assert_false(t.tracked);
    cg_track_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_repeats_and_unique_citations),
        cmocka_unit_test(test_annotations_count_as_cited),
        cmocka_unit_test(test_no_citations_available),
        cmocka_unit_test(test_dont_know_is_skipped),
        cmocka_unit_test(test_profiles_without_references_are_not_tracked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
