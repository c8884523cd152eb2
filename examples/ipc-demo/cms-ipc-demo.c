/* SPDX-License-Identifier: MIT */
/*
 * cms-ipc-demo - two-or-more-process check of cumemsaver's IPC (docs/ipc.md)
 * on a GPU (or, small, on the host simulation):
 *
 *   the exporter (this process) creates a shareable "weights" region of
 *   --size bytes in --allocs allocations (HOST policy), fills it, publishes it
 *   and starts --importers copies of itself as importers (posix_spawn). Each
 *   importer maps the weights, captures a CUDA graph whose kernels read every
 *   allocation (a window at its start and one at its end) into memory of its
 *   own, and replays it on request, checking every output word. Then, for
 *   --cycles cycles: every importer replays; the exporter pauses (every
 *   importer drops its mappings first) and checks that the driver's free
 *   memory rose by the region's size while the importers are alive; resumes;
 *   every importer is mapped again at the same addresses and its graph,
 *   captured before the first pause, replays with correct results.
 *
 * Timings printed: import (connect + export + transfer + import + map) per
 * importer, pause and resume of the exporter with the importers attached.
 * Exit status 0 only when every check passed.
 *
 *   cms-ipc-demo [--size 4G] [--allocs 4] [--importers 1] [--cycles 3] [--read-only]
 *                [--sim|--gpu]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cumemsaver.h"
#include "driver.h"
#include "kernels.h"
#include "tool_common.h"

extern char **environ;

#define MAX_IMPORTERS 16
#define WINDOW_MAX (32ull << 20) /* bytes read at each end of an allocation */
#define TOLERANCE (8ll << 20)	 /* driver free rise vs bytes released, on a GPU */

static struct cms_driver drv;
static cms_context *ctx;
static CUcontext cuctx;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Word w of allocation i (allocations in address order). */
static inline uint32_t weight(uint64_t i, uint64_t w)
{
	return (uint32_t)(i * 0x9E3779B1u) ^ (uint32_t)(w * 2654435761u) ^ (uint32_t)(w >> 29);
}

static int cu(CUresult res, const char *what)
{
	const char *name = cms_driver_error_name(&drv, res);

	if (res == CUDA_SUCCESS)
		return 0;
	printf("err %s: %s\n", what, name);
	fflush(stdout);
	return -1;
}

static int open_driver(const char *path)
{
	char err[512];
	CUdevice dev;

	if (cms_driver_open(&drv, path, err, sizeof(err))) {
		printf("err driver %s: %s\n", path ? path : "(default)", err);
		return -1;
	}
	if (cu(drv.cuDeviceGet(&dev, 0), "cuDeviceGet") ||
	    cu(drv.cuDevicePrimaryCtxRetain(&cuctx, dev), "cuDevicePrimaryCtxRetain") ||
	    cu(drv.cuCtxPushCurrent(cuctx), "cuCtxPushCurrent"))
		return -1;
	return 0;
}

static int sort_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- importer (a child process; commands on stdin, answers on stdout) ---- */

struct window {
	uint64_t alloc, word, words; /* which allocation, first word, count */
	CUdeviceptr src, dst;
};

