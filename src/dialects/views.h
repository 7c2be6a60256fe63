/* The answer views of the upstream dialects, one file each in src/dialects/
 * (include/citegate/dialect.h), for the registry cg_dialect_view(). */
#ifndef CG_DIALECT_VIEWS_H
#define CG_DIALECT_VIEWS_H

#include "citegate/dialect.h"

extern const cg_dialect_view_t cg__dialect_anthropic;

#endif
