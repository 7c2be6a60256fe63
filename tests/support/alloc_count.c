/* The link-time wrappers that count heap allocations (alloc_count.h). */
#include "alloc_count.h"

#include <stddef.h>

uint64_t alloc_count;

void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
    alloc_count++;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t count, size_t size)
{
    alloc_count++;
    return __real_calloc(count, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    alloc_count++;
    return __real_realloc(p, n);
}
