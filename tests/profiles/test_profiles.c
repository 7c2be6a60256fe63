/* Profiles openai, webchat, markdown and structured (SPEC §7): the details each
 * frontend depends on. Whole-stream behaviour under splits is in
 * test_split.c; the independent Python model is tests/tools/test_profiles.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/alias.h"
#include "citegate/json.h"
#include "citegate/request.h"
#include "citegate/xform.h"
#include "profiles.h"
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* doc1 has a URL, doc2 none; doc3 has a title that needs escaping and a
 * long snippet. */
#define CTX \
    "data: {\"id\":\"c1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":" \
    "{\"role\":\"assistant\",\"context\":{\"citations\":[" \
    "{\"title\":\"One\",\"url\":\"https://x.example/a b\",\"content\":\"c1\"}," \
    "{\"title\":\"Two\",\"content\":\"  two\\n\\tlines  \"}," \
    "{\"title\":\"Say \\\"hi\\\" \\\\ there\",\"content\":\"%s\"}]}}}]}\n\n"

static char *stream_of(const char *content_events, const char *snippet3)
{
    cg_buf_t b = {0};
    cg_buf_printf(&b, CTX, snippet3 ? snippet3 : "c3");
    cg_buf_puts(&b, content_events);
    cg_buf_puts(&b, "data: [DONE]\n\n");
    cg_buf_putc(&b, '\0');
    return b.p;
}

static void run(const char *profile, const char *in, const cg_request_t *req, view_t *v, cg_buf_t *out)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    run_stream(&cfg, req, in, strlen(in), NULL, 0, out);
    view_of_stream(v, out->p, out->len);
}

static char *chunk(const char *text)
{
    cg_buf_t b = {0};
    cg_buf_printf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}\n\n", text);
    cg_buf_putc(&b, '\0');
    return b.p;
}

/* Number of UTF-16 code units in UTF-8 text s[0..n). */
static size_t u16len(const char *s, size_t n)
{
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) != 0x80)
            u += c >= 0xF0 ? 2 : 1;
    }
    return u;
}

/* Byte offset of UTF-16 offset u in UTF-8 text s. */
static size_t byte_at_u16(const char *s, size_t n, size_t u)
{
    size_t i = 0, seen = 0;
    while (i < n && seen < u) {
        unsigned char c = (unsigned char)s[i];
        seen += c >= 0xF0 ? 2 : 1;
        i += c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    }
    return i;
}

/* --- openai ----------------------------------------------------------------- */

static void test_openai_offsets_are_utf16(void **state)
{
    (void)state;
    /* An emoji (2 UTF-16 units, 4 bytes), an escaped é and a newline before
     * the reference, and the reference split across two events. */
    char *c1 = chunk("\xF0\x9F\x98\x80 \\u00e9\\n see [do");
    char *c2 = chunk("c1] and [doc1][doc2].");
    cg_buf_t events = {0};
    cg_buf_puts(&events, c1);
    cg_buf_puts(&events, c2);
    cg_buf_putc(&events, '\0');
    char *in = stream_of(events.p, NULL);
    view_t v;
    cg_buf_t out = {0};
    run("openai", in, NULL, &v, &out);
    const char *content = v.content[0].p;
    size_t n = v.content[0].len;
    const char *link = "[[doc1]](https://x.example/a%20b)";
    assert_non_null(memmem(content, n, link, strlen(link)));

    cg_json_t j;
    cg_json_init(&j, 4096);
    const char *ann = strstr(v.extras.p, "[{\"type\":\"url_citation\"");
    assert_non_null(ann);
    assert_int_equal(cg_json_parse(&j, ann, strcspn(ann, "\n")), CG_JSON_OK);
    assert_int_equal(j.tok[0].type, JSMN_ARRAY);
    assert_int_equal(j.tok[0].size, 2); /* two rewritten references; doc2 has no URL */
    for (int k = 0, a = 1; k < 2; k++, a = cg_json_skip(&j, a)) {
        int uc = cg_json_get(&j, a, "url_citation");
        double s, e;
        assert_true(cg_json_number(&j, cg_json_get(&j, uc, "start_index"), &s));
        assert_true(cg_json_number(&j, cg_json_get(&j, uc, "end_index"), &e));
        size_t bs = byte_at_u16(content, n, (size_t)s), be = byte_at_u16(content, n, (size_t)e);
        assert_int_equal(be - bs, strlen(link));
        assert_memory_equal(content + bs, link, strlen(link));
        assert_int_equal((size_t)e - (size_t)s, u16len(link, strlen(link)));
    }
    /* The first link starts after "😀 é\n see " = 2+1+1+1+5 UTF-16 units. */
    int uc0 = cg_json_get(&j, 1, "url_citation");
    double s0;
    cg_json_number(&j, cg_json_get(&j, uc0, "start_index"), &s0);
    assert_int_equal((int)s0, 10);
    cg_json_free(&j);
    /* doc2 has no URL: listed under the chunk's top-level "citations". */
    assert_non_null(strstr(v.extras.p, "\"id\":\"doc2\""));
    view_free(&v);
    cg_buf_free(&out);
    cg_buf_free(&events);
    free(c1);
    free(c2);
    free(in);
}

