/* SPDX-License-Identifier: MIT */
/*
 * lifetime.c - the end of an allocation and of a region: waiting for an async
 * resume's copies (settle), releasing what an allocation holds (device memory,
 * reservation, host backup, disk slot), dropping a region's last reference.
 */
#include <stdlib.h>

#include "engine_internal.h"

cms_status cms_region_settle(struct cms_region *r)
{
	int32_t dev = r->device;
	cms_status st;

	if (!r->restore_pending)
		return CMS_OK;
	st = cms_sync_streams(r->ctx, &dev, 1);
	if (!st)
		r->restore_pending = false;
	return st;
}

/*
 * Frees everything an allocation holds; the region lock is held. Ordered so that nothing
 * needs undoing: what can fail and be undone surely comes first (the host buffer's
 * unregistration, the bookkeeping of the addresses given back), then the release of the
 * handle (the memory stays while mapped), then the unmap, the one step that loses the
 * content, and after it nothing can fail. A failure leaves the allocation as it was, its
 * content, access and backup with it (a frozen region's backup stays current): after a
 * failed unmap it has no handle of its own any more (cms_vmm_unback), which only the driver
 * sees. A paused allocation has no memory; its guard (CMS_REGION_GUARD) is unmapped last, in
 * one call (nothing changed when it fails).
 */
cms_status cms_alloc_release(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st;

	st = cms_region_settle(a->region); /* no copy may still run into it */
	if (st)
		return st;
	st = cms_store_forget_begin(ctx, a);
	if (st)
		return st;
	if (cms_run_keeps(a)) {
		/* Its neighbours share its physical handle: its bytes stay in their run until the
		 * run is released (run.c). */
		cms_run_retire(a);
		goto forget;
	}
	st = cms_vmm_unreserve_ready(a);
	if (!st)
		st = cms_vmm_unback(a);
	if (!st)
		st = cms_vmm_unreserve(a); /* fails only unmapping a paused allocation's guard */
	if (st) {
		cms_store_forget_cancel(ctx, a);
		return st;
	}
	/* After a's own addresses went back with the bookkeeping held ready: the run's freed
	 * members' and tail's go back too (a failure there only logs). */
	cms_run_dissolve(&a, 1);
forget:
	cms_store_forget(ctx, a);
	cms_store_trim(a->region);
	cms_span_clear(a);
	return CMS_OK;
}

cms_status cms_engine_free(struct cms_alloc *a)
{
	cms_status st = cms_alloc_release(a);

	if (!st)
		cms_region_unlink_alloc(a->region, a);
	return st;
}

/* A new allocation whose backing failed or was undone: out of its region's list and its
 * addresses given back; false when it still holds driver objects (the undo failed: kept,
 * unindexed, rather than lose track of them). */
static bool unlink_new(struct cms_alloc *a)
{
	if (a->mapped || cms_alloc_vmm(a)->handle) {
		cms_log(a->region->ctx, CMS_LOG_ERROR, "0x%llx: allocation rollback incomplete",
			(unsigned long long)a->base);
		return false;
	}
	cms_region_unlink_alloc(a->region, a);
	cms_run_dissolve(&a, 1); /* a new chunk never backed: its tail's addresses go back */
	cms_vmm_unreserve(a);
	return true;
}

cms_status cms_engine_alloc(struct cms_alloc *a, bool *keep)
{
	cms_status st;

	*keep = false;
	st = cms_vmm_reserve(a); /* a CMS_REGION_COALESCE region's chunk may back it too */
	if (st)
		return st;
	cms_region_link_alloc(a->region, a); /* accounting follows the state from here on */
	st = cms_vmm_back(a);
	if (st) {
		*keep = !unlink_new(a);
		return st;
	}
	cms_run_open(a);
	return CMS_OK;
}

bool cms_engine_alloc_undo(struct cms_alloc *a)
{
	if (cms_run_keeps(a))
		cms_run_untake(a); /* the chunk's other members keep it mapped */
	else
		cms_vmm_unback(a);
	return !unlink_new(a);
}

void cms_region_unref_locked(struct cms_region *r)
{
	if (--r->refs)
		return;
	cms_store_region_close(r);
	pthread_cond_destroy(&r->unclaimed);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
