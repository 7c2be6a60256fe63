/* Incremental SSE tokenizer: see include/citegate/sse.h for the contract. */
#include "citegate/sse.h"

#include <string.h>

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
}

/* Finds the first CR or LF in s[0..n). */
static const char *find_eol(const char *s, size_t n)
{
    const char *lf = memchr(s, '\n', n);
    const char *cr = memchr(s, '\r', lf ? (size_t)(lf - s) : n);
    return cr ? cr : lf;
}

ssize_t cg_sse_feed(cg_sse_t *p, const char *in, size_t len, cg_sse_event_t *ev)
{
    if (p->failed)
        return CG_SSE_E_TOOBIG;
    if (p->delivered) {
        p->delivered = false;
        p->buffered = false;
        p->buf.len = 0;
        p->join.len = 0;
        reset_event(p);
    }
    if (len == 0)
        return CG_SSE_AGAIN;

    size_t pos = 0;     /* next unscanned input byte */
    size_t kept = p->buf.len; /* on failure, nothing of this input is taken */
    size_t start = 0;   /* first input byte of the event when not buffered */
    if (p->cr) {
        p->cr = false;
        if (in[0] == '\n') {
            /* Second half of a CRLF split across reads. */
            if (p->buffered) {
                if (p->buf.len + 1 > p->max_event)
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
        const char *base;
        size_t line_end;
        if (p->buffered) {
            if (p->buf.len + (next - pos) > p->max_event)
                goto toobig;
            size_t at = p->buf.len;
            cg_buf_put(&p->buf, in + pos, next - pos);
            base = p->buf.p;
            line_end = at + (end - pos);
        } else {
            if (next - start > p->max_event)
                goto toobig;
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
        if (have + (len - from) > p->max_event)
            goto toobig;
        if (p->buf.cap == 0)
            cg_buf_reserve(&p->buf, 1024);
        cg_buf_put(&p->buf, in + from, len - from);
        p->buffered = true;
    }
    return CG_SSE_AGAIN;

toobig:
    p->buf.len = kept;
    p->failed = true;
    return CG_SSE_E_TOOBIG;
}
