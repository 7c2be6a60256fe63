/*
 * libFuzzer target for the responses answer view (src/dialects/responses.c)
 * through the transformer.
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream body: a
 * Responses event stream, or a Response object for the body path. Byte 1:
 *   bits 0-2: profile: openwebui, openai, webchat, structured, off, then
 *             openwebui, openai, webchat again
 *   bit 3:    the client asked for include_usage
 *   bit 4:    max_event 512 instead of 4 MiB (events the view never sees)
 * Every input also runs through profile off.
 *
 * Checks, for any input:
 *   - the stream in reads cut by the header's seed and in one read: the
 *     same client bytes (the view reads whole events);
 *   - every event the client gets is [DONE] or a valid JSON object, and the
 *     stream ends with [DONE] or an error event, with nothing after it;
 *   - profile off, no byte of the input that could spell a 【 (raw or
 *     \u3010): the client's content is, byte for byte, every
 *     output_text.delta's string up to the event that ends the response,
 *     read by a splitter and the JSON view here, not by the view's own
 *     scanner;
 *   - the body path: refused bodies go out unchanged, taken ones are one
 *     valid JSON object; without a possible 【, profile off's message
 *     content is the output_text parts of the message items, in order.
 * Every read is an exact-size heap copy, freed right after its output is
 * copied.
 */
#include "citegate/dialect.h"
#include "citegate/xform.h"

#include "../support/dialects.h"
#include "../support/profiles.h"
#include "fuzz_run.h"
#include "fuzz_jsonv.h"

static const char *const profile_names[8] = {"openwebui", "openai", "webchat", "structured",
                                             "off",       "openwebui", "openai", "webchat"};

typedef struct opts {
    cg_xform_cfg_t cfg;
    cg_dialect_req_t dreq;
} opts_t;

static void pick(opts_t *o, uint8_t flags, const char *profile)
{
    memset(o, 0, sizeof(*o));
    cg_xform_cfg_default(&o->cfg, profile_named(profile ? profile : profile_names[flags & 7]));
    o->dreq.include_usage = (flags & 8) != 0;
    if (flags & 0x10)
        o->cfg.max_event = 512;
}

static cg_xform_t *new_view(const opts_t *o)
{
    cg_xform_t *x = cg_xform_new(&o->cfg, NULL);
    cg_xform_set_dialect(x, cg_dialect_view(dialect_named("responses")), &o->dreq, 1700000000);
    return x;
}

/* The stream in reads cut by sp (NULL: one read), ended at EOF. */
static void run_stream(fz_result_t *r, const opts_t *o, const uint8_t *in, size_t len,
                       fz_split_t *sp)
{
    fz_stream(r, new_view(o), in, len, sp);
}

/* --- Reading SSE and JSON here ------------------------------------------------ */

/* Calls fn with the data of every complete event of s[0..n) that has any
 * (data lines joined by LF): a plain line splitter, not src/core/sse.c. */
static void each_data(const char *s, size_t n, void (*fn)(const char *d, size_t dn, void *arg),
                      void *arg)
{
    cg_buf_t data = {0};
    bool have = false;
    size_t i = n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < n) {
        size_t e = i;
        while (e < n && !fz_is_eol(s[e]))
            e++;
        if (e == n)
            break;
        size_t next = e + fz_eol_len(s, n, e);
        if (e == i) {
            if (have)
                fn(data.p, data.len, arg);
            data.len = 0;
            have = false;
        } else if (e - i >= 4 && memcmp(s + i, "data", 4) == 0 && (e - i == 4 || s[i + 4] == ':')) {
            size_t v = i + (e - i == 4 ? 4 : 5);
            v += v < e && s[v] == ' ';
            if (have)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, s + v, e - v);
            have = true;
        }
        i = next;
    }
    cg_buf_free(&data);
}

static bool str_eq(const cg_json_t *j, int tok, const char *lit)
{
    return cg_json_is_str(j, tok) && cg_span_eq(cg_json_raw(j, tok), lit);
}

/* --- The client's stream ---------------------------------------------------- */

typedef struct client {
    cg_buf_t content; /* raw JSON string bytes of every delta.content */
    size_t events;
    size_t after_end; /* events after [DONE] or the error event */
    bool done_last, error_last;
} client_t;

