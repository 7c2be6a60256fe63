/*
 * libFuzzer target for the whole stream transformer (include/citegate/xform.h).
 *
 * Input: two header bytes (see fuzz_common.h), then an upstream response
 * body. Byte 1 picks the variant:
 *   bits 0-1: request: 0, 3 = <source> tags, 1 = none, 2 = Azure data_sources
 *   bits 2-3: reference style: 0 = auto (the default), 1 = [docN], 2 = [N],
 *             3 = [citation:N]
 *   bit 4:    max_event 512 instead of 4 MiB (oversized events, rule 6)
 *   bit 5:    max_doc_bytes 16 instead of 8192 (cuts snippets)
 *   bit 6:    no search scores
 *   bit 7:    another profile, picked by bits 5-6 (which then lose their
 *             meaning): openai, webchat, structured, markdown
 * Header byte 1 == 0 is profile openwebui with cg_xform_cfg_default() and the
 * <source> request.
 *
 * Checks, for any input:
 *   - profile off: the output is the input, byte for byte (stream and body);
 *   - every other profile: the body is transformed in reads cut by the header's seed
 *     and in one read; both give the same client content per choice and
 *     the same bytes (read boundaries must be invisible), and some output;
 *     JSON object events stay (valid) JSON objects for the client;
 *   - rule 4: no top-level member whose unescaped name is "event" survives
 *     in an output event, but those of oversized events (forwarded
 *     unchanged) and openwebui's own source events;
 *   - rule 6: each event over max_event (found by a splitter of our own)
 *     goes out unchanged, once, in order, and is counted; the events
 *     around it are still transformed (the checks above);
 *   - cg_xform_body on the same bytes: unchanged copy when it refuses, and
 *     a valid JSON object stays one, without "event" members.
 * Every read is an exact-size heap copy, freed right after its output is
 * copied, so a segment pointing into an earlier read is a use after free.
 */
#include "citegate/xform.h"

#include "../support/profiles.h"
#include "fuzz_run.h"
#include "fuzz_jsonv.h"

#define VIEW_N 8

static const char sources_request[] =
    "{\"model\":\"m\",\"stream\":true,\"messages\":["
    "{\"role\":\"system\",\"content\":\"Answer from the sources, cite as [1]. "
    "<source id=\\\"1\\\" name=\\\"https://a.example/x\\\">t</source>"
    "<source id=\\\"2\\\" name=\\\"report (v2).pdf\\\">second \\\"doc\\\"</source>"
    "<source id=\\\"3\\\">no name</source>\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"what is x?\"}]}]}";

static const char data_sources_request[] =
    "{\"stream\":true,\"data_sources\":[{\"type\":\"azure_search\"}],"
    "\"messages\":[{\"role\":\"user\",\"content\":\"what is x?\"}]}";

static cg_request_t requests[3]; /* sources, none, data_sources */

static void init_requests(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    cg_cite_opts_t o = {8192, true};
    FZ_CHECK(cg_request_parse(&requests[0], sources_request, sizeof(sources_request) - 1, &o) == 0);
    FZ_CHECK(requests[0].sources.n == 3);
    FZ_CHECK(cg_request_parse(&requests[2], data_sources_request,
                              sizeof(data_sources_request) - 1, &o) == 0);
    FZ_CHECK(requests[2].has_data_sources);
}

static const cg_request_t *pick_request(uint8_t flags)
{
    static const int which[4] = {0, -1, 2, 0};
    int w = which[flags & 3];
    return w < 0 ? NULL : &requests[w];
}

static void pick_cfg(cg_xform_cfg_t *cfg, uint8_t flags)
{
    static const cg_ref_style_t styles[4] = {CG_REF_ANY, CG_REF_DOC, CG_REF_NUMERIC,
                                             CG_REF_CITATION};
    cg_xform_cfg_default(cfg, profile_named("openwebui"));
    cfg->style = styles[(flags >> 2) & 3];
    if (flags & 0x10)
        cfg->max_event = 512;
    if (flags & 0x80) {
        static const char *const other[4] = {"openai", "webchat", "structured", "markdown"};
        cfg->profile = profile_named(other[(flags >> 5) & 3]);
        return;
    }
    if (flags & 0x20)
        cfg->max_doc_bytes = 16;
    if (flags & 0x40)
        cfg->scores = false;
}

/* --- Running the transformer ------------------------------------------------ */

typedef fz_result_t result_t;


