/* Writing a transformer's output: see emit.h. */
#include "emit.h"

#include <stdlib.h>
#include <string.h>

/* --- Output segments ------------------------------------------------------ */

static cg_out_seg_t *out_push(cg_out_t *o)
{
    o->seg = cg_grow(o->seg, o->nseg, &o->cap, 64, sizeof(cg_out_seg_t));
    return &o->seg[o->nseg++];
}

void cg__emit_span(cg_out_t *o, const char *p, size_t n)
{
    if (n == 0)
        return;
    if (o->nseg) {
        cg_out_seg_t *last = &o->seg[o->nseg - 1];
        if (last->p && last->p + last->n == p) {
            last->n += n;
            return;
        }
    }
    cg_out_seg_t *s = out_push(o);
    s->p = p;
    s->off = 0;
    s->n = n;
}

void cg__emit_arena_since(cg_out_t *o, size_t from)
{
    size_t n = o->arena.len - from;
    if (n == 0)
        return;
    if (o->nseg) {
        cg_out_seg_t *last = &o->seg[o->nseg - 1];
        if (last->p == NULL && last->off + last->n == from) {
            last->n += n;
            return;
        }
    }
    cg_out_seg_t *s = out_push(o);
    s->p = NULL;
    s->off = from;
    s->n = n;
}

void cg__emit_copy(cg_out_t *o, const char *p, size_t n)
{
    size_t from = o->arena.len;
    cg_buf_put(&o->arena, p, n);
    cg__emit_arena_since(o, from);
}

void cg__emit_str(cg_out_t *o, const char *s)
{
    cg__emit_copy(o, s, strlen(s));
}

/* --- Chunks of our own ------------------------------------------------------ */

/* Writes the "id", "object", "created", "model" members, copied from the
 * upstream's chunks (raw JSON values) or empty ones. */
void cg__emit_meta(const cg_xform_t *x, cg_buf_t *b)
{
    cg_buf_puts(b, "\"id\":");
    if (x->meta_id.len)
        cg_buf_put(b, x->meta_id.p, x->meta_id.len);
    else
        cg_buf_puts(b, "\"\"");
    cg_buf_puts(b, ",\"object\":\"chat.completion.chunk\",\"created\":");
    if (x->meta_created.len)
        cg_buf_put(b, x->meta_created.p, x->meta_created.len);
    else
        cg_buf_putc(b, '0');
    cg_buf_puts(b, ",\"model\":");
    if (x->meta_model.len)
        cg_buf_put(b, x->meta_model.p, x->meta_model.len);
    else
        cg_buf_puts(b, "\"\"");
}

void cg__emit_chunk_open(const cg_xform_t *x, cg_buf_t *b)
{
    cg_buf_puts(b, "data: {");
    cg__emit_meta(x, b);
}

/* Decimal digits of n: written per chunk, where a printf would cost more
 * than the rest of the chunk. */
static void put_size(cg_buf_t *b, size_t n)
{
    char d[24];
    size_t i = sizeof(d);
    do {
        d[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    cg_buf_put(b, d + i, sizeof(d) - i);
}

void cg__emit_content_open(const cg_xform_t *x, cg_buf_t *b, size_t index)
{
    static const char choices[] = ",\"choices\":[{\"index\":";
    static const char delta[] = ",\"delta\":{\"content\":\"";
    cg__emit_chunk_open(x, b);
    cg_buf_put(b, choices, sizeof(choices) - 1);
    put_size(b, index);
    cg_buf_put(b, delta, sizeof(delta) - 1);
}

const char cg__emit_content_close[] = "\"},\"finish_reason\":null}]}\n\n";

/* --- The current event's data ---------------------------------------------- */

void cg__emit_data_until(cg_xform_t *x, size_t to)
{
    const char *d = x->json.js;
    size_t from = x->cur;
    while (x->next_cut < x->ncuts && x->cuts[x->next_cut].start < to) {
        const cg_cut_t *c = &x->cuts[x->next_cut];
        if (from < c->start)
            x->put(x, d + from, c->start - from);
        if (from < c->end)
            from = c->end;
        if (c->end > to)
            break; /* `to` lies inside this cut: the next call still skips its rest */
        x->next_cut++;
    }
    if (to > from)
        x->put(x, d + from, to - from);
    x->cur = to;
}

void cg__emit_drop_content(cg_xform_t *x, int content)
{
    cg__emit_data_until(x, (size_t)x->json.tok[content].start);
    x->cur = (size_t)x->json.tok[content].end;
    x->changed = true;
}

/* --- Cited citations --------------------------------------------------------- */

size_t cg__emit_each_cited(cg_xform_t *x, cg__cited_fn fn, void *arg)
{
    size_t n = 0;
    if (!x->cites_set || x->cites.n == 0)
        return 0;
    /* A citation both mentioned and referenced has two records: once. */
    uint8_t seen[CG_CITE_MAX] = {0};
    for (size_t i = 0; i < x->nrefs; i++) {
        if (!cg__refrec_cites(x, &x->refs[i]))
            continue;
        const cg_citation_t *c = cg_cites_find(&x->cites, cg__refrec_n(&x->refs[i]));
        if (c == NULL || seen[c - x->cites.v])
            continue;
        seen[c - x->cites.v] = 1;
        if (fn)
            fn(x, c, arg);
        n++;
    }
    return n;
}
