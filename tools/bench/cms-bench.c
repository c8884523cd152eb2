/* SPDX-License-Identifier: MIT */
/*
 * cms-bench.c - benchmark of cumemsaver: fixed workloads through the library,
 * each figure next to the driver floor measured in the same run on the same
 * device (raw VMM calls for the same bytes, pinned copy bandwidth), with
 * content and address checks after every cycle. See docs/bench.md.
 *
 * Like `cmsctl demo`, the tool loads the driver itself (driver.c, compiled
 * in again) with the same path as the library's context, so both use one
 * dlopen'ed library and share the device's primary context, which the tool
 * keeps current on its thread for its own calls.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cumemsaver_sim.h"
#include "tool_common.h"

static void bench_free(struct bench *b)
{
	for (int i = 0; i < BENCH_NWORK; i++) {
		free(b->work[i].pause_ns);
		free(b->work[i].resume_ns);
		free(b->work[i].ready_ns);
		for (int k = 0; k < 3; k++)
			free(b->work[i].rss_ns[k]);
	}
	bench_multi_free(b);
	free(b->stage);
	free(b->cmdline);
	free(b);
}

/* ---- options -------------------------------------------------------------------- */

#define BENCH_SHORT_USAGE                                                             \
	"usage: cms-bench [--scale N] [--cycles N] [--only LIST] [--json FILE]\n"     \
	"                 [--verify-full] [--coalesce] [--gap MS] [--disk-dir DIR]\n" \
	"                 [--devices LIST] [--sim|--gpu]\n"

/* After bad usage: what was wrong was said in one line; then the synopsis and where the rest is. */
static int bench_short_usage(void)
{
	fprintf(stderr, BENCH_SHORT_USAGE "Try 'cms-bench --help' for more.\n");
	return 2;
}

static void bench_usage(FILE *f, const struct bench *b)
{
	int i;

	fprintf(f,
		BENCH_SHORT_USAGE
		"  -s, --scale N      divide every workload's and floor's bytes by N (1..%u;\n"
		"                     default 1 on a GPU, %u on the host simulation); an\n"
		"                     allocation never goes below one granularity\n"
		"  -n, --cycles N     pause/resume cycles per workload (1..%u, default %u); the\n"
		"                     first is reported apart from the median of the others.\n"
		"                     A workload whose cycle takes more than 10 s stops after 2\n"
		"  -o, --only LIST    comma-separated workloads to run (default: all), or\n"
		"                     'floor' for the floors alone; the floors the chosen\n"
		"                     workloads need are always measured. The workloads, at\n"
		"                     --scale 1:\n",
		BENCH_MAX_SCALE, BENCH_DEFAULT_SIM_SCALE, BENCH_MAX_CYCLES, BENCH_DEFAULT_CYCLES);
	for (i = 0; i < BENCH_NWORK; i++)
		fprintf(f, "                       %c  %s\n", b->work[i].id, b->work[i].what);
	fprintf(f,
		"  -j, --json FILE    also write the results as JSON to FILE (created before\n"
		"                     the run: an unwritable FILE is a usage error)\n"
		"      --verify-full  check the whole content of HOST allocations after every\n"
		"                     cycle (default: a sample at the start, middle and end)\n"
		"      --coalesce     HOST and DISK workloads in regions with\n"
		"                     CMS_REGION_COALESCE (default: without; (a), (b), (h)\n"
		"                     have it always): one handle per run after a resume;\n"
		"                     not with --devices\n"
		"      --gap MS       idle MS milliseconds (0..10000, default 0) before every\n"
		"                     resume of (a)-(d),(f) and before every back of the VMM\n"
		"                     floors, outside the timings: the driver scrubs released\n"
		"                     memory in the background, and a back right after a\n"
		"                     large release waits for it (see docs/bench.md)\n"
		"      --devices LIST multi-device mode: (a) and (c) with the same bytes per\n"
		"                     device in one tag on every listed device (e.g. 0,1),\n"
		"                     next to the same on the first device alone, and the\n"
		"                     driver's own multi-device floor of (a) (raw VMM calls\n"
		"                     on 1 and on every device); --only floor: that floor alone\n"
		"      --disk-dir DIR (g): the DISK region's directory (default $TMPDIR, else\n"
		"                     /tmp); it must be a writable directory (checked before\n"
		"                     the run); (g) is skipped when it lacks room (statvfs),\n"
		"                     a failure when --only names (g)\n"
		"      --sim          run on the host simulation\n"
		"      --gpu          run on the real driver (fail if there is no GPU)\n"
		"exit status: 0 when every correctness check passed, 1 otherwise, 2 on bad "
		"usage\n");
}

