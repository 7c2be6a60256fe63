/* Citation model: Azure context, web lists, <source> tags, title and URL rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/cite.h"
#include "citegate/request.h"

#include "alloc_count.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cg_cite_opts_t opts = {8192, true};

/* Heap allocations: alloc_count.c, linked as bench/core links it. */

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

/* A source as a dialect names it, like a Knowledge Bases reference: a web
 * page (a link) or an S3 document (no link, its file name as the title),
 * a chunk id, a page, and a snippet of len bytes. */
static const cg_citation_t *add_source(cg_cites_t *c, unsigned id, size_t len,
                                       const cg_cite_opts_t *o)
{
    static char text[20000];
    char url[96], chunk[32], page[16];
    for (size_t i = 0; i < len && i < sizeof(text); i++)
        text[i] = (char)('a' + (id + i) % 26);
    int un = id % 2 ? snprintf(url, sizeof(url), "https://kb.example/docs/page %u.html", id)
                    : snprintf(url, sizeof(url), "s3://kb-docs/reports/q%u (final).pdf", id);
    int cn = snprintf(chunk, sizeof(chunk), "1%%3A0%%3A%u", id);
    int pn = snprintf(page, sizeof(page), "%u", id % 300);
    cg_cite_in_t in = {.id = id};
    in.url = cg_span(url, (size_t)un);
    in.content = cg_span(text, len);
    in.chunk_id = cg_span(chunk, (size_t)cn);
    in.page = cg_span(page, (size_t)pn);
    return cg_cites_add(c, &in, o);
}

#define NFIELDS 8

/* A citation's string fields, in one order. */
static void fields_of(const cg_citation_t *x, const char *f[NFIELDS])
{
    const char *v[NFIELDS] = {x->title, x->content,  x->url,      x->link,
                              x->key,   x->filepath, x->chunk_id, x->page};
    memcpy(f, v, sizeof(v));
}

/* Where a citation's fields were, and copies of what they held. */
typedef struct seen {
    const char *at[NFIELDS];
    char *copy[NFIELDS];
} seen_t;

static void see(seen_t *s, const cg_citation_t *x)
{
    fields_of(x, s->at);
    for (int k = 0; k < NFIELDS; k++)
        s->copy[k] = s->at[k] ? strdup(s->at[k]) : NULL;
}

/* x's fields are where they were, and hold what they held. */
static void still(const seen_t *s, const cg_citation_t *x, bool same_place)
{
    const char *f[NFIELDS];
    fields_of(x, f);
    for (int k = 0; k < NFIELDS; k++) {
        if (s->copy[k] == NULL) {
            assert_null(f[k]);
            continue;
        }
        if (same_place)
            assert_ptr_equal(f[k], s->at[k]);
        assert_string_equal(f[k], s->copy[k]);
    }
}

static void unsee(seen_t *s)
{
    for (int k = 0; k < NFIELDS; k++)
        free(s->copy[k]);
}

/* Citations whose strings fill many blocks: every field stays where it
 * was put, holding what it held, while the table grows; the table makes a
 * few blocks, not an allocation per string. */
static void test_fields_stay_put(void **state)
{
    (void)state;
    enum { N = 240 };
    static seen_t seen[N];
    cg_cites_t c = {0};
    uint64_t a0 = alloc_count, bytes = 0;
    for (unsigned id = 1; id <= N; id++) {
        size_t len = (id * 397u) % 6000;
        const cg_citation_t *x = add_source(&c, id, len, &opts);
        assert_non_null(x);
        assert_int_equal(strlen(x->content), len);
        bytes += len;
        see(&seen[id - 1], x);
    }
    assert_true(bytes > 40 * 16384); /* far past the first block */
    /* v: 8 doubled 5 times; blocks: 4 KiB doubled up to 1 MiB. */
    assert_true(alloc_count - a0 <= 6 + 9);
    for (unsigned id = 1; id <= N; id++) {
        const cg_citation_t *x = cg_cites_find(&c, id);
        assert_non_null(x);
        still(&seen[id - 1], x, true);
        assert_string_equal(x->key, seen[id - 1].copy[4]);
        assert_true(id % 2 ? x->link != NULL : x->link == NULL);
        unsee(&seen[id - 1]);
    }
    assert_string_equal(cg_cites_find(&c, 1)->link, "https://kb.example/docs/page%201.html");
    assert_string_equal(cg_cites_find(&c, 2)->title, "q2 (final).pdf");
    assert_string_equal(cg_cites_find(&c, 2)->key, "s3://kb-docs/reports/q2 (final).pdf#1%3A0%3A2");
    cg_cites_free(&c);
    assert_null(c.v);
    assert_null(c.block);
}

