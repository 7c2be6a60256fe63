/*
 * Property tests of SPEC §6 Fidelity: every fixture, and streams full of
 * upstream "event" members (rule 4) and oversized events (rule 6), split at
 * every byte boundary (a sample of them under ASan, tests/support/split.h)
 * and in random multi-split patterns, give the same
 * client view; and randomly generated answers, split anywhere, give exactly
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
#include "split.h"
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
    {"profiles/openai_search_stream.sse", "chat_request.json"},
    {"profiles/openrouter_stream.sse", "chat_request.json"},
    {"profiles/deepseek_citation_stream.sse", "chat_request.json"},
};

/* Every profile that transforms; each fixture runs through all of them. */
static const char *const profiles[] = {"openwebui", "openai", "webchat", "structured",
                                       "markdown"};

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

/* Does SSE event ev (with its blank line) carry a top-level member whose
 * name is "event" once unescaped? */
static bool has_event_member(const char *ev, size_t n)
{
    /* Such a name is spelled "event" or has an escape: without either, no
     * need to parse. */
    if (!memmem(ev, n, "event", 5) && !memchr(ev, '\\', n))
        return false;
    cg_buf_t data = {0};
    for (const char *p = ev, *end = ev + n; p < end;) {
        const char *e = p;
        while (e < end && *e != '\r' && *e != '\n')
            e++;
        if (e - p >= 5 && memcmp(p, "data:", 5) == 0) {
            const char *v = p + 5 + (e - p > 5 && p[5] == ' ');
            if (data.len)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, v, (size_t)(e - v));
        }
        p = e + (e < end && *e == '\r' && e + 1 < end && e[1] == '\n' ? 2 : 1);
    }
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    bool named = false;
    if (data.len && cg_json_parse(&j, data.p, data.len) == CG_JSON_OK &&
        j.tok[0].type == JSMN_OBJECT) {
        for (int k = 0, key = 1; k < j.tok[0].size && !named;
             k++, key = cg_json_skip(&j, key + 1)) {
            cg_span_t raw = cg_json_raw(&j, key);
            char name[64];
            named = raw.n < sizeof(name) && cg_json_unescape(raw.p, raw.n, name) == 5 &&
                    memcmp(name, "event", 5) == 0;
        }
    }
    cg_json_free(&j);
    cg_buf_free(&data);
    return named;
}

/* Calls fn for every complete event of s[0..n) (LF or CRLF line ends). */
static void each_event(const char *s, size_t n, void (*fn)(const char *ev, size_t len, void *arg),
                       void *arg)
{
    for (const char *p = s; p < s + n;) {
        const char *end = memmem(p, (size_t)(s + n - p), "\n\n", 2);
        const char *crend = memmem(p, (size_t)(s + n - p), "\r\n\r\n", 4);
        if (crend && (!end || crend < end))
            end = crend + 2;
        if (end == NULL)
            break;
        fn(p, (size_t)(end + 2 - p), arg);
        p = end + 2;
    }
}

typedef struct shape {
    const char *name;
    size_t max_event;
    bool passthrough; /* structured over max_event: the stream goes through whole */
    /* Fidelity 3: the upstream events that carry no content (and no "event"
     * member to lose), each of which every output has byte for byte. */
    cg_span_t *forward;
    size_t nforward;
} shape_t;

static void add_forwarded(const char *ev, size_t len, void *arg)
{
    shape_t *sh = arg;
    bool content = memmem(ev, len, "\"content\":\"", 11) && memmem(ev, len, "\"delta\"", 7);
    if (content || has_event_member(ev, len))
        return;
    sh->forward = cg_xrealloc(sh->forward, (sh->nforward + 1) * sizeof(cg_span_t));
    sh->forward[sh->nforward++] = cg_span(ev, len);
}

/* The shape checks of the outputs of upstream in[0..n). */
static void shape_init(shape_t *sh, const char *name, const char *in, size_t n, size_t max_event,
                       bool passthrough)
{
    *sh = (shape_t){name, max_event, passthrough, NULL, 0};
    each_event(in, n, add_forwarded, sh);
}

static void shape_free(shape_t *sh)
{
    free(sh->forward);
}

/* Rule 4: an output event keeps an "event" member only when it is an
 * oversized upstream event (rule 6) or openwebui's own source event (the
 * test inputs' upstream ones are all "evil"). */
