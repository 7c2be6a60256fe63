/* Stream transformer: fixtures, end-of-stream rules, SSE field handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/json.h"
#include "citegate/xform.h"
#include "core/xform_int.h"
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

/* A raw control byte inside a string is not JSON (only between tokens is
 * TAB or LF white space): the event goes out byte for byte and is counted
 * (rule 3), its reference unlinked, on the parse path and on the template
 * path (after a chunk of the same shape), and with a string that spans two
 * data lines, which must not become one line. */
static void test_raw_control_in_string_not_json(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\t[doc1]\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[doc1]\x01\"}}]}\n\n",
        ("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\n"
         "data: [doc1]\"}}]}\n\n"),
    };
    static const char good[] = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n";
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        for (int templated = 0; templated < 2; templated++) {
            cg_buf_t in = {0};
            cg_buf_puts(&in, templated ? good : "");
            cg_buf_puts(&in, bad[i]);
            cg_buf_putc(&in, '\0');
            char *full = with_ctx(in.p);
            cg_xform_cfg_t cfg;
            cg_xform_cfg_default(&cfg, profile_named("openwebui"));
            cg_xform_t *x = cg_xform_new(&cfg, NULL);
            cg_out_t o = {0};
            cg_buf_t out = {0};
            cg_xform_feed(x, full, strlen(full), &o);
            for (size_t k = 0; k < o.nseg; k++)
                cg_buf_put(&out, o.seg[k].p, o.seg[k].n);
            cg_buf_putc(&out, '\0');
            if (strstr(out.p, bad[i]) == NULL)
                fail_msg("case %zu%s not forwarded byte for byte:\n%s", i,
                         templated ? " (template path)" : "", out.p);
            assert_null(strstr(out.p, "](https://x.example/1)"));
            assert_int_equal(cg_xform_stats(x)->malformed, 1);
            cg_out_free(&o);
            cg_xform_free(x);
            cg_buf_free(&out);
            free(full);
            cg_buf_free(&in);
        }
    }
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

static const char *const TRANSFORMING[] = {"openwebui", "openai", "webchat", "structured",
                                            "markdown"};

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

/* Choice `index` says "x [doc1]", then finishes, and the stream ends
 * without [DONE]: it must end with an added [DONE], no error event, and
 * `want` somewhere in what the client gets. */
static void expect_done_added(int index, const char *want)
{
    cg_buf_t b = {0};
    cg_buf_printf(&b,
                  "data: {\"choices\":[{\"index\":%d,\"delta\":{\"content\":\"x [doc1]\"}}]}\n\n"
                  "data: {\"choices\":[{\"index\":%d,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
                  index, index);
    cg_buf_putc(&b, '\0');
    char *in = with_ctx(b.p);
    char *out = xf(in, NULL);
    view_t v;
    view_of_stream(&v, out, strlen(out));
    assert_true(v.ends_done);
    assert_false(v.ends_error);
    if (strstr(out, want) == NULL)
        fail_msg("no %s in %s", want, out);
    view_free(&v);
    free(in);
    free(out);
    cg_buf_free(&b);
}

static void test_done_added_after_finish(void **state)
{
    (void)state;
    expect_done_added(0, "\"id\":\"doc1\""); /* and its source event */
}

/* A choice past the CG_XFORM_MAX_CHOICES rewritten goes out as it came, but
 * its finish_reason still ends the answer. */
