/*
 * The responses answer view (src/dialects/responses.c, SPEC §6a) through
 * the transformer: every stream fixture split at every byte (a sample of
 * them under ASan, tests/support/split.h) gives the unsplit run's client
 * body in every profile; an answer's text split into two deltas at every
 * byte (inside 【, † and 】 too) gives the same client content; and the
 * view's rules one at a time, event by event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/dialect.h"
#include "citegate/xform.h"
#include "dialect_split.h"
#include "profiles.h"
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CREATED DIALECT_CREATED

static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured", "off"};

static char *answer(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/dialects/answers/%s", CG_FIXTURES, name);
    return read_file(path, n);
}

/* --- Running the transformer ------------------------------------------------------ */

typedef struct run {
    cg_xform_t *x;
    cg_out_t out;
    cg_buf_t body; /* everything written so far */
    cg_buf_t last; /* what the last call wrote */
} run_t;

static void run_open(run_t *r, const char *profile, const cg_dialect_req_t *dreq)
{
    memset(r, 0, sizeof(*r));
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    r->x = cg_xform_new(&cfg, NULL);
    cg_xform_set_dialect(r->x, cg_dialect_view(dialect_named("responses")), dreq, CREATED);
}

/* Both stay NUL-terminated (not counted), for strstr. */
static void terminate(cg_buf_t *b)
{
    cg_buf_putc(b, '\0');
    b->len--;
}

static void collect(run_t *r)
{
    r->last.len = 0;
    for (size_t i = 0; i < r->out.nseg; i++)
        cg_buf_put(&r->last, r->out.seg[i].p, r->out.seg[i].n);
    cg_buf_put(&r->body, r->last.p, r->last.len);
    terminate(&r->last);
    terminate(&r->body);
}

/* One read, from a private copy freed right after, so that a span outliving
 * its read shows under ASan. */
static void run_feed(run_t *r, const char *p, size_t n)
{
    char *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    cg_xform_feed(r->x, copy, n, &r->out);
    collect(r);
    free(copy);
}

static void run_feed_str(run_t *r, const char *s)
{
    run_feed(r, s, strlen(s));
}

static void run_finish(run_t *r)
{
    cg_xform_finish(r->x, CG_END_EOF, &r->out);
    collect(r);
}

static void run_close(run_t *r)
{
    cg_out_free(&r->out);
    cg_xform_free(r->x);
    cg_buf_free(&r->body);
    cg_buf_free(&r->last);
}

/* The client body for in[0..n) fed in one read. */
static void run_whole(const char *profile, const char *in, size_t n, cg_buf_t *body)
{
    run_t r;
    run_open(&r, profile, NULL);
    run_feed(&r, in, n);
    run_finish(&r);
    body->len = 0;
    cg_buf_put(body, r.body.p, r.body.len);
    run_close(&r);
}

/* The client's content (choice 0) in a piece of SSE output, NUL-terminated. */
static char *content_of(const cg_buf_t *sse)
{
    view_t v;
    view_of_stream(&v, sse->p, sse->len);
    cg_buf_t c = {0};
    cg_buf_put(&c, v.content[0].p, v.content[0].len);
    cg_buf_putc(&c, '\0');
    view_free(&v);
    return c.p;
}

/* --- Every byte split of every fixture ----------------------------------------------- */

/* The view reads whole events, so however the bytes are cut the client gets
 * the very same body (dialect_split.h's test_every_byte_split). */
static const dialect_fixture_t fixtures[] = {
    {"answers/responses_plain.sse", NULL},
    {"answers/responses_web_search.sse", NULL},
    {"answers/responses_file_search.sse", NULL},
    {"answers/responses_foundry.sse", NULL},
    {"answers/responses_marker_unresolved.sse", NULL},
    {"answers/responses_open_bracket.sse", NULL},
    {"answers/responses_reasoning.sse", NULL},
    {"answers/responses_incomplete.sse", NULL},
    {"answers/responses_failed.sse", NULL},
    {"answers/responses_error.sse", NULL},
    {"answers/responses_truncated.sse", NULL},
    {"answers/responses_usage.sse", NULL},
};

