/* Citation model: Azure context, web lists, <source> tags, title and URL rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/cite.h"
#include "citegate/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cg_cite_opts_t opts = {8192, true};

static void azure(cg_cites_t *c, const char *ctx_json)
{
    cg_json_t j;
    cg_json_init(&j, 4096);
    assert_int_equal(cg_json_parse(&j, ctx_json, strlen(ctx_json)), CG_JSON_OK);
    memset(c, 0, sizeof(*c));
    cg_cites_from_azure(c, &j, 0, &opts);
    cg_json_free(&j);
}

/* A URL longer than a field keeps (CG_CITE_MAX_FIELD) makes no link: cut,
 * it would point elsewhere. One that fits is kept whole; so is an absolute
 * filepath used as the URL. Every source kind reads it the same way. */
static void test_long_url_makes_no_link(void **state)
{
    (void)state;
    for (size_t len = CG_CITE_MAX_FIELD - 1; len <= CG_CITE_MAX_FIELD + 1; len++) {
        cg_buf_t url = {0}, ctx = {0};
        cg_buf_puts(&url, "https://x.example/");
        while (url.len < len)
            cg_buf_putc(&url, 'u');
        cg_buf_putc(&url, '\0');
        bool whole = len <= CG_CITE_MAX_FIELD;
        cg_buf_printf(&ctx, "{\"citations\":[{\"title\":\"T\",\"url\":\"%s\"},"
                            "{\"title\":\"F\",\"filepath\":\"%s\"}]}", url.p, url.p);
        cg_cites_t c;
        azure(&c, ctx.p);
        for (size_t i = 0; i < 2; i++) {
            if (whole)
                assert_string_equal(c.v[i].url, url.p);
            else
                assert_true(c.v[i].url == NULL && c.v[i].link == NULL);
            assert_true(strlen(c.v[i].key) <= CG_CITE_MAX_FIELD);
        }
        assert_true(strlen(c.v[1].filepath) <= CG_CITE_MAX_FIELD);
        cg_cites_free(&c);
        cg_cites_t d = {0};
        cg_cite_in_t in = {.id = 1, .title = cg_span("T", 1), .url = cg_span(url.p, len)};
        const cg_citation_t *got = cg_cites_add(&d, &in, &opts);
        assert_true(whole ? got->url != NULL : got->url == NULL);
        cg_cites_free(&d);
        cg_buf_free(&url);
        cg_buf_free(&ctx);
    }
}

static void test_title_fallback(void **state)
{
    (void)state;
    cg_cites_t c;
    azure(&c, "{\"citations\":["
              "{\"title\":\"T\",\"filepath\":\"a/b.pdf\"},"
              "{\"title\":\"\",\"filepath\":\"dir/x%20y.docx?v=1\"},"
              "{\"title\":null,\"url\":\"https://h.example/p/q%28r%29.html#frag\"},"
              "{\"content\":\"only\"},"
              "{\"url\":\"https://h.example/\"}]}");
    assert_int_equal(c.n, 5);
    assert_string_equal(c.v[0].title, "T");
    assert_string_equal(c.v[1].title, "x y.docx");
    assert_string_equal(c.v[2].title, "q(r).html");
    assert_string_equal(c.v[3].title, "Unknown Document");
    assert_string_equal(c.v[4].title, "Unknown Document");
    assert_int_equal(c.kind, CG_CITES_AZURE);
    cg_cites_free(&c);
}

static void test_urls_and_keys(void **state)
{
    (void)state;
    cg_cites_t c;
    azure(&c, "{\"citations\":["
              "{\"url\":\"https://h/a b(1)<x>.pdf\",\"filepath\":\"f.pdf\",\"chunk_id\":\"2\"},"
              "{\"url\":\"/relative/doc.pdf\"},"
              "{\"url\":null,\"filepath\":\"HTTP://files.example/x.pdf\"},"
              "{\"url\":\"ftp://x/y\",\"chunk_id\":7}]}");
    assert_string_equal(c.v[0].url, "https://h/a b(1)<x>.pdf");
    assert_string_equal(c.v[0].link, "https://h/a%20b%281%29%3Cx%3E.pdf");
    assert_string_equal(c.v[0].key, "f.pdf#2");
    assert_null(c.v[1].url);
    assert_null(c.v[1].link);
    assert_string_equal(c.v[1].key, "/relative/doc.pdf");
    assert_string_equal(c.v[2].url, "HTTP://files.example/x.pdf");
    assert_null(c.v[3].url);
    assert_string_equal(c.v[3].chunk_id, "7");
    assert_string_equal(c.v[3].key, "ftp://x/y#7");
    cg_cites_free(&c);
}

