/* Entry points of the citegate executable's subcommands. */
#ifndef CITEGATE_CMD_H
#define CITEGATE_CMD_H

int cg_main_filter(int argc, char **argv);
int cg_main_daemon(int argc, char **argv);

#endif
