/* SPDX-License-Identifier: MIT */
/* cmsctl.h - the subcommands of the cmsctl command-line tool (helpers: tool_common.h). */
#ifndef CMSCTL_H
#define CMSCTL_H

#include <stdio.h>

#include "cumemsaver.h"
#include "tool_common.h"

/* Subcommands: argv[0] is the subcommand's name; return the exit status. */
int cmsctl_demo(int argc, char **argv);
/* Version of the JSON objects `cmsctl --json` prints ("schema_version"): raised when a
 * field changes meaning or goes away; new fields may appear without a change. */
#define CMSCTL_JSON_SCHEMA 1
/* Default and largest --timeout, in seconds. */
#define CMSCTL_TIMEOUT_DEFAULT_S 600u
#define CMSCTL_TIMEOUT_MAX_S 604800u
#define CMSCTL_REMOTE_USAGE \
	"usage: cmsctl --socket PATH [--json] [--timeout SECONDS] status | pause TAG | resume TAG"

struct cmsctl_remote_opts {
	const char *socket; /* the process's control socket */
	int json;	    /* one JSON object on stdout instead of text */
	unsigned timeout_s; /* how long to wait for the answer, progress included */
};

/* `cmsctl --socket PATH [--json] [--timeout SECONDS] status | pause TAG | resume TAG`
 * (cmsctl_remote.c): argv[0] is the operation. Returns the exit status. */
int cmsctl_remote(const struct cmsctl_remote_opts *o, int argc, char **argv);
/* Whether cmd is one of the commands sent to a process's control socket (status, pause,
 * resume, stats, metrics). */
int cmsctl_is_remote_command(const char *cmd);
/* cms_ipc_connect, and a path that exists but is no socket (a regular file, a directory)
 * said as such: CMS_ERR_INVALID_ARGUMENT instead of the driver-neutral NOT_FOUND. */
cms_status cmsctl_connect(const char *path, int *fd, char *why, size_t whylen);
/* Shared by the remote commands (cmsctl_remote.c): the names the table and the JSON give a
 * restore policy and a state (JSON strings: tool_json_str). */
const char *cmsctl_policy_name(uint32_t policy);
const char *cmsctl_state_name(uint32_t state);
/* `cmsctl --socket PATH [--json] [--timeout SECONDS] stats [--prometheus] | metrics`
 * (cmsctl_stats.c): argv[0] is "stats" or "metrics". Returns the exit status. */
int cmsctl_stats(const struct cmsctl_remote_opts *o, int argc, char **argv);

#endif /* CMSCTL_H */
