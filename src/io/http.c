/* HTTP helpers: see http.h. */
#include "http.h"

#include "citegate/json.h"

#include <llhttp.h>
#include <string.h>

void cg_reqmsg_move(cg_reqmsg_t *to, cg_reqmsg_t *from)
{
    *to = *from;
    memset(from, 0, sizeof(*from));
    from->keep_alive = true;
}

void cg_reqmsg_reset(cg_reqmsg_t *m)
{
    m->url.len = 0;
    m->method_name.len = 0;
    cg_hdrs_reset(&m->hdrs);
    m->body.len = 0;
}

void cg_reqmsg_free(cg_reqmsg_t *m)
{
    cg_buf_free(&m->url);
    cg_buf_free(&m->method_name);
    cg_hdrs_free(&m->hdrs);
    cg_buf_free(&m->body);
}

const char *cg_reqmsg_method(const cg_reqmsg_t *m)
{
    if (m->method == CG_METHOD_OTHER)
        return m->method_name.p;
    return m->method >= 0 ? llhttp_method_name((llhttp_method_t)m->method) : "?";
}

const char *cg_status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
    }
}

void cg_error_json(cg_buf_t *b, const char *type, const char *code, const char *msg)
{
    cg_buf_puts(b, "{\"error\":{\"message\":");
    cg_json_put_cstr(b, msg);
    cg_buf_puts(b, ",\"type\":");
    cg_json_put_cstr(b, type);
    cg_buf_puts(b, ",\"code\":");
    cg_json_put_cstr(b, code);
    cg_buf_puts(b, "}}");
}

bool cg_status_no_body(int status, int method)
{
    return status < 200 || status == 204 || status == 304 || method == HTTP_HEAD;
}