/* Streams in[0..len) in reads cut by sp (NULL: one read), then ends at EOF. */
static void run_stream(result_t *res, const cg_xform_cfg_t *cfg, const cg_request_t *req,
                       const uint8_t *in, size_t len, fz_split_t *sp)
{
    fz_stream(res, cg_xform_new(cfg, req), in, len, sp);
}

/* Runs the non-streaming path over in[0..len); the output goes to b. */
static int run_body(cg_buf_t *b, const cg_xform_cfg_t *cfg, const cg_request_t *req,
                    const uint8_t *in, size_t len)
{
    return fz_body(b, cg_xform_new(cfg, req), in, len);
}

static bool bytes_eq(const cg_buf_t *b, const uint8_t *p, size_t n)
{
    return b->len == n && (n == 0 || memcmp(b->p, p, n) == 0);
}

/* --- The client's view: content per choice ---------------------------------- */

typedef struct view {
    cg_buf_t content[VIEW_N];
    size_t others;  /* events whose data is neither a JSON object nor [DONE] */
    size_t invalid; /* objects that cg_json_parse accepts but are not valid JSON */
    size_t named;   /* top-level members whose unescaped name is "event" */
} view_t;

/* Is the escaped JSON string s[0..n) "event"? Decoded here, independently of
 * json.c: only \uXXXX escapes can spell one of its letters. */
static bool names_event(const char *s, size_t n)
{
    char name[5];
    size_t o = 0;
    for (size_t i = 0; i < n; o++) {
        if (o == sizeof(name))
            return false;
        if (s[i] != '\\') {
            name[o] = s[i++];
            continue;
        }
        unsigned v = 0;
        for (size_t k = 2; k < 6; k++) {
            int h = i + k < n ? cg_hex_digit(s[i + k]) : -1;
            if (i + 1 >= n || s[i + 1] != 'u' || h < 0)
                return false;
            v = v * 16 + (unsigned)h;
        }
        if (v >= 0x80)
            return false;
        name[o] = (char)v;
        i += 6;
    }
    return o == sizeof(name) && memcmp(name, "event", sizeof(name)) == 0;
}

static size_t count_named(const cg_json_t *j)
{
    size_t named = 0;
    for (int k = 0, key = 1; k < j->tok[0].size; k++, key = cg_json_skip(j, key + 1)) {
        cg_span_t raw = cg_json_raw(j, key);
        named += names_event(raw.p, raw.n);
    }
    return named;
}

static void view_event(view_t *v, const char *data, size_t n)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 16);
    bool object = cg_json_parse(&j, data, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT;
    v->others += !object && !(n == 6 && memcmp(data, "[DONE]", 6) == 0);
    if (object) {
        v->invalid += fz_json_invalid(&j) != NULL;
        v->named += count_named(&j);
        int choices = cg_json_get(&j, 0, "choices");
        int nc = cg_json_type(&j, choices) == JSMN_ARRAY ? j.tok[choices].size : 0;
        for (int k = 0, c = choices + 1; k < nc; k++, c = cg_json_skip(&j, c)) {
            double index = k;
            cg_json_number(&j, cg_json_get(&j, c, "index"), &index);
            int content = cg_json_get(&j, cg_json_get(&j, c, "delta"), "content");
            if (!(index >= 0 && index < VIEW_N) || !cg_json_is_str(&j, content))
                continue;
            size_t len;
            char *s = cg_json_strdup(&j, content, &len);
            cg_buf_put(&v->content[(int)index], s, len);
            free(s);
        }
    }
    cg_json_free(&j);
}

/* A plain line splitter, independent of src/sse.c so that a tokenizer bug
 * cannot hide itself; like a client it skips a BOM at the start and drops
 * an unterminated last event. */
static void view_stream(view_t *v, const char *s, size_t n)
{
    memset(v, 0, sizeof(*v));
    cg_buf_t data = {0};
    size_t ndata = 0, i = 0;
    if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    while (i < n) {
        size_t e = i;
        while (e < n && !fz_is_eol(s[e]))
            e++;
        if (e == n)
            break;
        size_t next = e + fz_eol_len(s, n, e);
        if (e == i && ndata) {
            view_event(v, data.p, data.len);
            data.len = ndata = 0;
        } else if (e - i >= 4 && memcmp(s + i, "data", 4) == 0 && (e - i == 4 || s[i + 4] == ':')) {
            size_t val = i + (e - i == 4 ? 4 : 5);
            val += val < e && s[val] == ' ';
            if (ndata++)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, s + val, e - val);
        }
        i = next;
    }
    cg_buf_free(&data);
}

