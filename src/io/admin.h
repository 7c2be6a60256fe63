/* The admin paths (SPEC §4, §8, §10): /healthz, /readyz, /metrics,
 * /v1/citations/stats and /v1/citations/patterns. */
#ifndef CITEGATE_IO_ADMIN_H
#define CITEGATE_IO_ADMIN_H

#include "citegate/common.h"
#include "worker.h"

typedef struct cg_admin_resp {
    int status;
    const char *ctype;
    cg_buf_t body;
} cg_admin_resp_t;

/* Answers one admin request (method: llhttp_method_t). Free resp->body. */
void cg_admin_respond(cg_worker_t *w, int method, const char *url, size_t url_len,
                      cg_admin_resp_t *resp);
/* Closes what the admin paths opened (the semantic-memory reader). */
void cg_admin_close(cg_worker_t *w);

#endif
