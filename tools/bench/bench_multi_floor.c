/* SPDX-License-Identifier: MIT */
/*
 * bench_multi_floor.c - the driver's own multi-device floor of cms-bench's
 * multi-device DISCARD workload (a), measured in the same run on the same
 * devices: the workload's handles per device (count x size), raw driver calls
 * with the library's allocation properties (src/vmm.c), no cumemsaver:
 *
 *   back    = cuMemCreate + cuMemMap + cuMemSetAccess of every handle, each
 *             into its place in a reservation of the device's (made outside
 *             the timing); what a DISCARD resume does;
 *   release = cuMemUnmap + cuMemRelease of them; what a DISCARD pause does.
 *
 * Five variants (enum BENCH_MF_*): the first listed device alone on one
 * thread, without and with access for the other listed devices (the
 * library's N-device tag gives its regions peer access); every listed device
 * at once, one thread per device with its primary context current, released
 * together by a barrier for each phase and timed as wall time from the first
 * start to the last end, without and with peer access (the latter is what the
 * library's one-worker-per-device pause/resume should approach); and every
 * listed device on one thread, handle by handle across the devices (does a
 * thread per device help at all?). Each runs once as a warm-up, then
 * min(5, cycles - 1) timed times.
 *
 * Worker threads never call bench_fail: each records its device's first
 * failure, and the calling thread reports it after the join.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MF_REPS (BENCH_FLOOR_REPS + 1) /* with the warm-up */
#define MF_BACK 0
#define MF_RELEASE 1

enum { H_NONE, H_CREATED, H_MAPPED };

struct mf;

/* One device's share of the floor. */
struct mf_dev {
	struct mf *mf;
	unsigned int i; /* index in the list */
	CUcontext ctx;
	CUdeviceptr base; /* reservation of count x size, kept over the variants */
	CUmemGenericAllocationHandle *h;
	unsigned char *st;
	CUmemAllocationProp prop;
	CUmemAccessDesc acc[BENCH_MAX_MDEV]; /* own device first, then the others */
	size_t nacc;			     /* 1, or n with peer access */
	pthread_t thread;
	bool started;
	/* [phase][rep]: the phase's start and end, and this device's own time */
	uint64_t start[2][MF_REPS], end[2][MF_REPS], own[2][MF_REPS];
	CUresult res; /* the first failure of the variant */
	const char *what;
	uint64_t at; /* its handle */
};

struct mf {
	struct bench *b;
	uint64_t count, size;
	unsigned int n;	   /* listed devices */
	unsigned int nd;   /* devices of the variant being measured */
	unsigned int reps; /* timed */
	struct mf_dev dev[BENCH_MAX_MDEV];
	pthread_barrier_t barrier;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int go; /* 0: wait, 1: run, -1: stop */
	atomic_bool failed;
};

static const char *const mf_ids[BENCH_NMF] = { "one", "one_peer", "threads", "threads_peer",
					       "interleaved" };

/* ---- the calls, on the device's own thread or with its context pushed ---------------- */

static bool mf_ok(struct mf_dev *d, CUresult res, const char *what, uint64_t k)
{
	if (res == CUDA_SUCCESS)
		return true;
	if (d->res == CUDA_SUCCESS) {
		d->res = res;
		d->what = what;
		d->at = k;
	}
	atomic_store(&d->mf->failed, true);
	return false;
}

static bool mf_back_one(struct mf_dev *d, uint64_t k)
{
	const struct cms_driver *drv = &d->mf->b->drv;
	uint64_t size = d->mf->size;
	CUdeviceptr p = d->base + k * size;

	if (!mf_ok(d, drv->cuMemCreate(&d->h[k], size, &d->prop, 0), "cuMemCreate", k))
		return false;
	d->st[k] = H_CREATED;
	if (!mf_ok(d, drv->cuMemMap(p, size, 0, d->h[k], 0), "cuMemMap", k))
		return false;
	d->st[k] = H_MAPPED;
	return mf_ok(d, drv->cuMemSetAccess(p, size, d->acc, d->nacc), "cuMemSetAccess", k);
}

