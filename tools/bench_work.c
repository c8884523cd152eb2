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
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

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
		{ "32 x 1 GiB DISCARD", CMS_POLICY_DISCARD, 32, GIB, true, BENCH_VA },
		{ "2048 x 8 MiB DISCARD", CMS_POLICY_DISCARD, 2048, 8 * MIB, true, BENCH_VB_1G },
		{ "16 x 1 GiB HOST", CMS_POLICY_HOST, 16, GIB, true, -1 },
		{ "2048 x 8 MiB HOST", CMS_POLICY_HOST, 2048, 8 * MIB, true, -1 },
		{ "swap, 16 GiB <-> 16 GiB HOST", CMS_POLICY_HOST, 16, GIB, false, -1 },
		{ "async resume, 16 GiB HOST", CMS_POLICY_HOST, 16, GIB, false, -1 },
		{ "DISK policy, 8 GiB", CMS_POLICY_HOST, 8, GIB, false, -1 },
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
		w->count0 = t[i].count;
		w->size0 = t[i].size;
		w->implemented = t[i].implemented;
		w->vmm_floor = t[i].vmm;
		w->selected = true;
	}
	for (i = 0; i < BENCH_NVMM; i++) {
		b->vmm[i].label = v[i].label;
		b->vmm[i].count = v[i].count;
		b->vmm[i].size = v[i].size;
	}
}

/* ---- the pattern: 64-bit words, per allocation and generation ------------------ */