static int bench_parse_only(struct bench *b, const char *arg)
{
	char buf[256], *tok, *save = NULL;
	int i;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", arg);
	for (i = 0; i < BENCH_NWORK; i++)
		b->work[i].selected = false;
	b->only_floor = false;
	b->only_given = true;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "floor")) {
			b->only_floor = true;
			continue;
		}
		if (strlen(tok) != 1 || tok[0] < 'a' || tok[0] >= 'a' + BENCH_NWORK)
			return -1;
		b->work[tok[0] - 'a'].selected = true;
	}
	return 0;
}

static void bench_bad_option(char *const *argv, int c)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";

	if (c == ':')
		fprintf(stderr, "cms-bench: option '%s' needs an argument\n", arg);
	else if (optopt && strncmp(arg, "--", 2))
		fprintf(stderr, "cms-bench: unknown option '-%c'\n", optopt);
	else
		fprintf(stderr, "cms-bench: unknown option '%s'\n", arg);
}

/* Before the run, not after it: --disk-dir names a writable directory, and --json's file
 * can be created (it is, and kept open for the report). Returns -1 to go on, else 2. */
static int bench_check_paths(struct bench *b)
{
	const char *dir = bench_disk_dir();
	struct stat sb;

	errno = 0;
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode) || access(dir, W_OK | X_OK)) {
		fprintf(stderr, "cms-bench: disk directory '%s': %s\n", dir,
			errno ? strerror(errno) : "not a directory");
		return 2;
	}
	if (b->json_path) {
		b->json = fopen(b->json_path, "w");
		if (!b->json) {
			fprintf(stderr, "cms-bench: --json '%s': %s\n", b->json_path,
				strerror(errno));
			return 2;
		}
	}
	return -1;
}

/* Returns -1 to go on, else the exit status. */
static int bench_parse(struct bench *b, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "scale", required_argument, NULL, 's' },
		{ "cycles", required_argument, NULL, 'n' },
		{ "only", required_argument, NULL, 'o' },
		{ "json", required_argument, NULL, 'j' },
		{ "verify-full", no_argument, NULL, 'F' },
		{ "coalesce", no_argument, NULL, 'C' },
		{ "gap", required_argument, NULL, 'g' },
		{ "disk-dir", required_argument, NULL, 'K' },
		{ "devices", required_argument, NULL, 'D' },
		{ "sim", no_argument, NULL, 'S' },
		{ "gpu", no_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:n:o:j:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
		case 'S':
		case 'G':
			if (bench_parse_option(b, c, optarg))
				return 2;
			break;
		case 'n':
			if (bench_parse_uint(optarg, 1, BENCH_MAX_CYCLES, &b->cycles)) {
				fprintf(stderr, "cms-bench: bad --cycles '%s' (1..%u)\n", optarg,
					BENCH_MAX_CYCLES);
				return 2;
			}
			break;
		case 'o':
			if (bench_parse_only(b, optarg)) {
				fprintf(stderr,
					"cms-bench: bad --only '%s' (comma-separated a..o or "
					"floor)\n",
					optarg);
				return 2;
			}
			break;
		case 'j':
			b->json_path = optarg;
			break;
		case 'F':
			b->verify_full = true;
			break;
		case 'C':
			b->coalesce = true;
			break;
		case 'g':
			if (bench_parse_uint(optarg, 0, 10000, &b->gap_ms)) {
				fprintf(stderr, "cms-bench: bad --gap '%s' (0..10000)\n", optarg);
				return 2;
			}
			break;
		case 'K':
			bench_disk_dir_set(optarg);
			break;
		case 'D':
			if (bench_multi_parse(b, optarg)) {
				fprintf(stderr,
					"cms-bench: bad --devices '%s' (2..%d distinct device "
					"ordinals, comma-separated)\n",
					optarg, BENCH_MAX_MDEV);
				return 2;
			}
			break;
		case 'h':
			bench_usage(stdout, b);
			return 0;
		default:
			bench_bad_option(argv, c);
			return bench_short_usage();
		}
	}
	if (b->coalesce && b->nmdev) { /* bench_multi.c's regions have fixed flags */
		fprintf(stderr, "cms-bench: --coalesce is for the single-device workloads, not "
				"--devices\n");
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "cms-bench: unexpected argument '%s'\n", argv[optind]);
		return bench_short_usage();
	}
	return bench_check_paths(b);
}

/* ---- the run ---------------------------------------------------------------------- */

