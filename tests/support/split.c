/* Test support: the split properties' driver (see split.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "split.h"
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define SPLIT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPLIT_SANITIZED 1
#endif
#endif
#ifndef SPLIT_SANITIZED
#define SPLIT_SANITIZED 0
#endif

bool split_sampled(void)
{
    const char *all = getenv("CG_SPLIT_ALL");
    return SPLIT_SANITIZED && !(all && strcmp(all, "1") == 0);
}

static void keep_near(split_points_t *sp, size_t at)
{
    /* the cuts k with at in [k - SPLIT_NEAR, k + SPLIT_NEAR): k = at is right
     * before the byte, k = at + 1 right after it */
    size_t from = at + 1 > SPLIT_NEAR ? at + 1 - SPLIT_NEAR : 1;
    for (size_t k = from; k <= at + SPLIT_NEAR && k < sp->n; k++)
        sp->keep[k] = 1;
}

void split_points_near(split_points_t *sp, size_t at)
{
    keep_near(sp, at);
}

/* The bytes the readers decide on (split.h); the byte after a backslash is
 * in its window. */
static bool interesting(const char *in, size_t i, size_t line)
{
    unsigned char c = (unsigned char)in[i];
    if (c >= 0x80 || c == '\r' || c == '\n' || c == '[' || c == ']' || c == '\\')
        return true;
    /* an SSE field's colon: the first of its line */
    return c == ':' && !memchr(in + line, ':', i - line);
}

void split_points_init(split_points_t *sp, const char *in, size_t n, size_t phase)
{
    sp->n = n;
    sp->keep = cg_xmalloc(n + 1);
    sp->sampled = split_sampled();
    memset(sp->keep, !sp->sampled, n + 1);
    sp->keep[0] = sp->keep[n] = 0;
    if (!sp->sampled)
        return;
    for (size_t k = 1; k < n; k++)
        if (k % SPLIT_STRIDE == phase % SPLIT_STRIDE)
            sp->keep[k] = 1;
    for (size_t i = 0, line = 0; i < n; i++) {
        if (interesting(in, i, line))
            keep_near(sp, i);
        if (in[i] == '\n' || in[i] == '\r')
            line = i + 1;
    }
}

void split_points_free(split_points_t *sp)
{
    free(sp->keep);
    sp->keep = NULL;
}

size_t split_every(const split_case_t *c, const split_points_t *sp, const cg_buf_t *whole)
{
    cg_buf_t out = {0};
    size_t tried = 0;
    for (size_t k = 1; k < c->n; k++) {
        if (!sp->keep[k])
            continue;
        size_t sizes[2] = {k, c->n};
        c->run(c, sizes, 2, &out);
        c->check(c, whole, &out, k, "byte");
        tried++;
    }
    cg_buf_free(&out);
    return tried;
}

static uint32_t rnd(uint64_t *rng)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return (uint32_t)(*rng >> 16);
}

void split_random(const split_case_t *c, size_t patterns, uint64_t *rng, const cg_buf_t *whole)
{
    cg_buf_t out = {0};
    for (size_t k = 1; k < patterns; k++) {
        size_t sizes[16];
        size_t nsizes = 1 + rnd(rng) % 16;
        for (size_t i = 0; i < nsizes; i++)
            sizes[i] = 1 + rnd(rng) % (rnd(rng) % 2 ? 8 : 300);
        c->run(c, sizes, nsizes, &out);
        c->check(c, whole, &out, k, "random");
    }
    cg_buf_free(&out);
}

void split_tally_add(split_tally_t *t, size_t tried, size_t cuts)
{
    t->tried += tried;
    t->cuts += cuts;
    t->runs++;
}

void split_tally_print(const split_tally_t *t, const char *what)
{
    printf("%s: %zu of %zu split points in %zu runs (%s)\n", what, t->tried, t->cuts, t->runs,
           split_sampled() ? "sampled under ASan; CG_SPLIT_ALL=1 tries every one" : "every one");
    fflush(stdout);
}

void split_same_bytes(const char *what, const cg_buf_t *whole, const cg_buf_t *got, size_t k,
                      const char *how)
{
    if (got->len == whole->len && memcmp(got->p, whole->p, whole->len) == 0)
        return;
    view_t a, b;
    char why[8192] = "the same view, other bytes";
    view_of_stream(&a, whole->p, whole->len);
    view_of_stream(&b, got->p, got->len);
    view_equal(&a, &b, why, sizeof(why));
    view_free(&a);
    view_free(&b);
    fail_msg("%s, split %zu (%s): output differs (%s)\nwhole: %.*s\nsplit: %.*s", what, k, how, why,
             (int)whole->len, whole->p, (int)got->len, got->p);
}
