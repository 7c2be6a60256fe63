/* AWS event-stream reader: see include/citegate/evstream.h for the contract. */
#include "citegate/evstream.h"

#include <stddef.h>
#include <string.h>
#include <threads.h>

/* What the straddle buffer may keep between messages: Bedrock's are a few
 * hundred bytes, so the steady state reuses it; a large one is given back. */
#define EVS_KEEP 4096
/* The straddle buffer's first size: one allocation holds a usual message
 * (Bedrock's are a few hundred bytes), not four as it doubles. */
#define EVS_FIRST_BUF 1024

/* --- CRC-32 ----------------------------------------------------------------
 *
 * A message's CRC is taken over every byte it has, so the check must run at
 * many bytes a cycle, not one. Two ways, with the same results:
 *
 * - The table: slicing by eight (eight tables of 256 words, 8 KiB), on
 *   every CPU, and for short runs everywhere.
 *
 * - Folding by carry-less multiplication (x86-64 CPUs with PCLMULQDQ and
 *   SSSE3, checked at run time), for runs of CRC_FOLD_MIN bytes and more.
 *   In the bit order of this CRC, a 16-byte block read little-endian is the
 *   polynomial whose bit i (bit i%8 of byte i/8) is the coefficient of
 *   x^(127-i); the first bit of the input is the highest power. The CRC
 *   register after a prefix M of the input is (M * x^32) mod P, and the
 *   register a run starts from goes in by XOR into its first four bytes.
 *   A block X = A * x^64 + B (A its first eight bytes, B the last eight)
 *   moved D bits on is X * x^D == A * (x^(D+64) mod P) + B * (x^D mod P)
 *   (mod P), a sum of two 64 x 32-bit products of fewer than 96 bits, so it
 *   is again one block, to which the block D bits on is added. PCLMULQDQ
 *   multiplies two 64-bit operands in this bit order to a 128-bit one
 *   whose value is their product times x (the product's 127 bits are read
 *   against 128 positions), so each constant is x^(E-1) mod P for a
 *   product by x^E.
 *
 *   Four blocks are carried at once, 64 bytes apart (D = 512); then each
 *   of them and each whole block left (up to three) is moved to the last
 *   whole block (D = 128 to 768, all at once) and added. A last part T of
 *   r < 16 bytes
 *   makes the input X * x^(8r) + T, which is the block of X's first r
 *   bytes (at its end, zeros before) moved one block on, plus the block of
 *   X's last 16 - r bytes followed by T (byte moves by PSHUFB). The block
 *   left is reduced by the table: the register of a 16-byte input from 0
 *   is exactly that block times x^32 mod P. The constants are computed
 *   below, once, from P.
 */
static uint32_t crc_table[8][256];
static once_flag crc_once = ONCE_FLAG_INIT;

/* P without its x^32 term, in the usual (not reflected) order: bit d is
 * the coefficient of x^d. */
#define CRC_POLY 0x04C11DB7u

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_CLMUL 1
#include <immintrin.h>

/* Runs shorter than this go to the table: below four blocks, the fixed cost
 * of a fold (the last block's reduction) is not repaid. */
#define CRC_FOLD_MIN 64

static bool crc_fold_ok;
/* The constants of a move by D = 128 q bits (crc_k[q], q = 1..6):
 * {x^(D+63), x^(D-1)} mod P, each as an operand whose bit 63-d is the
 * coefficient of x^d. */
static uint64_t crc_k[7][2];
/* Byte-moving masks for PSHUFB at offset r: crc_shift + 16 + r moves a
 * block's bytes r places towards its start (zeros after), crc_shift + r
 * 16 - r places towards its end (zeros before); crc_keep + r keeps a
 * block's last r bytes. */
static uint8_t crc_shift[48], crc_keep[32];

