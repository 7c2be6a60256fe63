/*
 * Unit tests of the incremental SSE tokenizer (include/citegate/sse.h,
 * SPEC §6): line ends, fields, the `lead` byte of a CRLF split across reads,
 * the return contract, zero copy, the event cap and oversized events, and
 * split invariance on every fixture.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "citegate/sse.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BIG      (1u << 20)
#define BOM      "\xEF\xBB\xBF"
#define BOM_TAIL "\xBF" /* the last byte of the BOM */

/* ---- helpers ------------------------------------------------------------ */

static void assert_bytes_(const char *what, const char *p, size_t n, const char *want, size_t wn,
                          const char *file, int line)
{
    if (n == wn && (n == 0 || memcmp(p, want, n) == 0))
        return;
    print_error("%s: got %zu bytes \"%.*s\", want %zu bytes \"%.*s\"\n", what, n, (int)n,
                n ? p : "", wn, (int)wn, want);
    _fail(file, line);
}

/* Compares a span with a string literal (which may hold NUL bytes). */
#define ASSERT_SPAN(s, lit)                                                                        \
    assert_bytes_(#s, (s).p, (s).n, (lit), sizeof(lit) - 1, __FILE__, __LINE__)

static bool inside(const void *p, const char *buf, size_t len)
{
    const char *c = p;
    return c >= buf && c <= buf + len;
}

/* Feeds a NUL-terminated literal with its length. */
static ssize_t feed_str(cg_sse_t *p, const char *s, cg_sse_event_t *ev)
{
    return cg_sse_feed(p, s, strlen(s), ev);
}

/* A copy of one event, for comparisons across feeding strategies. */
typedef struct rec {
    char *raw, *data, *type, *id;
    size_t nraw, ndatab, ntype, nid;
    uint32_t ndata, nother;
    uint8_t lead;
} rec_t;

typedef struct recs {
    rec_t *r;
    size_t n, cap;
    char *pending;
    size_t npending;
    bool toobig;
} recs_t;

static char *dup_span(cg_span_t s)
{
    return cg_xstrndup(s.n ? s.p : "", s.n);
}

static void recs_add(recs_t *rs, const cg_sse_event_t *ev)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 16;
        rs->r = cg_xrealloc(rs->r, rs->cap * sizeof(rec_t));
    }
    rec_t *r = &rs->r[rs->n++];
    r->raw = dup_span(ev->raw);
    r->nraw = ev->raw.n;
    r->data = dup_span(ev->data);
    r->ndatab = ev->data.n;
    r->type = dup_span(ev->type);
    r->ntype = ev->type.n;
    r->id = dup_span(ev->id);
    r->nid = ev->id.n;
    r->ndata = ev->ndata;
    r->nother = ev->nother;
    r->lead = ev->lead;
}

static void recs_free(recs_t *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->r[i].raw);
        free(rs->r[i].data);
        free(rs->r[i].type);
        free(rs->r[i].id);
    }
    free(rs->r);
    free(rs->pending);
    memset(rs, 0, sizeof(*rs));
}

/* Feeds one read completely, recording every event. */
static void feed_read(cg_sse_t *p, const char *in, size_t len, recs_t *rs)
{
    size_t pos = 0;
    for (;;) {
        cg_sse_event_t ev;
        ssize_t r = cg_sse_feed(p, in + pos, len - pos, &ev);
        if (r == CG_SSE_AGAIN)
            return;
        if (r < 0) {
            rs->toobig = true;
            return;
        }
        assert_true((size_t)r <= len - pos);
        assert_true(r > 0);
        /* an event in place ends exactly where the consumed bytes end */
        if (ev.raw.p >= in && ev.raw.p < in + len)
            assert_ptr_equal(ev.raw.p + ev.raw.n, in + pos + (size_t)r);
        recs_add(rs, &ev);
        pos += (size_t)r;
    }
}

static void finish(cg_sse_t *p, recs_t *rs)
{
    cg_span_t pend = cg_sse_pending(p);
    rs->pending = dup_span(pend);
    rs->npending = pend.n;
}

/* The stream fed in reads that end at the given cut points. */
static void feed_cuts(const char *in, size_t len, const size_t *cuts, size_t ncuts, recs_t *rs)
{
    cg_sse_t p;
    cg_sse_init(&p, BIG);
    size_t at = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        feed_read(&p, in + at, end - at, rs);
        at = end;
    }
    finish(&p, rs);
    cg_sse_free(&p);
}

static void feed_bytewise(const char *in, size_t len, recs_t *rs)
{
    cg_sse_t p;
    cg_sse_init(&p, BIG);
    for (size_t i = 0; i < len; i++)
        feed_read(&p, in + i, 1, rs);
    finish(&p, rs);
    cg_sse_free(&p);
}

/*
 * Checks that concatenated raws plus the pending bytes give back the input,
 * and that every `lead` byte is the LF of a CRLF whose CR ended the previous
 * event. Then moves each lead byte back to the event its CR ended (and a
 * leading LF of the pending bytes too), so that any split of the stream gives
 * the same list as feeding it whole.
 */
static void normalize(recs_t *rs, const char *in, size_t len, const char *what)
{
    cg_buf_t all = {0};
    for (size_t i = 0; i < rs->n; i++)
        cg_buf_put(&all, rs->r[i].raw, rs->r[i].nraw);
    cg_buf_put(&all, rs->pending, rs->npending);
    if (all.len != len || memcmp(all.p, in, len) != 0) {
        print_error("%s: raw bytes + pending (%zu bytes) differ from the input (%zu bytes)\n", what,
                    all.len, len);
        cg_buf_free(&all);
        fail();
    }
    cg_buf_free(&all);

    for (size_t i = 0; i < rs->n; i++) {
        rec_t *r = &rs->r[i];
        assert_true(r->lead <= 1);
        if (r->lead == 0)
            continue;
        assert_true(i > 0);
        rec_t *prev = &rs->r[i - 1];
        assert_true(r->nraw >= 1 && r->raw[0] == '\n');
        assert_true(prev->nraw >= 1 && prev->raw[prev->nraw - 1] == '\r');
        prev->raw = cg_xrealloc(prev->raw, prev->nraw + 2);
        prev->raw[prev->nraw++] = '\n';
        prev->raw[prev->nraw] = '\0';
        memmove(r->raw, r->raw + 1, r->nraw--);
        r->lead = 0;
    }
    if (rs->n > 0 && rs->npending > 0 && rs->pending[0] == '\n') {
        rec_t *prev = &rs->r[rs->n - 1];
        if (prev->nraw > 0 && prev->raw[prev->nraw - 1] == '\r') {
            prev->raw = cg_xrealloc(prev->raw, prev->nraw + 2);
            prev->raw[prev->nraw++] = '\n';
            prev->raw[prev->nraw] = '\0';
            memmove(rs->pending, rs->pending + 1, rs->npending--);
        }
    }
}

