/*
 * The bedrock-kb dialect (src/dialects/bedrock_kb.c, SPEC §6a): Knowledge
 * Bases' RetrieveAndGenerate. The chunks its view writes from event-stream
 * messages, byte for byte; each citation event's references as it comes;
 * the guardrail's finish; exceptions, error messages and a stream cut
 * short; sources of every location type (s3 a title, never a link), their
 * metadata; a body's references after the inclusive span end, counted in
 * code points (a Chinese answer), past the text, with bad offsets, a
 * source cited twice, the deprecated nested form; every split of a stream
 * in every profile; the request, its path and header fields both ways.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dialect_run.h"
#include "dialects/view.h"
#include "evs_enc.h"
#include "profiles.h"
#include "steady.h"
#include "view.h"

#define META                                                                                       \
    "\"id\":\"\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"\""

static const char REQUEST[] =
    "{\"model\":\"kb\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"q?\"}]}";

/* A retrieved reference: location type and member, key, and the rest. */
#define REF(loc, member, key, text, meta)                                                          \
    "{\"content\":{\"type\":\"TEXT\",\"text\":\"" text "\"},\"location\":{\"type\":\"X\",\"" loc   \
    "\":{\"" member "\":\"" key "\"}},\"metadata\":{" meta "}}"
#define S3(key, text, meta)  REF("s3Location", "uri", key, text, meta)
#define WEB(key, text, meta) REF("webLocation", "url", key, text, meta)
#define PART(text, end)                                                                            \
    "\"generatedResponsePart\":{\"textResponsePart\":{\"text\":\"" text                            \
    "\",\"span\":{\"start\":0,"                                                                    \
    "\"end\":" end "}}}"
#define CITATION(text, end, refs) "{" PART(text, end) ",\"retrievedReferences\":[" refs "]}"

#define MANUAL                                                                                     \
    S3("s3://kb-docs/x100/manual.pdf", "Plug the X100 in.",                                        \
       "\"x-amz-bedrock-kb-chunk-id\":\"c-1\",\"x-amz-bedrock-kb-document-page-number\":3.0,"      \
       "\"x-amz-bedrock-kb-source-uri\":\"s3://kb-docs/x100/manual.pdf\"")
#define FAQ WEB("https://docs.example.com/faq", "Two hours.", "\"x-amz-bedrock-kb-title\":\"FAQ\"")
#define WIKI                                                                                       \
    REF("confluenceLocation", "url", "https://wiki.example.com/x100", "Wiki text.",                \
        "\"title\":\"X100 wiki\"")

/* A grounded answer: two output parts, each followed by its citation; the
 * FAQ cited by both; a guardrail that did not intervene. */
static void grounded(cg_buf_t *s, const char *action)
{
    char g[64];
    snprintf(g, sizeof(g), "{\"action\":\"%s\",\"p\":\"ab\"}", action);
    evs_event(s, "output", "{\"text\":\"Charge \\\"it\\\" \\u00e9.\",\"p\":\"abc\"}");
    evs_event(s, "citation",
              "{" PART("Charge it.", "9") ",\"retrievedReferences\":[" MANUAL "," FAQ "," MANUAL
                                          "],\"citation\":{\"retrievedReferences\":[]}}");
    evs_event(s, "output", "{\"text\":\" Then wait.\"}");
    evs_event(s, "citation",
              "{" PART("Then wait.", "20") ",\"retrievedReferences\":[" FAQ "," WIKI "]}");
    evs_event(s, "guardrail", g);
}

static void run(const char *profile, const char *request, const cg_buf_t *in, cg_buf_t *out,
                cg_xform_stats_t *stats)
{
    dialect_run("bedrock-kb", profile, request, in->p, in->len, out, stats);
}

static int run_body(const char *profile, const char *body, cg_buf_t *out)
{
    dialect_case_t c;
    dialect_case_init(&c, dialect_named("bedrock-kb"), NULL, 0);
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named(profile));
    int rc = dialect_body(&cfg, &c, body, strlen(body), out);
    dialect_case_free(&c);
    return rc;
}

/* The client's content and sources, NUL-terminated (free with view_free). */
static void client_view(view_t *v, const cg_buf_t *out, bool body)
{
    if (body)
        assert_int_equal(view_of_body(v, out->p, out->len), 0);
    else
        view_of_stream(v, out->p, out->len);
    cg_buf_putc(&v->content[0], '\0');
    cg_buf_putc(&v->sources, '\0');
}

/* The content of body `body` in profile off. */
static void body_content(const char *body, const char *want)
{
    cg_buf_t out = {0};
    assert_int_equal(run_body("off", body, &out), 0);
    view_t v;
    client_view(&v, &out, true);
    assert_string_equal(v.content[0].p, want);
    view_free(&v);
    cg_buf_free(&out);
}

