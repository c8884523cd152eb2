/* SPDX-License-Identifier: MIT */
/*
 * swap.c - cms_swap: pause one tag while another resumes, both directions'
 * copies at once, transactional over both.
 *
 * The calling thread runs the pause side, a thread of the call the resume
 * side; the regions of both tags are locked by the calling thread for the
 * whole call (thread creation and join order the other thread's accesses).
 *
 *   pause side (calling thread), allocation by allocation, on stream 0 of its device:
 *     HOST: host buffer + cuMemcpyDtoHAsync (host.c); cuEventRecord;
 *     once the copy RING - 1 allocations back is done (cuEventSynchronize):
 *     unmap + release it and tell the resume side memory came free.
 *   resume side (thread), allocation by allocation, on streams 1..3:
 *     cuMemCreate (on CUDA_ERROR_OUT_OF_MEMORY: wait for the pause side's next
 *     release while it has any left, then try again), map, restore content;
 *     cuEventRecord; progress when the copy RING - 1 back is done.
 *   commit when both succeeded; otherwise undo the resume side first (it
 *   gives memory back) and then roll the pause side back (pause.c's rollback:
 *   re-back, restore HOST content from the backup).
 * Either side stops early once the other failed (CMS_XDEV_ABORTED).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define RING 4		 /* copies of a side in flight before it waits for the oldest */
#define PAUSE_STREAM 0	 /* the pause side's library stream */
#define RESUME_STREAM0 1 /* the resume side's: 1 .. CMS_COPY_STREAMS - 1 */

struct side {
	struct cms_region **regions;
	size_t nr;
	struct cms_alloc **v;
	size_t n;
	int32_t devs[CMS_MAX_DEVICES];
	size_t nd;
	CUevent ev[CMS_MAX_DEVICES][RING]; /* by device ordinal; made for devs only */
	uint64_t pending[RING];		   /* bytes copied by the allocation of each slot */
	cms_status st;
	int32_t failed_device;
	char msg[512];
	uint64_t bytes, copied;		      /* released / backed; backed up / restored */
	uint64_t dev_allocs[CMS_MAX_DEVICES]; /* per device ordinal */
	uint64_t dev_bytes[CMS_MAX_DEVICES];
	uint64_t dev_copied[CMS_MAX_DEVICES];
};

struct swap {
	cms_context *ctx;
	const cms_pause_options *po;
	struct side p, r;
	bool *had_handle;
	struct cms_progress prog;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t releases; /* physical releases of the pause side so far */
	bool p_finished;   /* the pause side released all it will */
	bool abort;	   /* a side failed */
	struct cms_logq logq;
};

static bool has_memory(struct cms_alloc *a)
{
	return a->mapped || a->handle;
}

static bool needs_memory(struct cms_alloc *a)
{
	return !a->mapped || !a->handle;
}