static void test_link_is_json_escaped(void **state)
{
    (void)state;
    cg_cites_t c;
    azure(&c, "{\"citations\":[{\"url\":\"https://h/a\\\"b\\\\c\"}]}");
    assert_string_equal(c.v[0].url, "https://h/a\"b\\c");
    assert_string_equal(c.v[0].link, "https://h/a\\\"b\\\\c");
    cg_cites_free(&c);
}

static void test_scores(void **state)
{
    (void)state;
    cg_cites_t c;
    azure(&c, "{\"citations\":["
              "{\"filepath\":\"a\",\"chunk_id\":\"0\",\"title\":\"A\",\"content\":\"ca\"},"
              "{\"title\":\"B\",\"chunk_id\":\"1\",\"content\":\"cb\"},"
              "{\"content\":\"same start\"},"
              "{\"title\":\"D\",\"content\":\"unmatched\"},"
              "{\"title\":\"E\",\"filepath\":\"e\",\"chunk_id\":\"9\"}],"
              "\"all_retrieved_documents\":["
              "{\"filepath\":\"a\",\"chunk_id\":\"0\",\"original_search_score\":42.5,\"rerank_score\":3.2},"
              "{\"title\":\"B\",\"chunk_id\":\"1\",\"original_search_score\":150},"
              "{\"content\":\"same start\",\"original_search_score\":0.61},"
              "{\"title\":\"E\",\"filepath\":\"e\",\"chunk_id\":\"9\",\"rerank_score\":-1}]}");
    assert_true(c.v[0].has_score);
    assert_true(c.v[0].score > 0.7999 && c.v[0].score < 0.8001);
    assert_true(c.v[1].has_score);
    assert_true(c.v[1].score == 1.0); /* 150/100 clamped */
    assert_true(c.v[2].has_score);
    assert_true(c.v[2].score > 0.6099 && c.v[2].score < 0.6101);
    assert_false(c.v[3].has_score); /* no fake 0% */
    assert_true(c.v[4].has_score);
    assert_true(c.v[4].score == 0.0);
    cg_cites_free(&c);
}

static void test_empty_keys_do_not_match(void **state)
{
    (void)state;
    cg_cites_t c;
    /* Both sides lack filepath and title: only content may match, and it differs. */
    azure(&c, "{\"citations\":[{\"chunk_id\":\"1\",\"content\":\"x\"}],"
              "\"all_retrieved_documents\":[{\"chunk_id\":\"1\",\"content\":\"y\","
              "\"original_search_score\":0.5}]}");
    assert_false(c.v[0].has_score);
    cg_cites_free(&c);
}

static void test_web(void **state)
{
    (void)state;
    const char *js = "{\"citations\":[\"https://a.example/one\",\"https://b.example/two\"],"
                     "\"search_results\":[{\"title\":\"Two\",\"url\":\"https://b.example/two\","
                     "\"snippet\":\"s2\"}]}";
    cg_json_t j;
    cg_json_init(&j, 256);
    assert_int_equal(cg_json_parse(&j, js, strlen(js)), CG_JSON_OK);
    cg_cites_t c = {0};
    assert_int_equal(cg_cites_from_web(&c, &j, 0, &opts), 2);
    assert_string_equal(c.v[0].title, "one");
    assert_string_equal(c.v[0].content, "");
    assert_string_equal(c.v[1].title, "Two");
    assert_string_equal(c.v[1].content, "s2");
    assert_string_equal(c.v[1].url, "https://b.example/two");
    assert_ptr_equal(cg_cites_find(&c, 2), &c.v[1]);
    assert_null(cg_cites_find(&c, 3));
    assert_null(cg_cites_find(&c, 0));
    cg_cites_free(&c);
    cg_json_free(&j);
}

