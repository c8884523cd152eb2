/* SPDX-License-Identifier: MIT */
/*
 * commit.c - the one commit and the one undo of every schedule. Nothing here
 * may fail on the commit path: a schedule commits after its last agreement
 * point (vote.c), when the other devices commit too.
 */
#include <string.h>

#include "engine_internal.h"

/* A frozen region's backup is its content when it was saved (or kept) or restored whole: the
 * next pause skips it (cms_store_current). */
static void mark_current(struct cms_alloc *a)
{
	cms_alloc_store(a)->current =
		cms_region_engine(a->region)->frozen && a->saved && !a->ndiscarded;
}

void cms_commit(struct cms_work *w, bool async)
{
	struct cms_alloc *a;
	size_t i;

	/* Out: released runs become separate allocations until the next resume. */
	cms_run_dissolve(w->vo, w->no);
	for (i = 0; i < w->no; i++) {
		struct cms_alloc *o = w->vo[i];

		cms_alloc_store(o)->fresh_buffer = false;
		mark_current(o); /* saved (or kept) while read-only */
	}
	for (i = 0; i < w->nout; i++)
		__atomic_store_n(&w->out[i]->state, CMS_STATE_PAUSED, __ATOMIC_RELAXED);

	/* In: a frozen region's backups restored whole are the content (current; one the store
	 * does not keep after the resume is moot: cms_store_current). */
	for (i = 0; i < w->nin; i++)
		if (!cms_region_engine(w->in[i])->frozen)
			cms_store_stale(w->in[i]);
	for (i = 0; i < w->ni; i++)
		mark_current(w->vi[i]); /* restored whole */
	/* The device holds the content; a saved copy is stale (also of allocations an earlier
	 * failed call left mapped). */
	for (i = 0; i < w->ni; i++)
		cms_alloc_set_saved(w->vi[i], false);
	for (i = 0; i < w->nin; i++)
		for (a = w->in[i]->allocs; a; a = a->next) {
			if (a->mapped)
				cms_alloc_set_saved(a, false);
			cms_span_clear(
				a); /* a declaration lasts until the resume (cms_range_discard) */
		}
	cms_store_resumed(w->ctx, w->vi, w->ni, w->in, w->nin);
	for (i = 0; i < w->nin; i++) {
		__atomic_store_n(&w->in[i]->state, CMS_STATE_ACTIVE, __ATOMIC_RELAXED);
		w->in[i]->epoch++;
		w->in[i]->restore_pending = async;
	}
}

/* After a failed rollback: an out region with an allocation left without memory is PAUSED, so
 * that the next resume backs and restores every such allocation (mapped ones are left as they
 * are; cms_commit of that resume marks their saved copies stale). An active region with an
 * allocation unmapped would be refused by that resume (CMS_ERR_NOT_PAUSED) and fault on access. */
static void pause_incomplete(struct cms_work *w)
{
	struct cms_alloc *a;
	size_t i;

	for (i = 0; i < w->nout; i++)
		for (a = w->out[i]->allocs; a; a = a->next) {
			if (!cms_work_lacks_memory(a))
				continue;
			__atomic_store_n(&w->out[i]->state, CMS_STATE_PAUSED, __ATOMIC_RELAXED);
			/* A guarded region's ranges read as zeros while it lacks memory, here too
			 * (the rollback took the guards off first); best effort, logged. */
			if ((w->out[i]->flags & CMS_REGION_GUARD) && !a->mapped &&
			    !cms_alloc_vmm(a)->guarded && cms_vmm_guard(a))
				cms_log(w->ctx, CMS_LOG_ERROR,
					"0x%llx: unguarded after a failed rollback: %s",
					(unsigned long long)a->base, cms_last_error());
		}
	cms_run_dissolve(w->vo, w->no); /* runs released whole: re-planned by the resume */
}

cms_status cms_abort(struct cms_work *w, cms_status st)
{
	struct cms_lanes all = cms_work_lanes(w, 0, CMS_COPY_STREAMS);
	char saved[512];
	cms_status rb, rb2;
	size_t i;

	cms_last_error_message(saved, sizeof(saved));
	/* Copies may still run into or out of the memory. Not a rollback step: a failure here
	 * (the schedule's own synchronization failed already) does not stop the undo. */
	(void)cms_lanes_sync(&all);
	rb = cms_in_undo(w); /* first: it gives back memory the out side may need */
	rb2 = cms_out_rollback(w, &all);
	if (!rb)
		rb = rb2;
	rb2 = cms_work_refreeze(w->out, w->nout, true); /* the rollback mapped read-write */
	if (!rb)
		rb = rb2;
	cms_feature_rollback(
		w); /* features (CMS_REGION_VERIFY: checksums of memory mapped again) */
	cms_out_drop_fresh(w);
	for (i = 0; i < w->nout + w->nin; i++) /* a failed call: no backup is current */
		cms_store_stale(i < w->nout ? w->out[i] : w->in[i - w->nout]);
	if (rb)
		pause_incomplete(w);
	return cms_rollback_status(w->ctx, st, saved, rb, w->call->sched->name);
}
