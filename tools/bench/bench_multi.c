/* SPDX-License-Identifier: MIT */
/*
 * bench_multi.c - the multi-device mode of cms-bench (--devices 0,1): the
 * workloads (a) DISCARD and (c) HOST with the same bytes per device, first in
 * a tag on the first listed device alone, then in one tag with a region on
 * every listed device, each cycle a tag-wide cms_pause / cms_resume (the
 * library processes the devices at the same time, one worker thread each).
 * Every time is reported next to the one-device time of the same run
 * (target: all devices <= 1.2x one device). After every cycle: the results
 * per device, every allocation at its address, HOST content (windows at the
 * start and end of each allocation, rewritten with a new generation after
 * each check), DISCARD memory writable; and with several devices a peer read
 * after every resume: the second device runs cms_affine_u32 (on the
 * simulation, which runs no kernels, a cuMemcpyDtoDAsync in its context) on
 * the first device's allocation, which it may read because the regions give
 * each other listed device access (cms_region_peer_devices_set). Before (a),
 * the driver's own multi-device floor of the same handles, without the
 * library (bench_multi_floor.c), so that (a)'s ratio can be read against what
 * the driver allows.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kernels.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)
#define TARGET_MULTI_RATIO 1.20
#define WINDOW_MAX MIB

/* The tool's own view of the listed devices. */
struct mctx {
	unsigned int n;
	CUdevice cu[BENCH_MAX_MDEV];
	CUcontext primary[BENCH_MAX_MDEV];
	bool retained[BENCH_MAX_MDEV];
	CUmodule module; /* in the second device's context (the peer reader) */
	CUfunction fn;
};

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int bench_multi_parse(struct bench *b, const char *arg)
{
	char buf[256], *tok, *save = NULL, *end;
	unsigned int n = 0, i;
	long v;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		v = strtol(tok, &end, 10);
		if (!*tok || *end || v < 0 || v > 63 || n == BENCH_MAX_MDEV)
			return -1;
		for (i = 0; i < n; i++)
			if (b->mdev[i] == v)
				return -1;
		b->mdev[n++] = (int)v;
	}
	if (n < 2)
		return -1;
	qsort(b->mdev, n, sizeof(b->mdev[0]), cmp_int);
	b->nmdev = n;
	return 0;
}

static void bench_mworks_init(struct bench *b)
{
	struct bench_mwork *a = &b->mwork[BENCH_MA], *c = &b->mwork[BENCH_MC];

	*a = (struct bench_mwork){ .id = 'a',
				   .what = "32 x 1 GiB DISCARD per device",
				   .policy = CMS_POLICY_DISCARD,
				   .count0 = 32,
				   .size0 = GIB };
	*c = (struct bench_mwork){ .id = 'c',
				   .what = "16 x 1 GiB HOST per device",
				   .policy = CMS_POLICY_HOST,
				   .count0 = 16,
				   .size0 = GIB };
	a->selected = b->work[BENCH_WA].selected;
	c->selected = b->work[BENCH_WC].selected;
	/* the driver's own floor of (a), next to it; --only floor: the floor alone */
	a->floor_wanted = a->selected || b->only_floor;
}

/* ---- the tool's driver calls on device i of the list ---------------------------- */

static int push(struct bench *b, struct mctx *m, unsigned int i)
{
	BENCH_CU(b, err, cuCtxPushCurrent, m->primary[i]);
	return 0;
err:
	return -1;
}

static void pop(struct bench *b)
{
	CUcontext popped;
	CUresult res = b->drv.cuCtxPopCurrent(&popped);

	if (res != CUDA_SUCCESS)
		bench_cu_fail(b, res, "cuCtxPopCurrent");
}

