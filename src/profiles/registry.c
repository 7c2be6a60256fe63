/*
 * The registry of profiles: name -> profile, the list of names for error
 * messages, a stable index per profile (metrics). A profile is one file in
 * src/profiles/ that defines cg__profile_NAME, and one entry in PROFILES.
 */
#include "citegate/profile.h"

#include <string.h>

/* Every profile, in the order of cg_profile_list() and of the indexes. */
#define PROFILES(X) X(off) X(openwebui) X(openai) X(webchat) X(structured) X(markdown)

#define DECLARE(name) extern const cg_profile_t cg__profile_##name;
PROFILES(DECLARE)

#define ENTRY(name) &cg__profile_##name,
static const cg_profile_t *const profiles[] = {PROFILES(ENTRY)};
#define NPROFILES (sizeof(profiles) / sizeof(profiles[0]))
_Static_assert(NPROFILES <= CG_PROFILE_MAX, "raise CG_PROFILE_MAX");

/* ", off, openwebui, …": each profile's name is also its entry's. */
#define LISTED(name) ", " #name
static const char names[] = PROFILES(LISTED);

bool cg_profile_parse(const char *name, const cg_profile_t **out)
{
    for (size_t i = 0; i < NPROFILES; i++) {
        if (strcmp(profiles[i]->name, name) == 0) {
            *out = profiles[i];
            return true;
        }
    }
    return false;
}

const char *cg_profile_list(void)
{
    return names + 2;
}

size_t cg_profile_count(void)
{
    return NPROFILES;
}

const cg_profile_t *cg_profile_at(size_t i)
{
    return profiles[i];
}

size_t cg_profile_index(const cg_profile_t *p)
{
    size_t i = 0;
    while (i < NPROFILES && profiles[i] != p)
        i++;
    return i;
}