static bool same_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static void assert_same(const recs_t *a, const recs_t *b, const char *what)
{
    if (a->n != b->n) {
        print_error("%s: %zu events, want %zu\n", what, a->n, b->n);
        fail();
    }
    for (size_t i = 0; i < a->n; i++) {
        const rec_t *x = &a->r[i], *y = &b->r[i];
        bool ok = same_bytes(x->raw, x->nraw, y->raw, y->nraw) &&
                  same_bytes(x->data, x->ndatab, y->data, y->ndatab) &&
                  same_bytes(x->type, x->ntype, y->type, y->ntype) &&
                  same_bytes(x->id, x->nid, y->id, y->nid) && x->ndata == y->ndata &&
                  x->nother == y->nother;
        if (!ok) {
            print_error("%s: event %zu differs: raw \"%.*s\" vs \"%.*s\"\n", what, i, (int)x->nraw,
                        x->raw, (int)y->nraw, y->raw);
            fail();
        }
    }
    if (!same_bytes(a->pending, a->npending, b->pending, b->npending)) {
        print_error("%s: pending bytes differ (%zu vs %zu)\n", what, a->npending, b->npending);
        fail();
    }
    assert_int_equal(a->toobig, b->toobig);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    cg_buf_t b = {0};
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        cg_buf_put(&b, tmp, n);
    fclose(f);
    cg_buf_putc(&b, '\0');
    *len = b.len - 1;
    return b.p;
}

/* ---- line ends ---------------------------------------------------------- */

static void test_lf(void **state)
{
    (void)state;
    static const char in[] = "data: hello\n\ndata: two\n\n";
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 13);
    ASSERT_SPAN(ev.raw, "data: hello\n\n");
    ASSERT_SPAN(ev.data, "hello");
    assert_int_equal(ev.ndata, 1);
    assert_int_equal(ev.nother, 0);
    assert_int_equal(ev.lead, 0);
    assert_int_equal(ev.type.n, 0);
    assert_int_equal(ev.id.n, 0);

    r = cg_sse_feed(&p, in + 13, sizeof(in) - 1 - 13, &ev);
    assert_int_equal(r, 11);
    ASSERT_SPAN(ev.raw, "data: two\n\n");
    ASSERT_SPAN(ev.data, "two");
    assert_int_equal(cg_sse_feed(&p, in + 24, 0, &ev), CG_SSE_AGAIN);
    cg_sse_free(&p);
}

static void test_cr(void **state)
{
    (void)state;
    static const char in[] = "event: e\rdata: a\r\rdata: b\r\r";
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 18);
    ASSERT_SPAN(ev.raw, "event: e\rdata: a\r\r");
    ASSERT_SPAN(ev.data, "a");
    ASSERT_SPAN(ev.type, "e");
    assert_int_equal(ev.nother, 1);
    r = cg_sse_feed(&p, in + 18, sizeof(in) - 1 - 18, &ev);
    assert_int_equal(r, 9);
    ASSERT_SPAN(ev.raw, "data: b\r\r");
    ASSERT_SPAN(ev.data, "b");
    assert_int_equal(ev.type.n, 0); /* fields do not carry over between events */
    /* The read ended in a CR: a next read that does not start with LF has no lead. */
    r = feed_str(&p, "data: c\n\n", &ev);
    assert_int_equal(r, 9);
    assert_int_equal(ev.lead, 0);
    ASSERT_SPAN(ev.raw, "data: c\n\n");
    ASSERT_SPAN(ev.data, "c");
    cg_sse_free(&p);
}

static void test_crlf(void **state)
{
    (void)state;
    static const char in[] = "data: a\r\n\r\nid: 7\r\ndata: b\r\n\r\n";
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 11);
    ASSERT_SPAN(ev.raw, "data: a\r\n\r\n");
    ASSERT_SPAN(ev.data, "a");
    r = cg_sse_feed(&p, in + 11, sizeof(in) - 1 - 11, &ev);
    assert_int_equal(r, 18);
    ASSERT_SPAN(ev.raw, "id: 7\r\ndata: b\r\n\r\n");
    ASSERT_SPAN(ev.data, "b");
    ASSERT_SPAN(ev.id, "7");
    assert_int_equal(ev.lead, 0);
    cg_sse_free(&p);
}

/* Line ends at every offset around the scan's 16-byte steps: a value of
 * 0..49 bytes ended by LF, CR or CRLF, the event's terminator likewise, and
 * the other line-end byte (or none) standing right after the value. */
static void test_line_end_at_every_offset(void **state)
{
    (void)state;
    static const char *const ends[] = {"\n", "\r", "\r\n"};
    for (size_t vlen = 0; vlen < 50; vlen++) {
        for (size_t e = 0; e < 3; e++) {
            char value[64], in[160];
            for (size_t i = 0; i < vlen; i++)
                value[i] = (char)('a' + i % 26);
            value[vlen] = '\0';
            int n = snprintf(in, sizeof(in), "data: %s%s%sdata: x%s%s", value, ends[e], ends[e], ends[e],
                             ends[e]);
            cg_sse_t p;
            cg_sse_init(&p, 1024);
            cg_sse_event_t ev;
            size_t first = 6 + vlen + 2 * strlen(ends[e]);
            assert_int_equal(cg_sse_feed(&p, in, (size_t)n, &ev), (ssize_t)first);
            assert_int_equal(ev.data.n, vlen);
            assert_memory_equal(ev.data.p, value, vlen);
            assert_int_equal(ev.ndata, 1);
            assert_int_equal(ev.nother, 0);
            assert_int_equal(cg_sse_feed(&p, in + first, (size_t)n - first, &ev), (ssize_t)((size_t)n - first));
            ASSERT_SPAN(ev.data, "x");
            cg_sse_free(&p);
        }
    }
}

