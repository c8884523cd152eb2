/* SPDX-License-Identifier: MIT */
/*
 * bench_work.c - the workloads of cms-bench: a context and one region per
 * workload, allocations through the library, HOST content written once from
 * the host, then pause/resume cycles timed with CLOCK_MONOTONIC around each
 * call. After every cycle: every allocation at its old address and in the
 * expected state; DISCARD memory writable and readable again; HOST content
 * equal to what was written (a sample at the start, middle and end of each
 * allocation, or all of it with --verify-full). The sample windows are
 * rewritten with a new generation of the pattern after each check, so a
 * library that restored a stale backup fails the next cycle.
 *
 * (f) resumes with CMS_RESUME_ASYNC on a stream of the tool and enqueues
 * cms_affine_u32 (on the simulation, which runs no kernels, a device copy) on
 * that stream right after the call: it reads the start of the last allocation
 * into a scratch allocation of a DISCARD region that is never paused. Timed:
 * the return of the call and the completion of that work (an event on the
 * stream); then the scratch must hold the restored content (through the
 * kernel's function), which proves the stream was ordered after the restore.
 * One synchronous cycle follows, for comparison.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kernels.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

void bench_works_init(struct bench *b)
{
	static const struct {
		const char *what;
		uint32_t policy;
		uint64_t count, size;
		bool implemented;
		int vmm;
	} t[BENCH_NWORK] = {
		/* DISCARD: the handles are the whole cost, so these coalesce (CMS_REGION_COALESCE,
		 * CHUNKS); every other workload runs in the default configuration. */
		{ "32 x 1 GiB DISCARD, COALESCE, CHUNKS", CMS_POLICY_DISCARD, 32, GIB, true,
		  BENCH_VA },
		{ "2048 x 8 MiB DISCARD, COALESCE, CHUNKS", CMS_POLICY_DISCARD, 2048, 8 * MIB, true,
		  BENCH_VB_1G },
		{ "16 x 1 GiB HOST", CMS_POLICY_HOST, 16, GIB, true, -1 },
		{ "2048 x 8 MiB HOST", CMS_POLICY_HOST, 2048, 8 * MIB, true, -1 },
		{ "swap, 16 GiB <-> 16 GiB HOST", CMS_POLICY_HOST, 16, GIB, true, -1 },
		{ "async resume, 16 GiB HOST", CMS_POLICY_HOST, 16, GIB, true, -1 },
		{ "DISK policy, 8 x 1 GiB", CMS_POLICY_DISK, 8, GIB, true, -1 },
		/* (a) with CMS_REGION_GUARD: what guarding the paused ranges costs */
		{ "32 x 1 GiB DISCARD, COALESCE, CHUNKS, GUARD", CMS_POLICY_DISCARD, 32, GIB, true,
		  BENCH_VA },
		/* (c) giving host memory back after each resume: no buffer kept between cycles */
		{ "16 x 1 GiB HOST, RELEASE_HOST", CMS_POLICY_HOST, 16, GIB, true, -1 },
		/* (i) with pageable backups (copies through page-locked staging) */
		{ "16 x 1 GiB HOST, PAGEABLE, RELEASE_HOST", CMS_POLICY_HOST, 16, GIB, true, -1 },
		/* non-retaining pauses of 256 MiB .. 16 GiB against their floor (bench_nonret.c) */
		{ "RELEASE_HOST sweep, 256 MiB-16 GiB live: model pool, 1 GiB allocs",
		  CMS_POLICY_HOST, 0, 0, true, -1 },
		/* (c) with backups prepared ahead in the background: the first pause only copies */
		{ "16 x 1 GiB HOST, PREPARE", CMS_POLICY_HOST, 16, GIB, true, -1 },
		/* (c) and (d) with verified backups: what the checksums cost */
		{ "16 x 1 GiB HOST, VERIFY", CMS_POLICY_HOST, 16, GIB, true, -1 },
		{ "2048 x 8 MiB HOST, VERIFY", CMS_POLICY_HOST, 2048, 8 * MIB, true, -1 },
		/* (c) frozen: pauses that copy nothing, against DISCARD and the release floor */
		{ "16 x 1 GiB HOST, frozen", CMS_POLICY_HOST, 16, GIB, true, BENCH_VB_1G },
	};
	static const struct {
		const char *label;
		uint64_t count, size;
	} v[BENCH_NVMM] = {
		{ "a", 32, GIB },
		{ "b-1g", 16, GIB },
		{ "b-alloc", 2048, 8 * MIB },
	};
	int i;

	for (i = 0; i < BENCH_NWORK; i++) {
		struct bench_work *w = &b->work[i];

		w->id = (char)('a' + i);
		w->what = t[i].what;
		w->policy = t[i].policy;
		w->flags = w->policy == CMS_POLICY_DISCARD ?
				   CMS_REGION_COALESCE | CMS_REGION_CHUNKS :
				   0;
		if (i == BENCH_WH)
			w->flags |= CMS_REGION_GUARD;
		if (i == BENCH_WI || i == BENCH_WJ || i == BENCH_WK)
			w->flags |= CMS_REGION_RELEASE_HOST;
		if (i == BENCH_WJ)
			w->flags |= CMS_REGION_HOST_PAGEABLE;
		if (i == BENCH_WL)
			w->flags |= CMS_REGION_PREPARE;
		if (i == BENCH_WM || i == BENCH_WN)
			w->flags |= CMS_REGION_VERIFY;
		w->count0 = t[i].count;
		w->size0 = t[i].size;
		w->implemented = t[i].implemented;
		w->vmm_floor = t[i].vmm;
		w->async = i == BENCH_WF;
		w->selected = true;
	}
	for (i = 0; i < BENCH_NVMM; i++) {
		b->vmm[i].label = v[i].label;
		b->vmm[i].count = v[i].count;
		b->vmm[i].size = v[i].size;
	}
}