static void test_source_tags(void **state)
{
    (void)state;
    const char *text = "cite like <source id=\"1\"> please.\n"
                       "<source id=\"1\" name=\"https://w.example/Page\">first</source>\n"
                       "<source id='2' name='notes.md'>second</source>\n"
                       "<source id=\"1\" name=\"dup\">ignored</source>\n"
                       "<sources id=\"3\">not a tag</source>\n"
                       "<source name=\"no id\">x</source>\n"
                       "<source id=\"4\">unclosed";
    cg_cites_t c = {0};
    cg_request_scan_sources(&c, text, strlen(text), &opts);
    assert_int_equal(c.n, 2);
    const cg_citation_t *one = cg_cites_find(&c, 1);
    assert_non_null(one);
    assert_string_equal(one->content, "first");
    assert_string_equal(one->url, "https://w.example/Page");
    assert_string_equal(one->title, "Page");
    assert_string_equal(one->key, "https://w.example/Page");
    const cg_citation_t *two = cg_cites_find(&c, 2);
    assert_non_null(two);
    assert_string_equal(two->title, "notes.md");
    assert_null(two->url);
    assert_string_equal(two->key, "notes.md");
    assert_null(cg_cites_find(&c, 3));
    assert_null(cg_cites_find(&c, 4));
    cg_cites_free(&c);
}

static void test_request_parse(void **state)
{
    (void)state;
    size_t n;
    char path[512];
    snprintf(path, sizeof(path), "%s/openwebui_rag_request.json", CG_FIXTURES);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char buf[4096];
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    cg_request_t r;
    assert_int_equal(cg_request_parse(&r, buf, n, &opts), 0);
    assert_int_equal(r.sources.n, 2);
    assert_true(r.stream);
    assert_false(r.has_data_sources);
    assert_string_equal(r.question, "How fast is light and how long does sunlight take to arrive?");
    assert_string_equal(r.model, "llama3");
    assert_int_equal(r.model_len, 6);
    cg_request_free(&r);
    /* The model, decoded, with its length (a \u0000 does not end it). */
    static const char model[] = "{\"model\":\"gpt-4o\\u0000\\\"x\"}";
    assert_int_equal(cg_request_parse(&r, model, sizeof(model) - 1, &opts), 0);
    assert_int_equal(r.model_len, 9);
    assert_memory_equal(r.model, "gpt-4o\0\"x", 10);
    cg_request_free(&r);
    assert_int_equal(cg_request_parse(&r, "{\"model\":7}", 11, &opts), 0);
    assert_null(r.model);
    cg_request_free(&r);
    assert_int_equal(cg_request_parse(&r, "[1]", 3, &opts), -1);
    cg_request_free(&r);
    /* Not UTF-8 (RFC 8259 §8.1): a stray continuation byte, an overlong form,
     * a surrogate, a code point over U+10FFFF, a sequence cut short. */
    static const char *const not_utf8[] = {"{\"a\":\"\x80\"}", "{\"a\":\"\xc0\xaf\"}",
                                           "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xf4\x90\x80\x80\"}",
                                           "{\"a\":\"\xe3\x80\"}"};
    for (size_t i = 0; i < sizeof(not_utf8) / sizeof(not_utf8[0]); i++) {
        assert_int_equal(cg_request_parse(&r, not_utf8[i], strlen(not_utf8[i]), &opts), -1);
        cg_request_free(&r);
    }
    static const char utf8[] = "{\"a\":\"caf\xc3\xa9 \xe3\x80\x90\xf0\x9f\x98\x80\"}";
    assert_int_equal(cg_request_parse(&r, utf8, sizeof(utf8) - 1, &opts), 0);
    cg_request_free(&r);
    assert_int_equal(cg_request_parse(&r, "{\"data_sources\":[{}]}", 21, &opts), 0);
    assert_true(r.has_data_sources);
    cg_request_free(&r);
}

static void test_snippet_cut_utf8(void **state)
{
    (void)state;
    cg_cite_opts_t small = {5, true};
    cg_cites_t c = {0};
    /* "aé€" = 61 C3A9 E282AC: 6 bytes; a 5-byte cut must not split the euro sign. */
    cg_cites_add_source(&c, 1, "", 0, "a\xC3\xA9\xE2\x82\xAC", 6, &small);
    assert_string_equal(c.v[0].content, "a\xC3\xA9");
    cg_cites_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_title_fallback),
        cmocka_unit_test(test_long_url_makes_no_link),
        cmocka_unit_test(test_urls_and_keys),
        cmocka_unit_test(test_link_is_json_escaped),
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_empty_keys_do_not_match),
        cmocka_unit_test(test_web),
        cmocka_unit_test(test_source_tags),
        cmocka_unit_test(test_request_parse),
        cmocka_unit_test(test_snippet_cut_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
