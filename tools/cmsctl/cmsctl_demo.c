/* SPDX-License-Identifier: MIT */
/*
 * cmsctl_demo.c - `cmsctl demo`: the showcase of cumemsaver.
 *
 * It puts model-like state on device 0 through the library: a `weights`
 * region (HOST policy: content survives a pause) of several allocations
 * filled with a known pattern, and a `kv_cache` region (DISCARD policy) of
 * several allocations. It captures a CUDA graph on a stream of its own that
 * reads every weights allocation and writes kv_cache (kernel launches of
 * cms_affine_u32 on a GPU, device-to-device copies on the host simulation,
 * which cannot run kernels), then pauses and resumes both regions N times.
 * After every resume it checks that each allocation kept its address, that
 * the regions' epochs went up by one, that the graph captured before the
 * first pause still computes kv_cache from the weights, and that the weights
 * kept their content; after every pause, that the driver got the memory back
 * (cuMemGetInfo free bytes went up by what the library released).
 *
 * The tool loads the driver itself (driver.c, compiled in again) with the
 * same path as the library's context, so both use one dlopen'ed library and
 * share the device's primary context.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <unistd.h>

#include "cmsctl.h"
#include "cumemsaver.h"
#include "cumemsaver_sim.h"
#include "driver.h"
#include "kernels.h"

#define DEMO_WEIGHTS 4 /* weights allocations */
#define DEMO_KV 2      /* kv_cache allocations; each holds DEMO_WEIGHTS / DEMO_KV outputs */
#define DEMO_PER_KV (DEMO_WEIGHTS / DEMO_KV)
#define DEMO_ALLOCS (DEMO_WEIGHTS + DEMO_KV)
#define DEMO_DEVICE 0
#define DEMO_GARBAGE 0xDEADBEEFu
#define DEMO_STAGE_BYTES (64ull << 20)	/* host staging buffer for fills and checks */
#define DEMO_GPU_TOLERANCE (8ull << 20) /* driver free delta vs bytes released, on a GPU */
#define DEMO_DEFAULT_GPU_SIZE (1ull << 30)
#define DEMO_DEFAULT_SIM_SIZE (64ull << 20)
#define DEMO_MAX_CYCLES 100000u
#define DEMO_MIN_SIZE (4ull * DEMO_WEIGHTS) /* one 32-bit word per weights allocation */
#define DEMO_MAX_SIZE (1ull << 50)	    /* 1024T: keeps the byte arithmetic far from overflow */
#define DEMO_SIM_HINT "check the CMS_SIM_* environment variables (docs/simulation.md)"

enum demo_mode { DEMO_AUTO, DEMO_SIM, DEMO_GPU };

struct demo_cycle {
	uint64_t pause_ns;
	uint64_t resume_ns;
	uint64_t released;
	int64_t free_delta;
	bool delta_ok;
};

struct demo {
	/* options */
	uint64_t size;
	bool size_given;
	enum demo_mode mode;
	unsigned int cycles;
	bool progress; /* --progress: draw it even when stderr is not a TTY */

	/* the tool's own view of the driver */
	struct cms_driver drv;
	bool drv_open;
	bool sim;
	char drv_path[PATH_MAX];
	CUdevice dev;
	CUcontext primary;
	bool retained;
	bool pushed;

	/* the library */
	cms_context *ctx;
	cms_region *weights;
	cms_region *kv;
	uint64_t chunk; /* bytes of each weights allocation (multiple of 4) */
	uint64_t w_ptr[DEMO_WEIGHTS];
	uint64_t kv_ptr[DEMO_KV]; /* each DEMO_PER_KV * chunk bytes */
	uint64_t physical;	  /* physical bytes of all allocations */
	uint64_t epoch_w;
	uint64_t epoch_kv;

	/* the graph */
	CUstream stream;
	CUmodule module;
	CUfunction fn;
	CUgraph graph;
	CUgraphExec exec;
	bool kernel; /* kv = weights * 2 + 1 (kernel) or kv = weights (copies) */

	/* host side */
	uint32_t *buf;
	size_t buf_words;
	struct demo_cycle *stats;
	unsigned int cycles_done;
	unsigned int checks;
	const char *step; /* what the demo is doing, for failure messages */
	char step_buf[32];
	bool failed;
	char failure[1024];

	/* the progress line on stderr (cms_context_progress_set) */
	const char *progress_op;
	int progress_pct;
	bool progress_open; /* a line without its newline yet */
};

