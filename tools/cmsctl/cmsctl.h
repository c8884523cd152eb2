/* SPDX-License-Identifier: MIT */
/* cmsctl.h - the subcommands of the cmsctl command-line tool (helpers: tool_common.h). */
#ifndef CMSCTL_H
#define CMSCTL_H

#include "tool_common.h"

/* Subcommands: argv[0] is the subcommand's name; return the exit status. */
int cmsctl_demo(int argc, char **argv);
/* `cmsctl --socket PATH [--json] status | pause TAG | resume TAG` (cmsctl_remote.c):
 * argv[0] is the operation. Returns the exit status. */
int cmsctl_remote(const char *path, int json, int argc, char **argv);
/* `cmsctl --socket PATH [--json] stats [--prometheus] | metrics` (cmsctl_stats.c): argv[0] is
 * "stats" or "metrics". Returns the exit status. */
int cmsctl_stats(const char *path, int json, int argc, char **argv);

#endif /* CMSCTL_H */
