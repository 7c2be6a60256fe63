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
 * Slicing by eight (eight tables of 256 words, 8 KiB): a message's CRC is
 * taken over every byte it has, so the check must run at several bytes a
 * cycle, not one. The tables are made once per process.
 */
static uint32_t crc_table[8][256];
static once_flag crc_once = ONCE_FLAG_INIT;

static void crc_make(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc_bytes(uint32_t crc, const uint8_t *s, size_t n)
{
    while (n--)
        crc = crc_table[0][(crc ^ *s++) & 0xff] ^ (crc >> 8);
    return crc;
}

uint32_t cg_crc32(uint32_t crc, const void *p, size_t n)
{
    call_once(&crc_once, crc_make);
    const uint8_t *s = p;
    crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; s += 8, n -= 8) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + 4, 4);
        a ^= crc;
        crc = crc_table[7][a & 0xff] ^ crc_table[6][(a >> 8) & 0xff] ^
              crc_table[5][(a >> 16) & 0xff] ^ crc_table[4][a >> 24] ^ crc_table[3][b & 0xff] ^
              crc_table[2][(b >> 8) & 0xff] ^ crc_table[1][(b >> 16) & 0xff] ^ crc_table[0][b >> 24];
    }
#endif
    return ~crc_bytes(crc, s, n);
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
    if (cg_crc32(0, p, 8) != be32(p + 8))
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

#define KNOWN(lit, member) {lit, sizeof(lit) - 1, offsetof(cg_evs_msg_t, member)}
static const struct {
    const char *name;
    size_t len, off;
} known[] = {
    KNOWN(":message-type", message_type),     KNOWN(":event-type", event_type),
    KNOWN(":exception-type", exception_type), KNOWN(":error-code", error_code),
    KNOWN(":error-message", error_message),   KNOWN(":content-type", content_type),
};

static void note_header(cg_evs_msg_t *m, const header_t *h)
{
    if (h->value.type != 7 || h->name.n < 2 || h->name.p[0] != ':')
        return;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (known[i].len == h->name.n && memcmp(known[i].name, h->name.p, h->name.n) == 0) {
            cg_span_t *slot = (cg_span_t *)((char *)m + known[i].off);
            if (slot->p == NULL)
                *slot = h->value.v;
            return;
        }
    }
}

/* A whole message of `total` bytes at p, its prelude checked. */
static int read_message(const char *p, uint32_t total, cg_evs_msg_t *m)
{
    /* The prelude's CRC, checked already, is the CRC of its first 8 bytes:
     * the message's goes on from it. */
    if (cg_crc32(be32(p + 8), p + 8, total - 12) != be32(p + total - 4))
        return CG_EVS_E_CRC;
    uint32_t hlen = be32(p + 4);
    memset(m, 0, sizeof(*m));
    m->headers = cg_span(p + CG_EVS_PRELUDE, hlen);
    m->payload = cg_span(p + CG_EVS_PRELUDE + hlen, total - CG_EVS_MIN_MESSAGE - hlen);
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
    memset(r, 0, sizeof(*r));
}

void cg_evs_free(cg_evs_t *r)
{
    cg_buf_free(&r->buf);
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
    if (r->buf.cap > EVS_KEEP)
        cg_buf_free(&r->buf);
}

/* A message that straddles reads: gathered in buf. */
static ssize_t gather(cg_evs_t *r, const char *in, size_t len, cg_evs_msg_t *m)
{
    size_t used = 0;
    if (r->buf.cap == 0 && len > 0) /* once: a usual message fits, and never grows it */
        cg_buf_reserve(&r->buf, EVS_FIRST_BUF);
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