/* HOST: checks generation cycle, then writes generation cycle + 1 into the windows. */
static int bench_verify_host(struct bench *b, struct bench_work *w, const uint64_t *ptr,
			     unsigned int cycle)
{
	return bench_host_verify(b, w, ptr, 0, cycle, cycle);
}

/* DISCARD: the memory is mapped read-write again: write and read back its last word. */
static int bench_probe_discard(struct bench *b, struct bench_work *w, const uint64_t *ptr,
			       unsigned int cycle)
{
	uint64_t i, v, got;

	for (i = 0; i < w->count; i++) {
		v = bench_host_seed(i, cycle + 1000);
		got = ~v;
		BENCH_CU(b, err, cuMemcpyHtoD, ptr[i] + w->size - 8, &v, 8);
		BENCH_CU(b, err, cuMemcpyDtoH, &got, ptr[i] + w->size - 8, 8);
		if (!bench_check(b, got == v,
				 "(%c) cycle %u: allocation %" PRIu64 " at 0x%" PRIx64
				 " reads back 0x%016" PRIx64 " after writing 0x%016" PRIx64,
				 w->id, cycle + 1, i, ptr[i], got, v))
			return -1;
	}
	return 0;
err:
	return -1;
}

/* (f): what the tool enqueues after an async resume, and where it writes. */
struct bench_async {
	CUmodule module;
	CUfunction fn; /* cms_affine_u32; NULL on the simulation: cuMemcpyDtoDAsync instead */
	CUstream stream;
	CUevent event;
	bool stream_made;
	bool event_made;
	cms_region *scratch_region; /* DISCARD, never paused */
	uint64_t scratch;
};

/* Where a cycle's times go. */
struct bench_slot {
	uint64_t *pause_ns;
	uint64_t *resume_ns;
	uint64_t *ready_ns;	/* async only */
	struct bench_async *as; /* non-NULL: resume with CMS_RESUME_ASYNC on as->stream */
	bool extra;		/* (f)'s synchronous comparison cycle: not counted */
	uint64_t *rss[3];	/* VmRSS before the pause, after it, after the resume; or NULL */
};

static uint64_t bench_affine64(uint64_t v)
{
	uint32_t lo = (uint32_t)v * 2u + 1u, hi = (uint32_t)(v >> 32) * 2u + 1u;

	return (uint64_t)hi << 32 | lo;
}

