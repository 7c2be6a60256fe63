/*
 * Incremental reader of AWS's binary event stream
 * (application/vnd.amazon.eventstream), the framing of Amazon Bedrock's
 * streamed answers: the second framing beside the SSE tokenizer (sse.h).
 *
 * A message is
 *
 *   total length u32 | headers length u32 | CRC-32 of those 8 bytes |
 *   headers | payload | CRC-32 of everything before it
 *
 * big-endian, with the IEEE CRC-32 (zlib's). A header is a name length
 * (u8), the name, a type (u8, 0-9) and a value whose width the type gives:
 * 0 and 1 none, 2 one byte, 3 two, 4 four, 5 and 8 eight, 9 sixteen, 6 and
 * 7 a u16 length then that many bytes.
 *
 * Like the SSE tokenizer: a read may end anywhere and hold many messages; a
 * message that lies inside one input buffer is handed out as spans into
 * that buffer, and only one that straddles reads is copied, into the
 * reader's own buffer, kept between messages up to a small size (or the
 * size the caller expects, cg_evs_expect) so that the steady state
 * allocates nothing. The prelude is checked as soon as its 12 bytes are
 * in, before the rest is waited for, so a corrupt length never makes the
 * reader hold bytes for it.
 *
 * Any framing error is final: the stream cannot be resynchronised (a
 * length is only trusted behind its CRC), so every later call returns the
 * same error and the caller closes the connection.
 *
 * Spans in a returned message stay valid until the next cg_evs_feed() call
 * and as long as the caller keeps its input buffer.
 */
#ifndef CITEGATE_EVSTREAM_H
#define CITEGATE_EVSTREAM_H

#include "citegate/common.h"

#include <sys/types.h>

#define CG_EVS_PRELUDE 12
#define CG_EVS_MIN_MESSAGE 16
#define CG_EVS_MAX_MESSAGE (16u << 20) /* AWS's own readers' cap */

enum {
    CG_EVS_AGAIN = 0,           /* every input byte was taken; no message is complete yet */
    CG_EVS_E_PRELUDE_CRC = -1,  /* the prelude's CRC does not match */
    CG_EVS_E_SHORT = -2,        /* a total length under 16 */
    CG_EVS_E_LONG = -3,         /* a total length over CG_EVS_MAX_MESSAGE */
    CG_EVS_E_HEADERS_LEN = -4,  /* a headers length past the message */
    CG_EVS_E_HEADER = -5,       /* a header that overruns its section, or of no known type */
    CG_EVS_E_CRC = -6,          /* the message's CRC does not match */
};

/* A header value of a message: its type, and its bytes (a string's or a
 * byte array's without the length; an integer's big-endian bytes). */
typedef struct cg_evs_value {
    uint8_t type; /* 0-9, as above */
    cg_span_t v;
} cg_evs_value_t;

/* The headers a reader of AWS's streams looks at (strings, type 7; a
 * header of another type under one of these names is left out, and an
 * empty span means none), and the payload. */
typedef struct cg_evs_msg {
    cg_span_t message_type;   /* ":message-type": event, exception, error */
    cg_span_t event_type;     /* ":event-type" */
    cg_span_t exception_type; /* ":exception-type" */
    cg_span_t error_code;     /* ":error-code" */
    cg_span_t error_message;  /* ":error-message" */
    cg_span_t content_type;   /* ":content-type" */
    cg_span_t headers;        /* the whole headers section, for cg_evs_header() */
    cg_span_t payload;
    uint32_t nheaders;
} cg_evs_msg_t;

typedef struct cg_evs {
    cg_buf_t buf;    /* a message that straddles reads */
    uint32_t total;  /* its total length, once its prelude is in and checked */
    int err;         /* the first framing error, kept: every later call returns it */
    bool delivered;  /* buf holds a delivered message: clear it on the next feed */
    size_t usual;    /* cg_evs_expect's size, or 0 */
} cg_evs_t;

/* Every reader starts here (this also makes the CRC's tables, once). */
void cg_evs_init(cg_evs_t *r);
void cg_evs_free(cg_evs_t *r);
/* For a stream whose usual messages are longer than Converse's few hundred
 * bytes (Knowledge Bases' citation events): the straddle buffer is made at
 * `usual` bytes and kept up to that between messages, so that those never
 * grow it. */
void cg_evs_expect(cg_evs_t *r, size_t usual);

/*
 * Feeds len bytes. Returns:
 *   > 0           a message completed: *m describes it, and the return
 *                 value is the number of input bytes consumed (call again
 *                 with the rest);
 *   CG_EVS_AGAIN  every byte was consumed; no message completed;
 *   < 0           a framing error (CG_EVS_E_*), now and on every later call.
 */
ssize_t cg_evs_feed(cg_evs_t *r, const char *in, size_t len, cg_evs_msg_t *m);

/* Bytes of an incomplete message taken so far (0 between messages). */
size_t cg_evs_pending(const cg_evs_t *r);

/* The value of header `name` of m (the first of that name), or false. */
bool cg_evs_header(const cg_evs_msg_t *m, const char *name, cg_evs_value_t *out);

/* One sentence for an error code, for logs and the client's error event. */
const char *cg_evs_strerror(int err);

/* The IEEE CRC-32 of p[0..n) continuing from crc (0 to start), as zlib's
 * crc32(). */
uint32_t cg_crc32(uint32_t crc, const void *p, size_t n);

/* The two ways cg_crc32 takes, for the tests that hold them to each other:
 * the table (any CPU, any length), and folding by carry-less
 * multiplication, which gives false (and nothing in *out) when the CPU has
 * no PCLMULQDQ or the run is too short for it. */
uint32_t cg__crc32_table(uint32_t crc, const void *p, size_t n);
bool cg__crc32_folding(uint32_t crc, const void *p, size_t n, uint32_t *out);

#endif
