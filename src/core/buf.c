/* Spans, buffers and the allocation wrappers (abort on OOM, see common.h). */
#include "citegate/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "citegate: out of memory allocating %zu bytes\n", n);
    abort();
}

void cg_assert_failed(const char *cond, const char *file, int line)
{
    fprintf(stderr, "citegate: %s:%d: invariant failed: %s\n", file, line, cond);
    abort();
}

void *cg_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *cg_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

void *cg_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p == NULL)
        oom(count * size);
    return p;
}

char *cg_xstrndup(const char *s, size_t n)
{
    char *p = cg_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

bool cg_span_eq(cg_span_t a, const char *lit)
{
    size_t n = strlen(lit);
    return a.n == n && memcmp(a.p, lit, n) == 0;
}

void cg_buf_free(cg_buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

char *cg_buf_reserve(cg_buf_t *b, size_t extra)
{
    if (b->cap - b->len < extra || b->p == NULL) {
        size_t cap = b->cap ? b->cap : 64; /* most buffers hold a name or an id */
        while (cap - b->len < extra)
            cap *= 2;
        b->p = cg_xrealloc(b->p, cap);
        b->cap = cap;
    }
    return b->p + b->len;
}

void cg_buf_put(cg_buf_t *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    memcpy(cg_buf_reserve(b, n), p, n);
    b->len += n;
}

void cg_buf_set(cg_buf_t *b, const void *p, size_t n)
{
    if (b->cap < n || b->p == NULL) {
        b->p = cg_xrealloc(b->p, n);
        b->cap = n;
    }
    if (n)
        memcpy(b->p, p, n);
    b->len = n;
}

void cg_buf_puts(cg_buf_t *b, const char *s)
{
    cg_buf_put(b, s, strlen(s));
}

void cg_buf_putc(cg_buf_t *b, char c)
{
    *cg_buf_reserve(b, 1) = c;
    b->len++;
}

void cg_buf_printf(cg_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    char *tail = cg_buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(tail, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t cg_utf8_cut(const char *s, size_t n)
{
    /* Step back over continuation bytes (10xxxxxx) to the lead byte of the
     * last character; keep it only if the whole sequence fits. */
    size_t i = n;
    size_t back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0)
        return back ? 0 : n;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need;
    if (lead < 0x80)
        need = 1;
    else if ((lead & 0xE0) == 0xC0)
        need = 2;
    else if ((lead & 0xF0) == 0xE0)
        need = 3;
    else if ((lead & 0xF8) == 0xF0)
        need = 4;
    else
        return n; /* not UTF-8: cut where asked */
    return (back + 1 >= need) ? n : i - 1;
}

int cg_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void *cg_grow(void *v, size_t n, size_t *cap, size_t first, size_t elem)
{
    if (n < *cap)
        return v;
    *cap = *cap ? *cap * 2 : first;
    return cg_xrealloc(v, *cap * elem);
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one
 * (overlong forms, surrogates and code points above U+10FFFF included). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

bool cg_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        uint64_t v;
        if (i + 8 <= n && (memcpy(&v, u + i, 8), (v & 0x8080808080808080ull) == 0)) {
            i += 8; /* eight ASCII bytes: most of a chat body */
            continue;
        }
        size_t len = utf8_seq(u + i, n - i);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

void cg_utf8_repair(cg_buf_t *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* run: valid bytes not yet copied, ending at i */
    while (i < n) {
        size_t len = utf8_seq(u + i, n - i);
        if (len > 0) {
            i += len;
            run += len;
            continue;
        }
        cg_buf_put(b, s + i - run, run);
        cg_buf_puts(b, "\xEF\xBF\xBD");
        run = 0;
        i++;
    }
    cg_buf_put(b, s + i - run, run);
}
