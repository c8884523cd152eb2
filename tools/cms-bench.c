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
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cmsctl.h"
#include "cumemsaver_sim.h"

/* ---- helpers ---------------------------------------------------------------- */

void bench_fail(struct bench *b, const char *fmt, ...)
{
	char msg[sizeof(b->failure)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cms-bench: %s\n", msg);
	memcpy(b->last_failure, msg, sizeof(msg));
	if (!b->failed) {
		b->failed = true;
		memcpy(b->failure, msg, sizeof(msg));
	}
}

bool bench_check(struct bench *b, bool ok, const char *fmt, ...)
{
	char msg[sizeof(b->failure)];
	va_list ap;

	if (ok) {
		b->checks++;
		return true;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bench_fail(b, "%s", msg);
	return false;
}

int bench_cu_fail(struct bench *b, CUresult res, const char *what)
{
	bench_fail(b, "%s: %s: %s (%d)", b->step, what, cms_driver_error_name(&b->drv, res), res);
	return -1;
}

int bench_cms_fail(struct bench *b, cms_status st, const char *what)
{
	bench_fail(b, "%s: %s: %s: %s", b->step, what, cms_status_name(st), cms_last_error());
	return -1;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bench_proc_status(const char *field)
{
	unsigned long long kib = 0;
	size_t n = strlen(field);
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, field, n) && line[n] == ':') {
			if (sscanf(line + n + 1, " %llu", &kib) != 1)
				kib = 0;
			break;
		}
	}
	fclose(f);
	return (uint64_t)kib * 1024;
}

uint64_t bench_mem_available(void)
{
	unsigned long long kib = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib * 1024;
}

bool bench_reset_hwm(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok;
}

const char *bench_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	return cmsctl_format_bytes(buf, len, bytes);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double bench_median_ns(const uint64_t *v, unsigned int n)
{
	uint64_t tmp[BENCH_MAX_CYCLES];

	if (!n)
		return 0;
	if (n > BENCH_MAX_CYCLES)
		n = BENCH_MAX_CYCLES;
	memcpy(tmp, v, n * sizeof(*v));
	qsort(tmp, n, sizeof(*tmp), cmp_u64);
	if (n % 2)
		return (double)tmp[n / 2];
	return ((double)tmp[n / 2 - 1] + (double)tmp[n / 2]) / 2.0;
}

struct touch_job {
	pthread_t tid;
	bool started;
	volatile char *p;
	uint64_t bytes;
};

static void *touch_thread(void *arg)
{
	struct touch_job *j = arg;
	uint64_t off;

	for (off = 0; off < j->bytes; off += 4096)
		j->p[off] = 0;
	return NULL;
}

unsigned int bench_touch(void *p, uint64_t bytes, unsigned int max_threads)
{
	struct touch_job jobs[64];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t per, off = 0;
	unsigned int n, i;

	n = cpus > 0 ? (unsigned int)cpus : 1;
	if (n > max_threads)
		n = max_threads;
	if (n > 64)
		n = 64;
	if (n < 1)
		n = 1;
	per = (bytes / n + 4095) & ~4095ull;
	for (i = 0; i < n && off < bytes; i++) {
		jobs[i].p = (char *)p + off;
		jobs[i].bytes = bytes - off < per ? bytes - off : per;
		off += jobs[i].bytes;
		jobs[i].started = i && !pthread_create(&jobs[i].tid, NULL, touch_thread, &jobs[i]);
		if (i && !jobs[i].started)
			touch_thread(&jobs[i]); /* no thread: do it here */
	}
	n = i;
	if (n)
		touch_thread(&jobs[0]);
	for (i = 1; i < n; i++)
		if (jobs[i].started)
			pthread_join(jobs[i].tid, NULL);
	return n;
}

/* ---- driver choice (as cmsctl demo) ------------------------------------------- */

