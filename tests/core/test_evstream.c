/* The event-stream reader: AWS's published vectors, every header type
 * skipped by its width, every framing error, and every split of a stream. */
#include "citegate/evstream.h"

#include "evs_enc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* --- AWS's test vectors (aws-sdk-js-v3, eventstream TestVectors) ------------------ */

static const uint8_t empty_message[] = {0, 0, 0, 16, 0, 0, 0, 0, 5, 194, 72, 235, 125, 152, 200, 255};
static const uint8_t int32_header[] = {
    0,   0,   0,   43,  0,   0,   0,   14,  52,  139, 236, 123, 8,  101, 118,
    101, 110, 116, 45,  105, 100, 4,   0,   0,   160, 12,  123, 39, 102, 111,
    111, 39,  58,  39,  98,  97,  114, 39,  125, 211, 137, 2,   133};
static const uint8_t payload_no_headers[] = {0,   0,  0,   29,  0,   0,  0,  0,  253, 82,
                                             140, 90, 123, 39,  102, 111, 111, 39, 58,  39,
                                             98,  97, 114, 39,  125, 195, 101, 57, 54};
static const uint8_t payload_one_str_header[] = {
    0,   0,   0,   61,  0,   0,   0,   32,  7,   253, 131, 150, 12,  99,  111, 110,
    116, 101, 110, 116, 45,  116, 121, 112, 101, 7,   0,   16,  97,  112, 112, 108,
    105, 99,  97,  116, 105, 111, 110, 47,  106, 115, 111, 110, 123, 39,  102, 111,
    111, 39,  58,  39,  98,  97,  114, 39,  125, 141, 156, 8,   177};
static const char foo_bar[] = "{'foo':'bar'}";

static ssize_t feed_all(const void *p, size_t n, cg_evs_msg_t *m, cg_evs_t *r)
{
    cg_evs_init(r);
    return cg_evs_feed(r, p, n, m);
}

static void test_aws_vectors_positive(void **state)
{
    (void)state;
    cg_evs_t r;
    cg_evs_msg_t m;
    assert_int_equal(feed_all(empty_message, sizeof(empty_message), &m, &r), 16);
    assert_int_equal(m.payload.n, 0);
    assert_int_equal(m.nheaders, 0);
    cg_evs_free(&r);

    assert_int_equal(feed_all(int32_header, sizeof(int32_header), &m, &r), 43);
    cg_evs_value_t v;
    assert_true(cg_evs_header(&m, "event-id", &v));
    assert_int_equal(v.type, 4);
    assert_memory_equal(v.v.p, "\x00\x00\xa0\x0c", 4);
    assert_int_equal(m.payload.n, 13);
    assert_memory_equal(m.payload.p, foo_bar, 13);
    cg_evs_free(&r);

    assert_int_equal(feed_all(payload_no_headers, sizeof(payload_no_headers), &m, &r), 29);
    assert_memory_equal(m.payload.p, foo_bar, 13);
    cg_evs_free(&r);

    assert_int_equal(feed_all(payload_one_str_header, sizeof(payload_one_str_header), &m, &r), 61);
    assert_true(cg_evs_header(&m, "content-type", &v));
    assert_int_equal(v.type, 7);
    assert_int_equal(v.v.n, 16);
    assert_memory_equal(v.v.p, "application/json", 16);
    assert_null(m.content_type.p); /* ":content-type" is another name */
    assert_memory_equal(m.payload.p, foo_bar, 13);
    cg_evs_free(&r);
}

/* The four corrupt vectors, by what they corrupt. */
static void test_aws_vectors_negative(void **state)
{
    (void)state;
    uint8_t b[sizeof(payload_one_str_header)];
    cg_evs_t r;
    cg_evs_msg_t m;
    memcpy(b, payload_one_str_header, sizeof(b));
    b[20] = 43; /* corrupted_headers: "content+type" */
    assert_int_equal(feed_all(b, sizeof(b), &m, &r), CG_EVS_E_CRC);
    cg_evs_free(&r);
    memcpy(b, payload_one_str_header, sizeof(b));
    b[6] = 1; /* corrupted_header_len */
    assert_int_equal(feed_all(b, sizeof(b), &m, &r), CG_EVS_E_PRELUDE_CRC);
    cg_evs_free(&r);
    uint8_t c[sizeof(payload_no_headers)];
    memcpy(c, payload_no_headers, sizeof(c));
    c[0] = 1; /* corrupted_length */
    assert_int_equal(feed_all(c, sizeof(c), &m, &r), CG_EVS_E_PRELUDE_CRC);
    cg_evs_free(&r);
    memcpy(c, payload_no_headers, sizeof(c));
    c[24] = 141; /* corrupted_payload */
    assert_int_equal(feed_all(c, sizeof(c), &m, &r), CG_EVS_E_CRC);
    /* the error stays: nothing after it is read */
    assert_int_equal(cg_evs_feed(&r, (const char *)empty_message, 16, &m), CG_EVS_E_CRC);
    cg_evs_free(&r);
}

