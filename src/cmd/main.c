/* citegate: command line entry. */
#include "citegate/config.h"
#include "citegate/profile.h"
#include "citegate/version.h"
#include "cmd.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: citegate [--listen ADDR:PORT] [--admin-listen ADDR:PORT] [--upstream URL]\n"
          "                [--workers N] [--profile NAME] [--demo] [--check] [--version] [--help]\n"
          "       citegate filter [--profile NAME] [--ref-style STYLE] [--request FILE]\n"
          "                < upstream-body > client-body\n",
          f);
    /* From the registries, so the lists cannot fall behind them. */
    fprintf(f, "profiles: %s\n", cg_profile_list());
    fprintf(f, "upstream dialects (CITEGATE_UPSTREAM_DIALECT): %s\n", cg_dialect_list());
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "filter") == 0)
        return cg_main_filter(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("citegate %s\n", CITEGATE_VERSION);
            return 0;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    }
    return cg_main_daemon(argc, argv);
}