/* 0: a driver with a device is open; -1: none (reason in why). */
static int bench_try_gpu(struct bench *b, char *why, size_t len)
{
	const char *path = cmsctl_driver_path(NULL);
	char err[512];
	int st;

	st = cmsctl_open_device_driver(&b->drv, path, err, sizeof(err));
	if (st < 0)
		snprintf(why, len, "%s: %s", cms_status_name(st), err);
	else if (st)
		snprintf(why, len, "%s", err);
	if (st)
		return -1;
	snprintf(b->drv_path, sizeof(b->drv_path), "%s", path);
	b->drv_open = true;
	b->sim = b->drv.is_sim != 0;
	return 0;
}

/* Chooses the driver and prints the first line. */
static int bench_choose_driver(struct bench *b)
{
	const char *sim, *where = NULL;
	char err[512];
	int st;

	if (b->mode != BENCH_SIM) {
		if (!bench_try_gpu(b, b->drv_why, sizeof(b->drv_why))) {
			if (b->sim && b->mode == BENCH_GPU) {
				bench_fail(b, "--gpu: %s=%s is the host simulation", CMS_DRIVER_ENV,
					   b->drv_path);
				return -1;
			}
			if (b->sim)
				printf("cms-bench %s on the HOST SIMULATION (selected by %s=%s)\n",
				       cms_version_string(), CMS_DRIVER_ENV, b->drv_path);
			else
				printf("cms-bench %s on NVIDIA GPU %d (driver %d)\n",
				       cms_version_string(), BENCH_DEVICE, b->drv.version);
			return 0;
		}
		if (b->mode == BENCH_GPU) {
			bench_fail(b, "--gpu: no usable GPU: %s", b->drv_why);
			return -1;
		}
	} else {
		snprintf(b->drv_why, sizeof(b->drv_why), "--sim");
	}
	sim = cmsctl_sim_path(&where);
	if (!sim) {
		bench_fail(b, "no GPU (%s) and this build has no host simulation", b->drv_why);
		return -1;
	}
	if (b->mode == BENCH_SIM)
		printf("cms-bench %s on the HOST SIMULATION (--sim): timings say nothing about a "
		       "GPU\n",
		       cms_version_string());
	else
		printf("cms-bench %s on the HOST SIMULATION (no GPU found: %s): timings say "
		       "nothing about a GPU\n",
		       cms_version_string(), b->drv_why);
	snprintf(b->drv_path, sizeof(b->drv_path), "%s", sim);
	st = cms_driver_open(&b->drv, b->drv_path, err, sizeof(err));
	if (st) {
		bench_fail(b, "%s: %s: %s (check the CMS_SIM_* environment variables)", b->drv_path,
			   cms_status_name(st), err);
		return -1;
	}
	b->drv_open = true;
	b->sim = true;
	printf("driver library: %s (%s, version %d)\n", b->drv_path, where, b->drv.version);
	return 0;
}

