/* The admin paths (SPEC §4, §8, §10): /healthz, /readyz, /metrics,
 * /v1/citations/stats and /v1/citations/patterns. */
#ifndef CITEGATE_IO_ADMIN_H
#define CITEGATE_IO_ADMIN_H

#include "citegate/common.h"
#include "hdrs.h"
#include "ctx.h"

typedef struct cg_admin_resp {
    int status;
    const char *ctype;
    const char *allow; /* the Allow header of a 405, else NULL */
    cg_buf_t body;
} cg_admin_resp_t;

typedef void (*cg_admin_done_fn)(void *arg, cg_admin_resp_t *resp);
typedef struct cg_admin_wait cg_admin_wait_t;

/*
 * Answers one admin request (method: llhttp_method_t). Returns NULL with
 * resp filled. For a query a tracking store answers later (PostgreSQL) it
 * returns a wait instead: done(arg, resp) runs from the loop once the answer
 * is there (within about 2 s), never from inside this call; call
 * cg_admin_cancel if arg goes away first. The receiver of resp frees its body.
 */
cg_admin_wait_t *cg_admin_respond(cg_ctx_t *ctx, int method, const char *url, size_t url_len,
                                  const cg_hdrs_t *hdrs, cg_admin_resp_t *resp,
                                  cg_admin_done_fn done, void *arg);
/* Forgets a wait: done will not be called. */
void cg_admin_cancel(cg_admin_wait_t *wait);

#endif