static void signal_state(struct swap *s, bool released, bool finished, bool abort)
{
	pthread_mutex_lock(&s->lock);
	s->releases += released;
	s->p_finished |= finished;
	s->abort |= abort;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static bool aborted(struct swap *s)
{
	bool ab;

	pthread_mutex_lock(&s->lock);
	ab = s->abort;
	pthread_mutex_unlock(&s->lock);
	return ab;
}

static cms_status abort_status(void)
{
	return cms_set_error(CMS_XDEV_ABORTED, "stopped: the other side of the swap failed");
}

/* ---- events ---- */

static cms_status events_make(cms_context *ctx, struct side *sd)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i, k;

	for (i = 0; i < sd->nd && !st; i++) {
		st = cms_switch_device(ctx, &cur, sd->devs[i]);
		for (k = 0; k < RING && !st; k++)
			CU_TRY(ctx, cuEventCreate(&sd->ev[sd->devs[i]][k], CU_EVENT_DISABLE_TIMING),
			       st, out);
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

/* Best effort: a failed cuEventDestroy (or push) leaves the event to the driver. */
static void events_free(cms_context *ctx, struct side *sd)
{
	int32_t cur = -1;
	size_t i, k;

	for (i = 0; i < sd->nd; i++) {
		if (cms_switch_device(ctx, &cur, sd->devs[i]))
			continue;
		for (k = 0; k < RING; k++)
			if (sd->ev[sd->devs[i]][k])
				ctx->drv.cuEventDestroy(sd->ev[sd->devs[i]][k]);
	}
	cms_switch_done(ctx, &cur);
}

/* Waits for the copy of allocation j of the side (the event of its slot), device current. */
static cms_status wait_copy(struct swap *s, struct side *sd, size_t j, int32_t *cur)
{
	cms_context *ctx = s->ctx;
	int32_t dev = sd->v[j]->region->device;
	cms_status st;

	st = cms_switch_device(ctx, cur, dev);
	if (st)
		return st;
	CU_TRY(ctx, cuEventSynchronize(sd->ev[dev][j % RING]), st, out);
	cms_progress_add(&s->prog, sd->pending[j % RING]);
out:
	return st;
}

static cms_status record_copy(struct swap *s, struct side *sd, size_t k, CUstream stream,
			      uint64_t copied)
{
	cms_context *ctx = s->ctx;
	cms_status st = CMS_OK;

	sd->pending[k % RING] = copied;
	CU_TRY(ctx, cuEventRecord(sd->ev[sd->v[k]->region->device][k % RING], stream), st, out);
out:
	return st;
}

/* ---- the pause side ---- */

/* The copy of allocation j is done: unmap and release it, tell the resume side. */
static cms_status pause_release(struct swap *s, size_t j, int32_t *cur)
{
	struct side *sd = &s->p;
	struct cms_alloc *a = sd->v[j];
	uint64_t bytes = a->handle ? a->physical : 0;
	int32_t dev = a->region->device;
	cms_status st;

	st = wait_copy(s, sd, j, cur);
	if (st)
		return st;
	/* A run (run.c) is unmapped and released as a whole, once its last member is copied
	 * (members are consecutive in sd->v, which is in address order). */
	if (!a->run || cms_run_is_last(a)) {
		bytes += a->run ? a->run->retained : 0; /* freed members' bytes go too */
		st = cms_vmm_unmap(a);
		if (!st)
			st = cms_vmm_release(a);
		if (st)
			return st;
	}
	sd->bytes += bytes;
	sd->dev_bytes[dev] += bytes;
	sd->dev_allocs[dev]++;
	signal_state(s, true, false, false);
	return CMS_OK;
}

static cms_status pause_side(struct swap *s)
{
	struct side *sd = &s->p;
	cms_context *ctx = s->ctx;
	int32_t cur = -1, dev = -1;
	size_t i, next = 0;
	cms_status st = CMS_OK;

	for (i = 0; i < sd->n && !st; i++) {
		struct cms_alloc *a = sd->v[i];
		uint64_t copied = 0;

		if (aborted(s)) {
			st = abort_status();
			break;
		}
		dev = a->region->device;
		/* One allocation at a time: its copy goes on stream 0 (k = 0) of its device. */
		st = cms_backup_copy_out(ctx, &sd->v[i], 1, &copied);
		if (!st)
			st = cms_switch_device(ctx, &cur, dev);
		if (!st)
			st = record_copy(s, sd, i, cms_copy_stream(ctx, dev, PAUSE_STREAM), copied);
		if (st)
			break;
		sd->copied += copied;
		sd->dev_copied[dev] += copied;
		if (i + 1 >= RING)
			st = pause_release(s, next++, &cur);
	}
	while (!st && next < sd->n)
		st = pause_release(s, next++, &cur);
	cms_switch_done(ctx, &cur);
	if (st) {
		if (st != CMS_XDEV_ABORTED)
			sd->failed_device = dev;
		cms_last_error_message(sd->msg, sizeof(sd->msg));
	}
	sd->st = st;
	signal_state(s, false, true, st != CMS_OK);
	return st;
}

/* ---- the resume side ---- */

/* cuMemCreate; out of memory while the pause side has memory left to release: wait, retry. */
static cms_status create_waiting(struct swap *s, struct cms_alloc *a)
{
	uint64_t seen;
	bool finished, ab;
	cms_status st;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		seen = s->releases;
		finished = s->p_finished;
		pthread_mutex_unlock(&s->lock);
		st = cms_vmm_create(a);
		if (st != CMS_ERR_OUT_OF_DEVICE_MEMORY || finished)
			return st;
		pthread_mutex_lock(&s->lock);
		while (s->releases == seen && !s->p_finished && !s->abort)
			pthread_cond_wait(&s->cond, &s->lock);
		ab = s->abort;
		pthread_mutex_unlock(&s->lock);
		if (ab)
			return abort_status();
	}
}

static cms_status resume_one(struct swap *s, size_t k, int32_t *cur)
{
	struct side *sd = &s->r;
	struct cms_alloc *a = sd->v[k];
	cms_context *ctx = s->ctx;
	int32_t dev = a->region->device;
	CUstream stream;
	uint64_t restored = 0;
	cms_status st = CMS_OK;

	if (!a->handle)
		st = create_waiting(s, a);
	if (!st && !a->mapped)
		st = cms_vmm_map(a);
	if (!st)
		st = cms_switch_device(ctx, cur, dev);
	if (st)
		return st;
	sd->bytes += a->physical;
	sd->dev_bytes[dev] += a->physical;
	sd->dev_allocs[dev]++;
	stream =
		cms_copy_stream(ctx, dev, RESUME_STREAM0 + k % (CMS_COPY_STREAMS - RESUME_STREAM0));
	st = cms_restore_content(ctx, a, stream, &restored);
	if (!st)
		st = record_copy(s, sd, k, stream, restored);
	sd->copied += restored;
	sd->dev_copied[dev] += restored;
	return st;
}

static void *resume_side(void *arg)
{
	struct swap *s = arg;
	struct side *sd = &s->r;
	int32_t cur = -1;
	size_t k, next = 0;
	cms_status st = CMS_OK;

	cms_log_defer(&s->logq);
	for (k = 0; k < sd->n && !st; k++) {
		if (aborted(s)) {
			st = abort_status();
			break;
		}
		st = resume_one(s, k, &cur);
		if (st && st != CMS_XDEV_ABORTED)
			sd->failed_device = sd->v[k]->region->device;
		if (!st && k + 1 >= RING)
			st = wait_copy(s, sd, next++, &cur);
	}
	while (!st && next < sd->n)
		st = wait_copy(s, sd, next++, &cur);
	cms_switch_done(s->ctx, &cur);
	if (st)
		cms_last_error_message(sd->msg, sizeof(sd->msg));
	sd->st = st;
	if (st)
		signal_state(s, false, false, true);
	cms_log_defer(NULL);
	return NULL;
}

/* ---- commit and rollback ---- */

static void commit(struct swap *s)
{
	cms_context *ctx = s->ctx;
	struct cms_alloc *a;
	size_t i;

	cms_run_dissolve(s->p.v, s->p.n); /* released runs: separate until the next resume */
	for (i = 0; i < s->p.n; i++)
		s->p.v[i]->fresh_saved = s->p.v[i]->fresh_buffer = false;
	for (i = 0; i < s->p.nr; i++)
		__atomic_store_n(&s->p.regions[i]->state, CMS_STATE_PAUSED, __ATOMIC_RELAXED);
	for (i = 0; i < s->r.n; i++) {
		cms_alloc_set_saved(s->r.v[i], false);
		if (s->r.v[i]->region->flags & CMS_REGION_RELEASE_HOST)
			cms_backup_free(ctx, s->r.v[i]);
	}
	for (i = 0; i < s->r.nr; i++) {
		for (a = s->r.regions[i]->allocs; a; a = a->next)
			if (a->mapped)
				cms_alloc_set_saved(a, false);
		__atomic_store_n(&s->r.regions[i]->state, CMS_STATE_ACTIVE, __ATOMIC_RELAXED);
		s->r.regions[i]->epoch++;
		s->r.regions[i]->restore_pending = false;
	}
}

/* The resume side's undo: unmaps and releases what it made. Tries all. */
static cms_status resume_undo(struct swap *s)
{
	cms_status first, st;
	size_t i;

	first = cms_sync_streams(s->ctx, s->r.devs, s->r.nd); /* copies into the memory */
	for (i = 0; i < s->r.n; i++) {
		st = cms_vmm_unmap(s->r.v[i]);
		if (!st && !s->had_handle[i])
			st = cms_vmm_release(s->r.v[i]);
		if (st && !first)
			first = st;
	}
	cms_run_dissolve(s->r.v, s->r.n); /* the runs this call planned, where released */
	return first;
}

static cms_status rollback(struct swap *s)
{
	struct side *failed = s->p.st && s->p.st != CMS_XDEV_ABORTED ? &s->p : &s->r;
	char saved[512];
	cms_status st, rb, rb2;

	if (failed->st == CMS_XDEV_ABORTED || !failed->st) /* cannot be: an abort needs a failure */
		st = cms_set_error(CMS_ERR_INTERNAL, "swap: both sides stopped: %s", failed->msg);
	else
		st = cms_set_error(failed->st, "%s side: %s", failed == &s->p ? "pause" : "resume",
				   failed->msg);
	cms_last_error_message(saved, sizeof(saved));
	rb = resume_undo(s); /* first: it gives the memory back that the pause side needs */
	rb2 = cms_pause_rollback(s->ctx, s->p.v, s->p.n, s->p.devs, s->p.nd);
	if (!rb)
		rb = rb2;
	cms_pause_drop_fresh(s->ctx, s->p.v, s->p.n);
	return cms_rollback_status(s->ctx, st, saved, rb, "swap");
}

/* ---- results ---- */

static uint64_t free_sum(cms_context *ctx, const struct side *sd)
{
	int32_t cur = -1;
	size_t i, f, t;
	uint64_t sum = 0;

	for (i = 0; i < sd->nd; i++) {
		if (cms_switch_device(ctx, &cur, sd->devs[i]) ||
		    ctx->drv.cuMemGetInfo(&f, &t) != CUDA_SUCCESS) {
			sum = 0; /* only a measurement */
			break;
		}
		sum += f;
	}
	cms_switch_done(ctx, &cur);
	return sum;
}

static int cmp_device(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Per-device entries of a side (zeros but device and status on failure). */
static void device_results(struct side *sd, cms_status st, uint64_t elapsed, cms_device_result *dr)
{
	int32_t devs[CMS_MAX_DEVICES];
	size_t i, k;

	memcpy(devs, sd->devs, sd->nd * sizeof(*devs));
	qsort(devs, sd->nd, sizeof(*devs), cmp_device);
	memset(dr, 0, CMS_DEVICE_RESULTS_MAX * sizeof(*dr));
	for (i = 0; i < sd->nd && i < CMS_DEVICE_RESULTS_MAX; i++) {
		int32_t d = devs[i];

		dr[i].device = d;
		dr[i].status = sd->st && sd->st != CMS_XDEV_ABORTED && d == sd->failed_device ?
				       sd->st :
				       CMS_OK;
		for (k = 0; k < sd->nr; k++)
			dr[i].regions += sd->regions[k]->device == d;
		if (st)
			continue;
		dr[i].allocations = sd->dev_allocs[d];
		dr[i].bytes = sd->dev_bytes[d];
		dr[i].bytes_copied = sd->dev_copied[d];
		dr[i].elapsed_ns = elapsed;
	}
}

static void results(struct swap *s, cms_status st, uint64_t elapsed, uint64_t free_before,
		    cms_pause_result *presult, cms_resume_result *rresult)
{
	cms_pause_result pr;
	cms_resume_result rr;

	memset(&pr, 0, sizeof(pr));
	memset(&rr, 0, sizeof(rr));
	pr.struct_size = sizeof(pr);
	rr.struct_size = sizeof(rr);
	pr.devices = (uint32_t)s->p.nd;
	rr.devices = (uint32_t)s->r.nd;
	pr.failed_device = s->p.st && s->p.st != CMS_XDEV_ABORTED ? s->p.failed_device : -1;
	rr.failed_device = s->r.st && s->r.st != CMS_XDEV_ABORTED ? s->r.failed_device : -1;
	device_results(&s->p, st, elapsed, pr.device_results);
	device_results(&s->r, st, elapsed, rr.device_results);
	if (!st) {
		pr.regions = s->p.nr;
		pr.allocations = s->p.n;
		pr.bytes_released = s->p.bytes;
		pr.bytes_backed_up = s->p.copied;
		pr.driver_free_before = free_before;
		pr.driver_free_after = free_sum(s->ctx, &s->p);
		pr.elapsed_ns = elapsed;
		rr.regions = s->r.nr;
		rr.allocations = s->r.n;
		rr.bytes_backed = s->r.bytes;
		rr.bytes_restored = s->r.copied;
		rr.elapsed_ns = elapsed;
	}
	if (presult)
		cms_result_out(presult, &pr, sizeof(pr), CMS_PAUSE_RESULT_SIZE_VER0, pr.devices,
			       st);
	if (rresult)
		cms_result_out(rresult, &rr, sizeof(rr), CMS_RESUME_RESULT_SIZE_VER0, rr.devices,
			       st);
}

/* ---- the engine (region locks held) ---- */

static uint64_t host_bytes_to_copy(struct cms_alloc **v, size_t n, bool out)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i]->region->policy == CMS_POLICY_HOST && (out ? v[i]->mapped : v[i]->saved))
			sum += v[i]->size;
	return sum;
}