static void demo_fail(struct demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The library's progress callback: one line on stderr per operation, "\rpause:  42% (...)",
 * redrawn when the percentage changes, ended by the last call (done == total). It runs on the
 * library's threads with the regions' locks held: it only formats and writes. */
static void demo_progress(void *user, const char *op, uint64_t done, uint64_t total)
{
	struct demo *d = user;
	int pct = total ? (int)((double)done * 100.0 / (double)total) : 100;
	char b1[32], b2[32];

	if (done < total && op == d->progress_op && pct == d->progress_pct)
		return;
	d->progress_op = op;
	d->progress_pct = pct;
	fprintf(stderr, "\r%-6s %3d%% (%s of %s)", op, pct, tool_format_bytes(b1, sizeof(b1), done),
		tool_format_bytes(b2, sizeof(b2), total));
	d->progress_open = done < total;
	if (done >= total) {
		fputc('\n', stderr);
		d->progress_op = NULL; /* the next operation draws from 0 */
	}
}

/* Records the first failure; later ones only add to stderr. */
static void demo_fail(struct demo *d, const char *fmt, ...)
{
	char msg[sizeof(d->failure)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (d->progress_open) { /* a failed operation makes no last call */
		fputc('\n', stderr);
		d->progress_open = false;
	}
	if (!d->failed) {
		d->failed = true;
		memcpy(d->failure, msg, sizeof(msg));
	} else {
		fprintf(stderr, "cmsctl demo: also: %s\n", msg);
	}
}

/* A passed check counts; a failed one records the failure. Returns ok. */
static bool demo_check(struct demo *d, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool demo_check(struct demo *d, bool ok, const char *fmt, ...)
{
	char msg[sizeof(d->failure)];
	va_list ap;

	if (ok) {
		d->checks++;
		return true;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	demo_fail(d, "%s", msg);
	return false;
}

/* A cms_* call failed: status name and the thread's last error. */
static int demo_cms_fail(struct demo *d, cms_status st, const char *what)
{
	demo_fail(d, "%s: %s: %s (%s)", d->step, what, cms_status_name(st), cms_last_error());
	return -1;
}

static int demo_cu_fail(struct demo *d, CUresult res, const char *what)
{
	demo_fail(d, "%s: %s: %s (%d)", d->step, what, cms_driver_error_name(&d->drv, res), res);
	return -1;
}

/* Calls d->drv.fn(...); on failure records it and jumps to label. */
#define DEMO_CU(d, label, fn, ...)                        \
	do {                                              \
		CUresult res_ = (d)->drv.fn(__VA_ARGS__); \
		if (res_ != CUDA_SUCCESS) {               \
			demo_cu_fail((d), res_, #fn);     \
			goto label;                       \
		}                                         \
	} while (0)

/* Calls fn(...) of the library; on failure records it and jumps to label. */
#define DEMO_CMS(d, label, fn, ...)                   \
	do {                                          \
		cms_status st_ = fn(__VA_ARGS__);     \
		if (st_ != CMS_OK) {                  \
			demo_cms_fail((d), st_, #fn); \
			goto label;                   \
		}                                     \
	} while (0)

static const char *fmtb(char *buf, size_t len, uint64_t bytes)
{
	return tool_format_bytes(buf, len, bytes);
}

static const char *fmt_delta(char *buf, size_t len, int64_t delta)
{
	char tmp[32];
	uint64_t mag = delta < 0 ? (uint64_t) - (delta + 1) + 1 : (uint64_t)delta;

	snprintf(buf, len, "%c%s", delta < 0 ? '-' : '+', tool_format_bytes(tmp, sizeof(tmp), mag));
	return buf;
}

/* ---- the data: a deterministic pattern and the graph's function ----------- */

/* Word g of the weights (g counts over all weights allocations in order). */
static inline uint32_t demo_pattern(uint64_t g)
{
	uint32_t x = (uint32_t)g * 0x9E3779B1u + (uint32_t)(g >> 32) * 0x85EBCA77u + 0x7F4A7C15u;

	x ^= x >> 15;
	x *= 0x2C1B3C6Du;
	x ^= x >> 12;
	return x;
}

static inline uint32_t demo_f(const struct demo *d, uint32_t w)
{
	return d->kernel ? w * 2u + 1u : w;
}

/* Where the graph writes the output of weights allocation i. */
static uint64_t demo_kv_dst(const struct demo *d, unsigned int i)
{
	return d->kv_ptr[i / DEMO_PER_KV] + (uint64_t)(i % DEMO_PER_KV) * d->chunk;
}

/* Writes the pattern into every weights allocation. */
static int demo_fill_weights(struct demo *d)
{
	uint64_t words = d->chunk / 4, off, k, n;
	unsigned int i;

	for (i = 0; i < DEMO_WEIGHTS; i++) {
		for (off = 0; off < words; off += n) {
			uint64_t g0 = (uint64_t)i * words + off;

			n = words - off < d->buf_words ? words - off : d->buf_words;
			for (k = 0; k < n; k++)
				d->buf[k] = demo_pattern(g0 + k);
			DEMO_CU(d, err, cuMemcpyHtoD, d->w_ptr[i] + off * 4, d->buf, n * 4);
		}
	}
	return 0;
err:
	return -1;
}

/*
 * Checks one chunk of device memory against the pattern: (src, words) holds
 * f(pattern) when apply, else the pattern, for weights allocation i.
 */
static int demo_verify_chunk(struct demo *d, uint64_t src, unsigned int i, bool apply,
			     const char *what)
{
	uint64_t words = d->chunk / 4, off, k, n;

	for (off = 0; off < words; off += n) {
		uint64_t g0 = (uint64_t)i * words + off;

		n = words - off < d->buf_words ? words - off : d->buf_words;
		DEMO_CU(d, err, cuMemcpyDtoH, d->buf, src + off * 4, n * 4);
		for (k = 0; k < n; k++) {
			uint32_t want = demo_pattern(g0 + k);

			if (apply)
				want = demo_f(d, want);
			if (d->buf[k] != want) {
				demo_fail(d,
					  "%s: word %" PRIu64 " at 0x%" PRIx64
					  " reads 0x%08x, expected 0x%08x",
					  what, off + k, src + (off + k) * 4, d->buf[k], want);
				return -1;
			}
		}
	}
	return 0;
err:
	return -1;
}

static int demo_verify_weights(struct demo *d, const char *when)
{
	char what[128];
	unsigned int i;

	for (i = 0; i < DEMO_WEIGHTS; i++) {
		snprintf(what, sizeof(what), "%s: weights[%u] lost its content", when, i);
		if (demo_verify_chunk(d, d->w_ptr[i], i, false, what))
			return -1;
	}
	d->checks++;
	return 0;
}

/* Fills kv_cache with garbage, replays the graph, checks kv_cache == f(weights). */
static int demo_replay(struct demo *d, const char *when)
{
	char what[128];
	uint32_t first = 0;
	unsigned int i;

	for (i = 0; i < DEMO_KV; i++)
		DEMO_CU(d, err, cuMemsetD32Async, d->kv_ptr[i], DEMO_GARBAGE,
			(size_t)(DEMO_PER_KV * d->chunk / 4), d->stream);
	DEMO_CU(d, err, cuStreamSynchronize, d->stream);
	DEMO_CU(d, err, cuMemcpyDtoH, &first, d->kv_ptr[0], sizeof(first));
	if (!demo_check(d, first == DEMO_GARBAGE,
			"%s: kv_cache reads 0x%08x after the memset of 0x%08x", when, first,
			DEMO_GARBAGE))
		return -1;
	DEMO_CU(d, err, cuGraphLaunch, d->exec, d->stream);
	DEMO_CU(d, err, cuStreamSynchronize, d->stream);
	for (i = 0; i < DEMO_WEIGHTS; i++) {
		snprintf(what, sizeof(what),
			 "%s: kv_cache != f(weights[%u]) after the graph replay", when, i);
		if (demo_verify_chunk(d, demo_kv_dst(d, i), i, true, what))
			return -1;
	}
	d->checks++;
	return 0;
err:
	return -1;
}

/* ---- setup ------------------------------------------------------------------ */

/* Whether path can be loaded and is the host simulation (even if its cuInit fails). */
static bool demo_lib_is_sim(const char *path)
{
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	bool sim;

	if (!h)
		return false;
	sim = dlsym(h, "cmssim_get_counters") != NULL;
	dlclose(h);
	return sim;
}

static int demo_open(struct demo *d, const char *path)
{
	char err[512];
	int st;

	snprintf(d->drv_path, sizeof(d->drv_path), "%s", path);
	st = cms_driver_open(&d->drv, d->drv_path, err, sizeof(err));
	if (st) {
		if (demo_lib_is_sim(d->drv_path))
			demo_fail(d, "%s: %s; " DEMO_SIM_HINT, cms_status_name(st), err);
		else
			demo_fail(d, "%s: %s", cms_status_name(st), err);
		return -1;
	}
	d->drv_open = true;
	d->sim = d->drv.is_sim != 0;
	return 0;
}

/*
 * Tries a real driver (CMS_DRIVER_LIBRARY, else libcuda.so.1); on success returns 0, else -1
 * with the reason in why, or -2 when CMS_DRIVER_LIBRARY names the library and it cannot be
 * loaded or has no device (no fall back to the simulation then).
 */
static int demo_try_gpu(struct demo *d, char *why, size_t len)
{
	int named;
	const char *path = tool_driver_path(&named);
	char err[512];
	int st;

	st = tool_open_device_driver(&d->drv, path, err, sizeof(err));
	if (st < 0)
		snprintf(why, len, "%s: %s", cms_status_name(st), err);
	else if (st)
		snprintf(why, len, "%s", err);
	if (st) {
		snprintf(d->drv_path, sizeof(d->drv_path), "%s", path);
		return named ? -2 : -1;
	}
	snprintf(d->drv_path, sizeof(d->drv_path), "%s", path);
	d->drv_open = true;
	d->sim = d->drv.is_sim != 0;
	return 0;
}

/* The driver CMS_DRIVER_LIBRARY names failed (demo_try_gpu -2): the first line (not with
 * --gpu, which fails as without a GPU), the failure. */
static int demo_named_failed(struct demo *d, const char *why)
{
	bool gpu = d->mode == DEMO_GPU;

	if (demo_lib_is_sim(d->drv_path)) {
		if (!gpu)
			printf("cumemsaver %s demo on the HOST SIMULATION (selected by %s=%s)\n",
			       cms_version_string(), CMS_DRIVER_ENV, d->drv_path);
		demo_fail(d, "%s%s; " DEMO_SIM_HINT, gpu ? "--gpu: no usable GPU: " : "", why);
		return -1;
	}
	if (!gpu)
		printf("cumemsaver %s demo on the driver %s names\n", cms_version_string(),
		       CMS_DRIVER_ENV);
	demo_fail(d,
		  "%s%s=%s cannot be used: %s; unset it to try %s, then the host simulation, or "
		  "pass --sim",
		  gpu ? "--gpu: no usable GPU: " : "", CMS_DRIVER_ENV, d->drv_path, why,
		  CMS_DRIVER_DEFAULT);
	return -1;
}

/* Chooses the driver and prints the first line. */
static int demo_choose_driver(struct demo *d)
{
	const char *sim, *where = NULL;
	char why[600] = "";
	int rc;

	if (d->mode != DEMO_SIM) {
		rc = demo_try_gpu(d, why, sizeof(why));
		if (rc == -2)
			return demo_named_failed(d, why);
		if (!rc) {
			if (d->sim && d->mode == DEMO_GPU) {
				demo_fail(d, "--gpu: CMS_DRIVER_LIBRARY=%s is the host simulation",
					  d->drv_path);
				return -1;
			}
			if (d->sim)
				printf("cumemsaver %s demo on the HOST SIMULATION (selected by "
				       "%s=%s)\n",
				       cms_version_string(), CMS_DRIVER_ENV, d->drv_path);
			else
				printf("cumemsaver %s demo on NVIDIA GPU %d (driver %d)\n",
				       cms_version_string(), DEMO_DEVICE, d->drv.version);
			return 0;
		}
		if (d->mode == DEMO_GPU) {
			demo_fail(d, "--gpu: no usable GPU: %s", why);
			return -1;
		}
	}
	sim = tool_sim_path(&where);
	if (!sim) {
		demo_fail(d, "no GPU (%s) and this build has no host simulation", why);
		return -1;
	}
	/* the first line before loading, so that it is there when loading fails */
	if (d->mode == DEMO_SIM)
		printf("cumemsaver %s demo on the HOST SIMULATION (--sim)\n", cms_version_string());
	else
		printf("cumemsaver %s demo on the HOST SIMULATION (no GPU found: %s)\n",
		       cms_version_string(), why);
	if (demo_open(d, sim))
		return -1;
	printf("driver library: %s (%s, version %d)\n", d->drv_path, where, d->drv.version);
	return 0;
}

/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
static uint64_t demo_mem_available(void)
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

/*
 * On the simulation device memory is host memory: the regions (2 x size), the
 * weights' HOST backup on pause (size) and the tool's staging buffer all take
 * host RAM. Fails, instead of letting the OOM killer end the process, when
 * that is more than MemAvailable.
 */
static int demo_check_host_ram(struct demo *d)
{
	uint64_t weights = DEMO_WEIGHTS * d->chunk, stage = (uint64_t)d->buf_words * 4;
	uint64_t need = 3 * weights + stage, avail = demo_mem_available(), fit = 0;
	char b1[32], b2[32], b3[32], b4[32], b5[32];

	if (!avail || need <= avail)
		return 0;
	/* the largest power of two that fits, as a suggestion in --size syntax */
	if (avail > stage)
		for (fit = DEMO_MIN_SIZE; fit * 2 * 3 + stage <= avail; fit *= 2)
			;
	if (fit * 3 + stage > avail)
		fit = 0;
	if (fit >= 1ull << 30)
		snprintf(b5, sizeof(b5), "%lluG", (unsigned long long)(fit >> 30));
	else if (fit >= 1ull << 20)
		snprintf(b5, sizeof(b5), "%lluM", (unsigned long long)(fit >> 20));
	else
		snprintf(b5, sizeof(b5), "%lluK", (unsigned long long)(fit >> 10));
	demo_fail(d,
		  "--size %s needs about %s of host RAM on the host simulation (its device "
		  "memory is host memory: 2 x size for the regions, size for the weights' "
		  "backup on pause, %s of buffers), but only %s is available (MemAvailable "
		  "in /proc/meminfo); %s%s",
		  fmtb(b1, sizeof(b1), d->size), fmtb(b2, sizeof(b2), need),
		  fmtb(b3, sizeof(b3), stage), fmtb(b4, sizeof(b4), avail),
		  fit ? "use a smaller --size, e.g. --size " : "free some memory first",
		  fit ? b5 : "");
	return -1;
}

static int demo_setup(struct demo *d)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options wopts = CMS_REGION_OPTIONS_INIT;
	cms_region_options kopts = CMS_REGION_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t free_b = 0, total_b = 0, need;
	char b1[32], b2[32], b3[32], b4[32];
	unsigned int i;

	if (!d->size_given)
		d->size = d->sim ? DEMO_DEFAULT_SIM_SIZE : DEMO_DEFAULT_GPU_SIZE;
	d->chunk = (d->size / DEMO_WEIGHTS) & ~(uint64_t)3; /* not 0: --size >= DEMO_MIN_SIZE */
	d->buf_words = (size_t)((d->chunk < DEMO_STAGE_BYTES ? d->chunk : DEMO_STAGE_BYTES) / 4);
	if (d->sim && demo_check_host_ram(d))
		return -1;
	d->buf = malloc(d->buf_words * 4);
	if (!d->buf) {
		demo_fail(d, "cannot allocate a host buffer of %zu bytes", d->buf_words * 4);
		return -1;
	}

	/* The tool's own calls run in the device's primary context, like the library's. */
	DEMO_CU(d, err, cuDeviceGet, &d->dev, DEMO_DEVICE);
	DEMO_CU(d, err, cuDevicePrimaryCtxRetain, &d->primary, d->dev);
	d->retained = true;
	DEMO_CU(d, err, cuCtxPushCurrent, d->primary);
	d->pushed = true;

	copts.driver_path = d->drv_path; /* the same library the tool loaded */
	DEMO_CMS(d, err, cms_context_create, &copts, &d->ctx);
	if (d->progress || isatty(STDERR_FILENO))
		DEMO_CMS(d, err, cms_context_progress_set, d->ctx, demo_progress, d);
	DEMO_CMS(d, err, cms_device_memory_info, d->ctx, DEMO_DEVICE, &free_b, &total_b);
	need = 2 * DEMO_WEIGHTS * d->chunk;
	if (need > free_b) {
		demo_fail(d,
			  "the demo needs %s of device memory (--size %s twice), the device has %s "
			  "free",
			  fmtb(b1, sizeof(b1), need), fmtb(b2, sizeof(b2), d->size),
			  fmtb(b3, sizeof(b3), free_b));
		return -1;
	}
	printf("device %d: %s free of %s\n", DEMO_DEVICE, fmtb(b1, sizeof(b1), free_b),
	       fmtb(b2, sizeof(b2), total_b));

	wopts.device = DEMO_DEVICE;
	wopts.policy = CMS_POLICY_HOST;
	kopts.device = DEMO_DEVICE;
	kopts.policy = CMS_POLICY_DISCARD;
	DEMO_CMS(d, err, cms_region_create, d->ctx, "weights", &wopts, &d->weights);
	DEMO_CMS(d, err, cms_region_create, d->ctx, "kv_cache", &kopts, &d->kv);
	for (i = 0; i < DEMO_WEIGHTS; i++)
		DEMO_CMS(d, err, cms_alloc, d->weights, d->chunk, &d->w_ptr[i]);
	for (i = 0; i < DEMO_KV; i++)
		DEMO_CMS(d, err, cms_alloc, d->kv, DEMO_PER_KV * d->chunk, &d->kv_ptr[i]);

	DEMO_CMS(d, err, cms_region_info_get, d->weights, &info);
	d->physical = info.physical_bytes;
	d->epoch_w = info.epoch;
	printf("region weights:  HOST policy,    %u allocations x %s (granularity %s)\n",
	       DEMO_WEIGHTS, fmtb(b1, sizeof(b1), d->chunk),
	       fmtb(b2, sizeof(b2), info.granularity));
	DEMO_CMS(d, err, cms_region_info_get, d->kv, &info);
	d->physical += info.physical_bytes;
	d->epoch_kv = info.epoch;
	printf("region kv_cache: DISCARD policy, %u allocations x %s\n", DEMO_KV,
	       fmtb(b1, sizeof(b1), DEMO_PER_KV * d->chunk));
	for (i = 0; i < DEMO_ALLOCS; i++) {
		bool w = i < DEMO_WEIGHTS;
		uint64_t p = w ? d->w_ptr[i] : d->kv_ptr[i - DEMO_WEIGHTS];

		DEMO_CMS(d, err, cms_pointer_info_get, d->ctx, p, &pi);
		printf("  %-8s [%u] 0x%012" PRIx64 "  %s (%s reserved)\n",
		       w ? "weights" : "kv_cache", w ? i : i - DEMO_WEIGHTS, p,
		       fmtb(b3, sizeof(b3), pi.size), fmtb(b4, sizeof(b4), pi.physical_size));
	}
	if (demo_fill_weights(d))
		return -1;
	printf("weights filled with a %s pattern\n", fmtb(b1, sizeof(b1), DEMO_WEIGHTS * d->chunk));
	return 0;
err:
	return -1;
}

/* Captures the graph weights -> kv_cache on the tool's stream and instantiates it. */
static int demo_capture(struct demo *d)
{
	uint64_t n = d->chunk / 4;
	CUgraph partial = NULL;
	bool capturing = false;
	unsigned int i;
	CUresult res;

	DEMO_CU(d, err, cuStreamCreate, &d->stream, CU_STREAM_NON_BLOCKING);
	res = d->drv.cuModuleLoadData(&d->module, cms_kernels_ptx);
	if (res == CUDA_SUCCESS) {
		DEMO_CU(d, err, cuModuleGetFunction, &d->fn, d->module, CMS_KERNEL_AFFINE_NAME);
		d->kernel = true;
	} else if (res == CUDA_ERROR_NOT_SUPPORTED) {
		d->module = NULL;
		d->kernel = false;
	} else {
		demo_cu_fail(d, res, "cuModuleLoadData (cms_affine_u32 PTX)");
		goto err;
	}
	if ((n + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK > INT32_MAX) {
		demo_fail(d, "--size %" PRIu64 " needs too many thread blocks", d->size);
		goto err;
	}

	DEMO_CU(d, err, cuStreamBeginCapture, d->stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
	capturing = true;
	for (i = 0; i < DEMO_WEIGHTS; i++) {
		CUdeviceptr in = d->w_ptr[i], out = demo_kv_dst(d, i);

		if (d->kernel) {
			void *params[] = { &in, &out, &n };
			unsigned int grid =
				(unsigned int)((n + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK);

			DEMO_CU(d, err, cuLaunchKernel, d->fn, grid, 1, 1, CMS_KERNEL_BLOCK, 1, 1,
				0, d->stream, params, NULL);
		} else {
			DEMO_CU(d, err, cuMemcpyDtoDAsync, out, in, (size_t)d->chunk, d->stream);
		}
	}
	capturing = false;
	DEMO_CU(d, err, cuStreamEndCapture, d->stream, &d->graph);
	DEMO_CU(d, err, cuGraphInstantiateWithFlags, &d->exec, d->graph, 0);
	if (d->kernel)
		printf("graph: captured %u launches of %s (kv_cache = weights * 2 + 1) on a stream "
		       "of its own\n",
		       DEMO_WEIGHTS, CMS_KERNEL_AFFINE_NAME);
	else
		printf("graph: captured %u device-to-device copies (kv_cache = weights) on a "
		       "stream of its own;\n"
		       "       the host simulation cannot run kernels, so copies stand in for %s\n",
		       DEMO_WEIGHTS, CMS_KERNEL_AFFINE_NAME);
	return 0;
err:
	if (capturing && d->drv.cuStreamEndCapture(d->stream, &partial) == CUDA_SUCCESS && partial)
		d->drv.cuGraphDestroy(partial);
	return -1;
}

/* ---- one cycle ---------------------------------------------------------------- */

static int demo_check_regions(struct demo *d, uint32_t state, const char *when)
{
	static const char *const names[] = { "ACTIVE", "PAUSED" };
	cms_region_info info = { .struct_size = sizeof(info) };
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	unsigned int i;

	for (i = 0; i < DEMO_ALLOCS; i++) {
		bool w = i < DEMO_WEIGHTS;
		uint64_t p = w ? d->w_ptr[i] : d->kv_ptr[i - DEMO_WEIGHTS];
		uint64_t size = w ? d->chunk : DEMO_PER_KV * d->chunk;
		cms_status st = cms_pointer_info_get(d->ctx, p, &pi);

		if (st)
			return demo_cms_fail(d, st, "cms_pointer_info_get");
		if (!demo_check(d,
				pi.base == p && pi.size == size && pi.offset == 0 &&
					pi.region == (w ? d->weights : d->kv) && pi.state == state,
				"%s: %s[%u] at 0x%" PRIx64 " is now base 0x%" PRIx64 ", %" PRIu64
				" bytes, state %u (expected the same base, %" PRIu64 " bytes, %s)",
				when, w ? "weights" : "kv_cache", w ? i : i - DEMO_WEIGHTS, p,
				pi.base, pi.size, pi.state, size, names[state]))
			return -1;
	}
	for (i = 0; i < 2; i++) {
		cms_region *r = i ? d->kv : d->weights;
		uint64_t *epoch = i ? &d->epoch_kv : &d->epoch_w;
		uint64_t want = *epoch + (state == CMS_STATE_ACTIVE);
		cms_status st = cms_region_info_get(r, &info);

		if (st)
			return demo_cms_fail(d, st, "cms_region_info_get");
		if (!demo_check(d, info.state == state && info.epoch == want,
				"%s: region %s is in state %u with epoch %" PRIu64
				" (expected %s, epoch %" PRIu64 ")",
				when, info.tag, info.state, info.epoch, names[state], want))
			return -1;
		if (!demo_check(d,
				state == CMS_STATE_ACTIVE ?
					info.backed_bytes == info.physical_bytes &&
						info.backup_bytes == 0 :
					info.backed_bytes == 0,
				"%s: region %s accounts %" PRIu64 " backed bytes, %" PRIu64
				" backup bytes of %" PRIu64 " physical",
				when, info.tag, info.backed_bytes, info.backup_bytes,
				info.physical_bytes))
			return -1;
		*epoch = info.epoch;
	}
	return 0;
}

static int demo_cycle(struct demo *d, unsigned int c)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_region_info wi = { .struct_size = sizeof(wi) };
	struct demo_cycle *s = &d->stats[c];
	uint64_t before = 0, after = 0, weights_bytes = DEMO_WEIGHTS * d->chunk, diff;
	char when[32], b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32];

	snprintf(when, sizeof(when), "cycle %u", c + 1);
	snprintf(d->step_buf, sizeof(d->step_buf), "%s", when);
	d->step = d->step_buf;

	/* pause */
	DEMO_CMS(d, err, cms_device_memory_info, d->ctx, DEMO_DEVICE, &before, NULL);
	DEMO_CMS(d, err, cms_pause, d->ctx, NULL, NULL, &pr);
	DEMO_CMS(d, err, cms_device_memory_info, d->ctx, DEMO_DEVICE, &after, NULL);
	DEMO_CMS(d, err, cms_region_info_get, d->weights, &wi);
	s->pause_ns = pr.elapsed_ns;
	s->released = pr.bytes_released;
	s->free_delta = (int64_t)(after - before);
	diff = s->free_delta > (int64_t)pr.bytes_released ?
		       (uint64_t)s->free_delta - pr.bytes_released :
		       pr.bytes_released - (uint64_t)s->free_delta;
	s->delta_ok = d->sim ? diff == 0 : diff <= DEMO_GPU_TOLERANCE;
	printf("%s: pause   %8.2f ms  %u regions, %u allocations, released %s, backed up %s;\n"
	       "         driver free %s -> %s (%s); weights' host backup %s (%s pinned)\n",
	       when, (double)pr.elapsed_ns / 1e6, (unsigned int)pr.regions,
	       (unsigned int)pr.allocations, fmtb(b1, sizeof(b1), pr.bytes_released),
	       fmtb(b2, sizeof(b2), pr.bytes_backed_up), fmtb(b3, sizeof(b3), before),
	       fmtb(b4, sizeof(b4), after), fmt_delta(b5, sizeof(b5), s->free_delta),
	       fmtb(b6, sizeof(b6), wi.host_bytes), fmtb(b7, sizeof(b7), wi.pinned_bytes));
	if (!demo_check(d, pr.regions == 2 && pr.allocations == DEMO_ALLOCS,
			"%s: cms_pause paused %" PRIu64 " regions, %" PRIu64
			" allocations (expected 2, %d)",
			when, pr.regions, pr.allocations, DEMO_ALLOCS) ||
	    !demo_check(d, pr.bytes_released == d->physical,
			"%s: cms_pause released %" PRIu64 " bytes, the allocations hold %" PRIu64,
			when, pr.bytes_released, d->physical) ||
	    !demo_check(d, pr.bytes_backed_up == weights_bytes,
			"%s: cms_pause backed up %" PRIu64 " bytes, the weights are %" PRIu64, when,
			pr.bytes_backed_up, weights_bytes) ||
	    !demo_check(d, wi.host_bytes >= weights_bytes && wi.pinned_bytes <= wi.host_bytes,
			"%s: the weights hold %" PRIu64 " bytes of host backup, %" PRIu64
			" page-locked, for %" PRIu64 " bytes",
			when, wi.host_bytes, wi.pinned_bytes, weights_bytes) ||
	    !demo_check(d, s->delta_ok,
			"%s: the driver's free memory changed by %" PRId64 " bytes, but %" PRIu64
			" were released (tolerance %llu)",
			when, s->free_delta, pr.bytes_released,
			d->sim ? 0ull : (unsigned long long)DEMO_GPU_TOLERANCE))
		goto err;
	if (demo_check_regions(d, CMS_STATE_PAUSED, when))
		goto err;

	/* resume */
	DEMO_CMS(d, err, cms_resume, d->ctx, NULL, NULL, &rr);
	s->resume_ns = rr.elapsed_ns;
	printf("%s: resume  %8.2f ms  %u regions, %u allocations, backed %s, restored %s\n", when,
	       (double)rr.elapsed_ns / 1e6, (unsigned int)rr.regions, (unsigned int)rr.allocations,
	       fmtb(b1, sizeof(b1), rr.bytes_backed), fmtb(b2, sizeof(b2), rr.bytes_restored));
	if (!demo_check(d, rr.regions == 2 && rr.allocations == DEMO_ALLOCS,
			"%s: cms_resume resumed %" PRIu64 " regions, %" PRIu64
			" allocations (expected 2, %d)",
			when, rr.regions, rr.allocations, DEMO_ALLOCS) ||
	    !demo_check(d, rr.bytes_backed == d->physical,
			"%s: cms_resume backed %" PRIu64 " bytes, the allocations hold %" PRIu64,
			when, rr.bytes_backed, d->physical) ||
	    !demo_check(d, rr.bytes_restored == weights_bytes,
			"%s: cms_resume restored %" PRIu64 " bytes, the weights are %" PRIu64, when,
			rr.bytes_restored, weights_bytes))
		goto err;
	if (demo_check_regions(d, CMS_STATE_ACTIVE, when))
		goto err;
	printf("%s: %d allocations at their old addresses, epochs weights %" PRIu64
	       " kv_cache %" PRIu64 "\n",
	       when, DEMO_ALLOCS, d->epoch_w, d->epoch_kv);
	if (demo_replay(d, when) || demo_verify_weights(d, when))
		goto err;
	printf("%s: graph captured before the first pause replayed: kv_cache == f(weights) OK, "
	       "weights content OK\n",
	       when);
	d->cycles_done++;
	return 0;
err:
	return -1;
}

/* ---- report and cleanup -------------------------------------------------------- */

static void demo_report(const struct demo *d)
{
	char b1[32], b2[32];
	unsigned int c;

	if (!d->cycles_done)
		return;
	printf("\n%5s %10s %10s %12s %14s  %s\n", "cycle", "pause ms", "resume ms", "released",
	       "driver free", d->sim ? "free == released" : "free ~ released");
	for (c = 0; c < d->cycles_done; c++) {
		const struct demo_cycle *s = &d->stats[c];

		printf("%5u %10.2f %10.2f %12s %14s  %s\n", c + 1, (double)s->pause_ns / 1e6,
		       (double)s->resume_ns / 1e6, fmtb(b1, sizeof(b1), s->released),
		       fmt_delta(b2, sizeof(b2), s->free_delta), s->delta_ok ? "yes" : "NO");
	}
}

/* Sim only: after cleanup nothing may be left alive in the simulated driver. */
static void demo_check_sim_leaks(struct demo *d)
{
	int (*get)(cmssim_counters *) =
		(int (*)(cmssim_counters *))dlsym(d->drv.dl, "cmssim_get_counters");
	cmssim_counters k = CMSSIM_COUNTERS_INIT;

	if (!get || get(&k))
		return;
	demo_check(d,
		   !k.reservations && !k.handles && !k.physical_allocations && !k.mappings &&
			   !k.device_used_bytes[DEMO_DEVICE] && !k.streams && !k.events &&
			   !k.graphs && !k.graph_execs && !k.primary_ctx_refs && !k.host_buffers,
		   "simulation objects left after cleanup: %" PRIu64 " reservations, %" PRIu64
		   " handles, %" PRIu64 " physical, %" PRIu64 " mappings, %" PRIu64
		   " bytes used, %" PRIu64 " streams, %" PRIu64 " events, %" PRIu64
		   " graphs, %" PRIu64 " execs, %" PRIu64 " primary refs, %" PRIu64 " host buffers",
		   k.reservations, k.handles, k.physical_allocations, k.mappings,
		   k.device_used_bytes[DEMO_DEVICE], k.streams, k.events, k.graphs, k.graph_execs,
		   k.primary_ctx_refs, k.host_buffers);
}

#define DEMO_CU_CLEAN(d, fn, ...)                         \
	do {                                              \
		CUresult res_ = (d)->drv.fn(__VA_ARGS__); \
		if (res_ != CUDA_SUCCESS)                 \
			demo_cu_fail((d), res_, #fn);     \
	} while (0)

static void demo_cleanup(struct demo *d)
{
	CUcontext popped;
	cms_status st;

	d->step = "cleanup";
	if (d->exec)
		DEMO_CU_CLEAN(d, cuGraphExecDestroy, d->exec);
	if (d->graph)
		DEMO_CU_CLEAN(d, cuGraphDestroy, d->graph);
	if (d->module)
		DEMO_CU_CLEAN(d, cuModuleUnload, d->module);
	if (d->stream)
		DEMO_CU_CLEAN(d, cuStreamDestroy, d->stream);
	st = cms_region_destroy(d->kv);
	if (st)
		demo_cms_fail(d, st, "cms_region_destroy(kv_cache)");
	st = cms_region_destroy(d->weights);
	if (st)
		demo_cms_fail(d, st, "cms_region_destroy(weights)");
	st = cms_context_destroy(d->ctx);
	if (st)
		demo_cms_fail(d, st, "cms_context_destroy");
	if (d->pushed)
		DEMO_CU_CLEAN(d, cuCtxPopCurrent, &popped);
	if (d->retained)
		DEMO_CU_CLEAN(d, cuDevicePrimaryCtxRelease, d->dev);
	if (d->drv_open) {
		if (d->sim && !d->failed)
			demo_check_sim_leaks(d);
		cms_driver_close(&d->drv);
	}
	free(d->stats);
	free(d->buf);
}

/* ---- the subcommand ----------------------------------------------------------- */

static void demo_usage(FILE *f)
{
	fprintf(f, "usage: cmsctl demo [--size BYTES] [--sim|--gpu] [--cycles N] [--progress]\n"
		   "  -s, --size BYTES   bytes per region, 16 to 1024T; K/M/G/T suffixes, binary\n"
		   "                     (KiB, MB spellings accepted; default 1G on a GPU, 64M\n"
		   "                     on the host simulation)\n"
		   "      --sim          run on the host simulation\n"
		   "      --gpu          run on the real driver (fail if there is no GPU)\n"
		   "  -n, --cycles N     pause/resume cycles (default 3)\n"
		   "      --progress     draw pause/resume progress on stderr (default: only\n"
		   "                     when stderr is a terminal)\n");
}

static int demo_parse(struct demo *d, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "cycles", required_argument, NULL, 'n' },
		{ "sim", no_argument, NULL, 'S' },
		{ "gpu", no_argument, NULL, 'G' },
		{ "progress", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long v;
	char *end;
	int c;

	optind = 0;
	opterr = 0; /* own messages, with the "cmsctl demo:" prefix */
	while ((c = getopt_long(argc, argv, ":s:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (tool_parse_size(optarg, &d->size)) {
				fprintf(stderr,
					"cmsctl demo: bad --size '%s' (e.g. 4096, 64M, 1G, 2GiB, "
					"1T)\n",
					optarg);
				return 2;
			}
			if (d->size < DEMO_MIN_SIZE || d->size > DEMO_MAX_SIZE) {
				fprintf(stderr,
					"cmsctl demo: bad --size '%s': %s (at least %llu bytes, at "
					"most 1024T)\n",
					optarg, d->size < DEMO_MIN_SIZE ? "too small" : "too large",
					(unsigned long long)DEMO_MIN_SIZE);
				return 2;
			}
			d->size_given = true;
			break;
		case 'n':
			v = strtoul(optarg, &end, 10);
			if (!optarg[0] || *end || optarg[0] == '-' || v < 1 ||
			    v > DEMO_MAX_CYCLES) {
				fprintf(stderr, "cmsctl demo: bad --cycles '%s' (1..%u)\n", optarg,
					DEMO_MAX_CYCLES);
				return 2;
			}
			d->cycles = (unsigned int)v;
			break;
		case 'S':
		case 'G':
			if (d->mode != DEMO_AUTO && d->mode != (c == 'S' ? DEMO_SIM : DEMO_GPU)) {
				fprintf(stderr,
					"cmsctl demo: --sim and --gpu exclude each other\n");
				return 2;
			}
			d->mode = c == 'S' ? DEMO_SIM : DEMO_GPU;
			break;
		case 'P':
			d->progress = true;
			break;
		case 'h':
			demo_usage(stdout);
			return 0;
		default:
			tool_bad_option("cmsctl demo", argv, c);
			demo_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cmsctl demo: unexpected argument '%s'\n", argv[optind]);
		demo_usage(stderr);
		return 2;
	}
	return -1; /* go on */
}

int cmsctl_demo(int argc, char **argv)
{
	struct demo *d;
	int rc;

	d = calloc(1, sizeof(*d));
	if (!d) {
		fprintf(stderr, "cmsctl demo: out of memory\n");
		return 1;
	}
	d->cycles = 3;
	d->step = "setup";
	rc = demo_parse(d, argc, argv);
	if (rc >= 0)
		goto out_free;
	/* stdout may be a pipe: keep the lines in order with stderr */
	setvbuf(stdout, NULL, _IOLBF, 0);

	d->stats = calloc(d->cycles, sizeof(*d->stats));
	if (!d->stats) {
		demo_fail(d, "cannot allocate statistics for %u cycles", d->cycles);
		goto out_report;
	}
	if (demo_choose_driver(d) || demo_setup(d))
		goto out_cleanup;
	d->step = "graph capture";
	if (demo_capture(d))
		goto out_cleanup;
	d->step = "first replay";
	if (demo_replay(d, "before any pause"))
		goto out_cleanup;
	printf("graph replayed before any pause: kv_cache == f(weights) OK\n");
	for (unsigned int c = 0; c < d->cycles; c++)
		if (demo_cycle(d, c))
			break;

out_cleanup:
	demo_report(d);
	demo_cleanup(d);
out_report:
	if (d->failed) {
		/* once, on stdout (the verdict line); the details went to stderr */
		printf("demo: FAIL: %s\n", d->failure);
		rc = 1;
	} else {
		printf("demo: PASS (%u checks)\n", d->checks);
		rc = 0;
	}
out_free:
	free(d);
	return rc;
}
