/* Test support: client view of a response. See view.h. */
#include "view.h"

#include "citegate/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void view_free(view_t *v)
{
    for (int i = 0; i < VIEW_CHOICES; i++)
        cg_buf_free(&v->content[i]);
    cg_buf_free(&v->sources);
    cg_buf_free(&v->extras);
    memset(v, 0, sizeof(*v));
}

char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        abort();
    }
    cg_buf_t b = {0};
    size_t n;
    while ((n = fread(cg_buf_reserve(&b, 4096), 1, 4096, f)) > 0)
        b.len += n;
    fclose(f);
    cg_buf_putc(&b, '\0');
    *len = b.len - 1;
    return b.p;
}

static void take_raw(cg_buf_t *b, const cg_json_t *j, int tok)
{
    if (tok < 0)
        return;
    size_t s = cg_json_begin(j, tok), e = cg_json_end(j, tok);
    cg_buf_put(b, j->js + s, e - s);
    cg_buf_putc(b, '\n');
}

static void take_chunk(view_t *v, const char *data, size_t n)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    if (cg_json_parse(&j, data, n) != CG_JSON_OK || j.tok[0].type != JSMN_OBJECT) {
        cg_json_free(&j);
        return;
    }
    int ev = cg_json_get(&j, 0, "event");
    int type = cg_json_get(&j, ev, "type");
    if (cg_json_is_str(&j, type) && cg_span_eq(cg_json_raw(&j, type), "source")) {
        int d = cg_json_get(&j, ev, "data");
        cg_buf_putc(&v->sources, v->sources.len == 0 ? '[' : ',');
        size_t b = cg_json_begin(&j, d), e = cg_json_end(&j, d);
        cg_buf_put(&v->sources, data + b, e - b);
    }
    take_raw(&v->extras, &j, cg_json_get(&j, 0, "entities"));
    take_raw(&v->extras, &j, cg_json_get(&j, 0, "citations"));
    int choices = cg_json_get(&j, 0, "choices");
    if (cg_json_type(&j, choices) == JSMN_ARRAY) {
        int nc = j.tok[choices].size;
        for (int k = 0, c = choices + 1; k < nc; k++, c = cg_json_skip(&j, c)) {
            double idx = k;
            cg_json_number(&j, cg_json_get(&j, c, "index"), &idx);
            take_raw(&v->extras, &j, cg_json_get(&j, cg_json_get(&j, c, "delta"), "annotations"));
            int content = cg_json_get(&j, cg_json_get(&j, c, "delta"), "content");
            if (!cg_json_is_str(&j, content) || idx < 0 || idx >= VIEW_CHOICES)
                continue;
            size_t len;
            char *s = cg_json_strdup(&j, content, &len);
            cg_buf_put(&v->content[(int)idx], s, len);
            v->has_content[(int)idx] = true;
            free(s);
        }
    }
    cg_json_free(&j);
}

static void dispatch(view_t *v, cg_buf_t *data, cg_buf_t *last)
{
    v->events++;
    last->len = 0;
    cg_buf_put(last, data->p, data->len);
    if (!(data->len == 6 && memcmp(data->p, "[DONE]", 6) == 0))
        take_chunk(v, data->p, data->len);
}

void view_of_stream(view_t *v, const char *s, size_t n)
{
    memset(v, 0, sizeof(*v));
    cg_buf_t data = {0}, last = {0};
    bool have_data = false;
    size_t i = 0;
    if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\r' && s[e] != '\n')
            e++;
        if (e == n)
            break; /* unterminated last line: never dispatched */
        size_t len = e - i;
        if (len > v->max_line)
            v->max_line = len;
        const char *line = s + i;
        i = e + 1;
        if (s[e] == '\r' && i < n && s[i] == '\n')
            i++;
        if (len == 0) {
            if (have_data)
                dispatch(v, &data, &last);
            data.len = 0;
            have_data = false;
            continue;
        }
        if (line[0] == ':')
            continue;
        const char *colon = memchr(line, ':', len);
        size_t name = colon ? (size_t)(colon - line) : len;
        size_t voff = colon ? name + 1 : len;
        if (voff < len && line[voff] == ' ')
            voff++;
        if (name == 4 && memcmp(line, "data", 4) == 0) {
            if (have_data)
                cg_buf_putc(&data, '\n');
            cg_buf_put(&data, line + voff, len - voff);
            have_data = true;
        }
    }
    cg_buf_putc(&last, '\0');
    v->ends_done = strcmp(last.p, "[DONE]") == 0;
    v->ends_error = strncmp(last.p, "{\"error\"", 8) == 0;
    if (v->sources.len == 0)
        cg_buf_putc(&v->sources, '[');
    cg_buf_putc(&v->sources, ']');
    cg_buf_putc(&v->sources, '\0'); /* usable as a C string, not counted */
    v->sources.len--;
    cg_buf_putc(&v->extras, '\0');
    v->extras.len--;
    cg_buf_free(&data);
    cg_buf_free(&last);
}

