/* Exchange states: see exstate.h. */
#include "exstate.h"

#include "citegate/common.h"


#define BIT(s) (1u << (s))

static const unsigned legal[CG_EX_NSTATES] = {
    [CG_EX_NEW] = BIT(CG_EX_QUEUED) | BIT(CG_EX_CONNECTING) | BIT(CG_EX_WAITING) | BIT(CG_EX_DONE),
    [CG_EX_QUEUED] = BIT(CG_EX_CONNECTING) | BIT(CG_EX_WAITING) | BIT(CG_EX_DONE),
    [CG_EX_CONNECTING] = BIT(CG_EX_WAITING) | BIT(CG_EX_DONE),
    /* WAITING -> QUEUED: a stream refused unprocessed, or a reused
     * connection that closed, is sent again. */
    [CG_EX_WAITING] =
        BIT(CG_EX_QUEUED) | BIT(CG_EX_HOLDING) | BIT(CG_EX_STREAMING) | BIT(CG_EX_DONE),
    [CG_EX_HOLDING] = BIT(CG_EX_STREAMING) | BIT(CG_EX_DONE),
    [CG_EX_STREAMING] = BIT(CG_EX_DONE),
    [CG_EX_DONE] = 0,
};

static const char *const names[CG_EX_NSTATES] = {"NEW",     "QUEUED",    "CONNECTING", "WAITING",
                                                 "HOLDING", "STREAMING", "DONE"};

bool cg_ex_state_legal(cg_ex_state_t from, cg_ex_state_t to)
{
    return from < CG_EX_NSTATES && to < CG_EX_NSTATES && (legal[from] & BIT(to)) != 0;
}

const char *cg_ex_state_name(cg_ex_state_t s)
{
    return s < CG_EX_NSTATES ? names[s] : "?";
}

void cg_ex_state_set(cg_ex_state_t *s, cg_ex_state_t to)
{
    CG_ASSERT(cg_ex_state_legal(*s, to));
    *s = to;
}
