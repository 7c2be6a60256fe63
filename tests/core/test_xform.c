/* Stream transformer: fixtures, end-of-stream rules, SSE field handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/json.h"
#include "citegate/xform.h"
#include "profiles.h"
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *fixture(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", CG_FIXTURES, name);
    return read_file(path, n);
}

/* Runs s through the default configuration in one read. */
static char *xf(const char *s, const cg_request_t *req)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_buf_t out = {0};
    run_stream(&cfg, req, s, strlen(s), NULL, 0, &out);
    cg_buf_putc(&out, '\0');
    return out.p;
}

static const char *CTX =
    "data: {\"id\":\"c1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"role\":\"assistant\",\"context\":{\"citations\":[{\"title\":\"One\",\"url\":"
    "\"https://x.example/1\",\"content\":\"c1\"},{\"title\":\"Two\",\"content\":\"c2\"}]}}}]}\n\n";

static char *with_ctx(const char *rest)
{
    cg_buf_t b = {0};
    cg_buf_puts(&b, CTX);
    cg_buf_puts(&b, rest);
    cg_buf_putc(&b, '\0');
    return b.p;
}

/* --- golden fixtures ------------------------------------------------------ */

static void golden(const char *expected_name)
{
    size_t en;
    char *exp = fixture(expected_name, &en);
    cg_json_t j;
    cg_json_init(&j, 4096);
    assert_int_equal(cg_json_parse(&j, exp, en), CG_JSON_OK);
    char *fx = cg_json_strdup(&j, cg_json_get(&j, 0, "fixture"), NULL);
    char *rq = cg_json_strdup(&j, cg_json_get(&j, 0, "request"), NULL);
    cg_json_free(&j);

    cg_cite_opts_t o = {8192, true};
    cg_request_t req;
    size_t rn, bn;
    char *rbody = fixture(rq, &rn);
    assert_int_equal(cg_request_parse(&req, rbody, rn, &o), 0);
    char *body = fixture(fx, &bn);

    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    view_t v;
    cg_buf_t out = {0};
    if (body[0] == '{') {
        cg_xform_t *x = cg_xform_new(&cfg, &req);
        cg_out_t o2 = {0};
        assert_int_equal(cg_xform_body(x, body, bn, &o2), 0);
        for (size_t i = 0; i < o2.nseg; i++)
            cg_buf_put(&out, o2.seg[i].p, o2.seg[i].n);
        cg_out_free(&o2);
        cg_xform_free(x);
        assert_int_equal(view_of_body(&v, out.p, out.len), 0);
    } else {
        run_stream(&cfg, &req, body, bn, NULL, 0, &out);
        view_of_stream(&v, out.p, out.len);
    }
    char why[4096];
    if (!view_matches(&v, exp, en, why, sizeof(why)))
        fail_msg("%s: %s", fx, why);
    view_free(&v);
    cg_buf_free(&out);
    cg_request_free(&req);
    free(exp);
    free(fx);
    free(rq);
    free(rbody);
    free(body);
}

static void test_golden_fixtures(void **state)
{
    (void)state;
    golden("expected/azure_oyd_stream.openwebui.json");
    golden("expected/azure_oyd_filters_crlf.openwebui.json");
    golden("expected/azure_oyd_response.openwebui.json");
    golden("expected/azure_truncated.openwebui.json");
    golden("expected/numeric_stream.openwebui.json");
    golden("expected/numeric_malformed.openwebui.json");
    golden("expected/perplexity_stream.openwebui.json");
}

/* --- events forwarded byte for byte --------------------------------------- */

static void test_non_content_events_unchanged(void **state)
{
    (void)state;
    const char *keep[] = {
        ": keep-alive\n\n",
        "event: ping\ndata: {}\n\n",
        "data: {not json\n\n",
        "data: [1,2]\n\n",
        "data: {\"choices\":[]}\n\n",
        "retry: 100\nid: 7\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"no refs\"}}]}\n\n",
    };
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        char *in = with_ctx(keep[i]);
        char *out = xf(in, NULL);
        if (strstr(out, keep[i]) == NULL)
            fail_msg("event not forwarded unchanged: %s\noutput: %s", keep[i], out);
        free(in);
        free(out);
    }
}

