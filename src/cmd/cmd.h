/* Entry points of the citegate executable's subcommands. */
#ifndef CITEGATE_CMD_H
#define CITEGATE_CMD_H

int cg_main_filter(int argc, char **argv);
int cg_main_daemon(int argc, char **argv);
/* `citegate health [--admin-listen ADDR:PORT]`: 0 when /readyz answers 200 within 1 s. */
int cg_main_health(int argc, char **argv);

#endif