/* --- an encoder for the tests ------------------------------------------------------ */

/* Appends one message of headers h and payload p (evs_enc.h); crc_flip
 * flips a bit of its last CRC. */
static void encode(cg_buf_t *out, cg_span_t h, cg_span_t p, bool crc_flip)
{
    evs_message(out, h, p);
    if (crc_flip)
        out->p[out->len - 1] ^= 1;
}

/* One header of each type 0-9, then the strings a Bedrock event has. */
static void all_types(cg_buf_t *h)
{
    static const uint8_t widths[10] = {0, 0, 1, 2, 4, 8, 5, 3, 8, 16};
    for (uint8_t t = 0; t < 10; t++) {
        char name[8];
        snprintf(name, sizeof(name), "t%u", t);
        uint8_t x[2] = {2, t};
        cg_buf_put(h, x, 1);
        cg_buf_put(h, name, 2);
        cg_buf_put(h, &x[1], 1);
        if (t == 6 || t == 7) {
            uint8_t len[2] = {0, widths[t]};
            cg_buf_put(h, len, 2);
        }
        for (int i = 0; i < widths[t]; i++)
            cg_buf_putc(h, (char)(0xE0 + i)); /* bytes that look like nothing */
    }
    evs_header(h, ":event-type", "contentBlockDelta");
    evs_header(h, ":content-type", "application/json");
    evs_header(h, ":message-type", "event");
}

static void test_every_header_type_skipped(void **state)
{
    (void)state;
    cg_buf_t h = {0}, msg = {0};
    all_types(&h);
    encode(&msg, cg_span(h.p, h.len), CG_SPAN_LIT("{\"p\":\"abc\"}"), false);
    cg_evs_t r;
    cg_evs_msg_t m;
    assert_int_equal(feed_all(msg.p, msg.len, &m, &r), (ssize_t)msg.len);
    assert_int_equal(m.nheaders, 13);
    assert_true(cg_span_eq(m.event_type, "contentBlockDelta"));
    assert_true(cg_span_eq(m.message_type, "event"));
    assert_true(cg_span_eq(m.content_type, "application/json"));
    assert_true(cg_span_eq(m.payload, "{\"p\":\"abc\"}"));
    static const size_t width[10] = {0, 0, 1, 2, 4, 8, 5, 3, 8, 16};
    for (uint8_t t = 0; t < 10; t++) {
        char name[8];
        snprintf(name, sizeof(name), "t%u", t);
        cg_evs_value_t v;
        assert_true(cg_evs_header(&m, name, &v));
        assert_int_equal(v.type, t);
        assert_int_equal(v.v.n, width[t]);
    }
    cg_evs_free(&r);
    cg_buf_free(&h);
    cg_buf_free(&msg);
}

/* A header of type 10, and headers that run past their section. */
static void test_bad_headers(void **state)
{
    (void)state;
    static const struct {
        const char *h;
        size_t n;
    } bad[] = {
        {"\x01x\x0a", 3},               /* type 10 */
        {"\x01x\x07\x00\x05" "abc", 8}, /* a string longer than the section */
        {"\x01x\x05" "1234567", 10},    /* an int64 cut short */
        {"\x05x", 2},                   /* a name past the section */
        {"\x01x", 2},                   /* no type byte */
        {"\x01x\x06\x00", 4},           /* a byte array's length cut short */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cg_buf_t msg = {0};
        encode(&msg, cg_span(bad[i].h, bad[i].n), CG_SPAN_LIT("{}"), false);
        cg_evs_t r;
        cg_evs_msg_t m;
        assert_int_equal(feed_all(msg.p, msg.len, &m, &r), CG_EVS_E_HEADER);
        cg_evs_free(&r);
        cg_buf_free(&msg);
    }
}

