/* Upstream request serializers: see upreq.h. */
#include "upreq.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cg_upreq_free(cg_upreq_t *r)
{
    cg_buf_free(&r->target);
    cg_hdrs_free(&r->hdrs);
    cg_buf_free(&r->body);
}

void cg_upreq_h1(const cg_upreq_t *r, const char *authority, cg_buf_t *out)
{
    cg_buf_printf(out, "%s %.*s HTTP/1.1\r\nHost: %s\r\n", r->method, (int)r->target.len,
                  r->target.p, authority);
    for (size_t i = 0; i < r->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&r->hdrs, i), v = cg_hdr_value(&r->hdrs, i);
        cg_buf_put(out, name.p, name.n);
        cg_buf_puts(out, ": ");
        cg_buf_put(out, v.p, v.n);
        cg_buf_puts(out, "\r\n");
    }
    if (r->has_body || r->body.len > 0)
        cg_buf_printf(out, "Content-Length: %zu\r\n", r->body.len);
    cg_buf_puts(out, "\r\n");
    cg_buf_put(out, r->body.p, r->body.len);
}

static nghttp2_nv nv(const char *name, size_t nl, const char *value, size_t vl)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, nl, vl, NGHTTP2_NV_FLAG_NONE};
}

nghttp2_nv *cg_upreq_nv(const cg_upreq_t *r, const char *scheme, const char *authority,
                        cg_buf_t *names, size_t *count)
{
    /* Lower-cased names first, all in one buffer, so no pointer into it
     * moves while the array is built. */
    names->len = 0;
    for (size_t i = 0; i < r->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&r->hdrs, i);
        char *d = cg_buf_reserve(names, name.n);
        for (size_t k = 0; k < name.n; k++)
            d[k] = (char)tolower((unsigned char)name.p[k]);
        names->len += name.n;
    }
    char *clen = cg_buf_reserve(names, 24);
    int cl = snprintf(clen, 24, "%zu", r->body.len);
    names->len += 24;
    nghttp2_nv *v = cg_xcalloc(r->hdrs.n + 5, sizeof(nghttp2_nv));
    size_t k = 0, at = 0;
    v[k++] = nv(CG_STRLIT(":method"), r->method, strlen(r->method));
    v[k++] = nv(CG_STRLIT(":path"), r->target.p, r->target.len);
    v[k++] = nv(CG_STRLIT(":scheme"), scheme, strlen(scheme));
    v[k++] = nv(CG_STRLIT(":authority"), authority, strlen(authority));
    for (size_t i = 0; i < r->hdrs.n; i++) {
        cg_span_t name = cg_hdr_name(&r->hdrs, i), value = cg_hdr_value(&r->hdrs, i);
        v[k++] = nv(names->p + at, name.n, value.p, value.n);
        at += name.n;
    }
    if (r->has_body || r->body.len > 0)
        v[k++] = nv(CG_STRLIT("content-length"), names->p + at, (size_t)cl);
    *count = k;
    return v;
}