static void test_stream_chunks(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    grounded(&in, "NONE");
    cg_xform_stats_t st;
    run("off", REQUEST, &in, &out, &st);
    const char *want =
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"
        "\"\"},\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Charge \\\"it\\\" "
        "\\u00e9.\"},\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[1][2]\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" Then wait.\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"[2][3]\"},"
        "\"finish_reason\":null}]}\n\n"
        "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    assert_string_equal(out.p, want);
    assert_false(st.framing_error);
    assert_int_equal(st.events_in, 5);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Open WebUI: the s3 source is titled by its file name, with no link, its
 * chunk id and page in its metadata; the web source links; a source cited
 * twice is one source. */
static void test_sources_in_openwebui(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    grounded(&in, "NONE");
    run("openwebui", REQUEST, &in, &out, NULL);
    view_t v;
    client_view(&v, &out, false);
    assert_true(v.ends_done);
    assert_string_equal(v.content[0].p,
                        "Charge \"it\" \xc3\xa9.[1][[2]](https://docs.example.com/faq) Then wait."
                        "[[2]](https://docs.example.com/faq)[[3]](https://wiki.example.com/x100)");
    assert_non_null(
        strstr(v.sources.p,
               "{\"source\":{\"id\":\"1\",\"name\":\"[1] manual.pdf\"},\"document\":[\"Plug the "
               "X100 in.\"],"
               "\"metadata\":[{\"source\":\"1:s3://kb-docs/x100/manual.pdf#c-1\",\"name\":\"[1] "
               "manual.pdf\",\"chunk_id\":\"c-1\",\"page\":3}]}"));
    assert_non_null(
        strstr(v.sources.p, "\"name\":\"[2] FAQ\",\"url\":\"https://docs.example.com/faq\""));
    assert_non_null(strstr(v.sources.p, "\"name\":\"[3] X100 wiki\""));
    assert_null(strstr(v.sources.p, "\"id\":\"4\""));
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Every location type keys a source; only http(s) ones link; a reference
 * with no key is left out. */
static void test_every_location(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "output", "{\"text\":\"All.\"}");
    evs_event(
        &in, "citation",
        "{\"retrievedReferences\":["
        "{\"location\":{\"type\":\"S3\"}}," /* no key */
        S3("s3://b/k/Guide%20One.pdf", "s3", "") "," WEB(
            "https://web.example/a", "web",
            "") "," REF("confluenceLocation", "url", "https://c.example/p", "conf",
                        "") "," REF("salesforceLocation", "url", "https://sf.example/r", "sf",
                                    "") "," REF("sharePointLocation", "url",
                                                "https://sp.example/s.docx", "sp",
                                                "") "," REF("kendraDocumentLocation", "uri",
                                                            "https://kendra.example/d", "kendra",
                                                            "") "," REF("customDocumentLoca"
                                                                        "tion",
                                                                        "id", "doc-7", "custom",
                                                                        "") ","
                                                                            "{\"location\":"
                                                                            "{\"customDocum"
                                                                            "entLocation\":"
                                                                            "{\"id\":\"\"}}"
                                                                            "}" /* an empty
                                                                                   key */
                                                                            "]}");
    run("openwebui", NULL, &in, &out, NULL);
    view_t v;
    client_view(&v, &out, false);
    assert_string_equal(v.content[0].p,
                        "All.[1][[2]](https://web.example/a)[[3]](https://c.example/p)"
                        "[[4]](https://sf.example/r)[[5]](https://sp.example/s.docx)"
                        "[[6]](https://kendra.example/d)[7]");
    assert_non_null(strstr(v.sources.p, "\"name\":\"[1] Guide One.pdf\"},\"document\":[\"s3\"]"));
    assert_non_null(
        strstr(v.sources.p, "\"name\":\"[5] s.docx\",\"url\":\"https://sp.example/s.docx\""));
    assert_non_null(strstr(v.sources.p, "\"name\":\"[7] doc-7\"},\"document\":[\"custom\"]"));
    assert_null(strstr(v.sources.p, "\"url\":\"s3:")); /* never a link */
    assert_null(strstr(v.sources.p, "\"source_url\":\"s3:"));
    assert_null(strstr(v.sources.p, "\"id\":\"8\""));
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

static void test_guardrail(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    grounded(&in, "INTERVENED");
    run("openwebui", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "\"finish_reason\":\"content_filter\""));
    assert_null(strstr(out.p, "\"finish_reason\":\"stop\""));
    assert_non_null(strstr(out.p, "data: [DONE]"));
    /* a guardrail alone: the role, the finish */
    in.len = 0;
    evs_event(&in, "guardrail", "{\"action\":\"INTERVENED\"}");
    run("off", NULL, &in, &out, NULL);
    assert_string_equal(out.p, "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
                               "\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
                               "data: {" META ",\"choices\":[{\"index\":0,\"delta\":{},"
                               "\"finish_reason\":\"content_filter\"}]}\n\ndata: [DONE]\n\n");
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Exceptions and error messages as for bedrock; unknown events dropped. */
static void test_exception_and_error(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "output", "{\"text\":\"Half\"}");
    evs_event(&in, "somethingNew", "{\"x\":1}");
    evs_exception(&in, "resourceNotFoundException", "{\"message\":\"no such knowledge base\"}");
    evs_event(&in, "output", "{\"text\":\" never\"}");
    run("openwebui", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "\"content\":\"Half\""));
    assert_null(strstr(out.p, "never"));
    assert_null(strstr(out.p, "[DONE]"));
    assert_null(strstr(out.p, "finish_reason\":\"stop"));
    assert_non_null(strstr(out.p, "data: {\"error\":{\"message\":\"no such knowledge base\","
                                  "\"type\":\"upstream_error\",\"code\":"
                                  "\"resourceNotFoundException\"}}"));
    in.len = 0;
    evs_event(&in, "output", "{\"text\":\"Half\"}");
    evs_error(&in, "InternalFailure", "boom");
    run("off", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "{\"error\":{\"message\":\"boom\",\"type\":\"upstream_error\","
                                  "\"code\":\"InternalFailure\"}}"));
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* A body cut inside a message, or with no message at all: truncated. */
static void test_cut_short(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "output", "{\"text\":\"Half\"}");
    evs_event(&in, "output", "{\"text\":\"way\"}");
    in.len -= 10;
    run("off", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "\"code\":\"upstream_closed\""));
    assert_non_null(strstr(out.p, "Half"));
    assert_null(strstr(out.p, "way"));
    assert_null(strstr(out.p, "finish_reason\":\"stop"));
    in.len = 0;
    run("off", NULL, &in, &out, NULL);
    assert_non_null(strstr(out.p, "\"code\":\"upstream_closed\""));
    /* whole messages, but the connection failed or went idle: not an end */
    grounded(&in, "NONE");
    static const cg_end_t why[] = {CG_END_RESET, CG_END_TIMEOUT, CG_END_SHUTDOWN};
    for (size_t k = 0; k < 3; k++) {
        dialect_case_t c;
        dialect_case_init(&c, dialect_named("bedrock-kb"), NULL, 0);
        cg_xform_cfg_t cfg;
        cg_xform_cfg_default(&cfg, profile_named("off"));
        cg_xform_t *x = dialect_xform(&cfg, &c);
        cg_out_t o = {0};
        out.len = 0;
        cg_xform_feed(x, in.p, in.len, &o);
        dialect_collect(&out, &o);
        cg_xform_finish(x, why[k], &o);
        dialect_collect(&out, &o);
        cg_buf_putc(&out, '\0');
        assert_non_null(strstr(out.p, "\"code\":\"upstream_closed\""));
        assert_null(strstr(out.p, "finish_reason\":\"stop"));
        assert_null(strstr(out.p, "[DONE]"));
        cg_out_free(&o);
        cg_xform_free(x);
        dialect_case_free(&c);
    }
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* The deprecated nested citation, read when the top-level members are
 * absent; ignored when they are there. */