/* Every cut of each fixture; no random patterns here (rng unused). */
static dialect_suite_t suite = DIALECT_SUITE("responses", fixtures, profiles, 0);

/* --- Markers split across deltas ------------------------------------------------------ */

static const char created[] =
    "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_t\",\"object\":\"response\","
    "\"model\":\"m\",\"status\":\"in_progress\",\"output\":[]}}\n\n";
static const char completed[] =
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_t\",\"object\":\"response\","
    "\"model\":\"m\",\"status\":\"completed\",\"output\":[]}}\n\n";

static void delta(cg_buf_t *b, const char *text, size_t n)
{
    cg_buf_puts(b, "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,"
                   "\"content_index\":0,\"delta\":\"");
    cg_buf_put(b, text, n);
    cg_buf_puts(b, "\"}\n\n");
}

static void url_annotation(cg_buf_t *b, unsigned start, unsigned end, const char *url)
{
    cg_buf_printf(b,
                  "data: {\"type\":\"response.output_text.annotation.added\",\"output_index\":0,"
                  "\"content_index\":0,\"annotation\":{\"type\":\"url_citation\","
                  "\"start_index\":%u,\"end_index\":%u,\"url\":\"%s\",\"title\":\"T\"}}\n\n",
                  start, end, url);
}

/* A text (JSON string bytes) with markers, and the annotations that cover
 * them: (marker's last byte, start, end) in code points. */
typedef struct marked {
    const char *text;
    struct {
        size_t last_byte;
        unsigned start, end;
    } m[4];
    size_t nm;
} marked_t;

/* The stream of `t` in two deltas cut at byte `cut`, each marker's
 * annotation right after the delta its last byte is in. */
static void marked_stream(const marked_t *t, size_t cut, cg_buf_t *b)
{
    size_t n = strlen(t->text), from = 0;
    b->len = 0;
    cg_buf_puts(b, created);
    for (size_t part = 0; part < 2; part++) {
        size_t to = part == 0 ? cut : n;
        delta(b, t->text + from, to - from);
        for (size_t k = 0; k < t->nm; k++)
            if (t->m[k].last_byte >= from && t->m[k].last_byte < to)
                url_annotation(b, t->m[k].start, t->m[k].end, k % 2 ? "https://b.example/" : "https://a.example/");
        from = to;
    }
    cg_buf_puts(b, completed);
}

static bool inside_escape(const char *s, size_t cut)
{
    for (size_t i = 0; i < cut; i++) {
        if (s[i] != '\\')
            continue;
        size_t len = s[i + 1] == 'u' ? 6 : 2;
        if (cut < i + len)
            return true;
        i += len - 1;
    }
    return false;
}

static void split_marked(const marked_t *t, const char *want)
{
    cg_buf_t in = {0}, out = {0};
    for (size_t cut = 0; cut <= strlen(t->text); cut++) {
        if (inside_escape(t->text, cut))
            continue; /* a JSON string cannot end there */
        marked_stream(t, cut, &in);
        run_whole("off", in.p, in.len, &out);
        char *got = content_of(&out);
        if (strcmp(got, want) != 0)
            fail_msg("%s cut at byte %zu:\n  want %s\n  got  %s", t->text, cut, want, got);
        free(got);
    }
    cg_buf_free(&in);
    cg_buf_free(&out);
}