/* Marks the floors the selected workloads need. */
static void bench_want_floors(struct bench *b)
{
	int i;

	for (i = 0; i < BENCH_NWORK; i++) {
		const struct bench_work *w = &b->work[i];

		if (!w->selected || !w->implemented)
			continue;
		if (w->vmm_floor >= 0)
			b->vmm[w->vmm_floor].wanted = true;
		if (i == BENCH_WB)
			b->vmm[BENCH_VB_ALLOC].wanted = true;
		if (w->policy == CMS_POLICY_HOST)
			b->copy.wanted = true;
	}
	if (b->only_floor) {
		for (i = 0; i < BENCH_NVMM; i++)
			b->vmm[i].wanted = true;
		b->copy.wanted = true;
	}
}

static void bench_run(struct bench *b)
{
	struct tm tm;
	time_t now = time(NULL);
	int i;

	gmtime_r(&now, &tm);
	strftime(b->date, sizeof(b->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (bench_choose_driver(b))
		return;
	if (!b->scale_given)
		b->scale = b->sim ? BENCH_DEFAULT_SIM_SCALE : 1;
	printf("date %s, scale 1/%u, %u cycles per workload, gap %u ms, command: %s\n", b->date,
	       b->scale, b->cycles, b->gap_ms, b->cmdline);
	if (bench_setup_device(b))
		return;
	b->stage = malloc(BENCH_STAGE_BYTES);
	if (!b->stage) {
		bench_fail(b, "cannot allocate a staging buffer of %llu bytes",
			   (unsigned long long)BENCH_STAGE_BYTES);
		return;
	}
	if (b->nmdev) { /* multi-device mode: its own workloads and report, no floors */
		bench_multi_run(b);
		for (i = 0; i < BENCH_NWORK; i++)
			b->work[i].selected = false;
		return;
	}
	bench_want_floors(b);
	for (i = 0; i < BENCH_NVMM; i++)
		bench_scale(b, b->vmm[i].count, b->vmm[i].size, &b->vmm[i].count, &b->vmm[i].size);

	printf("\nfloor: raw driver calls on device %d in this run\n", BENCH_DEVICE);
	for (i = 0; i < BENCH_NVMM; i++)
		if (b->vmm[i].wanted)
			bench_vmm_floor(b, &b->vmm[i]);
	if (b->copy.wanted)
		bench_copy_floor(b);

	for (i = 0; i < BENCH_NWORK; i++) {
		struct bench_work *w = &b->work[i];

		if (!w->selected || !w->implemented)
			continue;
		if (i == BENCH_WG)
			bench_disk_run(b, w);
		else if (i == BENCH_WE)
			bench_swap_run(b, w);
		else if (i == BENCH_WK)
			bench_nonret_run(b, w);
		else if (i == BENCH_WO)
			bench_frozen_run(b, w);
		else
			bench_work_run(b, w);
	}
}

int main(int argc, char **argv)
{
	struct bench *b;
	bool ran;
	int rc;

	b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "cms-bench: out of memory\n");
		return 1;
	}
	b->cycles = BENCH_DEFAULT_CYCLES;
	snprintf(b->step, sizeof(b->step), "setup");
	bench_works_init(b);
	rc = bench_parse(b, argc, argv);
	if (rc >= 0)
		goto out_free;
	for (int i = 0; i < BENCH_NWORK && b->coalesce; i++)
		if (b->work[i].policy != CMS_POLICY_DISCARD)
			b->work[i].flags |= CMS_REGION_COALESCE;
	b->cmdline = bench_join_args(argc, argv);
	if (!b->cmdline) {
		fprintf(stderr, "cms-bench: out of memory\n");
		rc = 1;
		goto out_free;
	}
	/* stdout may be a pipe: keep the lines in order with stderr */
	setvbuf(stdout, NULL, _IOLBF, 0);

	bench_run(b);
	ran = b->drv_open;
	bench_close_driver(b);
	if (ran) {
		bench_report_table(b);
		bench_multi_report(b);
	}
	if (b->json && bench_report_json(b))
		bench_fail(b, "cannot write %s: %s", b->json_path, strerror(errno));
	b->json = NULL; /* closed by bench_report_json */
	if (b->failed) {
		/* each failure was printed when it happened (bench_fail) */
		printf("bench: FAIL (%u failure%s, above; %u checks passed)\n", b->failures,
		       b->failures == 1 ? "" : "s", b->checks);
		rc = 1;
	} else {
		printf("bench: PASS (%u checks)\n", b->checks);
		rc = 0;
	}
out_free:
	if (b->json)
		fclose(b->json);
	bench_free(b);
	return rc;
}