static void test_nested_citation(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "output", "{\"text\":\"Old.\"}");
    evs_event(&in, "citation", "{\"citation\":" CITATION("Old.", "3", FAQ) "}");
    run("off", NULL, &in, &out, NULL);
    view_t v;
    client_view(&v, &out, false);
    assert_string_equal(v.content[0].p, "Old.[1]");
    view_free(&v);
    body_content("{\"output\":{\"text\":\"Old. New.\"},\"citations\":[{\"citation\":" CITATION(
                     "Old.", "3", FAQ) "}," CITATION("New.", "8", WIKI) "]}",
                 "Old.[1] New.[2]");
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* --- the steady path: output text read without a parse ------------------------------ */

/* Whatever the steady path takes of an output payload, the parse takes,
 * with the same bytes: its text (on_output's reading). */
static bool same_as_parse(const char *p, size_t n)
{
    return steady_same_text(cg__bedrock_kb_output, NULL, "text", p, n);
}

#define TAKES(lit)   assert_true(same_as_parse(lit, sizeof(lit) - 1))
#define REFUSES(lit) assert_false(same_as_parse(lit, sizeof(lit) - 1))
#define O            "{\"text\":\""

static void test_output_shape(void **state)
{
    (void)state;
    TAKES(O "Hi\"}");
    TAKES(O "\"}");
    /* escapes in the text, as they came */
    TAKES(O "a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\"}");
    TAKES(O "\\u00e9\\uD83D\\ude00\"}");
    TAKES(O "caf\xc3\xa9 \xe2\x80\x94\"}");
    TAKES(O "ends in a backslash \\\\\"}");
    /* escapes and bytes the parse refuses too */
    REFUSES(O "a\\x\"}");
    REFUSES(O "a\\u12\"}");
    REFUSES(O "a\\u12G4\"}");
    REFUSES(O "a\\'\"}");
    REFUSES(O "a\\\"}");
    REFUSES(O "a\\\\\\\"}");
    REFUSES(O "a\x01\"}");
    REFUSES(O "a\tb\"}");
    REFUSES(O "a\nb\"}");
    REFUSES(O "a\"b\"}");
    REFUSES(O "a\"\"}");
    /* extra, duplicate, reordered members (the parse reads them: not here) */
    REFUSES(O "x\",\"p\":\"q\"}");
    REFUSES(O "x\",\"text\":\"y\"}");
    REFUSES("{\"p\":\"q\",\"text\":\"x\"}");
    REFUSES(O "x\",\"p\":{}}");
    /* renamed, escaped names */
    REFUSES("{\"te\\u0078t\":\"x\"}");
    REFUSES("{\"Text\":\"x\"}");
    REFUSES("{\"texts\":\"x\"}");
    REFUSES("{\"tex\":\"x\"}");
    /* white space */
    REFUSES(" {\"text\":\"x\"}");
    REFUSES(O "x\"} ");
    REFUSES(O "x\"}\n");
    REFUSES("{ \"text\":\"x\"}");
    REFUSES("{\"text\" :\"x\"}");
    REFUSES("{\"text\": \"x\"}");
    REFUSES(O "x\" }");
    /* not a string, nested, not one object */
    REFUSES("{\"text\":null}");
    REFUSES("{\"text\":1}");
    REFUSES("{\"text\":[\"x\"]}");
    REFUSES("{\"text\":{\"text\":\"x\"}}");
    REFUSES(O "x\"}}");
    REFUSES(O "x\"}{}");
    REFUSES("[" O "x\"}]");
    REFUSES(O "x\"]");
    REFUSES(O "x\"");
    REFUSES(O "x}");
    REFUSES("{\"text\":\"}");
    REFUSES("{\"text\":\"\"");
    /* a NUL byte, which stops jsmn */
    static const char nul_text[] = O "a\0b\"}";
    static const char nul_end[] = O "ab\"}\0";
    assert_false(same_as_parse(nul_text, sizeof(nul_text) - 1));
    assert_false(same_as_parse(nul_end, sizeof(nul_end) - 1));
    /* every cut of a whole one */
    static const char whole[] = O "a\\u00e9\\n\\\"b c\"}";
    steady_refuses_every_cut(whole, sizeof(whole) - 1, same_as_parse);
    TAKES(whole);
}

