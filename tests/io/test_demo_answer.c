/* The demo's answers in each dialect: well-formed events, streams that say
 * what the bodies say, responses annotations that cover their markers, and
 * gemini grounding whose byte offsets end the passages they cite, cohere
 * citations whose character offsets do. */
#include "citegate/json.h"
#include "../support/dialects.h"
#include "io/demo_answer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static cg_span_t piece(const cg_demo_answer_t *a, size_t i)
{
    size_t from = i ? a->ends[i - 1] : 0;
    return cg_span(a->bytes.p + from, a->ends[i] - from);
}

/* The event name and data of a piece that holds one SSE event. */
static void split_event(cg_span_t p, cg_span_t *name, cg_span_t *data)
{
    assert_true(p.n > 2 && memcmp(p.p + p.n - 2, "\n\n", 2) == 0);
    assert_null(memmem(p.p, p.n - 2, "\n\n", 2));
    *name = cg_span(NULL, 0);
    const char *d = p.p;
    if (memcmp(p.p, "event: ", 7) == 0) {
        const char *nl = memchr(p.p, '\n', p.n);
        *name = cg_span(p.p + 7, (size_t)(nl - p.p - 7));
        d = nl + 1;
    }
    assert_memory_equal(d, "data: ", 6);
    *data = cg_span(d + 6, (size_t)(p.p + p.n - 2 - (d + 6)));
}

static void parse(cg_json_t *j, cg_span_t s)
{
    assert_int_equal(cg_json_parse(j, s.p, s.n), CG_JSON_OK);
    assert_int_equal(cg_json_type(j, 0), JSMN_OBJECT);
}

/* Appends the decoded string at token i. */
static void put_str(cg_buf_t *b, const cg_json_t *j, int i)
{
    size_t n;
    char *s = cg_json_strdup(j, i, &n);
    assert_non_null(s);
    cg_buf_put(b, s, n);
    free(s);
}

static bool type_is(const cg_json_t *j, int obj, const char *type)
{
    int t = cg_json_get(j, obj, "type");
    return cg_json_is_str(j, t) && cg_span_eq(cg_json_raw(j, t), type);
}

static void test_events_are_named_by_their_type(void **state)
{
    (void)state;
    const char *const dialects[] = {"anthropic", "responses", "cohere"};
    cg_json_t j;
    cg_json_init(&j, 4096);
    for (size_t k = 0; k < 3; k++) {
        cg_demo_answer_t a = {0};
        cg_demo_answer(&a, dialect_named(dialects[k]), true, 0);
        assert_true(a.npieces > 10);
        for (size_t i = 0; i < a.npieces; i++) {
            cg_span_t name, data;
            split_event(piece(&a, i), &name, &data);
            parse(&j, data);
            int t = cg_json_get(&j, 0, "type");
            assert_true(cg_json_is_str(&j, t));
            cg_span_t type = cg_json_raw(&j, t);
            assert_int_equal(type.n, name.n);
            assert_memory_equal(type.p, name.p, name.n);
        }
        cg_demo_answer_free(&a);
    }
    cg_json_free(&j);
}

static void test_openai_stream_ends_with_done(void **state)
{
    (void)state;
    cg_demo_answer_t a = {0};
    cg_demo_answer(&a, dialect_named("openai"), true, 0);
    cg_span_t last = piece(&a, a.npieces - 1);
    const char *done = "data: [DONE]\n\n";
    assert_true(last.n > strlen(done));
    assert_memory_equal(last.p + last.n - strlen(done), done, strlen(done));
    assert_non_null(memmem(a.bytes.p, a.bytes.len, "[doc", 4));
    cg_demo_answer_free(&a);
}

