/*
 * Property tests of SPEC §6 Fidelity: every fixture, split at every byte
 * boundary and in random multi-split patterns, gives the same client view;
 * and randomly generated answers, split anywhere, give exactly
 * rewrite(concatenated upstream content), checked by an independent oracle.
 */
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

static const struct {
    const char *body, *request;
} fixtures[] = {
    {"azure_oyd_stream.sse", "chat_request.json"},
    {"azure_oyd_filters_crlf.sse", "chat_request.json"},
    {"azure_truncated.sse", "chat_request.json"},
    {"numeric_stream.sse", "openwebui_rag_request.json"},
    {"numeric_malformed.sse", "openwebui_rag_request.json"},
    {"perplexity_stream.sse", "chat_request.json"},
    {"structured_stream.sse", "structured_request.json"},
    {"profiles/azure_multi_choice.sse", "chat_request.json"},
    {"profiles/azure_late_context.sse", "profiles/azure_ds_request.json"},
    {"profiles/azure_truncated_refs.sse", "chat_request.json"},
    {"profiles/perplexity_search_results_stream.sse", "chat_request.json"},
    {"profiles/request_sources_stream.sse", "profiles/rag_request_rich.json"},
    {"profiles/request_sources_no_done.sse", "profiles/rag_request_rich.json"},
    {"profiles/structured_stream.sse", "structured_request.json"},
    {"profiles/event_injection.sse", "chat_request.json"},
};

/* Every profile that transforms; each fixture runs through all of them. */
static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured"};

static char *fixture(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", CG_FIXTURES, name);
    return read_file(path, n);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Fidelity 5, and 3 for the events that carry no content: each such upstream
 * event appears in the output byte for byte. */
static void check_output_shape(const char *in, size_t n, const cg_buf_t *out, const char *name)
{
    view_t v;
    view_of_stream(&v, out->p, out->len);
    if (v.max_line > 65536)
        fail_msg("%s: line of %zu bytes", name, v.max_line);
    view_free(&v);
    for (const char *p = in; p < in + n;) {
        const char *end = strstr(p, "\n\n");
        const char *crend = strstr(p, "\r\n\r\n");
        if (crend && (!end || crend < end))
            end = crend + 2;
        if (end == NULL)
            break;
        size_t len = (size_t)(end + 2 - p);
        char *ev = cg_xstrndup(p, len);
        bool content = strstr(ev, "\"content\":\"") != NULL && strstr(ev, "\"delta\"") != NULL;
        bool named = strstr(ev, "\"event\"") != NULL;
        if (!content && !named && !memmem(out->p, out->len, ev, len))
            fail_msg("%s: event not forwarded byte for byte: %s", name, ev);
        free(ev);
        p = end + 2;
    }
}

static void run_fixture(size_t f, const char *profile, bool every_byte)
{
    size_t bn, rn;
    char *body = fixture(fixtures[f].body, &bn);
    char *rbody = fixture(fixtures[f].request, &rn);
    cg_cite_opts_t o = {8192, true};
    cg_request_t req;
    assert_int_equal(cg_request_parse(&req, rbody, rn, &o), 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));

    cg_buf_t whole = {0}, out = {0};
    run_stream(&cfg, &req, body, bn, NULL, 0, &whole);
    view_t want;
    view_of_stream(&want, whole.p, whole.len);
    check_output_shape(body, bn, &whole, fixtures[f].body);

    char why[8192];
    size_t patterns = every_byte ? bn : 300;
    for (size_t k = 1; k < patterns; k++) {
        size_t sizes[16];
        size_t nsizes;
        if (every_byte) {
            sizes[0] = k;
            sizes[1] = bn;
            nsizes = 2;
        } else {
            nsizes = 1 + rnd() % 16;
            for (size_t i = 0; i < nsizes; i++)
                sizes[i] = 1 + rnd() % (rnd() % 2 ? 8 : 300);
        }
        run_stream(&cfg, &req, body, bn, sizes, nsizes, &out);
        view_t got;
        view_of_stream(&got, out.p, out.len);
        if (!view_equal(&want, &got, why, sizeof(why)))
            fail_msg("%s/%s split %zu (%s): %s", fixtures[f].body, profile, k,
                     every_byte ? "byte" : "random", why);
        check_output_shape(body, bn, &out, fixtures[f].body);
        view_free(&got);
    }
    view_free(&want);
    cg_buf_free(&whole);
    cg_buf_free(&out);
    cg_request_free(&req);
    free(body);
    free(rbody);
}

