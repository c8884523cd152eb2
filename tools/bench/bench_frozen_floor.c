/* SPDX-License-Identifier: MIT */
/*
 * bench_frozen_floor.c - the floors of workload (o) measured in its own
 * conditions, with the frozen region paused: raw driver calls, no library
 * call but cms_backup_get.
 *
 * On an H100 (2026-12-05) the library's frozen pause made the DISCARD pause's
 * driver calls, yet its cuMemRelease calls took 7-9.5 ms against 5.1 ms; and
 * its resume's copies ran at 0.90x of the pinned host-to-device floor while
 * (c)'s ran at 0.98x, its host work ~2 ms of ~350 ms (lab/exp-frozen). The
 * floors of the DISCARD layout and of bench_floor.c are measured on fresh
 * handles and a fresh buffer. These are measured on what the frozen cycles
 * have:
 *
 *   h2d      the same number of handles of the same size, created, mapped
 *            read-write and filled by cuMemcpyHtoDAsync from the region's own
 *            backups (cms_backup_get: page-locked, not written since the first
 *            pause), one copy per allocation round-robin on 4 streams, timed
 *            from the first enqueue to the last stream synchronized
 *   release  then each mapping made read-only (cuMemSetAccess, outside the
 *            timing) and every handle unmapped and released, timed
 *
 * The median of FLOOR_REPS repetitions after a warm-up.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FLOOR_REPS 3u
#define FLOOR_LANES 4

struct floor_run {
	CUmemGenericAllocationHandle *h;
	unsigned char *st;
	CUstream s[FLOOR_LANES];
	void **host;
	CUdeviceptr base;
};

/* One repetition: back, fill from the backups (timed), read-only, release (timed). */
static int floor_rep(struct bench *b, const struct bench_work *w, struct floor_run *f,
		     uint64_t *h2d_ns, uint64_t *release_ns)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	uint64_t i, t0;
	int q;

	bench_fill_prop(b, &prop, &acc);
	if (bench_vmm_back(b, f->base, w->size, f->h, f->st, w->count, &prop, &acc))
		return -1;
	t0 = bench_now_ns();
	for (i = 0; i < w->count; i++)
		BENCH_CU(b, err, cuMemcpyHtoDAsync, f->base + i * w->size, f->host[i], w->size,
			 f->s[i % FLOOR_LANES]);
	for (q = 0; q < FLOOR_LANES; q++)
		BENCH_CU(b, err, cuStreamSynchronize, f->s[q]);
	*h2d_ns = bench_now_ns() - t0;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
	for (i = 0; i < w->count; i++)
		BENCH_CU(b, err, cuMemSetAccess, f->base + i * w->size, w->size, &acc, 1);
	t0 = bench_now_ns();
	if (bench_vmm_release(b, f->base, w->size, f->h, f->st, w->count))
		return -1;
	*release_ns = bench_now_ns() - t0;
	return 0;
err:
	return -1;
}

int bench_frozen_floor(struct bench *b, const struct bench_work *w, cms_context *ctx,
		       const uint64_t *ptr, struct bench_frozen_floor *out)
{
	uint64_t h2d[FLOOR_REPS + 1], rel[FLOOR_REPS + 1], i;
	struct floor_run f = { 0 };
	unsigned int r;
	CUresult res;
	int rc = -1, q;

	snprintf(b->step, sizeof(b->step), "(%c) floors in the frozen region's conditions", w->id);
	f.h = calloc(w->count, sizeof(*f.h));
	f.st = calloc(w->count, sizeof(*f.st));
	f.host = calloc(w->count, sizeof(*f.host));
	if (!f.h || !f.st || !f.host) {
		bench_fail(b, "(%c) floors: out of host memory", w->id);
		goto out;
	}
	for (i = 0; i < w->count; i++) {
		cms_backup_info bi = { .struct_size = sizeof(bi) };

		BENCH_CMS(b, out, cms_backup_get, ctx, ptr[i], &bi);
		if (!bench_check(b, bi.host && bi.base == ptr[i] && bi.size == w->size,
				 "(%c) floors: allocation %" PRIu64
				 " has no host backup of its size",
				 w->id, i))
			goto out;
		f.host[i] = bi.host;
	}
	for (q = 0; q < FLOOR_LANES; q++)
		BENCH_CU(b, out_streams, cuStreamCreate, &f.s[q], CU_STREAM_NON_BLOCKING);
	BENCH_CU(b, out_streams, cuMemAddressReserve, &f.base, w->count * w->size, 0, 0, 0);
	for (r = 0; r <= FLOOR_REPS; r++) /* rep 0 is a warm-up */
		if (floor_rep(b, w, &f, &h2d[r], &rel[r])) {
			/* No copy may still read the backups or write the handles (best effort). */
			for (q = 0; q < FLOOR_LANES; q++)
				(void)b->drv.cuStreamSynchronize(f.s[q]);
			bench_vmm_undo(b, f.base, w->size, f.h, f.st, w->count);
			goto out_base;
		}
	out->h2d_ms = bench_median_ns(h2d + 1, FLOOR_REPS) / 1e6;
	out->release_ms = bench_median_ns(rel + 1, FLOOR_REPS) / 1e6;
	out->measured = true;
	printf("  floors in these conditions (raw driver calls, the region paused; median of %u): "
	       "host-to-device from its backups %.3f ms (%.2f GB/s), release of %" PRIu64
	       " read-only handles filled by copies %.3f ms\n",
	       FLOOR_REPS, out->h2d_ms, (double)(w->count * w->size) / (out->h2d_ms * 1e6),
	       w->count, out->release_ms);
	rc = 0;
out_base:
	res = b->drv.cuMemAddressFree(f.base, w->count * w->size);
	if (res != CUDA_SUCCESS && !rc)
		rc = bench_cu_fail(b, res, "cuMemAddressFree");
out_streams:
	for (q = 0; q < FLOOR_LANES; q++)
		if (f.s[q])
			b->drv.cuStreamDestroy(f.s[q]);
out:
	free(f.host);
	free(f.st);
	free(f.h);
	return rc;
}
