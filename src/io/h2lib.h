/*
 * Calls into nghttp2, checked in one place, as nghttpx checks every one.
 * A failed call is a verdict for the connection that made it:
 *   CG_H2_RESET  a refusal that concerns one stream: that stream is reset
 *                (RST_STREAM INTERNAL_ERROR is queued), the connection goes on;
 *   CG_H2_CLOSE  a fatal error (nghttp2_is_fatal), a refusal that concerns
 *                the whole session, or a reset that was refused too: the
 *                caller closes the connection with CG_E_PROTOCOL.
 * Both server (h2.c) and upstream (up_h2.c) connections use it.
 *
 * Failure injection (fault.h): in a CITEGATE_FAULTS build,
 * CITEGATE_FAULT_H2=N makes the Nth checked call fail with a non-fatal
 * error instead of being made, and CITEGATE_FAULT_H2_FATAL=N with a fatal
 * one (NGHTTP2_ERR_NOMEM).
 */
#ifndef CITEGATE_IO_H2LIB_H
#define CITEGATE_IO_H2LIB_H

#include "fault.h"

#include <nghttp2/nghttp2.h>

typedef enum { CG_H2_OK, CG_H2_RESET, CG_H2_CLOSE } cg_h2_verdict_t;

/* A checked call: the injected failure stands in for the call when there
 * is one, so nghttp2's state never disagrees with what the caller saw. */
#define CG_H2_CALL(call) (cg_fault_h2() ?: (call))

/* The verdict on rv, the result of call `what` for stream id (0: the
 * session's own). A failure is logged; a stream's reset is queued. */
cg_h2_verdict_t cg_h2_verdict(nghttp2_session *s, int32_t id, int rv, const char *what);

/* nghttp2's callback and option tables: out of memory here aborts, as
 * every allocation does (common.h). */
nghttp2_session_callbacks *cg_h2_callbacks_new(void);
nghttp2_option *cg_h2_option_new(void);

#endif