/* Random edits of output payloads (bytes that matter to JSON put in, taken
 * out, changed): the steady path takes no payload that the parse refuses or
 * reads otherwise, and takes the unedited ones. */
static void test_output_mutations(void **state)
{
    (void)state;
    static const unsigned text_lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 48, 60};
    enum { NT = sizeof(text_lens) / sizeof(text_lens[0]) };
    static const char alphabet[] = "{}[]:,\"\\ \t\n0123456789-.eEtxu\x01\x7f\xc3\xa9";
    char seeds[NT + 2][128];
    size_t nseeds = 0;
    snprintf(seeds[nseeds++], sizeof(seeds[0]), O "\\\"q\\\" \\u00e9\\\\n\"}");
    snprintf(seeds[nseeds++], sizeof(seeds[0]), O "caf\xc3\xa9\"}");
    for (size_t t = 0; t < NT; t++) {
        char text[64];
        for (unsigned i = 0; i < text_lens[t]; i++) /* an escape in every other text */
            text[i] = t % 2 == 0 && i + 2 == text_lens[t] ? '\\' : (char)('a' + i % 26);
        if (t % 2 == 0 && text_lens[t] >= 2)
            text[text_lens[t] - 1] = 'n';
        snprintf(seeds[nseeds++], sizeof(seeds[0]), O "%.*s\"}", (int)text_lens[t], text);
    }
    for (size_t k = 0; k < nseeds; k++)
        assert_true(same_as_parse(seeds[k], strlen(seeds[k])));
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    unsigned taken = 0;
    for (unsigned round = 0; round < 200000; round++) {
        size_t n;
        char *p = steady_edited(seeds[round % nseeds], sizeof(seeds[0]), alphabet, &rng, &n);
        taken += same_as_parse(p, n);
        free(p);
    }
    assert_true(taken > 0);
}

/* Through the view: outputs the steady path takes and their near misses,
 * which the parse reads, give the same content; a near miss that is no JSON
 * object counts as malformed, as before. */
static void test_output_stream(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0};
    evs_event(&in, "output", O "One \"}");
    evs_event(&in, "output", "{\"text\": \"two \"}");
    evs_event(&in, "output", "{\"p\":\"q\",\"text\":\"three \"}");
    evs_event(&in, "output", "{\"text\":\"four \",\"text\":\"no\"}");
    evs_event(&in, "output", "{\"te\\u0078t\":\"five \"}");
    evs_event(&in, "output", O "bad\\x\"}");
    evs_event(&in, "output", O "\"}");
    evs_event(&in, "output", "{\"text\":null}");
    evs_event(&in, "output", O "\\u00e9\\\"six\\\"\"}");
    cg_xform_stats_t st;
    run("off", REQUEST, &in, &out, &st);
    view_t v;
    client_view(&v, &out, false);
    assert_string_equal(v.content[0].p, "One two three four \xc3\xa9\"six\"");
    assert_int_equal(st.malformed, 1);
    assert_int_equal(st.events_in, 9);
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
}

/* Sources past the first size of the keys' buffer (2 KiB): 60 of them with
 * keys of about 100 bytes, each cited again after all were new, keep their
 * numbers. */
static void test_many_sources(void **state)
{
    (void)state;
    cg_buf_t in = {0}, out = {0}, want = {0}, ev = {0};
    evs_event(&in, "output", O "Many.\"}");
    cg_buf_puts(&want, "Many.");
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned k = 1; k <= 60; k++) {
            ev.len = 0;
            cg_buf_printf(&ev,
                          "{\"retrievedReferences\":[{\"content\":{\"text\":\"t\"},\"location\":"
                          "{\"s3Location\":{\"uri\":\"s3://bucket/a/rather/long/prefix/of/"
                          "folders/to/make/the/key/about/a/hundred/bytes/doc-%03u.pdf\"}}}]}",
                          k);
            cg_buf_putc(&ev, '\0');
            evs_event(&in, "citation", ev.p);
            cg_buf_printf(&want, "[%u]", k);
        }
    }
    cg_buf_putc(&want, '\0');
    run("off", REQUEST, &in, &out, NULL);
    view_t v;
    client_view(&v, &out, false);
    assert_string_equal(v.content[0].p, want.p);
    view_free(&v);
    cg_buf_free(&in);
    cg_buf_free(&out);
    cg_buf_free(&want);
    cg_buf_free(&ev);
}

