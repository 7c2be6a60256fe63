/*
 * libFuzzer target for the SSE tokenizer (include/citegate/sse.h).
 *
 * Input: two header bytes (see fuzz_common.h; byte 1 & 3 picks max_event:
 * 8, 64, 4096 or 1 MiB), then the stream. The stream is tokenized twice,
 * once in reads cut by the header's seed and once as one read, and checks:
 *   - byte conservation: every event's raw bytes, then the pending bytes,
 *     are exactly the stream bytes consumed, in order;
 *   - every event ends at its first blank line, and its fields (data, type,
 *     id, counts) agree with a small independent parser of its raw bytes;
 *   - spans lie in raw, or data in the join buffer;
 *   - max_event holds; TOOBIG is justified and consumes nothing, and the
 *     oversized event then comes out in pieces, each the next stream bytes,
 *     none kept, through the blank line that ends it;
 *   - split and whole runs yield the same events and the same oversized
 *     events (the most valuable check: the tokenizer's whole job is to make
 *     read boundaries invisible, and whether an event is too big is no
 *     exception).
 */
#include "citegate/sse.h"

#include "fuzz_common.h"

static const size_t caps[4] = {8, 64, 4096, 1u << 20};

typedef struct evrec {
    bool oversized;             /* handed out in pieces (no fields) */
    size_t start, end;          /* stream offsets of raw (lead included) */
    size_t data, type, id;      /* offsets into run.bytes */
    size_t ndatab, ntype, nid;  /* their lengths */
    uint32_t ndata, nother;
    uint8_t lead;
} evrec_t;

typedef struct run {
    const char *in; /* the whole stream, for checks only */
    size_t len, cap;
    evrec_t *ev;
    size_t nev, evcap;
    cg_buf_t bytes;  /* data, type and id bytes of every event */
    size_t last_end; /* stream offset after the last event */
    bool big;        /* an oversized event is coming out in pieces */
    size_t big_end;  /* stream offset after its last piece so far */
} run_t;

/* --- Independent parser of one event's raw bytes (the oracle) --------------- */

typedef struct oracle {
    cg_buf_t data;
    const char *type, *id;
    size_t ntype, nid;
    uint32_t ndata, nother;
} oracle_t;

static void oracle_field(oracle_t *o, const char *line, size_t n)
{
    if (n > 0 && line[0] == ':') {
        o->nother++;
        return;
    }
    const char *colon = memchr(line, ':', n);
    size_t name = colon ? (size_t)(colon - line) : n;
    size_t v = colon ? name + 1 : n;
    if (v < n && line[v] == ' ')
        v++;
    if (name == 4 && memcmp(line, "data", 4) == 0) {
        if (o->ndata++)
            cg_buf_putc(&o->data, '\n');
        cg_buf_put(&o->data, line + v, n - v);
        return;
    }
    o->nother++;
    if (name == 5 && memcmp(line, "event", 5) == 0) {
        o->type = line + v;
        o->ntype = n - v;
    } else if (name == 2 && memcmp(line, "id", 2) == 0 && !memchr(line + v, '\0', n - v)) {
        o->id = line + v;
        o->nid = n - v;
    }
}

/* Bytes of a BOM at s[0..n), which WHATWG skips before parsing lines, but
 * only at the very start of the stream. */