static void client_event(const char *d, size_t n, void *arg)
{
    client_t *c = arg;
    c->events++;
    if (c->done_last || c->error_last)
        c->after_end++;
    if (n == 6 && memcmp(d, "[DONE]", 6) == 0) {
        c->done_last = true;
        return;
    }
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    FZ_CHECK(cg_json_parse(&j, d, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT);
    FZ_CHECK(fz_json_invalid(&j) == NULL);
    c->error_last = cg_json_get(&j, 0, "error") >= 0;
    int choices = cg_json_get(&j, 0, "choices");
    int nc = cg_json_type(&j, choices) == JSMN_ARRAY ? j.tok[choices].size : 0;
    for (int k = 0, ch = choices + 1; k < nc; k++, ch = cg_json_skip(&j, ch)) {
        int content = cg_json_get(&j, cg_json_get(&j, ch, "delta"), "content");
        if (cg_json_is_str(&j, content)) {
            cg_span_t raw = cg_json_raw(&j, content);
            cg_buf_put(&c->content, raw.p, raw.n);
        }
    }
    cg_json_free(&j);
}

/* --- What the upstream said -------------------------------------------------- */

typedef struct upstream {
    cg_buf_t text; /* raw bytes of every output_text.delta until the response ended */
    bool ended;
} upstream_t;

static void upstream_event(const char *d, size_t n, void *arg)
{
    upstream_t *u = arg;
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    if (!u->ended && cg_json_parse(&j, d, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT) {
        int type = cg_json_get(&j, 0, "type"), delta = cg_json_get(&j, 0, "delta");
        if (str_eq(&j, type, "response.output_text.delta") && cg_json_is_str(&j, delta)) {
            cg_span_t raw = cg_json_raw(&j, delta);
            cg_buf_put(&u->text, raw.p, raw.n);
        }
        u->ended = str_eq(&j, type, "response.completed") ||
                   str_eq(&j, type, "response.incomplete") ||
                   str_eq(&j, type, "response.failed") || str_eq(&j, type, "error");
    }
    cg_json_free(&j);
}

/* Could any byte of the input spell a 【 once decoded? */
static bool may_mark(const uint8_t *in, size_t len)
{
    return memchr(in, 0xE3, len) || memmem(in, len, "\\u3010", 6);
}

static bool same(const cg_buf_t *a, const cg_buf_t *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

static void check_stream(const opts_t *o, const uint8_t *in, size_t len, uint8_t seed)
{
    fz_split_t sp;
    fz_split_init(&sp, seed);
    fz_result_t rs, rw;
    run_stream(&rs, o, in, len, &sp);
    run_stream(&rw, o, in, len, NULL);
    cg_buf_t split = rs.out, whole = rw.out;
    FZ_CHECK(same(&split, &whole));
    client_t c = {0};
    each_data(whole.p, whole.len, client_event, &c);
    FZ_CHECK(c.events > 0 && c.after_end == 0 && (c.done_last || c.error_last));
    bool off = strcmp(o->cfg.profile->name, "off") == 0;
    if (off && o->cfg.max_event > len && !may_mark(in, len)) {
        upstream_t u = {0};
        each_data((const char *)in, len, upstream_event, &u);
        FZ_CHECK(same(&c.content, &u.text));
        cg_buf_free(&u.text);
    }
    cg_buf_free(&c.content);
    cg_buf_free(&split);
    cg_buf_free(&whole);
}

/* --- Bodies --------------------------------------------------------------------- */

/* The raw text of every output_text part of the message items. */
static void body_text(const cg_json_t *j, cg_buf_t *b)
{
    int output = cg_json_get(j, 0, "output");
    int n = cg_json_type(j, output) == JSMN_ARRAY ? j->tok[output].size : 0;
    for (int i = 0, item = output + 1; i < n; i++, item = cg_json_skip(j, item)) {
        int content = cg_json_get(j, item, "content");
        if (!str_eq(j, cg_json_get(j, item, "type"), "message") ||
            cg_json_type(j, content) != JSMN_ARRAY)
            continue;
        int np = j->tok[content].size;
        for (int k = 0, p = content + 1; k < np; k++, p = cg_json_skip(j, p)) {
            int text = cg_json_get(j, p, "text");
            if (str_eq(j, cg_json_get(j, p, "type"), "output_text") && cg_json_is_str(j, text)) {
                cg_span_t raw = cg_json_raw(j, text);
                cg_buf_put(b, raw.p, raw.n);
            }
        }
    }
}

/* Profile off: the chat completion carries the parts' text as it came. */
static void check_body_text(const uint8_t *in, size_t len, const cg_buf_t *out)
{
    cg_json_t ji, jo;
    cg_json_init(&ji, 1u << 20);
    cg_json_init(&jo, 1u << 20);
    FZ_CHECK(cg_json_parse(&ji, (const char *)in, len) == CG_JSON_OK);
    FZ_CHECK(cg_json_parse(&jo, out->p, out->len) == CG_JSON_OK);
    if (!str_eq(&ji, cg_json_get(&ji, 0, "status"), "failed")) {
        cg_buf_t want = {0};
        body_text(&ji, &want);
        int choices = cg_json_get(&jo, 0, "choices");
        FZ_CHECK(cg_json_type(&jo, choices) == JSMN_ARRAY && jo.tok[choices].size == 1);
        int content = cg_json_get(&jo, cg_json_get(&jo, choices + 1, "message"), "content");
        FZ_CHECK(cg_json_is_str(&jo, content));
        cg_span_t got = cg_json_raw(&jo, content);
        FZ_CHECK(got.n == want.len && (got.n == 0 || memcmp(got.p, want.p, got.n) == 0));
        cg_buf_free(&want);
    }
    cg_json_free(&ji);
    cg_json_free(&jo);
}

static void check_body(const opts_t *o, const uint8_t *in, size_t len)
{
    cg_buf_t b = {0};
    int rc = fz_body(&b, new_view(o), in, len);
    cg_json_t j;
    if (fz_body_object(&b, rc, in, len, &j)) {
        FZ_CHECK(fz_json_invalid(&j) == NULL);
        cg_json_free(&j);
        if (strcmp(o->cfg.profile->name, "off") == 0 && !may_mark(in, len))
            check_body_text(in, len, &b);
    }
    cg_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    const uint8_t *in = data + FZ_HEADER;
    size_t len = size - FZ_HEADER;
    opts_t picked, off;
    pick(&picked, data[1], NULL);
    pick(&off, data[1], "off");
    check_stream(&picked, in, len, data[0]);
    check_stream(&off, in, len, data[0]);
    check_body(&picked, in, len);
    check_body(&off, in, len);
    return 0;
}
