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
 * checked before the tokenizer waits for more input. An event over the cap
 * is not kept at all: it is handed out in pieces as its bytes arrive (SPEC
 * §6 rule 6), and the events after it are read as usual.
 *
 * An event's size, for the cap, is its bytes through the blank line that
 * ends it, leaving out its lead (below) and the LF of a CRLF that ends it:
 * a read may cut either off, and the size must not depend on where reads end.
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
    CG_SSE_E_TOOBIG = -1,   /* the event being read exceeds max_event (see cg_sse_feed) */
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
    bool oversized;  /* raw (and lead) is a piece of an event over max_event;
                        the other fields are empty */
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
    bool oversized;   /* an event over max_event is being handed out in pieces */
    bool bol;         /* ... and its last byte so far ended a line */
} cg_sse_t;

void cg_sse_init(cg_sse_t *p, size_t max_event);
void cg_sse_free(cg_sse_t *p);

/*
 * Feeds `len` bytes. Returns:
 *   > 0             an event completed, or (ev->oversized) a piece of an
 *                   oversized event: *ev describes it and the return value is
 *                   the number of input bytes consumed (call again with the rest);
 *   CG_SSE_AGAIN    every byte was consumed (buffered); no event completed;
 *   CG_SSE_E_TOOBIG the event being read exceeds max_event. No byte of this
 *                   input was consumed; cg_sse_pending() returns the event's
 *                   bytes taken earlier, and `lead` whether the event begins
 *                   with a lead byte (the first pending byte, or when none is
 *                   pending the first of this input, which the first piece
 *                   then reports as its lead too). From the next call on, the
 *                   rest of the event comes out as pieces, without being kept,
 *                   through the blank line that ends it; then events again.
 */
ssize_t cg_sse_feed(cg_sse_t *p, const char *in, size_t len, cg_sse_event_t *ev);

/* Bytes of the incomplete event taken so far (to drop at EOF, or forward raw);
 * none while an oversized event is handed out in pieces. */
cg_span_t cg_sse_pending(const cg_sse_t *p);

#endif