static void test_openai_body_annotations_in_message(void **state)
{
    (void)state;
    const char *body =
        "{\"id\":\"b\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "\"See [doc1].\",\"context\":{\"citations\":[{\"title\":\"One\",\"url\":\"https://x.example/1\"}]}}}]}";
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openai"));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    assert_int_equal(cg_xform_body(x, body, strlen(body), &out), 0);
    cg_buf_t b = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    cg_json_t j;
    cg_json_init(&j, 4096);
    assert_int_equal(cg_json_parse(&j, b.p, b.len), CG_JSON_OK);
    int msg = cg_json_get(&j, cg_json_get(&j, 0, "choices") + 1, "message");
    int ann = cg_json_get(&j, msg, "annotations");
    assert_int_equal(cg_json_type(&j, ann), JSMN_ARRAY);
    assert_int_equal(j.tok[ann].size, 1);
    double s, e;
    int uc = cg_json_get(&j, ann + 1, "url_citation");
    cg_json_number(&j, cg_json_get(&j, uc, "start_index"), &s);
    cg_json_number(&j, cg_json_get(&j, uc, "end_index"), &e);
    assert_int_equal((int)s, 4);
    assert_int_equal((int)e, 4 + (int)strlen("[[doc1]](https://x.example/1)"));
    assert_int_equal(cg_json_get(&j, 0, "citations"), -1); /* every citation has a URL */
    cg_json_free(&j);
    cg_buf_free(&b);
    cg_out_free(&out);
    cg_xform_free(x);
}

/* --- webchat ---------------------------------------------------------------- */

static void test_webchat_renumbers_and_separates(void **state)
{
    (void)state;
    char *c = chunk("A [doc2][doc1] B [doc1] [doc7] [doc0]");
    char *in = stream_of(c, NULL);
    view_t v;
    cg_buf_t out = {0};
    run("webchat", in, NULL, &v, &out);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p,
                        "A [1]\xE2\x80\x8B[2] B [2] [doc7] [doc0]\n\n"
                        "[1]: cite:1 \"two lines\"\n"
                        "[2]: https://x.example/a%20b \"One\"");
    /* The entity has one Claim per position, in position order. */
    const char *e = strstr(v.extras.p, "\"citation\":[");
    assert_non_null(e);
    const char *p1 = strstr(e, "\"position\":\"1\""), *p2 = strstr(e, "\"position\":\"2\"");
    assert_non_null(p1);
    assert_non_null(p2);
    assert_true(p1 < p2);
    assert_null(strstr(e, "\"position\":\"3\""));
    assert_non_null(strstr(e, "\"name\":\"Two\""));
    assert_non_null(strstr(e, "\"url\":\"https://x.example/a%20b\""));
    assert_true(v.ends_done);
    view_free(&v);
    cg_buf_free(&out);
    free(c);
    free(in);
}

static void test_webchat_escapes_titles_and_cuts_abstracts(void **state)
{
    (void)state;
    /* A 260-character snippet of 10-character words: the abstract is cut
     * at a word boundary within 199 characters, then "…". */
    char snippet[400] = "";
    for (int i = 0; i < 26; i++)
        strcat(snippet, "wordwordw ");
    char *c = chunk("X [doc3].");
    char *in = stream_of(c, snippet);
    view_t v;
    cg_buf_t out = {0};
    run("webchat", in, NULL, &v, &out);
    cg_buf_putc(&v.content[0], '\0');
    const char *def = strstr(v.content[0].p, "[1]: cite:1 \"");
    assert_non_null(def);
    /* 19 whole words (189 characters) fit before the cut. */
    char want[300] = "[1]: cite:1 \"";
    for (int i = 0; i < 19; i++)
        strcat(want, i ? " wordwordw" : "wordwordw");
    strcat(want, "\xE2\x80\xA6\"");
    assert_string_equal(def, want);
    assert_non_null(strstr(v.extras.p, "\"name\":\"Say \\\"hi\\\" \\\\ there\""));
    view_free(&v);
    cg_buf_free(&out);
    free(c);
    free(in);

    /* A title with a quote and a backslash, in a URL definition. */
    const char *ctx =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":[{\"title\":"
        "\"Say \\\"hi\\\" \\\\ there\\nnow\",\"url\":\"https://q.example/\"}]}}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Q[doc1]\"}}]}\n\n"
        "data: [DONE]\n\n";
    run("webchat", ctx, NULL, &v, &out);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p,
                        "Q[1]\n\n[1]: https://q.example/ \"Say \\\"hi\\\" \\\\ there now\"");
    view_free(&v);
    cg_buf_free(&out);
}

/* SPEC §6 rule 5 for the entity chunk: 150 sources with 1 KB links and
 * titles do not fit one line even without snippets; each Claim is then
 * brief (name and abstract cut, no url), all 150 of them, and the
 * definitions keep the full links. */
