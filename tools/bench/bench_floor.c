/* SPDX-License-Identifier: MIT */
/*
 * bench_floor.c - the floors of cms-bench, measured with the tool's own
 * driver table in the device's primary context:
 *  - VMM: cuMemCreate + cuMemMap + cuMemSetAccess of N handles of the
 *    workload's handle size into one reservation ("back"), and cuMemUnmap +
 *    cuMemRelease of them ("release"), with the allocation properties the
 *    library uses (src/vmm.c). One cuMemSetAccess per mapping.
 *  - copies: fresh pageable memory faulted in on several threads and
 *    registered with cuMemHostRegister, then cuMemcpyDtoHAsync /
 *    cuMemcpyHtoDAsync in chunks on one stream, and both directions at once
 *    on two streams.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#define BENCH_COPY_BYTES (4ull << 30)
#define BENCH_COPY_CHUNK (256ull << 20)
#define BENCH_COPY_MIN_CHUNK (1ull << 20)
#define BENCH_TOUCH_THREADS 16u

void bench_scale(const struct bench *b, uint64_t count0, uint64_t size0, uint64_t *count,
		 uint64_t *size)
{
	uint64_t g = b->granularity, total = count0 * size0 / b->scale, s, n;

	s = size0 / b->scale;
	s -= s % g;
	if (s < g)
		s = g;
	n = (total + s / 2) / s;
	if (n < 1)
		n = 1;
	*count = n;
	*size = s;
}

/* Device memory for need bytes (and, on the simulation, host RAM for host_need). */
int bench_room(struct bench *b, const char *what, uint64_t need, uint64_t host_need)
{
	size_t fr = 0, tot = 0;
	uint64_t avail;
	char b1[32], b2[32];
	CUresult res = b->drv.cuMemGetInfo(&fr, &tot);

	if (res != CUDA_SUCCESS)
		return bench_cu_fail(b, res, "cuMemGetInfo");
	if (need > fr) {
		bench_fail(b, "%s needs %s of device memory, %s is free; use a larger --scale",
			   what, bench_fmt_bytes(b1, sizeof(b1), need),
			   bench_fmt_bytes(b2, sizeof(b2), fr));
		return -1;
	}
	avail = bench_mem_available();
	if (b->sim)
		host_need += need; /* simulated device memory is host RAM */
	if (avail && host_need > avail) {
		bench_fail(b,
			   "%s needs about %s of host RAM, %s is available; use a larger --scale",
			   what, bench_fmt_bytes(b1, sizeof(b1), host_need),
			   bench_fmt_bytes(b2, sizeof(b2), avail));
		return -1;
	}
	return 0;
}

void bench_fill_prop(const struct bench *b, CUmemAllocationProp *prop, CUmemAccessDesc *acc)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = b->dev;
	prop->allocFlags.gpuDirectRDMACapable = (unsigned char)b->gdr;
	memset(acc, 0, sizeof(*acc));
	acc->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc->location.id = b->dev;
	acc->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

/* Unmaps and releases whatever st[] says is left; reports the first failure. */
void bench_vmm_undo(struct bench *b, CUdeviceptr base, uint64_t size,
		    CUmemGenericAllocationHandle *h, unsigned char *st, uint64_t n)
{
	CUresult res;
	uint64_t i;

	for (i = 0; i < n; i++) {
		if (st[i] == BENCH_H_MAPPED) {
			res = b->drv.cuMemUnmap(base + i * size, size);
			if (res != CUDA_SUCCESS)
				bench_cu_fail(b, res, "cleanup, cuMemUnmap");
		}
		if (st[i] != BENCH_H_NONE) {
			res = b->drv.cuMemRelease(h[i]);
			if (res != CUDA_SUCCESS)
				bench_cu_fail(b, res, "cleanup, cuMemRelease");
		}
		st[i] = BENCH_H_NONE;
	}
}