static void test_mixed_line_ends(void **state)
{
    (void)state;
    static const char in[] = "event: e\rdata: a\r\ndata: b\n\r\n";
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, (ssize_t)sizeof(in) - 1);
    ASSERT_SPAN(ev.raw, "event: e\rdata: a\r\ndata: b\n\r\n");
    ASSERT_SPAN(ev.data, "a\nb");
    ASSERT_SPAN(ev.type, "e");
    assert_int_equal(ev.ndata, 2);
    assert_int_equal(ev.nother, 1);
    cg_sse_free(&p);
}

/* An event's terminating blank line ends in CR at the end of a read; the next
 * read starts with the LF of that CRLF. */
static void test_split_crlf_lead(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char r1[] = "data: a\r\n\r";
    ssize_t r = cg_sse_feed(&p, r1, sizeof(r1) - 1, &ev);
    assert_int_equal(r, 10);
    ASSERT_SPAN(ev.raw, "data: a\r\n\r");
    ASSERT_SPAN(ev.data, "a");
    assert_int_equal(ev.lead, 0);

    static const char r2[] = "\ndata: b\r\n\r\n";
    r = cg_sse_feed(&p, r2, sizeof(r2) - 1, &ev);
    assert_int_equal(r, 12);
    assert_int_equal(ev.lead, 1);
    ASSERT_SPAN(ev.raw, "\ndata: b\r\n\r\n");
    assert_ptr_equal(ev.raw.p, r2);
    ASSERT_SPAN(ev.data, "b");
    assert_int_equal(ev.ndata, 1);
    assert_int_equal(ev.nother, 0);

    /* the following event has no lead */
    r = feed_str(&p, "data: c\n\n", &ev);
    assert_int_equal(r, 9);
    assert_int_equal(ev.lead, 0);
    cg_sse_free(&p);
}

/* The lead LF followed at once by a blank line: an empty event of its own. */
static void test_split_crlf_lead_then_blank(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "data: a\r\r", &ev), 9);
    ASSERT_SPAN(ev.data, "a");
    static const char r2[] = "\n\n";
    ssize_t r = cg_sse_feed(&p, r2, 2, &ev);
    assert_int_equal(r, 2);
    assert_int_equal(ev.lead, 1);
    ASSERT_SPAN(ev.raw, "\n\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 0);
    cg_sse_free(&p);
}

/* The lead LF alone in a read, then the event in later reads (buffered). */
static void test_split_crlf_lead_straddles(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "data: a\n\r", &ev), 9);
    assert_int_equal(feed_str(&p, "\n", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "\n");
    assert_int_equal(feed_str(&p, "data: b\n", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "\ndata: b\n");
    assert_int_equal(feed_str(&p, "\n", &ev), 1);
    assert_int_equal(ev.lead, 1);
    ASSERT_SPAN(ev.raw, "\ndata: b\n\n");
    ASSERT_SPAN(ev.data, "b");
    assert_int_equal(ev.ndata, 1);
    cg_sse_free(&p);
}

/* A CRLF split inside an event (not its end) is one line end, not two. */
static void test_split_crlf_inside_event(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "data: a\r", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "\ndata: b\r", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "data: a\r\ndata: b\r");
    assert_int_equal(feed_str(&p, "\n\r", &ev), 2);
    assert_int_equal(ev.lead, 0);
    ASSERT_SPAN(ev.raw, "data: a\r\ndata: b\r\n\r");
    ASSERT_SPAN(ev.data, "a\nb");
    assert_int_equal(ev.ndata, 2);
    assert_int_equal(ev.nother, 0);
    /* and the LF after the event's final CR is the next event's lead */
    assert_int_equal(feed_str(&p, "\n: c\n\n", &ev), 6);
    assert_int_equal(ev.lead, 1);
    ASSERT_SPAN(ev.raw, "\n: c\n\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);
    cg_sse_free(&p);
}

/* ---- fields ------------------------------------------------------------- */

static void test_fields(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = "event: update\nid: 42\nretry: 1000\ndata: x\nfoo: bar\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, (ssize_t)sizeof(in) - 1);
    ASSERT_SPAN(ev.type, "update");
    ASSERT_SPAN(ev.id, "42");
    ASSERT_SPAN(ev.data, "x");
    assert_int_equal(ev.ndata, 1);
    assert_int_equal(ev.nother, 4); /* event, id, retry, foo */

    /* last event / id wins; a colon in the value is kept */
    static const char in2[] = "event: a\nevent:b:c\nid: 1\nid: 2\n\n";
    r = cg_sse_feed(&p, in2, sizeof(in2) - 1, &ev);
    assert_int_equal(r, (ssize_t)sizeof(in2) - 1);
    ASSERT_SPAN(ev.type, "b:c");
    ASSERT_SPAN(ev.id, "2");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 4);
    assert_int_equal(ev.data.n, 0);
    cg_sse_free(&p);
}

static void test_field_names_exact(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    /* names are case-sensitive and must match whole */
    static const char in[] = "Data: x\ndatax: y\n data: z\nevents: e\nEvent: f\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, (ssize_t)sizeof(in) - 1);
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 5);
    assert_int_equal(ev.data.n, 0);
    assert_int_equal(ev.type.n, 0);
    cg_sse_free(&p);
}

static void test_id_with_nul_ignored(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = "id: 1\nid: a\0b\ndata: x\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, (ssize_t)sizeof(in) - 1);
    ASSERT_SPAN(ev.id, "1");
    ASSERT_SPAN(ev.data, "x");
    ASSERT_SPAN(ev.raw, "id: 1\nid: a\0b\ndata: x\n\n");
    cg_sse_free(&p);
}