static void test_webchat_many_long_sources_stay_one_line(void **state)
{
    (void)state;
    enum { N = 150 };
    cg_buf_t in = {0}, refs = {0}, out = {0};
    cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}],"
                     "\"search_results\":[");
    for (int i = 1; i <= N; i++) {
        cg_buf_printf(&in, "%s{\"title\":\"", i > 1 ? "," : "");
        for (int k = 0; k < 100; k++)
            cg_buf_puts(&in, "Title word ");
        cg_buf_printf(&in, "%d\",\"url\":\"https://x.example/%d/", i, i);
        for (int k = 0; k < 1000; k++)
            cg_buf_putc(&in, 'p');
        cg_buf_puts(&in, "\",\"snippet\":\"a snippet\"}");
        cg_buf_printf(&refs, "[%d]", i);
    }
    cg_buf_puts(&in, "]}\n\n");
    cg_buf_printf(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"}}]}\n\n",
                  refs.p);
    cg_buf_puts(&in, "data: [DONE]\n\n");
    cg_buf_putc(&in, '\0');
    view_t v;
    run("webchat", in.p, NULL, &v, &out);
    /* Every line but the upstream's own first event, which goes out unchanged. */
    const char *first_end = strchr(out.p, '\n');
    for (const char *l = first_end + 1, *e; *l; l = e + 1) {
        e = strchr(l, '\n');
        if ((size_t)(e - l) > CG_XFORM_LINE_MAX)
            fail_msg("a line of %zu bytes: %.60s", (size_t)(e - l), l);
    }
    const char *ent = strstr(out.p, "\"entities\":[");
    assert_non_null(ent);
    size_t claims = 0;
    for (const char *p = ent; (p = strstr(p, "{\"@type\":\"Claim\"")) != NULL; p++)
        claims++;
    assert_int_equal(claims, N);
    assert_null(strstr(ent, "\"url\":")); /* brief claims */
    assert_non_null(strstr(out.p, "[150]: https://x.example/150/pppp")); /* full definitions */
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&refs);
    cg_buf_free(&out);
}

static void test_webchat_nothing_cited_adds_nothing(void **state)
{
    (void)state;
    char *c = chunk("No references [doc9].");
    char *in = stream_of(c, NULL);
    view_t v;
    cg_buf_t out = {0};
    run("webchat", in, NULL, &v, &out);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "No references [doc9].");
    assert_int_equal(v.extras.len, 0);
    view_free(&v);
    cg_buf_free(&out);
    free(c);
    free(in);
}

/* --- markdown --------------------------------------------------------------- */

/* The content of choice `index` that profile markdown makes of `in`. */
static char *markdown_content(const char *in, const cg_request_t *req, size_t index, view_t *v)
{
    cg_buf_t out = {0};
    run("markdown", in, req, v, &out);
    cg_buf_free(&out);
    return cg_xstrndup(v->content[index].p ? v->content[index].p : "", v->content[index].len);
}

static void test_markdown_links_and_renumbering(void **state)
{
    (void)state;
    /* doc2 has no URL: [N] alone. Adjacent links get no U+200B. */
    char *c = chunk("A [doc2][doc1] B [doc1] [doc7] [doc0] [doc3]");
    char *in = stream_of(c, NULL);
    view_t v;
    char *got = markdown_content(in, NULL, 0, &v);
    assert_string_equal(got, "A [1][2](https://x.example/a%20b) B [2](https://x.example/a%20b) "
                             "[doc7] [doc0] [3]\n\n**Sources**\n"
                             "1. Two\n"
                             "2. [One](https://x.example/a%20b)\n"
                             "3. Say \"hi\" \\\\ there");
    assert_int_equal(v.extras.len, 0); /* no entities, annotations or citations */
    assert_string_equal(v.sources.p, "[]");
    assert_true(v.ends_done);
    free(got);
    view_free(&v);
    free(c);
    free(in);
}

/* The Sources block is one content delta of its own, right before [DONE]. */
static void test_markdown_sources_delta_before_done(void **state)
{
    (void)state;
    char *c = chunk("X [doc1].");
    char *in = stream_of(c, NULL);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("markdown"));
    cg_buf_t out = {0};
    run_stream(&cfg, NULL, in, strlen(in), NULL, 0, &out);
    cg_buf_putc(&out, '\0');
    const char *tail = "\"delta\":{\"content\":"
                       "\"\\n\\n**Sources**\\n1. [One](https://x.example/a%20b)\"},"
                       "\"finish_reason\":null}]}\n\ndata: [DONE]\n\n";
    assert_true(strlen(out.p) > strlen(tail));
    assert_string_equal(out.p + strlen(out.p) - strlen(tail), tail);
    assert_non_null(strstr(out.p, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\","
                                  "\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,"
                                  "\"delta\":{\"content\":\"\\n\\n**Sources**"));
    cg_buf_free(&out);
    free(c);
    free(in);
}

/* Every character SPEC §7 lists is escaped in TITLE, in both line forms;
 * others (a quote, parentheses, #) are not; the URL is percent-encoded. */
static void test_markdown_escapes_titles_and_encodes_urls(void **state)
{
    (void)state;
    const char *in =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":["
        "{\"title\":\"a\\\\b`c*d_e[f]g<h>i\\\"j(k)#\",\"url\":\"https://u.example/a b(c)<d>?q=1\"},"
        "{\"title\":\"a\\\\b`c*d_e[f]g<h>i\\\"j(k)#\"}]}}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"P [doc1] Q [doc2]\"}}]}\n\n"
        "data: [DONE]\n\n";
    view_t v;
    char *got = markdown_content(in, NULL, 0, &v);
    assert_string_equal(got, "P [1](https://u.example/a%20b%28c%29%3Cd%3E?q=1) Q [2]"
                             "\n\n**Sources**\n"
                             "1. [a\\\\b\\`c\\*d\\_e\\[f\\]g\\<h\\>i\"j(k)#]"
                             "(https://u.example/a%20b%28c%29%3Cd%3E?q=1)\n"
                             "2. a\\\\b\\`c\\*d\\_e\\[f\\]g\\<h\\>i\"j(k)#");
    free(got);
    view_free(&v);
}