static void test_finish_of_a_choice_past_the_cap(void **state)
{
    (void)state;
    expect_done_added(200, "\"index\":200,\"delta\":{\"content\":\"x [doc1]\"}");
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

/* --- reference style citation (SPEC §3, §6) --------------------------------- */

/* A DeepSeek-style stream: a top-level URL list, then content in chunks. */
static char *web_stream(const char *const *pieces, size_t n)
{
    cg_buf_t b = {0};
    cg_buf_puts(&b, "data: {\"id\":\"d1\",\"citations\":[\"https://a.example/one\","
                    "\"https://b.example/two\"],\"choices\":[{\"index\":0,\"delta\":"
                    "{\"role\":\"assistant\"}}]}\n\n");
    for (size_t i = 0; i < n; i++) {
        cg_buf_puts(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
        cg_buf_puts(&b, pieces[i]);
        cg_buf_puts(&b, "\"}}]}\n\n");
    }
    cg_buf_puts(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"
                    "\n\ndata: [DONE]\n\n");
    cg_buf_putc(&b, '\0');
    return b.p;
}

static char *content_of(const char *in, cg_ref_style_t style, const char *profile,
                        cg_buf_t *sources)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    cfg.style = style;
    cg_buf_t out = {0};
    run_stream(&cfg, NULL, in, strlen(in), NULL, 0, &out);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.content[0], '\0');
    char *c = cg_xstrndup(v.content[0].p, strlen(v.content[0].p));
    if (sources) {
        cg_buf_put(sources, v.sources.p, v.sources.len);
        cg_buf_putc(sources, '\0');
    }
    view_free(&v);
    cg_buf_free(&out);
    return c;
}

/* auto: the first reference is [citation:N], so that is the style; its
 * LABEL is N; [N] is then no reference. */
static void test_auto_picks_citation(void **state)
{
    (void)state;
    static const char *const pieces[] = {"A [citation:2] and [cit", "ation:1][1] [doc1]."};
    char *in = web_stream(pieces, 2);
    cg_buf_t src = {0};
    char *c = content_of(in, CG_REF_ANY, "openwebui", &src);
    assert_string_equal(c, "A [[citation:2]](https://b.example/two) and "
                           "[[citation:1]](https://a.example/one)[1] [doc1].");
    const char *two = strstr(src.p, "\"id\":\"2\""), *one = strstr(src.p, "\"id\":\"1\"");
    assert_non_null(two);
    assert_non_null(one);
    assert_true(two < one); /* first-reference order */
    assert_null(strstr(src.p, "citation:"));
    free(c);
    cg_buf_free(&src);
    free(in);
}

/* auto: the first reference is [N]: numeric, and [citation:N] stays text. */
static void test_auto_first_numeric_wins(void **state)
{
    (void)state;
    static const char *const pieces[] = {"A [1", "] then [citation:2]."};
    char *in = web_stream(pieces, 2);
    char *c = content_of(in, CG_REF_ANY, "openai", NULL);
    assert_string_equal(c, "A [[1]](https://a.example/one) then [citation:2].");
    free(c);
    free(in);
}

/* A fixed style finds only its form; webchat renumbers [citation:N] too. */
static void test_fixed_citation_style(void **state)
{
    (void)state;
    static const char *const pieces[] = {"[1] [citation:2][citation:1]"};
    char *in = web_stream(pieces, 1);
    char *c = content_of(in, CG_REF_CITATION, "openai", NULL);
    assert_string_equal(c, "[1] [[citation:2]](https://b.example/two)"
                           "[[citation:1]](https://a.example/one)");
    free(c);
    c = content_of(in, CG_REF_NUMERIC, "openai", NULL);
    assert_string_equal(c, "[[1]](https://a.example/one) [citation:2][citation:1]");
    free(c);
    c = content_of(in, CG_REF_CITATION, "webchat", NULL);
    assert_string_equal(c, "[1] [1]\xE2\x80\x8B[2]\n\n[1]: https://b.example/two \"two\"\n"
                           "[2]: https://a.example/one \"one\"");
    free(c);
    free(in);
}

/* Azure context keeps doc, whatever the first reference looks like. */
static void test_auto_azure_stays_doc(void **state)
{
    (void)state;
    char *in = with_ctx("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                        "\"[citation:1] [doc1]\"},\"finish_reason\":\"stop\"}]}\n\n"
                        "data: [DONE]\n\n");
    char *out = xf(in, NULL);
    assert_non_null(strstr(out, "[citation:1] [[doc1]](https://x.example/1)"));
    free(out);
    free(in);
}

/* --- url_citation annotations (SPEC §6) ------------------------------------- */

static char *body_out(const char *profile, const char *body);

#define ANN(url, title) \
    "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"" url "\",\"title\":\"" title \
    "\",\"start_index\":0,\"end_index\":1}}"
