/* SPDX-License-Identifier: MIT */
/*
 * work.c - a device's work lists and the device-level steps every schedule
 * shares. Runs on the device's worker thread with the device's context current.
 */
#include <stdlib.h>

#include "engine_internal.h"

bool cms_work_holds_memory(const struct cms_alloc *a)
{
	return a->mapped || cms_alloc_vmm(a)->handle;
}

/* Mapped is enough: an allocation whose free failed at the unmap keeps its memory mapped
 * without a handle (cms_vmm_unback); a resume must not back and restore it again. */
bool cms_work_lacks_memory(const struct cms_alloc *a)
{
	return !a->mapped;
}

/* The allocations of regions[0..n) for which want() holds, in address order (NULL: none). */
static cms_status collect(struct cms_region **regions, size_t n,
			  bool (*want)(const struct cms_alloc *), struct cms_alloc ***out,
			  size_t *count)
{
	struct cms_alloc **v, *a;
	size_t i, k = 0, total = 0;

	for (i = 0; i < n; i++)
		total += regions[i]->nallocs;
	*out = NULL;
	*count = 0;
	if (!total)
		return CMS_OK;
	v = malloc(total * sizeof(*v));
	if (!v)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate a work list of %zu", total);
	for (i = 0; i < n; i++)
		for (a = regions[i]->allocs; a; a = a->next)
			if (want(a))
				v[k++] = a;
	/* Address order: runs' members consecutive (run.c), backups laid out like the device
	 * bytes so that copies cover adjacent allocations (host_*.c), disk slots in order. */
	cms_run_order(v, k);
	*out = v;
	*count = k;
	return CMS_OK;
}

cms_status cms_work_collect(struct cms_work *w)
{
	cms_status st;
	size_t i;

	st = collect(w->out, w->nout, cms_work_holds_memory, &w->vo, &w->no);
	if (!st)
		st = collect(w->in, w->nin, cms_work_lacks_memory, &w->vi, &w->ni);
	if (st)
		return st;
	w->had_handle = calloc(w->ni + 1, sizeof(*w->had_handle));
	if (!w->had_handle)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
	/* Adjacent allocations share one handle and one mapping (run.c). */
	st = cms_run_plan(w->vi, w->ni);
	for (i = 0; i < w->ni; i++)
		w->had_handle[i] = cms_alloc_vmm(w->vi[i])->handle != 0;
	return st;
}

void cms_work_release(struct cms_work *w)
{
	cms_run_dissolve(w->vi, w->ni);	      /* runs planned but never backed (a failure) */
	cms_store_call_done(w->out, w->nout); /* no copy runs any more: staging goes */
	cms_store_call_done(w->in, w->nin);
	free(w->vo);
	free(w->vi);
	free(w->had_handle);
	w->vo = w->vi = NULL;
	w->had_handle = NULL;
}

cms_status cms_work_settle(struct cms_work *w)
{
	struct cms_lanes all = cms_work_lanes(w, 0, CMS_COPY_STREAMS);
	bool pending = false;
	cms_status st;
	size_t i;

	for (i = 0; i < w->nout; i++)
		pending |= w->out[i]->restore_pending;
	if (!pending)
		return CMS_OK;
	st = cms_lanes_sync(&all);
	for (i = 0; i < w->nout && !st; i++)
		w->out[i]->restore_pending = false;
	return st;
}

uint64_t cms_work_free_bytes(struct cms_work *w)
{
	size_t f = 0, t = 0;

	if (w->ctx->drv.cuMemGetInfo(&f, &t) != CUDA_SUCCESS)
		return 0;
	return f;
}

cms_status cms_work_refreeze(struct cms_region **v, size_t n, bool thaw)
{
	cms_status first = CMS_OK, st;
	size_t i;

	for (i = 0; i < n; i++) {
		struct cms_region *r = v[i];

		if (!cms_region_engine(r)->frozen)
			continue;
		st = cms_vmm_region_access(r, cms_region_vmm(r)->peer_mask, false,
					   cms_region_vmm(r)->peer_mask, true);
		if (st && !first)
			first = st;
		if (st && thaw && st != CMS_ERR_ROLLBACK_FAILED) { /* every mapping read-write */
			cms_region_engine(r)->frozen = false;
			cms_log(r->ctx, CMS_LOG_ERROR,
				"region \"%s\" thawed: not read-only again after a failed pause: "
				"%s",
				r->tag, cms_last_error());
		}
	}
	return first;
}

struct cms_lanes cms_work_lanes(struct cms_work *w, unsigned first, unsigned count)
{
	struct cms_lanes l = { .ctx = w->ctx, .dev = w->dev, .first = first, .count = count };

	return l;
}

cms_status cms_work_stop_check(struct cms_work *w)
{
	bool stop = false;

	if (w->sides) { /* a swap: its other side may have failed */
		pthread_mutex_lock(&w->lock);
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
	}
	if (stop)
		return cms_set_error(CMS_XDEV_ABORTED,
				     "stopped: the other side of the swap failed");
	return cms_xdev_check(w->xv);
}
