/* SPDX-License-Identifier: MIT */
/*
 * cms-exp-register.c - an experiment, not a benchmark: what bounds a non-retaining HOST pause
 * (issue 17 item 3) before its copies, the kernel making fresh pages or the driver
 * page-locking them. For 16 buffers of 1 GiB (fresh anonymous memory, MADV_HUGEPAGE, as
 * src/store/host.c makes them) and T worker threads, each step timed from the first call to
 * the last thread's end, GB/s (1e9 bytes/s):
 *   populate   MADV_POPULATE_WRITE of every buffer in 32 MiB slices taken in order
 *   register   cuMemHostRegister of every (populated) buffer, one buffer per task
 *   unregister cuMemHostUnregister of every buffer; munmap: then every munmap
 *   both       populate then register, one whole buffer per task (no slices)
 *   regfault   cuMemHostRegister of fresh (unpopulated) buffers: the driver faults them
 *   hostalloc  cuMemHostAlloc of every buffer (the driver's own page-locked memory, no mmap
 *              of ours); hostfree: then cuMemFreeHost of each (n/a where the driver lacks them)
 * and the same from a memfd per buffer (shared memory: the pages are made outside the process's
 * page tables, so faulting them need not contend with registrations' page walks):
 *   mfill      fallocate of every memfd in 32 MiB slices; mpopulate: then each mapped
 *              (MAP_SHARED, MADV_HUGEPAGE) and MADV_POPULATE_WRITE in slices (maps pages that
 *              exist); mregister: cuMemHostRegister of each mapping
 *   mboth      fallocate, populate and register, one whole buffer per task
 * and host memory the driver makes for the virtual memory API (cuMemCreate with a
 * CU_MEM_LOCATION_TYPE_HOST location: page-locked from birth, no registration):
 *   vcreate    cuMemCreate, cuMemAddressReserve, cuMemMap and cuMemSetAccess (the device) of
 *              every buffer, one buffer per task; vrelease: cuMemUnmap, cuMemRelease and
 *              cuMemAddressFree of each
 *   vcopy      one thread's cuMemcpyDtoDAsync of a 1-buffer device source into every buffer,
 *              next to copy: the same source into every registered buffer (cuMemcpyDtoHAsync)
 * and copies without page-locked memory at all (the driver stages pageable copies itself):
 *   pageable   cuMemcpyDtoH of the device source into every buffer in 32 MiB slices taken in
 *              order, into fresh buffers (the copy faults their pages) and into populated ones
 * Raw calls on cms-bench's helpers (the device's primary context pushed on every thread).
 * Usage: cms-exp-register [-S|-G] [-s SCALE] [THREADS...] (default 1 4 8 16).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define SLICE (32ull << 20)

enum step {
	POPULATE,
	REGISTER,
	UNREGISTER,
	BOTH,
	HOSTALLOC,
	HOSTFREE,
	MFILL,
	MBOTH,
	VCREATE,
	VRELEASE,
	PAGEABLE
};

#define CU_MEM_LOCATION_TYPE_HOST 0x2 /* CUDA 12.2+ */

struct exp {
	struct bench b;
	uint64_t n, size;
	char **buf;
	int *fd;			  /* memfd steps: one per buffer, else -1 */
	CUmemGenericAllocationHandle *vh; /* vcreate: each buffer's host handle, else 0 */
	CUdeviceptr *va;		  /* and its reservation, else 0 */
	CUdeviceptr src;		  /* the copies' device source (x->size bytes), else 0 */
	CUmemGenericAllocationHandle src_h;
	CUstream stream;
	enum step step;
	atomic_ulong next;
	atomic_int failed; /* in the step running */
	bool any_failed;   /* in any step so far */
	CUresult (*host_alloc)(void **p, size_t bytes, unsigned int flags); /* cuMemHostAlloc */
	CUresult (*free_host)(void *p);					    /* cuMemFreeHost */
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool populate(char *p, uint64_t len)
{
	return madvise(p, len, MADV_POPULATE_WRITE) == 0;
}

/* Maps memfd k shared at x->buf[k] (MADV_HUGEPAGE: shmem's huge pages where the kernel's
 * shmem_enabled allows advice). */
static bool map_shared(struct exp *x, uint64_t k)
{
	void *p = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd[k], 0);