#define ANN_CHUNK(anns) \
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"annotations\":[" anns "]}}]}\n\n"
static const char *CONTENT_CHUNK =
    "data: {\"id\":\"a1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Text [1].\"}}]}\n\n";
static const char *END_CHUNKS =
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

static char *join3(const char *a, const char *b, const char *c)
{
    cg_buf_t out = {0};
    cg_buf_puts(&out, a);
    cg_buf_puts(&out, b);
    cg_buf_puts(&out, c);
    cg_buf_putc(&out, '\0');
    return out.p;
}

/* Runs a stream through openwebui and returns its view; the request may be NULL. */
static void annotated_view(const char *in, const cg_request_t *req, view_t *v)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_buf_t out = {0};
    run_stream(&cfg, req, in, strlen(in), NULL, 0, &out);
    view_of_stream(v, out.p, out.len);
    cg_buf_free(&out);
}

/* One citation per distinct url, numbered in order of arrival (the flat
 * form too); a url_citation without url, or another type, adds nothing. */
static void test_annotations_in_delta(void **state)
{
    (void)state;
    char *in = join3(CONTENT_CHUNK,
                     ANN_CHUNK(ANN("https://a.example/1", "A") "," ANN("https://b.example/2", "")
                               ",{\"type\":\"file_citation\",\"file_citation\":{\"file_id\":\"f\"}}")
                     ANN_CHUNK(ANN("https://a.example/1", "A again")
                               ",{\"type\":\"url_citation\",\"url\":\"https://c.example/3\","
                               "\"title\":\"Flat\"},{\"type\":\"url_citation\",\"url_citation\":{}}"),
                     END_CHUNKS);
    view_t v;
    annotated_view(in, NULL, &v);
    assert_non_null(strstr(v.sources.p, "\"name\":\"[1] A\""));
    assert_non_null(strstr(v.sources.p, "\"name\":\"[2] 2\"")); /* title from the url */
    assert_non_null(strstr(v.sources.p, "\"name\":\"[3] Flat\""));
    assert_null(strstr(v.sources.p, "again"));
    assert_null(strstr(v.sources.p, "[4]"));
    /* "[1]" came before any annotation: left as is (and its citation emitted). */
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "Text [1].");
    /* The annotation chunks went out unchanged. */
    assert_non_null(strstr(v.extras.p, "\"title\":\"A again\""));
    view_free(&v);
    free(in);
}

/* A reference after its annotation is rewritten like any other. */
static void test_annotations_then_reference(void **state)
{
    (void)state;
    char *in = join3(ANN_CHUNK(ANN("https://a.example/1", "A")), CONTENT_CHUNK, END_CHUNKS);
    view_t v;
    annotated_view(in, NULL, &v);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "Text [[1]](https://a.example/1).");
    view_free(&v);
    free(in);
}

/* First match wins: Azure context before annotations, and annotations
 * before a later Azure context. */
static void test_annotations_first_match_wins(void **state)
{
    (void)state;
    char *in = join3(CTX, ANN_CHUNK(ANN("https://a.example/1", "A")), END_CHUNKS);
    view_t v;
    annotated_view(in, NULL, &v);
    assert_null(strstr(v.sources.p, "a.example")); /* nothing referenced: nothing emitted */
    view_free(&v);
    free(in);

    cg_buf_t late = {0};
    cg_buf_puts(&late, ANN_CHUNK(ANN("https://a.example/1", "A")));
    cg_buf_puts(&late, CTX);
    cg_buf_puts(&late, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[doc1] [1]\"}}]}\n\n");
    cg_buf_putc(&late, '\0');
    in = join3(late.p, "", END_CHUNKS);
    annotated_view(in, NULL, &v);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "[doc1] [[1]](https://a.example/1)");
    assert_null(strstr(v.sources.p, "x.example"));
    view_free(&v);
    cg_buf_free(&late);
    free(in);

    /* Top-level citations in the same chunk come first. */
    in = join3("data: {\"citations\":[\"https://w.example/\"],\"choices\":[{\"index\":0,\"delta\":"
               "{\"annotations\":[" ANN("https://a.example/1", "A") "]}}]}\n\n",
               "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[1]\"}}]}\n\n", END_CHUNKS);
    annotated_view(in, NULL, &v);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "[[1]](https://w.example/)");
    view_free(&v);
    free(in);
}