static void test_markdown_nothing_cited_adds_nothing(void **state)
{
    (void)state;
    char *c = chunk("No references [doc9] [doc0].");
    char *in = stream_of(c, NULL);
    view_t v;
    cg_buf_t out = {0};
    run("markdown", in, NULL, &v, &out);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "No references [doc9] [doc0].");
    assert_null(memmem(out.p, out.len, "Sources", 7));
    assert_int_equal(v.events, 3); /* context, content, [DONE]: nothing added */
    assert_true(v.ends_done);
    view_free(&v);
    cg_buf_free(&out);
    free(c);
    free(in);
}

/* Each citing choice lists the positions it cites; positions are the
 * answer's. A reference made before the citations were known stays as
 * written, and its citation still gets a line (SPEC §6). */
static void test_markdown_choices_and_late_citations(void **state)
{
    (void)state;
    const char *in =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Early [doc2]. \"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":["
        "{\"title\":\"One\",\"url\":\"https://o.example/\"},{\"title\":\"Two\"},"
        "{\"title\":\"Three\"}]}}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Zero [doc3]\"}},"
        "{\"index\":1,\"delta\":{\"content\":\"One [doc1][doc3]\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"},"
        "{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    view_t v;
    char *zero = markdown_content(in, NULL, 0, &v);
    char *one = cg_xstrndup(v.content[1].p, v.content[1].len);
    assert_string_equal(zero, "Early [doc2]. Zero [1]\n\n**Sources**\n1. Three\n3. Two");
    assert_string_equal(one, "One [2](https://o.example/)[1]\n\n**Sources**\n"
                             "1. Three\n2. [One](https://o.example/)");
    free(zero);
    free(one);
    view_free(&v);
}

/* Upstream url_citation annotations (SPEC §6): each citation takes its
 * position where its annotation arrives and a line in that choice's
 * Sources; the text has no reference to rewrite. */
static void test_markdown_annotations_listed_where_they_arrive(void **state)
{
    (void)state;
    const char *in =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"See the news.\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"annotations\":[{\"type\":\"url_citation\","
        "\"url_citation\":{\"url\":\"https://n.example/a b\",\"title\":\"N_1\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"Other [1].\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"annotations\":[{\"type\":\"url_citation\","
        "\"url_citation\":{\"url\":\"https://m.example/\",\"title\":\"M\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"},"
        "{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    view_t v;
    char *zero = markdown_content(in, NULL, 0, &v);
    char *one = cg_xstrndup(v.content[1].p, v.content[1].len);
    assert_string_equal(zero, "See the news.\n\n**Sources**\n1. [N\\_1](https://n.example/a%20b)");
    assert_string_equal(one, "Other [1](https://n.example/a%20b).\n\n**Sources**\n"
                             "1. [N\\_1](https://n.example/a%20b)\n2. [M](https://m.example/)");
    assert_true(v.ends_done);
    free(zero);
    free(one);
    view_free(&v);
}

/* A truncated answer: held bytes, then the Sources delta, then the error
 * event, and no [DONE] (SPEC §6 End of stream). */
static void test_markdown_truncated_stream(void **state)
{
    (void)state;
    const char *in =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":["
        "{\"title\":\"One\",\"url\":\"https://o.example/\"}]}}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Cut [doc1] [do\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"never";
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("markdown"));
    cg_buf_t out = {0};
    run_stream(&cfg, NULL, in, strlen(in), NULL, 0, &out);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "Cut [1](https://o.example/) [do"
                                         "\n\n**Sources**\n1. [One](https://o.example/)");
    assert_true(v.ends_error);
    assert_false(v.ends_done);
    assert_null(memmem(out.p, out.len, "[DONE]", 6));
    const char *src = memmem(out.p, out.len, "**Sources**", 11);
    const char *err = memmem(out.p, out.len, "\"upstream_closed\"", 17);
    assert_non_null(src);
    assert_non_null(err);
    assert_true(src < err);
    view_free(&v);
    cg_buf_free(&out);
}

static void test_markdown_body(void **state)
{
    (void)state;
    const char *body =
        "{\"id\":\"b\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "\"See [doc2] and [doc1][doc2].\",\"context\":{\"citations\":[{\"title\":\"One_1\","
        "\"url\":\"https://x.example/a b\"},{\"title\":\"Two\"}]}},\"finish_reason\":\"stop\"}],"
        "\"usage\":{\"total_tokens\":3}}";
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("markdown"));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    assert_int_equal(cg_xform_body(x, body, strlen(body), &out), 0);
    cg_buf_t b = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    view_t v;
    assert_int_equal(view_of_body(&v, b.p, b.len), 0);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "See [1] and [2](https://x.example/a%20b)[1]."
                                         "\n\n**Sources**\n"
                                         "1. Two\n2. [One\\_1](https://x.example/a%20b)");
    assert_int_equal(v.extras.len, 0);
    assert_string_equal(v.sources.p, "[]");
    /* Nothing but the content changed. */
    cg_buf_putc(&b, '\0');
    assert_non_null(strstr(b.p, "\"usage\":{\"total_tokens\":3}}"));
    assert_int_equal(cg_xform_stats(x)->citations_emitted, 2);
    view_free(&v);
    cg_buf_free(&b);
    cg_out_free(&out);
    cg_xform_free(x);
}

/* 25 citations with titles of 1,000 characters to escape and URLs of 1,000
 * spaces fit in a 52 KB context line but make a Sources block of 150 KB
 * (JSON-escaped): it goes out in several content chunks, no line over 64 KiB
 * (SPEC §6 rule 5), the same however the stream is read. */
