/* Query parameters of the PostgreSQL store: see pgtext.h. */
#include "pgtext.h"

#include <math.h>
#include <string.h>
#include <strings.h>

void cg_pg_put_utf8(cg_buf_t *b, const char *s, size_t n)
{
    cg_utf8_repair(b, s, n);
}

void cg_pg_array_elem(cg_buf_t *b, const char *s, size_t n)
{
    cg_buf_t clean = {0};
    cg_pg_put_utf8(&clean, s, n);
    cg_buf_putc(b, '"');
    for (size_t i = 0; i < clean.len; i++) {
        if (clean.p[i] == '"' || clean.p[i] == '\\')
            cg_buf_putc(b, '\\');
        cg_buf_putc(b, clean.p[i]);
    }
    cg_buf_putc(b, '"');
    cg_buf_free(&clean);
}

/* An upper bound of the array text one pattern adds: every byte escaped or
 * replaced, plus the numbers. */
static size_t row_bytes(const cg_pattern_t *p)
{
    size_t q = p->query ? strlen(p->query) : 0, ids = p->chunk_ids ? strlen(p->chunk_ids) : 2;
    if (q > CG_MEMORY_MAX_QUERY)
        q = CG_MEMORY_MAX_QUERY;
    if (ids > CG_MEMORY_MAX_CHUNK_IDS)
        ids = CG_MEMORY_MAX_CHUNK_IDS;
    size_t vec = p->vec.v ? (size_t)p->vec.dim * 8 + (p->vec.model ? strlen(p->vec.model) : 0) : 0;
    return 3 * (q + ids) + vec + 128;
}

size_t cg_pg_chunk(cg_pattern_t *const *p, size_t n)
{
    size_t rows = 0, bytes = 0;
    while (rows < n && rows < CG_PG_MAX_ROWS) {
        size_t add = row_bytes(p[rows]);
        if (rows > 0 && bytes + add > CG_PG_MAX_BYTES)
            break;
        bytes += add;
        rows++;
    }
    return rows;
}

static void put_number(cg_buf_t *b, double v)
{
    cg_buf_printf(b, "%.17g", v);
}

/* The vector as the hex of its stored form (decode(…, 'hex') in the
 * INSERT), and its model; NULL and NULL without one. */
static void put_vector(cg_pg_rows_t *r, const cg_vector_t *v)
{
    if (v->v == NULL || v->dim == 0 || v->model == NULL) {
        cg_buf_puts(&r->col[CG_PG_VEC], "NULL");
        cg_buf_puts(&r->col[CG_PG_MODEL], "NULL");
        return;
    }
    static const char hex[] = "0123456789abcdef";
    cg_buf_t packed = {0};
    cg_vector_pack(v->v, v->dim, &packed);
    for (size_t i = 0; i < packed.len; i++) {
        unsigned char c = (unsigned char)packed.p[i];
        cg_buf_putc(&r->col[CG_PG_VEC], hex[c >> 4]);
        cg_buf_putc(&r->col[CG_PG_VEC], hex[c & 15]);
    }
    cg_buf_free(&packed);
    cg_pg_array_elem(&r->col[CG_PG_MODEL], v->model, strlen(v->model));
}

static void put_row(cg_pg_rows_t *r, const cg_pattern_t *p)
{
    const char *q = p->query ? p->query : "";
    cg_buf_t tmp = {0};
    size_t idn;
    const char *ids = cg_store_ids_text(p->chunk_ids, &tmp, &idn);
    cg_buf_puts(&r->col[CG_PG_KIND], cg_pattern_kind_name(p->kind));
    cg_pg_array_elem(&r->col[CG_PG_QUERY], q, cg_store_query_len(q, strlen(q)));
    put_number(&r->col[CG_PG_RATE], isfinite(p->citation_rate) ? p->citation_rate : 0);
    if (p->avg_score >= 0 && isfinite(p->avg_score))
        put_number(&r->col[CG_PG_SCORE], p->avg_score);
    else
        cg_buf_puts(&r->col[CG_PG_SCORE], "NULL");
    cg_buf_printf(&r->col[CG_PG_CITATIONS], "%u", p->citations);
    cg_buf_printf(&r->col[CG_PG_AVAILABLE], "%u", p->available);
    cg_pg_array_elem(&r->col[CG_PG_IDS], ids, idn);
    cg_buf_printf(&r->col[CG_PG_CREATED], "%lld", (long long)p->created_at);
    put_vector(r, &p->vec);
    cg_buf_free(&tmp);
}

void cg_pg_rows_build(cg_pg_rows_t *rows, cg_pattern_t *const *p, size_t n)
{
    for (int c = 0; c < CG_PG_NCOLS; c++) {
        rows->col[c].len = 0;
        cg_buf_putc(&rows->col[c], '{');
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            for (int c = 0; c < CG_PG_NCOLS; c++)
                cg_buf_putc(&rows->col[c], ',');
        put_row(rows, p[i]);
    }
    for (int c = 0; c < CG_PG_NCOLS; c++) {
        cg_buf_putc(&rows->col[c], '}');
        cg_buf_putc(&rows->col[c], '\0');
    }
}

void cg_pg_rows_free(cg_pg_rows_t *rows)
{
    for (int c = 0; c < CG_PG_NCOLS; c++)
        cg_buf_free(&rows->col[c]);
}

int cg_pg_or_query(const char *q, cg_buf_t *out)
{
    size_t n = cg_store_query_len(q, strlen(q));
    size_t pos = 0, start, len;
    int words = 0;
    while (words < CG_STORE_MAX_WORDS && (len = cg_store_next_word(q, n, &pos, &start)) > 0) {
        if (len == strlen("or") && CG_HAS_IPREFIX(q + start, "or"))
            continue;
        if (words++ > 0)
            cg_buf_puts(out, " or ");
        cg_pg_put_utf8(out, q + start, len);
    }
    cg_buf_putc(out, '\0');
    return words;
}