/* Device 0 in its primary context, granularity of the library's allocation properties. */
static int bench_setup_device(struct bench *b)
{
	CUresult (*get_name)(char *, int, CUdevice);
	CUmemAllocationProp prop;
	size_t gran = 0, fr = 0, tot = 0;
	char b1[32], b2[32], b3[32];

	BENCH_CU(b, err, cuDeviceGet, &b->dev, BENCH_DEVICE);
	BENCH_CU(b, err, cuDevicePrimaryCtxRetain, &b->primary, b->dev);
	b->retained = true;
	BENCH_CU(b, err, cuCtxPushCurrent, b->primary);
	b->pushed = true;
	BENCH_CU(b, err, cuDeviceGetAttribute, &b->gdr,
		 CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, b->dev);
	b->gdr = b->gdr != 0;
	/* the properties src/vmm.c uses */
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = b->dev;
	prop.allocFlags.gpuDirectRDMACapable = (unsigned char)b->gdr;
	BENCH_CU(b, err, cuMemGetAllocationGranularity, &gran, &prop,
		 CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (!gran || (gran & (gran - 1))) {
		bench_fail(b, "device %d reports granularity %zu", BENCH_DEVICE, gran);
		return -1;
	}
	b->granularity = gran;
	b->drv_version = b->drv.version;
	BENCH_CU(b, err, cuMemGetInfo, &fr, &tot);
	b->dev_free = fr;
	b->dev_total = tot;
	/* not in the driver table; the real driver exports it, the simulation does not */
	get_name = (CUresult(*)(char *, int, CUdevice))dlsym(b->drv.dl, "cuDeviceGetName");
	if (b->sim || !get_name ||
	    get_name(b->device_name, (int)sizeof(b->device_name), b->dev) != CUDA_SUCCESS)
		snprintf(b->device_name, sizeof(b->device_name), "%s",
			 b->sim ? "host simulation" : "unknown");
	printf("device %d: %s, %s free of %s, granularity %s, driver %d\n", BENCH_DEVICE,
	       b->device_name, bench_fmt_bytes(b1, sizeof(b1), b->dev_free),
	       bench_fmt_bytes(b2, sizeof(b2), b->dev_total),
	       bench_fmt_bytes(b3, sizeof(b3), b->granularity), b->drv.version);
	return 0;
err:
	return -1;
}

/* Sim only: after cleanup nothing may be left alive in the simulated driver. */
static void bench_check_sim_leaks(struct bench *b)
{
	int (*get)(cmssim_counters *) =
		(int (*)(cmssim_counters *))dlsym(b->drv.dl, "cmssim_get_counters");
	cmssim_counters k = CMSSIM_COUNTERS_INIT;

	if (!get || get(&k))
		return;
	bench_check(b,
		    !k.reservations && !k.handles && !k.physical_allocations && !k.mappings &&
			    !k.device_used_bytes[BENCH_DEVICE] && !k.streams && !k.events &&
			    !k.primary_ctx_refs && !k.host_buffers,
		    "simulation objects left after cleanup: %" PRIu64 " reservations, %" PRIu64
		    " handles, %" PRIu64 " physical, %" PRIu64 " mappings, %" PRIu64
		    " bytes used, %" PRIu64 " streams, %" PRIu64 " events, %" PRIu64
		    " primary refs, %" PRIu64 " host buffers",
		    k.reservations, k.handles, k.physical_allocations, k.mappings,
		    k.device_used_bytes[BENCH_DEVICE], k.streams, k.events, k.primary_ctx_refs,
		    k.host_buffers);
}

/* Gives back the primary context and the driver; on the simulation, checks for leaks. */
static void bench_close_driver(struct bench *b)
{
	CUcontext popped;
	CUresult res;

	snprintf(b->step, sizeof(b->step), "cleanup");
	if (b->pushed) {
		res = b->drv.cuCtxPopCurrent(&popped);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuCtxPopCurrent");
		b->pushed = false;
	}
	if (b->retained) {
		res = b->drv.cuDevicePrimaryCtxRelease(b->dev);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuDevicePrimaryCtxRelease");
		b->retained = false;
	}
	if (b->drv_open) {
		if (b->sim && !b->failed)
			bench_check_sim_leaks(b);
		cms_driver_close(&b->drv);
		b->drv_open = false;
	}
}

static void bench_free(struct bench *b)
{
	for (int i = 0; i < BENCH_NWORK; i++) {
		free(b->work[i].pause_ns);
		free(b->work[i].resume_ns);
		free(b->work[i].ready_ns);
	}
	bench_multi_free(b);
	free(b->stage);
	free(b->cmdline);
	free(b);
}

/* ---- options -------------------------------------------------------------------- */

static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: cms-bench [--scale N] [--cycles N] [--only LIST] [--json FILE]\n"
		"                 [--verify-full] [--disk-dir DIR] [--sim|--gpu]\n"
		"  -s, --scale N      divide every workload's and floor's bytes by N (1..%u;\n"
		"                     default 1 on a GPU, %u on the host simulation); an\n"
		"                     allocation never goes below one granularity\n"
		"  -n, --cycles N     pause/resume cycles per workload (1..%u, default %u); the\n"
		"                     first is reported apart from the median of the others.\n"
		"                     A workload whose cycle takes more than 10 s stops after 2\n"
		"  -o, --only LIST    comma-separated workloads to run: a,b,c,d,e,f,g (e: "
		"cms_swap\n"
		"                     between two HOST tags), or 'floor' for the floors alone;\n"
		"                     the floors the chosen workloads need are always measured\n"
		"  -j, --json FILE    also write the results as JSON to FILE\n"
		"      --verify-full  check the whole content of HOST allocations after every\n"
		"                     cycle (default: a sample at the start, middle and end)\n"
		"      --devices LIST multi-device mode: (a) and (c) with the same bytes per\n"
		"                     device in one tag on every listed device (e.g. 0,1),\n"
		"                     next to the same on the first device alone, and the\n"
		"                     driver's own multi-device floor of (a) (raw VMM calls\n"
		"                     on 1 and on every device); --only floor: that floor alone\n"
		"      --disk-dir DIR (g): the DISK region's directory (default $TMPDIR, else\n"
		"                     /tmp); (g) is skipped when it lacks room (statvfs)\n"
		"      --sim          run on the host simulation\n"
		"      --gpu          run on the real driver (fail if there is no GPU)\n"
		"exit status: 0 when every correctness check passed, 1 otherwise, 2 on bad usage\n",
		BENCH_MAX_SCALE, BENCH_DEFAULT_SIM_SCALE, BENCH_MAX_CYCLES, BENCH_DEFAULT_CYCLES);
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