static void test_malformed_counted(void **state)
{
    (void)state;
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    const char *s = "data: {oops\n\ndata: {\"a\":1} x\n\ndata: \"str\"\n\n";
    cg_xform_feed(x, s, strlen(s), &out);
    assert_int_equal(cg_xform_stats(x)->malformed, 3);
    assert_int_equal(cg_out_len(&out), strlen(s));
    cg_out_free(&out);
    cg_xform_free(x);
}

/* --- rewritten events keep their fields ----------------------------------- */

static void test_rewrite_keeps_fields(void **state)
{
    (void)state;
    char *in = with_ctx("event: message\nid: 42\n: note\ndata: {\"choices\":[{\"index\":0,"
                        "\"delta\":{\"content\":\"a [doc1] b\"}}],\"z\":1}\n\n");
    char *out = xf(in, NULL);
    const char *want = "event: message\nid: 42\n: note\ndata: {\"choices\":[{\"index\":0,"
                       "\"delta\":{\"content\":\"a [[doc1]](https://x.example/1) b\"}}],\"z\":1}\n\n";
    if (strstr(out, want) == NULL)
        fail_msg("got %s", out);
    free(in);
    free(out);
}

static void test_multiline_data_becomes_one_line(void **state)
{
    (void)state;
    char *in = with_ctx("data: {\"choices\":[{\"index\":0,\n"
                        "data: \"delta\":{\"content\":\"[doc1]\"}}]}\n\n");
    char *out = xf(in, NULL);
    const char *want = "data: {\"choices\":[{\"index\":0, \"delta\":{\"content\":"
                       "\"[[doc1]](https://x.example/1)\"}}]}\n\n";
    if (strstr(out, want) == NULL)
        fail_msg("got %s", out);
    free(in);
    free(out);
}

/* --- rule 4: upstream "event" members ----------------------------------------- */

/* Runs s through profile `profile` in one read. */
static char *xf_profile(const char *s, const char *profile)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    cg_buf_t out = {0};
    run_stream(&cfg, NULL, s, strlen(s), NULL, 0, &out);
    cg_buf_putc(&out, '\0');
    return out.p;
}

static const char *const TRANSFORMING[] = {"openwebui", "openai", "webchat", "structured"};

/* Each case: one upstream event and the event every transforming profile
 * makes of it (the start of the output). */
static void test_event_key_removed(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"data: {\"event\":{\"type\":\"status\"},\"choices\":[]}\n\n",
         "data: {\"choices\":[]}\n\n"},
        {"data: {\"a\":1,\"event\":\"x\",\"b\":2}\n\n", "data: {\"a\":1,\"b\":2}\n\n"},
        {"data: {\"a\":1 , \"event\" : [1,{}] }\n\n", "data: {\"a\":1 }\n\n"},
        {"data: {\"event\":null}\n\n", "data: {}\n\n"},
        /* escaped spellings */
        {"data: {\"\\u0065vent\":1,\"a\":2}\n\n", "data: {\"a\":2}\n\n"},
        {"data: {\"a\":2,\"\\u0065\\u0076ent\":1}\n\n", "data: {\"a\":2}\n\n"},
        {"data: {\"\\u0065\\u0076\\u0065\\u006e\\u0074\":1}\n\n", "data: {}\n\n"},
        {"data: {\"ev\\u0065nt\":1,\"a\":{\"event\":2}}\n\n", "data: {\"a\":{\"event\":2}}\n\n"},
        {"data: {\"even\\u0074\":1,\"\\u0045vent\":2}\n\n", "data: {\"\\u0045vent\":2}\n\n"},
        /* duplicates, in every position */
        {"data: {\"event\":1,\"a\":2,\"event\":3}\n\n", "data: {\"a\":2}\n\n"},
        {"data: {\"a\":1,\"event\":1,\"event\":2}\n\n", "data: {\"a\":1}\n\n"},
        {"data: {\"event\":1,\"\\u0065vent\":2}\n\n", "data: {}\n\n"},
        {"data: {\"event\":1,\"a\":1,\"event\":2,\"b\":2,\"event\":3,\"\\u0065vent\":4}\n\n",
         "data: {\"a\":1,\"b\":2}\n\n"},
        {"data: { \"event\" : 1 , \"event\" : 2 , \"a\" : 3 }\n\n", "data: { \"a\" : 3 }\n\n"},
        /* other SSE fields stay, several data lines become one */
        {"event: message\nid: 7\ndata: {\"\\u0065vent\":1,\ndata: \"a\":2}\n\n",
         "event: message\nid: 7\ndata: {\"a\":2}\n\n"},
        /* names that are not "event" once unescaped */
        {"data: {\"Event\":1,\"events\":2,\"\\u0000event\":3,\"eventx\":4}\n\n",
         "data: {\"Event\":1,\"events\":2,\"\\u0000event\":3,\"eventx\":4}\n\n"},
    };
    for (size_t p = 0; p < sizeof(TRANSFORMING) / sizeof(TRANSFORMING[0]); p++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char *out = xf_profile(cases[i][0], TRANSFORMING[p]);
            if (strncmp(out, cases[i][1], strlen(cases[i][1])) != 0)
                fail_msg("%s: in %s\nwant %s\ngot %s", TRANSFORMING[p], cases[i][0], cases[i][1],
                         out);
            free(out);
        }
    }
}