static void check_no_event_member(const char *ev, size_t len, void *arg)
{
    const shape_t *sh = arg;
    if (sh->passthrough || len - 1 > sh->max_event || !has_event_member(ev, len))
        return;
    if (memmem(ev, len, "\"choices\":[],\"event\":{\"type\":\"source\"", 37) &&
        !memmem(ev, len, "evil", 4))
        return;
    fail_msg("%s: an upstream event member survived: %.*s", sh->name, (int)(len > 300 ? 300 : len),
             ev);
}

/* Fidelity 5, 3 and 4 on one output, whose client view is v. */
static void check_output_shape(const view_t *v, const cg_buf_t *out, const shape_t *sh)
{
    if (v->max_line > 65536)
        fail_msg("%s: line of %zu bytes", sh->name, v->max_line);
    for (size_t i = 0; i < sh->nforward; i++) {
        cg_span_t ev = sh->forward[i];
        if (!memmem(out->p, out->len, ev.p, ev.n))
            fail_msg("%s: event not forwarded byte for byte: %.*s", sh->name, (int)ev.n, ev.p);
    }
    each_event(out->p, out->len, check_no_event_member, (void *)sh);
}

/* One stream through one configuration, for the split driver. */
typedef struct fid_case {
    const char *name, *body;
    size_t bn;
    const cg_request_t *req;
    const cg_xform_cfg_t *cfg;
    view_t want;
    shape_t sh;
} fid_case_t;

static void fid_run(const split_case_t *sc, const size_t *sizes, size_t nsizes, cg_buf_t *out)
{
    const fid_case_t *c = sc->ctx;
    run_stream(c->cfg, c->req, sc->in, sc->n, sizes, nsizes, out);
}

/* A split run: the whole run's client view, and the shape checks. */
static void fid_check(const split_case_t *sc, const cg_buf_t *whole, const cg_buf_t *got, size_t k,
                      const char *how)
{
    const fid_case_t *c = sc->ctx;
    (void)whole;
    char why[8192];
    view_t v;
    view_of_stream(&v, got->p, got->len);
    if (!view_equal(&c->want, &v, why, sizeof(why)))
        fail_msg("%s/%s split %zu (%s): %s", c->name, c->cfg->profile->name, k, how, why);
    check_output_shape(&v, got, &c->sh);
    view_free(&v);
}

/* Runs one stream through cfg whole, then split at the cuts of sp (split.h:
 * every byte boundary, or a sample under ASan; the count goes to tally), or
 * with sp NULL in 300 random multi-split patterns: the same client view,
 * and the shape checks on every output. */
static void run_case(const char *name, const char *body, size_t bn, const cg_request_t *req,
                     const cg_xform_cfg_t *cfg, const split_points_t *sp, split_tally_t *tally)
{
    fid_case_t c = {.name = name, .body = body, .bn = bn, .req = req, .cfg = cfg};
    cg_buf_t whole = {0};
    run_stream(cfg, req, body, bn, NULL, 0, &whole);
    view_of_stream(&c.want, whole.p, whole.len);
    /* profile structured holds at most max_event bytes, then lets all through */
    bool passthrough = cfg->profile->holds_stream && bn > cfg->max_event;
    shape_init(&c.sh, name, body, bn, cfg->max_event, passthrough);
    check_output_shape(&c.want, &whole, &c.sh);

    split_case_t sc = {body, bn, fid_run, fid_check, &c};
    if (sp)
        split_tally_add(tally, split_every(&sc, sp, &whole), bn ? bn - 1 : 0);
    else
        split_random(&sc, 300, &rng, &whole);
    shape_free(&c.sh);
    view_free(&c.want);
    cg_buf_free(&whole);
}

/* Fixture f's upstream body and its parsed request. */
typedef struct loaded {
    char *body;
    size_t n;
    cg_request_t req;
} loaded_t;

static void load(size_t f, loaded_t *l)
{
    size_t rn;
    l->body = fixture(fixtures[f].body, &l->n);
    char *rbody = fixture(fixtures[f].request, &rn);
    cg_cite_opts_t o = {8192, true};
    assert_int_equal(cg_request_parse(&l->req, rbody, rn, &o), 0);
    free(rbody);
}

static void unload(loaded_t *l)
{
    cg_request_free(&l->req);
    free(l->body);
}

/* tally NULL: 300 random patterns; else the cuts of split.h (with this
 * phase when sampled), counted in tally. */
