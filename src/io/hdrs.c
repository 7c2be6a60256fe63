/* Header field lists: see hdrs.h. */
#include "hdrs.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void cg_hdrs_reset(cg_hdrs_t *h)
{
    h->buf.len = 0;
    h->n = 0;
    h->in_value = false;
}

void cg_hdrs_free(cg_hdrs_t *h)
{
    bool outgoing = h->outgoing;
    cg_buf_free(&h->buf);
    free(h->v);
    memset(h, 0, sizeof(*h));
    h->outgoing = outgoing;
}

size_t cg_hdrs_limit(const cg_hdrs_t *h)
{
    return CG_MAX_HEADER_BYTES + (h->outgoing ? CG_OWN_HEADER_BYTES : 0);
}

int cg_hdrs_on_field(cg_hdrs_t *h, const char *p, size_t n)
{
    if (h->buf.len + n > cg_hdrs_limit(h))
        return -1;
    if (h->n == 0 || h->in_value) {
        /* The buffer exists once there is a field, even one of empty name
         * and value: offsets into it are then always into memory. */
        cg_buf_reserve(&h->buf, 1);
        h->v = cg_grow(h->v, h->n, &h->cap, 16, sizeof(cg_hdr_t));
        h->v[h->n++] = (cg_hdr_t){h->buf.len, 0, 0, 0};
        h->in_value = false;
    }
    cg_buf_put(&h->buf, p, n);
    h->v[h->n - 1].name_len += n;
    return 0;
}

int cg_hdrs_on_value(cg_hdrs_t *h, const char *p, size_t n)
{
    if (h->n == 0 || h->buf.len + n > cg_hdrs_limit(h))
        return -1;
    cg_hdr_t *x = &h->v[h->n - 1];
    if (!h->in_value) {
        x->value = h->buf.len;
        h->in_value = true;
    }
    cg_buf_put(&h->buf, p, n);
    x->value_len += n;
    return 0;
}

int cg_hdrs_add(cg_hdrs_t *h, const char *name, size_t nl, const char *value, size_t vl)
{
    /* Whole or not at all: half a field would take the next one's name
     * as the rest of its own. */
    if (h->buf.len + nl + vl > cg_hdrs_limit(h))
        return -1;
    cg_hdrs_on_field(h, name, nl);
    h->in_value = false; /* an empty value still ends the field */
    cg_hdrs_on_value(h, value, vl);
    h->in_value = true;
    return 0;
}

int cg_hdrs_add_str(cg_hdrs_t *h, const char *name, const char *value)
{
    return cg_hdrs_add(h, name, strlen(name), value, strlen(value));
}

cg_span_t cg_hdr_name(const cg_hdrs_t *h, size_t i)
{
    return cg_span(h->buf.p + h->v[i].name, h->v[i].name_len);
}

cg_span_t cg_hdr_value(const cg_hdrs_t *h, size_t i)
{
    return cg_span(h->buf.p + h->v[i].value, h->v[i].value_len);
}

bool cg_span_ieq(cg_span_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

cg_span_t cg_hdrs_get(const cg_hdrs_t *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (cg_span_ieq(cg_hdr_name(h, i), name))
            return cg_hdr_value(h, i);
    return cg_span(NULL, 0);
}

/* Does the comma-separated list `list` contain the token `name`? */
static bool list_has(cg_span_t list, cg_span_t name)
{
    size_t i = 0;
    while (i < list.n) {
        while (i < list.n && (list.p[i] == ' ' || list.p[i] == ',' || list.p[i] == '\t'))
            i++;
        size_t s = i;
        while (i < list.n && list.p[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (list.p[e - 1] == ' ' || list.p[e - 1] == '\t'))
            e--;
        if (e - s == name.n && strncasecmp(list.p + s, name.p, name.n) == 0)
            return true;
    }
    return false;
}

bool cg_hdr_is_hop(const cg_hdrs_t *h, cg_span_t name)
{
    static const char *const hop[] = {"connection",
                                      "keep-alive",
                                      "proxy-connection",
                                      "proxy-authenticate",
                                      "proxy-authorization",
                                      "te",
                                      "trailer",
                                      "transfer-encoding",
                                      "upgrade",
                                      NULL};
    for (int i = 0; hop[i]; i++)
        if (cg_span_ieq(name, hop[i]))
            return true;
    cg_span_t conn = cg_hdrs_get(h, "connection");
    return conn.p && list_has(conn, name);
}