static bool mf_release_one(struct mf_dev *d, uint64_t k)
{
	const struct cms_driver *drv = &d->mf->b->drv;
	uint64_t size = d->mf->size;

	if (!mf_ok(d, drv->cuMemUnmap(d->base + k * size, size), "cuMemUnmap", k))
		return false;
	d->st[k] = H_CREATED;
	if (!mf_ok(d, drv->cuMemRelease(d->h[k]), "cuMemRelease", k))
		return false;
	d->st[k] = H_NONE;
	return true;
}

/* Unmaps and releases what st[] says is left (after a failure). */
static void mf_undo(struct mf_dev *d)
{
	const struct cms_driver *drv = &d->mf->b->drv;
	uint64_t k, size = d->mf->size;

	for (k = 0; k < d->mf->count; k++) {
		if (d->st[k] == H_MAPPED)
			mf_ok(d, drv->cuMemUnmap(d->base + k * size, size), "cleanup, cuMemUnmap",
			      k);
		if (d->st[k] != H_NONE)
			mf_ok(d, drv->cuMemRelease(d->h[k]), "cleanup, cuMemRelease", k);
		d->st[k] = H_NONE;
	}
}

/* One phase of one repetition of device d on this thread. */
static void mf_phase(struct mf_dev *d, int phase, unsigned int r)
{
	uint64_t k;

	d->start[phase][r] = bench_now_ns();
	for (k = 0; k < d->mf->count; k++)
		if (!(phase == MF_BACK ? mf_back_one(d, k) : mf_release_one(d, k)))
			break;
	d->end[phase][r] = bench_now_ns();
	d->own[phase][r] = d->end[phase][r] - d->start[phase][r];
}

/* ---- one thread per device (or the first device alone) -------------------------------- */

static void mf_thread_run(struct mf_dev *d)
{
	struct mf *mf = d->mf;
	CUcontext popped;
	unsigned int r;
	bool pushed;
	int p;

	pushed = mf_ok(d, mf->b->drv.cuCtxPushCurrent(d->ctx), "cuCtxPushCurrent", 0);
	for (r = 0; r <= mf->reps; r++)
		for (p = MF_BACK; p <= MF_RELEASE; p++) {
			pthread_barrier_wait(&mf->barrier); /* every device starts together */
			if (!atomic_load(&mf->failed))
				mf_phase(d, p, r);
		}
	mf_undo(d);
	if (pushed)
		mf_ok(d, mf->b->drv.cuCtxPopCurrent(&popped), "cuCtxPopCurrent", 0);
}

static void *mf_thread_main(void *arg)
{
	struct mf_dev *d = arg;
	struct mf *mf = d->mf;
	int go;

	pthread_mutex_lock(&mf->lock);
	while (!mf->go)
		pthread_cond_wait(&mf->cond, &mf->lock);
	go = mf->go;
	pthread_mutex_unlock(&mf->lock);
	if (go > 0)
		mf_thread_run(d);
	return NULL;
}

static void mf_release_threads(struct mf *mf, int go)
{
	pthread_mutex_lock(&mf->lock);
	mf->go = go;
	pthread_cond_broadcast(&mf->cond);
	pthread_mutex_unlock(&mf->lock);
}

/* Devices 0..nd-1 of the list, one thread each; the calling thread takes device 0. */
static int mf_threads(struct mf *mf)
{
	sigset_t all, old;
	unsigned int i;
	bool ok = true;
	int rc = -1;

	mf->go = 0;
	for (i = 0; i < mf->nd; i++)
		mf->dev[i].started = false;
	if (pthread_barrier_init(&mf->barrier, NULL, mf->nd)) {
		bench_fail(mf->b, "%s: cannot initialise a barrier", mf->b->step);
		return -1;
	}
	if (pthread_mutex_init(&mf->lock, NULL)) {
		bench_fail(mf->b, "%s: cannot initialise a mutex", mf->b->step);
		goto out_barrier;
	}
	if (pthread_cond_init(&mf->cond, NULL)) {
		bench_fail(mf->b, "%s: cannot initialise a condition", mf->b->step);
		goto out_lock;
	}
	sigfillset(&all); /* as the library's workers: no signals on them */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 1; i < mf->nd && ok; i++) {
		mf->dev[i].started =
			!pthread_create(&mf->dev[i].thread, NULL, mf_thread_main, &mf->dev[i]);
		ok = mf->dev[i].started;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	mf_release_threads(mf, ok ? 1 : -1);
	if (ok)
		mf_thread_run(&mf->dev[0]);
	for (i = 1; i < mf->nd; i++)
		if (mf->dev[i].started)
			pthread_join(mf->dev[i].thread, NULL);
	rc = 0;
	if (!ok) {
		bench_fail(mf->b, "%s: cannot start a thread", mf->b->step);
		rc = -1;
	}
	pthread_cond_destroy(&mf->cond);
out_lock:
	pthread_mutex_destroy(&mf->lock);
out_barrier:
	pthread_barrier_destroy(&mf->barrier);
	return rc;
}