/* Events with content: the key goes, the content is rewritten as usual. */
static void test_event_key_removed_with_content(void **state)
{
    (void)state;
    char *in = with_ctx("data: {\"\\u0065vent\":{\"type\":\"source\"},\"choices\":[{\"index\":0,"
                        "\"delta\":{\"content\":\"a [doc1]\"}}],\"event\":2}\n\n"
                        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" b\"}}],"
                        "\"ev\\u0065nt\":3}\n\n");
    char *out = xf(in, NULL);
    const char *want = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                       "\"a [[doc1]](https://x.example/1)\"}}]}\n\n"
                       "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" b\"}}]}\n\n";
    if (strstr(out, want) == NULL)
        fail_msg("got %s", out);
    free(in);
    free(out);
}

/*
 * The template fast path: chunks that repeat the previous chunk's bytes
 * around the content string skip the full parse. A chunk with an event
 * member (in any spelling) must never become that template, or the chunks
 * after it would keep the member.
 */
static void test_event_key_never_in_template(void **state)
{
    (void)state;
    const char *keys[] = {"\"event\"", "\"\\u0065vent\"",
                          "\"\\u0065\\u0076\\u0065\\u006e\\u0074\""};
    for (size_t p = 0; p < sizeof(TRANSFORMING) / sizeof(TRANSFORMING[0]); p++) {
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            cg_buf_t in = {0};
            cg_buf_puts(&in, CTX);
            for (int i = 0; i < 6; i++) {
                /* plain chunks (a template), then chunks with the key */
                cg_buf_puts(&in, "data: {\"id\":\"c1\",");
                if (i >= 2)
                    cg_buf_printf(&in, "%s:{\"type\":\"status\"},", keys[k]);
                cg_buf_printf(
                    &in, "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i);
            }
            cg_buf_puts(&in, "data: [DONE]\n\n");
            cg_buf_putc(&in, '\0');
            char *out = xf_profile(in.p, TRANSFORMING[p]);
            if (strstr(out, "status") != NULL)
                fail_msg("%s, key %s: an event member survived:\n%s", TRANSFORMING[p], keys[k],
                         out);
            view_t v;
            view_of_stream(&v, out, strlen(out));
            cg_buf_putc(&v.content[0], '\0');
            if (strcmp(TRANSFORMING[p], "structured") != 0)
                assert_string_equal(v.content[0].p, "w0 w1 w2 w3 w4 w5 ");
            view_free(&v);
            free(out);
            cg_buf_free(&in);
        }
    }
}

/* Rule 4 holds after [DONE] too: nothing is rewritten any more, but the
 * member goes. Profile off keeps everything. */