	if (p == MAP_FAILED)
		return false;
	madvise(p, x->size, MADV_HUGEPAGE);
	x->buf[k] = p;
	return true;
}

/* A handle of x->size bytes at loc (the device's memory or the host's), mapped at a fresh
 * reservation the device may read and write. */
static bool vmm_make(struct exp *x, int loc, CUmemGenericAllocationHandle *h, CUdeviceptr *va)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED };
	CUmemAccessDesc acc = { .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

	prop.location.type = loc;
	prop.location.id = loc == CU_MEM_LOCATION_TYPE_DEVICE ? (int)x->b.dev : 0;
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = (int)x->b.dev;
	if (x->b.drv.cuMemCreate(h, x->size, &prop, 0)) {
		*h = 0;
		return false;
	}
	if (x->b.drv.cuMemAddressReserve(va, x->size, 0, 0, 0)) {
		*va = 0;
		return false;
	}
	return !x->b.drv.cuMemMap(*va, x->size, 0, *h, 0) &&
	       !x->b.drv.cuMemSetAccess(*va, x->size, &acc, 1);
}

/* Undoes what vmm_make made (an unmap of a range not mapped fails harmlessly). */
static void vmm_free(struct exp *x, CUmemGenericAllocationHandle *h, CUdeviceptr *va)
{
	if (*va) {
		x->b.drv.cuMemUnmap(*va, x->size);
		x->b.drv.cuMemAddressFree(*va, x->size);
	}
	if (*h)
		x->b.drv.cuMemRelease(*h);
	*h = 0;
	*va = 0;
}

static void *worker(void *arg)
{
	struct exp *x = arg;
	uint64_t slices = x->size / SLICE ? x->size / SLICE : 1, k;
	bool sliced = x->step == POPULATE || x->step == MFILL || x->step == PAGEABLE;
	uint64_t tasks = sliced ? x->n * slices : x->n;
	CUcontext unused;

	if (x->b.drv.cuCtxPushCurrent(x->b.primary)) {
		atomic_store(&x->failed, 1);
		return NULL;
	}
	while ((k = atomic_fetch_add(&x->next, 1)) < tasks) {
		bool ok = true;

		switch (x->step) {
		case POPULATE: {
			uint64_t len = x->size / slices;

			ok = populate(x->buf[k / slices] + (k % slices) * len, len);
			break;
		}
		case MFILL:
			ok = !fallocate(x->fd[k / slices], 0,
					(off_t)((k % slices) * (x->size / slices)),
					(off_t)(x->size / slices));
			break;
		case MBOTH:
			ok = !fallocate(x->fd[k], 0, 0, (off_t)x->size) && map_shared(x, k);
			/* fall through */
		case BOTH:
			ok = ok && populate(x->buf[k], x->size);
			/* fall through */
		case REGISTER:
			ok = ok && !x->b.drv.cuMemHostRegister(x->buf[k], x->size, 0);
			break;
		case UNREGISTER:
			ok = !x->b.drv.cuMemHostUnregister(x->buf[k]);
			break;
		case HOSTALLOC:
			ok = !x->host_alloc((void **)&x->buf[k], x->size, 0);
			break;
		case HOSTFREE:
			ok = !x->free_host(x->buf[k]);
			x->buf[k] = NULL;
			break;
		case PAGEABLE: {
			uint64_t len = x->size / slices, off = (k % slices) * len;

			ok = x->src &&
			     !x->b.drv.cuMemcpyDtoH(x->buf[k / slices] + off, x->src + off, len);
			break;
		}
		case VCREATE:
			ok = vmm_make(x, CU_MEM_LOCATION_TYPE_HOST, &x->vh[k], &x->va[k]);
			break;
		case VRELEASE:
			vmm_free(x, &x->vh[k], &x->va[k]);
			break;
		}
		if (!ok)
			atomic_store(&x->failed, 1);
	}
	x->b.drv.cuCtxPopCurrent(&unused);
	return NULL;
}

/* Runs step over every buffer on t threads; GB/s, or -1 when a call failed. */
static double run(struct exp *x, enum step step, int t)
{
	pthread_t th[64];
	double t0 = now();
	int i, made = 0;

	x->step = step;
	atomic_store(&x->next, 0);
	atomic_store(&x->failed, 0);
	for (i = 0; i < t; i++)
		if (!pthread_create(&th[i], NULL, worker, x))
			made++;
	for (i = 0; i < made; i++)
		pthread_join(th[i], NULL);
	if (made < t || atomic_load(&x->failed)) {
		x->any_failed = true;
		return -1;
	}
	return (double)(x->n * x->size) / (now() - t0) / 1e9;
}

