/* Names, labels and messages of the error enum: see err.h. */
#include "err.h"

#include <stddef.h>

static const struct {
    const char *name, *label, *message;
} table[CG_E_COUNT] = {[CG_OK] = {"OK", NULL, "no error"},
#define CG_ERR_ROW(code, lbl, msg) [CG_E_##code] = {#code, lbl, msg},
                       CG_ERRORS(CG_ERR_ROW)
#undef CG_ERR_ROW
};

const char *cg_err_name(cg_err_t e)
{
    return e < CG_E_COUNT ? table[e].name : "UNKNOWN";
}

const char *cg_err_label(cg_err_t e)
{
    return e < CG_E_COUNT ? table[e].label : NULL;
}

const char *cg_err_message(cg_err_t e)
{
    return e < CG_E_COUNT ? table[e].message : "unknown error";
}
