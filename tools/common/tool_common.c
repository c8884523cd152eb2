/* SPDX-License-Identifier: MIT */
/*
 * tool_common.c - helpers shared by the programs (tool_common.h): sizes, byte
 * formatting, option errors, and where the driver and the host simulation are.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cumemsaver.h"
#include "driver.h"
#include "tool_common.h"

int tool_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		break;
	}
	if (shift) {
		end++;
		if (end[0] == 'i' && (end[1] == 'B' || end[1] == 'b'))
			end += 2;
		else if (end[0] == 'B' || end[0] == 'b')
			end++;
	} else if (end[0] == 'B' || end[0] == 'b') {
		end++;
	}
	if (*end || !v || v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

char *tool_format_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024.0 && u < 3) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, v < 10.0 ? "%.2f %s" : "%.1f %s", v, units[u]);
	return buf;
}

#if defined(CMS_SIM_INSTALL_REL) && defined(CMS_SIM_BUILD_REL)
/* dir/rel into buf, resolved when the file exists; returns whether it does. */
static int sim_candidate(char *buf, size_t len, const char *dir, const char *rel)
{
	char resolved[PATH_MAX];
	int n = snprintf(buf, len, "%s/%s", dir, rel);

	if (n < 0 || (size_t)n >= len || access(buf, F_OK) || !realpath(buf, resolved))
		return 0;
	snprintf(buf, len, "%s", resolved);
	return 1;
}
#endif

const char *tool_sim_path(const char **where)
{
	const char *w = NULL, *p = NULL;
#if defined(CMS_SIM_INSTALL_REL) && defined(CMS_SIM_BUILD_REL)
	static char path[PATH_MAX];
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0 && (exe[n] = '\0', (slash = strrchr(exe, '/')) != NULL)) {
		*slash = '\0';
		if (sim_candidate(path, sizeof(path), exe, CMS_SIM_INSTALL_REL)) {
			w = "installed, next to the executable";
		} else if (sim_candidate(path, sizeof(path), exe, CMS_SIM_BUILD_REL)) {
			w = "build tree";
		} else {
			/* name the expected installed path in the load error */
			sim_candidate(path, sizeof(path), exe, CMS_SIM_INSTALL_REL);
			w = "not found next to the executable";
		}
		p = path;
	} else {
		/* no /proc: let dlopen search (the executable's $ORIGIN rpath included) */
		p = "libcumemsaver-sim.so";
		w = "library search path";
	}
#endif
	if (where)
		*where = w;
	return p;
}

void tool_bad_option(const char *cmd, char *const *argv, int c)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";

	if (c == ':')
		fprintf(stderr, "%s: option '%s' needs an argument\n", cmd, arg);
	else if (optopt && strncmp(arg, "--", 2))
		fprintf(stderr, "%s: unknown option '-%c'\n", cmd, optopt);
	else if (optopt && strchr(arg, '='))
		fprintf(stderr, "%s: option '%.*s' takes no argument\n", cmd,
			(int)(strchr(arg, '=') - arg), arg);
	else
		fprintf(stderr, "%s: unknown option '%s'\n", cmd, arg);
}

const char *tool_driver_path(int *from_env)
{
	const char *env = secure_getenv(CMS_DRIVER_ENV);

	if (env && env[0]) {
		if (from_env)
			*from_env = 1;
		return env;
	}
	if (from_env)
		*from_env = 0;
	return CMS_DRIVER_DEFAULT;
}

int tool_open_device_driver(struct cms_driver *drv, const char *path, char *why, size_t len)
{
	int st, count = 0;
	CUresult res;

	st = cms_driver_open(drv, path, why, len);
	if (st)
		return st;
	res = drv->cuDeviceGetCount(&count);
	if (res != CUDA_SUCCESS || count < 1) {
		snprintf(why, len, "%s reports %s", path,
			 res != CUDA_SUCCESS ? cms_driver_error_name(drv, res) : "no device");
		cms_driver_close(drv);
		return 1;
	}
	return 0;
}