static size_t bom_len(const char *s, size_t n)
{
    return n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

/*
 * Parses raw[lead..n) line by line and checks that its only blank line is
 * the last one, ending exactly at n.
 */
static void oracle_parse(oracle_t *o, const char *raw, size_t n, size_t lead, bool stream_start)
{
    memset(o, 0, sizeof(*o));
    size_t i = stream_start ? bom_len(raw, n) : lead;
    for (;;) {
        size_t e = i;
        while (e < n && !fz_is_eol(raw[e]))
            e++;
        FZ_CHECK(e < n); /* every line of an event is complete */
        size_t next = e + fz_eol_len(raw, n, e);
        if (e == i) {
            FZ_CHECK(next == n); /* the first blank line ends the event */
            return;
        }
        oracle_field(o, raw + i, e - i);
        i = next;
    }
}

static bool bytes_eq(cg_span_t a, const char *b, size_t n)
{
    return a.n == n && (n == 0 || memcmp(a.p, b, n) == 0);
}

static bool span_in(cg_span_t s, const char *p, size_t n)
{
    return s.n == 0 || (p != NULL && s.p >= p && s.p + s.n <= p + n);
}

/* --- One tokenizer run ------------------------------------------------------ */

static size_t keep(run_t *r, cg_span_t s)
{
    size_t at = r->bytes.len;
    cg_buf_put(&r->bytes, s.p, s.n);
    return at;
}

static void check_fields(const cg_sse_t *p, const cg_sse_event_t *ev, size_t start)
{
    FZ_CHECK(span_in(ev->type, ev->raw.p, ev->raw.n));
    FZ_CHECK(span_in(ev->id, ev->raw.p, ev->raw.n));
    if (ev->ndata == 0)
        FZ_CHECK(ev->data.n == 0);
    else
        FZ_CHECK(span_in(ev->data, ev->raw.p, ev->raw.n) ||
                 span_in(ev->data, p->join.p, p->join.len));

    oracle_t o;
    oracle_parse(&o, ev->raw.p, ev->raw.n, ev->lead, start == 0);
    FZ_CHECK(ev->ndata == o.ndata);
    FZ_CHECK(ev->nother == o.nother);
    FZ_CHECK(bytes_eq(ev->data, o.data.p, o.data.len));
    FZ_CHECK(bytes_eq(ev->type, o.type, o.ntype));
    FZ_CHECK(bytes_eq(ev->id, o.id, o.nid));
    cg_buf_free(&o.data);
}

/* The lead is the LF of a CRLF whose CR ended the previous event. */
static bool has_lead(const run_t *r, size_t start)
{
    return start > 0 && r->in[start - 1] == '\r' && r->in[start] == '\n';
}

/* An event's size for the cap (see sse.h): raw[0..n) without its lead and
 * the LF of a CRLF that ends it. */
static size_t event_size(const char *raw, size_t n, bool lead, bool complete)
{
    bool crlf = complete && n >= 2 && raw[n - 2] == '\r' && raw[n - 1] == '\n';
    return n - lead - crlf;
}

static evrec_t *add_rec(run_t *r, size_t start, size_t end)
{
    if (r->nev == r->evcap) {
        r->evcap = r->evcap ? 2 * r->evcap : 16;
        r->ev = realloc(r->ev, r->evcap * sizeof(evrec_t));
        FZ_CHECK(r->ev != NULL);
    }
    evrec_t *e = &r->ev[r->nev++];
    memset(e, 0, sizeof(*e));
    e->start = start;
    e->end = end;
    r->last_end = end;
    return e;
}

/* An event ended at stream offset `end`. */
static void take_event(run_t *r, const cg_sse_t *p, const cg_sse_event_t *ev, size_t end)
{
    FZ_CHECK(!ev->oversized && ev->raw.n >= 1 && ev->raw.n <= end);
    size_t start = end - ev->raw.n;
    /* Conservation: events follow each other and are the stream's bytes. */
    FZ_CHECK(start == r->last_end);
    FZ_CHECK(memcmp(ev->raw.p, r->in + start, ev->raw.n) == 0);
    FZ_CHECK(ev->lead == has_lead(r, start));
    FZ_CHECK(event_size(ev->raw.p, ev->raw.n, ev->lead, true) <= r->cap);
    check_fields(p, ev, start);

    evrec_t *e = add_rec(r, start, end);
    e->end = end;
    e->data = keep(r, ev->data);
    e->ndatab = ev->data.n;
    e->type = keep(r, ev->type);
    e->ntype = ev->type.n;
    e->id = keep(r, ev->id);
    e->nid = ev->id.n;
    e->ndata = ev->ndata;
    e->nother = ev->nother;
    e->lead = ev->lead;
}

/* The pending bytes are the stream bytes after the last event, up to `to`
 * (none while an oversized event comes out in pieces). */
static void check_pending(const run_t *r, const cg_sse_t *p, size_t to)
{
    cg_span_t pend = cg_sse_pending(p);
    FZ_CHECK(pend.n <= r->cap + 1);
    FZ_CHECK(pend.n == (r->big ? 0 : to - r->last_end));
    FZ_CHECK(pend.n == 0 || memcmp(pend.p, r->in + r->last_end, pend.n) == 0);
}

/* Stream offset where the event starting at `start` ends (len if it does
 * not; *done tells which). */
static size_t event_end(const char *in, size_t len, size_t start, bool *done)
{
    size_t i = start;
    *done = false;
    if (i == 0)
        i = bom_len(in, len);
    else if (i < len && in[i - 1] == '\r' && in[i] == '\n')
        i++;
    while (i < len) {
        size_t e = i;
        while (e < len && !fz_is_eol(in[e]))
            e++;
        if (e == len)
            return len;
        size_t next = e + fz_eol_len(in, len, e);
        if (e == i) {
            *done = true;
            return next;
        }
        i = next;
    }
    return len;
}

/* TOOBIG on the read rest in[0..n) at stream offset `at`. */
static void on_toobig(run_t *r, const cg_sse_t *p, size_t n, size_t at)
{
    FZ_CHECK(!r->big);
    /* Justified: the event seen so far (up to this read's end) is too big. */
    bool done;
    size_t start = r->last_end, e = event_end(r->in, r->len, start, &done);
    size_t seen = e < at + n ? e : at + n;
    bool lead = has_lead(r, start);
    FZ_CHECK(event_size(r->in + start, seen - start, lead, done && seen == e) > r->cap);
    FZ_CHECK(p->lead == lead);
    /* "No byte of this input was consumed": pending is what came before. */
    check_pending(r, p, at);
    r->big = true;
    r->big_end = at;
}

/* A piece of the oversized event, ending at stream offset `end`. */
static void take_piece(run_t *r, const cg_sse_t *p, const cg_sse_event_t *ev, size_t end)
{
    FZ_CHECK(r->big && ev->raw.n >= 1 && end - ev->raw.n == r->big_end);
    FZ_CHECK(memcmp(ev->raw.p, r->in + r->big_end, ev->raw.n) == 0);
    /* The lead: the event's first byte, when nothing was pending. */
    FZ_CHECK(ev->lead == (r->big_end == r->last_end && has_lead(r, r->last_end)));
    FZ_CHECK(ev->ndata == 0 && ev->nother == 0 && ev->data.n == 0 && p->buf.len == 0);
    r->big_end = end;
    /* The pieces stop exactly at the event's end (its LF may be cut off). */
    bool done;
    size_t e = event_end(r->in, r->len, r->last_end, &done);
    FZ_CHECK(end < e || (end == e && !done) || !p->oversized);
    if (p->oversized)
        return;
    FZ_CHECK(done);
    FZ_CHECK(end == e || (end + 1 == e && r->in[end - 1] == '\r' && r->in[end] == '\n'));
    add_rec(r, r->last_end, end)->oversized = true;
    r->big = false;
}

/* Feeds one read, at stream offset `off`, until every byte is consumed. */
static void feed_read(run_t *r, cg_sse_t *p, const char *in, size_t n, size_t off)
{
    size_t pos = 0;
    for (;;) {
        cg_sse_event_t ev;
        ssize_t rc = cg_sse_feed(p, in + pos, n - pos, &ev);
        if (rc == CG_SSE_AGAIN)
            break;
        if (rc == CG_SSE_E_TOOBIG) {
            on_toobig(r, p, n - pos, off + pos);
            continue;
        }
        FZ_CHECK(rc > 0 && (size_t)rc <= n - pos);
        pos += (size_t)rc;
        if (ev.oversized)
            take_piece(r, p, &ev, off + pos);
        else
            take_event(r, p, &ev, off + pos);
        if (pos == n)
            return; /* the pending bytes are checked after the next AGAIN */
    }
    check_pending(r, p, off + n);
}

/* Tokenizes the stream in reads cut by sp (NULL: one read). */
static void run_stream(run_t *r, const uint8_t *in, size_t len, size_t cap, fz_split_t *sp)
{
    memset(r, 0, sizeof(*r));
    r->in = (const char *)in;
    r->len = len;
    r->cap = cap;
    cg_sse_t p;
    cg_sse_init(&p, cap);
    size_t off = 0;
    while (off < len) {
        size_t n = sp ? fz_split_next(sp, len - off) : len - off;
        char *read = fz_dup(in + off, n);
        feed_read(r, &p, read, n, off);
        free(read);
        off += n;
    }
    check_pending(r, &p, len);
    if (r->big) /* the stream ended inside an oversized event */
        add_rec(r, r->last_end, len)->oversized = true;
    cg_sse_free(&p);
}

static void run_free(run_t *r)
{
    free(r->ev);
    cg_buf_free(&r->bytes);
}

/* --- Whole vs split --------------------------------------------------------- */

/* Where an event ends once the LF of a CRLF cut by a read is counted in. */
static size_t logical_end(const run_t *r, size_t end)
{
    if (end > 0 && end < r->len && r->in[end - 1] == '\r' && r->in[end] == '\n')
        return end + 1;
    return end;
}

static bool same_bytes(const run_t *a, size_t ao, const run_t *b, size_t bo, size_t n)
{
    return n == 0 || memcmp(a->bytes.p + ao, b->bytes.p + bo, n) == 0;
}

static void compare_event(const run_t *w, const evrec_t *a, const run_t *s, const evrec_t *b)
{
    FZ_CHECK(logical_end(w, a->end) == a->end); /* one read never cuts a CRLF */
    FZ_CHECK(logical_end(s, b->end) == a->end);
    FZ_CHECK(a->oversized == b->oversized);
    FZ_CHECK(a->ndata == b->ndata && a->nother == b->nother);
    FZ_CHECK(a->ndatab == b->ndatab && same_bytes(w, a->data, s, b->data, a->ndatab));
    FZ_CHECK(a->ntype == b->ntype && same_bytes(w, a->type, s, b->type, a->ntype));
    FZ_CHECK(a->nid == b->nid && same_bytes(w, a->id, s, b->id, a->nid));
}

/* Events, oversized ones included, must match one for one: an event's size
 * leaves out what a read may cut off, so the cap sees no read boundary. */
static void compare_runs(const run_t *w, const run_t *s)
{
    FZ_CHECK(w->nev == s->nev);
    for (size_t i = 0; i < w->nev; i++)
        compare_event(w, &w->ev[i], s, &s->ev[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    size_t cap = caps[data[1] & 3];
    fz_split_t sp;
    fz_split_init(&sp, data[0]);
    run_t whole, split;
    run_stream(&whole, data + FZ_HEADER, size - FZ_HEADER, cap, NULL);
    run_stream(&split, data + FZ_HEADER, size - FZ_HEADER, cap, &sp);
    compare_runs(&whole, &split);
    run_free(&whole);
    run_free(&split);
    return 0;
}
