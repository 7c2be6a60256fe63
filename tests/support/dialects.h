/* Test support: a registered upstream dialect, by the name
 * CITEGATE_UPSTREAM_DIALECT gives it. */
#ifndef CG_TEST_DIALECTS_H
#define CG_TEST_DIALECTS_H

#include "citegate/dialect.h"

#include <stdio.h>
#include <stdlib.h>

static inline const cg_dialect_t *dialect_named(const char *name)
{
    const cg_dialect_t *d;
    if (!cg_dialect_parse(name, &d)) {
        fprintf(stderr, "no dialect named '%s'\n", name);
        abort();
    }
    return d;
}

#endif