static void view_free(view_t *v)
{
    for (int i = 0; i < VIEW_N; i++)
        cg_buf_free(&v->content[i]);
}

/* --- Events over max_event, found independently of sse.c ------------------- */

typedef struct bigs {
    size_t (*at)[2]; /* [start, end) stream offsets of each */
    size_t n;
    bool tail; /* the stream ends inside one */
} bigs_t;

/* The events of in[0..len) over cap, their size as sse.h has it: every byte
 * through the blank line, but the LF of a CRLF that ends it. */
static void find_bigs(bigs_t *b, const char *in, size_t len, size_t cap)
{
    memset(b, 0, sizeof(*b));
    for (size_t start = 0, end; start < len; start = end) {
        size_t i = start == 0 && len >= 3 && memcmp(in, "\xEF\xBB\xBF", 3) == 0 ? 3 : start;
        bool done = false;
        end = len;
        while (i < len && !done) {
            size_t e = i;
            while (e < len && !fz_is_eol(in[e]))
                e++;
            if (e == len)
                break;
            done = e == i;
            i = e + fz_eol_len(in, len, e);
            end = done ? i : len;
        }
        bool crlf = done && end - start >= 2 && in[end - 2] == '\r' && in[end - 1] == '\n';
        if (end - start - crlf <= cap)
            continue;
        b->at = realloc(b->at, (b->n + 1) * sizeof(*b->at));
        FZ_CHECK(b->at != NULL);
        b->at[b->n][0] = start;
        b->at[b->n][1] = end;
        b->n++;
        b->tail = !done;
    }
}

/* The input as the client may see it: when it ends inside an oversized
 * event that the transformer ends (it still writes after it), that event
 * is complete. Only the bigs' bytes when only_bigs. */
static void client_input(cg_buf_t *o, const uint8_t *in, size_t len, const bigs_t *b, bool ended,
                         bool only_bigs)
{
    if (only_bigs) {
        for (size_t k = 0; k < b->n; k++)
            cg_buf_put(o, in + b->at[k][0], b->at[k][1] - b->at[k][0]);
    } else {
        cg_buf_put(o, in, len);
    }
    if (b->tail && !ended)
        cg_buf_puts(o, "\n\n");
}

/* Rule 6: each oversized event goes out once, byte for byte, in order. */
static void check_bigs(const result_t *r, const bigs_t *b, const uint8_t *in)
{
    FZ_CHECK(r->stats.oversized == b->n);
    size_t from = 0;
    for (size_t k = 0; k < b->n; k++) {
        size_t n = b->at[k][1] - b->at[k][0];
        const char *at = memmem(r->out.p + from, r->out.len - from, in + b->at[k][0], n);
        FZ_CHECK(at != NULL);
        from = (size_t)(at - r->out.p) + n;
    }
}

/*
 * The client sees the same content per choice in both runs. Events that are
 * not JSON objects pass unchanged and the transformer only adds objects, so
 * their number stays; and when no input event fools cg_json_parse, no
 * output event may (rewriting keeps JSON valid). "event" members: only
 * `named` of them (see check_profile).
 */
static void check_views(const cg_buf_t *in, const result_t *a, const result_t *b, size_t named)
{
    view_t vi, va, vb;
    view_stream(&vi, in->p, in->len);
    view_stream(&va, a->out.p, a->out.len);
    view_stream(&vb, b->out.p, b->out.len);
    for (int i = 0; i < VIEW_N; i++) {
        const cg_buf_t *x = &va.content[i], *y = &vb.content[i];
        FZ_CHECK(x->len == y->len && (x->len == 0 || memcmp(x->p, y->p, x->len) == 0));
    }
    FZ_CHECK(va.others == vi.others && vb.others == vi.others);
    if (vi.invalid == 0)
        FZ_CHECK(va.invalid == 0 && vb.invalid == 0);
    FZ_CHECK(va.named == named && vb.named == named);
    view_free(&vi);
    view_free(&va);
    view_free(&vb);
}

/* --- Checks ------------------------------------------------------------------ */

