/* SPDX-License-Identifier: MIT */
/*
 * cms-exp-handles.c - an experiment, not a benchmark: why the first pause of
 * 2048 x 8 MiB DISCARD allocations (one physical handle each, released with
 * cuMemUnmap + cuMemRelease) costs more per handle in cumemsaver than in
 * torch_memory_saver (issue 17: 80-107 ms against 45-56 ms on an H200).
 *
 * Each variant backs N handles of S bytes (cuMemCreate + cuMemMap +
 * cuMemSetAccess, one per handle: "back") and then releases them
 * ("release": cuMemUnmap + cuMemRelease of each), raw driver calls in the
 * device's primary context, and varies one thing at a time:
 *
 *   layout  own: one reservation per handle (alignment 0), as the peer does
 *           arena: 2 GiB reservations aligned to 2 GiB, handles carved in
 *           order, as src/vmm/arena.c does
 *           one: a single reservation for all handles (cms-bench's floor)
 *   gdr     the gpuDirectRDMACapable allocation flag (as the library sets it
 *           where the device supports it) or not
 *   touch   every handle written with cuMemsetD8Async (and synchronized)
 *           before the release, outside the timing, or left untouched
 *   order   per handle unmap then release (interleaved), or all unmaps
 *           first then all releases (split; the unmaps' share is printed)
 *   threads the release spread over T threads, each unmapping and releasing
 *           a contiguous share of the handles (T = 1 unless said)
 *   range   one cuMemUnmap over each reservation's whole mapped range (so
 *           over many adjacent mappings at once), then every cuMemRelease;
 *           whether the driver accepts such an unmap is part of the answer
 *
 * Then the pause of a HOST region of the same allocations in the steady state
 * (host buffer page-locked beforehand, as retained between cycles), to see
 * whether releases slow the copies they overlap:
 *   C1 cuMemcpyDtoHAsync per allocation round-robin on 4 streams, synchronized
 *      (copies only; the allocations stay mapped)
 *   C2 as C1, then every handle unmapped and released after the synchronize
 *   C3 as C1, with an event per stream after every 128 allocations; each
 *      batch is unmapped and released as soon as its events complete, while
 *      the later batches copy (what src/engine/overlap.c does)
 *   C4 as C3, each batch's 128 adjacent mappings unmapped with one cuMemUnmap
 *   C5 as C2, each reservation unmapped with one cuMemUnmap
 *   C6 as C4, the cuMemRelease calls all after the last copy (unmaps overlapped only)
 *
 * Every time is the median of EXP_REPS repetitions after a warm-up, from
 * before the first driver call to after the last; reservations are made and
 * freed outside the timings. Exits 0 when every call passed, 1 otherwise.
 */
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"

#define EXP_TOOL "cms-exp-handles"
#define EXP_REPS 5u
#define EXP_ARENA (2ull << 30)

enum exp_layout { L_OWN, L_ARENA, L_ONE };

struct exp_var {
	const char *id;
	enum exp_layout layout;
	bool gdr, touch, split;
	unsigned int threads;
	bool range;
};

struct exp {
	struct bench b;
	uint64_t n, size;
	CUdeviceptr *va; /* per handle */
	CUmemGenericAllocationHandle *h;
	CUdeviceptr *resv; /* reservations */
	uint64_t *resv_len;
	uint64_t nresv;
	uint64_t unmap_ns; /* split order: the unmaps' part of the last release */
};

struct exp_share {
	struct exp *x;
	uint64_t lo, hi;
	CUresult res;
};

static void *release_share(void *arg)
{
	struct exp_share *s = arg;
	uint64_t i;

	for (i = s->lo; i < s->hi && s->res == CUDA_SUCCESS; i++) {
		s->res = s->x->b.drv.cuMemUnmap(s->x->va[i], s->x->size);
		if (s->res == CUDA_SUCCESS)
			s->res = s->x->b.drv.cuMemRelease(s->x->h[i]);
	}
	return NULL;
}

/* Every thread needs the primary context current: the driver's context is per thread. */
static void *release_share_ctx(void *arg)
{
	struct exp_share *s = arg;

	CUcontext prev;

	s->res = s->x->b.drv.cuCtxPushCurrent(s->x->b.primary);
	if (s->res != CUDA_SUCCESS)
		return NULL;
	release_share(arg);
	s->x->b.drv.cuCtxPopCurrent(&prev);
	return NULL;
}

