/* Incremental SSE tokenizer: see include/citegate/sse.h for the contract. */
#include "citegate/sse.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The straddle buffer's first size, and what it keeps between events. */
#define SSE_FIRST_BUF 1024

void cg_sse_init(cg_sse_t *p, size_t max_event)
{
    memset(p, 0, sizeof(*p));
    p->max_event = max_event;
}

void cg_sse_free(cg_sse_t *p)
{
    cg_buf_free(&p->buf);
    cg_buf_free(&p->join);
}

static void reset_event(cg_sse_t *p)
{
    p->line = 0;
    p->ndata = p->nother = 0;
    p->data_off = p->data_len = p->type_off = p->type_len = p->id_off = p->id_len = 0;
    p->lead = 0;
}

cg_span_t cg_sse_pending(const cg_sse_t *p)
{
    if (p->delivered || !p->buffered)
        return cg_span(p->buf.p, 0);
    return cg_span(p->buf.p, p->buf.len);
}

/* Records one complete line [ls, le) of the event whose bytes start at base. */
static void take_line(cg_sse_t *p, const char *base, size_t ls, size_t le)
{
    const char *line = base + ls;
    size_t n = le - ls;
    if (n > 0 && line[0] == ':') {
        p->nother++;
        return;
    }
    const char *colon = memchr(line, ':', n);
    size_t name_len = colon ? (size_t)(colon - line) : n;
    size_t voff = colon ? name_len + 1 : n;
    if (voff < n && line[voff] == ' ')
        voff++;
    size_t vlen = n - voff;

    if (name_len == 4 && memcmp(line, "data", 4) == 0) {
        p->ndata++;
        if (p->ndata == 1) {
            p->data_off = ls + voff;
            p->data_len = vlen;
            return;
        }
        if (p->ndata == 2) {
            p->join.len = 0;
            cg_buf_put(&p->join, base + p->data_off, p->data_len);
        }
        cg_buf_putc(&p->join, '\n');
        cg_buf_put(&p->join, line + voff, vlen);
        return;
    }
    p->nother++;
    if (name_len == 5 && memcmp(line, "event", 5) == 0) {
        p->type_off = ls + voff;
        p->type_len = vlen;
    } else if (name_len == 2 && memcmp(line, "id", 2) == 0 && !memchr(line + voff, '\0', vlen)) {
        p->id_off = ls + voff;
        p->id_len = vlen;
    }
}

static void fill_event(cg_sse_t *p, const char *base, size_t len, cg_sse_event_t *ev)
{
    ev->raw = cg_span(base, len);
    if (p->ndata == 0)
        ev->data = cg_span(base, 0);
    else if (p->ndata == 1)
        ev->data = cg_span(base + p->data_off, p->data_len);
    else
        ev->data = cg_span(p->join.p, p->join.len);
    ev->type = cg_span(base + p->type_off, p->type_len);
    ev->id = cg_span(base + p->id_off, p->id_len);
    ev->ndata = p->ndata;
    ev->nother = p->nother;
    ev->lead = p->lead;
    ev->oversized = false;
}

/*
 * Finds the first CR or LF in s[0..n). Lines are short (a field name and a
 * value of tens to hundreds of bytes), so one pass that looks for both in
 * 16 bytes at a time costs less than two memchr calls, whose setup
 * outweighs their speed at these lengths.
 */
#if defined(__SSE2__)
static const char *find_eol(const char *s, size_t n)
{
    const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, lf), _mm_cmpeq_epi8(v, cr)));
        if (m)
            return s + i + __builtin_ctz(m);
    }
    for (; i < n; i++)
        if (s[i] == '\n' || s[i] == '\r')
            return s + i;
    return NULL;
}
#else
static const char *find_eol(const char *s, size_t n)
{
    const char *lf = memchr(s, '\n', n);
    const char *cr = memchr(s, '\r', lf ? (size_t)(lf - s) : n);
    return cr ? cr : lf;
}
#endif

/*
 * Is an event that has taken n bytes (its lead included) over the cap? Its
 * size leaves out its lead and the LF of a CRLF that ends it: a read may cut
 * either off, and whether an event is too big must not depend on where
 * reads end.
 */
static bool over(const cg_sse_t *p, size_t n)
{
    return n - p->lead > p->max_event;
}

/*
 * The event being read is over the cap: it goes out in pieces, from the
 * first byte of this input, which nothing has taken yet. That input is
 * scanned again from the state before it: the bytes kept from earlier
 * reads, whether they end in a CR that ended a line (cr) and whether they
 * end a line at all (bol). An event that begins with a lead LF has no
 * earlier bytes, and keeps that LF as its lead instead.
 */
static void begin_oversized(cg_sse_t *p, size_t kept, bool cr, bool bol)
{
    p->buf.len = kept;
    p->oversized = true;
    p->bom_checked = true;
    p->cr = cr && p->buffered;
    p->bol = bol;
}