static bool fresh(struct exp *x)
{
	uint64_t i;

	for (i = 0; i < x->n; i++) {
		x->buf[i] = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				 -1, 0);
		if (x->buf[i] == MAP_FAILED) {
			x->buf[i] = NULL;
			return false;
		}
		madvise(x->buf[i], x->size, MADV_HUGEPAGE);
	}
	return true;
}

static double unmap_all(struct exp *x)
{
	double t0 = now();
	uint64_t i;

	for (i = 0; i < x->n; i++) {
		if (x->buf[i])
			munmap(x->buf[i], x->size);
		if (x->fd[i] >= 0)
			close(x->fd[i]);
		x->fd[i] = -1;
	}
	memset(x->buf, 0, x->n * sizeof(*x->buf));
	return (double)(x->n * x->size) / (now() - t0) / 1e9;
}

/* A memfd of x->size bytes per buffer (no pages yet). */
static bool fresh_fds(struct exp *x)
{
	uint64_t i;

	for (i = 0; i < x->n; i++) {
		x->fd[i] = memfd_create("cms-exp-register", MFD_CLOEXEC);
		if (x->fd[i] < 0 || ftruncate(x->fd[i], (off_t)x->size))
			return false;
	}
	return true;
}

/* One thread copies the device source into every buffer (host: registered pages of buf;
 * else the reservations of va), one copy per buffer on one stream; GB/s, or -1. */
static double copy_all(struct exp *x, bool host)
{
	double t0 = now();
	uint64_t i;

	if (!x->src || !x->stream)
		return -1;
	for (i = 0; i < x->n; i++)
		if (host ? x->b.drv.cuMemcpyDtoHAsync(x->buf[i], x->src, x->size, x->stream) :
			   x->b.drv.cuMemcpyDtoDAsync(x->va[i], x->src, x->size, x->stream))
			return -1;
	if (x->b.drv.cuStreamSynchronize(x->stream))
		return -1;
	return (double)(x->n * x->size) / (now() - t0) / 1e9;
}

/* The cuMemCreate(HOST) steps at t threads (a line of their own; n/a where the driver refuses
 * host locations, which does not fail the run). */
static void vmm_steps(struct exp *x, int t)
{
	bool failed = x->any_failed;
	double make, cp, rel;

	make = run(x, VCREATE, t);
	cp = make < 0 ? -1 : copy_all(x, false);
	rel = run(x, VRELEASE, t);
	x->any_failed = failed;
	if (make < 0) {
		printf("%3d threads, cuMemCreate(HOST): n/a (refused)\n", t);
		return;
	}
	printf("%3d threads, cuMemCreate(HOST): create+map %6.2f  copy D2D %6.2f  release %7.2f "
	       "GB/s\n",
	       t, make, cp, rel);
	fflush(stdout);
}

/* The pageable copies at t threads (a line of their own). */
static int pageable_steps(struct exp *x, int t)
{
	double fresh_cp, resident_cp;

	if (!fresh(x))
		return -1;
	fresh_cp = run(x, PAGEABLE, t);
	resident_cp = run(x, PAGEABLE, t);
	unmap_all(x);
	printf("%3d threads, pageable cuMemcpyDtoH: into fresh pages %6.2f  into resident pages "
	       "%6.2f GB/s\n",
	       t, fresh_cp, resident_cp);
	fflush(stdout);
	return x->any_failed ? -1 : 0;
}

/* The memfd steps at t threads (a line of their own). */
static int memfd_steps(struct exp *x, int t)
{
	double fill, pop, reg, both;
	uint64_t i;

	if (!fresh_fds(x))
		return -1;
	fill = run(x, MFILL, t);
	for (i = 0; i < x->n; i++)
		if (!map_shared(x, i))
			return -1;
	pop = run(x, POPULATE, t);
	reg = run(x, REGISTER, t);
	run(x, UNREGISTER, t);
	unmap_all(x);
	if (!fresh_fds(x))
		return -1;
	both = run(x, MBOTH, t);
	run(x, UNREGISTER, t);
	unmap_all(x);
	printf("%3d threads, memfd: fill %6.2f  populate (map) %6.2f  register %6.2f  both %6.2f "
	       "GB/s\n",
	       t, fill, pop, reg, both);
	fflush(stdout);
	return x->any_failed ? -1 : 0;
}