/* A dialect's first citation makes room for the sources of a usual
 * answer (in a stream's first reads): the next sources, and snippets that
 * grow in place, make no allocation. */
static void test_adds_after_warm_up_allocate_nothing(void **state)
{
    (void)state;
    cg_cites_t c = {0};
    add_source(&c, 1, 300, &opts);
    uint64_t a0 = alloc_count;
    for (unsigned id = 2; id <= 8; id++) {
        add_source(&c, id, 150 + id * 10, &opts);
        cg_cites_append_content(&c, id, cg_span(" and more", 9), &opts);
    }
    add_source(&c, 5, 100, &opts); /* known: kept as it was */
    assert_int_equal(alloc_count - a0, 0);
    assert_int_equal(c.n, 8);
    assert_int_equal(strlen(cg_cites_find(&c, 8)->content), 150 + 8 * 10 + 9);
    cg_cites_free(&c);
}

static const cg_citation_t *add_text(cg_cites_t *c, unsigned id, const char *text)
{
    cg_cite_in_t in = {.id = id, .title = cg_span("T", 1)};
    in.content = cg_span(text, strlen(text));
    return cg_cites_add(c, &in, &opts);
}

/* A snippet that grows: in place while it is the last string kept; else
 * it moves, with room to double, and what else the table holds stays. */
static void test_append_content(void **state)
{
    (void)state;
    cg_cites_t c = {0};
    const char *one = add_text(&c, 1, "abc")->content;
    cg_cites_append_content(&c, 1, cg_span("def", 3), &opts);
    assert_ptr_equal(cg_cites_find(&c, 1)->content, one);
    assert_string_equal(one, "abcdef");
    seen_t two;
    see(&two, add_text(&c, 2, "xyz"));
    cg_cites_append_content(&c, 1, cg_span("ghi", 3), &opts); /* not the last: moves */
    const char *moved = cg_cites_find(&c, 1)->content;
    assert_ptr_not_equal(moved, one);
    assert_string_equal(moved, "abcdefghi");
    still(&two, cg_cites_find(&c, 2), true);
    add_text(&c, 3, "after");
    cg_cites_append_content(&c, 1, cg_span("jklmnopq", 8), &opts); /* 17 bytes: in its room */
    assert_ptr_equal(cg_cites_find(&c, 1)->content, moved);
    assert_string_equal(moved, "abcdefghijklmnopq");
    cg_cites_append_content(&c, 1, cg_span("r", 1), &opts); /* past its room: moves again */
    assert_string_equal(cg_cites_find(&c, 1)->content, "abcdefghijklmnopqr");
    still(&two, cg_cites_find(&c, 2), true);
    assert_string_equal(cg_cites_find(&c, 3)->content, "after");
    cg_cites_append_content(&c, 2, cg_span("", 0), &opts);
    cg_cites_append_content(&c, 9, cg_span("none", 4), &opts);
    still(&two, cg_cites_find(&c, 2), true);
    unsee(&two);
    cg_cites_free(&c);
}

/* Appended text is cut to max_doc_bytes at a UTF-8 boundary, and read up
 * to a NUL, as a snippet given whole is. */
static void test_append_content_cut(void **state)
{
    (void)state;
    cg_cite_opts_t small = {5, false};
    cg_cites_t c = {0};
    cg_cite_in_t in = {.id = 1, .content = cg_span("a", 1)};
    cg_cites_add(&c, &in, &small);
    in.id = 2;
    cg_cites_add(&c, &in, &small);
    cg_cites_append_content(&c, 1, cg_span("\xC3\xA9\xE2\x82\xAC", 5), &small);
    assert_string_equal(cg_cites_find(&c, 1)->content, "a\xC3\xA9");
    cg_cites_append_content(&c, 1, cg_span("bcd", 3), &small);
    assert_string_equal(cg_cites_find(&c, 1)->content, "a\303\251bc");
    cg_cites_append_content(&c, 1, cg_span("z", 1), &small);
    assert_string_equal(cg_cites_find(&c, 1)->content, "a\303\251bc");
    cg_cites_append_content(&c, 2, cg_span("x\0yz", 4), &small);
    assert_string_equal(cg_cites_find(&c, 2)->content, "ax");
    cg_cites_append_content(&c, 2, cg_span("w", 1), &small);
    assert_string_equal(cg_cites_find(&c, 2)->content, "axw");
    cg_cites_free(&c);
}