static void run_fixture(size_t f, const char *profile, size_t phase, split_tally_t *tally)
{
    loaded_t l;
    load(f, &l);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    split_points_t sp;
    split_points_init(&sp, l.body, l.n, phase);
    run_case(fixtures[f].body, l.body, l.n, &l.req, &cfg, tally ? &sp : NULL, tally);
    split_points_free(&sp);
    unload(&l);
}

static void test_every_byte_split(void **state)
{
    (void)state;
    split_tally_t tally = {0};
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], p, &tally);
    split_tally_print(&tally, "fixtures x profiles");
}

static void test_random_splits(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++)
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++)
            run_fixture(f, profiles[p], 0, NULL);
}

/* The last read and the end in one call give the same bytes as two calls,
 * whatever the reads were. */
static void test_last_read_joined_with_end(void **state)
{
    (void)state;
    static const size_t reads[] = {0, 1, 7, 64, 333};
    for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
        loaded_t l;
        load(f, &l);
        for (size_t p = 0; p < sizeof(profiles) / sizeof(profiles[0]); p++) {
            cg_xform_cfg_t cfg;
            cg_xform_cfg_default(&cfg, profile_named(profiles[p]));
            for (size_t r = 0; r < sizeof(reads) / sizeof(reads[0]); r++) {
                cg_buf_t two = {0}, one = {0};
                const size_t *sz = reads[r] ? &reads[r] : NULL;
                run_stream(&cfg, &l.req, l.body, l.n, sz, sz ? 1 : 0, &two);
                run_stream_joined(&cfg, &l.req, l.body, l.n, sz, sz ? 1 : 0, &one);
                if (one.len != two.len || memcmp(one.p, two.p, one.len) != 0)
                    fail_msg("%s/%s, reads of %zu: %zu bytes joined, %zu in two calls",
                             fixtures[f].body, profiles[p], reads[r], one.len, two.len);
                cg_buf_free(&two);
                cg_buf_free(&one);
            }
        }
        unload(&l);
    }
}

/* --- rules 4 and 6 under every split ----------------------------------------- */

#define SPLIT_MAX_EVENT 4096

/* A content chunk of choice 0 with `text`, `pad` bytes of padding after it,
 * and the members `extra` (each with a comma before it). */
static void chunk(cg_buf_t *b, const char *extra_before, const char *text, size_t pad,
                  const char *extra, const char *eol)
{
    cg_buf_printf(b, "data: {\"id\":\"s1\",%s\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s",
                  extra_before, text);
    for (size_t i = 0; i < pad; i++)
        cg_buf_putc(b, (char)('a' + i % 26));
    cg_buf_printf(b, "\"}}]%s}%s%s", extra, eol, eol);
}

/*
 * Upstream "event" members in every spelling and position: duplicates,
 * escaped names, on chunks with and without content, on chunks that would
 * otherwise follow the template path, after [DONE]. With `big`, also an
 * oversized chunk (over SPLIT_MAX_EVENT, with an "event" member of its own)
 * between two halves of a reference, and an oversized comment; `truncated`
 * ends the stream inside a third one.
 */
static void rules_input(cg_buf_t *b, const char *eol, bool big, bool truncated)
{
    static const char *const evil = "{\"type\":\"source\",\"data\":{\"source\":{\"id\":\"evil\"}}}";
    cg_buf_printf(b,
                  "data: {\"id\":\"s1\",\"\\u0065vent\":%s,\"choices\":[{\"index\":0,\"delta\":"
                  "{\"role\":\"assistant\",\"context\":{\"citations\":[{\"title\":\"A\",\"url\":"
                  "\"https://a.example/1\",\"content\":\"a\"},{\"title\":\"B\"}]}}}]}%s%s",
                  evil, eol, eol);
    cg_buf_t m = {0};
    cg_buf_printf(&m, ",\"event\":%s,\"\\u0065\\u0076ent\":1", evil);
    cg_buf_putc(&m, '\0');
    chunk(b, "", "one [doc1] ", 0, "", eol);
    chunk(b, "", "two ", 0, "", eol);
    chunk(b, "\"event\":1,", "three [do", 0, m.p, eol); /* the template's shape, plus members */
    chunk(b, "\"event\":1,", "c2] four ", 0, m.p, eol);
    chunk(b, "", "five ", 0, "", eol);
    cg_buf_printf(b, "data: {\"ev\\u0065nt\":%s,\"choices\":[]}%s%s", evil, eol, eol);
    cg_buf_printf(b, ": keep-alive%s%s", eol, eol);
    chunk(b, "", "six [doc", 0, "", eol);
    if (big) {
        chunk(b, "", "BIG [doc1] ", SPLIT_MAX_EVENT, m.p, eol);
        chunk(b, "", "1] seven [doc1] ", 0, m.p, eol);
        cg_buf_printf(b, ": %0*d%s%s", SPLIT_MAX_EVENT, 0, eol, eol);
    }
    chunk(b, "", "eight [d", 0, "", eol);
    if (truncated) {
        chunk(b, "", "CUT ", SPLIT_MAX_EVENT, "", eol);
        b->len -= 5; /* never ends */
    } else {
        cg_buf_printf(
            b,
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]%s}"
            "%s%sdata: [DONE]%s%s",
            m.p, eol, eol, eol, eol);
        cg_buf_printf(b, "data: {\"\\u0065vent\":%s}%s%s", evil, eol, eol);
    }
    cg_buf_free(&m);
}