/* Request-side <source> tags win, even over annotations that come first. */
static void test_annotations_lose_to_request_sources(void **state)
{
    (void)state;
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":"
                       "\"<source id=\\\"1\\\" name=\\\"https://r.example/\\\">r</source>\"}]}";
    cg_cite_opts_t o = {8192, true};
    cg_request_t req;
    assert_int_equal(cg_request_parse(&req, body, strlen(body), &o), 0);
    char *in = join3(ANN_CHUNK(ANN("https://a.example/1", "A")), CONTENT_CHUNK, END_CHUNKS);
    view_t v;
    annotated_view(in, &req, &v);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "Text [[1]](https://r.example/).");
    assert_null(strstr(v.sources.p, "a.example"));
    view_free(&v);
    free(in);
    cg_request_free(&req);
}

/* A body's message.annotations are a source too, kept as they were. */
static void test_annotations_in_body(void **state)
{
    (void)state;
    const char *body =
        "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"See [2].\",\"annotations\":["
        ANN("https://a.example/1", "A") "," ANN("https://b.example/2", "B") "]}}]}";
    char *b = body_out("openwebui", body);
    assert_non_null(strstr(b, "\"content\":\"See [[2]](https://b.example/2).\""));
    assert_non_null(strstr(b, "\"annotations\":[" ANN("https://a.example/1", "A")));
    /* Mentions (in order of arrival) before the reference's own. */
    const char *one = strstr(b, "\"name\":\"[1] A\""), *two = strstr(b, "\"name\":\"[2] B\"");
    assert_non_null(one);
    assert_non_null(two);
    assert_true(one < two);
    free(b);
}

/* A stand-in dialect view: passes each upstream event on as a chunk of its
 * own, and for a comment ": cite" names a citation and mentions it. */
static void echo_event(cg_xform_t *x, void *state, const cg_sse_event_t *ev)
{
    (void)state;
    if (ev->ndata == 0) {
        cg_cite_in_t in = {0};
        in.title = cg_span("Viewed", 6);
        in.url = cg_span("https://v.example/", 18);
        unsigned n = cg__xform_cite(x, &in);
        cg__xform_mention(x, 0, n);
        return;
    }
    cg_buf_t *b = cg__xform_chunk_begin(x);
    cg_buf_put(b, ev->data.p, ev->data.n);
    cg__xform_chunk_end(x);
}

static const cg_dialect_view_t echo_view = {.event = echo_event};

static char *through_view(const char *profile, const char *in)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    x->view = &echo_view; /* as cg_xform_set_dialect would, for a dialect of its own */
    x->dv = cg_xcalloc(1, sizeof(*x->dv));
    x->auto_style = false;
    x->style = CG_REF_NUMERIC;
    cg_out_t out = {0};
    cg_buf_t b = {0};
    cg_xform_feed(x, in, strlen(in), &out);
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    cg_xform_finish(x, CG_END_EOF, &out);
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    cg_buf_putc(&b, '\0');
    cg_out_free(&out);
    cg_xform_free(x);
    return b.p;
}

/* A view names its citations itself: the learner stays off. What a view
 * mentions, openai does not annotate again: a view forwards its upstream's
 * url annotations as chat annotations of its own. */