static uint64_t bench_seed(uint64_t alloc, uint64_t gen)
{
	uint64_t z = alloc * 0x9E3779B97F4A7C15ull + (gen + 1) * 0xD1B54A32D192ED03ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline uint64_t bench_word(uint64_t seed, uint64_t byte_off)
{
	return seed ^ ((byte_off >> 3) * 0x9E3779B97F4A7C15ull);
}

/* The three sample windows of an allocation: start, middle, end. */
static void bench_windows(const struct bench_work *w, uint64_t off[3])
{
	off[0] = 0;
	off[1] = (w->size / 2 - w->window / 2) & ~7ull;
	off[2] = w->size - w->window;
}

/* Generation of the word at byte offset o: gen inside a window, 0 elsewhere. */
static uint64_t bench_gen_at(const struct bench_work *w, const uint64_t win[3], uint64_t o,
			     uint64_t gen)
{
	for (int k = 0; k < 3; k++)
		if (o >= win[k] && o < win[k] + w->window)
			return gen;
	return 0;
}

static void bench_choose_window(const struct bench *b, struct bench_work *w)
{
	uint64_t budget = BENCH_SAMPLE_BUDGET / b->scale, win, small;

	if (budget < 4 * MIB)
		budget = 4 * MIB;
	win = w->size / 4 < BENCH_SAMPLE_MAX_WINDOW ? w->size / 4 : BENCH_SAMPLE_MAX_WINDOW;
	if (w->count * 3 * win > budget)
		win = budget / (3 * w->count);
	win &= ~(BENCH_SAMPLE_MIN_WINDOW - 1);
	small = w->size / 4 < BENCH_SAMPLE_MIN_WINDOW ? w->size / 4 : BENCH_SAMPLE_MIN_WINDOW;
	if (win < small)
		win = small;
	w->window = win & ~7ull;
	if (!w->window)
		w->window = 8;
}

/* Writes generation gen into [off, off + len) of allocation i (len a multiple of 8). */
static int bench_write(struct bench *b, uint64_t ptr, uint64_t i, uint64_t off, uint64_t len,
		       uint64_t gen)
{
	uint64_t seed = bench_seed(i, gen), done, n, k;

	for (done = 0; done < len; done += n) {
		n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		for (k = 0; k < n / 8; k++)
			b->stage[k] = bench_word(seed, off + done + k * 8);
		BENCH_CU(b, err, cuMemcpyHtoD, ptr + off + done, b->stage, n);
	}
	return 0;
err:
	return -1;
}

/* Checks [off, off + len) of allocation i against the pattern (windows at gen). */
static int bench_compare(struct bench *b, const struct bench_work *w, uint64_t ptr, uint64_t i,
			 uint64_t off, uint64_t len, uint64_t gen, unsigned int cycle)
{
	uint64_t seed0 = bench_seed(i, 0), seedg = bench_seed(i, gen), win[3], done, n, k;

	bench_windows(w, win);
	for (done = 0; done < len; done += n) {
		n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		BENCH_CU(b, err, cuMemcpyDtoH, b->stage, ptr + off + done, n);
		for (k = 0; k < n / 8; k++) {
			uint64_t o = off + done + k * 8;
			uint64_t g = bench_gen_at(w, win, o, gen);
			uint64_t want = bench_word(g ? seedg : seed0, o);

			if (b->stage[k] != want) {
				bench_fail(b,
					   "(%c) cycle %u: allocation %" PRIu64 " at 0x%" PRIx64
					   ": byte offset %" PRIu64 " reads 0x%016" PRIx64
					   ", expected 0x%016" PRIx64 " (generation %" PRIu64
					   "): content lost",
					   w->id, cycle + 1, i, ptr, o, b->stage[k], want, g);
				return -1;
			}
		}
	}
	return 0;
err:
	return -1;
}

/* HOST: checks generation gen, then writes generation gen + 1 into the windows. */
static int bench_verify_host(struct bench *b, struct bench_work *w, const uint64_t *ptr,
			     unsigned int cycle)
{
	uint64_t win[3], i, gen = cycle;
	int k;

	bench_windows(w, win);
	for (i = 0; i < w->count; i++) {
		if (b->verify_full) {
			if (bench_compare(b, w, ptr[i], i, 0, w->size, gen, cycle))
				return -1;
		} else {
			for (k = 0; k < 3; k++)
				if (bench_compare(b, w, ptr[i], i, win[k], w->window, gen, cycle))
					return -1;
		}
		for (k = 0; k < 3; k++)
			if (bench_write(b, ptr[i], i, win[k], w->window, gen + 1))
				return -1;
	}
	b->checks++;
	return 0;
}

/* DISCARD: the memory is mapped read-write again: write and read back its last word. */
static int bench_probe_discard(struct bench *b, struct bench_work *w, const uint64_t *ptr,
			       unsigned int cycle)
{
	uint64_t i, v, got;

	for (i = 0; i < w->count; i++) {
		v = bench_seed(i, cycle + 1000);
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

/* Every allocation at its address, with its size, in state. */
static int bench_check_addresses(struct bench *b, struct bench_work *w, cms_context *ctx,
				 cms_region *region, const uint64_t *ptr, uint32_t state,
				 const char *when, unsigned int cycle)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	cms_status st;
	uint64_t i;

	for (i = 0; i < w->count; i++) {
		st = cms_pointer_info_get(ctx, ptr[i], &pi);
		if (st)
			return bench_cms_fail(b, st, "cms_pointer_info_get");
		if (!bench_check(b,
				 pi.base == ptr[i] && pi.size == w->size && pi.offset == 0 &&
					 pi.region == region && pi.state == state,
				 "(%c) cycle %u, %s: allocation %" PRIu64 " at 0x%" PRIx64
				 " is now base 0x%" PRIx64 ", %" PRIu64 " bytes, state %u",
				 w->id, cycle + 1, when, i, ptr[i], pi.base, pi.size, pi.state))
			return -1;
	}
	return 0;
}

static int bench_cycle(struct bench *b, struct bench_work *w, cms_context *ctx, cms_region *region,
		       const uint64_t *ptr, unsigned int c)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_region_info info = { .struct_size = sizeof(info) };
	bool host = w->policy == CMS_POLICY_HOST;
	uint64_t t0, t1;
	cms_status st;
	char line[128] = "";

	snprintf(b->step, sizeof(b->step), "(%c) cycle %u", w->id, c + 1);
	t0 = bench_now_ns();
	st = cms_region_pause(region, NULL, &pr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_region_pause");
	w->pause_ns[c] = t1 - t0;
	if (c == 0) {
		w->rss_after_pause = bench_proc_status("VmRSS");
		w->pin_after_pause = bench_proc_status("VmPin");
		w->bytes_backed_up = pr.bytes_backed_up;
		st = cms_region_info_get(region, &info);
		if (st)
			return bench_cms_fail(b, st, "cms_region_info_get");
		w->backup_after_pause = info.backup_bytes;
	}
	if (!bench_check(b, pr.allocations == w->count && pr.bytes_released == w->physical,
			 "(%c) cycle %u: cms_region_pause paused %" PRIu64
			 " allocations and released %" PRIu64 " bytes (expected %" PRIu64
			 ", %" PRIu64 ")",
			 w->id, c + 1, pr.allocations, pr.bytes_released, w->count, w->physical) ||
	    bench_check_addresses(b, w, ctx, region, ptr, CMS_STATE_PAUSED, "after pause", c))
		return -1;

	t0 = bench_now_ns();
	st = cms_region_resume(region, NULL, &rr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_region_resume");
	w->resume_ns[c] = t1 - t0;
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
	    bench_check_addresses(b, w, ctx, region, ptr, CMS_STATE_ACTIVE, "after resume", c))
		return -1;
	if (host ? bench_verify_host(b, w, ptr, c) : bench_probe_discard(b, w, ptr, c))
		return -1;
	w->cycles_done++;
	if (host)
		snprintf(line, sizeof(line), "  (%.2f / %.2f GB/s)",
			 (double)w->logical / (double)w->pause_ns[c],
			 (double)w->logical / (double)w->resume_ns[c]);
	printf("  cycle %u: pause %10.3f ms, resume %10.3f ms%s, %s OK\n", c + 1,
	       (double)w->pause_ns[c] / 1e6, (double)w->resume_ns[c] / 1e6, line,
	       host ? (b->verify_full ? "addresses and all content" :
					"addresses and sampled content") :
		      "addresses and access");
	return 0;
}

int bench_work_run(struct bench *b, struct bench_work *w)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	cms_region_info info = { .struct_size = sizeof(info) };
	bool host = w->policy == CMS_POLICY_HOST;
	cms_context *ctx = NULL;
	cms_region *region = NULL;
	uint64_t *ptr = NULL, i, t0, need, avail, slowest = 0;
	char tag[16], what[64], b1[32], b2[32], b3[32];
	size_t fr = 0, tot = 0;
	unsigned int c;
	cms_status st;
	int rc = -1;

	w->ran = true;
	bench_scale(b, w->count0, w->size0, &w->count, &w->size);
	printf("\n(%c) %" PRIu64 " x %s %s, %s (%s at --scale 1)\n", w->id, w->count,
	       bench_fmt_bytes(b1, sizeof(b1), w->size), host ? "HOST" : "DISCARD",
	       bench_fmt_bytes(b2, sizeof(b2), w->count * w->size), w->what);
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
	if (!w->pause_ns || !w->resume_ns || !ptr) {
		bench_fail(b, "%s: out of host memory", what);
		goto fail;
	}

	w->hwm_reset = bench_reset_hwm();
	w->hwm_before = bench_proc_status("VmHWM");
	copts.driver_path = b->drv_path; /* the library the tool loaded */
	BENCH_CMS(b, fail, cms_context_create, &copts, &ctx);
	ropts.device = BENCH_DEVICE;
	ropts.policy = w->policy;
	snprintf(tag, sizeof(tag), "bench_%c", w->id);
	BENCH_CMS(b, fail, cms_region_create, ctx, tag, &ropts, &region);
	for (i = 0; i < w->count; i++)
		BENCH_CMS(b, fail, cms_alloc, region, w->size, &ptr[i]);
	BENCH_CMS(b, fail, cms_region_info_get, region, &info);
	w->logical = info.logical_bytes;
	w->physical = info.physical_bytes;
	if (!bench_check(b, info.allocations == w->count && w->logical == w->count * w->size,
			 "(%c) the region holds %" PRIu64 " allocations, %" PRIu64
			 " bytes after %" PRIu64 " allocations of %" PRIu64,
			 w->id, info.allocations, w->logical, w->count, w->size))
		goto fail;
	if (host) {
		bench_choose_window(b, w);
		t0 = bench_now_ns();
		for (i = 0; i < w->count; i++)
			if (bench_write(b, ptr[i], i, 0, w->size, 0))
				goto fail;
		w->fill_s = (double)(bench_now_ns() - t0) / 1e9;
		printf("  filled %s from the host with cuMemcpyHtoD in %.2f s; checking %s at the "
		       "start, middle and end of each allocation%s\n",
		       bench_fmt_bytes(b1, sizeof(b1), w->logical), w->fill_s,
		       bench_fmt_bytes(b3, sizeof(b3), w->window),
		       b->verify_full ? " and all of it (--verify-full)" : "");
	}

	for (c = 0; c < b->cycles; c++) {
		if (bench_cycle(b, w, ctx, region, ptr, c))
			goto fail;
		if (w->pause_ns[c] + w->resume_ns[c] > slowest)
			slowest = w->pause_ns[c] + w->resume_ns[c];
		if (c == 1 && c + 1 < b->cycles && slowest > BENCH_SLOW_CYCLE_NS) {
			w->truncated = true;
			snprintf(w->note, sizeof(w->note),
				 "stopped after 2 cycles: a cycle took %.1f s (> %.0f s)",
				 (double)slowest / 1e9, (double)BENCH_SLOW_CYCLE_NS / 1e9);
			printf("  %s\n", w->note);
			break;
		}
	}
	rc = 0;
	goto out;

fail:
	w->failed = true;
	if (!w->note[0])
		snprintf(w->note, sizeof(w->note), "FAILED: %s", b->last_failure);
out:
	w->hwm_after = bench_proc_status("VmHWM");
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