static void test_markdown_long_sources_split(void **state)
{
    (void)state;
    enum { NCITE = 25 };
    cg_buf_t in = {0}, want = {0}, title = {0}, esc = {0}, url = {0}, link = {0};
    for (int i = 0; i < 1000; i++) {
        cg_buf_puts(&title, i % 2 ? "*" : "_");
        cg_buf_puts(&esc, i % 2 ? "\\*" : "\\_");
        cg_buf_putc(&url, ' ');
        cg_buf_puts(&link, "%20");
    }
    cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":[");
    for (int i = 0; i < NCITE; i++)
        cg_buf_printf(&in, "%s{\"title\":\"%d%.*s\",\"url\":\"https://x.example/%.*s%d\"}",
                      i ? "," : "", i, (int)title.len, title.p, (int)url.len, url.p, i);
    cg_buf_puts(&in, "]}}}]}\n\n");
    cg_buf_puts(&want, "\n\n**Sources**");
    for (int i = 0; i < NCITE; i++) {
        cg_buf_printf(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[doc%d]\"}}]}\n\n",
                      i + 1);
        cg_buf_printf(&want, "\n%d. [%d%.*s](https://x.example/%.*s%d)", i + 1, i, (int)esc.len, esc.p,
                      (int)link.len, link.p, i);
    }
    cg_buf_puts(&in, "data: [DONE]\n\n");
    assert_true(in.len < 65536 && want.len > 65536);
    static const size_t reads[] = {0, 4093, 65536};
    view_t first = {0};
    for (size_t r = 0; r < 3; r++) {
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named("markdown"));
        cg_buf_t out = {0};
        run_stream(&cfg, NULL, in.p, in.len, reads[r] ? &reads[r] : NULL, reads[r] ? 1 : 0, &out);
        view_t v;
        view_of_stream(&v, out.p, out.len);
        if (v.max_line > 65536)
            fail_msg("read %zu: line of %zu bytes", reads[r], v.max_line);
        assert_true(v.content[0].len > want.len);
        assert_memory_equal(v.content[0].p + v.content[0].len - want.len, want.p, want.len);
        /* 1 context + NCITE content events + [DONE], plus 5 or more for Sources */
        assert_true(v.events >= NCITE + 2 + 5);
        assert_true(v.ends_done);
        if (r == 0) {
            first = v;
        } else {
            char why[256];
            assert_true(view_equal(&first, &v, why, sizeof(why)));
            view_free(&v);
        }
        cg_buf_free(&out);
    }
    view_free(&first);
    cg_buf_free(&in);
    cg_buf_free(&want);
    cg_buf_free(&title);
    cg_buf_free(&esc);
    cg_buf_free(&url);
    cg_buf_free(&link);
}

/* --- structured ------------------------------------------------------------- */

static const char *TOOL_REQ =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":\"{\\\"path\\\": \\\"/a.pdf\\\", "
    "\\\"bb\\\": \\\"D(1)\\\"}\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"2\",\"content\":[{\"type\":\"text\",\"text\":\"/b.pdf D(2)\"}]}]}";

/* Runs a structured answer (the decoded content) as a body; returns the
 * decoded corrected content and the number removed. */
static char *structured_of(const char *request, bool aliases, const char *answer,
                           unsigned *removed, bool *checked)
{
    cg_cite_opts_t o = {8192, true};
    cg_request_t req;
    assert_int_equal(cg_request_parse(&req, request, strlen(request), &o), 0);
    cg_buf_t upstream = {0};
    cg_aliases_t *a = aliases ? cg_aliases_make(&req, request, strlen(request), &upstream) : NULL;
    assert_true(a != NULL || !aliases);
    req.aliases = a;
    cg_buf_t body = {0};
    cg_buf_puts(&body, "{\"choices\":[{\"index\":0,\"message\":{\"content\":");
    cg_json_put_cstr(&body, answer);
    cg_buf_puts(&body, "}}]}");
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("structured"));
    cg_xform_t *x = cg_xform_new(&cfg, &req);
    cg_out_t out = {0};
    assert_int_equal(cg_xform_body(x, body.p, body.len, &out), 0);
    cg_buf_t b = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    view_t v;
    assert_int_equal(view_of_body(&v, b.p, b.len), 0);
    cg_buf_putc(&v.content[0], '\0');
    char *r = cg_xstrndup(v.content[0].p, v.content[0].len);
    *removed = cg_xform_stats(x)->citations_removed;
    *checked = cg_xform_stats(x)->structured;
    view_free(&v);
    cg_buf_free(&b);
    cg_buf_free(&body);
    cg_out_free(&out);
    cg_xform_free(x);
    cg_request_free(&req);
    cg_aliases_free(a);
    cg_buf_free(&upstream);
    return r;
}

static char *structured(const char *answer, unsigned *removed, bool *checked)
{
    return structured_of(TOOL_REQ, false, answer, removed, checked);
}

static void test_structured_removes_and_renumbers(void **state)
{
    (void)state;
    unsigned removed;
    bool checked;
    char *r = structured("{\"response\": \"A [1]. B [2]. C [3][3] D[2] [0] [9]\", \"x\": 1, "
                         "\"citations\": [[\"/a.pdf\", \"D(1)\"], [\"/a.pdf\", \"D(2)\"], "
                         "[\"/b.pdf\", \"D(2)\"]]}",
                         &removed, &checked);
    /* [2] mixes two tool outputs: invalid. Its markers vanish with the
     * space before them; [3] becomes [2]; [0] and [9] stay. */
    assert_string_equal(r, "{\"response\":\"A [1]. B. C [2][2] D [0] [9]\",\"x\":1,"
                           "\"citations\":[[\"/a.pdf\",\"D(1)\"],[\"/b.pdf\",\"D(2)\"]]}");
    assert_int_equal(removed, 1);
    assert_true(checked);
    free(r);
}