static void test_event_key_removed_after_done(void **state)
{
    (void)state;
    const char *in = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[doc\"}}]}\n\n"
                     "data: [DONE]\n\n"
                     "data: {\"\\u0065vent\":{\"type\":\"status\"},\"a\":1}\n\n"
                     "data: {\"b\":[2]}\n\n";
    char *out = xf(in, NULL);
    assert_non_null(strstr(out, "data: [DONE]\n\ndata: {\"a\":1}\n\ndata: {\"b\":[2]}\n\n"));
    free(out);
    out = xf_profile(in, "off");
    assert_string_equal(out, in);
    free(out);
}

/* --- end of stream ----------------------------------------------------------- */

static void test_done_added_after_finish(void **state)
{
    (void)state;
    char *in = with_ctx("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x [doc1]\"}}]}\n\n"
                        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    char *out = xf(in, NULL);
    view_t v;
    view_of_stream(&v, out, strlen(out));
    assert_true(v.ends_done);
    assert_false(v.ends_error);
    assert_non_null(strstr(v.sources.p, "\"doc1\""));
    view_free(&v);
    free(in);
    free(out);
}

static void test_truncated_ends_with_error(void **state)
{
    (void)state;
    char *in = with_ctx("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"see [doc1] [doc2\"}}]}\n\n"
                        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut");
    char *out = xf(in, NULL);
    view_t v;
    view_of_stream(&v, out, strlen(out));
    assert_false(v.ends_done);
    assert_true(v.ends_error);
    assert_string_equal(v.content[0].p ? (cg_buf_putc(&v.content[0], '\0'), v.content[0].p) : "",
                        "see [[doc1]](https://x.example/1) [doc2");
    assert_null(strstr(out, "[DONE]"));
    assert_non_null(strstr(out, "\"code\":\"upstream_closed\""));
    /* Only the referenced, completed citation is emitted. */
    assert_non_null(strstr(v.sources.p, "\"doc1\""));
    assert_null(strstr(v.sources.p, "\"doc2\""));
    view_free(&v);
    free(in);
    free(out);
}

static void test_held_bytes_flushed_before_finish(void **state)
{
    (void)state;
    char *in = with_ctx("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"end [doc\"}}]}\n\n"
                        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                        "data: [DONE]\n\n");
    char *out = xf(in, NULL);
    const char *held = strstr(out, "\"content\":\"[doc\"");
    const char *finish = strstr(out, "\"finish_reason\":\"stop\"");
    assert_non_null(held);
    assert_non_null(finish);
    assert_true(held < finish);
    free(in);
    free(out);
}

static void test_refs_before_citations(void **state)
{
    (void)state;
    /* Content first, citations later: left as is, but emitted at the end. */
    const char *in =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"early [doc1]\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":[{\"title\":"
        "\"Late\",\"url\":\"https://l.example/\"}]}}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" then [doc1]\"},"
        "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    char *out = xf(in, NULL);
    view_t v;
    view_of_stream(&v, out, strlen(out));
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "early [doc1] then [[doc1]](https://l.example/)");
    assert_non_null(strstr(v.sources.p, "[doc1] Late"));
    view_free(&v);
    free(out);
}

static void test_choices_are_independent(void **state)
{
    (void)state;
    char *in = with_ctx(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a [do\"}},"
        "{\"index\":1,\"delta\":{\"content\":\"b [doc2\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"] c\"}},"
        "{\"index\":0,\"delta\":{\"content\":\"c1] d\"}}]}\n\n"
        "data: [DONE]\n\n");
    char *out = xf(in, NULL);
    view_t v;
    view_of_stream(&v, out, strlen(out));
    cg_buf_putc(&v.content[0], '\0');
    cg_buf_putc(&v.content[1], '\0');
    assert_string_equal(v.content[0].p, "a [[doc1]](https://x.example/1) d");
    assert_string_equal(v.content[1].p, "b [doc2] c");
    /* First-reference order across choices: doc2 completed before doc1. */
    const char *d1 = strstr(v.sources.p, "\"doc1\""), *d2 = strstr(v.sources.p, "\"doc2\"");
    assert_non_null(d1);
    assert_non_null(d2);
    assert_true(d2 < d1);
    view_free(&v);
    free(in);
    free(out);
}

static void test_oversized_event_passes_through(void **state)
{
    (void)state;
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cfg.max_event = 64;
    cg_buf_t in = {0};
    cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[doc\"}}]}\n\n");
    cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    for (int i = 0; i < 100; i++)
        cg_buf_puts(&in, "long ");
    cg_buf_puts(&in, "\"}}]}\n\ndata: [DONE]\n\n");
    cg_buf_t out = {0};
    size_t sizes[] = {7};
    run_stream(&cfg, NULL, in.p, in.len, sizes, 1, &out);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    assert_int_equal(v.content[0].len, 4 + 500);
    assert_memory_equal(v.content[0].p, "[doc", 4);
    assert_true(v.ends_done);
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

static void test_profile_off_is_identity(void **state)
{
    (void)state;
    size_t n;
    char *body = fixture("azure_oyd_stream.sse", &n);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("off"));
    cg_buf_t out = {0};
    size_t sizes[] = {1, 3, 100};
    run_stream(&cfg, NULL, body, n, sizes, 3, &out);
    assert_int_equal(out.len, n);
    assert_memory_equal(out.p, body, n);
    cg_buf_free(&out);
    free(body);
}

static char *body_out(const char *profile, const char *body)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    assert_int_equal(cg_xform_body(x, body, strlen(body), &out), 0);
    cg_buf_t b = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    cg_buf_putc(&b, '\0');
    cg_out_free(&out);
    cg_xform_free(x);
    return b.p;
}

static void test_body_event_key_and_sources(void **state)
{
    (void)state;
    const char *body = "{\"event\":1,\"choices\":[{\"index\":0,\"message\":{\"content\":\"[doc1]\","
                       "\"context\":{\"citations\":[{\"url\":\"https://u.example/a\"}]}}}]}";
    char *b = body_out("openwebui", body);
    assert_null(strstr(b, "\"event\""));
    assert_non_null(strstr(b, "\"content\":\"[[doc1]](https://u.example/a)\""));
    assert_non_null(strstr(b, ",\"sources\":[{\"source\":{\"id\":\"doc1\""));
    assert_true(json_equal(b, strlen(b), b, strlen(b)));
    free(b);
}

/* A body follows rule 4 too (the same injection, without streaming):
 * escaped and duplicate members go, and the profile's members still join
 * the object correctly when nothing else is left. */
static void test_body_event_keys_removed(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"{\"\\u0065vent\":1,\"choices\":[],\"event\":2,\"ev\\u0065nt\":3}", "{\"choices\":[]"},
        {"{\"a\":1,\"event\":1,\"b\":2,\"\\u0065\\u0076ent\":{}}", "{\"a\":1,\"b\":2"},
        {"{\"event\":1,\"\\u0065vent\":2}", "{"},
    };
    /* openwebui always adds "sources"; the others add nothing without citations */
    static const char *const added[] = {",\"sources\":[]}", "}", "}", "}"};
    static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured"};
    for (size_t p = 0; p < 4; p++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char *b = body_out(profiles[p], cases[i][0]);
            cg_buf_t want = {0};
            cg_buf_puts(&want, cases[i][1]);
            /* with no member left, the profile's own go in without a comma */
            cg_buf_puts(&want, i == 2 && added[p][0] == ',' ? added[p] + 1 : added[p]);
            cg_buf_putc(&want, '\0');
            if (strcmp(b, want.p) != 0)
                fail_msg("%s: %s\nwant %s\ngot  %s", profiles[p], cases[i][0], want.p, b);
            cg_buf_free(&want);
            free(b);
        }
    }
}

static void test_stats(void **state)
{
    (void)state;
    size_t n;
    char *body = fixture("azure_oyd_stream.sse", &n);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    cg_xform_feed(x, body, n, &out);
    cg_xform_finish(x, CG_END_EOF, &out);
    const cg_xform_stats_t *s = cg_xform_stats(x);
    assert_int_equal(s->refs_linked, 3);     /* doc1, doc3, doc1 */
    assert_int_equal(s->refs_unlinked, 1);   /* doc2 has no URL */
    assert_int_equal(s->refs_out_of_range, 2); /* doc7, doc0 */
    assert_int_equal(s->citations_emitted, 3);
    assert_true(s->saw_done);
    cg_out_free(&out);
    cg_xform_free(x);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_fixtures),
        cmocka_unit_test(test_non_content_events_unchanged),
        cmocka_unit_test(test_malformed_counted),
        cmocka_unit_test(test_rewrite_keeps_fields),
        cmocka_unit_test(test_multiline_data_becomes_one_line),
        cmocka_unit_test(test_event_key_removed),
        cmocka_unit_test(test_event_key_removed_with_content),
        cmocka_unit_test(test_event_key_never_in_template),
        cmocka_unit_test(test_event_key_removed_after_done),
        cmocka_unit_test(test_done_added_after_finish),
        cmocka_unit_test(test_truncated_ends_with_error),
        cmocka_unit_test(test_held_bytes_flushed_before_finish),
        cmocka_unit_test(test_refs_before_citations),
        cmocka_unit_test(test_choices_are_independent),
        cmocka_unit_test(test_oversized_event_passes_through),
        cmocka_unit_test(test_profile_off_is_identity),
        cmocka_unit_test(test_body_event_key_and_sources),
        cmocka_unit_test(test_body_event_keys_removed),
        cmocka_unit_test(test_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
