/*
 * The life of an exchange, one state at a time. Everything the shell used
 * to keep in flags ("head sent", "connected", ...) is read from the state.
 *
 *   NEW        -> QUEUED | CONNECTING | WAITING | DONE
 *   QUEUED     -> CONNECTING | WAITING | DONE
 *   CONNECTING -> WAITING | DONE
 *   WAITING    -> QUEUED (refused unprocessed: sent again) | HOLDING |
 *                 STREAMING | DONE
 *   HOLDING    -> STREAMING | DONE
 *   STREAMING  -> DONE
 */
#ifndef CITEGATE_IO_EXSTATE_H
#define CITEGATE_IO_EXSTATE_H

#include <stdbool.h>

typedef enum cg_ex_state {
    CG_EX_NEW,        /* parsed; nothing sent upstream yet */
    CG_EX_QUEUED,     /* waiting in the pool's queue for a connection or stream */
    CG_EX_CONNECTING, /* a connection is being made for it */
    CG_EX_WAITING,    /* request sent; waiting for the answer's head */
    CG_EX_HOLDING,    /* answer's head in; the client's head held back (a
                         body to transform, or a stream held to its end) */
    CG_EX_STREAMING,  /* the client's head sent; the body flows */
    CG_EX_DONE,       /* answered and accounted; freed once its timer closes */
    CG_EX_NSTATES
} cg_ex_state_t;

/* Is from -> to a legal transition? */
bool cg_ex_state_legal(cg_ex_state_t from, cg_ex_state_t to);
const char *cg_ex_state_name(cg_ex_state_t s);
/* Moves *s to `to`; an illegal transition aborts, in every build (CG_ASSERT). */
void cg_ex_state_set(cg_ex_state_t *s, cg_ex_state_t to);

#endif
