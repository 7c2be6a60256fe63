/*
 * Test support: an encoder of AWS event-stream messages (the reader is
 * citegate/evstream.h), for streams the tests build byte by byte. The CRC
 * is the core's cg_crc32, which the reader's tests check against AWS's own
 * vectors.
 */
#ifndef CG_TEST_EVS_ENC_H
#define CG_TEST_EVS_ENC_H

#include "citegate/evstream.h"

#include <string.h>

static inline void evs_put32(cg_buf_t *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    cg_buf_put(b, x, 4);
}

/* Appends a string header (type 7). */
static inline void evs_header(cg_buf_t *h, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    uint8_t x[3] = {(uint8_t)nl, 7, 0};
    cg_buf_put(h, x, 1);
    cg_buf_put(h, name, nl);
    x[0] = 7;
    x[1] = (uint8_t)(vl >> 8);
    x[2] = (uint8_t)vl;
    cg_buf_put(h, x, 3);
    cg_buf_put(h, value, vl);
}

/* Appends one message of headers h and payload p. */
static inline void evs_message(cg_buf_t *out, cg_span_t h, cg_span_t p)
{
    size_t start = out->len;
    uint32_t total = (uint32_t)(16 + h.n + p.n);
    evs_put32(out, total);
    evs_put32(out, (uint32_t)h.n);
    evs_put32(out, cg_crc32(0, out->p + start, 8));
    cg_buf_put(out, h.p, h.n);
    cg_buf_put(out, p.p, p.n);
    evs_put32(out, cg_crc32(0, out->p + start, total - 4));
}

/* Appends a Bedrock event: `:event-type` type, JSON payload. */
static inline void evs_event(cg_buf_t *out, const char *type, const char *json)
{
    cg_buf_t h = {0};
    evs_header(&h, ":event-type", type);
    evs_header(&h, ":content-type", "application/json");
    evs_header(&h, ":message-type", "event");
    evs_message(out, cg_span(h.p, h.len), cg_span(json, strlen(json)));
    cg_buf_free(&h);
}

/* Appends an exception message of that type and JSON payload. */
static inline void evs_exception(cg_buf_t *out, const char *type, const char *json)
{
    cg_buf_t h = {0};
    evs_header(&h, ":exception-type", type);
    evs_header(&h, ":content-type", "application/json");
    evs_header(&h, ":message-type", "exception");
    evs_message(out, cg_span(h.p, h.len), cg_span(json, strlen(json)));
    cg_buf_free(&h);
}

/* Appends an error message (code and message in headers, no payload). */
static inline void evs_error(cg_buf_t *out, const char *code, const char *message)
{
    cg_buf_t h = {0};
    evs_header(&h, ":error-code", code);
    evs_header(&h, ":error-message", message);
    evs_header(&h, ":message-type", "error");
    evs_message(out, cg_span(h.p, h.len), cg_span("", 0));
    cg_buf_free(&h);
}

#endif