/* A prelude with a valid CRC over each bad length. */
static void prelude(uint8_t out[12], uint32_t total, uint32_t hlen)
{
    uint8_t p[8] = {total >> 24, total >> 16, total >> 8, total, hlen >> 24, hlen >> 16, hlen >> 8, hlen};
    memcpy(out, p, 8);
    uint32_t c = cg_crc32(0, p, 8);
    uint8_t q[4] = {c >> 24, c >> 16, c >> 8, c};
    memcpy(out + 8, q, 4);
}

static void test_lengths(void **state)
{
    (void)state;
    static const struct {
        uint32_t total, hlen;
        int err;
    } cases[] = {
        {15, 0, CG_EVS_E_SHORT},
        {0, 0, CG_EVS_E_SHORT},
        {CG_EVS_MAX_MESSAGE + 1, 0, CG_EVS_E_LONG},
        {0xffffffffu, 0, CG_EVS_E_LONG},
        {20, 5, CG_EVS_E_HEADERS_LEN},
        {16, 1, CG_EVS_E_HEADERS_LEN},
        {100, 0xffffffffu, CG_EVS_E_HEADERS_LEN},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t p[12];
        prelude(p, cases[i].total, cases[i].hlen);
        cg_evs_t r;
        cg_evs_msg_t m;
        /* Found on the prelude alone, before any byte of the rest: in one
         * read, and byte by byte. */
        assert_int_equal(feed_all(p, 12, &m, &r), cases[i].err);
        cg_evs_free(&r);
        cg_evs_init(&r);
        for (int k = 0; k < 11; k++)
            assert_int_equal(cg_evs_feed(&r, (const char *)p + k, 1, &m), CG_EVS_AGAIN);
        assert_int_equal(cg_evs_feed(&r, (const char *)p + 11, 1, &m), cases[i].err);
        assert_string_not_equal(cg_evs_strerror(cases[i].err), cg_evs_strerror(0));
        cg_evs_free(&r);
    }
}

/* The largest message allowed is read; its buffer is not kept after it. */
static void test_largest_message(void **state)
{
    (void)state;
    size_t n = CG_EVS_MAX_MESSAGE - 16;
    char *payload = malloc(n);
    memset(payload, 'x', n);
    cg_buf_t msg = {0};
    encode(&msg, cg_span("", 0), cg_span(payload, n), false);
    cg_evs_t r;
    cg_evs_init(&r);
    cg_evs_msg_t m;
    assert_int_equal(cg_evs_feed(&r, msg.p, 100, &m), CG_EVS_AGAIN);
    assert_int_equal(cg_evs_pending(&r), 100);
    assert_int_equal(cg_evs_feed(&r, msg.p + 100, msg.len - 100, &m), (ssize_t)(msg.len - 100));
    assert_int_equal(m.payload.n, n);
    assert_int_equal(cg_evs_feed(&r, msg.p, 0, &m), CG_EVS_AGAIN);
    assert_int_equal(r.buf.cap, 0);
    cg_evs_free(&r);
    cg_buf_free(&msg);
    free(payload);
}

/* Messages that straddle reads, of sizes n[0..count), one after the other;
 * returns whether the straddle buffer stayed where it was made. */
static bool straddled(cg_evs_t *r, const size_t *n, size_t count)
{
    const char *first = NULL;
    bool stayed = true;
    for (size_t i = 0; i < count; i++) {
        char *payload = malloc(n[i]);
        memset(payload, 'k', n[i]);
        cg_buf_t msg = {0};
        encode(&msg, cg_span("", 0), cg_span(payload, n[i]), false);
        cg_evs_msg_t m;
        assert_int_equal(cg_evs_feed(r, msg.p, 100, &m), CG_EVS_AGAIN);
        first = first ? first : r->buf.p;
        stayed = stayed && r->buf.p == first;
        assert_int_equal(cg_evs_feed(r, msg.p + 100, msg.len - 100, &m), (ssize_t)(msg.len - 100));
        assert_int_equal(m.payload.n, n[i]);
        stayed = stayed && r->buf.p == first;
        cg_buf_free(&msg);
        free(payload);
    }
    return stayed;
}

/* A reader told to expect longer messages makes its straddle buffer at
 * that size and keeps it: messages up to it never grow it again. Without,
 * the buffer starts small, grows, and one past the small size it keeps is
 * given back. */