/* ---- every device on one thread, handle by handle ------------------------------------- */

static bool mf_push(struct mf_dev *d)
{
	return mf_ok(d, d->mf->b->drv.cuCtxPushCurrent(d->ctx), "cuCtxPushCurrent", 0);
}

static void mf_pop(struct mf_dev *d)
{
	CUcontext popped;

	mf_ok(d, d->mf->b->drv.cuCtxPopCurrent(&popped), "cuCtxPopCurrent", 0);
}

static void mf_interleaved(struct mf *mf)
{
	uint64_t t0, t1, k;
	unsigned int r, i;
	bool ok;
	int p;

	for (r = 0; r <= mf->reps && !atomic_load(&mf->failed); r++)
		for (p = MF_BACK; p <= MF_RELEASE && !atomic_load(&mf->failed); p++) {
			for (i = 0; i < mf->nd; i++)
				mf->dev[i].own[p][r] = 0;
			t0 = bench_now_ns();
			for (k = 0, ok = true; k < mf->count && ok; k++)
				for (i = 0; i < mf->nd && ok; i++) {
					struct mf_dev *d = &mf->dev[i];
					uint64_t c0 = bench_now_ns();

					ok = mf_push(d);
					if (ok) {
						ok = p == MF_BACK ? mf_back_one(d, k) :
								    mf_release_one(d, k);
						mf_pop(d);
					}
					d->own[p][r] += bench_now_ns() - c0;
				}
			t1 = bench_now_ns();
			for (i = 0; i < mf->nd; i++) {
				mf->dev[i].start[p][r] = t0;
				mf->dev[i].end[p][r] = t1;
			}
		}
	for (i = 0; i < mf->nd; i++)
		if (mf_push(&mf->dev[i])) {
			mf_undo(&mf->dev[i]);
			mf_pop(&mf->dev[i]);
		}
}

/* ---- setup, one variant, the floor ----------------------------------------------------- */

/* The calling thread's own push and pop, outside the variants (failures reported). */
static int mf_push_here(struct mf *mf, unsigned int i)
{
	BENCH_CU(mf->b, err, cuCtxPushCurrent, mf->dev[i].ctx);
	return 0;
err:
	return -1;
}

static void mf_pop_here(struct mf *mf)
{
	CUcontext popped;
	CUresult res = mf->b->drv.cuCtxPopCurrent(&popped);

	if (res != CUDA_SUCCESS)
		bench_cu_fail(mf->b, res, "cuCtxPopCurrent");
}

/* Device memory on every listed device, host RAM on the simulation (device memory there). */
static int mf_room(struct mf *mf)
{
	struct bench *b = mf->b;
	uint64_t need = mf->count * mf->size, avail = bench_mem_available();
	size_t fr = 0, tot = 0;
	char b1[32], b2[32];
	unsigned int i;
	CUresult res;

	for (i = 0; i < mf->n; i++) {
		if (mf_push_here(mf, i))
			return -1;
		res = b->drv.cuMemGetInfo(&fr, &tot);
		mf_pop_here(mf);
		if (res != CUDA_SUCCESS)
			return bench_cu_fail(b, res, "cuMemGetInfo");
		if (need > fr) {
			bench_fail(b, "%s needs %s on device %d, %s is free; use a larger --scale",
				   b->step, bench_fmt_bytes(b1, sizeof(b1), need), b->mdev[i],
				   bench_fmt_bytes(b2, sizeof(b2), fr));
			return -1;
		}
	}
	if (b->sim && avail && mf->n * need > avail) {
		bench_fail(b, "%s needs about %s of host RAM, %s is available", b->step,
			   bench_fmt_bytes(b1, sizeof(b1), mf->n * need),
			   bench_fmt_bytes(b2, sizeof(b2), avail));
		return -1;
	}
	return 0;
}

