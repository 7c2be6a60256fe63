/*
 * Failure injection for tests (CMake option CITEGATE_FAULTS): with
 * CITEGATE_FAULT_WRITE=N the Nth socket write attempt of the process fails
 * as if the peer had reset; with CITEGATE_FAULT_TLS=N the Nth TLS encrypt
 * fails; with CITEGATE_FAULT_H2=N the Nth checked nghttp2 call fails with a
 * non-fatal error, with CITEGATE_FAULT_H2_FATAL=N with a fatal one (h2lib.h).
 * N = -1 counts without failing; with any set, the counts are printed at
 * exit ("citegate-fault: writes=W tls=T h2=H").
 * Without the option both checks are constant false.
 */
#ifndef CITEGATE_IO_FAULT_H
#define CITEGATE_IO_FAULT_H

#include <stdbool.h>

#ifdef CITEGATE_FAULTS
bool cg_fault_write(void);
bool cg_fault_tls(void);
/* 0, or the error the Nth checked nghttp2 call returns instead of being
 * made (CITEGATE_FAULT_H2: non-fatal; CITEGATE_FAULT_H2_FATAL: fatal). */
int cg_fault_h2(void);
#else
static inline bool cg_fault_write(void)
{
    return false;
}
static inline bool cg_fault_tls(void)
{
    return false;
}
static inline int cg_fault_h2(void)
{
    return 0;
}
#endif

#endif
