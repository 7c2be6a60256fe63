/* Failure injection for the tests: see fault.h. Depends on libc (and nghttp2's error codes). */
#include "fault.h"

#ifdef CITEGATE_FAULTS
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>

/* N: the Nth attempt fails; 0: never; < 0: count only */
static long want_write, want_tls, want_h2, want_h2_fatal;
static unsigned long writes, tls, h2;

static void report(void)
{
    fprintf(stderr, "citegate-fault: writes=%lu tls=%lu h2=%lu\n", writes, tls, h2);
}

static long number(const char *v)
{
    return v ? strtol(v, NULL, 10) : 0;
}

__attribute__((constructor)) static void fault_init(void)
{
    want_write = number(getenv("CITEGATE_FAULT_WRITE"));
    want_tls = number(getenv("CITEGATE_FAULT_TLS"));
    want_h2 = number(getenv("CITEGATE_FAULT_H2"));
    want_h2_fatal = number(getenv("CITEGATE_FAULT_H2_FATAL"));
    if (want_write || want_tls || want_h2 || want_h2_fatal)
        atexit(report);
}

int cg_fault_h2(void)
{
    ++h2;
    if (want_h2 > 0 && h2 == (unsigned long)want_h2)
        return NGHTTP2_ERR_INVALID_ARGUMENT;
    if (want_h2_fatal > 0 && h2 == (unsigned long)want_h2_fatal)
        return NGHTTP2_ERR_NOMEM;
    return 0;
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