static void test_every_byte_split(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], true);
}

static void test_random_splits(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], false);
}

/* --- generated answers against an oracle ---------------------------------- */

/* Citations of the generated streams: doc1, doc2 have URLs, doc3 has none. */
static const char *GEN_CTX =
    "data: {\"id\":\"g\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"context\":{\"citations\":[{\"title\":\"A\",\"url\":\"https://a.example/1\"},"
    "{\"title\":\"B\",\"url\":\"https://b.example/x y\"},{\"title\":\"C\"}]}}}]}\n\n";

static const char *oracle_url(unsigned n)
{
    return n == 1 ? "https://a.example/1" : n == 2 ? "https://b.example/x%20y" : NULL;
}

/* rewrite() of SPEC §6 for style doc, written independently of src/ref.c. */
static void oracle(const char *s, size_t n, cg_buf_t *out, cg_buf_t *cited)
{
    for (size_t i = 0; i < n;) {
        if (s[i] == '[' && i + 5 < n + 1 && strncmp(s + i, "[doc", 4) == 0) {
            size_t d = 0;
            unsigned v = 0;
            while (d < 4 && i + 4 + d < n && s[i + 4 + d] >= '0' && s[i + 4 + d] <= '9')
                v = v * 10 + (unsigned)(s[i + 4 + d++] - '0');
            if (d > 0 && i + 4 + d < n && s[i + 4 + d] == ']') {
                size_t len = 5 + d;
                const char *url = oracle_url(v);
                if (v >= 1 && v <= 3 && !memchr(cited->p ? cited->p : "", (int)('0' + v), cited->len))
                    cg_buf_putc(cited, (char)('0' + v));
                if (url)
                    cg_buf_printf(out, "[%.*s](%s)", (int)len, s + i, url);
                else
                    cg_buf_put(out, s + i, len);
                i += len;
                continue;
            }
        }
        cg_buf_putc(out, s[i++]);
    }
}

static void gen_text(cg_buf_t *t)
{
    static const char *const bits[] = {"[doc1]", "[doc2]", "[doc3]", "[doc4]", "[doc0]", "[doc",
                                       "[", "]", "doc", "1", "[[doc2]]", "[doc12345]", " ",
                                       "word", "\xC3\xA9", "\\n", "\\\"", "[doc01]"};
    size_t n = rnd() % 30;
    for (size_t i = 0; i < n; i++)
        cg_buf_puts(t, bits[rnd() % (sizeof(bits) / sizeof(bits[0]))]);
}