/* x^k mod P, as such an operand. */
static uint64_t crc_xpow(unsigned k)
{
    uint32_t r = 1;
    for (unsigned i = 0; i < k; i++)
        r = (r << 1) ^ ((r & 0x80000000u) ? CRC_POLY : 0);
    uint64_t v = 0;
    for (unsigned d = 0; d < 32; d++)
        if (r >> d & 1)
            v |= 1ull << (63 - d);
    return v;
}
#endif

static void crc_make(void)
{
    uint32_t reflected = 0;
    for (unsigned d = 0; d < 32; d++)
        if (CRC_POLY >> d & 1)
            reflected |= 1u << (31 - d);
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? reflected ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#ifdef CRC_CLMUL
    for (unsigned q = 1; q < 7; q++) {
        crc_k[q][0] = crc_xpow(128 * q + 63);
        crc_k[q][1] = crc_xpow(128 * q - 1);
    }
    for (unsigned i = 0; i < 48; i++)
        crc_shift[i] = i >= 16 && i < 32 ? (uint8_t)(i - 16) : 0x80;
    for (unsigned i = 0; i < 32; i++)
        crc_keep[i] = i >= 16 ? 0xff : 0;
    __builtin_cpu_init();
    crc_fold_ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
#endif
}

/* The register c (inverted, as the loops keep it) after p[0..n), by table. */
static uint32_t crc_by_table(uint32_t c, const uint8_t *s, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; s += 8, n -= 8) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + 4, 4);
        a ^= c;
        c = crc_table[7][a & 0xff] ^ crc_table[6][(a >> 8) & 0xff] ^
            crc_table[5][(a >> 16) & 0xff] ^ crc_table[4][a >> 24] ^ crc_table[3][b & 0xff] ^
            crc_table[2][(b >> 8) & 0xff] ^ crc_table[1][(b >> 16) & 0xff] ^ crc_table[0][b >> 24];
    }
#endif
    while (n--)
        c = crc_table[0][(c ^ *s++) & 0xff] ^ (c >> 8);
    return c;
}

#ifdef CRC_CLMUL
#define CRC_TARGET __attribute__((target("pclmul,ssse3")))