static void test_structured_rejects_bad_shapes(void **state)
{
    (void)state;
    unsigned removed;
    bool checked;
    char *r = structured("{\"response\":\"A [1] [2] [3] [4]\",\"citations\":[[\"/a.pdf\"],"
                         "[\"/a.pdf\",\"D(1)\",\"x\"],[\"/a.pdf\",7],\"/a.pdf\"]}",
                         &removed, &checked);
    assert_string_equal(r, "{\"response\":\"A\",\"citations\":[]}");
    assert_int_equal(removed, 4);
    free(r);
    /* Not a structured answer: unchanged, and not reported. */
    r = structured("Plain text [1].", &removed, &checked);
    assert_string_equal(r, "Plain text [1].");
    assert_false(checked);
    free(r);
    r = structured("{\"response\":\"no citations member\"}", &removed, &checked);
    assert_string_equal(r, "{\"response\":\"no citations member\"}");
    assert_false(checked);
    free(r);
}

#define ALIAS_BOX1 "D(1,1.02,2.33,3.1,2.33,3.1,2.61,1.02,2.61)"
#define ALIAS_BOX2 "D(2,0,0,8.5,0,8.5,11,0,11)"
/* Tool 1: P1, B1; tool 2: P2 (written with \/ escapes), B2. */
static const char *ALIAS_REQ =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
    "{\"role\":\"tool\",\"content\":\"{\\\"p\\\": \\\"/data/lake/contracts/a.pdf\\\", "
    "\\\"b\\\": \\\"" ALIAS_BOX1 "\\\"}\"},"
    "{\"role\":\"tool\",\"content\":\"[\\\"abfss:\\\\/\\\\/lake\\\\/contracts\\\\/b.pdf\\\", "
    "\\\"" ALIAS_BOX2 "\\\"]\"}]}";

static void test_structured_expands_aliases(void **state)
{
    (void)state;
    unsigned removed;
    bool checked;
    char *r = structured_of(ALIAS_REQ, true,
                            "{\"response\":\"A [1] B [2] C [3] D [4] E [5]\",\"citations\":["
                            "[\"P1\",\"B1\"],[\"P2\",\"B2\"],[\"P1\",\"B2\"],[\"P9\",\"B1\"],"
                            "[\"/data/lake/contracts/a.pdf\",\"B1\"]]}",
                            &removed, &checked);
    /* [3] pairs two tool outputs and [4] an alias never made: removed. P2
     * stands for the decoded path, which occurs in tool 2 only escaped. */
    assert_string_equal(r, "{\"response\":\"A [1] B [2] C D E [3]\",\"citations\":["
                           "[\"/data/lake/contracts/a.pdf\",\"" ALIAS_BOX1 "\"],"
                           "[\"abfss://lake/contracts/b.pdf\",\"" ALIAS_BOX2 "\"],"
                           "[\"/data/lake/contracts/a.pdf\",\"" ALIAS_BOX1 "\"]]}");
    assert_int_equal(removed, 2);
    assert_true(checked);
    free(r);
    /* Without aliases made, "P1" is just a string no tool holds. */
    r = structured_of(ALIAS_REQ, false, "{\"response\":\"A [1]\",\"citations\":[[\"P1\",\"B1\"]]}",
                      &removed, &checked);
    assert_string_equal(r, "{\"response\":\"A\",\"citations\":[]}");
    assert_int_equal(removed, 1);
    free(r);
}

static void test_structured_stream_is_held_then_replayed(void **state)
{
    (void)state;
    cg_cite_opts_t o = {8192, true};
    cg_request_t req;
    assert_int_equal(cg_request_parse(&req, TOOL_REQ, strlen(TOOL_REQ), &o), 0);
    const char *in =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"response\\\":\\\"A [1] B [2]\"}}]}\n\n"
        ": keep-alive\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\\",\\\"citations\\\":[[\\\"/x\\\",\\\"y\\\"],"
        "[\\\"/b.pdf\\\",\\\"D(2)\\\"]]}\"},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("structured"));
    cg_xform_t *x = cg_xform_new(&cfg, &req);
    cg_out_t out = {0};
    cg_xform_feed(x, in, strlen(in), &out);
    assert_int_equal(cg_out_len(&out), 0); /* held to the end */
    cg_xform_finish(x, CG_END_EOF, &out);
    cg_buf_t b = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    view_t v;
    view_of_stream(&v, b.p, b.len);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "{\"response\":\"A B [1]\",\"citations\":[[\"/b.pdf\",\"D(2)\"]]}");
    assert_true(v.ends_done);
    assert_int_equal(cg_xform_stats(x)->citations_removed, 1);
    assert_non_null(memmem(b.p, b.len, ": keep-alive\n\n", 14)); /* other events unchanged */
    view_free(&v);
    cg_buf_free(&b);
    cg_out_free(&out);
    cg_xform_free(x);
    cg_request_free(&req);
}

/* SPEC §6 Fidelity 5: a long content full of references still comes out in
 * lines of at most 64 KiB, with the content intact, in every profile and
 * however the reads fall. */
