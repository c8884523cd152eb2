/* SPDX-License-Identifier: MIT */
/*
 * tool_common.h - helpers shared by the programs of the tree (cmsctl, cms-bench,
 * the IPC demo, the lab's experiments): sizes, byte formatting, option errors,
 * where the driver and the host simulation are, and JSON/Prometheus text. Built once, as the static
 * library cms_tool_common (tools/common/CMakeLists.txt); it calls the driver
 * loader (driver.h), which every program compiles in.
 */
#ifndef CMS_TOOL_COMMON_H
#define CMS_TOOL_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * tool_parse_size - parses "4096", "64K", "256M", "1G", "2GiB", "1T" (binary
 * multiples) into *out. Returns 0, or -1 for a malformed, zero or overflowing
 * size.
 */
int tool_parse_size(const char *s, uint64_t *out);

/* tool_format_bytes - "64.0 MiB", "1.00 GiB", "512 B" into buf; returns buf. */
char *tool_format_bytes(char *buf, size_t len, uint64_t bytes);

/*
 * tool_sim_path - path of the host simulation library, found relative to the
 * executable (/proc/self/exe): the installed layout first (bin/../lib/cumemsaver, near the
 * $ORIGIN rpath), then the build tree's (bin/../src/sim: every program is
 * built into <build>/bin). When neither file exists, the installed layout's
 * path (so a load error names it). NULL when this build has no simulation.
 * *where, if not NULL, says which it is.
 */
const char *tool_sim_path(const char **where);

/* tool_driver_path - the driver library a context would load by default. */
const char *tool_driver_path(int *from_env);

/*
 * tool_open_device_driver - opens the driver library at path into *drv and
 * checks that it has a device. Returns 0; a negative cms_status when the
 * library could not be opened (why: the loader's message); or 1 when it has no
 * device (why says so, drv closed).
 */
struct cms_driver;
int tool_open_device_driver(struct cms_driver *drv, const char *path, char *why, size_t len);

/*
 * tool_bad_option - after getopt_long (opterr = 0, optstring starting with
 * ':') returned '?' or ':' (c), prints "<cmd>: unknown option ..." or
 * "<cmd>: option ... needs an argument" on stderr.
 */
void tool_bad_option(const char *cmd, char *const *argv, int c);

/*
 * tool_json_str - str (NULL: "") as a JSON string literal on f: '"' and '\'
 * backslashed, control characters as \u00XX, valid UTF-8 as is, and each
 * maximal invalid UTF-8 subpart (Unicode's practice; a lone 0xff byte is one)
 * as \ufffd (tool_text.c). The one JSON string writer of cmsctl and cms-bench.
 */
void tool_json_str(FILE *f, const char *str);

/*
 * tool_prom_label - str as the inside of a Prometheus label value (text
 * exposition format 0.0.4): '\', '"' and line feed backslashed, each
 * maximal invalid UTF-8 subpart as U+FFFD (EF BF BD), as tool_json_str.
 */
void tool_prom_label(FILE *f, const char *str);

/* tool_print_double - v with the fewest digits that read back as v (0.303364125,
 * not 0.30336412499999998); NaN, +Inf, -Inf as Prometheus spells them. */
void tool_print_double(FILE *f, double v);

#endif /* CMS_TOOL_COMMON_H */