int bench_vmm_back(struct bench *b, CUdeviceptr base, uint64_t size,
		   CUmemGenericAllocationHandle *h, unsigned char *st, uint64_t n,
		   const CUmemAllocationProp *prop, const CUmemAccessDesc *acc)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		BENCH_CU(b, err, cuMemCreate, &h[i], size, prop, 0);
		st[i] = BENCH_H_CREATED;
		BENCH_CU(b, err, cuMemMap, base + i * size, size, 0, h[i], 0);
		st[i] = BENCH_H_MAPPED;
		BENCH_CU(b, err, cuMemSetAccess, base + i * size, size, acc, 1);
	}
	return 0;
err:
	return -1;
}

int bench_vmm_release(struct bench *b, CUdeviceptr base, uint64_t size,
		      CUmemGenericAllocationHandle *h, unsigned char *st, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		BENCH_CU(b, err, cuMemUnmap, base + i * size, size);
		st[i] = BENCH_H_CREATED;
		BENCH_CU(b, err, cuMemRelease, h[i]);
		st[i] = BENCH_H_NONE;
	}
	return 0;
err:
	return -1;
}

/* Timed repetitions of each floor: --cycles - 1 (the median's count), 1 to BENCH_FLOOR_REPS. */
static unsigned int bench_floor_reps(const struct bench *b)
{
	unsigned int n = b->cycles > 1 ? b->cycles - 1 : 1;

	return n < BENCH_FLOOR_REPS ? n : BENCH_FLOOR_REPS;
}

int bench_vmm_floor(struct bench *b, struct bench_vmm_floor *f)
{
	uint64_t back[BENCH_FLOOR_REPS], rel[BENCH_FLOOR_REPS], t0, t1, t2;
	unsigned int reps = bench_floor_reps(b);
	CUmemGenericAllocationHandle *h = NULL;
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	CUdeviceptr base = 0;
	unsigned char *st = NULL;
	char what[96], b1[32], b2[32];
	unsigned int r;
	int rc = -1;

	snprintf(what, sizeof(what), "the VMM floor %" PRIu64 " x %s", f->count,
		 bench_fmt_bytes(b1, sizeof(b1), f->size));
	snprintf(b->step, sizeof(b->step), "%s", what);
	if (bench_room(b, what, f->count * f->size, 0))
		return -1;
	h = calloc(f->count, sizeof(*h));
	st = calloc(f->count, sizeof(*st));
	if (!h || !st) {
		bench_fail(b, "%s: out of host memory", what);
		goto out;
	}
	bench_fill_prop(b, &prop, &acc);
	BENCH_CU(b, out, cuMemAddressReserve, &base, f->count * f->size, 0, 0, 0);
	/* rep 0 is a warm-up */
	for (r = 0; r <= reps; r++) {
		bench_gap(b);
		t0 = bench_now_ns();
		if (bench_vmm_back(b, base, f->size, h, st, f->count, &prop, &acc))
			goto err_undo;
		t1 = bench_now_ns();
		if (bench_vmm_release(b, base, f->size, h, st, f->count))
			goto err_undo;
		t2 = bench_now_ns();
		if (r) {
			back[r - 1] = t1 - t0;
			rel[r - 1] = t2 - t1;
		}
	}
	f->reps = reps;
	f->back_ms = bench_median_ns(back, f->reps) / 1e6;
	f->release_ms = bench_median_ns(rel, f->reps) / 1e6;
	f->back_min_ms = f->back_ms;
	f->release_min_ms = f->release_ms;
	for (r = 0; r < f->reps; r++) {
		if ((double)back[r] / 1e6 < f->back_min_ms)
			f->back_min_ms = (double)back[r] / 1e6;
		if ((double)rel[r] / 1e6 < f->release_min_ms)
			f->release_min_ms = (double)rel[r] / 1e6;
	}
	f->measured = true;
	printf("  VMM %5" PRIu64 " x %-9s (%s): back %9.3f ms, release %9.3f ms  (median of %u; "
	       "min %.3f / %.3f)\n",
	       f->count, bench_fmt_bytes(b1, sizeof(b1), f->size),
	       bench_fmt_bytes(b2, sizeof(b2), f->count * f->size), f->back_ms, f->release_ms,
	       f->reps, f->back_min_ms, f->release_min_ms);
	rc = 0;
	goto out_free;

err_undo:
	bench_vmm_undo(b, base, f->size, h, st, f->count);
out_free:
	if (base) {
		CUresult res = b->drv.cuMemAddressFree(base, f->count * f->size);

		if (res != CUDA_SUCCESS && !rc)
			rc = bench_cu_fail(b, res, "cuMemAddressFree");
	}
out:
	free(st);
	free(h);
	return rc;
}