static void test_expected_size(void **state)
{
    (void)state;
    static const size_t sizes[] = {900, 9000, 3000, 16000, 12000};
    cg_evs_t r;
    cg_evs_init(&r);
    cg_evs_expect(&r, 16384);
    assert_true(straddled(&r, sizes, 5));
    cg_evs_msg_t m;
    assert_int_equal(cg_evs_feed(&r, "", 0, &m), CG_EVS_AGAIN);
    assert_int_equal(r.buf.cap, 16384);
    cg_evs_free(&r);
    cg_evs_init(&r);
    assert_false(straddled(&r, sizes, 2));
    assert_int_equal(cg_evs_feed(&r, "", 0, &m), CG_EVS_AGAIN);
    assert_int_equal(r.buf.cap, 0);
    cg_evs_free(&r);
}

/* --- every split ------------------------------------------------------------------- */

typedef struct got {
    cg_buf_t text; /* "event-type|payload\n" per message */
    int err;
} got_t;

static void feed_piece(cg_evs_t *r, const char *p, size_t n, got_t *g)
{
    size_t pos = 0;
    for (;;) {
        cg_evs_msg_t m;
        ssize_t k = cg_evs_feed(r, p + pos, n - pos, &m);
        if (k < 0) {
            g->err = (int)k;
            return;
        }
        if (k == 0)
            return;
        cg_buf_put(&g->text, m.event_type.p, m.event_type.n);
        cg_buf_putc(&g->text, '|');
        cg_buf_put(&g->text, m.payload.p, m.payload.n);
        cg_buf_putc(&g->text, '\n');
        pos += (size_t)k;
    }
}

/* A recorded-shape Bedrock stream: five events, padding members included. */
static void bedrock_stream(cg_buf_t *out)
{
    static const char *const ev[][2] = {
        {"messageStart", "{\"p\":\"abcdefghij\",\"role\":\"assistant\"}"},
        {"contentBlockDelta", "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"Paris \"},\"p\":\"ab\"}"},
        {"contentBlockDelta",
         "{\"contentBlockIndex\":0,\"delta\":{\"citation\":{\"location\":{\"web\":{\"url\":"
         "\"https://x.example/a\",\"domain\":\"x.example\"}}}},\"p\":\"abcd\"}"},
        {"contentBlockStop", "{\"contentBlockIndex\":0,\"p\":\"abcdefghijklmnop\"}"},
        {"messageStop", "{\"p\":\"abc\",\"stopReason\":\"end_turn\"}"},
    };
    for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
        evs_event(out, ev[i][0], ev[i][1]);
}

static void test_every_split(void **state)
{
    (void)state;
    cg_buf_t s = {0};
    bedrock_stream(&s);
    got_t whole = {0};
    cg_evs_t r;
    cg_evs_init(&r);
    feed_piece(&r, s.p, s.len, &whole);
    cg_evs_free(&r);
    assert_int_equal(whole.err, 0);
    /* every cut into two reads, and into three */
    for (size_t a = 0; a <= s.len; a++) {
        for (size_t b = a; b <= s.len; b += (a % 7 == 0) ? 1 : s.len) {
            got_t g = {0};
            cg_evs_init(&r);
            feed_piece(&r, s.p, a, &g);
            feed_piece(&r, s.p + a, b - a, &g);
            feed_piece(&r, s.p + b, s.len - b, &g);
            assert_int_equal(g.err, 0);
            assert_int_equal(g.text.len, whole.text.len);
            assert_memory_equal(g.text.p, whole.text.p, whole.text.len);
            assert_int_equal(cg_evs_pending(&r), 0);
            cg_evs_free(&r);
            cg_buf_free(&g.text);
        }
    }
    /* byte by byte */
    got_t g = {0};
    cg_evs_init(&r);
    for (size_t i = 0; i < s.len; i++)
        feed_piece(&r, s.p + i, 1, &g);
    assert_int_equal(g.text.len, whole.text.len);
    assert_memory_equal(g.text.p, whole.text.p, whole.text.len);
    cg_evs_free(&r);
    cg_buf_free(&g.text);
    cg_buf_free(&whole.text);
    cg_buf_free(&s);
}

/* A corrupt message in the middle: the ones before it come out, then the
 * error, wherever the reads end. */
