/* SPDX-License-Identifier: MIT */
/*
 * in.c - the steps of the in side (what a resume does to each allocation):
 * create a physical handle (one per run of adjacent allocations, run.c), map
 * it with access, and restore the content per policy (after unmapping the
 * guard of a CMS_REGION_GUARD region); and the undo that unmaps and releases
 * what the call made and guards again. Runs with the device's context
 * current; copies go on the lanes' streams and overlap the backing of the
 * next allocations.
 */
#include "engine_internal.h"

/* cuMemCreate; out of memory while the out side of the device (a swap) has memory left to
 * release: waits for its next release and tries again. */
static cms_status create(struct cms_work *w, struct cms_alloc *a)
{
	uint64_t seen;
	bool done, stop;
	cms_status st;

	if (!w->no) /* nothing is released on this device by this call */
		return cms_vmm_create(a);
	for (;;) {
		pthread_mutex_lock(&w->lock);
		seen = w->releases;
		done = w->out_done;
		pthread_mutex_unlock(&w->lock);
		st = cms_vmm_create(a);
		if (st != CMS_ERR_OUT_OF_DEVICE_MEMORY || done)
			return st;
		pthread_mutex_lock(&w->lock);
		while (w->releases == seen && !w->out_done && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			return cms_set_error(CMS_XDEV_ABORTED,
					     "stopped: the other side of the swap failed");
	}
}

/* Consecutive backed allocations of one policy whose restore is not batched. */
struct segment {
	size_t first, n;
	uint64_t bytes;
};

static cms_status flush(struct cms_work *w, struct cms_lanes *l, struct segment *s)
{
	cms_status st = CMS_OK;

	if (s->n)
		st = cms_store_restore(l, w->vi + s->first, s->n, &w->restored);
	s->n = 0;
	s->bytes = 0;
	return st;
}

cms_status cms_in_back(struct cms_work *w, struct cms_lanes *l)
{
	struct segment seg = { 0 };
	cms_status st = CMS_OK;
	size_t i;

	/* Guards first (CMS_REGION_GUARD): a run maps over all its members' addresses at once. */
	for (i = 0; i < w->ni && !st; i++)
		st = cms_vmm_unguard(w->vi[i]);
	for (i = 0; i < w->ni && !st; i++) {
		struct cms_alloc *a = w->vi[i];
		const struct cms_store_ops *ops = cms_store_of(a->region);

		st = cms_work_stop_check(w);
		if (st)
			break;
		if (!cms_alloc_vmm(a)->handle)
			st = create(w, a);
		if (!st && !a->mapped)
			st = cms_vmm_map(a);
		if (st)
			break;
		w->backed += a->physical;
		/* A segment ends with its policy or after CMS_COPY_MERGE_MAX bytes: its copies
		 * start while the next allocations are created and mapped. */
		if (seg.n && cms_store_of(w->vi[seg.first]->region) != ops)
			st = flush(w, l, &seg);
		if (st || !ops->restore || ops->restore_batched)
			continue;
		if (!seg.n)
			seg.first = i;
		seg.n++;
		seg.bytes += a->size;
		if (seg.bytes >= CMS_COPY_MERGE_MAX)
			st = flush(w, l, &seg);
	}
	if (!st)
		st = flush(w, l, &seg);
	if (!st) /* e.g. DISK: read back and copied, synchronously (store/disk.c) */
		st = cms_store_restore_batched(l, w->vi, w->ni, &w->restored);
	return st;
}

cms_status cms_in_order_after(struct cms_work *w, CUstream stream)
{
	struct cms_device *d = &w->ctx->devices[w->dev];
	cms_context *ctx = w->ctx;
	cms_status st = CMS_OK;
	size_t k;

	for (k = 0; k < CMS_COPY_STREAMS; k++) {
		CU_TRY(ctx, cuEventRecord(d->events[k], d->streams[k]), st, out);
		CU_TRY(ctx, cuStreamWaitEvent(stream, d->events[k], 0), st, out);
	}
out:
	return st;
}

bool cms_in_frozen(const struct cms_work *w)
{
	size_t i;

	for (i = 0; i < w->nin; i++)
		if (cms_region_engine(w->in[i])->frozen)
			return true;
	return false;
}

cms_status cms_in_undo(struct cms_work *w)
{
	cms_status first = CMS_OK, st;
	size_t i;

	for (i = 0; i < w->ni; i++) {
		struct cms_alloc *a = w->vi[i];

		st = cms_vmm_unmap(a);
		if (!st && !w->had_handle[i])
			st = cms_vmm_release(a);
		/* paused again: guarded again */
		if (!st && (a->region->flags & CMS_REGION_GUARD) && !cms_alloc_vmm(a)->handle &&
		    !a->mapped)
			st = cms_vmm_guard(a);
		if (st && !first)
			first = st;
	}
	cms_run_dissolve(w->vi, w->ni); /* the runs this call planned, where released */
	return first;
}