/* The next piece of an oversized event: the bytes of in that belong to it,
 * through the blank line that ends it. */
static ssize_t oversized_piece(cg_sse_t *p, const char *in, size_t len, cg_sse_event_t *ev)
{
    memset(ev, 0, sizeof(*ev));
    size_t i = 0;
    if (p->buffered) {
        /* The first piece: the bytes before it were pending at TOOBIG. */
        p->buffered = false;
        p->buf.len = 0;
        p->join.len = 0;
    } else if (p->lead) {
        ev->lead = 1;
        i = 1;
    }
    p->lead = 0;
    if (p->cr && in[i] == '\n')
        i++; /* the LF of a CRLF whose CR ended a line of this event */
    p->cr = false;
    while (i < len) {
        const char *eol = find_eol(in + i, len - i);
        if (eol == NULL) {
            p->bol = false;
            i = len;
            break;
        }
        size_t end = (size_t)(eol - in);
        bool blank = p->bol && end == i;
        p->bol = true;
        i = end + 1;
        if (*eol == '\r' && i == len)
            p->cr = true;
        else if (*eol == '\r' && in[i] == '\n')
            i++;
        if (blank) {
            p->oversized = false;
            reset_event(p);
            break;
        }
    }
    ev->raw = cg_span(in, i);
    ev->oversized = true;
    return (ssize_t)i;
}

ssize_t cg_sse_feed(cg_sse_t *p, const char *in, size_t len, cg_sse_event_t *ev)
{
    if (p->delivered) {
        p->delivered = false;
        p->buffered = false;
        p->buf.len = 0;
        /* The caller is done with the event: a large one must not pin its
         * bytes in every stream that once saw one. */
        if (p->buf.cap > SSE_FIRST_BUF)
            cg_buf_free(&p->buf);
        p->join.len = 0;
        reset_event(p);
    }
    if (len == 0)
        return CG_SSE_AGAIN;
    if (p->oversized)
        return oversized_piece(p, in, len, ev);

    size_t pos = 0;     /* next unscanned input byte */
    size_t start = 0;   /* first input byte of the event when not buffered */
    /* The state before this input, to scan it again when the event is too big. */
    size_t kept = p->buf.len;
    bool cr = p->cr, bol = !p->buffered || p->line == p->buf.len;
    if (p->cr) {
        p->cr = false;
        if (in[0] == '\n') {
            /* Second half of a CRLF split across reads. */
            if (p->buffered) {
                if (over(p, p->buf.len + 1))
                    goto toobig;
                cg_buf_putc(&p->buf, '\n');
                p->line = p->buf.len;
            } else {
                p->lead = 1;
                p->line = 1;
            }
            pos = 1;
        }
    }

    while (pos < len) {
        const char *eol = find_eol(in + pos, len - pos);
        if (eol == NULL)
            break;
        size_t end = (size_t)(eol - in); /* line end, exclusive of the EOL */
        size_t next = end + 1;
        if (*eol == '\r') {
            if (next < len) {
                if (in[next] == '\n')
                    next++;
            } else {
                p->cr = true;
            }
        }
        size_t have = p->buffered ? p->buf.len : 0, from = p->buffered ? pos : start;
        bool blank = end == pos && (!p->buffered || p->line == p->buf.len);
        if (over(p, have + (next - from) - (blank && next - end == 2)))
            goto toobig; /* (the LF of a CRLF that ends the event does not count) */
        const char *base;
        size_t line_end;
        if (p->buffered) {
            cg_buf_put(&p->buf, in + pos, next - pos);
            base = p->buf.p;
            line_end = have + (end - pos);
        } else {
            base = in + start;
            line_end = end - start;
        }
        size_t line_start = p->line;
        size_t evlen = p->buffered ? p->buf.len : next - start;
        pos = next;
        p->line = evlen;
        if (!p->bom_checked) {
            /* A byte order mark may only open the stream's first line. */
            p->bom_checked = true;
            if (line_end - line_start >= 3 && memcmp(base + line_start, "\xEF\xBB\xBF", 3) == 0)
                line_start += 3;
        }
        if (line_end == line_start) {
            fill_event(p, base, evlen, ev);
            if (p->buffered)
                p->delivered = true;
            else
                reset_event(p);
            return (ssize_t)pos;
        }
        take_line(p, base, line_start, line_end);
    }

    /* Input ends inside an event: keep its bytes for the next read. */
    if (pos < len || (!p->buffered && pos > start)) {
        size_t from = p->buffered ? pos : start;
        size_t have = p->buffered ? p->buf.len : 0;
        if (over(p, have + (len - from)))
            goto toobig;
        if (p->buf.cap == 0)
            cg_buf_reserve(&p->buf, SSE_FIRST_BUF);
        cg_buf_put(&p->buf, in + from, len - from);
        p->buffered = true;
    }
    return CG_SSE_AGAIN;

toobig:
    begin_oversized(p, kept, cr, bol);
    return CG_SSE_E_TOOBIG;
}
