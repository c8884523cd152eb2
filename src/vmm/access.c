/* SPDX-License-Identifier: MIT */
/*
 * access.c - the access of every mapping of a region at once (peer devices,
 * cms_region_peer_devices_set; read-only while frozen, cms_region_freeze):
 * one cuMemSetAccess per allocation, a run (coalesced allocations, a chunk
 * with its tail) once, all or nothing.
 */
#include "vmm_internal.h"

/* Whether a's mapping is changed through a: mapped, and a run through its last member. */
static bool owns_mapping(const struct cms_alloc *a)
{
	return a->mapped && (!cms_alloc_vmm(a)->run || cms_run_is_last(a));
}

cms_status cms_vmm_region_access(struct cms_region *r, uint64_t old_mask, bool old_ro,
				 uint64_t mask, bool ro)
{
	struct cms_alloc *a, *b;
	cms_status st = CMS_OK, rb = CMS_OK;
	char why[512];

	for (a = r->allocs; a; a = a->next) {
		if (!owns_mapping(a))
			continue;
		st = cms_vmm_set_access(a, mask, old_mask, ro);
		if (st)
			break;
	}
	if (!st)
		return CMS_OK;
	/* the mappings before a get their old access back */
	cms_last_error_message(why, sizeof(why));
	for (b = r->allocs; b != a; b = b->next) {
		char why2[256];

		if (!owns_mapping(b) || !cms_vmm_set_access(b, old_mask, mask, old_ro) || rb)
			continue;
		cms_last_error_message(why2, sizeof(why2));
		rb = cms_set_error(CMS_ERR_ROLLBACK_FAILED,
				   "%s; restoring the access of 0x%llx failed too: %s", why,
				   (unsigned long long)b->base, why2);
	}
	return rb ? rb : cms_set_error(st, "%s", why);
}