static int release_threads(struct exp *x, unsigned int t)
{
	struct exp_share sh[16];
	pthread_t th[16];
	unsigned int k, started = 0;
	int rc = 0;

	for (k = 0; k < t; k++) {
		sh[k] = (struct exp_share){ x, x->n * k / t, x->n * (k + 1) / t, CUDA_SUCCESS };
		if (pthread_create(&th[k], NULL, release_share_ctx, &sh[k]))
			break;
		started++;
	}
	for (k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	for (k = 0; k < t; k++) {
		if (k >= started)
			rc = bench_cu_fail(&x->b, CUDA_ERROR_UNKNOWN, "pthread_create");
		else if (sh[k].res != CUDA_SUCCESS)
			rc = bench_cu_fail(&x->b, sh[k].res, "threaded unmap + release");
		if (rc)
			break;
	}
	return rc;
}

#define CU(x, call)                                                 \
	do {                                                        \
		CUresult res_ = (call);                             \
		if (res_ != CUDA_SUCCESS)                           \
			return bench_cu_fail(&(x)->b, res_, #call); \
	} while (0)

static int reserve(struct exp *x, enum exp_layout l)
{
	uint64_t i, per;

	x->nresv = 0;
	if (l == L_OWN) {
		for (i = 0; i < x->n; i++) {
			CU(x, x->b.drv.cuMemAddressReserve(&x->resv[i], x->size, 0, 0, 0));
			x->resv_len[i] = x->size;
			x->va[i] = x->resv[i];
			x->nresv++;
		}
		return 0;
	}
	per = l == L_ONE ? x->n : EXP_ARENA / x->size;
	if (!per)
		per = 1;
	for (i = 0; i < x->n; i++) {
		if (i % per == 0) {
			uint64_t len = per * x->size;

			CU(x, x->b.drv.cuMemAddressReserve(&x->resv[x->nresv], len,
							   l == L_ARENA ? EXP_ARENA : 0, 0, 0));
			x->resv_len[x->nresv++] = len;
		}
		x->va[i] = x->resv[x->nresv - 1] + (i % per) * x->size;
	}
	return 0;
}

static int unreserve(struct exp *x)
{
	while (x->nresv) {
		x->nresv--;
		CU(x, x->b.drv.cuMemAddressFree(x->resv[x->nresv], x->resv_len[x->nresv]));
	}
	return 0;
}

static int back(struct exp *x, const struct exp_var *v)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	uint64_t i;

	bench_fill_prop(&x->b, &prop, &acc);
	prop.allocFlags.gpuDirectRDMACapable = (unsigned char)(v->gdr && x->b.gdr);
	for (i = 0; i < x->n; i++) {
		CU(x, x->b.drv.cuMemCreate(&x->h[i], x->size, &prop, 0));
		CU(x, x->b.drv.cuMemMap(x->va[i], x->size, 0, x->h[i], 0));
		CU(x, x->b.drv.cuMemSetAccess(x->va[i], x->size, &acc, 1));
	}
	return 0;
}

static int touch(struct exp *x)
{
	uint64_t i;

	for (i = 0; i < x->n; i++)
		CU(x, x->b.drv.cuMemsetD8Async(x->va[i], (unsigned char)i, x->size, NULL));
	CU(x, x->b.drv.cuCtxSynchronize());
	return 0;
}

/*
 * One cuMemUnmap over the n adjacent mappings from handle i; where the driver
 * refuses that, says so once and unmaps them one by one (so the run goes on).
 */
static int unmap_range(struct exp *x, uint64_t i, uint64_t n)
{
	static bool told;
	CUresult res = x->b.drv.cuMemUnmap(x->va[i], n * x->size);
	uint64_t k;

	if (res == CUDA_SUCCESS)
		return 0;
	if (!told) {
		printf("     one cuMemUnmap over %" PRIu64 " mappings refused (CUresult %d): "
		       "unmapped one by one instead\n",
		       n, (int)res);
		told = true;
	}
	for (k = i; k < i + n; k++)
		CU(x, x->b.drv.cuMemUnmap(x->va[k], x->size));
	return 0;
}

static int release(struct exp *x, const struct exp_var *v)
{
	uint64_t i;

	if (v->threads > 1)
		return release_threads(x, v->threads);
	if (v->range) {
		for (i = 0; i < x->n; i += x->resv_len[0] / x->size) /* same-size reservations */
			if (unmap_range(x, i,
					x->resv_len[0] / x->size < x->n - i ?
						x->resv_len[0] / x->size :
						x->n - i))
				return -1;
		for (i = 0; i < x->n; i++)
			CU(x, x->b.drv.cuMemRelease(x->h[i]));
		return 0;
	}
	if (v->split) {
		uint64_t t0 = bench_now_ns();

		for (i = 0; i < x->n; i++)
			CU(x, x->b.drv.cuMemUnmap(x->va[i], x->size));
		x->unmap_ns = bench_now_ns() - t0;
		for (i = 0; i < x->n; i++)
			CU(x, x->b.drv.cuMemRelease(x->h[i]));
		return 0;
	}
	for (i = 0; i < x->n; i++) {
		CU(x, x->b.drv.cuMemUnmap(x->va[i], x->size));
		CU(x, x->b.drv.cuMemRelease(x->h[i]));
	}
	return 0;
}

static int run_var(struct exp *x, const struct exp_var *v)
{
	static const char *const lname[] = { "own", "arena", "one" };
	uint64_t tb[EXP_REPS], tr[EXP_REPS], tu[EXP_REPS], t0, t1, t2;
	unsigned int rep;

	snprintf(x->b.step, sizeof(x->b.step), "variant %s", v->id);
	for (rep = 0; rep <= EXP_REPS; rep++) {
		if (reserve(x, v->layout))
			return -1;
		t0 = bench_now_ns();
		if (back(x, v))
			return -1;
		t1 = bench_now_ns();
		if (v->touch && touch(x))
			return -1;
		t2 = bench_now_ns();
		if (release(x, v))
			return -1;
		if (rep) {
			tb[rep - 1] = t1 - t0;
			tr[rep - 1] = bench_now_ns() - t2;
			tu[rep - 1] = x->unmap_ns;
		}
		if (unreserve(x))
			return -1;
	}
	printf("%-4s %-5s gdr=%d touch=%d threads=%u order=%-11s back %8.2f ms (%6.2f us/handle)  "
	       "release "
	       "%8.2f ms (%6.2f us/handle)\n",
	       v->id, lname[v->layout], v->gdr && x->b.gdr, v->touch, v->threads ? v->threads : 1,
	       v->range ? "range" :
	       v->split ? "split" :
			  "interleaved",
	       bench_median_ns(tb, EXP_REPS) / 1e6,
	       bench_median_ns(tb, EXP_REPS) / 1e3 / (double)x->n,
	       bench_median_ns(tr, EXP_REPS) / 1e6,
	       bench_median_ns(tr, EXP_REPS) / 1e3 / (double)x->n);
	if (v->split && v->threads <= 1)
		printf("     of which unmaps %8.2f ms\n", bench_median_ns(tu, EXP_REPS) / 1e6);
	return 0;
}

#define EXP_LANES 4
#define EXP_BATCH 128

/* C1-C3: the copies of a HOST pause into host, with no release, releases after, or overlapped. */
static int run_copy(struct exp *x, void *host, int mode)
{
	static const char *const what[] = { "copies only",
					    "copies, then release all",
					    "copies with batch releases overlapped",
					    "as C3, one unmap per batch",
					    "as C2, one unmap per reservation",
					    "as C4, releases after the copies" };
	const struct exp_var vr = { "C", L_ARENA, true, false, false, 1, true };
	const struct exp_var v = { "C", L_ARENA, true, false, false, 1 };
	CUstream s[EXP_LANES];
	CUevent *ev;
	uint64_t t[EXP_REPS], t0, i, nb = (x->n + EXP_BATCH - 1) / EXP_BATCH;
	unsigned int rep, q;

	ev = calloc(nb * EXP_LANES, sizeof(*ev));
	if (!ev)
		return -1;
	for (q = 0; q < EXP_LANES; q++)
		CU(x, x->b.drv.cuStreamCreate(&s[q], CU_STREAM_NON_BLOCKING));
	for (i = 0; i < nb * EXP_LANES; i++)
		CU(x, x->b.drv.cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
	for (rep = 0; rep <= EXP_REPS; rep++) {
		if (reserve(x, L_ARENA) || back(x, &v) || touch(x))
			return -1;
		t0 = bench_now_ns();
		for (i = 0; i < x->n; i++) {
			CU(x, x->b.drv.cuMemcpyDtoHAsync((char *)host + i * x->size, x->va[i],
							 x->size, s[i % EXP_LANES]));
			if ((mode == 2 || mode == 3 || mode == 5) &&
			    ((i + 1) % EXP_BATCH == 0 || i + 1 == x->n))
				for (q = 0; q < EXP_LANES; q++)
					CU(x, x->b.drv.cuEventRecord(
						      ev[i / EXP_BATCH * EXP_LANES + q], s[q]));
		}
		if (mode == 2 || mode == 3 || mode == 5) {
			uint64_t k, lo, hi;

			for (k = 0; k < nb; k++) {
				for (q = 0; q < EXP_LANES; q++)
					CU(x, x->b.drv.cuEventSynchronize(ev[k * EXP_LANES + q]));
				lo = k * EXP_BATCH;
				hi = lo + EXP_BATCH < x->n ? lo + EXP_BATCH : x->n;
				/* arena carving is in order: a batch inside one arena is one range
				 */
				if (mode != 2 && unmap_range(x, lo, hi - lo))
					return -1;
				for (; lo < hi && mode != 5; lo++) {
					if (mode == 2)
						CU(x, x->b.drv.cuMemUnmap(x->va[lo], x->size));
					CU(x, x->b.drv.cuMemRelease(x->h[lo]));
				}
			}
			for (k = 0; k < x->n && mode == 5; k++)
				CU(x, x->b.drv.cuMemRelease(x->h[k]));
		} else {
			for (q = 0; q < EXP_LANES; q++)
				CU(x, x->b.drv.cuStreamSynchronize(s[q]));
			if (mode == 1 && release(x, &v))
				return -1;
			if (mode == 4 && release(x, &vr))
				return -1;
		}
		if (rep)
			t[rep - 1] = bench_now_ns() - t0;
		if (mode == 0 && release(x, &v))
			return -1;
		if (unreserve(x))
			return -1;
	}
	for (i = 0; i < nb * EXP_LANES; i++)
		x->b.drv.cuEventDestroy(ev[i]);
	for (q = 0; q < EXP_LANES; q++)
		x->b.drv.cuStreamDestroy(s[q]);
	free(ev);
	printf("C%d   %-40s %8.2f ms  %6.2f GB/s\n", mode + 1, what[mode],
	       bench_median_ns(t, EXP_REPS) / 1e6,
	       (double)(x->n * x->size) / bench_median_ns(t, EXP_REPS));
	return 0;
}

static int run_copies(struct exp *x)
{
	uint64_t bytes = x->n * x->size;
	void *host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc = 0, m;
	CUresult res;

	if (host == MAP_FAILED)
		return bench_cu_fail(&x->b, CUDA_ERROR_OUT_OF_MEMORY, "mmap");
	madvise(host, bytes, MADV_HUGEPAGE);
	bench_touch(host, bytes, 16);
	res = x->b.drv.cuMemHostRegister(host, bytes, 0);
	if (res != CUDA_SUCCESS) {
		rc = bench_cu_fail(&x->b, res, "cuMemHostRegister");
		goto out;
	}
	for (m = 0; m < 6 && !rc; m++)
		rc = run_copy(x, host, m);
	x->b.drv.cuMemHostUnregister(host);
out:
	munmap(host, bytes);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct exp_var vars[] = {
		{ "V1", L_OWN, true, false, false },
		{ "V2", L_ARENA, true, false, false },
		{ "V3", L_ONE, true, false, false },
		{ "V4", L_OWN, true, true, false },
		{ "V5", L_ARENA, true, true, false },
		{ "V6", L_OWN, false, false, false },
		{ "V7", L_ARENA, false, false, false },
		{ "V8", L_ARENA, true, false, true },
		{ "V9", L_OWN, true, false, true },
		{ "V10", L_ARENA, false, true, true },
		{ "V11", L_ARENA, true, false, false, 2 },
		{ "V12", L_ARENA, true, false, false, 4 },
		{ "V13", L_ARENA, true, false, false, 8 },
		{ "V14", L_ARENA, true, true, false, 4 },
		{ "V15", L_OWN, true, false, false, 4 },
		{ "V16", L_ARENA, true, false, false, 1, true },
		{ "V17", L_ONE, true, false, false, 1, true },
	};
	struct exp *x = calloc(1, sizeof(*x));
	uint64_t count, size;
	size_t i;
	int rc = 1;

	if (!x)
		return 1;
	x->b.cycles = EXP_REPS + 1;
	if (bench_exp_start(&x->b, EXP_TOOL, argc, argv, BENCH_DEFAULT_SIM_SCALE))
		goto out;
	bench_scale(&x->b, 2048, 8ull << 20, &count, &size);
	x->n = count;
	x->size = size;
	x->va = calloc(count, sizeof(*x->va));
	x->h = calloc(count, sizeof(*x->h));
	x->resv = calloc(count, sizeof(*x->resv));
	x->resv_len = calloc(count, sizeof(*x->resv_len));
	if (!x->va || !x->h || !x->resv || !x->resv_len)
		goto out;
	printf("date %s, device %s, %" PRIu64 " handles of %" PRIu64 " MiB, gdr supported %d, "
	       "medians of %u after a warm-up\n",
	       x->b.date, x->b.device_name, x->n, x->size >> 20, x->b.gdr, EXP_REPS);
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (run_var(x, &vars[i]))
			break;
	if (!x->b.failed)
		run_copies(x);
	rc = x->b.failed;
	bench_close_driver(&x->b);
	printf(EXP_TOOL ": %s%s\n", rc ? "FAIL: " : "PASS", rc ? x->b.failure : "");
out:
	free(x->va);
	free(x->h);
	free(x->resv);
	free(x->resv_len);
	free(x);
	return rc;
}
