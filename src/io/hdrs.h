/*
 * A list of HTTP header fields: names and values are offsets into one
 * buffer, so a list is two allocations however many fields it holds, and
 * fields may arrive in pieces (llhttp span callbacks). At most
 * CG_MAX_HEADER_BYTES of names and values; a list citegate sends on
 * (`outgoing`) has CG_OWN_HEADER_BYTES more, so that what it received,
 * which the limit bounds, always leaves room for citegate's own fields.
 */
#ifndef CITEGATE_IO_HDRS_H
#define CITEGATE_IO_HDRS_H

#include "citegate/common.h"

#define CG_MAX_HEADER_BYTES (64u << 10)
#define CG_OWN_HEADER_BYTES (4u << 10)

typedef struct cg_hdr {
    size_t name, name_len, value, value_len;
} cg_hdr_t;

typedef struct cg_hdrs {
    cg_buf_t buf;
    cg_hdr_t *v;
    size_t n, cap;
    bool in_value;
    bool outgoing; /* set before the first field */
} cg_hdrs_t;

void cg_hdrs_reset(cg_hdrs_t *h);
size_t cg_hdrs_limit(const cg_hdrs_t *h);
void cg_hdrs_free(cg_hdrs_t *h);
/* Append a piece of a name or of a value; -1 beyond CG_MAX_HEADER_BYTES. */
int cg_hdrs_on_field(cg_hdrs_t *h, const char *p, size_t n);
int cg_hdrs_on_value(cg_hdrs_t *h, const char *p, size_t n);
/* Adds one whole field, or nothing and -1 when it does not fit. */
int cg_hdrs_add(cg_hdrs_t *h, const char *name, size_t nl, const char *value, size_t vl);
int cg_hdrs_add_str(cg_hdrs_t *h, const char *name, const char *value);
/* Value of the first field `name` (case-insensitive), or p == NULL. */
cg_span_t cg_hdrs_get(const cg_hdrs_t *h, const char *name);
cg_span_t cg_hdr_name(const cg_hdrs_t *h, size_t i);
cg_span_t cg_hdr_value(const cg_hdrs_t *h, size_t i);
/* Hop-by-hop (RFC 9110 §7.6.1), including names listed in Connection. */
bool cg_hdr_is_hop(const cg_hdrs_t *h, cg_span_t name);
/* Case-insensitive comparison of a span with a literal. */
bool cg_span_ieq(cg_span_t s, const char *lit);

#endif
