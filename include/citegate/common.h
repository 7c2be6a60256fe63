/*
 * Small shared types of the streaming core: byte spans and growable buffers.
 *
 * Out-of-memory policy: citegate aborts on allocation failure, like Redis.
 * Every buffer below has a cap, so an allocation failure means the machine
 * is out of memory, not that a peer sent something large; recovering half a
 * stream would be worse than a restart by the supervisor.
 */
#ifndef CITEGATE_COMMON_H
#define CITEGATE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A view of bytes owned by someone else (iovec-compatible order). */
typedef struct cg_span {
    const char *p;
    size_t n;
} cg_span_t;

#define CG_SPAN_LIT(s) ((cg_span_t){(s), sizeof(s) - 1})
/* A string literal and its length, as two arguments: the length is never
 * counted by hand (h2o's H2O_STRLIT). */
#define CG_STRLIT(s) (s), (sizeof(s) - 1)
/* Does the string s begin with the literal lit (exactly, or in any case)?
 * strncmp / strncasecmp with lit's length (the caller includes their
 * headers). */
#define CG_HAS_PREFIX(s, lit)  (strncmp((s), (lit), sizeof(lit) - 1) == 0)
#define CG_HAS_IPREFIX(s, lit) (strncasecmp((s), (lit), sizeof(lit) - 1) == 0)

/* The struct of `type` whose member `member` is at p. */
#define CG_CONTAINER_OF(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/*
 * An intrusive doubly linked list: the links live in the items, so joining
 * and leaving cost no allocation and leaving from the middle is O(1). A
 * list is a sentinel (cg_list_init); an item's link is NULL-linked while it
 * is on no list, so cg_list_unlink of an unlinked item does nothing.
 */
typedef struct cg_list {
    struct cg_list *prev, *next;
} cg_list_t;

static inline void cg_list_init(cg_list_t *head)
{
    head->prev = head->next = head;
}

static inline bool cg_list_empty(const cg_list_t *head)
{
    return head->next == head;
}

static inline bool cg_list_linked(const cg_list_t *item)
{
    return item->next != NULL;
}

/* Puts item (on no list) right before pos: at the tail when pos is the head. */
static inline void cg_list_insert(cg_list_t *pos, cg_list_t *item)
{
    item->prev = pos->prev;
    item->next = pos;
    pos->prev->next = item;
    pos->prev = item;
}

/* Walks the items of list head: pos is each link in turn, next the one
 * after it, read first, so pos may leave the list (and be freed). */
#define cg_list_each(pos, next, head)                                                              \
    for ((pos) = (head)->next, (next) = (pos)->next; (pos) != (head);                            \
         (pos) = (next), (next) = (pos)->next)

static inline void cg_list_unlink(cg_list_t *item)
{
    if (!cg_list_linked(item))
        return;
    item->prev->next = item->next;
    item->next->prev = item->prev;
    item->prev = item->next = NULL;
}

static inline cg_span_t cg_span(const char *p, size_t n)
{
    return (cg_span_t){p, n};
}

bool cg_span_eq(cg_span_t a, const char *lit);

/* A growable byte buffer. `len` bytes are valid; `p` may move on growth. */
typedef struct cg_buf {
    char *p;
    size_t len;
    size_t cap;
} cg_buf_t;

/*
 * An invariant checked in every build: NDEBUG does not remove it, so the
 * fuzzers and the release build check what the tests check. A false
 * invariant is a bug in citegate, and going on could write to a finished
 * stream or free what a caller still uses, so the process says where and
 * aborts (Redis's serverAssert). Only for checks that cost a branch.
 */
#define CG_ASSERT(cond) ((cond) ? (void)0 : cg_assert_failed(#cond, __FILE__, __LINE__))
_Noreturn void cg_assert_failed(const char *cond, const char *file, int line);

void *cg_xmalloc(size_t n);
void *cg_xrealloc(void *p, size_t n);
void *cg_xcalloc(size_t count, size_t size);
char *cg_xstrndup(const char *s, size_t n);

void cg_buf_free(cg_buf_t *b);
/* Makes room for `extra` more bytes and returns a pointer to the tail. */
char *cg_buf_reserve(cg_buf_t *b, size_t extra);
void cg_buf_put(cg_buf_t *b, const void *p, size_t n);
/* b's bytes become exactly p[0..n), in an allocation of n: for a value set
 * once and kept for a stream's life (an id, a model), where rounding up
 * would cost every open stream. */
void cg_buf_set(cg_buf_t *b, const void *p, size_t n);
void cg_buf_puts(cg_buf_t *b, const char *s);
void cg_buf_putc(cg_buf_t *b, char c);
void cg_buf_printf(cg_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes room for one more element in a growing array of elem-sized items
 * (doubling from `first`); returns the array, possibly moved. */
void *cg_grow(void *v, size_t n, size_t *cap, size_t first, size_t elem);

/* Value of a hexadecimal digit, or -1. */
int cg_hex_digit(char c);

/* Length of the longest prefix of s[0..n) that ends on a UTF-8 character boundary. */
size_t cg_utf8_cut(const char *s, size_t n);

/* Is s[0..n) valid UTF-8 (no overlong form, surrogate, code point over
 * U+10FFFF, stray or missing continuation byte)? */
bool cg_utf8_valid(const char *s, size_t n);
/* Appends s[0..n) with each byte that starts no valid UTF-8 sequence (an
 * overlong form, a surrogate, a code point over U+10FFFF, a stray or
 * missing continuation byte) replaced by U+FFFD. */
void cg_utf8_repair(cg_buf_t *b, const char *s, size_t n);

#endif