/* --- citation events read from their nested copy ---------------------------------- */

/* X of a citation event as Knowledge Bases sends it: {"citation":{X},X}
 * or {X,"citation":{X}}. Long enough (over 1 KiB twice) that the whole
 * and its variants are scanned for depth alike. */
#define X_MEMBERS                                                                                  \
    PART("Charge it.", "9") ",\"retrievedReferences\":[" MANUAL "," FAQ "," WIKI "," MANUAL "]"

/* Whether payload p takes the nested path, and then on its nested {X}
 * exactly: 1 when it comes first, 2 when last. */
static int nested_takes(const char *p)
{
    cg_span_t half;
    size_t n = strlen(p), x = (n - 16) / 2;
    int at = cg__bedrock_kb_nested(p, n, &half);
    if (at == 0)
        return 0;
    assert_ptr_equal(half.p, at == 1 ? p + 12 : p + 1 + x + 12);
    assert_int_equal(half.n, x + 2);
    assert_memory_equal(half.p + 1, p + (at == 1 ? n - 1 - x : 1), x);
    return at;
}

static void test_nested_shape(void **state)
{
    (void)state;
    assert_int_equal(nested_takes("{\"citation\":{" X_MEMBERS "}," X_MEMBERS "}"), 1);
    assert_int_equal(nested_takes("{" X_MEMBERS ",\"citation\":{" X_MEMBERS "}}"), 2);
    assert_int_equal(nested_takes("{\"citation\":{\"a\":1},\"a\":1}"), 1);
    assert_int_equal(nested_takes("{\"a\":1,\"citation\":{\"a\":1}}"), 2);
    assert_int_equal(nested_takes("{\"b\":2,\"citation\":{\"b\":2}}"), 2);
    /* the copies differ, are empty, stand apart, or the frame is off */
    static const char *const refused[] = {
        "{\"citation\":{\"a\":1},\"a\":2}", "{\"a\":2,\"citation\":{\"a\":1}}",
        "{\"citation\":{},}",              "{,\"citation\":{}}",
        "{\"citation\":{\"a\":1}, \"a\":1}", "{\"a\":1, \"citation\":{\"a\":1}}",
        "{\"citation\":{\"a\":1},\"a\":1 }", "{\"a\":1,\"citation\":{\"a\":1} }",
        "{\"citation\": {\"a\":1},\"a\":1}", "{\"a\":1,\"citation\": {\"a\":1}}",
        "{\"citation\":{\"a\":1}]\"a\":1}",  "{\"a\":1]\"citation\":{\"a\":1}}",
        "{\"Citation\":{\"a\":1},\"a\":1}",  "{\"a\":1,\"Citation\":{\"a\":1}}",
        "{\"citation\":{\"a\":1},\"a\":1]",  "[\"a\":1,\"citation\":{\"a\":1}}",
        "{\"a\":1,\"citation\":{\"a\":1}]}", "{\"citation\":{\"a\":1},\"a\":1",
        "{\"citation\":{",                  "",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        assert_int_equal(nested_takes(refused[i]), 0);
    /* {X} nested 64 deep would make the whole 65 deep */
    cg_buf_t b = {0}, x = {0};
    for (unsigned d = 62; d <= 63; d++) {
        x.len = b.len = 0;
        cg_buf_puts(&x, "\"a\":");
        for (unsigned i = 0; i < d; i++)
            cg_buf_putc(&x, '[');
        for (unsigned i = 0; i < d; i++)
            cg_buf_putc(&x, ']');
        cg_buf_printf(&b, "{\"citation\":{%.*s},%.*s}", (int)x.len, x.p, (int)x.len, x.p);
        cg_buf_putc(&b, '\0');
        assert_int_equal(nested_takes(b.p), d == 62 ? 1 : 0);
    }
    cg_buf_free(&b);
    cg_buf_free(&x);
}

/* The client's stream (chunks and the malformed count) for one output and
 * one citation event of payload p[0..n), in openwebui (sources too). */
static void one_citation(const char *p, size_t n, cg_buf_t *out, uint64_t *malformed)
{
    cg_buf_t in = {0}, ev = {0};
    evs_event(&in, "output", O "Charge it.\"}");
    cg_buf_put(&ev, p, n);
    cg_buf_putc(&ev, '\0');
    evs_event(&in, "citation", ev.p);
    cg_xform_stats_t st;
    out->len = 0;
    run("openwebui", REQUEST, &in, out, &st);
    *malformed = st.malformed;
    cg_buf_free(&in);
    cg_buf_free(&ev);
}

/* Payload {"citation":{X},X} or {X,"citation":{X}} read from its nested
 * copy gives what the same with a space after the comma (never the nested
 * path, read whole) gives: the same chunks, the same malformed count. X is
 * edited at random in both copies alike (so the path is tried on bad X
 * too, among them X with a member named citation), or in one only. */
#define CARD3 "\"name\":\"[3] X100 wiki\""
static void test_nested_mutations(void **state)
{
    (void)state;
    static const char alphabet[] = "{}[]:,\"\\ 0123456789-.etxu\x01\xc3\xa9";
    /* a real one; X's own `citation` member, which the top level's
     * citation_of may pick instead of the copy; and beside references */
    static const char *const seeds[] = {
        X_MEMBERS,
        "\"citation\":{\"retrievedReferences\":[" FAQ "]},\"note\":1",
        "\"citation\":{\"retrievedReferences\":[" FAQ "]},\"retrievedReferences\":[" WIKI "]",
    };
    cg_buf_t a = {0}, b = {0}, out_a = {0}, out_b = {0};
    char x[sizeof(X_MEMBERS) + 8], y[sizeof(X_MEMBERS) + 8];
    uint64_t rng = 0xD1B54A32D192ED03ull, mal_a, mal_b;
    unsigned took = 0, rounds = 6000;
    for (unsigned round = 0; round < rounds; round++) {
        const char *seed = seeds[round < 2 ? 0 : round % 3];
        size_t n = strlen(seed);
        memcpy(x, seed, n);
        for (unsigned e = round < 2 ? 0 : (unsigned)(steady_rng(&rng) % 3); e > 0; e--) {
            size_t at = (size_t)(steady_rng(&rng) % n);
            x[at] = alphabet[steady_rng(&rng) % (sizeof(alphabet) - 1)];
        }
        memcpy(y, x, n);
        if (round % 5 == 4) /* one copy differs */
            y[steady_rng(&rng) % n] ^= 1;
        a.len = b.len = 0;
        if (round % 2) {
            cg_buf_printf(&a, "{\"citation\":{%.*s},%.*s}", (int)n, x, (int)n, y);
            cg_buf_printf(&b, "{\"citation\":{%.*s}, %.*s}", (int)n, x, (int)n, y);
        } else {
            cg_buf_printf(&a, "{%.*s,\"citation\":{%.*s}}", (int)n, y, (int)n, x);
            cg_buf_printf(&b, "{%.*s, \"citation\":{%.*s}}", (int)n, y, (int)n, x);
        }
        cg_span_t half;
        took += cg__bedrock_kb_nested(a.p, a.len, &half) != 0;
        one_citation(a.p, a.len, &out_a, &mal_a);
        one_citation(b.p, b.len, &out_b, &mal_b);
        assert_int_equal(mal_a, mal_b);
        assert_int_equal(out_a.len, out_b.len);
        assert_memory_equal(out_a.p, out_b.p, out_a.len);
        if (round < 2) /* the unedited ones cite their three sources, as cards */
            assert_non_null(memmem(out_a.p, out_a.len, CARD3, sizeof(CARD3) - 1));
    }
    assert_true(took > rounds / 2);
    cg_buf_free(&a);
    cg_buf_free(&b);
    cg_buf_free(&out_a);
    cg_buf_free(&out_b);
}

/* --- bodies ------------------------------------------------------------------------- */

/* span.end is inclusive: the references go after that character. */
static void test_body_inclusive_end(void **state)
{
    (void)state;
    body_content("{\"sessionId\":\"s1\",\"output\":{\"text\":\"Charge it. Use the cable.\"},"
                 "\"citations\":[" CITATION("Charge it.", "9", MANUAL "," FAQ) "," CITATION(
                     "Use the cable.", "24", FAQ "," WIKI) "]}",
                 "Charge it.[1][2] Use the cable.[2][3]");
    /* several at one point, in their order; one at 0 goes after the first
     * character */
    body_content(
        "{\"output\":{\"text\":\"AB\"},\"citations\":[" CITATION("B", "1", WIKI) "," CITATION(
            "B", "1", FAQ) "," CITATION("A", "0", MANUAL) "]}",
        "A[3]B[1][2]");
}

/* A Chinese answer: 14 characters, 42 bytes; ends count characters. */
static void test_body_code_points(void **state)
{
    (void)state;
    body_content("{\"output\":{\"text\":\"\xe5\x85\x85\xe7\x94\xb5\xe7\xba\xa6\xe4\xb8\xa4\xe5\xb0"
                 "\x8f\xe6\x97\xb6\xe3\x80\x82\xe7\x94\xa8\\u539f\xe8\xa3\x85\xe5\x85\x85\xe7\x94"
                 "\xb5\xe5\x99\xa8\xe3\x80\x82\"},\"citations\":[" CITATION(
                     "x", "6", MANUAL) "," CITATION("y", "13", FAQ) "]}",
                 "\xe5\x85\x85\xe7\x94\xb5\xe7\xba\xa6\xe4\xb8\xa4\xe5\xb0\x8f\xe6\x97\xb6\xe3\x80"
                 "\x82[1]\xe7\x94\xa8\xe5\x8e\x9f\xe8\xa3\x85\xe5\x85\x85\xe7\x94\xb5\xe5\x99\xa8"
                 "\xe3\x80\x82[2]");
    /* an emoji (a surrogate pair in JSON) is one character */
    body_content(
        "{\"output\":{\"text\":\"\\ud83d\\ude00 ok\"},\"citations\":[" CITATION("x", "0", FAQ) "]}",
        "\xf0\x9f\x98\x80[1] ok");
}

/* Past the text, negative, fractional, a string, absent: at the end, the
 * text untouched; a citation with no keyed source inserts nothing. */
static void test_body_bad_offsets(void **state)
{
    (void)state;
    body_content(
        "{\"output\":{\"text\":\"Short.\"},\"citations\":[" CITATION("a", "100", MANUAL) "," CITATION(
            "b", "6",
            FAQ) "," CITATION("c", "-1",
                              WIKI) "," CITATION("d", "2.5",
                                                 MANUAL) "," CITATION("e", "\"2\"",
                                                                      FAQ) ",{"
                                                                           "\"retrievedReferen"
                                                                           "ces\":[" WIKI
                                                                           "]}," CITATION(
                                                                               "f", "1",
                                                                               "{\"location\":"
                                                                               "{}}") ",17,"
                                                                                      "\"x\",{"
                                                                                      "\"retri"
                                                                                      "evedRef"
                                                                                      "erences"
                                                                                      "\":7}]"
                                                                                      "}",
        "Short.[1][2][3][1][2][3]");
    body_content("{\"output\":{\"text\":\"\"},\"citations\":[" CITATION("a", "0", MANUAL) "]}",
                 "[1]");
    body_content("{\"output\":{\"text\":\"No citations.\"}}", "No citations.");
}

/* A source cited twice is one source, referenced at both places; the
 * body's guardrail. */
static void test_body_sources(void **state)
{
    (void)state;
    cg_buf_t out = {0};
    assert_int_equal(run_body("openwebui",
                              "{\"output\":{\"text\":\"One. Two.\"},\"citations\":[" CITATION(
                                  "One.", "3", FAQ) "," CITATION("Two.", "8", FAQ) "]}",
                              &out),
                     0);
    view_t v;
    client_view(&v, &out, true);
    assert_string_equal(v.content[0].p, "One.[[1]](https://docs.example.com/faq) "
                                        "Two.[[1]](https://docs.example.com/faq)");
    assert_non_null(strstr(v.sources.p, "\"name\":\"[1] FAQ\""));
    assert_null(strstr(v.sources.p, "\"id\":\"2\""));
    view_free(&v);
    assert_non_null(strstr(out.p, "\"finish_reason\":\"stop\""));
    assert_int_equal(
        run_body("off", "{\"output\":{\"text\":\"x\"},\"guardrailAction\":\"INTERVENED\"}", &out),
        0);
    assert_non_null(strstr(out.p, "\"finish_reason\":\"content_filter\""));
    /* not a RetrieveAndGenerate answer: refused, copied unchanged */
    assert_int_equal(run_body("openwebui", "{\"message\":\"x\"}", &out), -1);
    assert_string_equal(out.p, "{\"message\":\"x\"}");
    cg_buf_free(&out);
}

/* Every cut of a stream, and random patterns, in every profile: the same
 * client bytes. */
static void test_every_split(void **state)
{
    (void)state;
    static const char *const profiles[] = {"openwebui", "openai",     "webchat",
                                           "markdown",  "structured", "off"};
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    cg_buf_t in = {0};
    evs_event(&in, "output", "{\"text\":\"\xe5\x85\x85\xe7\x94\xb5 \\u00e9 [1] \"}");
    grounded(&in, "INTERVENED");
    evs_event(&in, "citation", "{\"citation\":" CITATION("x", "1", WIKI) "}");
    evs_exception(&in, "throttlingException", "{\"message\":\"late\"}");
    dialect_every_split("bedrock-kb", REQUEST, in.p, in.len, profiles,
                        sizeof(profiles) / sizeof(profiles[0]), 100, &rng);
    cg_buf_free(&in);
}

/* --- the request ------------------------------------------------------------------- */

typedef struct fields {
    const char *name, *value; /* a field the reader has */
    cg_buf_t added;           /* name: value lines added */
} fields_t;

static cg_span_t get_field(void *ctx, const char *name)
{
    fields_t *f = ctx;
    if (f->name && strcmp(f->name, name) == 0)
        return cg_span(f->value, strlen(f->value));
    return cg_span(NULL, 0);
}

static void add_field(void *ctx, cg_span_t name, cg_span_t value)
{
    fields_t *f = ctx;
    cg_buf_put(&f->added, name.p, name.n);
    cg_buf_puts(&f->added, ": ");
    cg_buf_put(&f->added, value.p, value.n);
    cg_buf_putc(&f->added, '\n');
}

static int translate(const char *body, const char *session, const char *kb, cg_buf_t *path,
                     cg_buf_t *out, cg_dialect_err_t *err)
{
    fields_t f = {session ? "x-bedrock-session-id" : NULL, session, {0}};
    cg_dialect_hdrs_t client = {get_field, add_field, &f};
    cg_dialect_in_t in = {.kb_config = kb, .client = &client};
    return dialect_translate("bedrock-kb", body, in, path, out, err);
}

#define KB                                                                                         \
    "{\"type\":\"KNOWLEDGE_BASE\",\"knowledgeBaseConfiguration\":{\"knowledgeBaseId\":\"KB1\"}}"

static void test_request(void **state)
{
    (void)state;
    cg_buf_t path = {0}, out = {0};
    cg_dialect_err_t e;
    assert_int_equal(
        translate(
            "{\"model\":\"m\",\"stream\":true,\"max_tokens\":9,\"temperature\":0.5,\"stop\":"
            "\"x\",\"user\":\"u\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
            "{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":"
            "\"ok\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"How \\\"do\\\" "
            "\"},{\"type\":\"text\",\"text\":\"I charge \\u00e9?\"}]},{\"role\":\"assistant\","
            "\"content\":\"later\"}]}",
            "sess-1\"x", KB, &path, &out, &e),
        0);
    assert_string_equal(path.p, "/retrieveAndGenerateStream");
    assert_string_equal(out.p, "{\"input\":{\"text\":\"How \\\"do\\\" I charge \xc3\xa9?\"},"
                               "\"retrieveAndGenerateConfiguration\":" KB ","
                               "\"sessionId\":\"sess-1\\\"x\"}");
    /* not streamed, no session, an empty session */
    assert_int_equal(translate("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", NULL, KB,
                               &path, &out, &e),
                     0);
    assert_string_equal(path.p, "/retrieveAndGenerate");
    assert_string_equal(out.p,
                        "{\"input\":{\"text\":\"q\"},\"retrieveAndGenerateConfiguration\":" KB "}");
    assert_int_equal(translate("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", "", KB,
                               &path, &out, &e),
                     0);
    assert_null(strstr(out.p, "sessionId"));
    /* no user message; what every translating dialect refuses */
    assert_int_equal(translate("{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\"}]}", NULL,
                               KB, &path, &out, &e),
                     -1);
    assert_string_equal(e.code, "missing_required_parameter");
    assert_string_equal(e.param, "messages");
    /* a last user message without text: Knowledge Bases refuse an empty
     * input, so the client is told, whatever an earlier message held */
    static const char *const no_text[] = {
        "null", "\"\"", "[]",
        "[{\"type\":\"text\",\"text\":\"\"},{\"type\":\"text\",\"text\":\"\"}]"};
    for (size_t i = 0; i < sizeof(no_text) / sizeof(no_text[0]); i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"first\"},{\"role\":"
                 "\"user\",\"content\":%s},{\"role\":\"assistant\",\"content\":\"a\"}]}",
                 no_text[i]);
        assert_int_equal(translate(body, "s", KB, &path, &out, &e), -1);
        assert_string_equal(e.code, "missing_required_parameter");
        assert_string_equal(e.param, "messages");
        assert_string_equal(e.message,
                            "the last user message of messages has no text: it is the question");
    }
    assert_int_equal(
        translate("{\"tools\":[{}],\"messages\":[{\"role\":\"user\",\"content\":\"h\"}]}", NULL, KB,
                  &path, &out, &e),
        -1);
    assert_string_equal(e.code, "unsupported_parameter");
    assert_int_equal(translate("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
                               "\"file\":{\"file_data\":\"data:application/pdf;base64,QQ==\","
                               "\"filename\":\"a.pdf\"}}]}]}",
                               NULL, KB, &path, &out, &e),
                     -1);
    cg_buf_free(&path);
    cg_buf_free(&out);
}