static int one(struct exp *x, int t)
{
	double pop, reg, cp, unreg, unm, both, regf, ha = 0, hf = 0;

	if (!fresh(x))
		return -1;
	pop = run(x, POPULATE, t);
	reg = run(x, REGISTER, t);
	cp = copy_all(x, true);
	unreg = run(x, UNREGISTER, t);
	unm = unmap_all(x);
	if (!fresh(x))
		return -1;
	both = run(x, BOTH, t);
	run(x, UNREGISTER, t);
	unmap_all(x);
	if (!fresh(x))
		return -1;
	regf = run(x, REGISTER, t);
	run(x, UNREGISTER, t);
	unmap_all(x);
	if (x->host_alloc && x->free_host) {
		ha = run(x, HOSTALLOC, t);
		hf = run(x, HOSTFREE, t);
	}
	printf("%3d threads: populate %6.2f  register %6.2f  copy D2H %6.2f  unregister %7.2f  "
	       "munmap %7.2f  both %6.2f  regfault %6.2f  hostalloc %6.2f  hostfree %7.2f GB/s\n",
	       t, pop, reg, cp, unreg, unm, both, regf, ha, hf);
	fflush(stdout);
	if (x->any_failed)
		return -1;
	vmm_steps(x, t);
	if (pageable_steps(x, t))
		return -1;
	return memfd_steps(x, t);
}

int main(int argc, char **argv)
{
	static const int def[] = { 1, 4, 8, 16 };
	struct exp *x = calloc(1, sizeof(*x));
	int rc = 1, i;

	if (!x)
		return 1;
	if (bench_exp_start(&x->b, "cms-exp-register", argc, argv, 64))
		goto out;
	bench_scale(&x->b, 16, 1ull << 30, &x->n, &x->size);
	if (x->b.drv.dl) { /* not in the library's table: looked up here (0 GB/s: absent) */
		*(void **)&x->host_alloc = dlsym(x->b.drv.dl, "cuMemHostAlloc");
		*(void **)&x->free_host = dlsym(x->b.drv.dl, "cuMemFreeHost");
	}
	x->buf = calloc(x->n, sizeof(*x->buf));
	x->fd = malloc(x->n * sizeof(*x->fd));
	x->vh = calloc(x->n, sizeof(*x->vh));
	x->va = calloc(x->n, sizeof(*x->va));
	if (!x->buf || !x->fd || !x->vh || !x->va)
		goto close;
	/* the copies' source (their columns read -1 without it) */
	if (!vmm_make(x, CU_MEM_LOCATION_TYPE_DEVICE, &x->src_h, &x->src) ||
	    x->b.drv.cuStreamCreate(&x->stream, CU_STREAM_NON_BLOCKING))
		x->stream = NULL;
	memset(x->fd, 0xff, x->n * sizeof(*x->fd)); /* -1: none */
	printf("%llu buffers of %llu MiB, MADV_HUGEPAGE\n", (unsigned long long)x->n,
	       (unsigned long long)(x->size >> 20));
	rc = 0;
	for (i = 0; i < (optind < argc ? argc - optind : 4) && !rc; i++) {
		int t = optind < argc ? atoi(argv[optind + i]) : def[i];

		if (t < 1 || t > 64) {
			fprintf(stderr, "usage: cms-exp-register [-S|-G] [-s SCALE] [THREADS "
					"(1..64)...]\n");
			rc = 2;
			break;
		}
		rc = one(x, t);
	}
	unmap_all(x);
	if (rc == -1)
		printf("cms-exp-register: FAIL (a call failed)\n");
	if (x->stream)
		x->b.drv.cuStreamDestroy(x->stream);
	vmm_free(x, &x->src_h, &x->src);
close:
	bench_close_driver(&x->b);
out:
	free(x->buf);
	free(x->fd);
	free(x->vh);
	free(x->va);
	free(x);
	return rc == 2 ? 2 : rc ? 1 : 0;
}