static void test_error_after_good_messages(void **state)
{
    (void)state;
    cg_buf_t s = {0}, h = {0};
    evs_header(&h, ":event-type", "a");
    encode(&s, cg_span(h.p, h.len), CG_SPAN_LIT("{}"), false);
    encode(&s, cg_span(h.p, h.len), CG_SPAN_LIT("{}"), true);
    encode(&s, cg_span(h.p, h.len), CG_SPAN_LIT("{}"), false);
    for (size_t a = 0; a <= s.len; a++) {
        got_t g = {0};
        cg_evs_t r;
        cg_evs_init(&r);
        feed_piece(&r, s.p, a, &g);
        feed_piece(&r, s.p + a, s.len - a, &g);
        assert_int_equal(g.err, CG_EVS_E_CRC);
        assert_int_equal(g.text.len, 5); /* "a|{}\n": the first message only */
        cg_evs_free(&r);
        cg_buf_free(&g.text);
    }
    cg_buf_free(&s);
    cg_buf_free(&h);
}

static void test_crc32(void **state)
{
    (void)state;
    assert_int_equal(cg_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(cg_crc32(0, "", 0), 0);
    /* in pieces, at every alignment, as one pass */
    char buf[300];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (char)(i * 7 + 3);
    uint32_t whole = cg_crc32(0, buf, sizeof(buf));
    for (size_t k = 0; k < 40; k++)
        assert_int_equal(cg_crc32(cg_crc32(0, buf, k), buf + k, sizeof(buf) - k), whole);
}

/* Values of zlib's crc32() (Python's zlib.crc32) over runs long enough to
 * be folded: the bytes (i * 7 + 3) mod 256, zeros, 0xff bytes. */
static void test_crc32_long_known(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        uint32_t crc;
    } known[] = {{64, 0xcbd9ecf0u}, {300, 0xde0e57ceu}, {1000, 0x17bc2a46u}, {4096, 0x5e4e1995u}};
    uint8_t *buf = malloc(4096);
    assert_non_null(buf);
    for (size_t i = 0; i < 4096; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
        assert_int_equal(cg_crc32(0, buf, known[k].n), known[k].crc);
        assert_int_equal(cg__crc32_table(0, buf, known[k].n), known[k].crc);
    }
    memset(buf, 0, 64);
    assert_int_equal(cg_crc32(0, buf, 64), 0x758d6336u);
    memset(buf, 0xff, 100);
    assert_int_equal(cg_crc32(0, buf, 100), 0x03d28681u);
    free(buf);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Folding against the table: random bytes, lengths 0-2100 (every length
 * up to 300), every alignment mod 16, random starting registers, and
 * cg_crc32 against both. Folding may be absent (no PCLMULQDQ, or another
 * CPU family): then only the table is checked. */
static void test_crc32_folding_equals_table(void **state)
{
    (void)state;
    enum { MAX = 2100 };
    uint8_t *buf = malloc(MAX + 16);
    assert_non_null(buf);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < MAX + 16; i++)
        buf[i] = (uint8_t)xorshift(&seed);
    unsigned folded = 0;
    for (unsigned round = 0; round < 3000; round++) {
        size_t n = round < 301 ? round : (size_t)(xorshift(&seed) % (MAX + 1));
        size_t at = (size_t)(xorshift(&seed) % 16);
        uint32_t start = round % 3 == 0 ? 0 : (uint32_t)xorshift(&seed);
        uint32_t table = cg__crc32_table(start, buf + at, n), fold;
        assert_int_equal(cg_crc32(start, buf + at, n), table);
        if (cg__crc32_folding(start, buf + at, n, &fold)) {
            assert_int_equal(fold, table);
            folded++;
        }
    }
    /* one byte changed anywhere changes both the same way */
    for (size_t i = 0; i < 256; i++) {
        uint32_t fold;
        buf[i] ^= 0x40;
        if (cg__crc32_folding(0, buf, 256, &fold))
            assert_int_equal(fold, cg__crc32_table(0, buf, 256));
        buf[i] ^= 0x40;
    }
    printf("crc32: %u of 3000 runs folded\n", folded);
    free(buf);
}

/* --- The usual headers, found as bytes ------------------------------------------- */

/* An independent reading of a header section: the first string value of
 * each header the reader names, and how many headers; false when the
 * section does not parse. */
typedef struct ref_msg {
    cg_span_t v[6];
    uint32_t n;
} ref_msg_t;

static const char *const ref_names[6] = {":message-type", ":event-type",    ":exception-type",
                                         ":error-code",   ":error-message", ":content-type"};

