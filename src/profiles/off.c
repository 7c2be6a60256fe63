/* Profile "off": the upstream's bytes go to the client unchanged. */
#include "citegate/profile.h"

const cg_profile_t cg__profile_off = {
    .name = "off",
};
