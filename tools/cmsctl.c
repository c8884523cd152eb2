/* SPDX-License-Identifier: MIT */
/*
 * cmsctl.c - command-line tool of cumemsaver: entry point, subcommand
 * dispatch, `version`, `help` and the helpers the subcommands share.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmsctl.h"
#include "cumemsaver.h"
#include "driver.h"

int cmsctl_parse_size(const char *s, uint64_t *out)
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

char *cmsctl_format_bytes(char *buf, size_t len, uint64_t bytes)
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

const char *cmsctl_sim_path(const char **where)
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

void cmsctl_bad_option(const char *cmd, char *const *argv, int c)
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

const char *cmsctl_driver_path(int *from_env)
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

static void usage(FILE *f)
{
	fprintf(f, "usage: cmsctl [--help] [--version] <command> [options]\n"
		   "\n"
		   "commands:\n"
		   "  demo [--size BYTES] [--sim|--gpu] [--cycles N]\n"
		   "           pause and resume a weights region (HOST policy) and a kv_cache\n"
		   "           region (DISCARD policy) N times, replaying a CUDA graph captured\n"
		   "           before the first pause after every resume, and verify that the\n"
		   "           memory really goes back to the driver and that every address\n"
		   "           and the weights' content survive. BYTES (16 to 1024T) takes\n"
		   "           K/M/G/T suffixes, binary (KiB, MB spellings accepted; default 1G\n"
		   "           on a GPU, 64M on the host simulation); N defaults to 3. Without\n"
		   "           --sim/--gpu the real driver is tried first and the host\n"
		   "           simulation used when there is no GPU.\n"
		   "  version  print the library version and the driver library it would load\n"
		   "  help     print this text\n"
		   "\n"
		   "environment:\n"
		   "  CMS_DRIVER_LIBRARY  driver library to load instead of libcuda.so.1\n"
		   "  CMS_LOG             library log level on stderr (0-3)\n"
		   "  CMS_SIM_*           settings of the host simulation (docs/simulation.md)\n");
}

static int cmd_version(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cms_driver drv;
	const char *path, *sim, *where;
	char err[512];
	int c, from_env, count = 0, st;
	uint32_t v = cms_version();

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			printf("usage: cmsctl version\n");
			return 0;
		default:
			cmsctl_bad_option("cmsctl version", argv, c);
			fprintf(stderr, "usage: cmsctl version\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cmsctl version: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	printf("cmsctl %d.%d.%d\n", CMS_VERSION_MAJOR, CMS_VERSION_MINOR, CMS_VERSION_PATCH);
	printf("library:         libcumemsaver %s (0x%06x; built against header %d.%d.%d)\n",
	       cms_version_string(), v, CMS_VERSION_MAJOR, CMS_VERSION_MINOR, CMS_VERSION_PATCH);
	path = cmsctl_driver_path(&from_env);
	printf("driver library:  %s (%s)\n", path,
	       from_env ? "from CMS_DRIVER_LIBRARY" : "default; CMS_DRIVER_LIBRARY overrides it");
	st = cms_driver_open(&drv, path, err, sizeof(err));
	if (st) {
		printf("                 not usable: %s\n", err);
	} else {
		if (drv.cuDeviceGetCount(&count) != CUDA_SUCCESS)
			count = 0;
		printf("                 loaded: driver version %d, %d device%s%s\n", drv.version,
		       count, count == 1 ? "" : "s", drv.is_sim ? " (host simulation)" : "");
		cms_driver_close(&drv);
	}
	sim = cmsctl_sim_path(&where);
	if (sim)
		printf("host simulation: %s (%s)\n", sim, where);
	else
		printf("host simulation: not built\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	int c;

	/* "+": stop at the subcommand; its options are its own. */
	while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			return cmd_version(1, argv);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (!strcmp(cmd, "demo"))
		return cmsctl_demo(argc, argv);
	if (!strcmp(cmd, "version"))
		return cmd_version(argc, argv);
	if (!strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "cmsctl: unknown command '%s'\n\n", cmd);
	usage(stderr);
	return 2;
}