static void test_data_without_colon(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "data\n\n", &ev), 6);
    assert_int_equal(ev.ndata, 1);
    assert_int_equal(ev.data.n, 0);
    assert_int_equal(ev.nother, 0);

    assert_int_equal(feed_str(&p, "data\ndata: x\ndata\n\n", &ev), 19);
    assert_int_equal(ev.ndata, 3);
    ASSERT_SPAN(ev.data, "\nx\n");

    /* `event` without a colon sets an empty type */
    assert_int_equal(feed_str(&p, "event\ndata: y\n\n", &ev), 15);
    assert_int_equal(ev.type.n, 0);
    ASSERT_SPAN(ev.data, "y");
    assert_int_equal(ev.nother, 1);
    cg_sse_free(&p);
}

static void test_leading_space(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_true(feed_str(&p, "data:x\n\n", &ev) > 0);
    ASSERT_SPAN(ev.data, "x");
    assert_true(feed_str(&p, "data: x\n\n", &ev) > 0);
    ASSERT_SPAN(ev.data, "x");
    assert_true(feed_str(&p, "data:  x \n\n", &ev) > 0);
    ASSERT_SPAN(ev.data, " x ");
    assert_true(feed_str(&p, "data:\tx\n\n", &ev) > 0);
    ASSERT_SPAN(ev.data, "\tx");
    assert_true(feed_str(&p, "data: \n\n", &ev) > 0);
    assert_int_equal(ev.ndata, 1);
    assert_int_equal(ev.data.n, 0);
    assert_true(feed_str(&p, "event:  sp\nid:  7\n\n", &ev) > 0);
    ASSERT_SPAN(ev.type, " sp");
    ASSERT_SPAN(ev.id, " 7");
    cg_sse_free(&p);
}

static void test_comments(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = ": keep-alive\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 14);
    ASSERT_SPAN(ev.raw, ": keep-alive\n\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);
    assert_int_equal(ev.data.n, 0);

    assert_int_equal(feed_str(&p, ":\n\n", &ev), 3);
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);

    /* a comment between data lines neither ends the event nor breaks the join */
    assert_int_equal(feed_str(&p, "data: a\n:data: no\ndata: b\n\n", &ev), 27);
    ASSERT_SPAN(ev.data, "a\nb");
    assert_int_equal(ev.ndata, 2);
    assert_int_equal(ev.nother, 1);
    cg_sse_free(&p);
}

static void test_multiline_data(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = "data: {\"a\":\ndata: 1,\ndata:\ndata: \"b\":2}\n\ndata: solo\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 41);
    ASSERT_SPAN(ev.data, "{\"a\":\n1,\n\n\"b\":2}");
    assert_int_equal(ev.ndata, 4);
    /* the next event's single data line is not polluted by the previous join */
    r = cg_sse_feed(&p, in + 41, sizeof(in) - 1 - 41, &ev);
    assert_int_equal(r, 12);
    ASSERT_SPAN(ev.data, "solo");
    assert_int_equal(ev.ndata, 1);
    assert_true(inside(ev.data.p, in, sizeof(in) - 1));

    /* multi-line data across reads */
    assert_int_equal(feed_str(&p, "data: a\n", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "data: b\nda", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "ta: c\n\n", &ev), 7);
    ASSERT_SPAN(ev.data, "a\nb\nc");
    ASSERT_SPAN(ev.raw, "data: a\ndata: b\ndata: c\n\n");
    assert_int_equal(ev.ndata, 3);
    cg_sse_free(&p);
}

/* ---- BOM ---------------------------------------------------------------- */

static void test_bom_at_start(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = BOM "data: x\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 12);
    ASSERT_SPAN(ev.raw, BOM "data: x\n\n"); /* kept in raw */
    ASSERT_SPAN(ev.data, "x");              /* stripped for parsing */
    assert_int_equal(ev.ndata, 1);
    assert_int_equal(ev.nother, 0);

    /* not at the stream start: part of the field name, so not `data` */
    static const char in2[] = BOM "data: y\n\n";
    r = cg_sse_feed(&p, in2, sizeof(in2) - 1, &ev);
    assert_int_equal(r, 12);
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);
    ASSERT_SPAN(ev.raw, BOM "data: y\n\n");
    cg_sse_free(&p);
}

static void test_bom_split_across_reads(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "\xEF", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "\xBB", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, BOM_TAIL "event: e\ndata: x\n\n", &ev), 19);
    ASSERT_SPAN(ev.raw, BOM "event: e\ndata: x\n\n");
    ASSERT_SPAN(ev.type, "e");
    ASSERT_SPAN(ev.data, "x");
    assert_int_equal(ev.nother, 1);
    cg_sse_free(&p);
}

static void test_bom_before_comment(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "\xEF\xBB\xBF: hi\n\n", &ev), 9);
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);
    /* a later data line keeps its leading bytes */
    assert_int_equal(feed_str(&p, BOM "data: z\n\n", &ev), 12);
    assert_int_equal(ev.ndata, 0);
    cg_sse_free(&p);
}

/* WHATWG: only a BOM at the very start of the stream is dropped. A stream that
 * starts with a blank line has no BOM; one on the next line is part of that
 * line, so "\xEF\xBB\xBFdata" is an unknown field, not `data`. */
static void test_bom_not_at_start_after_blank_line(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "\n", &ev), 1);
    assert_int_equal(ev.ndata, 0);
    static const char in[] = BOM "data: x\n\n";
    assert_int_equal(cg_sse_feed(&p, in, sizeof(in) - 1, &ev), 12);
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);
    assert_int_equal(ev.data.n, 0);
    cg_sse_free(&p);
}

/* A BOM followed by a line end: after dropping the BOM the line is blank, so
 * it ends an (empty) event. */
