/* citegate: command line entry. */
#include "citegate/config.h"
#include "citegate/profile.h"
#include "citegate/version.h"
#include "cmd.h"

#include <stdio.h>
#include <string.h>

/* The flags that set no variable; those that do are in the settings table
 * (src/core/config.c), which prints itself. */
static const struct {
    const char *flag, *help;
} plain_flags[] = {
    {"--demo", "serve the embedded demo upstream, even when an upstream is set"},
    {"--check", "validate the configuration, print the problem, exit 0 (valid) or 2"},
    {"--version", "print the version and exit"},
    {"--help, -h", "print this text and exit"},
    {"filter --request FILE", "the client's request body (<source> tags, tool outputs)"},
    {"filter --created SECONDS", "`created` of the chunks a dialect view writes (default: now)"},
    {"filter --help, -h", "print the filter's usage and exit"},
};

static void usage(FILE *f)
{
    fputs("usage: citegate [--listen ADDR:PORT] [--admin-listen ADDR:PORT] [--upstream URL]\n"
          "                [--workers N] [--profile NAME] [--demo] [--check] [--version] [--help]\n"
          "       citegate filter [--profile NAME] [--ref-style STYLE] [--dialect NAME]\n"
          "                [--request FILE] [--created SECONDS] < upstream-body > client-body\n"
          "       citegate health [--admin-listen ADDR:PORT]\n",
          f);
    /* From the registries, so the lists cannot fall behind them. */
    fprintf(f, "profiles: %s\n", cg_profile_list());
    fprintf(f, "upstream dialects (CITEGATE_UPSTREAM_DIALECT): %s\n", cg_dialect_list());
    fputs("\nflags that set no variable:\n", f);
    for (size_t i = 0; i < sizeof(plain_flags) / sizeof(plain_flags[0]); i++)
        fprintf(f, "  %-26s%s\n", plain_flags[i].flag, plain_flags[i].help);
    cg_buf_t b = {0};
    cg_config_help(&b);
    fprintf(f, "\n%.*s", (int)b.len, b.p);
    cg_buf_free(&b);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "filter") == 0)
        return cg_main_filter(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "health") == 0)
        return cg_main_health(argc - 1, argv + 1);
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