/* Profile off is a pipe: the output is the input, however it is cut. */
static void check_off(const cg_request_t *req, const uint8_t *in, size_t len, uint8_t seed)
{
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, profile_named("off"));
    fz_split_t sp;
    fz_split_init(&sp, seed);
    result_t r;
    run_stream(&r, &cfg, req, in, len, &sp);
    FZ_CHECK(bytes_eq(&r.out, in, len));
    cg_buf_free(&r.out);

    cg_buf_t b = {0};
    FZ_CHECK(run_body(&b, &cfg, req, in, len) == 0);
    FZ_CHECK(bytes_eq(&b, in, len));
    cg_buf_free(&b);
}

/* "event" members the client may see: those of the oversized events, and
 * openwebui's own source events (one per citation emitted). */
static size_t allowed_named(const cg_xform_cfg_t *cfg, const result_t *r, const uint8_t *in,
                            size_t len, const bigs_t *b)
{
    cg_buf_t only = {0};
    client_input(&only, in, len, b, r->stats.saw_done, true);
    view_t v;
    view_stream(&v, only.p, only.len);
    size_t named = v.named;
    view_free(&v);
    cg_buf_free(&only);
    if (strcmp(cfg->profile->name, "openwebui") == 0)
        named += r->stats.citations_emitted;
    return named;
}

static void check_profile(const cg_xform_cfg_t *cfg, const cg_request_t *req,
                            const uint8_t *in, size_t len, uint8_t seed)
{
    fz_split_t sp;
    fz_split_init(&sp, seed);
    result_t split, whole;
    run_stream(&split, cfg, req, in, len, &sp);
    run_stream(&whole, cfg, req, in, len, NULL);
    /* Something always goes out: the input, [DONE] or the error event. */
    FZ_CHECK(split.out.len > 0 && whole.out.len > 0);
    bigs_t bigs = {0};
    if (!cfg->profile->holds_stream) {
        find_bigs(&bigs, (const char *)in, len, cfg->max_event);
        check_bigs(&split, &bigs, in);
        check_bigs(&whole, &bigs, in);
    } else if (split.stats.passthrough || whole.stats.passthrough) {
        /* A stream longer than the hold cap goes through untouched, whole. */
        FZ_CHECK(split.stats.passthrough && whole.stats.passthrough);
        FZ_CHECK(bytes_eq(&split.out, in, len) && bytes_eq(&whole.out, in, len));
    }
    if (!split.stats.passthrough) {
        cg_buf_t seen = {0};
        client_input(&seen, in, len, &bigs, whole.stats.saw_done, false);
        check_views(&seen, &split, &whole, allowed_named(cfg, &whole, in, len, &bigs));
        FZ_CHECK(split.out.len == whole.out.len &&
                 memcmp(split.out.p, whole.out.p, split.out.len) == 0);
        cg_buf_free(&seen);
    }
    free(bigs.at);
    cg_buf_free(&split.out);
    cg_buf_free(&whole.out);
}

/* 1 if p[0..n) is a valid JSON object, 0 if cg_json_parse takes it as an
 * object though it is not valid JSON, -1 otherwise; *named: its top-level
 * "event" members. */
static int json_object(const char *p, size_t n, size_t *named)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    int r = -1;
    if (cg_json_parse(&j, p, n) == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT) {
        r = fz_json_invalid(&j) == NULL;
        *named = count_named(&j);
    }
    cg_json_free(&j);
    return r;
}

/* The non-streaming path: unchanged when refused; a valid JSON object
 * stays one, and loses its "event" members (rule 4, for bodies too). */
static void check_body(const cg_xform_cfg_t *cfg, const cg_request_t *req, const uint8_t *in,
                       size_t len)
{
    cg_buf_t b = {0};
    int rc = run_body(&b, cfg, req, in, len);
    FZ_CHECK(rc == 0 || rc == -1);
    size_t named = 0;
    if (rc < 0)
        FZ_CHECK(bytes_eq(&b, in, len));
    else if (json_object((const char *)in, len, &named) == 1)
        FZ_CHECK(json_object(b.p, b.len, &named) == 1 && named == 0);
    cg_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    init_requests();
    const uint8_t *in = data + FZ_HEADER;
    size_t len = size - FZ_HEADER;
    const cg_request_t *req = pick_request(data[1]);
    cg_xform_cfg_t cfg;
    pick_cfg(&cfg, data[1]);

    check_off(req, in, len, data[0]);
    check_profile(&cfg, req, in, len, data[0]);
    check_body(&cfg, req, in, len);
    return 0;
}
