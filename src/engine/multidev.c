/* SPDX-License-Identifier: MIT */
/*
 * multidev.c - pause and resume spanning devices; peer access checks.
 *
 * The regions of a call (locked by the calling thread) are grouped by device,
 * in ascending device order. With one device its engine (pause.c, resume.c)
 * runs on the calling thread, as always. With several, every device but the
 * first gets a worker thread of its own and the calling thread takes the
 * first; each pushes its device's primary context and runs the engine on its
 * device's regions, with that device's copy streams. The engines meet at
 * agreement points (cms_xdev_vote): the pause after unmapping (nothing
 * released yet) and after releasing, the resume before committing. If one
 * device failed, every other one gets CMS_XDEV_ABORTED there and rolls back
 * exactly as if it had failed itself: the call is all or nothing across
 * devices, with the rollback guarantees of one device.
 *
 * Workers touch only their own regions (whose locks the calling thread holds;
 * thread creation and join order their accesses) and take no library lock, so
 * the lock order (regions in creation order, context lock innermost) is
 * unchanged. Their error messages and log lines go back to the calling thread.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define XDEV_POINTS 2 /* agreement points of the pause engine; the resume engine uses 1 */

/* The agreement of the devices of one call. */
struct cms_xdev {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t n;		     /* workers */
	size_t arrived[XDEV_POINTS]; /* workers that voted at (or left before) each point */
	bool failed;		     /* a worker failed on its own */
	int go;			     /* 0: wait, 1: run, -1: stop (a worker could not start) */
};

struct cms_xvote {
	struct cms_xdev *x;
	unsigned voted;	    /* points this worker passed */
	bool aborted;	    /* a vote told it to roll back */
	uint64_t waited_ns; /* time spent waiting at the points */
};

/* One device's share of a call. */
struct worker {
	cms_context *ctx;
	bool pause;
	bool alone; /* the only device: calling thread, no agreement, no context pushed */
	const void *opts;
	bool want_result;
	int32_t device;
	struct cms_region **regions;
	size_t nr;
	struct cms_xvote xv;
	pthread_t thread;
	bool started;
	bool pushed_failed;
	cms_status st;
	char msg[512];
	cms_pause_result pres;
	cms_resume_result rres;
	uint64_t elapsed_ns;
	struct cms_logq logq;
	struct cms_progress *progress; /* the call's progress reports (progress.c) */
};

/* What a device reported, whichever the direction. */
struct part {
	uint64_t regions, allocations, bytes, copied, free_before, free_after;
};

cms_status cms_xdev_vote(struct cms_xvote *xv)
{
	struct cms_xdev *x;
	uint64_t t0;
	bool failed;
	unsigned p;

	if (!xv)
		return CMS_OK;
	x = xv->x;
	p = xv->voted++;
	if (p >= XDEV_POINTS) /* an engine voting more often than the others could */
		return cms_set_error(CMS_ERR_INTERNAL, "agreement point %u of %d", p + 1,
				     XDEV_POINTS);
	t0 = cms_now_ns();
	pthread_mutex_lock(&x->lock);
	if (++x->arrived[p] == x->n)
		pthread_cond_broadcast(&x->cond);
	while (x->arrived[p] < x->n)
		pthread_cond_wait(&x->cond, &x->lock);
	/* A failure seen here may be a later one (after this point): rolling back is right then
	 * too. A worker commits only after its last point, which every failure precedes. */
	failed = x->failed;
	pthread_mutex_unlock(&x->lock);
	xv->waited_ns += cms_now_ns() - t0;
	if (!failed)
		return CMS_OK;
	xv->aborted = true;
	return cms_set_error(CMS_XDEV_ABORTED, "rolled back: another device failed");
}

