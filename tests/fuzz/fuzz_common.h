/*
 * Helpers shared by the libFuzzer targets: invariant checks that name what
 * failed, the read splitter, and isolated copies of each read.
 *
 * Input layout of the stream targets (fuzz_sse, fuzz_xform): two header
 * bytes, then the stream itself.
 *   byte 0: split seed. Bits 6-7 pick the largest read (1, 7, 61 or 1021
 *           bytes); all 8 bits seed the generator of the read sizes.
 *   byte 1: flags, target specific (caps, styles, ...).
 * Keeping the header separate lets the fuzzer change how a stream is cut
 * without changing the stream, which is what the whole-vs-split checks need.
 */
#ifndef CG_FUZZ_COMMON_H
#define CG_FUZZ_COMMON_H

#include "citegate/common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* abort() rather than assert(): RelWithDebInfo defines NDEBUG. */
#define FZ_CHECK(cond)                                                                        \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

#define FZ_HEADER 2

typedef struct fz_split {
    uint32_t state;
    uint32_t max; /* largest read */
} fz_split_t;

static inline void fz_split_init(fz_split_t *sp, uint8_t seed)
{
    static const uint32_t maxes[4] = {1, 7, 61, 1021};
    sp->max = maxes[seed >> 6];
    sp->state = 0x9E3779B9u ^ ((uint32_t)seed * 0x01000193u);
}

/* Size of the next read, at most `left`. About one read in 16 is empty:
 * a zero-length read is legal and must not disturb any state. */
static inline size_t fz_split_next(fz_split_t *sp, size_t left)
{
    uint32_t s = sp->state; /* xorshift32 */
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    sp->state = s;
    if ((s >> 28) == 0)
        return 0;
    size_t n = 1 + (s & 0xFFFFF) % sp->max;
    return n < left ? n : left;
}

/* Big-endian u32, as AWS's event stream frames its lengths and CRCs. */
static inline uint32_t fz_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void fz_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An exact-size heap copy of one read, so that ASan sees any access past the
 * read's end (it would otherwise land in the next bytes of the fuzz input)
 * and any use of a read after the caller dropped it. */
static inline char *fz_dup(const uint8_t *p, size_t n)
{
    char *c = malloc(n ? n : 1);
    FZ_CHECK(c != NULL);
    if (n)
        memcpy(c, p, n);
    return c;
}

static inline bool fz_is_eol(char c)
{
    return c == '\r' || c == '\n';
}

/* Length of the line end at s[i] (CR, LF or CRLF), 0 if none. */
static inline size_t fz_eol_len(const char *s, size_t n, size_t i)
{
    if (i >= n || !fz_is_eol(s[i]))
        return 0;
    return (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') ? 2 : 1;
}

#endif
