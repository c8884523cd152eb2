/* SPDX-License-Identifier: MIT */
/*
 * cms-exp-frozen.c - an experiment, not a benchmark: where a frozen region's
 * distance to its targets comes from (issue 27 item 3). On an H100
 * (2026-12-05) cms-bench (o) measured 16 x 1 GiB frozen: pause 10.07 ms
 * against 5.86 ms for a DISCARD pause of the same layout (1.72x; target
 * 1.2x), resume 0.85x of the host-to-device floor (target 0.95x) while (c),
 * the same layout retained but not frozen, resumed at 0.95x. The read-only
 * step alone took 1.4 ms.
 *
 * Raw driver calls in the device's primary context, N handles of S bytes in
 * one reservation, each handle created, mapped, given read-write access and
 * written (cuMemsetD8Async), then:
 *
 *   R1  unmap + release each (read-write mappings)
 *   R2  as R1, the mappings made read-only first (outside the timing)
 *   R3  as R2, made read-write again inside the timing, then released
 *   R4  as R1 while N*S bytes of host memory are page-locked
 *   R5  as R2 while N*S bytes of host memory are page-locked
 *
 * and, with the host memory page-locked, host-to-device copies of every
 * handle (one cuMemcpyHtoDAsync each, round-robin on 4 streams, as a resume
 * copies), timed from the first enqueue to the last stream synchronized:
 *
 *   H1  right after a device-to-host copy of the same bytes (a (c) cycle)
 *   H2  after 10 ms idle        H3  after 100 ms idle      H4  after 1000 ms idle
 *   H5  as H2, then every mapping read-only (the frozen resume's last step)
 *   H6  right after a host-to-device copy of the same bytes, no device-to-host copy between
 *       (a frozen region's steady resume: its backups are not written again)
 *
 * and, as a frozen region's release is made (2026-12-05: its cuMemRelease calls took 7-9.5 ms
 * in the library against 5.1 ms for a DISCARD region's):
 *
 *   R6  handles filled by host-to-device copies, each mapping made read-only on its own
 *   R7  as R6, left read-write
 *   R8  handles written by cuMemsetD8Async, each mapping made read-only on its own
 *
 * Every time is the median of EXP_REPS repetitions after a warm-up. Exits 0
 * when every call passed, 1 otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"

#define EXP_TOOL "cms-exp-frozen"
#define EXP_REPS 5u
#define EXP_LANES 4

struct exp {
	struct bench b;
	uint64_t n, size;
	CUdeviceptr va;
	CUmemGenericAllocationHandle *h;
	CUstream s[EXP_LANES];
	void *host;
};

#define CU(x, call)                                                 \
	do {                                                        \
		CUresult res_ = (call);                             \
		if (res_ != CUDA_SUCCESS)                           \
			return bench_cu_fail(&(x)->b, res_, #call); \
	} while (0)

static int set_access(struct exp *x, unsigned long long flags)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;

	bench_fill_prop(&x->b, &prop, &acc);
	acc.flags = flags;
	CU(x, x->b.drv.cuMemSetAccess(x->va, x->n * x->size, &acc, 1));
	return 0;
}

static int back(struct exp *x)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	uint64_t i;

	bench_fill_prop(&x->b, &prop, &acc);
	prop.allocFlags.gpuDirectRDMACapable = (unsigned char)x->b.gdr;
	for (i = 0; i < x->n; i++) {
		CU(x, x->b.drv.cuMemCreate(&x->h[i], x->size, &prop, 0));
		CU(x, x->b.drv.cuMemMap(x->va + i * x->size, x->size, 0, x->h[i], 0));
		CU(x, x->b.drv.cuMemSetAccess(x->va + i * x->size, x->size, &acc, 1));
		CU(x,
		   x->b.drv.cuMemsetD8Async(x->va + i * x->size, (unsigned char)i, x->size, NULL));
	}
	CU(x, x->b.drv.cuCtxSynchronize());
	return 0;
}

static int release(struct exp *x)
{
	uint64_t i;

	for (i = 0; i < x->n; i++) {
		CU(x, x->b.drv.cuMemUnmap(x->va + i * x->size, x->size));
		CU(x, x->b.drv.cuMemRelease(x->h[i]));
	}
	return 0;
}

static int copies(struct exp *x, bool out);

/* Each mapping read-only on its own (as the library's region access does). */
static int set_each_read_only(struct exp *x)
{
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	uint64_t i;

	bench_fill_prop(&x->b, &prop, &acc);
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
	for (i = 0; i < x->n; i++)
		CU(x, x->b.drv.cuMemSetAccess(x->va + i * x->size, x->size, &acc, 1));
	return 0;
}