static uint64_t mseed(unsigned int dev, uint64_t alloc, uint64_t gen)
{
	uint64_t z = (dev + 1) * 0xA0761D6478BD642Full + alloc * 0x9E3779B97F4A7C15ull +
		     (gen + 1) * 0xD1B54A32D192ED03ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t mword(uint64_t seed, uint64_t off)
{
	return seed ^ ((off >> 3) * 0x9E3779B97F4A7C15ull);
}

/* Writes generation gen into [off, off + len) (the device's context is current). */
static int mwrite(struct bench *b, uint64_t ptr, unsigned int dev, uint64_t alloc, uint64_t off,
		  uint64_t len, uint64_t gen)
{
	uint64_t seed = mseed(dev, alloc, gen), done, n, k;

	for (done = 0; done < len; done += n) {
		n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		for (k = 0; k < n / 8; k++)
			b->stage[k] = mword(seed, off + done + k * 8);
		BENCH_CU(b, err, cuMemcpyHtoD, ptr + off + done, b->stage, n);
	}
	return 0;
err:
	return -1;
}

/* Checks [off, off + len) against generation gen (the device's context is current). */
static int mcompare(struct bench *b, const struct bench_mwork *w, uint64_t ptr, unsigned int dev,
		    uint64_t alloc, uint64_t off, uint64_t len, uint64_t gen, unsigned int cycle)
{
	uint64_t seed = mseed(dev, alloc, gen), done, n, k;

	for (done = 0; done < len; done += n) {
		n = len - done < BENCH_STAGE_BYTES ? len - done : BENCH_STAGE_BYTES;
		BENCH_CU(b, err, cuMemcpyDtoH, b->stage, ptr + off + done, n);
		for (k = 0; k < n / 8; k++)
			if (b->stage[k] != mword(seed, off + done + k * 8)) {
				bench_fail(b,
					   "(%c) cycle %u: device %d allocation %" PRIu64
					   " at 0x%" PRIx64 ": byte %" PRIu64 " reads 0x%016" PRIx64
					   ", expected 0x%016" PRIx64 " (generation %" PRIu64
					   "): content lost",
					   w->id, cycle + 1, b->mdev[dev], alloc, ptr,
					   off + done + k * 8, b->stage[k],
					   mword(seed, off + done + k * 8), gen);
				return -1;
			}
	}
	b->checks++;
	return 0;
err:
	return -1;
}

/* ---- one phase: the tag on nd devices -------------------------------------------- */

struct mrun {
	struct bench_mwork *w;
	struct bench_mphase *ph;
	unsigned int nd;
	cms_context *ctx;
	cms_region *region[BENCH_MAX_MDEV];
	uint64_t *ptr; /* [i * count + k] */
	cms_region *scratch_region;
	uint64_t scratch; /* on the second device: what its peer read writes */
	char tag[24];
};

static uint64_t *mptr(struct mrun *r, unsigned int i, uint64_t k)
{
	return &r->ptr[i * r->w->count + k];
}

/* After a resume: HOST content (then the next generation), or DISCARD memory writable. */
static int check_content(struct bench *b, struct mctx *m, struct mrun *r, unsigned int cycle)
{
	struct bench_mwork *w = r->w;
	uint64_t win = w->window, k, v, got;
	unsigned int i;
	int rc = 0;

	for (i = 0; i < r->nd && !rc; i++) {
		if (push(b, m, i))
			return -1;
		for (k = 0; k < w->count && !rc; k++) {
			uint64_t p = *mptr(r, i, k);

			if (w->policy != CMS_POLICY_HOST) {
				v = mseed(i, k, cycle + 1000);
				got = ~v;
				rc = b->drv.cuMemcpyHtoD(p + w->size - 8, &v, 8) ||
				     b->drv.cuMemcpyDtoH(&got, p + w->size - 8, 8);
				if (rc)
					bench_fail(b, "(%c) cycle %u: device %d: a copy failed",
						   w->id, cycle + 1, b->mdev[i]);
				else if (!bench_check(b, got == v,
						      "(%c) cycle %u: device %d allocation %" PRIu64
						      " reads back 0x%016" PRIx64
						      " after writing 0x%016" PRIx64,
						      w->id, cycle + 1, b->mdev[i], k, got, v))
					rc = -1;
				continue;
			}
			if (b->verify_full) /* the middle too: generation 0 since the fill */
				rc = mcompare(b, w, p, i, k, win, w->size - 2 * win, 0, cycle);
			if (!rc)
				rc = mcompare(b, w, p, i, k, 0, win, cycle, cycle) ||
				     mcompare(b, w, p, i, k, w->size - win, win, cycle, cycle) ||
				     mwrite(b, p, i, k, 0, win, cycle + 1) ||
				     mwrite(b, p, i, k, w->size - win, win, cycle + 1);
		}
		pop(b);
	}
	return rc ? -1 : 0;
}

/* The second device reads the first one's allocation 0 (window 0, generation cycle + 1). */
static int peer_read(struct bench *b, struct mctx *m, struct mrun *r, unsigned int cycle)
{
	struct bench_mwork *w = r->w;
	uint64_t in = *mptr(r, 0, 0), out = r->scratch, n = w->window / 4, k;
	uint64_t seed = mseed(0, 0, cycle + 1);

	if (w->policy != CMS_POLICY_HOST) { /* DISCARD: give it content first */
		if (push(b, m, 0))
			return -1;
		/* cuMemcpyHtoD from pageable memory may return before its DMA lands: the
		 * peer's kernel runs in another context, so wait for it here. */
		if (mwrite(b, in, 0, 0, 0, w->window, cycle + 1) ||
		    b->drv.cuCtxSynchronize() != CUDA_SUCCESS) {
			pop(b);
			return -1;
		}
		pop(b);
	}
	if (push(b, m, 1))
		return -1;
	if (m->fn) {
		void *params[] = { &in, &out, &n };
		unsigned int grid = (unsigned int)((n + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK);

		BENCH_CU(b, err, cuLaunchKernel, m->fn, grid, 1, 1, CMS_KERNEL_BLOCK, 1, 1, 0, NULL,
			 params, NULL);
	} else {
		BENCH_CU(b, err, cuMemcpyDtoDAsync, out, in, (size_t)w->window, NULL);
	}
	BENCH_CU(b, err, cuCtxSynchronize);
	BENCH_CU(b, err, cuMemcpyDtoH, b->stage, out, (size_t)w->window);
	pop(b);
	for (k = 0; k < w->window / 8; k++) {
		uint64_t want = mword(seed, k * 8);

		if (m->fn)
			want = (uint64_t)((uint32_t)(want >> 32) * 2u + 1u) << 32 |
			       (uint32_t)((uint32_t)want * 2u + 1u);
		if (b->stage[k] != want) {
			bench_fail(b,
				   "(%c) cycle %u: device %d read 0x%016" PRIx64 " at byte %" PRIu64
				   " of device %d's allocation through peer access, expected "
				   "0x%016" PRIx64,
				   w->id, cycle + 1, b->mdev[1], b->stage[k], k * 8, b->mdev[0],
				   want);
			return -1;
		}
	}
	w->peer_reads++;
	b->checks++;
	return 0;
err:
	pop(b);
	return -1;
}

/* Every allocation at its address and in state, through cms_pointer_info_get. */
static int check_addresses(struct bench *b, struct mrun *r, uint32_t state, unsigned int cycle)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	struct bench_mwork *w = r->w;
	unsigned int i;
	uint64_t k;
	cms_status st;

	for (i = 0; i < r->nd; i++)
		for (k = 0; k < w->count; k++) {
			uint64_t p = *mptr(r, i, k);

			st = cms_pointer_info_get(r->ctx, p, &pi);
			if (st)
				return bench_cms_fail(b, st, "cms_pointer_info_get");
			if (!bench_check(b,
					 pi.base == p && pi.region == r->region[i] &&
						 pi.state == state && pi.device == b->mdev[i],
					 "(%c) cycle %u: device %d allocation %" PRIu64
					 " at 0x%" PRIx64 " is now base 0x%" PRIx64 ", device %d, "
					 "state %u",
					 w->id, cycle + 1, b->mdev[i], k, p, pi.base, pi.device,
					 pi.state))
				return -1;
		}
	return 0;
}

/* The per-device results of a call: one entry per device, its bytes, status OK. */
static int check_devices(struct bench *b, struct mrun *r, uint32_t ndev, int32_t failed,
			 const cms_device_result *dr, uint64_t *dev_ns, const char *what,
			 unsigned int cycle)
{
	struct bench_mwork *w = r->w;
	uint64_t physical = w->count * w->size;
	unsigned int i;

	if (!bench_check(b, ndev == r->nd && failed == -1,
			 "(%c) cycle %u: %s reports %u devices (failed device %d), expected %u",
			 w->id, cycle + 1, what, ndev, failed, r->nd))
		return -1;
	for (i = 0; i < r->nd; i++) {
		if (!bench_check(
			    b,
			    dr[i].device == b->mdev[i] && dr[i].status == CMS_OK &&
				    dr[i].allocations == w->count && dr[i].bytes == physical,
			    "(%c) cycle %u: %s: device entry %u is device %d, status %d, %" PRIu64
			    " allocations, %" PRIu64 " bytes (expected device %d, %" PRIu64
			    ", %" PRIu64 ")",
			    w->id, cycle + 1, what, i, dr[i].device, dr[i].status,
			    dr[i].allocations, dr[i].bytes, b->mdev[i], w->count, physical))
			return -1;
		dev_ns[cycle * r->nd + i] = dr[i].elapsed_ns;
	}
	return 0;
}

static int run_cycle(struct bench *b, struct mctx *m, struct mrun *r, unsigned int c)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	struct bench_mphase *ph = r->ph;
	struct bench_mwork *w = r->w;
	uint64_t t0, t1;
	cms_status st;
	unsigned int i;

	snprintf(b->step, sizeof(b->step), "(%c) on %u device%s, cycle %u", w->id, r->nd,
		 r->nd > 1 ? "s" : "", c + 1);
	t0 = bench_now_ns();
	st = cms_pause(r->ctx, r->tag, NULL, &pr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_pause");
	ph->pause_ns[c] = t1 - t0;
	if (check_devices(b, r, pr.devices, pr.failed_device, pr.device_results, ph->dev_pause_ns,
			  "cms_pause", c) ||
	    check_addresses(b, r, CMS_STATE_PAUSED, c))
		return -1;
	t0 = bench_now_ns();
	st = cms_resume(r->ctx, r->tag, NULL, &rr);
	t1 = bench_now_ns();
	if (st)
		return bench_cms_fail(b, st, "cms_resume");
	ph->resume_ns[c] = t1 - t0;
	if (check_devices(b, r, rr.devices, rr.failed_device, rr.device_results, ph->dev_resume_ns,
			  "cms_resume", c) ||
	    check_addresses(b, r, CMS_STATE_ACTIVE, c) || check_content(b, m, r, c) ||
	    (r->nd > 1 && peer_read(b, m, r, c)))
		return -1;
	ph->cycles_done++;
	printf("  %u device%s, cycle %u: pause %10.3f ms [", r->nd, r->nd > 1 ? "s" : " ", c + 1,
	       (double)ph->pause_ns[c] / 1e6);
	for (i = 0; i < r->nd; i++)
		printf("%s%d: %.3f", i ? ", " : "", b->mdev[i],
		       (double)ph->dev_pause_ns[c * r->nd + i] / 1e6);
	printf("], resume %10.3f ms [", (double)ph->resume_ns[c] / 1e6);
	for (i = 0; i < r->nd; i++)
		printf("%s%d: %.3f", i ? ", " : "", b->mdev[i],
		       (double)ph->dev_resume_ns[c * r->nd + i] / 1e6);
	printf("], addresses, %s%s OK\n",
	       w->policy == CMS_POLICY_HOST ? "sampled content" : "access",
	       r->nd > 1 ? ", peer read" : "");
	return 0;
}

/* Room on every device and in host RAM for nd devices of w. */
static int room(struct bench *b, struct mctx *m, struct bench_mwork *w, unsigned int nd)
{
	uint64_t need = w->count * w->size, host, avail = bench_mem_available();
	size_t fr = 0, tot = 0;
	char b1[32], b2[32];
	unsigned int i;
	CUresult res;

	for (i = 0; i < nd; i++) {
		if (push(b, m, i))
			return -1;
		res = b->drv.cuMemGetInfo(&fr, &tot);
		pop(b);
		if (res != CUDA_SUCCESS)
			return bench_cu_fail(b, res, "cuMemGetInfo");
		if (need > fr) {
			bench_fail(b,
				   "(%c) needs %s on device %d, %s is free; use a larger --scale",
				   w->id, bench_fmt_bytes(b1, sizeof(b1), need), b->mdev[i],
				   bench_fmt_bytes(b2, sizeof(b2), fr));
			return -1;
		}
	}
	host = nd * ((w->policy == CMS_POLICY_HOST ? need : 0) + (b->sim ? need : 0)) +
	       BENCH_STAGE_BYTES;
	if (avail && host > avail) {
		bench_fail(b, "(%c) on %u devices needs about %s of host RAM, %s is available",
			   w->id, nd, bench_fmt_bytes(b1, sizeof(b1), host),
			   bench_fmt_bytes(b2, sizeof(b2), avail));
		return -1;
	}
	return 0;
}

/* Context, a region per device in one tag (each giving the other devices access), fill. */
static int setup_phase(struct bench *b, struct mctx *m, struct mrun *r)
{
	cms_context_options copts = CMS_CONTEXT_OPTIONS_INIT;
	cms_region_options ropts = CMS_REGION_OPTIONS_INIT;
	struct bench_mwork *w = r->w;
	uint64_t all = 0, k, t0;
	unsigned int i;
	char b1[32];

	for (i = 0; i < r->nd; i++)
		all |= 1ull << b->mdev[i];
	copts.driver_path = b->drv_path;
	BENCH_CMS(b, err, cms_context_create, &copts, &r->ctx);
	snprintf(r->tag, sizeof(r->tag), "bench_m%c", w->id);
	ropts.policy = w->policy;
	for (i = 0; i < r->nd; i++) {
		ropts.device = b->mdev[i];
		BENCH_CMS(b, err, cms_region_create, r->ctx, r->tag, &ropts, &r->region[i]);
		if (r->nd > 1)
			BENCH_CMS(b, err, cms_region_peer_devices_set, r->region[i],
				  all & ~(1ull << b->mdev[i]));
		for (k = 0; k < w->count; k++)
			BENCH_CMS(b, err, cms_alloc, r->region[i], w->size, mptr(r, i, k));
	}
	if (r->nd > 1) { /* where the peer read writes: never paused */
		ropts.device = b->mdev[1];
		ropts.policy = CMS_POLICY_DISCARD;
		BENCH_CMS(b, err, cms_region_create, r->ctx, "bench_m_scratch", &ropts,
			  &r->scratch_region);
		BENCH_CMS(b, err, cms_alloc, r->scratch_region, w->window, &r->scratch);
	}
	if (w->policy != CMS_POLICY_HOST)
		return 0;
	t0 = bench_now_ns();
	for (i = 0; i < r->nd; i++) {
		if (push(b, m, i))
			goto err;
		for (k = 0; k < w->count; k++)
			if (mwrite(b, *mptr(r, i, k), i, k, 0, w->size, 0)) {
				pop(b);
				goto err;
			}
		pop(b);
	}
	printf("  %u device%s: filled %s per device from the host in %.2f s\n", r->nd,
	       r->nd > 1 ? "s" : "", bench_fmt_bytes(b1, sizeof(b1), w->count * w->size),
	       (double)(bench_now_ns() - t0) / 1e9);
	return 0;
err:
	return -1;
}

static int alloc_phase(struct bench *b, struct bench_mphase *ph, unsigned int nd)
{
	ph->ndev = nd;
	ph->pause_ns = calloc(b->cycles, sizeof(uint64_t));
	ph->resume_ns = calloc(b->cycles, sizeof(uint64_t));
	ph->dev_pause_ns = calloc((size_t)b->cycles * nd, sizeof(uint64_t));
	ph->dev_resume_ns = calloc((size_t)b->cycles * nd, sizeof(uint64_t));
	if (ph->pause_ns && ph->resume_ns && ph->dev_pause_ns && ph->dev_resume_ns)
		return 0;
	bench_fail(b, "out of host memory");
	return -1;
}

static int run_phase(struct bench *b, struct mctx *m, struct bench_mwork *w,
		     struct bench_mphase *ph, unsigned int nd)
{
	struct mrun r;
	unsigned int c;
	cms_status st;
	int rc = -1;

	memset(&r, 0, sizeof(r));
	r.w = w;
	r.ph = ph;
	r.nd = nd;
	if (alloc_phase(b, ph, nd) || room(b, m, w, nd))
		return -1;
	r.ptr = calloc(nd * w->count, sizeof(*r.ptr));
	if (!r.ptr) {
		bench_fail(b, "out of host memory");
		return -1;
	}
	if (setup_phase(b, m, &r))
		goto out;
	for (c = 0; c < b->cycles; c++)
		if (run_cycle(b, m, &r, c))
			goto out;
	rc = 0;
out:
	st = cms_context_destroy(r.ctx); /* every allocation and region */
	if (st) {
		bench_cms_fail(b, st, "cms_context_destroy");
		rc = -1;
	}
	free(r.ptr);
	return rc;
}

/* ---- the mode ---------------------------------------------------------------------- */

static int setup_devices(struct bench *b, struct mctx *m)
{
	int count = 0;
	unsigned int i;
	CUresult res;

	BENCH_CU(b, err, cuDeviceGetCount, &count);
	for (i = 0; i < b->nmdev; i++) {
		if (b->mdev[i] >= count) {
			bench_fail(b, "--devices: device %d does not exist (%d devices)",
				   b->mdev[i], count);
			return -1;
		}
		BENCH_CU(b, err, cuDeviceGet, &m->cu[i], b->mdev[i]);
		BENCH_CU(b, err, cuDevicePrimaryCtxRetain, &m->primary[i], m->cu[i]);
		m->retained[i] = true;
		m->n = i + 1;
	}
	if (push(b, m, 1)) /* the peer reader's kernel */
		return -1;
	res = b->drv.cuModuleLoadData(&m->module, cms_kernels_ptx);
	if (res == CUDA_SUCCESS)
		res = b->drv.cuModuleGetFunction(&m->fn, m->module, CMS_KERNEL_AFFINE_NAME);
	else if (res == CUDA_ERROR_NOT_SUPPORTED) /* the simulation: a copy instead */
		res = CUDA_SUCCESS, m->module = NULL;
	pop(b);
	if (res != CUDA_SUCCESS)
		return bench_cu_fail(b, res, "cuModuleLoadData/cuModuleGetFunction (peer reader)");
	return 0;
err:
	return -1;
}

static void release_devices(struct bench *b, struct mctx *m)
{
	unsigned int i;
	CUresult res;

	if (m->module && !push(b, m, 1)) {
		res = b->drv.cuModuleUnload(m->module);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuModuleUnload");
		pop(b);
	}
	for (i = 0; i < m->n; i++) {
		if (!m->retained[i])
			continue;
		res = b->drv.cuDevicePrimaryCtxRelease(m->cu[i]);
		if (res != CUDA_SUCCESS)
			bench_cu_fail(b, res, "cuDevicePrimaryCtxRelease");
	}
}

static void bench_scale_m(const struct bench *b, struct bench_mwork *w)
{
	bench_scale(b, w->count0, w->size0, &w->count, &w->size);
	w->window = w->size / 4 < WINDOW_MAX ? w->size / 4 : WINDOW_MAX;
	w->window &= ~7ull;
}

void bench_multi_run(struct bench *b)
{
	struct mctx m;
	unsigned int i;
	char b1[32], b2[32];

	memset(&m, 0, sizeof(m));
	bench_mworks_init(b);
	if (!b->mwork[BENCH_MA].selected && !b->mwork[BENCH_MC].selected &&
	    !b->mwork[BENCH_MA].floor_wanted) {
		bench_fail(b, "--devices runs the workloads (a) and (c) or the floor: --only names "
			      "none of them");
		return;
	}
	printf("\nmulti-device mode: devices");
	for (i = 0; i < b->nmdev; i++)
		printf("%s%d", i ? "," : " ", b->mdev[i]);
	printf(": each workload in a tag on device %d alone, then in one tag with a region on "
	       "every "
	       "listed device (the same bytes per device); tag-wide cms_pause / cms_resume\n",
	       b->mdev[0]);
	snprintf(b->step, sizeof(b->step), "multi-device setup");
	if (setup_devices(b, &m))
		goto out;
	printf("peer read after every resume on %u devices: device %d runs %s on device %d's "
	       "memory\n",
	       b->nmdev, b->mdev[1],
	       m.fn ? CMS_KERNEL_AFFINE_NAME : "cuMemcpyDtoDAsync (the simulation runs no kernels)",
	       b->mdev[0]);
	for (i = 0; i < BENCH_NMWORK; i++) {
		struct bench_mwork *w = &b->mwork[i];

		if (!w->selected && !w->floor_wanted)
			continue;
		bench_scale_m(b, w);
		w->peer_kernel = m.fn != NULL;
		printf("\n(%c) %" PRIu64 " x %s %s per device, %s per device (%s at --scale 1)\n",
		       w->id, w->count, bench_fmt_bytes(b1, sizeof(b1), w->size),
		       w->policy == CMS_POLICY_HOST ? "HOST" : "DISCARD",
		       bench_fmt_bytes(b2, sizeof(b2), w->count * w->size), w->what);
		if (w->floor_wanted) /* before the library's phases: nothing else allocated */
			bench_mfloor_run(b, w, m.cu, m.primary, b->nmdev);
		if (!w->selected)
			continue;
		w->ran = true;
		if (run_phase(b, &m, w, &w->one, 1) || run_phase(b, &m, w, &w->all, b->nmdev)) {
			w->failed = true;
			snprintf(w->note, sizeof(w->note), "FAILED: %s", b->last_failure);
		}
	}
out:
	release_devices(b, &m);
}

/* ---- report ------------------------------------------------------------------------- */

/* The slowest device's median work time (cms_device_result.elapsed_ns) over cycles 2.. */
static double slowest_device_ms(const struct bench_mphase *ph, bool pause)
{
	const uint64_t *v = pause ? ph->dev_pause_ns : ph->dev_resume_ns;
	uint64_t tmp[BENCH_MAX_CYCLES];
	double worst = NAN;
	unsigned int i, c;

	if (!v || ph->cycles_done < 2)
		return NAN;
	for (i = 0; i < ph->ndev; i++) {
		double med;

		for (c = 1; c < ph->cycles_done && c <= BENCH_MAX_CYCLES; c++)
			tmp[c - 1] = v[c * ph->ndev + i];
		med = bench_median_ns(tmp, ph->cycles_done - 1) / 1e6;
		if (isnan(worst) || med > worst)
			worst = med;
	}
	return worst;
}

static const char *num(char *buf, size_t len, double v, const char *fmt)
{
	if (isnan(v) || isinf(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, fmt, v);
	return buf;
}

void bench_multi_report(const struct bench *b)
{
	bool judge = !b->sim && b->scale == 1;
	char name[64], c1[24], c2[24], c3[24], c4[24], c5[24], b1[32];
	unsigned int i;
	int m, p;

	if (!b->nmdev)
		return;
	if (!b->mwork[BENCH_MA].selected && !b->mwork[BENCH_MC].selected) /* --only floor */
		goto floors;
	printf("\nmulti-device results: wall time of the tag-wide cms_pause / cms_resume; first "
	       "cycle, then the median of cycles 2..N; ratio = %u devices / 1 device, the same "
	       "bytes per device\n",
	       b->nmdev);
	printf("%-30s %-6s %-6s %10s %10s %8s %10s %10s  %s\n", "workload", "cycle", "phase",
	       "1 dev ms", "N dev ms", "ratio", "N GB/s", "slowest ms",
	       judge ? "target" : "target (not judged: simulation or --scale)");
	for (i = 0; i < BENCH_NMWORK; i++) {
		const struct bench_mwork *w = &b->mwork[i];
		bool shown = false;

		if (!w->selected)
			continue;
		snprintf(name, sizeof(name), "(%c) %" PRIu64 " x %s %s", w->id, w->count,
			 bench_fmt_bytes(b1, sizeof(b1), w->size),
			 w->policy == CMS_POLICY_HOST ? "HOST" : "DISCARD");
		if (!w->ran || w->failed || !w->all.cycles_done) {
			printf("%-30s %s\n", name, w->note[0] ? w->note : "did not run");
			continue;
		}
		for (m = 0; m < 2; m++)
			for (p = 1; p >= 0; p--) {
				double one = bench_mphase_ms(&w->one, p, m),
				       all = bench_mphase_ms(&w->all, p, m);
				double ratio = all / one;
				double gbs = w->policy == CMS_POLICY_HOST ?
						     (double)(b->nmdev * w->count * w->size) /
							     (all * 1e6) :
						     NAN;

				if (m && w->all.cycles_done < 2)
					continue;
				printf("%-30s %-6s %-6s %10s %10s %8s %10s %10s  %s\n",
				       shown ? "" : name, m ? "median" : "first",
				       p ? "pause" : "resume", num(c1, sizeof(c1), one, "%.3f"),
				       num(c2, sizeof(c2), all, "%.3f"),
				       num(c3, sizeof(c3), ratio, "%.2fx"),
				       num(c4, sizeof(c4), gbs, "%.2f"),
				       num(c5, sizeof(c5), m ? slowest_device_ms(&w->all, p) : NAN,
					   "%.3f"),
				       !m			   ? "" :
				       !judge			   ? "<=1.20x -" :
				       ratio <= TARGET_MULTI_RATIO ? "<=1.20x yes" :
								     "<=1.20x NO");
				shown = true;
			}
		printf("%-30s peer reads after resume: %u of %u matched (%s)\n", "", w->peer_reads,
		       w->all.cycles_done,
		       w->peer_kernel ? CMS_KERNEL_AFFINE_NAME " on the peer" :
					"cuMemcpyDtoDAsync in the peer's context");
	}
	printf("(slowest ms: the median over cycles 2..N of the slowest device's own work, "
	       "cms_device_result.elapsed_ns)\n");
floors:
	for (i = 0; i < BENCH_NMWORK; i++)
		bench_mfloor_report(b, &b->mwork[i]);
}

static void json_times(FILE *f, const uint64_t *v, unsigned int n)
{
	unsigned int c;

	fputs("[", f);
	for (c = 0; c < n; c++)
		fprintf(f, "%s%.6f", c ? ", " : "", (double)v[c] / 1e6);
	fputs("]", f);
}

static void json_phase(FILE *f, const struct bench_mphase *ph)
{
	fprintf(f, "{\"devices\": %u, \"cycles\": %u, \"pause_ms\": ", ph->ndev, ph->cycles_done);
	json_times(f, ph->pause_ns, ph->cycles_done);
	fputs(", \"resume_ms\": ", f);
	json_times(f, ph->resume_ns, ph->cycles_done);
	fputs(", \"device_pause_ms\": ", f);
	json_times(f, ph->dev_pause_ns, ph->cycles_done * ph->ndev);
	fputs(", \"device_resume_ms\": ", f);
	json_times(f, ph->dev_resume_ns, ph->cycles_done * ph->ndev);
	fputs("}", f);
}

void bench_multi_json(const struct bench *b, FILE *f)
{
	bool judge = !b->sim && b->scale == 1;
	unsigned int i, n = 0;

	fputs("  \"multi_device\": ", f);
	if (!b->nmdev) {
		fputs("null,\n", f);
		return;
	}
	fputs("{\"devices\": [", f);
	for (i = 0; i < b->nmdev; i++)
		fprintf(f, "%s%d", i ? ", " : "", b->mdev[i]);
	fprintf(f, "], \"target_ratio\": %.2f, \"workloads\": [", TARGET_MULTI_RATIO);
	for (i = 0; i < BENCH_NMWORK; i++) {
		const struct bench_mwork *w = &b->mwork[i];
		double pr, rr;

		if (!w->selected && !w->floor_ran)
			continue;
		fprintf(f,
			"%s\n    {\"id\": \"%c\", \"policy\": \"%s\", \"status\": \"%s\", "
			"\"allocations_per_device\": %" PRIu64 ", \"allocation_bytes\": %" PRIu64
			", \"peer_reads\": %u, \"peer_work\": \"%s\",\n     \"one\": ",
			n++ ? "," : "", w->id, w->policy == CMS_POLICY_HOST ? "HOST" : "DISCARD",
			!w->selected ? "floor only" :
			!w->ran	     ? "not run" :
			w->failed    ? "failed" :
				       "ok",
			w->count, w->size, w->peer_reads,
			w->peer_kernel ? "cms_affine_u32" : "cuMemcpyDtoDAsync");
		json_phase(f, &w->one);
		fputs(",\n     \"all\": ", f);
		json_phase(f, &w->all);
		pr = bench_mphase_ms(&w->all, true, true) / bench_mphase_ms(&w->one, true, true);
		rr = bench_mphase_ms(&w->all, false, true) / bench_mphase_ms(&w->one, false, true);
		fputs(",\n     \"median_pause_ratio\": ", f);
		bench_json_num(f, pr);
		fputs(", \"median_resume_ratio\": ", f);
		bench_json_num(f, rr);
		fprintf(f, ", \"pause_target_met\": %s, \"resume_target_met\": %s",
			!judge || isnan(pr)	 ? "null" :
			pr <= TARGET_MULTI_RATIO ? "true" :
						   "false",
			!judge || isnan(rr)	 ? "null" :
			rr <= TARGET_MULTI_RATIO ? "true" :
						   "false");
		bench_mfloor_json(b, w, f);
		fputs("}", f);
	}
	fputs("\n  ]},\n", f);
}

void bench_multi_free(struct bench *b)
{
	unsigned int i;

	for (i = 0; i < BENCH_NMWORK; i++) {
		struct bench_mphase *ph[2] = { &b->mwork[i].one, &b->mwork[i].all };

		for (int k = 0; k < 2; k++) {
			free(ph[k]->pause_ns);
			free(ph[k]->resume_ns);
			free(ph[k]->dev_pause_ns);
			free(ph[k]->dev_resume_ns);
		}
	}
}