static void test_rules_every_byte_split(void **state)
{
    (void)state;
    static const struct {
        const char *name, *eol;
        bool big, truncated;
    } inputs[] = {
        {"event members (LF)", "\n", false, false},
        {"event members, oversized events (LF)", "\n", true, false},
        {"event members, oversized events (CRLF), truncated", "\r\n", true, true},
    };
    static const char *const all[] = {"openwebui", "openai", "webchat", "structured", "markdown"};
    split_tally_t tally = {0};
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        cg_buf_t in = {0};
        rules_input(&in, inputs[i].eol, inputs[i].big, inputs[i].truncated);
        for (size_t p = 0; p < sizeof(all) / sizeof(all[0]); p++) {
            cg_xform_cfg_t cfg;
            cg_xform_cfg_default(&cfg, profile_named(all[p]));
            cfg.max_event = SPLIT_MAX_EVENT;
            /* Sampled, the cuts where a read first takes an event (or the
             * held stream) over max_event stay in. */
            split_points_t sp;
            split_points_init(&sp, in.p, in.len, p);
            split_points_near(&sp, SPLIT_MAX_EVENT);
            for (size_t b = 0; b < in.len; b++)
                if (in.p[b] == '\n')
                    split_points_near(&sp, b + 1 + SPLIT_MAX_EVENT);
            run_case(inputs[i].name, in.p, in.len, NULL, &cfg, &sp, &tally);
            split_points_free(&sp);
        }
        /* What the client reads: references linked around the oversized
         * chunk (kept as it came), none across it. */
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named("openwebui"));
        cfg.max_event = SPLIT_MAX_EVENT;
        cg_buf_t out = {0};
        run_stream(&cfg, NULL, in.p, in.len, NULL, 0, &out);
        view_t v;
        view_of_stream(&v, out.p, out.len);
        cg_buf_putc(&v.content[0], '\0');
        const char *head = "one [[doc1]](https://a.example/1) two three [doc2] four five six [doc";
        assert_int_equal(strncmp(v.content[0].p, head, strlen(head)), 0);
        const char *rest = v.content[0].p + strlen(head);
        if (inputs[i].big) {
            assert_int_equal(strncmp(rest, "BIG [doc1] abc", 14), 0);
            rest = strstr(rest, "1] seven");
            assert_non_null(rest);
            const char *tail = "1] seven [[doc1]](https://a.example/1) eight [d";
            assert_int_equal(strncmp(rest, tail, strlen(tail)), 0);
        } else {
            assert_string_equal(rest, "eight [d");
        }
        assert_int_equal(v.ends_error, inputs[i].truncated);
        view_free(&v);
        cg_buf_free(&out);
        cg_buf_free(&in);
    }
    split_tally_print(&tally, "event member inputs x profiles");
}

/* --- generated answers against an oracle ---------------------------------- */

/* Citations of the generated streams: 1 and 2 have URLs, 3 has none. As
 * Azure context (style doc), or as a top-level URL list (DeepSeek style,
 * [citation:N] or [N], whichever comes first). */
static const char *GEN_CTX =
    "data: {\"id\":\"g\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":"
    "{\"context\":{\"citations\":[{\"title\":\"A\",\"url\":\"https://a.example/1\"},"
    "{\"title\":\"B\",\"url\":\"https://b.example/x y\"},{\"title\":\"C\"}]}}}]}\n\n";
static const char *GEN_WEB =
    "data: {\"id\":\"g\",\"citations\":[\"https://a.example/1\",\"https://b.example/x y\",\"C\"],"
    "\"choices\":[]}\n\n";