/* R1-R8: read_only before the timing (each: mapping by mapping); fill: by host-to-device
 * copies; thaw (read-write again) inside the timing. */
static int run_release_as(struct exp *x, const char *id, bool read_only, bool thaw, bool each,
			  bool fill)
{
	uint64_t t[EXP_REPS], t0;
	unsigned int rep;

	snprintf(x->b.step, sizeof(x->b.step), "variant %s", id);
	for (rep = 0; rep <= EXP_REPS; rep++) {
		if (back(x) || (fill && copies(x, false)))
			return -1;
		if (read_only &&
		    (each ? set_each_read_only(x) : set_access(x, CU_MEM_ACCESS_FLAGS_PROT_READ)))
			return -1;
		t0 = bench_now_ns();
		if (thaw && set_access(x, CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return -1;
		if (release(x))
			return -1;
		if (rep)
			t[rep - 1] = bench_now_ns() - t0;
	}
	printf("%-3s release%s%s%s%s%s  %8.3f ms\n", id, read_only ? ", read-only" : ", read-write",
	       each ? " (each mapping)" : "", fill ? ", filled by copies" : "",
	       thaw ? " -> read-write inside" : "", x->host ? ", host page-locked" : "",
	       bench_median_ns(t, EXP_REPS) / 1e6);
	return 0;
}

static int run_release(struct exp *x, const char *id, bool read_only, bool thaw)
{
	return run_release_as(x, id, read_only, thaw, false, false);
}

static int copies(struct exp *x, bool out)
{
	uint64_t i;
	int q;

	for (i = 0; i < x->n; i++) {
		char *p = (char *)x->host + i * x->size;
		CUdeviceptr d = x->va + i * x->size;

		if (out)
			CU(x, x->b.drv.cuMemcpyDtoHAsync(p, d, x->size, x->s[i % EXP_LANES]));
		else
			CU(x, x->b.drv.cuMemcpyHtoDAsync(d, p, x->size, x->s[i % EXP_LANES]));
	}
	for (q = 0; q < EXP_LANES; q++)
		CU(x, x->b.drv.cuStreamSynchronize(x->s[q]));
	return 0;
}

/* H1-H6: idle_ms after a device-to-host copy of everything (after a host-to-device one: in);
 * freeze: read-only at the end. */
static int run_h2d_as(struct exp *x, const char *id, unsigned int idle_ms, bool freeze, bool in)
{
	struct timespec ts = { idle_ms / 1000, (long)(idle_ms % 1000) * 1000000L };
	uint64_t t[EXP_REPS], tf[EXP_REPS], t0, t1;
	unsigned int rep;

	snprintf(x->b.step, sizeof(x->b.step), "variant %s", id);
	for (rep = 0; rep <= EXP_REPS; rep++) {
		if (copies(x, !in))
			return -1;
		if (idle_ms)
			nanosleep(&ts, NULL);
		t0 = bench_now_ns();
		if (copies(x, false))
			return -1;
		t1 = bench_now_ns();
		if (freeze && set_access(x, CU_MEM_ACCESS_FLAGS_PROT_READ))
			return -1;
		if (rep) {
			t[rep - 1] = bench_now_ns() - t0;
			tf[rep - 1] = bench_now_ns() - t1;
		}
		if (freeze && set_access(x, CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
			return -1;
	}
	printf("%-3s host-to-device after %4u ms idle%s%s  %8.3f ms  %6.2f GB/s", id, idle_ms,
	       in ? " (after a host-to-device copy)" : "", freeze ? ", then read-only" : "",
	       bench_median_ns(t, EXP_REPS) / 1e6,
	       (double)(x->n * x->size) / bench_median_ns(t, EXP_REPS));
	if (freeze)
		printf("  (read-only step %.3f ms)", bench_median_ns(tf, EXP_REPS) / 1e6);
	printf("\n");
	return 0;
}

static int run_h2d(struct exp *x, const char *id, unsigned int idle_ms, bool freeze)
{
	return run_h2d_as(x, id, idle_ms, freeze, false);
}

static int run_all(struct exp *x)
{
	uint64_t bytes = x->n * x->size;
	void *host;
	CUresult res;
	int q, rc;

	if (run_release(x, "R1", false, false) || run_release(x, "R2", true, false) ||
	    run_release(x, "R3", true, true))
		return -1;
	host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED)
		return bench_cu_fail(&x->b, CUDA_ERROR_OUT_OF_MEMORY, "mmap");
	madvise(host, bytes, MADV_HUGEPAGE);
	bench_touch(host, bytes, 16);
	res = x->b.drv.cuMemHostRegister(host, bytes, 0);
	if (res != CUDA_SUCCESS) {
		munmap(host, bytes);
		return bench_cu_fail(&x->b, res, "cuMemHostRegister");
	}
	x->host = host;
	rc = run_release(x, "R4", false, false) || run_release(x, "R5", true, false);
	for (q = 0; q < EXP_LANES && !rc; q++)
		if ((res = x->b.drv.cuStreamCreate(&x->s[q], CU_STREAM_NON_BLOCKING)) !=
		    CUDA_SUCCESS)
			rc = bench_cu_fail(&x->b, res, "cuStreamCreate");
	if (!rc)
		rc = run_release_as(x, "R6", true, false, true, true) ||
		     run_release_as(x, "R7", false, false, false, true) ||
		     run_release_as(x, "R8", true, false, true, false);
	if (!rc)
		rc = back(x);
	if (!rc)
		rc = run_h2d(x, "H1", 0, false) || run_h2d(x, "H2", 10, false) ||
		     run_h2d(x, "H3", 100, false) || run_h2d(x, "H4", 1000, false) ||
		     run_h2d(x, "H5", 10, true) || run_h2d_as(x, "H6", 10, false, true) ||
		     release(x);
	for (q = 0; q < EXP_LANES; q++)
		if (x->s[q])
			x->b.drv.cuStreamDestroy(x->s[q]);
	x->b.drv.cuMemHostUnregister(host);
	munmap(host, bytes);
	x->host = NULL;
	return rc;
}

int main(int argc, char **argv)
{
	struct exp *x = calloc(1, sizeof(*x));
	uint64_t count, size;
	int rc = 1;

	if (!x)
		return 1;
	x->b.cycles = EXP_REPS + 1;
	if (bench_exp_start(&x->b, EXP_TOOL, argc, argv, BENCH_DEFAULT_SIM_SCALE))
		goto out;
	bench_scale(&x->b, 16, 1ull << 30, &count, &size);
	x->n = count;
	x->size = size;
	x->h = calloc(count, sizeof(*x->h));
	if (!x->h)
		goto out;
	printf("date %s, device %s, %" PRIu64 " handles of %" PRIu64 " MiB, medians of %u after a "
	       "warm-up\n",
	       x->b.date, x->b.device_name, x->n, x->size >> 20, EXP_REPS);
	snprintf(x->b.step, sizeof(x->b.step), "reserve");
	if (x->b.drv.cuMemAddressReserve(&x->va, x->n * x->size, 0, 0, 0) != CUDA_SUCCESS)
		bench_cu_fail(&x->b, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAddressReserve");
	else {
		run_all(x);
		x->b.drv.cuMemAddressFree(x->va, x->n * x->size);
	}
	rc = x->b.failed;
	bench_close_driver(&x->b);
	printf(EXP_TOOL ": %s%s\n", rc ? "FAIL: " : "PASS", rc ? x->b.failure : "");
out:
	free(x->h);
	free(x);
	return rc;
}