static void test_bodies_are_one_json_object(void **state)
{
    (void)state;
    const char *const dialects[] = {"openai", "anthropic", "responses",
                                    "gemini", "vertex",    "bedrock-kb", "cohere"};
    cg_json_t j;
    cg_json_init(&j, 4096);
    for (size_t k = 0; k < sizeof(dialects) / sizeof(dialects[0]); k++) {
        cg_demo_answer_t a = {0};
        cg_demo_answer(&a, dialect_named(dialects[k]), false, 0);
        assert_int_equal(a.npieces, 1);
        parse(&j, cg_span(a.bytes.p, a.bytes.len));
        cg_demo_answer_free(&a);
    }
    cg_json_free(&j);
}

/* bedrock-kb's answer carries the session its request names, else one of
 * its own; no other dialect's carries a field. */
static void test_session_field(void **state)
{
    (void)state;
    cg_buf_t name = {0}, value = {0};
    assert_true(cg_demo_answer_field(
        dialect_named("bedrock-kb"),
        CG_SPAN_LIT("{\"input\":{\"text\":\"q\"},\"sessionId\":\"s\\u002d1\"}"), &name, &value));
    assert_int_equal(name.len, strlen("x-amzn-bedrock-knowledge-base-session-id"));
    assert_int_equal(value.len, 3);
    assert_memory_equal(value.p, "s-1", 3);
    name.len = value.len = 0;
    assert_true(
        cg_demo_answer_field(dialect_named("bedrock-kb"), CG_SPAN_LIT("{}"), &name, &value));
    assert_int_equal(value.len, strlen("demo-session"));
    name.len = value.len = 0;
    assert_false(cg_demo_answer_field(dialect_named("bedrock"), CG_SPAN_LIT("{}"), &name, &value));
    assert_int_equal(name.len + value.len, 0);
    cg_buf_free(&name);
    cg_buf_free(&value);
}

/* The text of an anthropic stream, block by block, as the body has it. */
static void test_anthropic_stream_says_what_the_body_says(void **state)
{
    (void)state;
    cg_demo_answer_t s = {0}, b = {0};
    cg_demo_answer(&s, dialect_named("anthropic"), true, 0);
    cg_demo_answer(&b, dialect_named("anthropic"), false, 0);
    cg_json_t j;
    cg_json_init(&j, 4096);
    cg_buf_t streamed = {0}, cited = {0};
    unsigned citations = 0;
    for (size_t i = 0; i < s.npieces; i++) {
        cg_span_t name, data;
        split_event(piece(&s, i), &name, &data);
        parse(&j, data);
        int delta = cg_json_get(&j, 0, "delta");
        if (type_is(&j, 0, "content_block_delta") && type_is(&j, delta, "text_delta"))
            put_str(&streamed, &j, cg_json_get(&j, delta, "text"));
        if (type_is(&j, 0, "content_block_delta") && type_is(&j, delta, "citations_delta"))
            citations++;
        if (type_is(&j, 0, "content_block_stop"))
            cg_buf_putc(&streamed, '|');
    }
    parse(&j, cg_span(b.bytes.p, b.bytes.len));
    int content = cg_json_get(&j, 0, "content");
    assert_int_equal(cg_json_type(&j, content), JSMN_ARRAY);
    unsigned body_citations = 0;
    for (int i = content + 1, n = 0; n < j.tok[content].size; n++, i = cg_json_skip(&j, i)) {
        put_str(&cited, &j, cg_json_get(&j, i, "text"));
        cg_buf_putc(&cited, '|');
        int c = cg_json_get(&j, i, "citations");
        if (c >= 0)
            body_citations += (unsigned)j.tok[c].size;
    }
    assert_int_equal(streamed.len, cited.len);
    assert_memory_equal(streamed.p, cited.p, cited.len);
    assert_int_equal(citations, 4);
    assert_int_equal(body_citations, citations);
    cg_buf_free(&streamed);
    cg_buf_free(&cited);
    cg_json_free(&j);
    cg_demo_answer_free(&s);
    cg_demo_answer_free(&b);
}

