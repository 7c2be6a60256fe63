/*
 * Incremental Server-Sent Events tokenizer (WHATWG "event stream" rules).
 *
 * Lines end in CR, LF or CRLF; a read may end anywhere, including between the
 * CR and LF of one line end. An event is every line up to and including the
 * blank line that ends it, so comment-only blocks and stray blank lines are
 * events too (with no data): the caller forwards their raw bytes unchanged.
 *
 * Zero copy: an event that lies inside one input buffer is handed out as
 * spans into that buffer. Only an event that straddles reads is copied, into
 * the tokenizer's own buffer, which is capped (`max_event`): the cap is
 * checked before the tokenizer waits for more input.
 *
 * Spans in a returned event stay valid until the next cg_sse_feed() call and
 * as long as the caller keeps its input buffer.
 */
#ifndef CITEGATE_SSE_H
#define CITEGATE_SSE_H

#include "citegate/common.h"

#include <sys/types.h>

enum {
    CG_SSE_AGAIN = 0,       /* every input byte was taken; no event is complete yet */
    CG_SSE_E_TOOBIG = -1,   /* the pending event exceeds max_event; sticky */
};

typedef struct cg_sse_event {
    cg_span_t raw;   /* the event's bytes through its terminating blank line */
    cg_span_t data;  /* `data` values joined by LF; empty when ndata == 0 */
    cg_span_t type;  /* value of the last `event` field */
    cg_span_t id;    /* value of the last `id` field */
    uint32_t ndata;  /* number of `data` lines */
    uint32_t nother; /* lines that are neither `data` nor the blank terminator */
    uint8_t lead;    /* raw begins with this many bytes (0 or 1: the LF of a CRLF
                        that ended the previous event) */
} cg_sse_event_t;

typedef struct cg_sse {
    cg_buf_t buf;     /* bytes of an event that straddles reads */
    cg_buf_t join;    /* joined data of an event with several data lines */
    size_t max_event; /* cap on one event's size, in bytes */
    size_t line;      /* offset of the current line within the event */
    size_t data_off, data_len, type_off, type_len, id_off, id_len;
    uint32_t ndata, nother;
    uint8_t lead;
    bool cr;          /* the previous input ended in a CR that ended a line */
    bool buffered;    /* the event so far lives in buf */
    bool delivered;   /* buf/join hold a delivered event: clear on next feed */
    bool bom_checked; /* a BOM may only stand at the very start of the stream */
    bool failed;
} cg_sse_t;

void cg_sse_init(cg_sse_t *p, size_t max_event);
void cg_sse_free(cg_sse_t *p);

/*
 * Feeds `len` bytes. Returns:
 *   > 0             an event completed; *ev describes it and the return value is
 *                   the number of input bytes consumed (call again with the rest);
 *   CG_SSE_AGAIN    every byte was consumed (buffered); no event completed;
 *   CG_SSE_E_TOOBIG the pending event would exceed max_event. No byte of this
 *                   input was consumed; cg_sse_pending() returns the bytes taken
 *                   earlier. Every later call fails the same way.
 */
ssize_t cg_sse_feed(cg_sse_t *p, const char *in, size_t len, cg_sse_event_t *ev);

/* Bytes of the incomplete event taken so far (to drop at EOF, or forward raw). */
cg_span_t cg_sse_pending(const cg_sse_t *p);

#endif