static void test_long_content_lines_stay_short(void **state)
{
    (void)state;
    cg_buf_t in = {0}, want = {0}, url = {0};
    cg_buf_puts(&url, "https://x.example/");
    for (int i = 0; i < 2000; i++)
        cg_buf_putc(&url, 'a');
    cg_buf_printf(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":"
                       "[{\"title\":\"T\",\"url\":\"%.*s\"}]}}}]}\n\n", (int)url.len, url.p);
    cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    for (int i = 0; i < 3000; i++) {
        cg_buf_puts(&in, "w\\u00e9 [doc1] ");
        cg_buf_puts(&want, "w\xC3\xA9 [[doc1]](");
        cg_buf_put(&want, url.p, url.len);
        cg_buf_puts(&want, ") ");
    }
    cg_buf_puts(&in, "[do\"},\"finish_reason\":null}]}\n\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c1]\"},"
                     "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    cg_buf_puts(&want, "[[doc1]](");
    cg_buf_put(&want, url.p, url.len);
    cg_buf_putc(&want, ')');
    static const char *const profiles[] = {"openwebui", "openai", "webchat"};
    static const size_t reads[] = {0, 4093, 65536};
    for (size_t p = 0; p < 3; p++) {
        view_t first = {0};
        for (size_t r = 0; r < 3; r++) {
            cg_xform_cfg_t cfg;
            cg_xform_cfg_default(&cfg, profile_named(profiles[p]));
            cg_buf_t out = {0};
            run_stream(&cfg, NULL, in.p, in.len, reads[r] ? &reads[r] : NULL, reads[r] ? 1 : 0, &out);
            view_t v;
            view_of_stream(&v, out.p, out.len);
            if (v.max_line > 65536)
                fail_msg("%s read %zu: line of %zu bytes", profiles[p], reads[r], v.max_line);
            assert_true(v.ends_done);
            if (strcmp(profiles[p], "webchat") != 0) {
                assert_int_equal(v.content[0].len, want.len);
                assert_memory_equal(v.content[0].p, want.p, want.len);
            } else {
                /* [1] for each reference, then the definition. */
                assert_non_null(memmem(v.content[0].p, v.content[0].len, "w\xC3\xA9 [1] w", 9));
            }
            if (r == 0) {
                first = v;
            } else {
                char why[256];
                assert_true(view_equal(&first, &v, why, sizeof(why)));
                view_free(&v);
            }
            cg_buf_free(&out);
        }
        view_free(&first);
    }
    cg_buf_free(&in);
    cg_buf_free(&want);
    cg_buf_free(&url);
}

/* A short event can overflow too: 600 references to a 2,000-byte URL in
 * 4 KiB of content would make a 1.2 MB line. */
static void test_short_event_many_links_stays_short(void **state)
{
    (void)state;
    cg_buf_t in = {0}, url = {0};
    cg_buf_puts(&url, "https://x.example/");
    for (int i = 0; i < 2000; i++)
        cg_buf_putc(&url, 'b');
    cg_buf_printf(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":"
                       "[{\"title\":\"T\",\"url\":\"%.*s\"}]}}}]}\n\n", (int)url.len, url.p);
    for (int e = 0; e < 3; e++) { /* the third event takes the template fast path */
        cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
        for (int i = 0; i < 600; i++)
            cg_buf_puts(&in, "[doc1]");
        cg_buf_puts(&in, "\"},\"finish_reason\":null}]}\n\n");
    }
    cg_buf_puts(&in, "data: [DONE]\n\n");
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_buf_t out = {0};
    run_stream(&cfg, NULL, in.p, in.len, NULL, 0, &out);
    view_t v;
    view_of_stream(&v, out.p, out.len);
    if (v.max_line > 65536)
        fail_msg("line of %zu bytes", v.max_line);
    assert_int_equal(v.content[0].len, 1800 * (url.len + 10));
    view_free(&v);
    cg_buf_free(&out);
    cg_buf_free(&in);
    cg_buf_free(&url);
}

/* --- annotations and [citation:N], in every profile -------------------------- */

/* An OpenAI search model's stream: the text links its sources itself; a
 * late chunk carries the annotations (one url twice, one not absolute). */
static const char *ANNOTATED =
    "data: {\"id\":\"w\",\"created\":7,\"model\":\"s\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
    "data: {\"id\":\"w\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
    "\"News ([a.example](https://a.example/n)).\"}}]}\n\n"
    "data: {\"id\":\"w\",\"choices\":[{\"index\":0,\"delta\":{\"annotations\":["
    "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://a.example/n\",\"title\":\"A\","
    "\"content\":\"snippet a\",\"start_index\":6,\"end_index\":38}},"
    "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"b.example/rel\",\"title\":\"B\"}},"
    "{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://a.example/n\",\"title\":\"A2\"}}"
    "]}}]}\n\n"
    "data: {\"id\":\"w\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
    "data: [DONE]\n\n";

static void test_annotated_stream_every_profile(void **state)
{
    (void)state;
    size_t n = strlen(ANNOTATED);
    view_t v;
    cg_buf_t out = {0};
    /* openai: the annotations went to the client as they came; nothing is
     * repeated, not even the citation without an absolute URL. */
    static const char *const unchanged[] = {"openai", "structured", "off"};
    for (size_t i = 0; i < 3; i++) {
        run(unchanged[i], ANNOTATED, NULL, &v, &out);
        if (out.len != n || memcmp(out.p, ANNOTATED, n) != 0)
            fail_msg("%s changed the stream:\n%.*s", unchanged[i], (int)out.len, out.p);
        view_free(&v);
        out.len = 0;
    }
    /* openwebui: a source event per citation, in order of arrival. */
    run("openwebui", ANNOTATED, NULL, &v, &out);
    const char *a = strstr(v.sources.p, "{\"source\":{\"id\":\"1\",\"name\":\"[1] A\","
                                        "\"url\":\"https://a.example/n\"},\"document\":[\"snippet a\"]");
    const char *b = strstr(v.sources.p, "{\"source\":{\"id\":\"2\",\"name\":\"[2] B\"},");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    assert_null(strstr(v.sources.p, "A2"));
    assert_true(v.ends_done);
    view_free(&v);
    out.len = 0;
    /* webchat: definitions and Claims, no badge in the text. */
    run("webchat", ANNOTATED, NULL, &v, &out);
    cg_buf_putc(&v.content[0], '\0');
    assert_string_equal(v.content[0].p, "News ([a.example](https://a.example/n)).\n\n"
                                        "[1]: https://a.example/n \"A\"\n"
                                        "[2]: cite:2 \"B\"");
    assert_non_null(strstr(v.extras.p, "{\"@type\":\"Claim\",\"position\":\"2\",\"appearance\":"
                                       "{\"@type\":\"DigitalDocument\",\"name\":\"B\",\"abstract\":\"B\""));
    view_free(&v);
    cg_buf_free(&out);
}

/* DeepSeek's [citation:N] with a top-level URL list, in every profile. */
static void test_citation_style_every_profile(void **state)
{
    (void)state;
    const char *in =
        "data: {\"id\":\"d\",\"citations\":[\"https://a.example/1\",\"https://b.example/2\"],"
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"X [citation:2] y [cita\"}}]}\n\n"
        "data: {\"id\":\"d\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tion:1][citation:2].\"},"
        "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    static const char *const want[][2] = {
        {"openwebui", "X [[citation:2]](https://b.example/2) y [[citation:1]](https://a.example/1)"
                      "[[citation:2]](https://b.example/2)."},
        {"openai", "X [[citation:2]](https://b.example/2) y [[citation:1]](https://a.example/1)"
                   "[[citation:2]](https://b.example/2)."},
        {"webchat", "X [1] y [2]\xE2\x80\x8B[1].\n\n[1]: https://b.example/2 \"2\"\n"
                    "[2]: https://a.example/1 \"1\""},
        {"structured", "X [citation:2] y [citation:1][citation:2]."},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        view_t v;
        cg_buf_t out = {0};
        run(want[i][0], in, NULL, &v, &out);
        cg_buf_putc(&v.content[0], '\0');
        if (strcmp(v.content[0].p, want[i][1]) != 0)
            fail_msg("%s\nwant %s\ngot  %s", want[i][0], want[i][1], v.content[0].p);
        if (strcmp(want[i][0], "openwebui") == 0) {
            /* LABEL is N, in first-reference order */
            const char *two = strstr(v.sources.p, "\"name\":\"[2] 2\"");
            const char *one = strstr(v.sources.p, "\"name\":\"[1] 1\"");
            assert_non_null(two);
            assert_non_null(one);
            assert_true(two < one);
        }
        if (strcmp(want[i][0], "openai") == 0)
            assert_non_null(strstr(v.extras.p, "\"url\":\"https://a.example/1\",\"title\":\"1\","
                                               "\"start_index\":40,\"end_index\":75}"));
        view_free(&v);
        cg_buf_free(&out);
    }
}

static void test_profile_names(void **state)
{
    (void)state;
    for (size_t p = 0; p < cg_profile_count(); p++) {
        const cg_profile_t *want = cg_profile_at(p), *got = NULL;
        assert_true(cg_profile_parse(want->name, &got));
        assert_ptr_equal(got, want);
        assert_int_equal(cg_profile_index(got), p);
        assert_non_null(strstr(cg_profile_list(), want->name));
    }
    const cg_profile_t *got;
    assert_false(cg_profile_parse("OpenAI", &got));
    assert_false(cg_profile_parse("", &got));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_offsets_are_utf16),
        cmocka_unit_test(test_openai_body_annotations_in_message),
        cmocka_unit_test(test_webchat_renumbers_and_separates),
        cmocka_unit_test(test_webchat_escapes_titles_and_cuts_abstracts),
        cmocka_unit_test(test_webchat_many_long_sources_stay_one_line),
        cmocka_unit_test(test_webchat_nothing_cited_adds_nothing),
        cmocka_unit_test(test_markdown_links_and_renumbering),
        cmocka_unit_test(test_markdown_sources_delta_before_done),
        cmocka_unit_test(test_markdown_escapes_titles_and_encodes_urls),
        cmocka_unit_test(test_markdown_nothing_cited_adds_nothing),
        cmocka_unit_test(test_markdown_choices_and_late_citations),
        cmocka_unit_test(test_markdown_annotations_listed_where_they_arrive),
        cmocka_unit_test(test_markdown_truncated_stream),
        cmocka_unit_test(test_markdown_body),
        cmocka_unit_test(test_markdown_long_sources_split),
        cmocka_unit_test(test_structured_removes_and_renumbers),
        cmocka_unit_test(test_structured_rejects_bad_shapes),
        cmocka_unit_test(test_structured_stream_is_held_then_replayed),
        cmocka_unit_test(test_structured_expands_aliases),
        cmocka_unit_test(test_long_content_lines_stay_short),
        cmocka_unit_test(test_short_event_many_links_stays_short),
        cmocka_unit_test(test_annotated_stream_every_profile),
        cmocka_unit_test(test_citation_style_every_profile),
        cmocka_unit_test(test_profile_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