/* Properties, access descriptors and a reservation per device. */
static int mf_setup(struct mf *mf, const CUdevice *dev)
{
	struct bench *b = mf->b;
	unsigned int i, j;
	CUresult res;
	int gdr = 0;

	for (i = 0; i < mf->n; i++) {
		struct mf_dev *d = &mf->dev[i];

		d->h = calloc(mf->count, sizeof(*d->h));
		d->st = calloc(mf->count, sizeof(*d->st));
		if (!d->h || !d->st) {
			bench_fail(b, "%s: out of host memory", b->step);
			return -1;
		}
		BENCH_CU(b, err, cuDeviceGetAttribute, &gdr,
			 CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev[i]);
		memset(&d->prop, 0, sizeof(d->prop));
		d->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		d->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
		d->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		d->prop.location.id = dev[i];
		d->prop.allocFlags.gpuDirectRDMACapable = gdr != 0;
		memset(d->acc, 0, sizeof(d->acc));
		d->acc[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		d->acc[0].location.id = dev[i];
		d->acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		for (j = 0; j < mf->n; j++) /* the peers, ascending, as src/vmm.c */
			if (j != i) {
				CUmemAccessDesc *a = &d->acc[j < i ? j + 1 : j];

				a->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
				a->location.id = dev[j];
				a->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
			}
		if (mf_push_here(mf, i))
			return -1;
		res = b->drv.cuMemAddressReserve(&d->base, mf->count * mf->size, 0, 0, 0);
		mf_pop_here(mf);
		if (res != CUDA_SUCCESS) {
			d->base = 0;
			return bench_cu_fail(b, res, "cuMemAddressReserve");
		}
	}
	return 0;
err:
	return -1;
}

static void mf_teardown(struct mf *mf)
{
	struct bench *b = mf->b;
	unsigned int i;
	CUresult res;

	for (i = 0; i < mf->n; i++) {
		struct mf_dev *d = &mf->dev[i];

		if (d->base) {
			res = b->drv.cuMemAddressFree(d->base, mf->count * mf->size);
			if (res != CUDA_SUCCESS)
				bench_cu_fail(b, res, "cuMemAddressFree");
		}
		free(d->st);
		free(d->h);
	}
}

/* Whether every pair of listed devices may access each other's memory. */
static int mf_peers_ok(struct bench *b, const CUdevice *dev, unsigned int n, bool *ok)
{
	unsigned int i, j;
	int can;

	*ok = true;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			if (i == j)
				continue;
			BENCH_CU(b, err, cuDeviceCanAccessPeer, &can, dev[j], dev[i]);
			*ok = *ok && can;
		}
	return 0;
err:
	return -1;
}

/* Measures variant v into f (the devices' failures reported here). */
static int mf_variant(struct mf *mf, int v, struct bench_mfloor *f)
{
	struct bench *b = mf->b;
	unsigned int i, r;
	int p, rc = 0;

	f->id = mf_ids[v];
	f->ndev = v == BENCH_MF_ONE || v == BENCH_MF_ONE_PEER ? 1 : mf->n;
	f->threads = v == BENCH_MF_INTERLEAVED ? 1 : f->ndev;
	f->peer = v == BENCH_MF_ONE_PEER || v == BENCH_MF_THREADS_PEER;
	f->reps = mf->reps;
	snprintf(b->step, sizeof(b->step), "multi-device floor %s", f->id);
	mf->nd = f->ndev;
	atomic_store(&mf->failed, false);
	for (i = 0; i < mf->n; i++) {
		mf->dev[i].res = CUDA_SUCCESS;
		mf->dev[i].nacc = f->peer ? mf->n : 1;
	}
	if (v == BENCH_MF_INTERLEAVED)
		mf_interleaved(mf);
	else if (mf_threads(mf))
		return -1;
	for (i = 0; i < mf->nd; i++) {
		struct mf_dev *d = &mf->dev[i];

		if (d->res != CUDA_SUCCESS) {
			bench_fail(b, "%s: device %d: %s at handle %" PRIu64 ": %s (%d)", b->step,
				   b->mdev[i], d->what, d->at,
				   cms_driver_error_name(&b->drv, d->res), d->res);
			rc = -1;
		}
	}
	if (rc)
		return -1;
	for (r = 1; r <= mf->reps; r++) /* rep 0 is the warm-up */
		for (p = MF_BACK; p <= MF_RELEASE; p++) {
			uint64_t first = UINT64_MAX, last = 0;

			for (i = 0; i < mf->nd; i++) {
				struct mf_dev *d = &mf->dev[i];

				if (d->start[p][r] < first)
					first = d->start[p][r];
				if (d->end[p][r] > last)
					last = d->end[p][r];
				(p == MF_BACK ? f->dev_back_ns :
						f->dev_release_ns)[(r - 1) * f->ndev + i] =
					d->own[p][r];
			}
			(p == MF_BACK ? f->back_ns : f->release_ns)[r - 1] = last - first;
		}
	f->measured = true;
	b->checks++; /* every call of the variant succeeded and nothing is left */
	return 0;
}