static void test_generated_against_oracle(void **state)
{
    (void)state;
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    for (int round = 0; round < 3000; round++) {
        cg_buf_t text = {0}, in = {0}, out = {0}, want = {0}, cited = {0};
        gen_text(&text);
        cg_buf_puts(&in, GEN_CTX);
        /* Cut the answer (raw JSON string bytes) into events at random points,
         * never inside an escape sequence. */
        for (size_t pos = 0; pos < text.len;) {
            size_t take = 1 + rnd() % 12;
            if (take > text.len - pos)
                take = text.len - pos;
            if (pos + take < text.len && text.p[pos + take - 1] == '\\')
                take++;
            cg_buf_puts(&in, rnd() % 4 ? "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
                                       : "data:{\"choices\":[{\"delta\":{\"content\":\"");
            cg_buf_put(&in, text.p + pos, take);
            cg_buf_puts(&in, rnd() % 2 ? "\"}}]}\n\n" : "\"}}]}\r\n\r\n");
            pos += take;
            if (rnd() % 5 == 0)
                cg_buf_puts(&in, ": ping\n\n");
        }
        cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
        if (rnd() % 2)
            cg_buf_puts(&in, "data: [DONE]\n\n");

        size_t sizes[4] = {1 + rnd() % 50, 1 + rnd() % 7, 1 + rnd() % 300, 1};
        run_stream(&cfg, NULL, in.p, in.len, sizes, 1 + rnd() % 4, &out);
        view_t v;
        view_of_stream(&v, out.p, out.len);

        /* The view decodes JSON; so must the oracle's input and output. */
        char *dec = cg_xmalloc(text.len + 1);
        size_t dn = cg_json_unescape(text.p, text.len, dec);
        oracle(dec, dn, &want, &cited);
        if (v.content[0].len != want.len || (want.len && memcmp(v.content[0].p, want.p, want.len)))
            fail_msg("round %d\ntext %.*s\nwant %.*s\ngot  %.*s", round, (int)text.len, text.p,
                     (int)want.len, want.p, (int)v.content[0].len, v.content[0].p);
        assert_true(v.ends_done);
        /* Sources: exactly the cited in-range citations, in first-reference order. */
        const char *p = v.sources.p;
        for (size_t i = 0; i < cited.len; i++) {
            char label[16];
            snprintf(label, sizeof(label), "\"id\":\"doc%c\"", cited.p[i]);
            const char *at = strstr(p, label);
            if (at == NULL)
                fail_msg("round %d: %s missing or out of order in %s", round, label, v.sources.p);
            p = at + 1;
        }
        size_t count = 0;
        for (const char *q = v.sources.p; (q = strstr(q, "\"document\"")) != NULL; q++)
            count++;
        if (count != cited.len)
            fail_msg("round %d: %zu sources, %zu cited (%.*s)\ntext %.*s\nsources %s", round, count,
                     cited.len, (int)cited.len, cited.p, (int)text.len, text.p, v.sources.p);
        free(dec);
        view_free(&v);
        cg_buf_free(&text);
        cg_buf_free(&in);
        cg_buf_free(&out);
        cg_buf_free(&want);
        cg_buf_free(&cited);
    }
}

/* Fidelity 2: after each complete event, everything but a possible reference
 * prefix of the content so far has gone out, in order. */
static void test_only_prefixes_held(void **state)
{
    (void)state;
    size_t bn;
    char *body = fixture("azure_oyd_stream.sse", &bn);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("openwebui"));
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    cg_buf_t sofar = {0};
    static const char *const expect_after[] = {
        "", "The X100 charges via USB-C ", "The X100 charges via USB-C in two hours ",
    };
    const char *p = body;
    for (int ev = 0; ev < 3; ev++) {
        const char *end = strstr(p, "\n\n") + 2;
        cg_xform_feed(x, p, (size_t)(end - p), &out);
        for (size_t i = 0; i < out.nseg; i++)
            cg_buf_put(&sofar, out.seg[i].p, out.seg[i].n);
        view_t v;
        view_of_stream(&v, sofar.p, sofar.len);
        assert_int_equal(v.content[0].len, strlen(expect_after[ev]));
        assert_memory_equal(v.content[0].p ? v.content[0].p : "", expect_after[ev],
                            strlen(expect_after[ev]));
        view_free(&v);
        p = end;
    }
    /* The next event completes "[doc1]": it goes out with that event. */
    const char *end = strstr(p, "\n\n") + 2;
    cg_xform_feed(x, p, (size_t)(end - p), &out);
    cg_buf_t chunk = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&chunk, out.seg[i].p, out.seg[i].n);
    cg_buf_putc(&chunk, '\0');
    assert_non_null(strstr(chunk.p, "\"content\":\"[[doc1]](https://docs.example.com/x100/manual.pdf). It"));
    cg_buf_free(&chunk);
    cg_buf_free(&sofar);
    cg_out_free(&out);
    cg_xform_free(x);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte_split),
        cmocka_unit_test(test_random_splits),
        cmocka_unit_test(test_generated_against_oracle),
        cmocka_unit_test(test_only_prefixes_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