static int bench_parse_uint(const char *s, unsigned int lo, unsigned int hi, unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (!s[0] || *end || s[0] == '-' || errno || v < lo || v > hi)
		return -1;
	*out = (unsigned int)v;
	return 0;
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
			if (bench_parse_uint(optarg, 1, BENCH_MAX_SCALE, &b->scale)) {
				fprintf(stderr, "cms-bench: bad --scale '%s' (1..%u)\n", optarg,
					BENCH_MAX_SCALE);
				return 2;
			}
			b->scale_given = true;
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
					"cms-bench: bad --only '%s' (comma-separated a..g or "
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
		case 'S':
		case 'G':
			if (b->mode != BENCH_AUTO &&
			    b->mode != (c == 'S' ? BENCH_SIM : BENCH_GPU)) {
				fprintf(stderr, "cms-bench: --sim and --gpu exclude each other\n");
				return 2;
			}
			b->mode = c == 'S' ? BENCH_SIM : BENCH_GPU;
			break;
		case 'h':
			bench_usage(stdout);
			return 0;
		default:
			bench_bad_option(argv, c);
			bench_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cms-bench: unexpected argument '%s'\n", argv[optind]);
		bench_usage(stderr);
		return 2;
	}
	return -1;
}

static char *bench_join_args(int argc, char **argv)
{
	size_t len = 1, off = 0;
	char *s;
	int i;

	for (i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (i = 0; i < argc; i++)
		off += (size_t)snprintf(s + off, len - off, "%s%s", i ? " " : "", argv[i]);
	return s;
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
	printf("date %s, scale 1/%u, %u cycles per workload, command: %s\n", b->date, b->scale,
	       b->cycles, b->cmdline);
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
	if (b->json_path && bench_report_json(b))
		bench_fail(b, "cannot write %s: %s", b->json_path, strerror(errno));
	if (b->failed) {
		printf("bench: FAIL: %s\n", b->failure);
		rc = 1;
	} else {
		printf("bench: PASS (%u checks)\n", b->checks);
		rc = 0;
	}
out_free:
	bench_free(b);
	return rc;
}