/* Enqueues bytes in chunks: dir 0 D2H, 1 H2D, 2 both (D2H on s0 from d, H2D on s1 to d2). */
static int bench_copy_once(struct bench *b, int dir, char *host, char *host2, CUdeviceptr d,
			   CUdeviceptr d2, CUstream s0, CUstream s1, uint64_t *ns)
{
	const struct bench_copy_floor *f = &b->copy;
	uint64_t off, n, t0 = bench_now_ns();

	for (off = 0; off < f->bytes; off += n) {
		n = f->bytes - off < f->chunk ? f->bytes - off : f->chunk;
		if (dir != 1)
			BENCH_CU(b, err, cuMemcpyDtoHAsync, host + off, d + off, n, s0);
		if (dir == 1)
			BENCH_CU(b, err, cuMemcpyHtoDAsync, d + off, host + off, n, s0);
		if (dir == 2)
			BENCH_CU(b, err, cuMemcpyHtoDAsync, d2 + off, host2 + off, n, s1);
	}
	BENCH_CU(b, err, cuStreamSynchronize, s0);
	if (dir == 2)
		BENCH_CU(b, err, cuStreamSynchronize, s1);
	*ns = bench_now_ns() - t0;
	return 0;
err:
	return -1;
}

int bench_copy_floor(struct bench *b)
{
	struct bench_copy_floor *f = &b->copy;
	uint64_t d2h[BENCH_FLOOR_REPS], h2d[BENCH_FLOOR_REPS], bi[BENCH_FLOOR_REPS], t0, ns;
	CUmemGenericAllocationHandle h[2];
	unsigned char st[2] = { BENCH_H_NONE, BENCH_H_NONE };
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	CUdeviceptr base = 0;
	CUstream s[2] = { NULL, NULL };
	char *host = MAP_FAILED, b1[32], b2[32];
	bool registered = false;
	unsigned int r, i;
	CUresult res;
	int rc = -1;

	f->bytes = BENCH_COPY_BYTES / b->scale;
	f->bytes -= f->bytes % b->granularity;
	if (f->bytes < b->granularity)
		f->bytes = b->granularity;
	f->chunk = BENCH_COPY_CHUNK / b->scale;
	if (f->chunk < BENCH_COPY_MIN_CHUNK)
		f->chunk = BENCH_COPY_MIN_CHUNK;
	if (f->chunk > f->bytes)
		f->chunk = f->bytes;
	snprintf(b->step, sizeof(b->step), "the copy floor");
	if (bench_room(b, "the copy floor", 2 * f->bytes, 2 * f->bytes))
		return -1;

	/* two device buffers, one handle each */
	bench_fill_prop(b, &prop, &acc);
	BENCH_CU(b, out, cuMemAddressReserve, &base, 2 * f->bytes, 0, 0, 0);
	for (i = 0; i < 2; i++) {
		BENCH_CU(b, out, cuMemCreate, &h[i], f->bytes, &prop, 0);
		st[i] = BENCH_H_CREATED;
		BENCH_CU(b, out, cuMemMap, base + i * f->bytes, f->bytes, 0, h[i], 0);
		st[i] = BENCH_H_MAPPED;
	}
	BENCH_CU(b, out, cuMemSetAccess, base, 2 * f->bytes, &acc, 1);

	/* two host buffers in one mapping: fresh pages, faulted in, then registered */
	host = mmap(NULL, 2 * f->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED) {
		bench_fail(b, "copy floor: mmap of %s failed",
			   bench_fmt_bytes(b1, sizeof(b1), 2 * f->bytes));
		goto out;
	}
	t0 = bench_now_ns();
	f->touch_threads = bench_touch(host, 2 * f->bytes, BENCH_TOUCH_THREADS);
	f->touch_s = (double)(bench_now_ns() - t0) / 1e9;
	t0 = bench_now_ns();
	BENCH_CU(b, out, cuMemHostRegister, host, 2 * f->bytes, 0);
	f->register_s = (double)(bench_now_ns() - t0) / 1e9;
	registered = true;
	BENCH_CU(b, out, cuStreamCreate, &s[0], CU_STREAM_NON_BLOCKING);
	BENCH_CU(b, out, cuStreamCreate, &s[1], CU_STREAM_NON_BLOCKING);

	/* warm-up: every direction once */
	if (bench_copy_once(b, 2, host, host + f->bytes, base, base + f->bytes, s[0], s[1], &ns) ||
	    bench_copy_once(b, 1, host, NULL, base, 0, s[0], NULL, &ns))
		goto out;
	f->reps = bench_floor_reps(b);
	for (r = 0; r < f->reps; r++) {
		if (bench_copy_once(b, 0, host, NULL, base, 0, s[0], NULL, &d2h[r]) ||
		    bench_copy_once(b, 1, host, NULL, base, 0, s[0], NULL, &h2d[r]) ||
		    bench_copy_once(b, 2, host, host + f->bytes, base, base + f->bytes, s[0], s[1],
				    &bi[r]))
			goto out;
	}
	/* bytes per ns is 1e9 bytes per second */
	f->d2h_gbs = (double)f->bytes / bench_median_ns(d2h, f->reps);
	f->h2d_gbs = (double)f->bytes / bench_median_ns(h2d, f->reps);
	f->bidir_gbs = 2.0 * (double)f->bytes / bench_median_ns(bi, f->reps);
	f->measured = true;
	printf("  pinned host memory: 2 x %s of fresh pages touched on %u threads in %.3f s "
	       "(%.1f GB/s), cuMemHostRegister %.3f s (%.1f GB/s)\n",
	       bench_fmt_bytes(b1, sizeof(b1), f->bytes), f->touch_threads, f->touch_s,
	       2.0 * (double)f->bytes / 1e9 / f->touch_s, f->register_s,
	       2.0 * (double)f->bytes / 1e9 / f->register_s);
	printf("  pinned copies of %s in %s chunks: D2H %.2f GB/s, H2D %.2f GB/s, both at once "
	       "%.2f GB/s  (median of %u)\n",
	       bench_fmt_bytes(b1, sizeof(b1), f->bytes), bench_fmt_bytes(b2, sizeof(b2), f->chunk),
	       f->d2h_gbs, f->h2d_gbs, f->bidir_gbs, f->reps);
	rc = 0;
out:
	for (i = 0; i < 2; i++) {
		if (!s[i])
			continue;
		res = b->drv.cuStreamDestroy(s[i]);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cleanup, cuStreamDestroy");
	}
	if (registered) {
		res = b->drv.cuMemHostUnregister(host);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cleanup, cuMemHostUnregister");
	}
	if (host != MAP_FAILED)
		munmap(host, 2 * f->bytes);
	bench_vmm_undo(b, base, f->bytes, h, st, 2);
	if (base) {
		res = b->drv.cuMemAddressFree(base, 2 * f->bytes);
		if (res != CUDA_SUCCESS)
			rc = bench_cu_fail(b, res, "cleanup, cuMemAddressFree");
	}
	return rc;
}
