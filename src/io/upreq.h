/*
 * The request citegate sends upstream, in no protocol's syntax: method,
 * target, header fields and body. Each upstream pool serializes it its own
 * way; no field is dropped on the way, whatever their number.
 */
#ifndef CITEGATE_IO_UPREQ_H
#define CITEGATE_IO_UPREQ_H

#include "hdrs.h"

#include <nghttp2/nghttp2.h>

typedef struct cg_upreq {
    const char *method; /* "POST", ... */
    cg_buf_t target;    /* path and query, with the upstream's base path */
    cg_hdrs_t hdrs;     /* end-to-end fields, without Host and framing */
    cg_buf_t body;
    bool has_body;  /* send a Content-Length even when the body is empty */
    bool too_large; /* a field did not fit: the request is refused, 431 */
} cg_upreq_t;

void cg_upreq_free(cg_upreq_t *r);

/* HTTP/1.1: request line, Host, the fields, Content-Length, then the body. */
void cg_upreq_h1(const cg_upreq_t *r, const char *authority, cg_buf_t *out);

/* HTTP/2: the pseudo-headers, then the fields with lower-case names (kept
 * in `names`), content-length when there is a body. Values point into r;
 * the array (free() it) is valid while r and names are. */
nghttp2_nv *cg_upreq_nv(const cg_upreq_t *r, const char *scheme, const char *authority,
                        cg_buf_t *names, size_t *count);

#endif
