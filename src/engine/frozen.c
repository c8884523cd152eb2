/* SPDX-License-Identifier: MIT */
/*
 * frozen.c - the state change of cms_region_freeze and cms_region_thaw (since
 * 1.3): a region's memory read-only, so that a pause whose backup still holds
 * the content copies nothing (docs/internals.md, "Frozen regions"). api/freeze.c
 * checks the call (the feature table: shareable regions cannot be frozen).
 */
#include "engine_internal.h"

cms_status cms_engine_freeze(struct cms_region *r, bool freeze)
{
	cms_status st;

	if (cms_region_engine(r)->frozen == freeze)
		return CMS_OK;	   /* nothing to do */
	st = cms_region_settle(r); /* no restore copy may still run into it */
	if (st)
		return st;
	/* every mapping's access, all or nothing (vmm/access.c), then the flag */
	st = cms_vmm_region_access(r, cms_region_vmm(r)->peer_mask, !freeze,
				   cms_region_vmm(r)->peer_mask, freeze);
	/* Mixed after a failed undo: the flag stays. A thaw's left some mappings writable while
	 * frozen: no backup may count as the content then. */
	if (st == CMS_ERR_ROLLBACK_FAILED && !freeze)
		cms_store_stale(r);
	if (st)
		return st;
	cms_region_engine(r)->frozen = freeze;
	/* frozen: backups become current from the next pause or resume on; thawed: none is */
	cms_store_stale(r);
	cms_log(r->ctx, CMS_LOG_DEBUG, "region \"%s\" on device %d %s", r->tag, r->device,
		freeze ? "frozen" : "thawed");
	return CMS_OK;
}