static void test_annotations_not_learned_under_a_view(void **state)
{
    (void)state;
    char *in = join3(ANN_CHUNK(ANN("https://a.example/1", "A")), CONTENT_CHUNK, END_CHUNKS);
    char *out = through_view("openwebui", in);
    assert_null(strstr(out, "\"type\":\"source\""));
    free(out);
    free(in);

    in = join3("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ab\\u00e9\"}}]}\n\n",
               ": cite\n\n", END_CHUNKS);
    out = through_view("openai", in);
    assert_null(strstr(out, "https://v.example/"));
    assert_non_null(strstr(out, "data: [DONE]"));
    free(out);
    free(in);
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

/* --- rule 6: events over max_event ------------------------------------------ */

#define SMALL_EVENT 4096

/* A content chunk of choice 0: `text`, then `pad` bytes of padding. */
static void put_chunk(cg_buf_t *b, const char *text, size_t pad, const char *eol)
{
    cg_buf_printf(b, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s",
                  text);
    for (size_t i = 0; i < pad; i++)
        cg_buf_putc(b, (char)('a' + i % 26));
    cg_buf_printf(b, "\"}}],\"event\":{\"type\":\"big\"}}%s%s", eol, eol);
}

typedef struct run {
    cg_buf_t out;
    cg_xform_stats_t stats;
    size_t max_buf; /* the tokenizer's largest buffer during the run */
} run_t;

/* Runs in[0..n) through profile openwebui with max_event SMALL_EVENT, in
 * reads of `step` bytes (0: one read), then ends it. */
static void run_small(const char *in, size_t n, size_t step, cg_end_t why, run_t *r)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cfg.max_event = SMALL_EVENT;
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    memset(r, 0, sizeof(*r));
    for (size_t off = 0; off < n;) {
        size_t len = step && step < n - off ? step : n - off;
        cg_xform_feed(x, in + off, len, &out);
        for (size_t i = 0; i < out.nseg; i++)
            cg_buf_put(&r->out, out.seg[i].p, out.seg[i].n);
        if (x->sse.buf.cap > r->max_buf)
            r->max_buf = x->sse.buf.cap;
        off += len;
    }
    cg_xform_finish(x, why, &out);
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&r->out, out.seg[i].p, out.seg[i].n);
    cg_buf_putc(&r->out, '\0');
    r->out.len--;
    r->stats = *cg_xform_stats(x);
    cg_out_free(&out);
    cg_xform_free(x);
}

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

/*
 * Rule 6: an event over max_event goes out unchanged (its "event" member
 * too), and only it: the events before and after it are transformed. The
 * "[doc" held back before it goes out first, in a chunk of our own, so the
 * client's content keeps its order; the finder starts again after it.
 * Whatever the reads, the output is the same.
 */
static void test_oversized_between_events(void **state)
{
    (void)state;
    const char *eols[] = {"\n", "\r\n", "\r"};
    for (size_t e = 0; e < 3; e++) {
        cg_buf_t in = {0}, big = {0};
        cg_buf_puts(&in, CTX);
        put_chunk(&in, "one ", 0, eols[e]);
        put_chunk(&in, "two ", 0, eols[e]);
        put_chunk(&in, "see [doc", 0, eols[e]);
        put_chunk(&big, "BIG [doc1] ", 3 * SMALL_EVENT, eols[e]);
        cg_buf_put(&in, big.p, big.len);
        put_chunk(&in, "1] and [doc1] ", 0, eols[e]);
        put_chunk(&in, "end [do", 0, eols[e]);
        cg_buf_putc(&big, '\0');
        cg_buf_printf(&in,
                      "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"
                      "%s%sdata: [DONE]%s%s",
                      eols[e], eols[e], eols[e], eols[e]);
        run_t whole;
        run_small(in.p, in.len, 0, CG_END_EOF, &whole);
        assert_int_equal(whole.stats.oversized, 1);
        assert_false(whole.stats.passthrough);
        /* the big event, byte for byte, right after the held "[doc" */
        const char *at = strstr(whole.out.p, big.p);
        assert_non_null(at);
        const char *held = strstr(whole.out.p, "\"content\":\"[doc\"");
        assert_non_null(held);
        assert_true(held < at);
        /* one "event" member left: the big event's */
        assert_int_equal(count(whole.out.p, "\"type\":\"big\""), 1);
        view_t v;
        view_of_stream(&v, whole.out.p, whole.out.len);
        cg_buf_putc(&v.content[0], '\0');
        const char *tail = "1] and [[doc1]](https://x.example/1) end [do";
        assert_int_equal(strncmp(v.content[0].p, "one two see [docBIG [doc1] ", 27), 0);
        assert_string_equal(v.content[0].p + strlen(v.content[0].p) - strlen(tail), tail);
        assert_true(v.ends_done);
        assert_non_null(strstr(v.sources.p, "\"doc1\""));
        view_free(&v);
        for (size_t step = 1; step < 40; step += step < 8 ? 1 : 13) {
            run_t split;
            run_small(in.p, in.len, step, CG_END_EOF, &split);
            if (strcmp(split.out.p, whole.out.p) != 0)
                fail_msg("line ends %zu, reads of %zu: output differs", e, step);
            assert_int_equal(split.stats.oversized, 1);
            /* nothing of the big event is buffered */
            assert_true(split.max_buf <= 2 * SMALL_EVENT);
            cg_buf_free(&split.out);
        }
        cg_buf_free(&whole.out);
        cg_buf_free(&in);
        cg_buf_free(&big);
    }
}

