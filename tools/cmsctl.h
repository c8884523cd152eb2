/* SPDX-License-Identifier: MIT */
/* cmsctl.h - shared declarations of the cmsctl command-line tool. */
#ifndef CMSCTL_H
#define CMSCTL_H

#include <stddef.h>
#include <stdint.h>

/*
 * cmsctl_parse_size - parses "4096", "64K", "256M", "1G", "2GiB", "1T" (binary
 * multiples) into *out. Returns 0, or -1 for a malformed, zero or overflowing
 * size.
 */
int cmsctl_parse_size(const char *s, uint64_t *out);

/* cmsctl_format_bytes - "64.0 MiB", "1.00 GiB", "512 B" into buf; returns buf. */
char *cmsctl_format_bytes(char *buf, size_t len, uint64_t bytes);

/*
 * cmsctl_sim_path - path of the host simulation library, found relative to the
 * executable (/proc/self/exe): the installed layout first (bin/../lib, as the
 * $ORIGIN rpath), then the build tree's (tools/../src/sim). When neither file
 * exists, the installed layout's path (so a load error names it). NULL when
 * this build has no simulation. *where, if not NULL, says which it is.
 */
const char *cmsctl_sim_path(const char **where);

/* cmsctl_driver_path - the driver library a context would load by default. */
const char *cmsctl_driver_path(int *from_env);

/*
 * cmsctl_open_device_driver - opens the driver library at path into *drv and
 * checks that it has a device. Returns 0; a negative cms_status when the
 * library could not be opened (why: the loader's message); or 1 when it has no
 * device (why says so, drv closed).
 */
struct cms_driver;
int cmsctl_open_device_driver(struct cms_driver *drv, const char *path, char *why, size_t len);

/*
 * cmsctl_bad_option - after getopt_long (opterr = 0, optstring starting with
 * ':') returned '?' or ':' (c), prints "<cmd>: unknown option ..." or
 * "<cmd>: option ... needs an argument" on stderr.
 */
void cmsctl_bad_option(const char *cmd, char *const *argv, int c);

/* Subcommands: argv[0] is the subcommand's name; return the exit status. */
int cmsctl_demo(int argc, char **argv);
/* `cmsctl --socket PATH [--json] status | pause TAG | resume TAG` (cmsctl_remote.c):
 * argv[0] is the operation. Returns the exit status. */
int cmsctl_remote(const char *path, int json, int argc, char **argv);

#endif /* CMSCTL_H */
