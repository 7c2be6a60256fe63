/* Failure injection for the tests: see fault.h. Depends on libc only. */
#include "fault.h"

#ifdef CITEGATE_FAULTS
#include <stdio.h>
#include <stdlib.h>

static long want_write, want_tls; /* N: the Nth attempt fails; 0: never; < 0: count only */
static unsigned long writes, tls;

static void report(void)
{
    fprintf(stderr, "citegate-fault: writes=%lu tls=%lu\n", writes, tls);
}

__attribute__((constructor)) static void fault_init(void)
{
    const char *w = getenv("CITEGATE_FAULT_WRITE");
    const char *t = getenv("CITEGATE_FAULT_TLS");
    want_write = w ? strtol(w, NULL, 10) : 0;
    want_tls = t ? strtol(t, NULL, 10) : 0;
    if (want_write || want_tls)
        atexit(report);
}

bool cg_fault_write(void)
{
    return ++writes == (unsigned long)want_write && want_write > 0;
}

bool cg_fault_tls(void)
{
    return ++tls == (unsigned long)want_tls && want_tls > 0;
}
#endif
