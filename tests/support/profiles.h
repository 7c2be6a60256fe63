/* Test support: a registered profile, by the name a client would send. */
#ifndef CG_TEST_PROFILES_H
#define CG_TEST_PROFILES_H

#include "citegate/profile.h"

#include <stdio.h>
#include <stdlib.h>

static inline const cg_profile_t *profile_named(const char *name)
{
    const cg_profile_t *p;
    if (!cg_profile_parse(name, &p)) {
        fprintf(stderr, "no profile named '%s'\n", name);
        abort();
    }
    return p;
}

#endif
