/*
 * Heap allocations counted by wrapping malloc, calloc and realloc at link
 * time (GNU ld --wrap), including those inside libcitegate_core.a. A
 * program that counts links alloc_count.c with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (bench/core, test_cite).
 */
#ifndef CG_ALLOC_COUNT_H
#define CG_ALLOC_COUNT_H

#include <stdint.h>

/* malloc + calloc + realloc calls so far */
extern uint64_t alloc_count;

#endif
