/* Checked nghttp2 calls: see h2lib.h. */
#include "h2lib.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>

cg_h2_verdict_t cg_h2_verdict(nghttp2_session *s, int32_t id, int rv, const char *what)
{
    if (rv >= 0)
        return CG_H2_OK;
    cg_log_warn(NULL, "h2 %s on stream %d: %s", what, id, nghttp2_strerror(rv));
    if (nghttp2_is_fatal(rv) || id <= 0)
        return CG_H2_CLOSE;
    rv = CG_H2_CALL(nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR));
    if (rv == 0)
        return CG_H2_RESET;
    cg_log_warn(NULL, "h2 reset of stream %d: %s", id, nghttp2_strerror(rv));
    return CG_H2_CLOSE;
}

static void no_memory(const char *what)
{
    fprintf(stderr, "citegate: out of memory allocating nghttp2's %s\n", what);
    abort();
}

nghttp2_session_callbacks *cg_h2_callbacks_new(void)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        no_memory("callbacks");
    return cbs;
}

nghttp2_option *cg_h2_option_new(void)
{
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0)
        no_memory("options");
    return opt;
}
