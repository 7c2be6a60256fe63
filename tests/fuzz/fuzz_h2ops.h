/*
 * HTTP/2 frames made from fuzz input: what the driver of either side of an
 * h2 connection sends (fuzz_h2_server as the client, fuzz_up_h2 as the
 * upstream). Each op is an opcode byte and its operands; a missing operand
 * byte reads as zero:
 *   SETTINGS   n, n x (id, value32), ack flag
 *   HEADERS    stream, flags, a field list HPACK-encoded by the driver
 *              (count, then per field a table index, or a literal name and
 *              value, or a long value); without END_HEADERS the block is cut
 *              into HEADERS and CONTINUATION frames (flag 0x40: and ended)
 *   CONT       stream, flags, raw bytes (a block the peer must refuse)
 *   DATA       stream, flags, a body from the table, or raw bytes (16-bit length)
 *   RST_STREAM stream, code      WINDOW_UPDATE stream, increment32
 *   PRIORITY   stream, 5 bytes   GOAWAY last stream, code
 *   PING       flags, 8 bytes    RAW n bytes as they are (any frame)
 *   FLUSH      write what the ops made, let the loop settle
 *   TIME       the clock moves (byte x 100 ms)
 * Streams are odd ids from a byte (1, 3, ... 31); 0xF0-0xF2 name 0, 2 and
 * the largest id.
 */
#ifndef CG_FUZZ_H2OPS_H
#define CG_FUZZ_H2OPS_H

#include "fuzz_shell.h"

enum { OP_SETTINGS, OP_HEADERS, OP_CONT, OP_DATA, OP_RST, OP_WINDOW, OP_PRIORITY, OP_GOAWAY,
       OP_PING, OP_RAW, OP_FLUSH, OP_TIME, OP_COUNT };

typedef struct h2ops {
    const char *const (*fields)[2]; /* the field table of HEADERS */
    size_t nfields;
    const char *const *bodies; /* the body table of DATA */
    size_t nbodies;
    const uint8_t *p, *end; /* the ops left */
    cg_buf_t out;           /* frames not yet written */
    nghttp2_hd_deflater *def;
    fs_h2_reader_t *rd;     /* the peer's frames: the streams this side resets */
    uint32_t max_frame;     /* the largest frame this side allowed the peer */
    /* A header block was made for stream sid. */
    void (*on_headers)(void *arg, uint32_t sid, const nghttp2_nv *nv, size_t n);
    /* Writes `out` and settles. */
    void (*flush)(void *arg);
    void *arg;
    fs_busy_fn busy; /* what settling waits for besides (fs_settle) */
    void *busy_arg;
} h2ops_t;

static uint8_t take(h2ops_t *o)
{
    return o->p < o->end ? *o->p++ : 0;
}

static uint32_t take32(h2ops_t *o)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | take(o);
    return v;
}

/* Raw bytes: as many as asked and left. */
static cg_span_t take_n(h2ops_t *o, size_t n)
{
    size_t left = (size_t)(o->end - o->p);
    cg_span_t s = cg_span((const char *)o->p, n < left ? n : left);
    o->p += s.n;
    return s;
}