/* A copy has its own strings, in its own store: equal, elsewhere, and
 * still there when the original is gone; it takes more citations. */
static void test_copy(void **state)
{
    (void)state;
    enum { N = 40 };
    static seen_t seen[N];
    cg_cites_t src = {0}, dst;
    for (unsigned id = 1; id <= N; id++)
        add_source(&src, id, id * 211 % 3000, &opts);
    cg_cites_append_content(&src, 3, cg_span("!", 1), &opts);
    for (unsigned id = 1; id <= N; id++)
        see(&seen[id - 1], cg_cites_find(&src, id));
    uint64_t a0 = alloc_count;
    cg_cites_copy(&dst, &src);
    assert_int_equal(alloc_count - a0, 2); /* the citations and one block */
    assert_int_equal(dst.n, N);
    assert_int_equal(dst.kind, CG_CITES_DIALECT);
    for (unsigned id = 1; id <= N; id++)
        assert_ptr_not_equal(cg_cites_find(&dst, id)->key, cg_cites_find(&src, id)->key);
    cg_cites_free(&src);
    for (unsigned id = 1; id <= N; id++) {
        still(&seen[id - 1], cg_cites_find(&dst, id), false);
        unsee(&seen[id - 1]);
    }
    assert_non_null(add_source(&dst, N + 1, 500, &opts));
    cg_cites_append_content(&dst, 3, cg_span("?", 1), &opts);
    assert_int_equal(strlen(cg_cites_find(&dst, 3)->content), 3 * 211 % 3000 + 2);
    assert_int_equal(strlen(cg_cites_find(&dst, N + 1)->content), 500);
    cg_cites_free(&dst);
    cg_cites_t empty = {0};
    cg_cites_copy(&dst, &empty);
    assert_int_equal(dst.n, 0);
    assert_null(dst.block);
    cg_cites_free(&dst);
}

/* At CG_CITE_MAX citations the table is full: an add gives NULL and
 * changes nothing; what it holds stays, and snippets still grow. */
static void test_table_full(void **state)
{
    (void)state;
    cg_cites_t c = {0};
    seen_t first, last;
    for (unsigned id = 1; id <= CG_CITE_MAX; id++)
        assert_non_null(add_source(&c, id, id % 50, &opts));
    see(&first, cg_cites_find(&c, 1));
    see(&last, cg_cites_find(&c, CG_CITE_MAX));
    assert_null(add_source(&c, CG_CITE_MAX + 1, 10, &opts));
    assert_int_equal(c.n, CG_CITE_MAX);
    assert_null(cg_cites_find(&c, CG_CITE_MAX + 1));
    assert_int_equal(cg_cites_max_id(&c), CG_CITE_MAX);
    still(&first, cg_cites_find(&c, 1), true);
    still(&last, cg_cites_find(&c, CG_CITE_MAX), true);
    cg_cites_append_content(&c, CG_CITE_MAX, cg_span("+", 1), &opts);
    assert_int_equal(strlen(cg_cites_find(&c, CG_CITE_MAX)->content), CG_CITE_MAX % 50 + 1);
    unsee(&first);
    unsee(&last);
    cg_cites_free(&c);
}

/* A key named by the dialect replaces the metadata key, cut as a field. */
static void test_named_key(void **state)
{
    (void)state;
    cg_buf_t key = {0};
    while (key.len < CG_CITE_MAX_FIELD + 10)
        cg_buf_puts(&key, "k\xC3\xA9");
    cg_cites_t c = {0};
    cg_cite_in_t in = {.id = 7, .url = cg_span("https://u.example/a", 19)};
    in.key = cg_span(key.p, key.len);
    const cg_citation_t *x = cg_cites_add(&c, &in, &opts);
    assert_true(strlen(x->key) <= CG_CITE_MAX_FIELD);
    assert_memory_equal(x->key, key.p, strlen(x->key));
    assert_string_equal(x->title, "a");
    assert_string_equal(x->content, "");
    cg_cites_free(&c);
    cg_buf_free(&key);
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
        cmocka_unit_test(test_fields_stay_put),
        cmocka_unit_test(test_adds_after_warm_up_allocate_nothing),
        cmocka_unit_test(test_append_content),
        cmocka_unit_test(test_append_content_cut),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_named_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
