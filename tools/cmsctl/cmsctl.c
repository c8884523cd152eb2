/* SPDX-License-Identifier: MIT */
/*
 * cmsctl.c - command-line tool of cumemsaver: entry point, subcommand
 * dispatch, `version` and `help` (shared helpers: tools/common/tool_common.c).
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

#define SHORT_USAGE                                                                        \
	"usage: cmsctl [--help] [--version] [--socket PATH [--json] [--timeout SECONDS]] " \
	"<command> [options]\n"

/* After a bad option or command: one line and where the rest is. */
static int short_usage(void)
{
	fprintf(stderr, SHORT_USAGE "Try 'cmsctl --help' for the commands.\n");
	return 2;
}

static void usage(FILE *f)
{
	fprintf(f, SHORT_USAGE
		"\n"
		"commands:\n"
		"  demo [--size BYTES] [--sim|--gpu] [--cycles N] [--progress]\n"
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
		"  --socket PATH [--json] [--timeout SECONDS] status | pause TAG | resume TAG\n"
		"  --socket PATH [--json] [--timeout SECONDS] stats [--prometheus] | metrics\n"
		"           ask a running process through its control socket\n"
		"           (cms_control_create, docs/ipc.md): a table of its regions, or\n"
		"           pause / resume a tag when the application consents. Progress\n"
		"           on stderr; exit status 1 with the library's message on failure.\n"
		"           --json: one JSON object on stdout, errors included, with a\n"
		"           \"schema_version\" field; --timeout: how long to wait for the\n"
		"           answer (default 600 s).\n"
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
			tool_bad_option("cmsctl version", argv, c);
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
	path = tool_driver_path(&from_env);
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
	sim = tool_sim_path(&where);
	if (sim)
		printf("host simulation: %s (%s)\n", sim, where);
	else
		printf("host simulation: not built\n");
	return 0;
}

/* "30" -> 30: a whole number of seconds, 1 to CMSCTL_TIMEOUT_MAX_S. Returns 0 or -1. */
static int parse_seconds(const char *s, unsigned *out)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < 1 || v > CMSCTL_TIMEOUT_MAX_S)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },	     { "version", no_argument, NULL, 'V' },
		{ "socket", required_argument, NULL, 's' },  { "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' }, { NULL, 0, NULL, 0 },
	};
	struct cmsctl_remote_opts ro = { .timeout_s = CMSCTL_TIMEOUT_DEFAULT_S };
	const char *cmd;
	int c;

	/* "+": stop at the subcommand; its options are its own. ":": we report errors. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			return cmd_version(1, argv);
		case 's':
			ro.socket = optarg;
			break;
		case 'j':
			ro.json = 1;
			break;
		case 't':
			if (parse_seconds(optarg, &ro.timeout_s)) {
				fprintf(stderr,
					"cmsctl: --timeout '%s': a whole number of seconds from 1 "
					"to "
					"%u\n",
					optarg, CMSCTL_TIMEOUT_MAX_S);
				return short_usage();
			}
			break;
		default:
			tool_bad_option("cmsctl", argv, c);
			return short_usage();
		}
	}
	if (ro.socket)
		return cmsctl_remote(&ro, argc - optind, argv + optind);
	if (optind >= argc)
		return short_usage();
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
	if (cmsctl_is_remote_command(cmd)) {
		fprintf(stderr,
			"cmsctl: '%s' asks a running process: give its control socket, "
			"cmsctl --socket PATH %s\n",
			cmd, cmd);
		return short_usage();
	}
	fprintf(stderr, "cmsctl: unknown command '%s'\n", cmd);
	return short_usage();
}
