/* SPDX-License-Identifier: MIT */
/*
 * freeze.c - cms_region_freeze and cms_region_thaw (since 1.3): a region's
 * memory read-only, so that a pause whose backup still holds the content
 * copies nothing (docs/internals.md, "Frozen regions").
 */
#include "api.h"

#define SHAREABLE (CMS_REGION_SHAREABLE | CMS_REGION_SHAREABLE_FABRIC)

/* Freezes (freeze) or thaws r: every mapping's access, all or nothing, then the flag. */
static cms_status set_frozen(struct cms_region *r, bool freeze)
{
	cms_status st;

	if (!r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(r->ctx);
	if (st)
		return st;
	pthread_mutex_lock(&r->lock);
	/* Under the lock: cms_region_flags_set writes the flags (other bits) under it. */
	if (freeze && (r->flags & SHAREABLE)) {
		st = cms_set_error(CMS_ERR_NOT_SUPPORTED,
				   "region \"%s\" is shareable: its importers map it read-write "
				   "themselves, so it cannot be frozen",
				   r->tag);
		goto out;
	}
	if (r->frozen == freeze)
		goto out;	   /* nothing to do */
	st = cms_region_settle(r); /* no restore copy may still run into it */
	if (st)
		goto out;
	st = cms_vmm_region_access(r, r->peer_mask, !freeze, r->peer_mask, freeze);
	/* Mixed after a failed undo: the flag stays. A thaw's left some mappings writable while
	 * frozen: no backup may count as the content then. */
	if (st == CMS_ERR_ROLLBACK_FAILED && !freeze)
		cms_store_stale(r);
	if (st)
		goto out;
	r->frozen = freeze;
	/* frozen: backups become current from the next pause or resume on; thawed: none is */
	cms_store_stale(r);
	cms_log(r->ctx, CMS_LOG_DEBUG, "region \"%s\" on device %d %s", r->tag, r->device,
		freeze ? "frozen" : "thawed");
out:
	pthread_mutex_unlock(&r->lock);
	return st;
}

CMS_API cms_status cms_region_freeze(cms_region *region)
{
	return set_frozen(region, true);
}

CMS_API cms_status cms_region_thaw(cms_region *region)
{
	return set_frozen(region, false);
}
