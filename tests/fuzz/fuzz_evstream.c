/*
 * libFuzzer target for the event-stream reader (include/citegate/evstream.h).
 *
 * Input: two header bytes (fuzz_common.h; byte 1 bit 0: mend the CRCs, so
 * that the fuzzer reaches the headers and payloads behind them instead of
 * stopping at the first checksum), then the stream. The stream is read
 * twice, in reads cut by the seed and as one read, and checks:
 *   - split and whole runs give the same messages (event type, headers
 *     section, payload) and end in the same state: the same error, or the
 *     same bytes pending;
 *   - each message is the next bytes of the stream: the consumed counts add
 *     up, and in the whole run its spans point into the input, at the
 *     offsets an independent walk of the frame gives;
 *   - the reader's verdict agrees with that independent walk (lengths,
 *     CRCs, every header within its section and of a known type);
 *   - a header the message names is found again by cg_evs_header().
 */
#include "citegate/evstream.h"

#include "fuzz_common.h"

typedef struct msgrec {
    size_t off, total;
    cg_buf_t text; /* event type, headers and payload, for the split/whole comparison */
} msgrec_t;

typedef struct run {
    msgrec_t *m;
    size_t n, cap;
    int err;
    size_t consumed, pending;
} run_t;

/* Rewrites both CRCs of each whole message that a length walk finds. */
static void mend(uint8_t *s, size_t len)
{
    size_t pos = 0;
    while (len - pos >= 16) {
        uint32_t total = fz_be32(s + pos);
        if (total < 16 || total > len - pos)
            return;
        fz_put_be32(s + pos + 8, cg_crc32(0, s + pos, 8));
        fz_put_be32(s + pos + total - 4, cg_crc32(0, s + pos, total - 4));
        pos += total;
    }
}

/* The oracle: whether the message at s (len bytes available) is whole and
 * valid, written apart from the reader. 1: valid, total in *total;
 * 0: needs more bytes; -1: invalid. */
static int oracle(const uint8_t *s, size_t len, size_t *total)
{
    if (len < 12)
        return 0;
    if (cg_crc32(0, s, 8) != fz_be32(s + 8))
        return -1;
    uint32_t t = fz_be32(s), h = fz_be32(s + 4);
    if (t < 16 || t > CG_EVS_MAX_MESSAGE || (uint64_t)h + 16 > t)
        return -1;
    if (len < t)
        return 0;
    if (cg_crc32(0, s, t - 4) != fz_be32(s + t - 4))
        return -1;
    size_t i = 12, end = 12 + h;
    while (i < end) {
        size_t nl = s[i++];
        if (end - i < nl + 1)
            return -1;
        i += nl;
        uint8_t type = s[i++];
        static const uint8_t w[10] = {0, 0, 1, 2, 4, 8, 0, 0, 8, 16};
        if (type > 9)
            return -1;
        size_t vl = w[type];
        if (type == 6 || type == 7) {
            if (end - i < 2)
                return -1;
            vl = (size_t)s[i] << 8 | s[i + 1];
            i += 2;
        }
        if (end - i < vl)
            return -1;
        i += vl;
    }
    *total = t;
    return 1;
}

static void record(run_t *r, const cg_evs_msg_t *m, size_t off)
{
    r->m = cg_grow(r->m, r->n, &r->cap, 8, sizeof(msgrec_t));
    msgrec_t *x = &r->m[r->n++];
    memset(x, 0, sizeof(*x));
    x->off = off;
    x->total = 16 + m->headers.n + m->payload.n;
    cg_buf_put(&x->text, m->event_type.p, m->event_type.n);
    cg_buf_putc(&x->text, 0);
    cg_buf_put(&x->text, m->headers.p, m->headers.n);
    cg_buf_putc(&x->text, 0);
    cg_buf_put(&x->text, m->payload.p, m->payload.n);
    /* every named header is found again by name */
    cg_evs_value_t v;
    if (m->event_type.p)
        FZ_CHECK(cg_evs_header(m, ":event-type", &v));
}

/* Feeds in[0..n) (at stream offset base) and records what comes out. */
static void feed(cg_evs_t *e, run_t *r, const uint8_t *in, size_t n, const uint8_t *stream,
                 bool whole)
{
    size_t pos = 0;
    while (r->err == 0) {
        cg_evs_msg_t m;
        ssize_t k = cg_evs_feed(e, (const char *)in + pos, n - pos, &m);
        if (k < 0) {
            r->err = (int)k;
            FZ_CHECK(cg_evs_feed(e, (const char *)in, n, &m) == k); /* it stays */
            return;
        }
        if (k == 0) {
            r->consumed += n - pos;
            return;
        }
        FZ_CHECK((size_t)k <= n - pos);
        r->consumed += (size_t)k;
        pos += (size_t)k;
        size_t total = 16 + m.headers.n + m.payload.n;
        size_t off = r->consumed - total;
        if (whole) { /* in place, at the right offsets */
            FZ_CHECK(m.headers.p == (const char *)stream + off + 12);
            FZ_CHECK(m.payload.p == m.headers.p + m.headers.n);
        } else {
            FZ_CHECK(memcmp(m.headers.p, stream + off + 12, m.headers.n) == 0);
            FZ_CHECK(memcmp(m.payload.p, stream + off + 12 + m.headers.n, m.payload.n) == 0);
        }
        record(r, &m, off);
    }
}

static void run_free(run_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        cg_buf_free(&r->m[i].text);
    free(r->m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FZ_HEADER)
        return 0;
    size_t len = size - FZ_HEADER;
    uint8_t *s = malloc(len ? len : 1);
    memcpy(s, data + FZ_HEADER, len);
    if (data[1] & 1)
        mend(s, len);

    run_t whole = {0}, split = {0};
    cg_evs_t e;
    cg_evs_init(&e);
    feed(&e, &whole, s, len, s, true);
    whole.pending = cg_evs_pending(&e);
    cg_evs_free(&e);

    cg_evs_init(&e);
    fz_split_t sp;
    fz_split_init(&sp, data[0]);
    for (size_t pos = 0; pos < len && split.err == 0;) {
        size_t n = fz_split_next(&sp, len - pos);
        uint8_t *piece = (uint8_t *)fz_dup(s + pos, n);
        feed(&e, &split, piece, n, s, false);
        free(piece);
        pos += n;
    }
    split.pending = cg_evs_pending(&e);
    cg_evs_free(&e);

    /* The oracle's walk of the same stream. */
    size_t pos = 0, nvalid = 0, total = 0;
    int verdict;
    while ((verdict = oracle(s + pos, len - pos, &total)) == 1) {
        FZ_CHECK(nvalid < whole.n && whole.m[nvalid].off == pos && whole.m[nvalid].total == total);
        pos += total;
        nvalid++;
    }
    FZ_CHECK(whole.n == nvalid);
    FZ_CHECK((verdict == -1) == (whole.err != 0));
    if (whole.err == 0)
        FZ_CHECK(whole.consumed == len && whole.pending == len - pos);

    FZ_CHECK(split.n == whole.n && split.err == whole.err);
    if (split.err == 0)
        FZ_CHECK(split.pending == whole.pending);
    for (size_t i = 0; i < whole.n; i++) {
        FZ_CHECK(split.m[i].off == whole.m[i].off);
        FZ_CHECK(split.m[i].text.len == whole.m[i].text.len &&
                 memcmp(split.m[i].text.p, whole.m[i].text.p, whole.m[i].text.len) == 0);
    }
    run_free(&whole);
    run_free(&split);
    free(s);
    return 0;
}