static bool ref_headers(const uint8_t *s, size_t n, ref_msg_t *r)
{
    static const uint8_t widths[10] = {0, 0, 1, 2, 4, 8, 0, 0, 8, 16};
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < n; r->n++) {
        size_t nl = s[i++];
        if (n - i < nl + 1)
            return false;
        const uint8_t *name = s + i;
        i += nl;
        uint8_t type = s[i++];
        if (type > 9)
            return false;
        size_t w = widths[type];
        if (type == 6 || type == 7) {
            if (n - i < 2)
                return false;
            w = (size_t)s[i] << 8 | s[i + 1];
            i += 2;
        }
        if (n - i < w)
            return false;
        for (size_t k = 0; k < 6 && type == 7; k++)
            if (strlen(ref_names[k]) == nl && memcmp(ref_names[k], name, nl) == 0 &&
                r->v[k].p == NULL)
                r->v[k] = cg_span((const char *)s + i, w);
        i += w;
    }
    return true;
}

/* Header section h in a message: the reader gives what the reference reads. */
static void check_headers(const cg_buf_t *h)
{
    cg_buf_t s = {0};
    encode(&s, cg_span(h->p, h->len), cg_span("{}", 2), false);
    cg_evs_t r;
    cg_evs_msg_t m;
    ssize_t got = feed_all(s.p, s.len, &m, &r);
    ref_msg_t want;
    const uint8_t *hs = (const uint8_t *)s.p + CG_EVS_PRELUDE;
    if (!ref_headers(hs, h->len, &want)) {
        assert_int_equal(got, CG_EVS_E_HEADER);
    } else {
        assert_int_equal(got, (ssize_t)s.len);
        const cg_span_t v[6] = {m.message_type, m.event_type,    m.exception_type,
                                m.error_code,   m.error_message, m.content_type};
        for (size_t k = 0; k < 6; k++) {
            assert_ptr_equal(v[k].p, want.v[k].p);
            assert_int_equal(v[k].n, want.v[k].n);
        }
        assert_int_equal(m.nheaders, want.n);
    }
    cg_evs_free(&r);
    cg_buf_free(&s);
}

static void usual(cg_buf_t *h, const char *event_type)
{
    h->len = 0;
    evs_header(h, ":event-type", event_type);
    evs_header(h, ":content-type", "application/json");
    evs_header(h, ":message-type", "event");
}

/* Bedrock's usual three headers are found as bytes, without a walk: the
 * same fields as the walk for them, for any event type, and for every
 * change of one of their bytes; and other orders, values and extra headers
 * go through the walk. */
static void test_usual_headers(void **state)
{
    (void)state;
    cg_buf_t h = {0};
    char longer[301];
    memset(longer, 'x', 300);
    longer[300] = '\0';
    const char *const types[] = {"", "a", "contentBlockDelta", "messageStop", longer};
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        usual(&h, types[k]);
        check_headers(&h);
    }
    /* every byte of the usual section changed, three ways */
    usual(&h, "contentBlockDelta");
    static const uint8_t flips[] = {0x01, 0x20, 0xff};
    for (size_t i = 0; i < h.len; i++) {
        for (size_t f = 0; f < sizeof(flips); f++) {
            h.p[i] ^= (char)flips[f];
            check_headers(&h);
            h.p[i] ^= (char)flips[f];
        }
    }
    /* other orders, values, an extra header */
    h.len = 0;
    evs_header(&h, ":content-type", "application/json");
    evs_header(&h, ":event-type", "contentBlockDelta");
    evs_header(&h, ":message-type", "event");
    check_headers(&h);
    h.len = 0;
    evs_header(&h, ":event-type", "contentBlockDelta");
    evs_header(&h, ":content-type", "application/jsonx");
    evs_header(&h, ":message-type", "event");
    check_headers(&h);
    h.len = 0;
    evs_header(&h, ":event-type", "contentBlockDelta");
    evs_header(&h, ":content-type", "application/json");
    evs_header(&h, ":message-type", "exception");
    check_headers(&h);
    usual(&h, "contentBlockDelta");
    evs_header(&h, ":event-type", "second");
    check_headers(&h);
    usual(&h, "contentBlockDelta");
    h.len -= 1; /* the last value cut short */
    check_headers(&h);
    cg_buf_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_crc32_long_known),
        cmocka_unit_test(test_crc32_folding_equals_table),
        cmocka_unit_test(test_usual_headers),
        cmocka_unit_test(test_aws_vectors_positive),
        cmocka_unit_test(test_aws_vectors_negative),
        cmocka_unit_test(test_every_header_type_skipped),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_largest_message),
        cmocka_unit_test(test_expected_size),
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_error_after_good_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