static const char *oracle_url(unsigned n)
{
    return n == 1 ? "https://a.example/1" : n == 2 ? "https://b.example/x%20y" : NULL;
}

/* Length of the reference `prefix` + 1-4 digits + "]" at s[0..n), or 0;
 * its number in *v. */
static size_t oracle_match(const char *s, size_t n, const char *prefix, unsigned *v)
{
    size_t p = strlen(prefix), d = 0;
    if (n < p || strncmp(s, prefix, p) != 0)
        return 0;
    *v = 0;
    while (d < 4 && p + d < n && s[p + d] >= '0' && s[p + d] <= '9')
        *v = *v * 10 + (unsigned)(s[p + d++] - '0');
    return d > 0 && p + d < n && s[p + d] == ']' ? p + d + 1 : 0;
}

/* SPEC §3 auto without Azure context: the form of the first [N] or
 * [citation:N]. */
static const char *oracle_auto(const char *s, size_t n)
{
    unsigned v;
    for (size_t i = 0; i < n; i++) {
        if (oracle_match(s + i, n - i, "[", &v))
            return "[";
        if (oracle_match(s + i, n - i, "[citation:", &v))
            return "[citation:";
    }
    return "[";
}

/* rewrite() of SPEC §6 for the style whose references start with prefix
 * ("[doc", "[citation:" or "["), written independently of src/ref.c. */
static void oracle(const char *s, size_t n, const char *prefix, cg_buf_t *out, cg_buf_t *cited)
{
    for (size_t i = 0; i < n;) {
        unsigned v;
        size_t len = s[i] == '[' ? oracle_match(s + i, n - i, prefix, &v) : 0;
        if (len) {
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
        cg_buf_putc(out, s[i++]);
    }
}

static void gen_text(cg_buf_t *t, bool citation)
{
    static const char *const doc[] = {"[doc1]", "[doc2]", "[doc3]", "[doc4]", "[doc0]", "[doc",
                                      "[", "]", "doc", "1", "[[doc2]]", "[doc12345]", " ",
                                      "word", "\xC3\xA9", "\\n", "\\\"", "[doc01]"};
    static const char *const cit[] = {"[citation:1]", "[citation:2]", "[citation:3]",
                                      "[citation:4]", "[citation:0]", "[citation:", "[cita",
                                      "[", "]", "citation", ":", "1", "[[citation:2]]",
                                      "[citation:12345]", " ", "\xC3\xA9", "\\n", "[citation:01]",
                                      "[2]", "[c"};
    const char *const *bits = citation ? cit : doc;
    size_t nbits = citation ? sizeof(cit) / sizeof(cit[0]) : sizeof(doc) / sizeof(doc[0]);
    size_t n = rnd() % 30;
    for (size_t i = 0; i < n; i++)
        cg_buf_puts(t, bits[rnd() % nbits]);
}

static void test_generated_against_oracle(void **state)
{
    (void)state;
    for (int round = 0; round < 4500; round++) {
        /* doc; citation with the style fixed; citation with auto */
        int mode = round % 3;
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named("openwebui"));
        if (mode == 1)
            cfg.style = CG_REF_CITATION;
        cg_buf_t text = {0}, in = {0}, out = {0}, want = {0}, cited = {0};
        gen_text(&text, mode > 0);
        cg_buf_puts(&in, mode ? GEN_WEB : GEN_CTX);
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
        const char *prefix = mode == 0 ? "[doc" : mode == 1 ? "[citation:" : oracle_auto(dec, dn);
        oracle(dec, dn, prefix, &want, &cited);
        if (v.content[0].len != want.len || (want.len && memcmp(v.content[0].p, want.p, want.len)))
            fail_msg("round %d\ntext %.*s\nwant %.*s\ngot  %.*s", round, (int)text.len, text.p,
                     (int)want.len, want.p, (int)v.content[0].len, v.content[0].p);
        assert_true(v.ends_done);
        /* Sources: exactly the cited in-range citations, in first-reference order. */
        const char *p = v.sources.p;
        for (size_t i = 0; i < cited.len; i++) {
            char label[16];
            snprintf(label, sizeof(label), "\"id\":\"%s%c\"", mode ? "" : "doc", cited.p[i]);
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
        cmocka_unit_test(test_last_read_joined_with_end),
        cmocka_unit_test(test_rules_every_byte_split),
        cmocka_unit_test(test_generated_against_oracle),
        cmocka_unit_test(test_only_prefixes_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
