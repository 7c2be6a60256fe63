/*
 * Failure injection for tests (CMake option CITEGATE_FAULTS): with
 * CITEGATE_FAULT_WRITE=N the Nth socket write attempt of the process fails
 * as if the peer had reset; with CITEGATE_FAULT_TLS=N the Nth TLS encrypt
 * fails. N = -1 counts without failing; with either set, the counts are
 * printed at exit ("citegate-fault: writes=W tls=T").
 * Without the option both checks are constant false.
 */
#ifndef CITEGATE_IO_FAULT_H
#define CITEGATE_IO_FAULT_H

#include <stdbool.h>

#ifdef CITEGATE_FAULTS
bool cg_fault_write(void);
bool cg_fault_tls(void);
#else
static inline bool cg_fault_write(void)
{
    return false;
}
static inline bool cg_fault_tls(void)
{
    return false;
}
#endif

#endif