static void test_markers_split_across_deltas(void **state)
{
    (void)state;
    /* 【 E3 80 90, † E2 80 A0, 】 E3 80 91: every cut inside them too. */
    marked_t raw = {"Fee\xE3\x80\x90" "4:1\xE2\x80\xA0source\xE3\x80\x91\xE3\x80\x90"
                    "4:2\xE2\x80\xA0source\xE3\x80\x91. Caf\xC3\xA9 \xE3\x80\x90"
                    "note\xE3\x80\x91 ok\xE3\x80\x90" "9\xE2\x80\xA0x\xE3\x80\x91!",
                    {{20, 3, 15}, {38, 15, 27}, {70, 43, 48}},
                    3};
    split_marked(&raw, "Fee[1][2]. Caf\xC3\xA9 \xE3\x80\x90note\xE3\x80\x91 ok[1]!");
    marked_t esc = {"a\\u30104:0\\u2020source\\u3011\\n\\\"b\\\" \\u3010x\\u3011",
                    {{27, 1, 13}}, 1};
    split_marked(&esc, "a[1]\n\"b\" \xE3\x80\x90x\xE3\x80\x91");
}

/* --- The rules, event by event ---------------------------------------------------------- */

static void assert_content(run_t *r, const char *want)
{
    char *got = content_of(&r->last);
    if (strcmp(got, want) != 0)
        fail_msg("content of the last read: want \"%s\", got \"%s\"", want, got);
    free(got);
}

static void feed_delta(run_t *r, const char *text)
{
    cg_buf_t b = {0};
    delta(&b, text, strlen(text));
    run_feed(r, b.p, b.len);
    cg_buf_free(&b);
}

static void feed_annotation(run_t *r, unsigned start, unsigned end, const char *url)
{
    cg_buf_t b = {0};
    url_annotation(&b, start, end, url);
    run_feed(r, b.p, b.len);
    cg_buf_free(&b);
}

/* Text after a completed marker waits behind it, and goes out with its [N]. */
static void test_text_waits_behind_marker(void **state)
{
    (void)state;
    run_t r;
    run_open(&r, "off", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "a \xE3\x80\x90" "1\xE2\x80\xA0x\xE3\x80\x91 b");
    assert_content(&r, "a ");
    feed_annotation(&r, 2, 7, "https://a.example/");
    assert_content(&r, "[1] b");
    run_close(&r);
}

/* A run of annotation events resolves markers in turn: the text goes out up
 * to the first one still open. */
static void test_annotation_run(void **state)
{
    (void)state;
    run_t r;
    run_open(&r, "off", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "\xE3\x80\x90" "1\xE2\x80\xA0x\xE3\x80\x91y\xE3\x80\x90" "2\xE2\x80\xA0x\xE3\x80\x91z");
    assert_content(&r, "");
    feed_annotation(&r, 6, 11, "https://b.example/");
    assert_content(&r, "");
    feed_annotation(&r, 0, 5, "https://a.example/");
    assert_content(&r, "[2]y[1]z");
    run_close(&r);
}

/* A forwarded annotation stays under 64 KiB a line (SPEC §6 rule 5): a 10 KB
 * title is cut to 4 KiB and marked, a 20 KB url is not forwarded (its
 * citation still counts). */
static void test_forwarded_annotation_capped(void **state)
{
    (void)state;
    cg_buf_t ev = {0}, url = {0};
    cg_buf_puts(&url, "https://a.example/");
    for (int i = 0; i < 20000; i++)
        cg_buf_putc(&url, 'u');
    cg_buf_putc(&url, '\0');
    cg_buf_puts(&ev, "data: {\"type\":\"response.output_text.annotation.added\",\"output_index\":0,"
                     "\"content_index\":0,\"annotation\":{\"type\":\"url_citation\",\"url\":"
                     "\"https://t.example/\",\"title\":\"");
    for (int i = 0; i < 5000; i++)
        cg_buf_puts(&ev, "\xc3\xa9");
    cg_buf_puts(&ev, "\"}}\n\n");
    run_t r;
    run_open(&r, "openai", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "text");
    run_feed(&r, ev.p, ev.len);
    const char *t = strstr(r.last.p, "\"url\":\"https://t.example/\",\"title\":\"");
    assert_non_null(t);
    const char *q = strchr(t + 40, '"');
    assert_true(q - (t + 40) <= 4096 + 3 && memcmp(q - 3, "\xe2\x80\xa6", 3) == 0);
    feed_annotation(&r, 0, 4, url.p);
    assert_null(strstr(r.last.p, "annotations"));
    assert_int_equal(cg_xform_stats(r.x)->malformed, 0);
    run_close(&r);
    cg_buf_free(&ev);
    cg_buf_free(&url);
}

