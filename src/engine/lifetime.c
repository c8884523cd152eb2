/* SPDX-License-Identifier: MIT */
/*
 * lifetime.c - the end of an allocation and of a region: waiting for an async
 * resume's copies (settle), releasing what an allocation holds (device memory,
 * reservation, host backup, disk slot), dropping a region's last reference.
 */
#include <stdlib.h>

#include "engine.h"

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

/* Frees everything an allocation holds; the region lock is held. */
cms_status cms_alloc_release(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	bool active = a->region->state == CMS_STATE_ACTIVE;
	cms_status st;

	/* A free that fails may leave it mapped read-write again, or with new memory: its backup
	 * is not the content any more (cms_region_freeze). */
	cms_alloc_store(a)->current = false;
	st = cms_region_settle(a->region); /* no copy may still run into it */
	if (!st && cms_run_keeps(a)) {
		/* Its neighbours share its physical handle: its bytes stay in their run until the
		 * run is released (run.c). Only the host buffer can fail. */
		st = cms_store_forget_begin(ctx, a);
		if (st)
			return st;
		cms_run_retire(a);
		cms_store_forget(ctx, a);
		cms_store_trim(a->region);
		cms_span_clear(a);
		return CMS_OK;
	}
	if (!st)
		st = cms_vmm_unback(a);
	if (st)
		return st;
	st = cms_store_forget_begin(ctx, a);
	if (!st) {
		st = cms_vmm_unreserve(a);
		if (!st) {
			/* Only now: the content is kept until nothing can fail. */
			cms_store_forget(ctx, a);
			cms_store_trim(a->region);
			cms_span_clear(a);
			return CMS_OK;
		}
		cms_store_forget_cancel(ctx, a);
	}
	if (active && cms_vmm_back(a)) /* keep the allocation usable as it was */
		cms_log(ctx, CMS_LOG_ERROR,
			"0x%llx: not backed again after a failed free; the next resume backs it",
			(unsigned long long)a->base);
	else if (active)
		cms_vmm_refreeze(a);
	return st;
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