static double own_median_ms(const struct bench_mfloor *f, bool back, unsigned int i)
{
	uint64_t v[BENCH_FLOOR_REPS];
	unsigned int r;

	for (r = 0; r < f->reps; r++)
		v[r] = (back ? f->dev_back_ns : f->dev_release_ns)[r * f->ndev + i];
	return bench_median_ns(v, f->reps) / 1e6;
}

static double floor_ms(const struct bench_mfloor *f, bool back)
{
	if (!f->measured || !f->reps)
		return NAN;
	return bench_median_ns(back ? f->back_ns : f->release_ns, f->reps) / 1e6;
}

static const char *mf_what(const struct bench *b, const struct bench_mfloor *f, char *buf,
			   size_t len)
{
	if (f->ndev == 1)
		snprintf(buf, len, "device %d, 1 thread%s", b->mdev[0],
			 f->peer ? ", peer access" : "");
	else if (f->threads == 1)
		snprintf(buf, len, "%u devices, 1 thread, interleaved", f->ndev);
	else
		snprintf(buf, len, "%u devices, 1 thread each%s", f->ndev,
			 f->peer ? ", peer access" : "");
	return buf;
}

static void mf_print_line(const struct bench *b, const struct bench_mfloor *f)
{
	char what[80];
	unsigned int i;

	printf("  floor %-13s %-38s back %9.3f ms, release %9.3f ms (median of %u) [", f->id,
	       mf_what(b, f, what, sizeof(what)), floor_ms(f, true), floor_ms(f, false), f->reps);
	for (i = 0; i < f->ndev; i++)
		printf("%s%d: %.3f / %.3f", i ? ", " : "", b->mdev[i], own_median_ms(f, true, i),
		       own_median_ms(f, false, i));
	printf("]\n");
}

int bench_mfloor_run(struct bench *b, struct bench_mwork *w, const CUdevice *dev,
		     const CUcontext *primary, unsigned int n)
{
	struct mf *mf;
	bool peers = false;
	char b1[32];
	unsigned int i;
	int v, rc = -1;

	w->floor_ran = true;
	mf = calloc(1, sizeof(*mf));
	if (!mf) {
		bench_fail(b, "multi-device floor: out of host memory");
		goto out;
	}
	mf->b = b;
	mf->count = w->count;
	mf->size = w->size;
	mf->n = n;
	for (i = 0; i < n; i++) {
		mf->dev[i].mf = mf;
		mf->dev[i].i = i;
		mf->dev[i].ctx = primary[i];
	}
	mf->reps = b->cycles > 1 ? b->cycles - 1 : 1;
	if (mf->reps > BENCH_FLOOR_REPS)
		mf->reps = BENCH_FLOOR_REPS;
	snprintf(b->step, sizeof(b->step), "multi-device floor");
	printf("  driver floor, no cumemsaver: %" PRIu64 " x %s per device; back = cuMemCreate + "
	       "cuMemMap + cuMemSetAccess, release = cuMemUnmap + cuMemRelease; [device: its "
	       "own back / release ms]\n",
	       mf->count, bench_fmt_bytes(b1, sizeof(b1), mf->size));
	if (mf_peers_ok(b, dev, n, &peers) || mf_room(mf) || mf_setup(mf, dev))
		goto out_teardown;
	for (v = 0; v < BENCH_NMF; v++) {
		struct bench_mfloor *f = &w->floor[v];

		if ((v == BENCH_MF_ONE_PEER || v == BENCH_MF_THREADS_PEER) && !peers) {
			f->id = mf_ids[v];
			printf("  floor %-13s not measured: the listed devices cannot all access "
			       "each other (cuDeviceCanAccessPeer)\n",
			       f->id);
			continue;
		}
		if (mf_variant(mf, v, f))
			goto out_teardown;
		mf_print_line(b, f);
	}
	rc = 0;
out_teardown:
	mf_teardown(mf);
out:
	free(mf);
	if (rc) {
		w->floor_failed = true;
		if (!w->note[0])
			snprintf(w->note, sizeof(w->note), "FLOOR FAILED: %s", b->last_failure);
	}
	return rc;
}