/* The demo's own document comes after those the request sends. */
static void test_anthropic_document_follows_the_request_ones(void **state)
{
    (void)state;
    const char *want[] = {"\"document_index\":1,", "\"document_index\":3,"};
    for (size_t docs = 0; docs <= 2; docs += 2) {
        cg_demo_answer_t s = {0}, b = {0};
        cg_demo_answer(&s, dialect_named("anthropic"), true, docs);
        cg_demo_answer(&b, dialect_named("anthropic"), false, docs);
        const char *w = want[docs / 2], *other = want[1 - docs / 2];
        assert_non_null(memmem(s.bytes.p, s.bytes.len, w, strlen(w)));
        assert_non_null(memmem(b.bytes.p, b.bytes.len, w, strlen(w)));
        assert_null(memmem(b.bytes.p, b.bytes.len, other, strlen(other)));
        cg_demo_answer_free(&s);
        cg_demo_answer_free(&b);
    }
}

/* Byte offset of code point `cp` in s[0..n); n when there is none. */
static size_t byte_at(const char *s, size_t n, size_t cp)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80 && c++ == cp)
            return i;
    return n;
}

/* Each annotation's [start_index, end_index) is one whole 【…†…】 marker. */
static unsigned check_covers_marker(const cg_json_t *j, int ann, const cg_buf_t *text)
{
    double start, end;
    assert_true(type_is(j, ann, "url_citation"));
    assert_true(cg_json_number(j, cg_json_get(j, ann, "start_index"), &start));
    assert_true(cg_json_number(j, cg_json_get(j, ann, "end_index"), &end));
    assert_true(end > start);
    size_t from = byte_at(text->p, text->len, (size_t)start);
    size_t to = byte_at(text->p, text->len, (size_t)end - 1); /* the last code point */
    assert_true(to + 3 <= text->len);
    assert_memory_equal(text->p + from, "\xE3\x80\x90", 3);
    assert_memory_equal(text->p + to, "\xE3\x80\x91", 3);
    assert_non_null(memmem(text->p + from, to - from, "\xE2\x80\xA0", 3));
    return 1;
}

static void test_responses_body_annotations_cover_markers(void **state)
{
    (void)state;
    cg_demo_answer_t b = {0};
    cg_demo_answer(&b, dialect_named("responses"), false, 0);
    cg_json_t j;
    cg_json_init(&j, 4096);
    parse(&j, cg_span(b.bytes.p, b.bytes.len));
    int output = cg_json_get(&j, 0, "output");
    int part = cg_json_get(&j, output + 1, "content") + 1;
    cg_buf_t text = {0};
    put_str(&text, &j, cg_json_get(&j, part, "text"));
    int anns = cg_json_get(&j, part, "annotations");
    unsigned checked = 0;
    for (int i = anns + 1, n = 0; n < j.tok[anns].size; n++, i = cg_json_skip(&j, i))
        checked += check_covers_marker(&j, i, &text);
    assert_int_equal(checked, 3);
    cg_buf_free(&text);
    cg_json_free(&j);
    cg_demo_answer_free(&b);
}

/* Streamed, each annotation comes right after the delta that completes the
 * marker it covers, and the deltas add up to the body's text. */
static void test_responses_stream_annotates_each_marker_next(void **state)
{
    (void)state;
    cg_demo_answer_t s = {0}, b = {0};
    cg_demo_answer(&s, dialect_named("responses"), true, 0);
    cg_demo_answer(&b, dialect_named("responses"), false, 0);
    cg_json_t j;
    cg_json_init(&j, 4096);
    cg_buf_t text = {0};
    bool marker_just_closed = false;
    unsigned annotations = 0;
    for (size_t i = 0; i < s.npieces; i++) {
        cg_span_t name, data;
        split_event(piece(&s, i), &name, &data);
        parse(&j, data);
        if (type_is(&j, 0, "response.output_text.annotation.added")) {
            assert_true(marker_just_closed);
            annotations += check_covers_marker(&j, cg_json_get(&j, 0, "annotation"), &text);
        }
        marker_just_closed = false;
        if (type_is(&j, 0, "response.output_text.delta")) {
            put_str(&text, &j, cg_json_get(&j, 0, "delta"));
            marker_just_closed = text.len >= 3 && !memcmp(text.p + text.len - 3, "\xE3\x80\x91", 3);
        }
    }
    assert_int_equal(annotations, 3);
    assert_true(type_is(&j, 0, "response.completed"));
    assert_non_null(memmem(b.bytes.p, b.bytes.len, text.p, text.len));
    cg_buf_free(&text);
    cg_json_free(&j);
    cg_demo_answer_free(&s);
    cg_demo_answer_free(&b);
}