static uint32_t stream_of(uint8_t b)
{
    switch (b) {
    case 0xF0: return 0;
    case 0xF1: return 2;
    case 0xF2: return 0x7fffffff;
    default: return 2u * (b % 16) + 1;
    }
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void op_settings(h2ops_t *o)
{
    uint8_t n = take(o) % 6, payload[36];
    for (uint8_t i = 0; i < n; i++) {
        uint8_t id = take(o) % 8;
        uint32_t v = take32(o);
        if (id == NGHTTP2_SETTINGS_MAX_FRAME_SIZE && v > o->max_frame && v <= 16777215)
            o->max_frame = v;
        payload[6 * i] = 0;
        payload[6 * i + 1] = id;
        put32(payload + 6 * i + 2, v);
    }
    bool ack = take(o) & 1;
    fs_h2_frame(&o->out, NGHTTP2_SETTINGS, ack ? NGHTTP2_FLAG_ACK : 0, 0, payload, ack ? 0 : 6u * n);
}

/* The field list: table entries, literals, long values (header limits). */
static size_t take_fields(h2ops_t *o, nghttp2_nv *nv, cg_buf_t *lits)
{
    size_t count = take(o) % 16, offs[16][4];
    for (size_t i = 0; i < count; i++) {
        uint8_t pick = take(o);
        if (pick < 0xE0) {
            const char *const *f = o->fields[pick % o->nfields];
            nv[i] = (nghttp2_nv){(uint8_t *)f[0], (uint8_t *)f[1], strlen(f[0]), strlen(f[1]),
                                 NGHTTP2_NV_FLAG_NONE};
            offs[i][0] = SIZE_MAX;
            continue;
        }
        cg_span_t name = take_n(o, take(o) % 32);
        size_t vlen = pick >= 0xF8 ? (size_t)take(o) * 512 : take(o);
        offs[i][0] = lits->len, offs[i][1] = name.n;
        cg_buf_put(lits, name.p, name.n);
        offs[i][2] = lits->len, offs[i][3] = vlen;
        memset(cg_buf_reserve(lits, vlen), 'v', vlen);
        lits->len += vlen;
    }
    for (size_t i = 0; i < count; i++) /* lits no longer moves */
        if (offs[i][0] != SIZE_MAX)
            nv[i] = (nghttp2_nv){(uint8_t *)lits->p + offs[i][0], (uint8_t *)lits->p + offs[i][2],
                                 offs[i][1], offs[i][3], NGHTTP2_NV_FLAG_NONE};
    return count;
}

static void op_headers(h2ops_t *o)
{
    uint32_t sid = stream_of(take(o));
    uint8_t flags = take(o);
    nghttp2_nv nv[16];
    cg_buf_t lits = {0};
    size_t count = take_fields(o, nv, &lits);
    size_t bound = nghttp2_hd_deflate_bound(o->def, nv, count);
    uint8_t *block = cg_xmalloc(bound + 1);
    ssize_t n = nghttp2_hd_deflate_hd(o->def, block, bound, nv, count);
    FZ_CHECK(n >= 0);
    if (o->on_headers)
        o->on_headers(o->arg, sid, nv, count);
    /* Without END_HEADERS: half the block, in frames of at most 16 KiB. */
    bool whole = flags & NGHTTP2_FLAG_END_HEADERS;
    size_t first = whole ? (size_t)n : (size_t)n / 2, done = 0;
    do {
        size_t k = first - done > 16384 ? 16384 : first - done;
        bool last = whole && done + k == first;
        uint8_t f = done == 0 ? (flags & NGHTTP2_FLAG_END_STREAM) : 0;
        fs_h2_frame(&o->out, done == 0 ? NGHTTP2_HEADERS : NGHTTP2_CONTINUATION,
                    f | (last ? NGHTTP2_FLAG_END_HEADERS : 0), sid, block + done, k);
        done += k;
    } while (done < first);
    if (!whole && (flags & 0x40)) /* the rest, ending the block */
        fs_h2_frame(&o->out, NGHTTP2_CONTINUATION, NGHTTP2_FLAG_END_HEADERS, sid, block + first,
                    (size_t)n - first);
    free(block);
    cg_buf_free(&lits);
}

static void op_data(h2ops_t *o)
{
    uint32_t sid = stream_of(take(o));
    uint8_t flags = take(o) & NGHTTP2_FLAG_END_STREAM, pick = take(o);
    cg_span_t body;
    if (pick < 0x80) {
        const char *b = o->bodies[pick % o->nbodies];
        body = cg_span(b, strlen(b));
    } else {
        size_t n = (size_t)take(o) << 8;
        body = take_n(o, n | take(o));
    }
    fs_h2_frame(&o->out, NGHTTP2_DATA, flags, sid, body.p, body.n);
}

static void op_small(h2ops_t *o, uint8_t code)
{
    uint8_t b[8] = {0};
    uint32_t sid = code == OP_PING ? 0 : stream_of(take(o));
    switch (code) {
    case OP_RST:
        b[3] = take(o) % 14;
        fs_h2_frame(&o->out, NGHTTP2_RST_STREAM, 0, sid, b, 4);
        if (o->rd)
            fs_h2_stream(o->rd, (int32_t)sid)->reset = true; /* ended, by this side */
        break;
    case OP_WINDOW:
        put32(b, take32(o));
        fs_h2_frame(&o->out, NGHTTP2_WINDOW_UPDATE, 0, sid, b, 4);
        break;
    case OP_PRIORITY:
        for (int i = 0; i < 5; i++)
            b[i] = take(o);
        fs_h2_frame(&o->out, NGHTTP2_PRIORITY, 0, sid, b, 5);
        break;
    case OP_GOAWAY:
        put32(b, sid);
        b[7] = take(o) % 14;
        fs_h2_frame(&o->out, NGHTTP2_GOAWAY, 0, 0, b, 8);
        break;
    case OP_PING: {
        uint8_t flags = take(o) & NGHTTP2_FLAG_ACK;
        for (int i = 0; i < 8; i++)
            b[i] = take(o);
        fs_h2_frame(&o->out, NGHTTP2_PING, flags, 0, b, 8);
        break;
    }
    }
}

/* Runs the next op. */
static void h2ops_step(h2ops_t *o)
{
    uint8_t code = take(o) % OP_COUNT;
    switch (code) {
    case OP_SETTINGS: op_settings(o); break;
    case OP_HEADERS: op_headers(o); break;
    case OP_CONT: {
        uint32_t sid = stream_of(take(o));
        uint8_t flags = take(o);
        cg_span_t raw = take_n(o, take(o));
        fs_h2_frame(&o->out, NGHTTP2_CONTINUATION, flags, sid, raw.p, raw.n);
        break;
    }
    case OP_DATA: op_data(o); break;
    case OP_RAW: {
        cg_span_t raw = take_n(o, take(o));
        cg_buf_put(&o->out, raw.p, raw.n);
        break;
    }
    case OP_FLUSH: o->flush(o->arg); break;
    case OP_TIME:
        o->flush(o->arg);
        fs_advance((uint64_t)take(o) * 100, o->busy, o->busy_arg);
        break;
    default: op_small(o, code); break;
    }
}

#endif
