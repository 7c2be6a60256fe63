/* Small HTTP facts shared by both client protocols and the exchange. */
#ifndef CITEGATE_IO_HTTP_H
#define CITEGATE_IO_HTTP_H

#include "hdrs.h"

/* A client request, as either protocol delivers it. An exchange takes it
 * over whole (cg_reqmsg_move), so nothing of it stays borrowed from a
 * connection that may go away. */
/* A method llhttp has no number for: its name is in method_name. */
#define CG_METHOD_OTHER 1000

typedef struct cg_reqmsg {
    int method;           /* llhttp_method_t, CG_METHOD_OTHER, or -1 when not a method */
    cg_buf_t method_name; /* NUL-terminated, with CG_METHOD_OTHER */
    cg_buf_t url;   /* path and query */
    cg_hdrs_t hdrs; /* without pseudo-headers */
    cg_buf_t body;
    bool http10, keep_alive;
} cg_reqmsg_t;

/* Moves *from into *to (which must be empty) and leaves *from empty. */
void cg_reqmsg_move(cg_reqmsg_t *to, cg_reqmsg_t *from);
void cg_reqmsg_reset(cg_reqmsg_t *m);
void cg_reqmsg_free(cg_reqmsg_t *m);
/* The method as the client sent it ("?" when it is not one). */
const char *cg_reqmsg_method(const cg_reqmsg_t *m);

const char *cg_status_text(int status);
/* Appends the OpenAI-style error body (SPEC §11). */
void cg_error_json(cg_buf_t *b, const char *type, const char *code, const char *msg);
/* Does a response with this status, to this method, carry no body? */
bool cg_status_no_body(int status, int method);

#endif