/* Any other event deletes a marker no annotation covered. */
static void test_other_event_deletes(void **state)
{
    (void)state;
    run_t r;
    run_open(&r, "openwebui", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "p\xE3\x80\x90" "1\xE2\x80\xA0x\xE3\x80\x91q");
    assert_content(&r, "p");
    feed_delta(&r, "r");
    assert_content(&r, "qr");
    feed_annotation(&r, 1, 6, "https://a.example/");
    run_feed_str(&r, completed);
    char *all = content_of(&r.body);
    assert_string_equal(all, "pqr");
    free(all);
    /* The late annotation covered nothing: its citation is named anyway. */
    view_t v;
    view_of_stream(&v, r.body.p, r.body.len);
    assert_non_null(strstr(v.sources.p, "https://a.example/"));
    assert_true(v.ends_done);
    view_free(&v);
    run_close(&r);
}

/* An annotation of another content part covers nothing here. */
static void test_other_part_covers_nothing(void **state)
{
    (void)state;
    run_t r;
    run_open(&r, "off", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "\xE3\x80\x90" "1\xE2\x80\xA0x\xE3\x80\x91.");
    run_feed_str(&r, "data: {\"type\":\"response.output_text.annotation.added\",\"output_index\":1,"
                     "\"content_index\":0,\"annotation\":{\"type\":\"url_citation\","
                     "\"start_index\":0,\"end_index\":5,\"url\":\"https://a.example/\"}}\n\n");
    assert_content(&r, "");
    assert_non_null(strstr(r.last.p, "\"annotations\":[{\"type\":\"url_citation\""));
    run_feed_str(&r, completed);
    assert_content(&r, ".");
    run_close(&r);
}

/* A marker may be 256 bytes long as UTF-8, not one more. */
static void test_marker_length_limit(void **state)
{
    (void)state;
    for (size_t len = 255; len <= 257; len++) {
        cg_buf_t text = {0};
        cg_buf_puts(&text, "\xE3\x80\x90\xE2\x80\xA0");
        while (text.len < len - 3)
            cg_buf_putc(&text, 'x');
        cg_buf_puts(&text, "\xE3\x80\x91");
        assert_int_equal(text.len, len);
        cg_buf_putc(&text, '\0');
        run_t r;
        run_open(&r, "off", NULL);
        run_feed_str(&r, created);
        feed_delta(&r, text.p);
        feed_annotation(&r, 0, (unsigned)len - 6, "https://a.example/"); /* code points */
        run_feed_str(&r, completed);
        char *got = content_of(&r.body);
        if (len <= 256)
            assert_string_equal(got, "[1]");
        else
            assert_memory_equal(got, text.p, len);
        free(got);
        cg_buf_free(&text);
        run_close(&r);
    }
}

/* [DONE], comments and keep-alives are no events; other data is counted. */
static void test_non_events(void **state)
{
    (void)state;
    run_t r;
    run_open(&r, "off", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "a\xE3\x80\x90" "1\xE2\x80\xA0x\xE3\x80\x91");
    run_feed_str(&r, ": keep-alive\n\ndata: [DONE]\n\ndata: not json\n\n");
    assert_int_equal(r.last.len, 0);
    feed_annotation(&r, 1, 6, "https://a.example/");
    assert_content(&r, "[1]");
    assert_int_equal(cg_xform_stats(r.x)->malformed, 1);
    run_close(&r);
}