static cms_status start_thread(struct swap *s, pthread_t *tid)
{
	sigset_t all, old;
	int err;

	sigfillset(&all); /* the thread never takes the application's signals */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(tid, NULL, resume_side, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot start the resume thread of the swap");
	return CMS_OK;
}

static cms_status engine(struct swap *s, cms_pause_result *presult, cms_resume_result *rresult)
{
	cms_context *ctx = s->ctx;
	uint64_t t0 = cms_now_ns(), free_before = 0;
	pthread_t tid;
	size_t i;
	cms_status st;

	for (i = 0; i < s->p.nr; i++) { /* an async resume's copies must be done first */
		st = cms_region_settle(s->p.regions[i]);
		if (st)
			return st;
	}
	st = cms_collect_allocs(s->p.regions, s->p.nr, has_memory, &s->p.v, &s->p.n);
	if (!st)
		st = cms_collect_allocs(s->r.regions, s->r.nr, needs_memory, &s->r.v, &s->r.n);
	if (st)
		return st;
	s->had_handle = calloc(s->r.n + 1, sizeof(*s->had_handle));
	if (!s->had_handle)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
	st = cms_run_plan(s->r.v, s->r.n); /* adjacent allocations share handles (run.c) */
	for (i = 0; i < s->r.n; i++)
		s->had_handle[i] = s->r.v[i]->handle != 0;
	if (st)
		goto out_plan;
	s->p.nd = cms_region_devices(s->p.regions, s->p.nr, s->p.devs);
	s->r.nd = cms_region_devices(s->r.regions, s->r.nr, s->r.devs);
	s->p.failed_device = s->r.failed_device = -1;
	if (presult)
		free_before = free_sum(ctx, &s->p);

	st = events_make(ctx, &s->p);
	if (!st)
		st = events_make(ctx, &s->r);
	if (!st)
		st = cms_pause_wait(ctx, s->p.devs, s->p.nd, s->po);
	if (st)
		goto out_events;
	if (pthread_mutex_init(&s->lock, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
		goto out_events;
	}
	if (pthread_cond_init(&s->cond, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a condition");
		goto out_mutex;
	}
	cms_progress_begin(&s->prog, ctx, "swap",
			   host_bytes_to_copy(s->p.v, s->p.n, true) +
				   host_bytes_to_copy(s->r.v, s->r.n, false));
	st = start_thread(s, &tid);
	if (st)
		goto out_cond; /* nothing was done */

	pause_side(s);
	pthread_join(tid, NULL);
	cms_log_flush(ctx, &s->logq);
	if (!s->p.st && !s->r.st) {
		commit(s);
		st = CMS_OK;
	} else {
		st = rollback(s);
	}
	cms_progress_end(&s->prog, st == CMS_OK);
	results(s, st, cms_now_ns() - t0, free_before, presult, rresult);
	if (!st)
		cms_log(ctx, CMS_LOG_INFO,
			"swapped: paused %zu allocations (%llu bytes copied out), resumed %zu "
			"(%llu bytes copied in) in %.3f ms",
			s->p.n, (unsigned long long)s->p.copied, s->r.n,
			(unsigned long long)s->r.copied, (double)(cms_now_ns() - t0) / 1e6);
	goto out_cond_done;

out_cond:
	cms_progress_end(&s->prog, false);
out_cond_done:
	pthread_cond_destroy(&s->cond);
out_mutex:
	pthread_mutex_destroy(&s->lock);
out_events:
	events_free(ctx, &s->r);
	events_free(ctx, &s->p);
out_plan:
	cms_run_dissolve(s->r.v, s->r.n); /* runs planned but never backed (a failure) */
	return st;
}

cms_status cms_engine_swap(cms_context *ctx, struct cms_region **out, size_t nout,
			   struct cms_region **in, size_t nin, const cms_pause_options *po,
			   cms_pause_result *presult, cms_resume_result *rresult)
{
	struct swap s;
	cms_status st;

	memset(&s, 0, sizeof(s));
	s.ctx = ctx;
	s.po = po;
	s.p.regions = out;
	s.p.nr = nout;
	s.r.regions = in;
	s.r.nr = nin;
	st = engine(&s, presult, rresult);
	free(s.p.v);
	free(s.r.v);
	free(s.had_handle);
	return st;
}