int view_of_body(view_t *v, const char *s, size_t n)
{
    memset(v, 0, sizeof(*v));
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    if (cg_json_parse(&j, s, n) != CG_JSON_OK || j.tok[0].type != JSMN_OBJECT) {
        cg_json_free(&j);
        return -1;
    }
    int choices = cg_json_get(&j, 0, "choices");
    int nc = cg_json_type(&j, choices) == JSMN_ARRAY ? j.tok[choices].size : 0;
    for (int k = 0, c = choices + 1; k < nc; k++, c = cg_json_skip(&j, c)) {
        double idx = k;
        cg_json_number(&j, cg_json_get(&j, c, "index"), &idx);
        int content = cg_json_get(&j, cg_json_get(&j, c, "message"), "content");
        if (!cg_json_is_str(&j, content) || idx < 0 || idx >= VIEW_CHOICES)
            continue;
        size_t len;
        char *str = cg_json_strdup(&j, content, &len);
        cg_buf_put(&v->content[(int)idx], str, len);
        v->has_content[(int)idx] = true;
        free(str);
    }
    int sources = cg_json_get(&j, 0, "sources");
    if (sources >= 0) {
        size_t b = cg_json_begin(&j, sources), e = cg_json_end(&j, sources);
        cg_buf_put(&v->sources, s + b, e - b);
    } else {
        cg_buf_puts(&v->sources, "[]");
    }
    cg_buf_putc(&v->sources, '\0');
    v->sources.len--;
    cg_json_free(&j);
    return 0;
}

static bool content_equal(const view_t *v, const cg_json_t *j, int content, char *why, size_t wl)
{
    bool seen[VIEW_CHOICES] = {0};
    int n = j->tok[content].size;
    for (int k = 0, i = content + 1; k < n; k++, i = cg_json_skip(j, cg_json_skip(j, i))) {
        cg_span_t key = cg_json_raw(j, i);
        int idx = atoi(key.p);
        size_t len;
        char *want = cg_json_strdup(j, i + 1, &len);
        bool ok = idx >= 0 && idx < VIEW_CHOICES && v->content[idx].len == len &&
                  memcmp(v->content[idx].p, want, len) == 0;
        if (!ok)
            snprintf(why, wl, "content[%d]: want \"%s\" got \"%.*s\"", idx, want,
                     idx >= 0 && idx < VIEW_CHOICES ? (int)v->content[idx].len : 0,
                     idx >= 0 && idx < VIEW_CHOICES ? v->content[idx].p : "");
        free(want);
        if (!ok)
            return false;
        seen[idx] = true;
    }
    for (int i = 0; i < VIEW_CHOICES; i++) {
        if (v->has_content[i] && v->content[i].len && !seen[i]) {
            snprintf(why, wl, "unexpected content for choice %d", i);
            return false;
        }
    }
    return true;
}

static bool bool_member(const cg_json_t *j, const char *key, bool got, char *why, size_t wl)
{
    int t = cg_json_get(j, 0, key);
    if (t < 0)
        return true;
    bool want = j->js[j->tok[t].start] == 't';
    if (want != got)
        snprintf(why, wl, "%s: want %d got %d", key, want, got);
    return want == got;
}