/* SSE joins an event's data lines with LF. Between JSON tokens that is
 * white space: a delta spread over two lines is read. Inside a string it is
 * a raw control byte, not JSON: that event is counted and dropped, never
 * written with its LF, where the client would read the next line as a
 * field of its own (here an `event:` line). */
static void test_data_lines_join(void **state)
{
    (void)state;
    static const char in[] =
        "event: response.output_text.delta\n"
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,"
        "\"content_index\":0,\"delta\":\"a\n"
        "data:event: injected\"}\n\n"
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\n"
        "data: \"content_index\":0,\"delta\":\"b\"}\n\n";
    const char *const names[] = {"off", "openwebui", "openai", "webchat", "markdown"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        run_t r;
        run_open(&r, names[i], NULL);
        run_feed_str(&r, created);
        run_feed(&r, in, sizeof(in) - 1);
        assert_null(strstr(r.body.p, "injected"));
        assert_content(&r, "b");
        assert_int_equal(cg_xform_stats(r.x)->malformed, 1);
        run_close(&r);
    }
}

/* The upstream ends first: what is held goes out before the error event. */
static void test_end_releases(void **state)
{
    (void)state;
    run_t r;
    run_open(&r, "off", NULL);
    run_feed_str(&r, created);
    feed_delta(&r, "hours\xE3\x80\x90" "4:0\xE2\x80\xA0so");
    assert_content(&r, "hours");
    run_finish(&r);
    char *all = content_of(&r.body);
    assert_string_equal(all, "hours\xE3\x80\x90" "4:0\xE2\x80\xA0so");
    free(all);
    view_t v;
    view_of_stream(&v, r.body.p, r.body.len);
    assert_true(v.ends_error && !v.ends_done);
    view_free(&v);
    assert_non_null(strstr(r.last.p, "\"code\":\"upstream_closed\""));
    run_close(&r);
}

/* include_usage: a usage chunk after the finish, before [DONE]. */
static void test_usage_chunk(void **state)
{
    (void)state;
    cg_dialect_req_t dreq = {0};
    dreq.include_usage = true;
    run_t r;
    run_open(&r, "openwebui", &dreq);
    run_feed_str(&r, created);
    feed_delta(&r, "hi");
    run_feed_str(&r, "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\","
                     "\"incomplete_details\":{\"reason\":\"content_filter\"},"
                     "\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}}\n\n");
    const char *finish = strstr(r.last.p, "\"finish_reason\":\"content_filter\"");
    const char *usage = strstr(r.last.p, "\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                                         "\"completion_tokens\":4,\"total_tokens\":7}}");
    const char *done = strstr(r.last.p, "data: [DONE]");
    assert_true(finish && usage && done && finish < usage && usage < done);
    run_close(&r);
}

/* Delta events are read by a skeleton match, a flat scan or the full parse:
 * whichever takes an event, it reads as the full parse would. */