/* gemini: every event `data: ` + JSON + CRLF CRLF, no [DONE]; the text of
 * the stream is the body's; the finish and the grounding come once, on the
 * last event (the others carry {}); the text has characters of several
 * bytes before the supports' ends, and each support ends a passage on a
 * character boundary, counted in bytes. vertex answers the same. */
static void gemini_text(const cg_json_t *j, cg_buf_t *text)
{
    int cand = cg_json_get(j, 0, "candidates") + 1;
    int parts = cg_json_get(j, cg_json_get(j, cand, "content"), "parts");
    for (int k = 0, p = parts + 1; k < j->tok[parts].size; k++, p = cg_json_skip(j, p))
        put_str(text, j, cg_json_get(j, p, "text"));
}

static void test_gemini_grounding_offsets(void **state)
{
    (void)state;
    cg_demo_answer_t s = {0}, b = {0}, v = {0};
    cg_demo_answer(&s, dialect_named("gemini"), true, 0);
    cg_demo_answer(&b, dialect_named("gemini"), false, 0);
    cg_demo_answer(&v, dialect_named("vertex"), true, 3);
    assert_int_equal(s.bytes.len, v.bytes.len);
    assert_memory_equal(s.bytes.p, v.bytes.p, s.bytes.len);
    assert_null(memmem(s.bytes.p, s.bytes.len, "[DONE]", 6));
    cg_json_t j;
    cg_json_init(&j, 4096);
    cg_buf_t streamed = {0}, body = {0}, last = {0};
    for (size_t i = 0; i < s.npieces; i++) {
        cg_span_t p = piece(&s, i);
        assert_memory_equal(p.p, "data: ", 6);
        assert_memory_equal(p.p + p.n - 4, "\r\n\r\n", 4);
        parse(&j, cg_span(p.p + 6, p.n - 10));
        gemini_text(&j, &streamed);
        int cand = cg_json_get(&j, 0, "candidates") + 1;
        int gm = cg_json_get(&j, cand, "groundingMetadata");
        bool is_last = i + 1 == s.npieces;
        assert_int_equal(cg_json_get(&j, cand, "finishReason") >= 0, is_last);
        assert_int_equal(j.tok[gm].size > 0, is_last);
        if (is_last)
            cg_buf_put(&last, j.js + cg_json_begin(&j, gm), cg_json_end(&j, gm) - cg_json_begin(&j, gm));
    }
    parse(&j, cg_span(b.bytes.p, b.bytes.len));
    gemini_text(&j, &body);
    assert_int_equal(streamed.len, body.len);
    assert_memory_equal(streamed.p, body.p, body.len);
    size_t chars = 0;
    for (size_t i = 0; i < body.len; i++)
        chars += ((unsigned char)body.p[i] & 0xC0) != 0x80;
    assert_true(chars < body.len); /* byte offsets are not character offsets */
    /* The body's grounding is the last event's; each support ends a passage. */
    int cand = cg_json_get(&j, 0, "candidates") + 1;
    int gm = cg_json_get(&j, cand, "groundingMetadata");
    cg_span_t bg = cg_span(j.js + cg_json_begin(&j, gm), cg_json_end(&j, gm) - cg_json_begin(&j, gm));
    assert_int_equal(bg.n, last.len);
    assert_memory_equal(bg.p, last.p, bg.n);
    static const char *const ends[] = {"\302\260C", "warranty", "centre"};
    int sups = cg_json_get(&j, gm, "groundingSupports");
    assert_int_equal(j.tok[sups].size, 3);
    for (int k = 0, p = sups + 1; k < 3; k++, p = cg_json_skip(&j, p)) {
        double end;
        assert_true(cg_json_number(&j, cg_json_get(&j, cg_json_get(&j, p, "segment"), "endIndex"),
                                   &end));
        size_t e = (size_t)end, n = strlen(ends[k]);
        assert_true(e >= n && e < body.len);
        assert_memory_equal(body.p + e - n, ends[k], n);
        assert_true(((unsigned char)body.p[e] & 0xC0) != 0x80);
    }
    cg_json_free(&j);
    cg_buf_free(&streamed);
    cg_buf_free(&body);
    cg_buf_free(&last);
    cg_demo_answer_free(&s);
    cg_demo_answer_free(&b);
    cg_demo_answer_free(&v);
}

