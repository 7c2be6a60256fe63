/* Small HTTP facts shared by both client protocols and the exchange. */
#ifndef CITEGATE_IO_HTTP_H
#define CITEGATE_IO_HTTP_H

#include "hdrs.h"

/* A client request, as either protocol delivers it. An exchange takes it
 * over whole (cg_reqmsg_move), so nothing of it stays borrowed from a
 * connection that may go away. */
typedef struct cg_reqmsg {
    int method;     /* llhttp_method_t; -1 when not one we know */
    cg_buf_t url;   /* path and query */
    cg_hdrs_t hdrs; /* without pseudo-headers */
    cg_buf_t body;
    bool http10, keep_alive;
} cg_reqmsg_t;

/* Moves *from into *to (which must be empty) and leaves *from empty. */
void cg_reqmsg_move(cg_reqmsg_t *to, cg_reqmsg_t *from);
void cg_reqmsg_reset(cg_reqmsg_t *m);
void cg_reqmsg_free(cg_reqmsg_t *m);

const char *cg_status_text(int status);
/* Appends the OpenAI-style error body (SPEC §11). */
void cg_error_json(cg_buf_t *b, const char *type, const char *code, const char *msg);
/* Does a response with this status, to this method, carry no body? */
bool cg_status_no_body(int status, int method);

#endif