static void test_delta_paths_agree(void **state)
{
    (void)state;
    static const char *const events[] = {
        /* a skeleton: sequence_number, delta and obfuscation are its holes */
        "{\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\","
        "\"output_index\":0,\"content_index\":0,\"delta\":\"a\",\"obfuscation\":\"x\"}",
        "{\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"m\","
        "\"output_index\":0,\"content_index\":0,\"delta\":\"b\\\"c\",\"obfuscation\":\"yy\"}",
        /* an invalid escape in a hole: not JSON, ignored and counted */
        "{\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"m\","
        "\"output_index\":0,\"content_index\":0,\"delta\":\"\\q\",\"obfuscation\":\"z\"}",
        /* any number in a number hole */
        "{\"type\":\"response.output_text.delta\",\"sequence_number\":-3.5e2,\"item_id\":\"m\","
        "\"output_index\":0,\"content_index\":0,\"delta\":\"d\",\"obfuscation\":\"\"}",
        /* a string where the skeleton has a number: scanned again */
        "{\"type\":\"response.output_text.delta\",\"sequence_number\":\"4\",\"item_id\":\"m\","
        "\"output_index\":0,\"content_index\":0,\"delta\":\"e\",\"obfuscation\":\"\"}",
        /* two delta members: the first one counts, as cg_json_get finds it */
        "{\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,"
        "\"delta\":\"f\",\"delta\":\"X\"}",
        "{\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,"
        "\"delta\":\"g\",\"delta\":\"Y\"}",
        /* white space, and an index as a string: the full parse reads it */
        " { \"type\" : \"response.output_text.delta\" , \"output_index\" : \"0\" ,"
        " \"content_index\":0, \"delta\" : \"h\" } ",
        /* a trailing comma and a NUL byte in a string: not JSON */
        "{\"type\":\"response.output_text.delta\",\"delta\":\"Z\",}",
        "{\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,"
        "\"delta\":\"N\0N\"}",
        /* a delta that is not a string: no content */
        "{\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,"
        "\"delta\":null}",
    };
    static const size_t nul_event = 9;
    run_t r;
    run_open(&r, "off", NULL);
    run_feed_str(&r, created);
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
        size_t n = strlen(events[i]) + (i == nul_event ? 4 : 0); /* past the NUL: N"} */
        run_feed_str(&r, "data: ");
        run_feed(&r, events[i], n);
        run_feed_str(&r, "\n\n");
    }
    run_feed_str(&r, completed);
    char *got = content_of(&r.body);
    assert_string_equal(got, "ab\"cdefgh");
    free(got);
    assert_int_equal(cg_xform_stats(r.x)->malformed, 3);
    run_close(&r);
}

/* Profile structured holds the view's chunks up to max_event, then lets
 * them through: a truncated answer still ends with the error event, a
 * finished one with the view's [DONE], once. */
static void test_held_stream_passes_through(void **state)
{
    (void)state;
    for (int finished = 0; finished < 2; finished++) {
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named("structured"));
        cfg.max_event = 1024;
        run_t r;
        memset(&r, 0, sizeof(r));
        r.x = cg_xform_new(&cfg, NULL);
        cg_xform_set_dialect(r.x, cg_dialect_view(dialect_named("responses")), NULL, CREATED);
        run_feed_str(&r, created);
        for (int i = 0; i < 20; i++)
            feed_delta(&r, "some words ");
        assert_true(cg_xform_stats(r.x)->passthrough);
        if (finished)
            run_feed_str(&r, completed);
        run_finish(&r);
        view_t v;
        view_of_stream(&v, r.body.p, r.body.len);
        assert_int_equal(v.content[0].len, 20 * 11);
        assert_true(finished ? v.ends_done && !v.ends_error : v.ends_error && !v.ends_done);
        const char *done = strstr(r.body.p, "data: [DONE]");
        assert_true(finished ? done && !strstr(done + 1, "data: [DONE]") : done == NULL);
        view_free(&v);
        run_close(&r);
    }
}

/* A body that is not a Response object is not this dialect's: unchanged. */
static void test_body_not_a_response(void **state)
{
    (void)state;
    static const char body[] = "{\"error\":{\"message\":\"no\",\"type\":\"invalid_request_error\"}}";
    run_t r;
    run_open(&r, "openwebui", NULL);
    assert_int_equal(cg_xform_body(r.x, body, sizeof(body) - 1, &r.out), -1);
    collect(&r);
    assert_int_equal(r.body.len, sizeof(body) - 1);
    assert_memory_equal(r.body.p, body, sizeof(body) - 1);
    run_close(&r);
}

/* A body's uncovered url_citation stays in message.annotations, and profile
 * openai adds its own for the rewritten reference to the same array. */