/* A worker is done: counts it at every point it did not vote at (as failed if it failed). */
static void xdev_leave(struct cms_xvote *xv, bool failed)
{
	struct cms_xdev *x = xv->x;

	pthread_mutex_lock(&x->lock);
	if (failed)
		x->failed = true;
	for (; xv->voted < XDEV_POINTS; xv->voted++)
		x->arrived[xv->voted]++;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

static void worker_run(struct worker *w)
{
	uint64_t t0 = cms_now_ns();
	struct cms_xvote *xv = w->alone ? NULL : &w->xv;
	struct cms_progress *prev = cms_progress_enter(w->progress);
	cms_status st = CMS_OK;

	if (!w->alone) {
		cms_log_defer(&w->logq);
		st = cms_push(w->ctx, w->device);
		w->pushed_failed = st != CMS_OK;
	}
	if (!st && w->pause)
		st = cms_engine_pause_dev(w->ctx, w->regions, w->nr, w->opts,
					  w->want_result ? &w->pres : NULL, xv);
	else if (!st)
		st = cms_engine_resume_dev(w->ctx, w->regions, w->nr, w->opts,
					   w->want_result ? &w->rres : NULL, xv);
	if (!w->alone) {
		if (!w->pushed_failed)
			cms_pop(w->ctx);
		xdev_leave(&w->xv, st && !w->xv.aborted);
		cms_log_defer(NULL);
	}
	if (st)
		cms_last_error_message(w->msg, sizeof(w->msg));
	w->st = st;
	w->elapsed_ns = cms_now_ns() - t0 - w->xv.waited_ns;
	cms_progress_enter(prev);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct cms_xdev *x = w->xv.x;
	int go;

	pthread_mutex_lock(&x->lock);
	while (!x->go)
		pthread_cond_wait(&x->cond, &x->lock);
	go = x->go;
	pthread_mutex_unlock(&x->lock);
	if (go > 0)
		worker_run(w);
	return NULL;
}

/* Starts the workers of w[1..nd) (waiting for go); false if one could not start. */
static bool start_workers(struct worker *w, size_t nd)
{
	sigset_t all, old;
	size_t i;
	bool ok = true;

	sigfillset(&all); /* workers never take the application's signals */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 1; i < nd && ok; i++) {
		w[i].started = !pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
		ok = w[i].started;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

static void release_workers(struct cms_xdev *x, int go)
{
	pthread_mutex_lock(&x->lock);
	x->go = go;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
}

static void join_workers(struct worker *w, size_t nd)
{
	size_t i;

	for (i = 1; i < nd; i++)
		if (w[i].started)
			pthread_join(w[i].thread, NULL);
}

/* Runs w[0..nd), one thread each (the calling thread takes w[0]). */
static cms_status run_workers(struct worker *w, size_t nd)
{
	struct cms_xdev x;
	cms_status st = CMS_OK;
	size_t i;

	memset(&x, 0, sizeof(x));
	x.n = nd;
	if (pthread_mutex_init(&x.lock, NULL))
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
	if (pthread_cond_init(&x.cond, NULL)) {
		pthread_mutex_destroy(&x.lock);
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a condition");
	}
	for (i = 0; i < nd; i++)
		w[i].xv.x = &x;
	if (!start_workers(w, nd)) {
		release_workers(&x, -1); /* nothing was done */
		join_workers(w, nd);
		for (i = 1; i + 1 < nd && w[i].started; i++)
			;
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				   "cannot start a worker thread for device %d", w[i].device);
		goto out;
	}
	release_workers(&x, 1);
	worker_run(&w[0]);
	join_workers(w, nd);
	for (i = 0; i < nd; i++) /* their lines, in device order, on the calling thread */
		cms_log_flush(w[0].ctx, &w[i].logq);
out:
	pthread_cond_destroy(&x.cond);
	pthread_mutex_destroy(&x.lock);
	return st;
}

/* The call's status and message from the workers' (the calling thread's error). */
static cms_status combine(const struct worker *w, size_t nd, int32_t *failed_device)
{
	char msg[512];
	size_t i, len = 0, first = nd;
	bool rb_failed = false;

	*failed_device = -1;
	for (i = 0; i < nd; i++) {
		if (w[i].st && !w[i].xv.aborted && first == nd)
			first = i;
		rb_failed |= w[i].st == CMS_ERR_ROLLBACK_FAILED;
	}
	if (first == nd) { /* cannot be: an abort needs a failure */
		for (i = 0; i < nd && !w[i].st; i++)
			;
		if (i == nd)
			return CMS_OK;
		return cms_set_error(CMS_ERR_INTERNAL, "device %d: %s", w[i].device, w[i].msg);
	}
	*failed_device = w[first].device;
	len = (size_t)snprintf(msg, sizeof(msg), "device %d: %s", w[first].device, w[first].msg);
	for (i = 0; i < nd && len < sizeof(msg); i++)
		if (i != first && w[i].st == CMS_ERR_ROLLBACK_FAILED)
			len += (size_t)snprintf(msg + len, sizeof(msg) - len, "; device %d: %s",
						w[i].device, w[i].msg);
	return cms_set_error(rb_failed ? CMS_ERR_ROLLBACK_FAILED : w[first].st, "%s", msg);
}

static struct part part_of(const struct worker *w)
{
	struct part p;

	memset(&p, 0, sizeof(p));
	if (w->pause) {
		p.regions = w->pres.regions;
		p.allocations = w->pres.allocations;
		p.bytes = w->pres.bytes_released;
		p.copied = w->pres.bytes_backed_up;
		p.free_before = w->pres.driver_free_before;
		p.free_after = w->pres.driver_free_after;
	} else {
		p.regions = w->rres.regions;
		p.allocations = w->rres.allocations;
		p.bytes = w->rres.bytes_backed;
		p.copied = w->rres.bytes_restored;
	}
	return p;
}

/* Fills the per-device entries and sums the parts (all zero on failure). */
static void fill_devices(const struct worker *w, size_t nd, cms_status st, cms_device_result *dr,
			 struct part *sum)
{
	size_t i;

	memset(sum, 0, sizeof(*sum));
	memset(dr, 0, CMS_DEVICE_RESULTS_MAX * sizeof(*dr));
	for (i = 0; i < nd; i++) {
		struct part p = part_of(&w[i]);

		if (st)
			memset(&p, 0, sizeof(p));
		sum->regions += p.regions;
		sum->allocations += p.allocations;
		sum->bytes += p.bytes;
		sum->copied += p.copied;
		sum->free_before += p.free_before;
		sum->free_after += p.free_after;
		if (i >= CMS_DEVICE_RESULTS_MAX)
			continue;
		dr[i].device = w[i].device;
		dr[i].status =
			w[i].xv.aborted && w[i].st != CMS_ERR_ROLLBACK_FAILED ? CMS_OK : w[i].st;
		dr[i].regions = w[i].nr;
		dr[i].allocations = p.allocations;
		dr[i].bytes = p.bytes;
		dr[i].bytes_copied = p.copied;
		dr[i].elapsed_ns = w[i].elapsed_ns;
	}
}

/* The result of the call from the workers': sums, per-device entries, failure. */
static void write_result(bool pause, void *res, const struct worker *w, size_t nd, cms_status st,
			 int32_t failed_device, uint64_t elapsed_ns)
{
	cms_device_result *dr;
	struct part sum;

	if (pause) {
		cms_pause_result *r = res;

		dr = r->device_results;
		fill_devices(w, nd, st, dr, &sum);
		r->regions = sum.regions;
		r->allocations = sum.allocations;
		r->bytes_released = sum.bytes;
		r->bytes_backed_up = sum.copied;
		r->driver_free_before = sum.free_before;
		r->driver_free_after = sum.free_after;
		r->elapsed_ns = st ? 0 : elapsed_ns;
		r->devices = (uint32_t)nd;
		r->failed_device = failed_device;
	} else {
		cms_resume_result *r = res;

		dr = r->device_results;
		fill_devices(w, nd, st, dr, &sum);
		r->regions = sum.regions;
		r->allocations = sum.allocations;
		r->bytes_backed = sum.bytes;
		r->bytes_restored = sum.copied;
		r->elapsed_ns = st ? 0 : elapsed_ns;
		r->devices = (uint32_t)nd;
		r->failed_device = failed_device;
	}
}

static int cmp_device(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Groups regions by device devs[i] (creation order kept inside a group) into w and g. */
static void group(cms_context *ctx, bool pause, struct cms_region **regions, size_t n,
		  const void *opts, bool want_result, const int32_t *devs, size_t nd,
		  struct worker *w, struct cms_region **g)
{
	size_t i, k, off = 0;

	for (i = 0; i < nd; i++) {
		w[i].ctx = ctx;
		w[i].pause = pause;
		w[i].alone = nd == 1;
		w[i].opts = opts;
		w[i].want_result = want_result;
		w[i].device = devs[i];
		w[i].regions = g + off;
		w[i].pres.struct_size = sizeof(w[i].pres);
		w[i].rres.struct_size = sizeof(w[i].rres);
		for (k = 0; k < n; k++)
			if (regions[k]->device == devs[i])
				g[off + w[i].nr++] = regions[k];
		off += w[i].nr;
	}
}

/* Bytes the call will copy: pause, HOST content on the device; resume, backups to restore. */
static uint64_t progress_total(bool pause, struct cms_region **regions, size_t n)
{
	struct cms_alloc *a;
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++)
		for (a = regions[i]->allocs; a && regions[i]->policy == CMS_POLICY_HOST;
		     a = a->next)
			if (pause ? a->mapped : (!a->mapped || !a->handle) && a->saved)
				sum += a->size;
	return sum;
}

static cms_status run(cms_context *ctx, bool pause, struct cms_region **regions, size_t n,
		      const void *opts, void *res)
{
	struct cms_progress prog;
	uint64_t t0 = cms_now_ns();
	int32_t devs[CMS_MAX_DEVICES], failed_device;
	struct cms_region **g;
	struct worker *w;
	cms_status st;
	size_t nd, i;

	nd = cms_region_devices(regions, n, devs);
	qsort(devs, nd, sizeof(devs[0]), cmp_device);
	w = calloc(nd ? nd : 1, sizeof(*w));
	g = malloc((n ? n : 1) * sizeof(*g));
	if (!w || !g || !nd) {
		st = !nd ? cms_set_error(CMS_ERR_INTERNAL, "no regions") :
			   cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
					 "cannot allocate a device list");
		goto out;
	}
	group(ctx, pause, regions, n, opts, res != NULL, devs, nd, w, g);
	cms_progress_begin(&prog, ctx, pause ? "pause" : "resume",
			   progress_total(pause, regions, n));
	for (i = 0; i < nd; i++)
		w[i].progress = &prog;
	if (nd == 1) {
		worker_run(&w[0]); /* one device: the calling thread, as it is */
		st = w[0].st;
		failed_device = st ? w[0].device : -1;
	} else {
		st = run_workers(w, nd);
		if (st) {
			cms_progress_end(&prog, false);
			goto out; /* nothing was done */
		}
		st = combine(w, nd, &failed_device);
	}
	cms_progress_end(&prog, st == CMS_OK);
	if (res)
		write_result(pause, res, w, nd, st, failed_device, cms_now_ns() - t0);
out:
	free(g);
	free(w);
	return st;
}

cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t n,
			    const cms_pause_options *opts, cms_pause_result *res)
{
	return run(ctx, true, regions, n, opts, res);
}

cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t n,
			     const cms_resume_options *opts, cms_resume_result *res)
{
	return run(ctx, false, regions, n, opts, res);
}

void cms_result_out(void *theirs, const void *ours, size_t ours_size, size_t ver0, uint32_t devices,
		    cms_status st)
{
	size_t tsize;

	memcpy(&tsize, theirs, sizeof(tsize));
	if (!st || (devices && tsize > ver0))
		cms_copy_out(theirs, ours, ours_size);
}