/* cms_affine_u32 (or a copy) from the start of src into the scratch, then an event, on as->stream.
 */
static int bench_enqueue_probe(struct bench *b, struct bench_work *w, struct bench_async *as,
			       uint64_t src)
{
	CUdeviceptr in = src, out = as->scratch;
	uint64_t n = w->probe / 4;

	if (as->fn) {
		void *params[] = { &in, &out, &n };
		unsigned int grid = (unsigned int)((n + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK);

		BENCH_CU(b, err, cuLaunchKernel, as->fn, grid, 1, 1, CMS_KERNEL_BLOCK, 1, 1, 0,
			 as->stream, params, NULL);
	} else {
		BENCH_CU(b, err, cuMemcpyDtoDAsync, out, in, (size_t)w->probe, as->stream);
	}
	BENCH_CU(b, err, cuEventRecord, as->event, as->stream);
	return 0;
err:
	return -1;
}

/* The scratch holds f(content) of the start of the last allocation, generation gen. */
static int bench_verify_probe(struct bench *b, struct bench_work *w, const struct bench_async *as,
			      const uint64_t *ptr, unsigned int cycle)
{
	uint64_t i = w->count - 1, k;

	BENCH_CU(b, err, cuMemcpyDtoH, b->stage, as->scratch, (size_t)w->probe);
	for (k = 0; k < w->probe / 8; k++) {
		uint64_t o = k * 8;
		uint64_t want = bench_host_expected(w, i, o, cycle);

		if (as->fn)
			want = bench_affine64(want);
		if (b->stage[k] != want) {
			bench_fail(b,
				   "(%c) cycle %u: %s on the resume stream read allocation %" PRIu64
				   " at 0x%" PRIx64 " before its content was restored: scratch "
				   "word at byte %" PRIu64 " is 0x%016" PRIx64
				   ", expected 0x%016" PRIx64,
				   w->id, cycle + 1, as->fn ? CMS_KERNEL_AFFINE_NAME : "the copy",
				   i, ptr[i], o, b->stage[k], want);
			return -1;
		}
	}
	b->checks++;
	return 0;
err:
	return -1;
}

static int bench_cycle(struct bench *b, struct bench_work *w, cms_context *ctx, cms_region *region,
		       const uint64_t *ptr, unsigned int c, const struct bench_slot *sl)
{
	cms_resume_options ropts = CMS_RESUME_OPTIONS_INIT;
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_region_info info = { .struct_size = sizeof(info) };
	bool host = w->policy == CMS_POLICY_HOST;
	struct bench_async *as = sl->as;
	uint64_t t0, t1, t2, retained;
	cms_status st;
	char line[160] = "";

	if (sl->extra)
		snprintf(b->step, sizeof(b->step), "(%c) synchronous cycle", w->id);
	else
		snprintf(b->step, sizeof(b->step), "(%c) cycle %u", w->id, c + 1);
	if (as) { /* the work after the resume must write the scratch to pass */
		memset(b->stage, 0, (size_t)w->probe);
		BENCH_CU(b, err, cuMemcpyHtoD, as->scratch, b->stage, (size_t)w->probe);
	}
	if (sl->rss[0])
		*sl->rss[0] = bench_proc_status("VmRSS");
	/* Bytes freed members and chunk tails hold (CMS_REGION_COALESCE): the pause releases
	 * them with their handle. */
	st = cms_region_info_get(region, &info);
	if (st)
		return bench_cms_fail(b, st, "cms_region_info_get");
	retained = info.retained_bytes;
	t0 = bench_now_ns();
	st = cms_region_pause(region, NULL, &pr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_region_pause");
	*sl->pause_ns = t1 - t0;
	if (sl->rss[1])
		*sl->rss[1] = bench_proc_status("VmRSS");
	if (c == 0) {
		w->rss_after_pause = bench_proc_status("VmRSS");
		w->bytes_backed_up = pr.bytes_backed_up;
		st = cms_region_info_get(region, &info);
		if (st)
			return bench_cms_fail(b, st, "cms_region_info_get");
		w->backup_after_pause = info.backup_bytes;
		w->pinned_after_pause = info.pinned_bytes;
	}
	if (!bench_check(b,
			 pr.allocations == w->count && pr.bytes_released == w->physical + retained,
			 "(%c) cycle %u: cms_region_pause paused %" PRIu64
			 " allocations and released %" PRIu64 " bytes (expected %" PRIu64
			 ", %" PRIu64 " + %" PRIu64 " retained)",
			 w->id, c + 1, pr.allocations, pr.bytes_released, w->count, w->physical,
			 retained) ||
	    bench_check_addresses(b, w, ctx, region, ptr, CMS_STATE_PAUSED, "after pause", c))
		return -1;

	if (as && !as->stream_made) { /* the caller's stream, made once */
		BENCH_CU(b, err, cuStreamCreate, &as->stream, CU_STREAM_NON_BLOCKING);
		as->stream_made = true;
		BENCH_CU(b, err, cuEventCreate, &as->event, CU_EVENT_DISABLE_TIMING);
		as->event_made = true;
	}
	if (as) {
		ropts.flags = CMS_RESUME_ASYNC;
		ropts.stream = (uint64_t)(uintptr_t)as->stream;
	}
	bench_gap(b);
	t0 = bench_now_ns();
	st = cms_region_resume(region, &ropts, &rr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_region_resume");
	*sl->resume_ns = t1 - t0;
	if (sl->rss[2])
		*sl->rss[2] = bench_proc_status("VmRSS");
	if (as) {
		if (bench_enqueue_probe(b, w, as, ptr[w->count - 1]))
			return -1;
		/* queued: the GPU works on while the tool looks (microseconds) */
		st = cms_region_info_get(region, &info);
		if (st)
			return bench_cms_fail(b, st, "cms_region_info_get");
		w->pending_seen += info.restore_pending != 0;
		BENCH_CU(b, err, cuEventSynchronize, as->event);
		t2 = bench_now_ns();
		*sl->ready_ns = t2 - t0;
	}
	st = cms_region_info_get(region, &info);
	if (st)
		return bench_cms_fail(b, st, "cms_region_info_get");
	if (!bench_check(b,
			 rr.allocations == w->count && info.epoch == c + 1u &&
				 info.backed_bytes == w->physical,
			 "(%c) cycle %u: cms_region_resume resumed %" PRIu64
			 " allocations (expected %" PRIu64 "); the region has epoch %" PRIu64
			 " (expected %u) and %" PRIu64 " of %" PRIu64 " bytes backed",
			 w->id, c + 1, rr.allocations, w->count, info.epoch, c + 1,
			 info.backed_bytes, w->physical) ||
	    !bench_check(b, !info.restore_pending,
			 "(%c) cycle %u: restore_pending is still 1 after work ordered after the "
			 "restore has completed",
			 w->id, c + 1) ||
	    bench_check_addresses(b, w, ctx, region, ptr, CMS_STATE_ACTIVE, "after resume", c))
		return -1;
	if (as && bench_verify_probe(b, w, as, ptr, c))
		return -1;
	if (host ? bench_verify_host(b, w, ptr, c) : bench_probe_discard(b, w, ptr, c))
		return -1;
	if (sl->extra) {
		printf("  synchronous cycle (resume without CMS_RESUME_ASYNC): pause %10.3f ms, "
		       "resume %10.3f ms  (%.2f / %.2f GB/s), addresses and sampled content OK\n",
		       (double)*sl->pause_ns / 1e6, (double)*sl->resume_ns / 1e6,
		       (double)w->logical / (double)*sl->pause_ns,
		       (double)w->logical / (double)*sl->resume_ns);
		return 0;
	}
	w->cycles_done++;
	if (as) {
		printf("  cycle %u: pause %10.3f ms (%.2f GB/s), resume returned in %8.3f ms, %s "
		       "done %10.3f ms after the call (%.2f GB/s), addresses, %s output and "
		       "sampled content OK\n",
		       c + 1, (double)*sl->pause_ns / 1e6,
		       (double)w->logical / (double)*sl->pause_ns, (double)*sl->resume_ns / 1e6,
		       as->fn ? "kernel" : "copy", (double)*sl->ready_ns / 1e6,
		       (double)w->logical / (double)*sl->ready_ns, as->fn ? "kernel" : "copy");
		return 0;
	}
	if (host && sl->rss[0])
		snprintf(line, sizeof(line), "  (%.2f / %.2f GB/s; VmRSS %.2f -> %.2f -> %.2f GiB)",
			 (double)w->logical / (double)*sl->pause_ns,
			 (double)w->logical / (double)*sl->resume_ns,
			 (double)*sl->rss[0] / (double)GIB, (double)*sl->rss[1] / (double)GIB,
			 (double)*sl->rss[2] / (double)GIB);
	else if (host)
		snprintf(line, sizeof(line), "  (%.2f / %.2f GB/s)",
			 (double)w->logical / (double)*sl->pause_ns,
			 (double)w->logical / (double)*sl->resume_ns);
	printf("  cycle %u: pause %10.3f ms, resume %10.3f ms%s, %s OK\n", c + 1,
	       (double)*sl->pause_ns / 1e6, (double)*sl->resume_ns / 1e6, line,
	       host ? (b->verify_full ? "addresses and all content" :
					"addresses and sampled content") :
		      "addresses and access");
	return 0;
err:
	return -1;
}

/* (f): the scratch region and allocation, the kernel (if the driver runs kernels). */
static int bench_async_setup(struct bench *b, struct bench_work *w, cms_context *ctx,
			     struct bench_async *as)
{
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	char tag[24], b1[32];
	CUresult res;

	w->probe = w->size < MIB ? w->size & ~7ull : MIB;
	ropts.device = BENCH_DEVICE;
	ropts.policy = CMS_POLICY_DISCARD;
	snprintf(tag, sizeof(tag), "bench_%c_scratch", w->id);
	BENCH_CMS(b, err, cms_region_create, ctx, tag, &ropts, &as->scratch_region);
	BENCH_CMS(b, err, cms_alloc, as->scratch_region, w->probe, &as->scratch);
	res = b->drv.cuModuleLoadData(&as->module, cms_kernels_ptx);
	if (res == CUDA_SUCCESS) {
		BENCH_CU(b, err, cuModuleGetFunction, &as->fn, as->module, CMS_KERNEL_AFFINE_NAME);
	} else if (res == CUDA_ERROR_NOT_SUPPORTED) {
		as->module = NULL;
		as->fn = NULL;
	} else {
		bench_cu_fail(b, res, "cuModuleLoadData (cms_affine_u32 PTX)");
		goto err;
	}
	w->kernel = as->fn != NULL;
	printf("  resume with CMS_RESUME_ASYNC on a stream of the tool, then %s on that stream "
	       "reads the first %s of allocation %" PRIu64 " into a scratch allocation (DISCARD "
	       "region, never paused); timed until an event recorded after it completes\n",
	       as->fn ? CMS_KERNEL_AFFINE_NAME " (out = in * 2 + 1)" :
			"cuMemcpyDtoDAsync (the simulation runs no kernels)",
	       bench_fmt_bytes(b1, sizeof(b1), w->probe), w->count - 1);
	return 0;
err:
	return -1;
}

/* (f): waits for the stream and gives back what the tool made. Returns -1 if a call failed. */
static int bench_async_cleanup(struct bench *b, struct bench_work *w, struct bench_async *as)
{
	CUresult res;
	int rc = 0;

	snprintf(b->step, sizeof(b->step), "(%c) cleanup", w->id);
	if (as->stream_made) {
		res = b->drv.cuStreamSynchronize(as->stream);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cuStreamSynchronize");
	}
	if (as->event_made) {
		res = b->drv.cuEventDestroy(as->event);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cuEventDestroy");
	}
	if (as->stream_made) {
		res = b->drv.cuStreamDestroy(as->stream);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cuStreamDestroy");
	}
	if (as->module) {
		res = b->drv.cuModuleUnload(as->module);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cuModuleUnload");
	}
	return rc;
}

int bench_work_run(struct bench *b, struct bench_work *w)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	bool host = w->policy == CMS_POLICY_HOST;
	cms_context *ctx = NULL;
	cms_region *region = NULL;
	struct bench_async as;
	struct bench_load load = { 0 };
	struct bench_slot sl;
	uint64_t *ptr = NULL, i, t0, need, avail, slowest = 0;
	char tag[16], what[64], b1[32], b2[32], b3[32];
	size_t fr = 0, tot = 0;
	unsigned int c;
	cms_status st;
	int rc = -1;

	memset(&as, 0, sizeof(as));
	w->ran = true;
	bench_scale(b, w->count0, w->size0, &w->count, &w->size);
	printf("\n(%c) %" PRIu64 " x %s %s, %s (%s at --scale 1%s)\n", w->id, w->count,
	       bench_fmt_bytes(b1, sizeof(b1), w->size), host ? "HOST" : "DISCARD",
	       bench_fmt_bytes(b2, sizeof(b2), w->count * w->size), w->what,
	       bench_coalesce_note(w));
	snprintf(what, sizeof(what), "workload (%c)", w->id);
	snprintf(b->step, sizeof(b->step), "%s", what);

	/* room: device memory, and host RAM for the backup (and, simulated, the device) */
	need = w->count * w->size;
	BENCH_CU(b, fail, cuMemGetInfo, &fr, &tot);
	avail = bench_mem_available();
	if (need > fr) {
		bench_fail(b, "%s needs %s of device memory, %s is free; use a larger --scale",
			   what, bench_fmt_bytes(b1, sizeof(b1), need),
			   bench_fmt_bytes(b2, sizeof(b2), fr));
		goto fail;
	}
	need = (host ? need : 0) + (b->sim ? need : 0) + BENCH_STAGE_BYTES;
	if (avail && need > avail) {
		bench_fail(b,
			   "%s needs about %s of host RAM, %s is available; use a larger --scale",
			   what, bench_fmt_bytes(b1, sizeof(b1), need),
			   bench_fmt_bytes(b2, sizeof(b2), avail));
		goto fail;
	}
	w->pause_ns = calloc(b->cycles, sizeof(*w->pause_ns));
	w->resume_ns = calloc(b->cycles, sizeof(*w->resume_ns));
	ptr = calloc(w->count, sizeof(*ptr));
	for (i = 0; i < 3; i++)
		w->rss_ns[i] = calloc(b->cycles, sizeof(*w->rss_ns[i]));
	if (w->async)
		w->ready_ns = calloc(b->cycles, sizeof(*w->ready_ns));
	if (!w->pause_ns || !w->resume_ns || !ptr || (w->async && !w->ready_ns) || !w->rss_ns[0] ||
	    !w->rss_ns[1] || !w->rss_ns[2]) {
		bench_fail(b, "%s: out of host memory", what);
		goto fail;
	}

	w->hwm_reset = bench_reset_hwm();
	w->hwm_before = bench_proc_status("VmHWM");
	copts.driver_path = b->drv_path; /* the library the tool loaded */
	BENCH_CMS(b, fail, cms_context_create, &copts, &ctx);
	ropts.device = BENCH_DEVICE;
	ropts.policy = w->policy;
	ropts.flags = w->flags;
	snprintf(tag, sizeof(tag), "bench_%c", w->id);
	BENCH_CMS(b, fail, cms_region_create, ctx, tag, &ropts, &region);
	if ((w->flags & CMS_REGION_PREPARE) && bench_prepare_before(b, w, ctx, &load))
		goto fail;
	t0 = bench_now_ns();
	for (i = 0; i < w->count; i++)
		BENCH_CMS(b, fail, cms_alloc, region, w->size, &ptr[i]);
	if ((w->flags & CMS_REGION_PREPARE) && bench_prepare_wait(b, w, region, &load, t0))
		goto fail;
	BENCH_CMS(b, fail, cms_region_info_get, region, &info);
	w->logical = info.logical_bytes;
	w->physical = info.physical_bytes;
	w->region_flags = info.flags;
	if (!bench_check(b, info.allocations == w->count && w->logical == w->count * w->size,
			 "(%c) the region holds %" PRIu64 " allocations, %" PRIu64
			 " bytes after %" PRIu64 " allocations of %" PRIu64,
			 w->id, info.allocations, w->logical, w->count, w->size))
		goto fail;
	/* Before the first pause too: each allocation at its address, read-write (a
	 * CMS_REGION_COALESCE region carves them from shared handles; "cycle 0"). */
	if (bench_check_addresses(b, w, ctx, region, ptr, CMS_STATE_ACTIVE, "after cms_alloc",
				  UINT_MAX) ||
	    (!host && bench_probe_discard(b, w, ptr, UINT_MAX)))
		goto fail;
	if (host) {
		bench_choose_window(b, w);
		t0 = bench_now_ns();
		if (bench_host_fill(b, w, ptr, 0))
			goto fail;
		w->fill_s = (double)(bench_now_ns() - t0) / 1e9;
		printf("  filled %s from the host with cuMemcpyHtoD in %.2f s; checking %s at the "
		       "start, middle and end of each allocation%s\n",
		       bench_fmt_bytes(b1, sizeof(b1), w->logical), w->fill_s,
		       bench_fmt_bytes(b3, sizeof(b3), w->window),
		       b->verify_full ? " and all of it (--verify-full)" : "");
	}

	if (w->async && bench_async_setup(b, w, ctx, &as))
		goto fail;

	for (c = 0; c < b->cycles; c++) {
		sl.pause_ns = &w->pause_ns[c];
		sl.resume_ns = &w->resume_ns[c];
		sl.ready_ns = w->async ? &w->ready_ns[c] : NULL;
		sl.as = w->async ? &as : NULL;
		sl.extra = false;
		for (i = 0; i < 3; i++)
			sl.rss[i] = &w->rss_ns[i][c];
		if (bench_cycle(b, w, ctx, region, ptr, c, &sl))
			goto fail;
		t0 = w->pause_ns[c] + (w->async ? w->ready_ns[c] : w->resume_ns[c]);
		if (t0 > slowest)
			slowest = t0;
		if (c == 1 && c + 1 < b->cycles && slowest > BENCH_SLOW_CYCLE_NS) {
			w->truncated = true;
			snprintf(w->note, sizeof(w->note),
				 "stopped after 2 cycles: a cycle took %.1f s (> %.0f s)",
				 (double)slowest / 1e9, (double)BENCH_SLOW_CYCLE_NS / 1e9);
			printf("  %s\n", w->note);
			break;
		}
	}
	if (w->async) { /* the same region, resumed without the flag, for comparison */
		sl.pause_ns = &w->sync_pause_ns;
		sl.resume_ns = &w->sync_resume_ns;
		sl.ready_ns = NULL;
		sl.as = NULL;
		sl.extra = true;
		sl.rss[0] = sl.rss[1] = sl.rss[2] = NULL;
		if (bench_cycle(b, w, ctx, region, ptr, w->cycles_done, &sl))
			goto fail;
		w->sync_done = true;
	}
	if (w->flags & CMS_REGION_VERIFY) {
		cms_region_stats rs = { .struct_size = sizeof(rs) };

		BENCH_CMS(b, fail, cms_region_stats_get, region, &rs);
		w->bytes_verified = rs.bytes_verified;
		w->verify_ns = rs.verify_ns;
	}
	rc = 0;
	goto out;

fail:
	w->failed = true;
	if (!w->note[0])
		snprintf(w->note, sizeof(w->note), "FAILED: %s", b->last_failure);
out:
	w->hwm_after = bench_proc_status("VmHWM");
	bench_prepare_end(b, &load);
	if (w->async && bench_async_cleanup(b, w, &as)) {
		w->failed = true;
		rc = -1;
	}
	/* frees every allocation and the region */
	st = cms_context_destroy(ctx);
	if (st) {
		bench_cms_fail(b, st, "cms_context_destroy");
		w->failed = true;
		rc = -1;
	}
	free(ptr);
	return rc;
}