/* cohere: the stream's text is the body's; each citation comes right after
 * the passage it cites (fast mode), its end counts characters (the text has
 * characters of several bytes before it) and ends that passage; the body's
 * citations are the stream's. */
static void test_cohere_citations_end_their_passages(void **state)
{
    (void)state;
    cg_demo_answer_t s = {0}, b = {0};
    cg_demo_answer(&s, dialect_named("cohere"), true, 0);
    cg_demo_answer(&b, dialect_named("cohere"), false, 0);
    cg_json_t j;
    cg_json_init(&j, 4096);
    cg_buf_t streamed = {0}, ends = {0}, body = {0};
    size_t chars = 0;
    for (size_t i = 0; i < s.npieces; i++) {
        cg_span_t name, data;
        split_event(piece(&s, i), &name, &data);
        parse(&j, data);
        int msg = cg_json_get(&j, cg_json_get(&j, 0, "delta"), "message");
        if (type_is(&j, 0, "content-delta")) {
            size_t at = streamed.len;
            put_str(&streamed, &j, cg_json_get(&j, cg_json_get(&j, msg, "content"), "text"));
            for (size_t k = at; k < streamed.len; k++)
                chars += ((unsigned char)streamed.p[k] & 0xC0) != 0x80;
        }
        if (type_is(&j, 0, "citation-start")) {
            double end;
            int c = cg_json_get(&j, msg, "citations");
            assert_int_equal(cg_json_type(&j, c), JSMN_OBJECT);
            assert_true(cg_json_number(&j, cg_json_get(&j, c, "end"), &end));
            assert_int_equal((size_t)end, chars); /* right after the passage */
            cg_buf_printf(&ends, "%zu,", chars);
        }
    }
    assert_true(chars < streamed.len); /* characters are not bytes */
    cg_buf_putc(&ends, '\0');
    assert_string_equal(ends.p, "64,102,154,");
    parse(&j, cg_span(b.bytes.p, b.bytes.len));
    int msg = cg_json_get(&j, 0, "message");
    int content = cg_json_get(&j, msg, "content");
    put_str(&body, &j, cg_json_get(&j, content + 1, "text"));
    assert_int_equal(streamed.len, body.len);
    assert_memory_equal(streamed.p, body.p, body.len);
    int cites = cg_json_get(&j, msg, "citations");
    assert_int_equal(j.tok[cites].size, 3);
    cg_json_free(&j);
    cg_buf_free(&streamed);
    cg_buf_free(&ends);
    cg_buf_free(&body);
    cg_demo_answer_free(&s);
    cg_demo_answer_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_are_named_by_their_type),
        cmocka_unit_test(test_openai_stream_ends_with_done),
        cmocka_unit_test(test_session_field),
        cmocka_unit_test(test_bodies_are_one_json_object),
        cmocka_unit_test(test_anthropic_stream_says_what_the_body_says),
        cmocka_unit_test(test_anthropic_document_follows_the_request_ones),
        cmocka_unit_test(test_responses_body_annotations_cover_markers),
        cmocka_unit_test(test_responses_stream_annotates_each_marker_next),
        cmocka_unit_test(test_gemini_grounding_offsets),
        cmocka_unit_test(test_cohere_citations_end_their_passages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