static int importer(const char *path)
{
	cms_import_options o = CMS_IMPORT_OPTIONS_INIT;
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	cms_import_info info = { .struct_size = sizeof(info) };
	struct window *win = NULL;
	CUmodule module = NULL;
	CUfunction fn = NULL;
	CUstream stream;
	CUgraph graph;
	CUgraphExec exec;
	cms_import *imp;
	cms_region *out;
	uint64_t nwin = 0, i, total_words = 0, out_ptr, base0;
	uint32_t *host = NULL;
	char line[128];
	double t0, t_open;
	cms_status st;

	o.name = "cms-ipc-demo";
	o.timeout_ms = 120000;
	t0 = now_ms();
	st = cms_import_open(ctx, path, "weights", &o, &imp);
	t_open = now_ms() - t0;
	if (st) {
		printf("err import: %s: %s\n", cms_status_name(st), cms_last_error());
		return 1;
	}
	cms_import_info_get(imp, &info);
	base0 = info.base;
	win = calloc(2 * info.allocations, sizeof(*win));
	if (!win)
		return 1;
	for (i = 0; i < info.allocations; i++) {
		uint64_t p, size, words, ww;

		cms_import_alloc_get(imp, i, &p, &size);
		words = size / 4;
		ww = words < WINDOW_MAX / 4 ? words : WINDOW_MAX / 4;
		win[nwin++] = (struct window){ i, 0, ww, p, 0 };
		if (words > ww)
			win[nwin++] = (struct window){ i, words - ww, ww, p + (words - ww) * 4, 0 };
	}
	for (i = 0; i < nwin; i++)
		total_words += win[i].words;
	ro.policy = CMS_POLICY_DISCARD;
	if ((st = cms_region_create(ctx, "out", &ro, &out)) ||
	    (st = cms_alloc(out, total_words * 4, &out_ptr))) {
		printf("err output: %s\n", cms_last_error());
		return 1;
	}
	for (i = 0, total_words = 0; i < nwin; i++) {
		win[i].dst = out_ptr + total_words * 4;
		total_words += win[i].words;
	}
	host = malloc(total_words * 4);
	if (!host || cu(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
		return 1;
	if (drv.cuModuleLoadData(&module, cms_kernels_ptx) != CUDA_SUCCESS)
		module = NULL; /* the host simulation: device-to-device copies stand in */
	if (module &&
	    cu(drv.cuModuleGetFunction(&fn, module, CMS_KERNEL_AFFINE_NAME), "cuModuleGetFunction"))
		return 1;
	if (cu(drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture"))
		return 1;
	for (i = 0; i < nwin; i++) {
		CUdeviceptr in = win[i].src, dst = win[i].dst;
		uint64_t n = win[i].words;
		void *params[] = { &in, &dst, &n };

		if (module ? cu(drv.cuLaunchKernel(
					fn,
					(unsigned)((n + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK),
					1, 1, CMS_KERNEL_BLOCK, 1, 1, 0, stream, params, NULL),
				"cuLaunchKernel") :
			     cu(drv.cuMemcpyDtoDAsync(dst, in, n * 4, stream), "cuMemcpyDtoDAsync"))
			return 1;
	}
	if (cu(drv.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture") ||
	    cu(drv.cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate"))
		return 1;
	printf("ok ready open_ms=%.3f allocations=%" PRIu64 " bytes=%" PRIu64 " windows=%" PRIu64
	       " kernel=%d\n",
	       t_open, info.allocations, info.bytes, nwin, module != NULL);
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin)) {
		unsigned int want = 0;

		if (!strncmp(line, "replay", 6)) {
			uint64_t k, bad = UINT64_MAX, at = 0;

			if (cu(drv.cuMemsetD32Async(out_ptr, 0xdeadbeef, total_words, stream),
			       "memset") ||
			    cu(drv.cuGraphLaunch(exec, stream), "cuGraphLaunch") ||
			    cu(drv.cuStreamSynchronize(stream), "cuStreamSynchronize") ||
			    cu(drv.cuMemcpyDtoH(host, out_ptr, total_words * 4), "cuMemcpyDtoH"))
				continue;
			for (i = 0; i < nwin && bad == UINT64_MAX; i++) {
				for (k = 0; k < win[i].words; k++) {
					uint32_t w = weight(win[i].alloc, win[i].word + k);

					if (host[at + k] != (module ? w * 2 + 1 : w)) {
						bad = at + k;
						break;
					}
				}
				at += win[i].words;
			}
			cms_import_info_get(imp, &info);
			if (bad != UINT64_MAX)
				printf("err output word %" PRIu64 " wrong\n", bad);
			else if (info.base != base0)
				printf("err base moved\n");
			else
				printf("ok words=%" PRIu64 " epoch=%" PRIu64 "\n", total_words,
				       info.epoch);
		} else if (sscanf(line, "wait %u", &want) == 1) {
			int k;

			for (k = 0; k < 12000; k++) {
				cms_import_info_get(imp, &info);
				if (info.state == want)
					break;
				usleep(5000);
			}
			if (info.state == want)
				printf("ok\n");
			else
				printf("err state %u error %s\n", info.state,
				       cms_status_name(info.error));
		} else if (!strncmp(line, "quit", 4)) {
			break;
		} else {
			printf("err unknown command\n");
		}
		fflush(stdout);
	}
	drv.cuGraphExecDestroy(exec);
	drv.cuGraphDestroy(graph);
	if (module)
		drv.cuModuleUnload(module);
	drv.cuStreamDestroy(stream);
	cms_import_close(imp);
	cms_region_destroy(out);
	free(host);
	free(win);
	return 0;
}

/* ---- exporter ---- */

struct child {
	pid_t pid;
	int in, out;
	char buf[1024];
	size_t have;
};

static int child_line(struct child *c, char *line, size_t len)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->have);
		struct pollfd pf = { c->out, POLLIN, 0 };
		ssize_t n;

		if (nl) {
			size_t k = (size_t)(nl - c->buf);

			snprintf(line, len, "%.*s", (int)k, c->buf);
			memmove(c->buf, nl + 1, c->have - k - 1);
			c->have -= k + 1;
			return 0;
		}
		if (poll(&pf, 1, 300000) != 1)
			return -1;
		n = read(c->out, c->buf + c->have, sizeof(c->buf) - 1 - c->have);
		if (n <= 0)
			return -1;
		c->have += (size_t)n;
	}
}

/* Sends cmd to every importer; each must answer "ok". */
static int all(struct child *ch, int n, const char *cmd, const char *when)
{
	char line[512];
	int i, fails = 0;

	for (i = 0; i < n; i++)
		if (write(ch[i].in, cmd, strlen(cmd)) < 0)
			fails++;
	for (i = 0; i < n; i++) {
		if (child_line(&ch[i], line, sizeof(line)) || strncmp(line, "ok", 2)) {
			printf("FAIL %s: importer %d (pid %d): %s\n", when, i, (int)ch[i].pid,
			       line);
			fails++;
		}
	}
	return fails;
}

static void fill(uint64_t *ptrs, uint64_t n, uint64_t size)
{
	uint64_t chunk = 64ull << 20, i, off, k;
	uint32_t *buf = malloc(chunk);

	for (i = 0; buf && i < n; i++)
		for (off = 0; off < size; off += chunk) {
			uint64_t len = size - off < chunk ? size - off : chunk;

			for (k = 0; k < len / 4; k++)
				buf[k] = weight(i, off / 4 + k);
			cu(drv.cuMemcpyHtoD(ptrs[i] + off, buf, len), "cuMemcpyHtoD");
		}
	free(buf);
}

static int exporter(const char *self, uint64_t size, uint64_t nallocs, int nimp, int cycles,
		    uint32_t access)
{
	cms_region_options ro = CMS_REGION_OPTIONS_INIT;
	struct child ch[MAX_IMPORTERS];
	cms_exporter *exp = NULL;
	cms_region *r;
	uint64_t *ptrs, per, i;
	char path[108], line[512], b1[32], b2[32];
	int fails = 0, c, k;

	per = size / nallocs;
	ptrs = calloc(nallocs, sizeof(*ptrs));
	ro.policy = CMS_POLICY_HOST;
	ro.flags = CMS_REGION_SHAREABLE;
	if (!ptrs || cms_region_create(ctx, "weights", &ro, &r)) {
		printf("FAIL region: %s\n", cms_last_error());
		return 1;
	}
	for (i = 0; i < nallocs; i++)
		if (cms_alloc(r, per, &ptrs[i])) {
			printf("FAIL alloc %" PRIu64 ": %s\n", i, cms_last_error());
			return 1;
		}
	qsort(ptrs, nallocs, sizeof(*ptrs), sort_u64);
	fill(ptrs, nallocs, per);
	snprintf(path, sizeof(path), "/tmp/cms-ipc-demo-%d.sock", (int)getpid());
	if (cms_exporter_create(ctx, path, NULL, &exp) || cms_exporter_publish(exp, r, access)) {
		printf("FAIL export: %s\n", cms_last_error());
		return 1;
	}
	printf("exporter: \"weights\" = %" PRIu64 " allocations x %s = %s, published %s on %s\n",
	       nallocs, tool_format_bytes(b1, sizeof(b1), per),
	       tool_format_bytes(b2, sizeof(b2), per * nallocs),
	       access == CMS_ACCESS_READ ? "read-only" : "read-write", path);
	for (k = 0; k < nimp; k++) {
		char *argv[] = { (char *)self, "--importer", path, NULL };
		posix_spawn_file_actions_t fa;
		int in[2], out[2];

		memset(&ch[k], 0, sizeof(ch[k]));
		if (pipe(in) || pipe(out))
			return 1;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
		posix_spawn_file_actions_addclose(&fa, in[1]);
		posix_spawn_file_actions_addclose(&fa, out[0]);
		if (posix_spawn(&ch[k].pid, self, &fa, NULL, argv, environ))
			return 1;
		posix_spawn_file_actions_destroy(&fa);
		close(in[0]);
		close(out[1]);
		ch[k].in = in[1];
		ch[k].out = out[0];
	}
	for (k = 0; k < nimp; k++) {
		if (child_line(&ch[k], line, sizeof(line)) || strncmp(line, "ok ready", 8)) {
			printf("FAIL importer %d did not start: %s\n", k, line);
			return 1;
		}
		printf("importer %d (pid %d): %s\n", k, (int)ch[k].pid, line + 3);
	}
	fails += all(ch, nimp, "replay\n", "before the first pause");
	printf("\ncycle  importers  pause ms  resume ms  released    driver free   free ~ "
	       "released\n");
	for (c = 1; c <= cycles && !fails; c++) {
		cms_pause_result pr = { .struct_size = sizeof(pr) };
		cms_resume_result rr = { .struct_size = sizeof(rr) };
		cms_status st;
		int64_t rise;
		bool ok;

		st = cms_pause(ctx, "weights", NULL, &pr);
		if (st) {
			printf("FAIL pause: %s: %s\n", cms_status_name(st), cms_last_error());
			fails++;
			break;
		}
		fails += all(ch, nimp, "wait 1\n", "after the pause (REVOKED)");
		rise = (int64_t)(pr.driver_free_after - pr.driver_free_before);
		/* Within 8 MiB of the region's size (as cmsctl demo): an importer still holding
		 * the memory would leave it near 0. */
		ok = llabs(rise - (int64_t)pr.bytes_released) <= (drv.is_sim ? 0 : TOLERANCE) &&
		     pr.bytes_released >= per * nallocs;
		st = cms_resume(ctx, "weights", NULL, &rr);
		if (st) {
			printf("FAIL resume: %s: %s\n", cms_status_name(st), cms_last_error());
			fails++;
			break;
		}
		printf("%5d  %9d  %8.2f  %9.2f  %s  %+13" PRId64 "  %s\n", c, nimp,
		       (double)pr.elapsed_ns / 1e6, (double)rr.elapsed_ns / 1e6,
		       tool_format_bytes(b1, sizeof(b1), pr.bytes_released), rise,
		       ok ? "yes" : "NO");
		if (!ok && !drv.is_sim) /* the simulation's memory is per process */
			fails++;
		fails += all(ch, nimp, "wait 0\n", "after the resume (MAPPED)");
		fails += all(ch, nimp, "replay\n", "graph replay after the resume");
	}
	for (k = 0; k < nimp; k++) {
		int status;

		if (write(ch[k].in, "quit\n", 5) < 0)
			fails++;
		close(ch[k].in);
		waitpid(ch[k].pid, &status, 0);
		close(ch[k].out);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			fails++;
	}
	cms_exporter_destroy(exp);
	cms_region_destroy(r);
	free(ptrs);
	printf("cms-ipc-demo: %s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "allocs", required_argument, NULL, 'a' },
		{ "importers", required_argument, NULL, 'i' },
		{ "cycles", required_argument, NULL, 'c' },
		{ "sim", no_argument, NULL, 'S' },
		{ "gpu", no_argument, NULL, 'G' },
		{ "importer", required_argument, NULL, 'I' },
		{ "read-only", no_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	const char *import_path = NULL, *drv_path = NULL;
	cms_context_options co = CMS_CONTEXT_OPTIONS_INIT;
	uint64_t size = 4ull << 30, nallocs = 4;
	int c, nimp = 1, cycles = 3, rc;
	uint32_t access = CMS_ACCESS_READWRITE;
	char self[4096];
	ssize_t n;

	signal(SIGPIPE, SIG_IGN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (tool_parse_size(optarg, &size))
				return 2;
			break;
		case 'a':
			nallocs = strtoull(optarg, NULL, 10);
			break;
		case 'i':
			nimp = atoi(optarg);
			break;
		case 'c':
			cycles = atoi(optarg);
			break;
		case 'S':
			drv_path = tool_sim_path(NULL);
			if (!drv_path || setenv(CMS_DRIVER_ENV, drv_path, 1))
				return 2;
			break;
		case 'G':
			drv_path = CMS_DRIVER_DEFAULT;
			if (setenv(CMS_DRIVER_ENV, drv_path, 1))
				return 2;
			break;
		case 'I':
			import_path = optarg;
			break;
		case 'R':
			access = CMS_ACCESS_READ;
			break;
		default:
			tool_bad_option("cms-ipc-demo", argv, c);
			return 2;
		}
	}
	if (!nallocs || nimp < 1 || nimp > MAX_IMPORTERS || cycles < 1 || size / nallocs < 4) {
		fprintf(stderr,
			"cms-ipc-demo: bad --allocs, --importers (1-%d), --cycles or "
			"--size\n",
			MAX_IMPORTERS);
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 2;
	self[n] = '\0';
	if (open_driver(drv_path))
		return 1;
	co.driver_path = drv_path;
	if (cms_context_create(&co, &ctx))
		return 1;
	if (import_path) {
		rc = importer(import_path);
	} else {
		int ver = drv.version;

		printf("cms-ipc-demo: cumemsaver %s, %s (driver %d), %d importer%s\n",
		       cms_version_string(), drv.is_sim ? "HOST SIMULATION" : "GPU 0", ver, nimp,
		       nimp == 1 ? "" : "s");
		rc = exporter(self, size, nallocs, nimp, cycles, access);
	}
	cms_context_destroy(ctx);
	return rc;
}