/* The session goes upstream in the body, not as a field; keys are AWS's;
 * the answer's session comes back as X-Bedrock-Session-Id. */
static void test_header_fields(void **state)
{
    (void)state;
    const cg_dialect_t *d = dialect_named("bedrock-kb");
    assert_false(cg_dialect_forwards_header(d, CG_SPAN_LIT("X-Bedrock-Session-Id")));
    assert_false(cg_dialect_forwards_header(d, CG_SPAN_LIT("api-key")));
    assert_true(cg_dialect_forwards_header(d, CG_SPAN_LIT("x-custom")));
    assert_string_equal(cg_dialect_aws_service(d), "bedrock");
    assert_true(cg_dialect_aws_keys_required(d));
    assert_true(cg_dialect_kb_config_required(d));
    assert_false(cg_dialect_aws_keys_required(dialect_named("bedrock")));
    assert_false(cg_dialect_kb_config_required(dialect_named("bedrock")));
    assert_non_null(strstr(cg_dialect_list(), ", bedrock, bedrock-kb"));
    fields_t f = {"x-amzn-bedrock-knowledge-base-session-id", "abc-123", {0}};
    cg_dialect_hdrs_t h = {get_field, add_field, &f};
    cg_dialect_add_answer_headers(d, &h);
    cg_buf_putc(&f.added, '\0');
    assert_string_equal(f.added.p, "X-Bedrock-Session-Id: abc-123\n");
    f.name = NULL;
    f.added.len = 0;
    cg_dialect_add_answer_headers(d, &h);
    cg_dialect_add_answer_headers(dialect_named("bedrock"), &h);
    assert_int_equal(f.added.len, 0);
    cg_buf_free(&f.added);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_chunks),
        cmocka_unit_test(test_sources_in_openwebui),
        cmocka_unit_test(test_every_location),
        cmocka_unit_test(test_guardrail),
        cmocka_unit_test(test_exception_and_error),
        cmocka_unit_test(test_cut_short),
        cmocka_unit_test(test_nested_citation),
        cmocka_unit_test(test_body_inclusive_end),
        cmocka_unit_test(test_body_code_points),
        cmocka_unit_test(test_body_bad_offsets),
        cmocka_unit_test(test_body_sources),
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_header_fields),
        cmocka_unit_test(test_output_shape),
        cmocka_unit_test(test_output_mutations),
        cmocka_unit_test(test_output_stream),
        cmocka_unit_test(test_many_sources),
        cmocka_unit_test(test_nested_shape),
        cmocka_unit_test(test_nested_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
