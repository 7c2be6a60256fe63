/* Failure injection: see fault.h. */
#include "fault.h"

#ifdef CITEGATE_FAULTS
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct counter {
    const char *var;
    long target; /* 0: never; -1: count only */
    long seen;
    bool read;
} counter_t;

static counter_t writes = {"CITEGATE_FAULT_WRITE", 0, 0, false};
static counter_t tls = {"CITEGATE_FAULT_TLS", 0, 0, false};

static void report(void)
{
    fprintf(stderr, "citegate-fault: pid=%d writes=%ld tls=%ld\n", (int)getpid(), writes.seen,
            tls.seen);
}

static bool hit(counter_t *c)
{
    if (!c->read) {
        const char *v = getenv(c->var);
        c->target = v ? strtol(v, NULL, 10) : 0;
        c->read = true;
        static bool reporting;
        if (c->target < 0 && !reporting) {
            reporting = true;
            atexit(report);
        }
    }
    if (c->target == 0)
        return false;
    return ++c->seen == c->target;
}

bool cg_fault_write(void)
{
    return hit(&writes);
}

bool cg_fault_tls(void)
{
    return hit(&tls);
}
#endif