/* ---- report ---------------------------------------------------------------------------- */

static const char *num(char *buf, size_t len, double v, const char *fmt)
{
	if (isnan(v) || isinf(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, fmt, v);
	return buf;
}

void bench_mfloor_report(const struct bench *b, const struct bench_mwork *w)
{
	const struct bench_mfloor *one = &w->floor[BENCH_MF_ONE];
	const struct bench_mfloor *all = &w->floor[BENCH_MF_THREADS_PEER];
	char c[7][24], what[80], b1[32];
	unsigned int i;
	int v;

	if (!w->floor_ran || w->floor_failed || !one->measured)
		return;
	printf("\nmulti-device driver floor of (%c), no cumemsaver: %" PRIu64 " x %s per device; "
	       "back = cuMemCreate + cuMemMap + cuMemSetAccess, release = cuMemUnmap + "
	       "cuMemRelease; wall time, median of %u after a warm-up; x1 = / the one-device "
	       "floor (%u.00x: the devices' calls do not overlap at all)\n",
	       w->id, w->count, bench_fmt_bytes(b1, sizeof(b1), w->size), one->reps, b->nmdev);
	printf("%-13s %-38s %10s %10s %8s %8s  %s\n", "floor", "what", "back ms", "release ms",
	       "back x1", "rel x1", "own back / release ms per device");
	for (v = 0; v < BENCH_NMF; v++) {
		const struct bench_mfloor *f = &w->floor[v];
		double bk = floor_ms(f, true), rl = floor_ms(f, false);

		if (!f->id)
			continue;
		mf_what(b, f, what, sizeof(what));
		if (!f->measured) {
			printf("%-13s not measured (no peer access between the devices)\n", f->id);
			continue;
		}
		printf("%-13s %-38s %10.3f %10.3f %8s %8s  ", f->id, what, bk, rl,
		       num(c[0], sizeof(c[0]), bk / floor_ms(one, true), "%.2fx"),
		       num(c[1], sizeof(c[1]), rl / floor_ms(one, false), "%.2fx"));
		for (i = 0; i < f->ndev; i++)
			printf("%s%d: %.3f / %.3f", i ? ", " : "", b->mdev[i],
			       own_median_ms(f, true, i), own_median_ms(f, false, i));
		printf("\n");
	}
	if (!w->selected || !w->all.cycles_done)
		return;
	printf("cumemsaver (%c) against it, medians of cycles 2..N: pause vs the release floor, "
	       "resume vs the back floor; N-device floor = threads_peer (one thread per device, "
	       "the access the tag's regions give)\n",
	       w->id);
	printf("%-8s %10s %10s %8s %10s %10s %8s %9s %9s\n", "phase", "1 dev ms", "1 floor ms",
	       "x floor", "N dev ms", "N floor ms", "x floor", "cms N/1", "floor N/1");
	for (v = 1; v >= 0; v--) { /* pause first */
		bool pause = v;
		double o = bench_mphase_ms(&w->one, pause, true);
		double a = bench_mphase_ms(&w->all, pause, true);
		double fo = floor_ms(one, !pause), fa = all->measured ? floor_ms(all, !pause) : NAN;

		printf("%-8s %10s %10.3f %8s %10s %10s %8s %9s %9s\n", pause ? "pause" : "resume",
		       num(c[0], sizeof(c[0]), o, "%.3f"), fo,
		       num(c[1], sizeof(c[1]), o / fo, "%.2fx"), num(c[2], sizeof(c[2]), a, "%.3f"),
		       num(c[3], sizeof(c[3]), fa, "%.3f"),
		       num(c[4], sizeof(c[4]), a / fa, "%.2fx"),
		       num(c[5], sizeof(c[5]), a / o, "%.2fx"),
		       num(c[6], sizeof(c[6]), fa / fo, "%.2fx"));
	}
}

static void json_ns(FILE *f, const uint64_t *v, unsigned int n)
{
	unsigned int i;

	fputs("[", f);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%.6f", i ? ", " : "", (double)v[i] / 1e6);
	fputs("]", f);
}

void bench_mfloor_json(const struct bench *b, const struct bench_mwork *w, FILE *f)
{
	const struct bench_mfloor *one = &w->floor[BENCH_MF_ONE];
	const struct bench_mfloor *all = &w->floor[BENCH_MF_THREADS_PEER];
	double op = bench_mphase_ms(&w->one, true, true),
	       orr = bench_mphase_ms(&w->one, false, true);
	double ap = bench_mphase_ms(&w->all, true, true),
	       arr = bench_mphase_ms(&w->all, false, true);
	unsigned int n = 0;
	int v;

	(void)b;
	fputs(",\n     \"driver_floor\": ", f);
	if (!w->floor_ran) {
		fputs("null", f);
		return;
	}
	fprintf(f,
		"{\"status\": \"%s\", \"handles_per_device\": %" PRIu64
		", \"handle_bytes\": %" PRIu64 ", \"comparison_one\": \"one\", "
		"\"comparison_all\": \"threads_peer\", \"variants\": [",
		w->floor_failed ? "failed" : "ok", w->count, w->size);
	for (v = 0; v < BENCH_NMF; v++) {
		const struct bench_mfloor *fl = &w->floor[v];

		if (!fl->id)
			continue;
		fprintf(f,
			"%s\n       {\"id\": \"%s\", \"devices\": %u, \"threads\": %u, "
			"\"peer_access\": %s, \"measured\": %s, \"reps\": %u, \"back_ms\": ",
			n++ ? "," : "", fl->id, fl->ndev, fl->threads, fl->peer ? "true" : "false",
			fl->measured ? "true" : "false", fl->reps);
		json_ns(f, fl->back_ns, fl->measured ? fl->reps : 0);
		fputs(", \"release_ms\": ", f);
		json_ns(f, fl->release_ns, fl->measured ? fl->reps : 0);
		fputs(", \"device_back_ms\": ", f);
		json_ns(f, fl->dev_back_ns, fl->measured ? fl->reps * fl->ndev : 0);
		fputs(", \"device_release_ms\": ", f);
		json_ns(f, fl->dev_release_ns, fl->measured ? fl->reps * fl->ndev : 0);
		fputs(",\n        \"median_back_ms\": ", f);
		bench_json_num(f, floor_ms(fl, true));
		fputs(", \"median_release_ms\": ", f);
		bench_json_num(f, floor_ms(fl, false));
		fputs(", \"back_ratio\": ", f);
		bench_json_num(f, floor_ms(fl, true) / floor_ms(one, true));
		fputs(", \"release_ratio\": ", f);
		bench_json_num(f, floor_ms(fl, false) / floor_ms(one, false));
		fputs("}", f);
	}
	fputs("],\n      \"floor_release_ratio\": ", f);
	bench_json_num(f, floor_ms(all, false) / floor_ms(one, false));
	fputs(", \"floor_back_ratio\": ", f);
	bench_json_num(f, floor_ms(all, true) / floor_ms(one, true));
	fputs(", \"pause_to_floor_one\": ", f);
	bench_json_num(f, op / floor_ms(one, false));
	fputs(", \"resume_to_floor_one\": ", f);
	bench_json_num(f, orr / floor_ms(one, true));
	fputs(", \"pause_to_floor_all\": ", f);
	bench_json_num(f, ap / floor_ms(all, false));
	fputs(", \"resume_to_floor_all\": ", f);
	bench_json_num(f, arr / floor_ms(all, true));
	fputs("}", f);
}