bool view_matches(const view_t *v, const char *expected, size_t n, char *why, size_t wl)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 20);
    bool ok = cg_json_parse(&j, expected, n) == CG_JSON_OK;
    if (!ok)
        snprintf(why, wl, "expected file is not JSON");
    int content = ok ? cg_json_get(&j, 0, "content") : -1;
    if (ok && content >= 0)
        ok = content_equal(v, &j, content, why, wl);
    int sources = ok ? cg_json_get(&j, 0, "sources") : -1;
    if (ok && sources >= 0) {
        size_t b = cg_json_begin(&j, sources), e = cg_json_end(&j, sources);
        ok = json_equal(expected + b, e - b, v->sources.p, v->sources.len);
        if (!ok)
            snprintf(why, wl, "sources differ:\nwant %.*s\ngot  %.*s", (int)(e - b),
                     expected + b, (int)v->sources.len, v->sources.p);
    }
    ok = ok && bool_member(&j, "ends_with_done", v->ends_done, why, wl);
    ok = ok && bool_member(&j, "ends_with_error_event", v->ends_error, why, wl);
    cg_json_free(&j);
    return ok;
}

bool view_equal(const view_t *a, const view_t *b, char *why, size_t wl)
{
    for (int i = 0; i < VIEW_CHOICES; i++) {
        if (a->content[i].len != b->content[i].len ||
            (a->content[i].len && memcmp(a->content[i].p, b->content[i].p, a->content[i].len))) {
            snprintf(why, wl, "content[%d] differs:\n  %.*s\n  %.*s", i, (int)a->content[i].len,
                     a->content[i].p, (int)b->content[i].len, b->content[i].p);
            return false;
        }
    }
    if (!json_equal(a->sources.p, a->sources.len, b->sources.p, b->sources.len)) {
        snprintf(why, wl, "sources differ");
        return false;
    }
    if (a->ends_done != b->ends_done || a->ends_error != b->ends_error) {
        snprintf(why, wl, "stream ends differ");
        return false;
    }
    if (a->extras.len != b->extras.len ||
        (a->extras.len && memcmp(a->extras.p, b->extras.p, a->extras.len))) {
        snprintf(why, wl, "annotations/entities/citations differ:\n  %.*s\n  %.*s",
                 (int)a->extras.len, a->extras.p, (int)b->extras.len, b->extras.p);
        return false;
    }
    return true;
}

static void run_reads(const cg_xform_cfg_t *cfg, const cg_request_t *req, const char *in, size_t n,
                      const size_t *sizes, size_t nsizes, bool join_end, cg_buf_t *outbuf)
{
    cg_xform_t *x = cg_xform_new(cfg, req);
    cg_out_t out = {0};
    size_t pos = 0, k = 0;
    outbuf->len = 0;
    while (pos < n) {
        size_t step = sizes ? sizes[k++ % nsizes] : n;
        if (step == 0 || step > n - pos)
            step = n - pos;
        /* A private copy per read, freed after use, so a span that outlives
         * its read shows up under ASan. */
        char *copy = cg_xmalloc(step);
        memcpy(copy, in + pos, step);
        pos += step;
        bool last = join_end && pos == n;
        if (last)
            cg_xform_feed_finish(x, copy, step, CG_END_EOF, &out);
        else
            cg_xform_feed(x, copy, step, &out);
        for (size_t i = 0; i < out.nseg; i++)
            cg_buf_put(outbuf, out.seg[i].p, out.seg[i].n);
        free(copy);
        if (last) {
            cg_out_free(&out);
            cg_xform_free(x);
            return;
        }
    }
    cg_xform_finish(x, CG_END_EOF, &out);
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(outbuf, out.seg[i].p, out.seg[i].n);
    cg_out_free(&out);
    cg_xform_free(x);
}

void run_stream(const cg_xform_cfg_t *cfg, const cg_request_t *req, const char *in, size_t n,
                const size_t *sizes, size_t nsizes, cg_buf_t *outbuf)
{
    run_reads(cfg, req, in, n, sizes, nsizes, false, outbuf);
}

void run_stream_joined(const cg_xform_cfg_t *cfg, const cg_request_t *req, const char *in, size_t n,
                       const size_t *sizes, size_t nsizes, cg_buf_t *outbuf)
{
    run_reads(cfg, req, in, n, sizes, nsizes, true, outbuf);
}