static void test_body_annotations(void **state)
{
    (void)state;
    static const char body[] =
        "{\"id\":\"resp_b\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"m\","
        "\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
        "\"text\":\"A\\u30101\\u2020s\\u3011 B.\",\"annotations\":["
        "{\"type\":\"url_citation\",\"start_index\":1,\"end_index\":6,\"url\":\"https://a.example/\","
        "\"title\":\"A\"},{\"type\":\"url_citation\",\"start_index\":7,\"end_index\":9,"
        "\"url\":\"https://b.example/\",\"title\":\"B\"}]}]}]}";
    run_t r;
    run_open(&r, "openai", NULL);
    assert_int_equal(cg_xform_body(r.x, body, sizeof(body) - 1, &r.out), 0);
    collect(&r);
    assert_non_null(strstr(r.body.p, "\"content\":\"A[[1]](https://a.example/) B.\""));
    const char *forwarded = strstr(r.body.p, "\"annotations\":[{\"type\":\"url_citation\","
                                             "\"url_citation\":{\"url\":\"https://b.example/\"");
    const char *own = strstr(r.body.p, "{\"type\":\"url_citation\",\"url_citation\":{\"url\":"
                                       "\"https://a.example/\",\"title\":\"A\",\"start_index\":1,");
    assert_true(forwarded && own && forwarded < own);
    assert_non_null(strstr(r.body.p, "\"created\":1700000000"));
    run_close(&r);
}

/* SPEC §6a: a body is numbered in the order of its output items, their parts
 * and each part's annotations, as the same answer streamed: markers covered
 * by A, B and A again, then C over a sentence and a file citation, give
 * A=1, B=2, C=3, file=4 both ways, in every profile (those that number by
 * first reference included). */
static void test_body_numbers_as_stream(void **state)
{
    (void)state;
    static const char *const all[] = {"openwebui", "openai", "webchat", "markdown", "structured",
                                      "off"};
    size_t bn, sn;
    char *body = answer("responses_numbering.json", &bn);
    char *stream = answer("responses_numbering.sse", &sn);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        cg_buf_t streamed = {0};
        run_whole(all[i], stream, sn, &streamed);
        run_t r;
        run_open(&r, all[i], NULL);
        assert_int_equal(cg_xform_body(r.x, body, bn, &r.out), 0);
        collect(&r);
        view_t vb, vs;
        assert_int_equal(view_of_body(&vb, r.body.p, r.body.len), 0);
        view_of_stream(&vs, streamed.p, streamed.len);
        cg_buf_t *cb = &vb.content[0], *cs = &vs.content[0];
        if (cb->len != cs->len || memcmp(cb->p, cs->p, cb->len) != 0)
            fail_msg("%s: body %.*s\nstream %.*s", all[i], (int)cb->len, cb->p, (int)cs->len, cs->p);
        assert_true(json_equal(vb.sources.p ? vb.sources.p : "[]", vb.sources.len ? vb.sources.len : 2,
                               vs.sources.p ? vs.sources.p : "[]", vs.sources.len ? vs.sources.len : 2));
        view_free(&vb);
        view_free(&vs);
        run_close(&r);
        cg_buf_free(&streamed);
    }
    free(body);
    free(stream);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_waits_behind_marker),
        cmocka_unit_test(test_annotation_run),
        cmocka_unit_test(test_forwarded_annotation_capped),
        cmocka_unit_test(test_other_event_deletes),
        cmocka_unit_test(test_other_part_covers_nothing),
        cmocka_unit_test(test_marker_length_limit),
        cmocka_unit_test(test_non_events),
        cmocka_unit_test(test_data_lines_join),
        cmocka_unit_test(test_end_releases),
        cmocka_unit_test(test_usage_chunk),
        cmocka_unit_test(test_delta_paths_agree),
        cmocka_unit_test(test_held_stream_passes_through),
        cmocka_unit_test(test_body_not_a_response),
        cmocka_unit_test(test_body_annotations),
        cmocka_unit_test(test_body_numbers_as_stream),
        cmocka_unit_test(test_markers_split_across_deltas),
        cmocka_unit_test_prestate(test_every_byte_split, &suite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