/* Several oversized events, one of them the first event of the stream,
 * another a huge comment: each is counted, each goes out unchanged. */
static void test_oversized_several(void **state)
{
    (void)state;
    cg_buf_t in = {0};
    put_chunk(&in, "[doc1] a ", SMALL_EVENT, "\n");
    cg_buf_puts(&in, CTX);
    put_chunk(&in, "[doc1] b ", 0, "\n");
    cg_buf_puts(&in, ": ");
    for (size_t i = 0; i < SMALL_EVENT; i++)
        cg_buf_putc(&in, 'c');
    cg_buf_puts(&in, "\n\n");
    put_chunk(&in, "[doc1] c ", 0, "\n");
    put_chunk(&in, "[doc1] d ", 2 * SMALL_EVENT, "\n");
    put_chunk(&in, "[doc1] e", 0, "\n");
    cg_buf_puts(&in, "data: [DONE]\n\n");
    for (size_t step = 0; step < 3000; step += 997) {
        run_t r;
        run_small(in.p, in.len, step, CG_END_EOF, &r);
        assert_int_equal(r.stats.oversized, 3);
        assert_int_equal(r.stats.refs_linked, 3);
        view_t v;
        view_of_stream(&v, r.out.p, r.out.len);
        cg_buf_putc(&v.content[0], '\0');
        assert_int_equal(count(v.content[0].p, "[[doc1]](https://x.example/1)"), 3);
        assert_int_equal(count(v.content[0].p, "[doc1]"), 5);
        assert_true(v.ends_done);
        view_free(&v);
        cg_buf_free(&r.out);
    }
    cg_buf_free(&in);
}

/* An event of exactly max_event bytes is transformed, one byte more goes
 * out unchanged; a final CRLF's LF does not count (a read may cut it off). */
static void test_oversized_edge(void **state)
{
    (void)state;
    const char *eols[] = {"\n", "\r\n"};
    for (size_t e = 0; e < 2; e++) {
        cg_buf_t probe = {0};
        put_chunk(&probe, "[doc1] ", 0, eols[e]);
        size_t base = probe.len - (e == 1); /* its size: the final LF left out */
        cg_buf_free(&probe);
        for (size_t extra = 0; extra <= 1; extra++) {
            cg_buf_t in = {0};
            cg_buf_puts(&in, CTX);
            put_chunk(&in, "[doc1] ", SMALL_EVENT - base + extra, eols[e]);
            cg_buf_puts(&in, "data: [DONE]\n\n");
            for (size_t step = 0; step < 100; step += 7) {
                run_t r;
                run_small(in.p, in.len, step, CG_END_EOF, &r);
                assert_int_equal(r.stats.oversized, extra);
                assert_int_equal(count(r.out.p, "\"type\":\"big\""), extra);
                assert_int_equal(count(r.out.p, "(https://x.example/1)"), 1 - extra);
                cg_buf_free(&r.out);
            }
            cg_buf_free(&in);
        }
    }
}

/* The upstream ends inside an oversized event: its bytes went out as they
 * came; the event is ended, then the end of stream follows as usual. */