/* Block x moved on by the constants of crc_k[q]. */
CRC_TARGET static inline __m128i crc_move(__m128i x, unsigned q)
{
    const __m128i k = _mm_loadu_si128((const __m128i *)(const void *)crc_k[q]);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

CRC_TARGET static inline __m128i crc_load(const void *s)
{
    return _mm_loadu_si128((const __m128i *)s);
}

/* The register c after p[0..n), n >= CRC_FOLD_MIN, by folding. */
CRC_TARGET static uint32_t crc_by_folding(uint32_t c, const uint8_t *s, size_t n)
{
    const uint8_t *end = s + n;
    __m128i x0 = _mm_xor_si128(crc_load(s), _mm_cvtsi32_si128((int)c));
    __m128i x1 = crc_load(s + 16), x2 = crc_load(s + 32), x3 = crc_load(s + 48);
    for (s += 64; end - s >= 64; s += 64) {
        x0 = _mm_xor_si128(crc_move(x0, 4), crc_load(s));
        x1 = _mm_xor_si128(crc_move(x1, 4), crc_load(s + 16));
        x2 = _mm_xor_si128(crc_move(x2, 4), crc_load(s + 32));
        x3 = _mm_xor_si128(crc_move(x3, 4), crc_load(s + 48));
    }
    /* left: 0-3 whole blocks after x3, then r bytes */
    unsigned left = (unsigned)((end - s) / 16);
    size_t r = (size_t)(end - s) % 16;
    __m128i x;
    switch (left) {
    case 0: x = x3; break;
    case 1: x = _mm_xor_si128(crc_move(x3, 1), crc_load(s)); break;
    case 2:
        x = _mm_xor_si128(_mm_xor_si128(crc_move(x3, 2), crc_move(crc_load(s), 1)),
                          crc_load(s + 16));
        break;
    default:
        x = _mm_xor_si128(_mm_xor_si128(crc_move(x3, 3), crc_move(crc_load(s), 2)),
                          _mm_xor_si128(crc_move(crc_load(s + 16), 1), crc_load(s + 32)));
        break;
    }
    __m128i x01 = _mm_xor_si128(crc_move(x0, left + 3), crc_move(x1, left + 2));
    x = _mm_xor_si128(x, _mm_xor_si128(x01, crc_move(x2, left + 1)));
    if (r) {
        __m128i head = _mm_shuffle_epi8(x, crc_load(crc_shift + r));
        __m128i rest = _mm_or_si128(_mm_shuffle_epi8(x, crc_load(crc_shift + 16 + r)),
                                    _mm_and_si128(crc_load(end - 16), crc_load(crc_keep + r)));
        x = _mm_xor_si128(crc_move(head, 1), rest);
    }
    uint8_t last[16];
    _mm_storeu_si128((__m128i *)(void *)last, x);
    return crc_by_table(0, last, 16);
}
#endif

/* The register c after p[0..n), the tables made. */
static inline uint32_t crc_run(uint32_t c, const void *p, size_t n)
{
#ifdef CRC_CLMUL
    if (n >= CRC_FOLD_MIN && crc_fold_ok)
        return crc_by_folding(c, p, n);
#endif
    return crc_by_table(c, p, n);
}

uint32_t cg__crc32_table(uint32_t crc, const void *p, size_t n)
{
    call_once(&crc_once, crc_make);
    return ~crc_by_table(~crc, p, n);
}

bool cg__crc32_folding(uint32_t crc, const void *p, size_t n, uint32_t *out)
{
    call_once(&crc_once, crc_make);
#ifdef CRC_CLMUL
    if (crc_fold_ok && n >= CRC_FOLD_MIN) {
        *out = ~crc_by_folding(~crc, p, n);
        return true;
    }
#else
    (void)crc, (void)p, (void)n, (void)out;
#endif
    return false;
}

uint32_t cg_crc32(uint32_t crc, const void *p, size_t n)
{
    call_once(&crc_once, crc_make);
    return ~crc_run(~crc, p, n);
}

/* --- one message -------------------------------------------------------------- */

static uint32_t be32(const char *p)
{
    const uint8_t *s = (const uint8_t *)p;
    return (uint32_t)s[0] << 24 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | s[3];
}

static size_t be16(const uint8_t *s)
{
    return (size_t)s[0] << 8 | s[1];
}

/* The prelude's CRC first: behind a bad one, the lengths mean nothing. */
static int check_prelude(const char *p, uint32_t *total)
{
    if (~crc_by_table(~0u, (const uint8_t *)p, 8) != be32(p + 8))
        return CG_EVS_E_PRELUDE_CRC;
    uint32_t t = be32(p), h = be32(p + 4);
    if (t < CG_EVS_MIN_MESSAGE)
        return CG_EVS_E_SHORT;
    if (t > CG_EVS_MAX_MESSAGE)
        return CG_EVS_E_LONG;
    if (h > t - CG_EVS_MIN_MESSAGE)
        return CG_EVS_E_HEADERS_LEN;
    *total = t;
    return 0;
}

/* The value width of each type; 6 and 7 carry their own. */
static const uint8_t value_width[10] = {0, 0, 1, 2, 4, 8, 0, 0, 8, 16};

typedef struct header {
    cg_span_t name;
    cg_evs_value_t value;
} header_t;

/* Reads the header at *s (before end) into h; false when it overruns the
 * section or has no known type. */
static bool next_header(const uint8_t **s, const uint8_t *end, header_t *h)
{
    const uint8_t *p = *s;
    size_t nl = *p++;
    if ((size_t)(end - p) < nl + 1)
        return false;
    h->name = cg_span((const char *)p, nl);
    p += nl;
    uint8_t type = *p++;
    if (type > 9)
        return false;
    size_t w = value_width[type];
    if (type == 6 || type == 7) {
        if (end - p < 2)
            return false;
        w = be16(p);
        p += 2;
    }
    if ((size_t)(end - p) < w)
        return false;
    h->value = (cg_evs_value_t){type, cg_span((const char *)p, w)};
    *s = p + w;
    return true;
}

/* The headers cg_evs_msg_t names (strings only), found by their length
 * first: every message has three or four of them, so this runs for each. */
#define NAMED(h, lit)                                                                              \
    ((h)->name.n == sizeof(lit) - 1 && memcmp((h)->name.p, lit, sizeof(lit) - 1) == 0)

static void note_header(cg_evs_msg_t *m, const header_t *h)
{
    if (h->value.type != 7)
        return;
    cg_span_t *slot = NULL;
    switch (h->name.n) {
    case 11:
        slot = NAMED(h, ":event-type")   ? &m->event_type
               : NAMED(h, ":error-code") ? &m->error_code
                                         : NULL;
        break;
    case 13:
        slot = NAMED(h, ":message-type")   ? &m->message_type
               : NAMED(h, ":content-type") ? &m->content_type
                                           : NULL;
        break;
    case 14:
        slot = NAMED(h, ":error-message") ? &m->error_message : NULL;
        break;
    case 15:
        slot = NAMED(h, ":exception-type") ? &m->exception_type : NULL;
        break;
    default:
        break;
    }
    if (slot && slot->p == NULL)
        *slot = h->value.v;
}

/* The headers nearly every event of Bedrock's streams has, in the order it
 * sends them: ":event-type" (any value), then ":content-type"
 * "application/json" and ":message-type" "event", all strings. Found as
 * bytes, they need no walk, whose three steps each wait for the last: the
 * walk would read exactly these three headers from them. */
static const char usual_head[] = "\x0b:event-type\x07";
static const char usual_tail[] = "\x0d:content-type\x07\x00\x10"
                                 "application/json"
                                 "\x0d:message-type\x07\x00\x05"
                                 "event";

static bool usual_headers(cg_evs_msg_t *m, const char *h, size_t hlen)
{
    const size_t nh = sizeof(usual_head) - 1, nt = sizeof(usual_tail) - 1;
    if (hlen < nh + 2 + nt || memcmp(h, usual_head, nh) != 0)
        return false;
    size_t vl = be16((const uint8_t *)h + nh);
    const char *tail = h + nh + 2 + vl;
    if (hlen != nh + 2 + vl + nt || memcmp(tail, usual_tail, nt) != 0)
        return false;
    m->event_type = cg_span(h + nh + 2, vl);
    m->content_type = cg_span(tail + 17, 16);
    m->message_type = cg_span(tail + 50, 5);
    m->nheaders = 3;
    return true;
}

/* A whole message of `total` bytes at p, its prelude checked. */
static int read_message(const char *p, uint32_t total, cg_evs_msg_t *m)
{
    /* The prelude's CRC, checked already, is the CRC of its first 8 bytes:
     * the message's goes on from it. */
    if (~crc_run(~be32(p + 8), p + 8, total - 12) != be32(p + total - 4))
        return CG_EVS_E_CRC;
    uint32_t hlen = be32(p + 4);
    /* Member by member, each from a constant: a memset of the whole (which
     * compilers make a string store, slow to start) or a chain of copies
     * (loaded back from the store before it lands) cost more than the rest
     * of this. */
    m->message_type = cg_span(NULL, 0);
    m->event_type = cg_span(NULL, 0);
    m->exception_type = cg_span(NULL, 0);
    m->error_code = cg_span(NULL, 0);
    m->error_message = cg_span(NULL, 0);
    m->content_type = cg_span(NULL, 0);
    m->nheaders = 0;
    m->headers = cg_span(p + CG_EVS_PRELUDE, hlen);
    m->payload = cg_span(p + CG_EVS_PRELUDE + hlen, total - CG_EVS_MIN_MESSAGE - hlen);
    if (usual_headers(m, m->headers.p, hlen))
        return 0;
    const uint8_t *s = (const uint8_t *)m->headers.p, *end = s + hlen;
    while (s < end) {
        header_t h;
        if (!next_header(&s, end, &h))
            return CG_EVS_E_HEADER;
        note_header(m, &h);
        m->nheaders++;
    }
    return 0;
}

bool cg_evs_header(const cg_evs_msg_t *m, const char *name, cg_evs_value_t *out)
{
    const uint8_t *s = (const uint8_t *)m->headers.p, *end = s + m->headers.n;
    size_t nl = strlen(name);
    header_t h;
    while (s < end && next_header(&s, end, &h)) {
        if (h.name.n == nl && memcmp(h.name.p, name, nl) == 0) {
            *out = h.value;
            return true;
        }
    }
    return false;
}

/* --- the stream --------------------------------------------------------------- */

void cg_evs_init(cg_evs_t *r)
{
    call_once(&crc_once, crc_make); /* the reader's CRCs use the tables without asking */
    memset(r, 0, sizeof(*r));
}

void cg_evs_free(cg_evs_t *r)
{
    cg_buf_free(&r->buf);
}

void cg_evs_expect(cg_evs_t *r, size_t usual)
{
    r->usual = usual;
}

size_t cg_evs_pending(const cg_evs_t *r)
{
    return r->delivered ? 0 : r->buf.len;
}

static int fail(cg_evs_t *r, int err)
{
    r->err = err;
    return err;
}

static void clear_delivered(cg_evs_t *r)
{
    r->delivered = false;
    r->buf.len = 0;
    r->total = 0;
    if (r->buf.cap > (r->usual > EVS_KEEP ? r->usual : EVS_KEEP))
        cg_buf_free(&r->buf);
}

/* A message that straddles reads: gathered in buf. */
static ssize_t gather(cg_evs_t *r, const char *in, size_t len, cg_evs_msg_t *m)
{
    size_t used = 0;
    if (r->buf.cap == 0 && len > 0) /* once: a usual message fits, and never grows it */
        cg_buf_reserve(&r->buf, r->usual > EVS_FIRST_BUF ? r->usual : EVS_FIRST_BUF);
    if (r->buf.len < CG_EVS_PRELUDE) {
        used = CG_EVS_PRELUDE - r->buf.len < len ? CG_EVS_PRELUDE - r->buf.len : len;
        cg_buf_put(&r->buf, in, used);
        if (r->buf.len < CG_EVS_PRELUDE)
            return CG_EVS_AGAIN;
        int e = check_prelude(r->buf.p, &r->total);
        if (e)
            return fail(r, e);
    }
    size_t n = r->total - r->buf.len;
    if (n > len - used)
        n = len - used;
    cg_buf_put(&r->buf, in + used, n);
    used += n;
    if (r->buf.len < r->total)
        return CG_EVS_AGAIN;
    int e = read_message(r->buf.p, r->total, m);
    if (e)
        return fail(r, e);
    r->delivered = true;
    return (ssize_t)used;
}

ssize_t cg_evs_feed(cg_evs_t *r, const char *in, size_t len, cg_evs_msg_t *m)
{
    if (r->err)
        return r->err;
    if (r->delivered)
        clear_delivered(r);
    if (r->buf.len == 0 && len >= CG_EVS_PRELUDE) {
        uint32_t total;
        int e = check_prelude(in, &total);
        if (e)
            return fail(r, e);
        if (len >= total) { /* whole in this input: handed out in place */
            e = read_message(in, total, m);
            return e ? fail(r, e) : (ssize_t)total;
        }
    }
    return gather(r, in, len, m);
}

const char *cg_evs_strerror(int err)
{
    switch (err) {
    case CG_EVS_E_PRELUDE_CRC: return "event-stream prelude CRC mismatch";
    case CG_EVS_E_SHORT: return "event-stream message shorter than 16 bytes";
    case CG_EVS_E_LONG: return "event-stream message longer than 16 MiB";
    case CG_EVS_E_HEADERS_LEN: return "event-stream headers length past the message";
    case CG_EVS_E_HEADER: return "event-stream header overruns its section or has an unknown type";
    case CG_EVS_E_CRC: return "event-stream message CRC mismatch";
    default: return "event-stream framing error";
    }
}