static void test_bom_then_blank_line(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = "\xEF\xBB\xBF\ndata: x\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 4);
    ASSERT_SPAN(ev.raw, "\xEF\xBB\xBF\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 0);
    r = cg_sse_feed(&p, in + 4, sizeof(in) - 1 - 4, &ev);
    assert_int_equal(r, 9);
    ASSERT_SPAN(ev.data, "x");
    assert_int_equal(ev.nother, 0);
    cg_sse_free(&p);
}

/* ---- events without data ------------------------------------------------- */

static void test_empty_events(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = "\n\r\n\r: c\r\n\n";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 1);
    ASSERT_SPAN(ev.raw, "\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 0);
    assert_int_equal(ev.data.n, 0);
    r = cg_sse_feed(&p, in + 1, sizeof(in) - 1 - 1, &ev);
    assert_int_equal(r, 2);
    ASSERT_SPAN(ev.raw, "\r\n");
    assert_int_equal(ev.ndata, 0);
    r = cg_sse_feed(&p, in + 3, sizeof(in) - 1 - 3, &ev);
    assert_int_equal(r, 1);
    ASSERT_SPAN(ev.raw, "\r");
    r = cg_sse_feed(&p, in + 4, sizeof(in) - 1 - 4, &ev);
    assert_int_equal(r, 6);
    ASSERT_SPAN(ev.raw, ": c\r\n\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.nother, 1);
    assert_int_equal(cg_sse_feed(&p, in + 10, 0, &ev), CG_SSE_AGAIN);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    cg_sse_free(&p);
}

/* ---- return contract ------------------------------------------------------ */

static void test_again_and_pending(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(cg_sse_pending(&p).n, 0);
    assert_int_equal(cg_sse_feed(&p, "", 0, &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "data: he", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "data: he");
    assert_int_equal(feed_str(&p, "llo\nid: 3", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "data: hello\nid: 3");
    assert_int_equal(cg_sse_feed(&p, "", 0, &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "data: hello\nid: 3");

    static const char in[] = "\n\ndata: next";
    ssize_t r = cg_sse_feed(&p, in, sizeof(in) - 1, &ev);
    assert_int_equal(r, 2);
    ASSERT_SPAN(ev.raw, "data: hello\nid: 3\n\n");
    ASSERT_SPAN(ev.data, "hello");
    ASSERT_SPAN(ev.id, "3");
    /* a straddling event is copied: raw is not in the last input */
    assert_false(inside(ev.raw.p, in, sizeof(in) - 1));
    /* the rest of the input: consumed, no event yet */
    r = cg_sse_feed(&p, in + 2, sizeof(in) - 1 - 2, &ev);
    assert_int_equal(r, CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "data: next");
    assert_int_equal(feed_str(&p, "\n\n", &ev), 2);
    ASSERT_SPAN(ev.raw, "data: next\n\n");
    ASSERT_SPAN(ev.data, "next");
    cg_sse_free(&p);
}

static void test_pending_empty_after_event(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    assert_int_equal(feed_str(&p, "data: a", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "\n\n", &ev), 2);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    assert_int_equal(feed_str(&p, "data: b\n\n", &ev), 9);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    ASSERT_SPAN(ev.data, "b");
    /* buffered bytes of a finished event are not pending for the next one */
    assert_int_equal(feed_str(&p, "da", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "da");
    cg_sse_free(&p);
}

static void test_zero_copy(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_init(&p, 1024);
    cg_sse_event_t ev;
    static const char in[] = "event: e\nid: 1\ndata: one\n\n: c\n\ndata: two\r\n\r\n";
    size_t len = sizeof(in) - 1, pos = 0;
    static const size_t want[] = {26, 5, 13};
    for (int k = 0; k < 3; k++) {
        ssize_t r = cg_sse_feed(&p, in + pos, len - pos, &ev);
        assert_int_equal(r, (ssize_t)want[k]);
        assert_ptr_equal(ev.raw.p, in + pos);
        assert_int_equal(ev.raw.n, want[k]);
        assert_true(inside(ev.data.p, in, len));
        assert_true(inside(ev.type.p, in, len));
        assert_true(inside(ev.id.p, in, len));
        if (k == 0) {
            assert_ptr_equal(ev.data.p, in + 21);
            assert_ptr_equal(ev.type.p, in + 7);
            assert_ptr_equal(ev.id.p, in + 13);
        }
        if (k == 2)
            assert_ptr_equal(ev.data.p, in + pos + 6);
        pos += (size_t)r;
    }
    assert_int_equal(pos, len);
    assert_int_equal(cg_sse_feed(&p, in + pos, 0, &ev), CG_SSE_AGAIN);
    cg_sse_free(&p);
}

/* ---- the cap ---------------------------------------------------------------- */

static void test_cap_exact(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_event_t ev;
    static const char in[] = "data: 01234567\n\n"; /* 16 bytes */
    cg_sse_init(&p, 16);
    assert_int_equal(cg_sse_feed(&p, in, 16, &ev), 16);
    ASSERT_SPAN(ev.data, "01234567");
    /* the same event straddling reads */
    assert_int_equal(cg_sse_feed(&p, in, 10, &ev), CG_SSE_AGAIN);
    assert_int_equal(cg_sse_feed(&p, in + 10, 6, &ev), 6);
    ASSERT_SPAN(ev.raw, "data: 01234567\n\n");
    cg_sse_free(&p);

    cg_sse_init(&p, 15);
    assert_int_equal(cg_sse_feed(&p, in, 16, &ev), CG_SSE_E_TOOBIG);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    cg_sse_free(&p);

    cg_sse_init(&p, 15);
    assert_int_equal(cg_sse_feed(&p, in, 15, &ev), CG_SSE_AGAIN);
    assert_int_equal(cg_sse_feed(&p, in + 15, 1, &ev), CG_SSE_E_TOOBIG);
    ASSERT_SPAN(cg_sse_pending(&p), "data: 01234567\n");
    cg_sse_free(&p);
}

/* After TOOBIG the event comes out in pieces, nothing of it kept, and the
 * events after it as usual. */
static void test_oversized_pieces(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_event_t ev;
    cg_sse_init(&p, 16);
    assert_int_equal(feed_str(&p, "data: 01", &ev), CG_SSE_AGAIN);
    static const char in[] = "23456789abcdef\n\ndata: a\n\n";
    size_t len = sizeof(in) - 1;
    assert_int_equal(cg_sse_feed(&p, in, len, &ev), CG_SSE_E_TOOBIG);
    ASSERT_SPAN(cg_sse_pending(&p), "data: 01");
    assert_int_equal(p.lead, 0);
    /* the rest of that event, as a span of the input */
    assert_int_equal(cg_sse_feed(&p, in, len, &ev), 16);
    assert_true(ev.oversized);
    assert_ptr_equal(ev.raw.p, in);
    ASSERT_SPAN(ev.raw, "23456789abcdef\n\n");
    assert_int_equal(ev.ndata, 0);
    assert_int_equal(ev.data.n, 0);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    assert_int_equal(p.buf.len, 0);
    /* then a normal event */
    assert_int_equal(cg_sse_feed(&p, in + 16, len - 16, &ev), 9);
    assert_false(ev.oversized);
    ASSERT_SPAN(ev.data, "a");
    assert_int_equal(cg_sse_feed(&p, "", 0, &ev), CG_SSE_AGAIN);
    cg_sse_free(&p);
}

/* An oversized event over many reads: every byte goes out once, in order,
 * and the tokenizer buffers none of it. */
static void test_oversized_straddles_reads(void **state)
{
    (void)state;
    cg_buf_t in = {0};
    cg_buf_puts(&in, "data: x\n\nid: 1\n");
    for (int i = 0; i < 40; i++)
        cg_buf_puts(&in, "data: 0123456789\r\n");
    cg_buf_puts(&in, ": end\r\n\r\ndata: y\r\n\r\n");
    size_t big_from = 9, big_to = in.len - 11;
    for (size_t step = 1; step <= 13; step++) {
        cg_sse_t p;
        cg_sse_init(&p, 64);
        cg_buf_t big = {0};
        size_t events = 0, toobig = 0;
        for (size_t off = 0; off < in.len; off += step) {
            size_t n = step < in.len - off ? step : in.len - off, pos = 0;
            while (pos < n) {
                cg_sse_event_t ev;
                ssize_t r = cg_sse_feed(&p, in.p + off + pos, n - pos, &ev);
                if (r == CG_SSE_AGAIN)
                    break;
                if (r == CG_SSE_E_TOOBIG) {
                    toobig++;
                    cg_span_t pend = cg_sse_pending(&p);
                    cg_buf_put(&big, pend.p, pend.n);
                    continue;
                }
                if (ev.oversized) {
                    cg_buf_put(&big, ev.raw.p, ev.raw.n);
                    assert_int_equal(p.buf.len, 0);
                } else {
                    /* "data: y" may start with the LF that ends the big one */
                    cg_buf_put(&big, ev.raw.p, ev.lead);
                    events++;
                }
                pos += (size_t)r;
            }
        }
        assert_int_equal(toobig, 1);
        assert_int_equal(events, 2); /* "data: x" and "data: y" */
        assert_int_equal(big.len, big_to - big_from);
        assert_memory_equal(big.p, in.p + big_from, big.len);
        assert_true(p.buf.cap <= 1024);
        cg_buf_free(&big);
        cg_sse_free(&p);
    }
    cg_buf_free(&in);
}

/*
 * Everything the tokenizer hands out for in[0..len), fed in reads that end at
 * `cuts`: events as "E:" + raw, oversized events as "O:" + their bytes,
 * unfinished ones as "P:" + pending, items separated by "|", each lead LF
 * given back to the item before it. The same for every split, or a read
 * boundary shows.
 */
static char *describe(size_t cap, const char *in, size_t len, const size_t *cuts, size_t ncuts)
{
    cg_sse_t p;
    cg_sse_init(&p, cap);
    cg_buf_t d = {0};
    bool big_open = false; /* an oversized event's item is still to be opened */
    for (size_t c = 0, at = 0; c <= ncuts; c++) {
        size_t end = c < ncuts ? cuts[c] : len, pos = 0;
        while (pos < end - at) {
            cg_sse_event_t ev;
            ssize_t r = cg_sse_feed(&p, in + at + pos, end - at - pos, &ev);
            if (r == CG_SSE_AGAIN)
                break;
            if (r == CG_SSE_E_TOOBIG) {
                cg_span_t pend = cg_sse_pending(&p);
                big_open = pend.n == 0;
                if (pend.n) {
                    cg_buf_put(&d, "\n", p.lead);
                    cg_buf_puts(&d, "|O:");
                    cg_buf_put(&d, pend.p + p.lead, pend.n - p.lead);
                }
                continue;
            }
            cg_buf_put(&d, "\n", ev.lead);
            if (!ev.oversized || big_open)
                cg_buf_puts(&d, ev.oversized ? "|O:" : "|E:");
            big_open = false;
            cg_buf_put(&d, ev.raw.p + ev.lead, ev.raw.n - ev.lead);
            pos += (size_t)r;
        }
        at = end;
    }
    cg_span_t pend = cg_sse_pending(&p);
    if (pend.n) {
        cg_buf_put(&d, "\n", p.lead);
        cg_buf_puts(&d, "|P:");
        cg_buf_put(&d, pend.p + p.lead, pend.n - p.lead);
    }
    cg_sse_free(&p);
    cg_buf_putc(&d, '\0');
    return d.p;
}

/* Whether an event is over the cap does not depend on where reads end: not
 * at an event's exact size (cap and cap + 1 bytes, its end a CRLF that a read
 * may cut, after an event whose CRLF a read may cut), nor with several
 * oversized events in one stream. */
static void test_oversized_split_invariant(void **state)
{
    (void)state;
    /* Events 2, 4 and 7 have 32 bytes (a final CRLF's LF left out), event 5
     * has 33, event 6 and the unfinished last one more. */
    static const char in[] = "data: a\r\n\r\n"
                             "data: 0123456789abcdefghijklm\r\n\r\n"
                             "data: b\r\r"
                             "data: 0123456789abcdefghijklmn\n\n"
                             "data: 0123456789abcdefghijklmn\r\n\r\n"
                             ": big comment 0123456789abcdefghijklmnopqrstuvwxyz\n\n"
                             "data: 0123456789abcdefghijklmn\r\r"
                             "data: c\n\n"
                             "data: 0123456789abcdefghijklmnopqrstuvwxyz";
    size_t len = sizeof(in) - 1;
    const char *want32 = "|E:data: a\r\n\r\n|E:data: 0123456789abcdefghijklm\r\n\r\n|E:data: b\r\r"
                         "|E:data: 0123456789abcdefghijklmn\n\n"
                         "|O:data: 0123456789abcdefghijklmn\r\n\r\n"
                         "|O:: big comment 0123456789abcdefghijklmnopqrstuvwxyz\n\n"
                         "|E:data: 0123456789abcdefghijklmn\r\r|E:data: c\n\n"
                         "|O:data: 0123456789abcdefghijklmnopqrstuvwxyz";
    for (size_t cap = 31; cap <= 33; cap++) {
        char *whole = describe(cap, in, len, NULL, 0);
        if (cap == 32)
            assert_string_equal(whole, want32);
        /* one more byte of room lets event 5 through, one less stops 2, 4, 7 */
        size_t big = 0;
        for (const char *o = whole; (o = strstr(o, "|O:")) != NULL; o++)
            big++;
        assert_int_equal(big, cap == 31 ? 6 : cap == 32 ? 3 : 2);
        for (size_t k = 1; k < len; k++) {
            size_t c2 = k + 1 < len ? k + 1 : k, c3 = k + 7 < len ? k + 7 : c2;
            size_t cuts[3] = {k, c2, c3};
            for (size_t n = 1; n <= 3; n++) {
                char *split = describe(cap, in, len, cuts, n);
                if (strcmp(split, whole) != 0)
                    fail_msg("cap %zu, cut at %zu (%zu cuts):\n%s\nwhole:\n%s", cap, k, n, split,
                             whole);
                free(split);
            }
        }
        free(whole);
    }
}

/* An oversized event whose first byte is the LF of the previous event's
 * CRLF: TOOBIG says so (lead), and the first piece reports it too. */
static void test_oversized_lead(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_event_t ev;
    cg_sse_init(&p, 16);
    assert_int_equal(feed_str(&p, "data: a\r\n\r", &ev), 10);
    static const char in[] = "\ndata: 0123456789abcdef\r\n\r\n";
    size_t len = sizeof(in) - 1;
    assert_int_equal(cg_sse_feed(&p, in, len, &ev), CG_SSE_E_TOOBIG);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    assert_int_equal(p.lead, 1);
    assert_int_equal(cg_sse_feed(&p, in, len, &ev), (ssize_t)len);
    assert_true(ev.oversized);
    assert_int_equal(ev.lead, 1);
    ASSERT_SPAN(ev.raw, "\ndata: 0123456789abcdef\r\n\r\n");
    cg_sse_free(&p);

    /* the same with the event's start buffered: the lead is pending */
    cg_sse_init(&p, 16);
    assert_int_equal(feed_str(&p, "data: a\r\n\r", &ev), 10);
    assert_int_equal(feed_str(&p, "\ndata: 01", &ev), CG_SSE_AGAIN);
    assert_int_equal(feed_str(&p, "23456789abcdef\n\n", &ev), CG_SSE_E_TOOBIG);
    ASSERT_SPAN(cg_sse_pending(&p), "\ndata: 01");
    assert_int_equal(p.lead, 1);
    assert_int_equal(feed_str(&p, "23456789abcdef\n\n", &ev), 16);
    assert_true(ev.oversized);
    assert_int_equal(ev.lead, 0);
    cg_sse_free(&p);
}

/* The cap is checked before waiting for more input: a partial event larger
 * than max_event fails before its end arrives. */
static void test_cap_before_wait(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_event_t ev;
    static const char big[] = "data: 0123456789abcdef"; /* 22 bytes, no line end */

    cg_sse_init(&p, 16);
    assert_int_equal(cg_sse_feed(&p, big, sizeof(big) - 1, &ev), CG_SSE_E_TOOBIG);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    cg_sse_free(&p);

    /* one byte at a time: the 17th byte fails */
    cg_sse_init(&p, 16);
    for (size_t i = 0; i < 16; i++)
        assert_int_equal(cg_sse_feed(&p, big + i, 1, &ev), CG_SSE_AGAIN);
    assert_int_equal(cg_sse_feed(&p, big + 16, 1, &ev), CG_SSE_E_TOOBIG);
    ASSERT_SPAN(cg_sse_pending(&p), "data: 0123456789");
    cg_sse_free(&p);

    /* complete lines inside one read that already exceed the cap */
    cg_sse_init(&p, 16);
    assert_int_equal(feed_str(&p, "data: 0123\ndata: 4567\n", &ev), CG_SSE_E_TOOBIG);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    cg_sse_free(&p);

    /* an event that has consumed earlier events in the same buffer */
    cg_sse_init(&p, 16);
    static const char two[] = "data: a\n\ndata: 0123456789abc";
    assert_int_equal(cg_sse_feed(&p, two, sizeof(two) - 1, &ev), 9);
    assert_int_equal(cg_sse_feed(&p, two + 9, sizeof(two) - 1 - 9, &ev), CG_SSE_E_TOOBIG);
    assert_int_equal(cg_sse_pending(&p).n, 0);
    cg_sse_free(&p);
}

/* CG_SSE_E_TOOBIG consumes no byte of the failing input: cg_sse_pending()
 * holds exactly the bytes taken by earlier calls, so a caller can forward
 * pending + the whole failing input without duplicating anything. Here the
 * failing input starts with the LF that ends a buffered line. */
static void test_toobig_consumes_nothing_after_line_end(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_event_t ev;
    cg_sse_init(&p, 20);
    assert_int_equal(feed_str(&p, "data: a", &ev), CG_SSE_AGAIN);
    ASSERT_SPAN(cg_sse_pending(&p), "data: a");
    ssize_t r = feed_str(&p, "\ndata: 0123456789abcdefghij", &ev);
    char *pend = dup_span(cg_sse_pending(&p));
    size_t npend = cg_sse_pending(&p).n;
    cg_sse_free(&p); /* before asserting: a failure must not leak */
    assert_int_equal(r, CG_SSE_E_TOOBIG);
    bool ok = same_bytes(pend, npend, "data: a", 7);
    if (!ok)
        print_error("pending: got %zu bytes \"%.*s\", want \"data: a\"\n", npend, (int)npend, pend);
    free(pend);
    assert_true(ok);
}

/* Same, with the failing input starting with the LF of a split CRLF. */
static void test_toobig_consumes_nothing_after_split_crlf(void **state)
{
    (void)state;
    cg_sse_t p;
    cg_sse_event_t ev;
    cg_sse_init(&p, 20);
    assert_int_equal(feed_str(&p, "data: a\r", &ev), CG_SSE_AGAIN);
    ssize_t r = feed_str(&p, "\ndata: 0123456789abcdefghij", &ev);
    char *pend = dup_span(cg_sse_pending(&p));
    size_t npend = cg_sse_pending(&p).n;
    cg_sse_free(&p); /* before asserting: a failure must not leak */
    assert_int_equal(r, CG_SSE_E_TOOBIG);
    bool ok = same_bytes(pend, npend, "data: a\r", 8);
    if (!ok)
        print_error("pending: got %zu bytes \"%.*s\", want \"data: a\\r\"\n", npend, (int)npend,
                    pend);
    free(pend);
    assert_true(ok);
}

/* ---- split invariance on the fixtures -------------------------------------- */

static void check_fixture(const char *path)
{
    size_t len;
    char *in = slurp(path, &len);
    assert_true(len > 0);

    recs_t whole = {0}, bytes = {0};
    feed_cuts(in, len, NULL, 0, &whole);
    for (size_t i = 0; i < whole.n; i++)
        assert_int_equal(whole.r[i].lead, 0);
    normalize(&whole, in, len, path);

    feed_bytewise(in, len, &bytes);
    normalize(&bytes, in, len, path);
    assert_same(&bytes, &whole, path);
    recs_free(&bytes);

    /* every split into two reads, and a few into three */
    for (size_t k = 1; k < len; k++) {
        recs_t two = {0};
        size_t cuts[2] = {k, k + (len - k) / 2};
        size_t ncuts = (k % 7 == 0 && cuts[1] > k) ? 2 : 1;
        feed_cuts(in, len, cuts, ncuts, &two);
        normalize(&two, in, len, path);
        assert_same(&two, &whole, path);
        recs_free(&two);
    }
    recs_free(&whole);
    free(in);
}

static void test_fixtures_split_invariant(void **state)
{
    (void)state;
    DIR *d = opendir(CG_FIXTURES);
    assert_non_null(d);
    struct dirent *de;
    int nfiles = 0, nsse = 0;
    while ((de = readdir(d)) != NULL) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", CG_FIXTURES, de->d_name);
        struct stat st;
        if (de->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
            continue;
        check_fixture(path);
        nfiles++;
        size_t nl = strlen(de->d_name);
        if (nl > 4 && strcmp(de->d_name + nl - 4, ".sse") == 0)
            nsse++;
    }
    closedir(d);
    assert_true(nsse >= 1);
    assert_true(nfiles >= nsse);
}

/* A known fixture, checked in detail: the CRLF one has events, a comment and
 * CRLF line ends, and fed one byte at a time every event after the first
 * carries the LF of the previous event's final CRLF as lead. */
static void test_fixture_crlf_bytewise_leads(void **state)
{
    (void)state;
    size_t len;
    char *in = slurp(CG_FIXTURES "/azure_oyd_filters_crlf.sse", &len);
    recs_t whole = {0}, bytes = {0};
    feed_cuts(in, len, NULL, 0, &whole);
    feed_bytewise(in, len, &bytes);
    assert_true(whole.n >= 3);
    assert_int_equal(bytes.n, whole.n);
    size_t comments = 0, withdata = 0;
    for (size_t i = 0; i < whole.n; i++) {
        assert_int_equal(whole.r[i].lead, 0);
        assert_int_equal(bytes.r[i].lead, i > 0 ? 1 : 0);
        if (whole.r[i].ndata == 0 && whole.r[i].nother > 0)
            comments++;
        if (whole.r[i].ndata > 0)
            withdata++;
    }
    assert_true(comments >= 1);
    assert_true(withdata >= 2);
    recs_free(&whole);
    recs_free(&bytes);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lf),
        cmocka_unit_test(test_cr),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_line_end_at_every_offset),
        cmocka_unit_test(test_mixed_line_ends),
        cmocka_unit_test(test_split_crlf_lead),
        cmocka_unit_test(test_split_crlf_lead_then_blank),
        cmocka_unit_test(test_split_crlf_lead_straddles),
        cmocka_unit_test(test_split_crlf_inside_event),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_field_names_exact),
        cmocka_unit_test(test_id_with_nul_ignored),
        cmocka_unit_test(test_data_without_colon),
        cmocka_unit_test(test_leading_space),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_multiline_data),
        cmocka_unit_test(test_bom_at_start),
        cmocka_unit_test(test_bom_split_across_reads),
        cmocka_unit_test(test_bom_before_comment),
        cmocka_unit_test(test_bom_not_at_start_after_blank_line),
        cmocka_unit_test(test_bom_then_blank_line),
        cmocka_unit_test(test_empty_events),
        cmocka_unit_test(test_again_and_pending),
        cmocka_unit_test(test_pending_empty_after_event),
        cmocka_unit_test(test_zero_copy),
        cmocka_unit_test(test_cap_exact),
        cmocka_unit_test(test_oversized_pieces),
        cmocka_unit_test(test_oversized_straddles_reads),
        cmocka_unit_test(test_oversized_split_invariant),
        cmocka_unit_test(test_oversized_lead),
        cmocka_unit_test(test_cap_before_wait),
        cmocka_unit_test(test_toobig_consumes_nothing_after_line_end),
        cmocka_unit_test(test_toobig_consumes_nothing_after_split_crlf),
        cmocka_unit_test(test_fixtures_split_invariant),
        cmocka_unit_test(test_fixture_crlf_bytewise_leads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