static void test_oversized_truncated(void **state)
{
    (void)state;
    for (int finished = 0; finished <= 1; finished++) {
        cg_buf_t in = {0};
        cg_buf_puts(&in, CTX);
        if (finished)
            cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[doc1]\"},"
                             "\"finish_reason\":\"stop\"}]}\n\n");
        else
            put_chunk(&in, "[doc1] [doc", 0, "\n");
        size_t cut = in.len;
        put_chunk(&in, "cut ", 2 * SMALL_EVENT, "\n");
        in.len -= 10; /* the end of the big event never comes */
        run_t r;
        run_small(in.p, in.len, 100, CG_END_RESET, &r);
        assert_int_equal(r.stats.oversized, 1);
        /* the big event's bytes, then a line end and a blank line */
        cg_buf_t big = {0};
        cg_buf_put(&big, in.p + cut, in.len - cut);
        cg_buf_puts(&big, "\n\ndata: {");
        assert_non_null(memmem(r.out.p, r.out.len, big.p, big.len));
        cg_buf_free(&big);
        view_t v;
        view_of_stream(&v, r.out.p, r.out.len);
        assert_int_equal(v.ends_done, finished);
        assert_int_equal(v.ends_error, !finished);
        assert_non_null(strstr(v.sources.p, "\"doc1\""));
        view_free(&v);
        cg_buf_free(&r.out);
        cg_buf_free(&in);
    }
}

/* Profile structured holds the stream, up to max_event: a longer stream,
 * or one with an event over it, goes through unchanged as a whole. */
static void test_oversized_structured_passes_stream(void **state)
{
    (void)state;
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("structured"));
    cfg.max_event = SMALL_EVENT;
    cg_buf_t in = {0}, out = {0};
    put_chunk(&in, "{\\\"response\\\":\\\"x\\\",", 0, "\n");
    put_chunk(&in, "\\\"citations\\\":[]}", SMALL_EVENT, "\n");
    cg_buf_puts(&in, "data: [DONE]\n\n");
    size_t sizes[] = {1000};
    run_stream(&cfg, NULL, in.p, in.len, sizes, 1, &out);
    assert_int_equal(out.len, in.len);
    assert_memory_equal(out.p, in.p, in.len);
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
    static const char *const added[] = {",\"sources\":[]}", "}", "}", "}", "}"};
    static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured",
                                           "markdown"};
    for (size_t p = 0; p < 5; p++) {
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
        cmocka_unit_test(test_raw_control_in_string_not_json),
        cmocka_unit_test(test_event_key_removed),
        cmocka_unit_test(test_event_key_removed_with_content),
        cmocka_unit_test(test_event_key_never_in_template),
        cmocka_unit_test(test_event_key_removed_after_done),
        cmocka_unit_test(test_done_added_after_finish),
        cmocka_unit_test(test_finish_of_a_choice_past_the_cap),
        cmocka_unit_test(test_truncated_ends_with_error),
        cmocka_unit_test(test_held_bytes_flushed_before_finish),
        cmocka_unit_test(test_refs_before_citations),
        cmocka_unit_test(test_choices_are_independent),
        cmocka_unit_test(test_auto_picks_citation),
        cmocka_unit_test(test_auto_first_numeric_wins),
        cmocka_unit_test(test_fixed_citation_style),
        cmocka_unit_test(test_auto_azure_stays_doc),
        cmocka_unit_test(test_annotations_in_delta),
        cmocka_unit_test(test_annotations_then_reference),
        cmocka_unit_test(test_annotations_first_match_wins),
        cmocka_unit_test(test_annotations_lose_to_request_sources),
        cmocka_unit_test(test_annotations_in_body),
        cmocka_unit_test(test_annotations_not_learned_under_a_view),
        cmocka_unit_test(test_oversized_event_passes_through),
        cmocka_unit_test(test_oversized_between_events),
        cmocka_unit_test(test_oversized_several),
        cmocka_unit_test(test_oversized_edge),
        cmocka_unit_test(test_oversized_truncated),
        cmocka_unit_test(test_oversized_structured_passes_stream),
        cmocka_unit_test(test_profile_off_is_identity),
        cmocka_unit_test(test_body_event_key_and_sources),
        cmocka_unit_test(test_body_event_keys_removed),
        cmocka_unit_test(test_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
