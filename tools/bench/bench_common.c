/* SPDX-License-Identifier: MIT */
/*
 * bench_common.c - helpers shared by cms-bench and the experiments built on
 * its struct bench (lab/): failure recording, clocks, medians,
 * /proc readings, multi-threaded fault-in and pattern fill of host memory,
 * JSON scalars, the choice of driver (a GPU, else the host simulation), the
 * device's primary context, and the simulation's leak check at the end.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cumemsaver_sim.h"
#include "tool_common.h"

/* ---- helpers ---------------------------------------------------------------- */

void bench_fail(struct bench *b, const char *fmt, ...)
{
	char msg[sizeof(b->failure)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", bench_tool(b), msg);
	memcpy(b->last_failure, msg, sizeof(msg));
	b->failures++;
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

const char *bench_tool(const struct bench *b)
{
	return b->tool ? b->tool : "cms-bench";
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bench_proc_status(const char *field)
{
	return bench_proc_field("/proc/self/status", field);
}

uint64_t bench_proc_field(const char *file, const char *field)
{
	unsigned long long kib = 0;
	size_t n = strlen(field);
	char line[256];
	FILE *f = fopen(file, "r");

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
	return tool_format_bytes(buf, len, bytes);
}

const char *bench_coalesce_note(const struct bench_work *w)
{
	return w->policy != CMS_POLICY_DISCARD && (w->flags & CMS_REGION_COALESCE) ?
		       "; CMS_REGION_COALESCE by --coalesce" :
		       "";
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

/* ---- a workload's timings: the first cycle, the median of cycles 2.. ---------- */

static const uint64_t *work_series(const struct bench_work *w, enum bench_phase phase)
{
	return phase == BENCH_PAUSE ? w->pause_ns :
	       phase == BENCH_READY ? w->ready_ns :
				      w->resume_ns;
}

double bench_work_first_ms(const struct bench_work *w, enum bench_phase phase)
{
	const uint64_t *v = work_series(w, phase);

	if (!w->cycles_done || !v)
		return NAN;
	return (double)v[0] / 1e6;
}

double bench_work_median_ms(const struct bench_work *w, enum bench_phase phase)
{
	const uint64_t *v = work_series(w, phase);

	if (w->cycles_done < 2 || !v)
		return NAN;
	return bench_median_ns(v + 1, w->cycles_done - 1) / 1e6;
}

double bench_mphase_ms(const struct bench_mphase *ph, bool pause, bool median)
{
	const uint64_t *v = pause ? ph->pause_ns : ph->resume_ns;

	if (!v || !ph->cycles_done || (median && ph->cycles_done < 2))
		return NAN;
	return median ? bench_median_ns(v + 1, ph->cycles_done - 1) / 1e6 : (double)v[0] / 1e6;
}

/* ---- test patterns, fault-in of host memory ------------------------------- */

uint64_t bench_pattern_word(uint64_t off, uint64_t salt)
{
	uint64_t z = off ^ (salt * 0x9e3779b97f4a7c15ull);

	/* splitmix64's finalizer: every word differs from its neighbours and from other salts */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void bench_pattern_fill(void *p, uint64_t bytes, uint64_t off0, uint64_t salt)
{
	uint64_t *w = p, k;

	for (k = 0; k < bytes / 8; k++)
		w[k] = bench_pattern_word(off0 + k * 8, salt);
}

struct touch_job {
	pthread_t tid;
	bool started;
	bool fill; /* the pattern (bench_pattern_fill), else one byte per page */
	volatile char *p;
	uint64_t bytes;
	uint64_t off0;
	uint64_t salt;
};

static void *touch_thread(void *arg)
{
	struct touch_job *j = arg;
	uint64_t off;

	if (j->fill) {
		bench_pattern_fill((void *)j->p, j->bytes, j->off0, j->salt);
		return NULL;
	}
	for (off = 0; off < j->bytes; off += 4096)
		j->p[off] = 0;
	return NULL;
}

static unsigned int touch_threads(void *p, uint64_t bytes, unsigned int max_threads, bool fill,
				  uint64_t off0, uint64_t salt)
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
		jobs[i].fill = fill;
		jobs[i].off0 = off0 + off;
		jobs[i].salt = salt;
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

unsigned int bench_touch(void *p, uint64_t bytes, unsigned int max_threads)
{
	return touch_threads(p, bytes, max_threads, false, 0, 0);
}

unsigned int bench_touch_pattern(void *p, uint64_t bytes, unsigned int max_threads, uint64_t off0,
				 uint64_t salt)
{
	return touch_threads(p, bytes, max_threads, true, off0, salt);
}

/* ---- driver choice (as cmsctl demo) ------------------------------------------- */

/* Opens the driver CMS_DRIVER_LIBRARY names, else libcuda.so.1, with a device. Returns 0; else
 * -1 with the reason in why, or -2 when CMS_DRIVER_LIBRARY named it (no fall back then). */
static int bench_try_gpu(struct bench *b, char *why, size_t len)
{
	int named;
	const char *path = tool_driver_path(&named);
	char err[512];
	int st;

	st = tool_open_device_driver(&b->drv, path, err, sizeof(err));
	if (st < 0)
		snprintf(why, len, "%s: %s", cms_status_name(st), err);
	else if (st)
		snprintf(why, len, "%s", err);
	if (st && named)
		snprintf(b->drv_path, sizeof(b->drv_path), "%s", path);
	if (st)
		return named ? -2 : -1;
	snprintf(b->drv_path, sizeof(b->drv_path), "%s", path);
	b->drv_open = true;
	b->sim = b->drv.is_sim != 0;
	return 0;
}

/* Chooses the driver and prints the first line. */
int bench_choose_driver(struct bench *b)
{
	const char *sim, *where = NULL;
	char err[512];
	int st;

	if (b->mode != BENCH_SIM) {
		st = bench_try_gpu(b, b->drv_why, sizeof(b->drv_why));
		if (st == -2) {
			bench_fail(b,
				   "%s%s=%s cannot be used: %s; unset it to try %s, then the host "
				   "simulation, or pass --sim",
				   b->mode == BENCH_GPU ? "--gpu: no usable GPU: " : "",
				   CMS_DRIVER_ENV, b->drv_path, b->drv_why, CMS_DRIVER_DEFAULT);
			b->drv_path[0] = '\0';
			return -1;
		}
		if (!st) {
			if (b->sim && b->mode == BENCH_GPU) {
				bench_fail(b, "--gpu: %s=%s is the host simulation", CMS_DRIVER_ENV,
					   b->drv_path);
				return -1;
			}
			if (b->sim)
				printf("%s %s on the HOST SIMULATION (selected by %s=%s)\n",
				       bench_tool(b), cms_version_string(), CMS_DRIVER_ENV,
				       b->drv_path);
			else
				printf("%s %s on NVIDIA GPU %d (driver %d)\n", bench_tool(b),
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
	sim = tool_sim_path(&where);
	if (!sim) {
		bench_fail(b, "no GPU (%s) and this build has no host simulation", b->drv_why);
		return -1;
	}
	if (b->mode == BENCH_SIM)
		printf("%s %s on the HOST SIMULATION (--sim): timings say nothing about a "
		       "GPU\n",
		       bench_tool(b), cms_version_string());
	else
		printf("%s %s on the HOST SIMULATION (no GPU found: %s): timings say "
		       "nothing about a GPU\n",
		       bench_tool(b), cms_version_string(), b->drv_why);
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
int bench_setup_device(struct bench *b)
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
void bench_close_driver(struct bench *b)
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

int bench_parse_uint(const char *s, unsigned int lo, unsigned int hi, unsigned int *out)
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

char *bench_join_args(int argc, char **argv)
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

void bench_json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

void bench_json_head(const struct bench *b, FILE *f)
{
	fprintf(f, "{\n  \"tool\": ");
	tool_json_str(f, bench_tool(b));
	fputs(", \"library_version\": ", f);
	tool_json_str(f, cms_version_string());
	fputs(",\n  \"date\": ", f);
	tool_json_str(f, b->date);
	fputs(", \"command\": ", f);
	tool_json_str(f, b->cmdline);
	fprintf(f, ",\n  \"simulation\": %s, \"driver_library\": ", b->sim ? "true" : "false");
	tool_json_str(f, b->drv_path);
	fprintf(f, ", \"driver_version\": %d, \"device\": %d, \"device_name\": ", b->drv_version,
		BENCH_DEVICE);
	tool_json_str(f, b->device_name);
}

int bench_parse_option(struct bench *b, int c, const char *arg)
{
	switch (c) {
	case 's':
		if (bench_parse_uint(arg, 1, BENCH_MAX_SCALE, &b->scale)) {
			fprintf(stderr, "%s: bad --scale '%s' (1..%u)\n", bench_tool(b), arg,
				BENCH_MAX_SCALE);
			return 2;
		}
		b->scale_given = true;
		return 0;
	case 'S':
	case 'G':
		if (b->mode != BENCH_AUTO && b->mode != (c == 'S' ? BENCH_SIM : BENCH_GPU)) {
			fprintf(stderr, "%s: --sim and --gpu exclude each other\n", bench_tool(b));
			return 2;
		}
		b->mode = c == 'S' ? BENCH_SIM : BENCH_GPU;
		return 0;
	default:
		return -1;
	}
}

int bench_exp_start(struct bench *b, const char *tool, int argc, char **argv,
		    unsigned int sim_scale)
{
	time_t now = time(NULL);
	struct tm tm;
	int c;

	b->tool = tool;
	while ((c = getopt(argc, argv, "s:SG")) != -1)
		if (bench_parse_option(b, c, optarg))
			return 2;
	gmtime_r(&now, &tm);
	strftime(b->date, sizeof(b->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (bench_choose_driver(b))
		return -1;
	if (!b->scale_given)
		b->scale = b->sim ? sim_scale : 1;
	return bench_setup_device(b);
}

void bench_gap(const struct bench *b)
{
	struct timespec ts = { .tv_sec = b->gap_ms / 1000,
			       .tv_nsec = (long)(b->gap_ms % 1000) * 1000000L };

	while (b->gap_ms && nanosleep(&ts, &ts) && errno == EINTR)
		;
}
