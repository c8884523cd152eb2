/* SPDX-License-Identifier: MIT */
/*
 * out.c - the steps of the out side (what a pause does to each allocation):
 * wait for GPU work, save the content per policy, unmap, release, guard
 * (CMS_REGION_GUARD: the zero handle mapped read-only where memory was
 * released), and the rollback that unguards and maps everything again. Each step leaves every
 * allocation in an exact state (mapped, handle, saved), so that the rollback can work from it
 * whatever failed: only content of DISCARD/ZERO memory already released is lost by a rollback.
 */
#include "engine_internal.h"

cms_status cms_out_wait(struct cms_work *w)
{
	const cms_pause_options *o = w->call->po;
	cms_context *ctx = w->ctx;
	cms_status st = CMS_OK;

	if (o->flags & CMS_PAUSE_NO_SYNC)
		return CMS_OK;
	if (o->stream || o->event) {
		if (o->stream)
			CU_TRY(ctx, cuStreamSynchronize((CUstream)(uintptr_t)o->stream), st, out);
		if (o->event)
			CU_TRY(ctx, cuEventSynchronize((CUevent)(uintptr_t)o->event), st, out);
		goto out;
	}
	CU_TRY(ctx, cuCtxSynchronize(), st, out);
out:
	return st;
}

cms_status cms_out_save(struct cms_work *w, struct cms_lanes *l)
{
	cms_status st, rb;

	st = cms_store_save(l, w->vo, w->no, false, &w->saved);
	rb = cms_lanes_sync(l); /* also after a failure: copies may be in flight */
	if (!st)
		st = rb;
	if (!st) /* stored when it returns (a file written and synchronized) */
		st = cms_store_save(l, w->vo, w->no, true, &w->saved);
	return st;
}

uint64_t cms_out_bytes(const struct cms_alloc *a)
{
	uint64_t bytes = a->physical;

	if (cms_alloc_vmm(a)->run && cms_run_is_last(a))
		bytes += cms_alloc_vmm(a)->run->retained;
	return bytes;
}

/* An allocation mapped without a handle (a failed free whose handle could not be retained
 * back, cms_vmm_unback) gives its memory back with its unmap: counted here. */
cms_status cms_out_unmap(struct cms_work *w)
{
	uint64_t bytes = 0;
	cms_status st;
	size_t i;

	for (i = 0; i < w->no; i++) {
		bool orphan = w->vo[i]->mapped && !cms_alloc_vmm(w->vo[i])->handle;

		st = cms_vmm_unmap(w->vo[i]);
		if (st)
			return st;
		bytes += orphan ? cms_out_bytes(w->vo[i]) : 0;
	}
	w->released += bytes;
	return CMS_OK;
}

cms_status cms_out_release(struct cms_work *w)
{
	uint64_t bytes = 0;
	cms_status st;
	size_t i;

	for (i = 0; i < w->no; i++)
		if (cms_alloc_vmm(w->vo[i])->handle)
			bytes += cms_out_bytes(w->vo[i]);
	for (i = 0; i < w->no; i++) {
		st = cms_vmm_release(w->vo[i]);
		if (st)
			return st;
	}
	w->released += bytes;
	return CMS_OK;
}

cms_status cms_out_guard(struct cms_work *w)
{
	cms_status st;
	size_t i;

	for (i = 0; i < w->no; i++) {
		struct cms_alloc *a = w->vo[i];

		if (!(a->region->flags & CMS_REGION_GUARD) || cms_alloc_vmm(a)->handle || a->mapped)
			continue;
		st = cms_vmm_guard(a);
		if (st)
			return st;
	}
	return CMS_OK;
}

/* After a failed rollback: an allocation mapped again whose content did not come back (its
 * restore failed, or did not finish) is unmapped, so that it lacks memory like one never mapped
 * again and the next resume restores it from its store; a failed unmap is logged (its stored
 * content is kept: cms_out_drop_fresh leaves it). */
static void unmap_unrestored(struct cms_work *w)
{
	size_t i;

	for (i = 0; i < w->no; i++) {
		struct cms_alloc *a = w->vo[i];

		if (!a->mapped || !cms_alloc_engine(a)->rollback_released)
			continue;
		if (cms_vmm_unmap(a))
			cms_log(w->ctx, CMS_LOG_ERROR,
				"0x%llx: mapped without its content after a failed rollback",
				(unsigned long long)a->base);
	}
}

cms_status cms_out_rollback(struct cms_work *w, struct cms_lanes *l)
{
	struct cms_progress_sink *prev = cms_progress_enter(NULL); /* a rollback reports nothing */
	cms_status first = CMS_OK, st;
	uint64_t unused = 0;
	size_t i, k;

	/* Guards first: a run is mapped again over all its members' addresses at once. One that
	 * stays makes its allocation's map below fail (state exact for a later call). */
	for (i = 0; i < w->no; i++) {
		st = cms_vmm_unguard(w->vo[i]);
		if (st && !first)
			first = st;
	}
	/* A run's members get their handle with the first one. One mapped without a handle (a
	 * failed free's, cms_vmm_unback) has its content. */
	for (i = 0; i < w->no; i++)
		cms_alloc_engine(w->vo[i])->rollback_released = !cms_work_holds_memory(w->vo[i]);
	for (i = 0; i < w->no; i++) {
		struct cms_alloc *a = w->vo[i];

		st = cms_vmm_back(a);
		/* Once mapped, every released member of its run gets its content back (a member
		 * whose own attempt failed earlier is mapped now by a later one). */
		for (k = 0; !st && k < (cms_alloc_vmm(a)->run ? cms_alloc_vmm(a)->run->nslots : 1);
		     k++) {
			struct cms_alloc *m =
				cms_alloc_vmm(a)->run ? cms_alloc_vmm(a)->run->slots[k].a : a;

			if (!m || !cms_alloc_engine(m)->rollback_released || !m->mapped)
				continue;
			st = cms_store_restore(l, &m, 1, &unused);
			if (!st)
				cms_alloc_engine(m)->rollback_released = false;
		}
		if (st && !first)
			first = st;
	}
	st = cms_lanes_sync(l);
	if (!first)
		first = st;
	if (first)
		unmap_unrestored(w);
	cms_progress_enter(prev);
	return first;
}

void cms_out_drop_fresh(struct cms_work *w)
{
	size_t i;

	for (i = 0; i < w->no; i++) {
		struct cms_alloc *a = w->vo[i];

		/* The device holds the content: a saved copy is stale (not when the restore of a
		 * rollback failed: the stored copy is the content). */
		if (a->mapped && !cms_alloc_engine(a)->rollback_released)
			cms_alloc_set_saved(a, false);
		if (a->mapped && !cms_alloc_engine(a)->rollback_released &&
		    cms_alloc_store(a)->fresh_buffer && !cms_store_forget_begin(w->ctx, a))
			cms_store_forget(w->ctx, a);
		cms_alloc_store(a)->fresh_buffer = false;
	}
}
