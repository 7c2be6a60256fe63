/*
 * Failure injection for the tests (CMake option CITEGATE_FAULTS, off by
 * default; then both calls are `return false`).
 *
 * Each write site asks once per attempt whether this attempt must fail:
 *   cg_fault_write()  a socket write (client or upstream, plain or TLS)
 *   cg_fault_tls()    a TLS encrypt (cg_tls_write)
 * It fails when it is the Nth attempt counted process-wide, N from
 * CITEGATE_FAULT_WRITE / CITEGATE_FAULT_TLS (read once at start-up; unset or
 * 0: never). When either variable is set (a negative value counts without
 * failing), the process prints "citegate-fault: writes=W tls=T" to stderr at
 * exit: how many attempts the run made, so a test can try every N up to W.
 * The counts are per process: use one worker.
 */
#ifndef CG_FAULT_H
#define CG_FAULT_H

#include <stdbool.h>

bool cg_fault_write(void);
bool cg_fault_tls(void);

#endif
