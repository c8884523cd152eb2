/* SPDX-License-Identifier: MIT */
/*
 * vmm.c - addresses, physical handles and mappings of one allocation.
 * One mapping per physical handle, at offset 0 (the H200 driver refuses
 * non-zero offsets and partial unmaps). An allocation's addresses come from
 * its region's arenas (arena.c); a member of a run (run.c) shares the run's
 * handle and mapping, and every function here acts on the whole run for it.
 * Every function leaves the allocation's state fields exact, whatever fails.
 */

#include "vmm_internal.h"

cms_status cms_vmm_reserve(struct cms_alloc *a)
{
	return cms_run_take(a); /* from a chunk in a CMS_REGION_COALESCE region (run.c) */
}

cms_status cms_vmm_unreserve_ready(struct cms_alloc *a)
{
	return cms_alloc_vmm(a)->arena ? cms_arena_give_ready(a->region) : CMS_OK;
}

cms_status cms_vmm_unreserve(struct cms_alloc *a)
{
	bool guarded = cms_alloc_vmm(a)->guarded != 0;
	cms_status st;

	if (!cms_alloc_vmm(a)->arena) /* retired from a run: its addresses went with the run */
		return CMS_OK;
	st = cms_vmm_unguard(a); /* the addresses go back unmapped; on failure a->guarded exact */
	if (st)
		return st;
	st = cms_arena_give(a->region, cms_alloc_vmm(a)->arena, a->base, a->physical);
	if (!st) {
		cms_alloc_vmm(a)->arena = NULL;
		return CMS_OK;
	}
	if (guarded) { /* as it was (not after cms_vmm_unreserve_ready: the give cannot fail) */
		char why[512];

		cms_last_error_message(why, sizeof(why));
		if (cms_vmm_guard(a))
			cms_log(a->region->ctx, CMS_LOG_ERROR,
				"0x%llx: not guarded again after a failed free; reads fault until "
				"it is resumed",
				(unsigned long long)a->base);
		cms_set_error(st, "%s", why);
	}
	return st;
}

cms_status cms_vmm_create(struct cms_alloc *a)
{
	if (cms_alloc_vmm(a)->run)
		return cms_run_create(cms_alloc_vmm(a)->run);
	return cms_vmm_create_handle(a->region, a->physical, &cms_alloc_vmm(a)->handle);
}

cms_status cms_vmm_release(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st = CMS_OK;

	if (cms_alloc_vmm(a)->run)
		return cms_run_release(cms_alloc_vmm(a)->run);
	if (!cms_alloc_vmm(a)->handle)
		return CMS_OK;
	CU_TRY(ctx, cuMemRelease(cms_alloc_vmm(a)->handle), st, out);
	cms_alloc_vmm(a)->handle = 0;
out:
	return st;
}

cms_status cms_vmm_set_access(struct cms_alloc *a, uint64_t mask, uint64_t revoke, bool read_only)
{
	if (cms_alloc_vmm(a)->run)
		return cms_run_set_access(cms_alloc_vmm(a)->run, mask, revoke, read_only);
	return cms_vmm_access_range(a->region, a->base, a->physical, mask, revoke, read_only);
}

cms_status cms_vmm_map(struct cms_alloc *a)
{
	cms_status st;

	if (cms_alloc_vmm(a)->run)
		return cms_run_map(cms_alloc_vmm(a)->run);
	st = cms_vmm_map_range(a->region, a->base, a->physical, cms_alloc_vmm(a)->handle);
	/* CMS_ERR_ROLLBACK_FAILED: mapped without access; counted as mapped to be unmapped later */
	if (!st || st == CMS_ERR_ROLLBACK_FAILED)
		cms_alloc_set_mapped(a, true);
	return st;
}

cms_status cms_vmm_unmap(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st = CMS_OK;

	if (!a->mapped)
		return CMS_OK;
	if (cms_alloc_vmm(a)->run)
		return cms_run_unmap(cms_alloc_vmm(a)->run);
	CU_TRY(ctx, cuMemUnmap(a->base, a->physical), st, out);
	cms_alloc_set_mapped(a, false);
out:
	return st;
}

cms_status cms_vmm_back(struct cms_alloc *a)
{
	bool created = false;
	cms_status st;

	if (a->mapped) /* its memory is there, with or without a handle (cms_vmm_unback) */
		return CMS_OK;
	if (!cms_alloc_vmm(a)->handle) {
		st = cms_vmm_create(a);
		if (st)
			return st;
		created = true;
	}
	if (cms_alloc_vmm(a)->run &&
	    cms_alloc_vmm(a)->run->mapped) { /* carved from a chunk's tail (cms_run_take) */
		cms_alloc_set_mapped(a, true);
		return CMS_OK;
	}
	st = cms_vmm_map(a);
	if (st && created && !a->mapped && cms_vmm_release(a))
		cms_log(a->region->ctx, CMS_LOG_ERROR,
			"0x%llx: physical handle kept after a failed map",
			(unsigned long long)a->base);
	return st;
}

/* After a failed unmap of memory whose handle was released: the handle back from the mapping
 * (cuMemRetainAllocationHandle), so that a is whole again. Best effort: when it fails too, a
 * stays mapped without a handle (logged). */
static void retain(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	struct cms_run *run = cms_alloc_vmm(a)->run;
	CUdeviceptr base = run ? run->base : a->base;
	CUmemGenericAllocationHandle h;

	if (ctx->drv.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)base) != CUDA_SUCCESS) {
		cms_log(ctx, CMS_LOG_ERROR,
			"0x%llx: mapped without a handle after a failed free "
			"(cuMemRetainAllocationHandle "
			"failed); the next pause gives its memory back",
			(unsigned long long)a->base);
		return;
	}
	if (run)
		cms_run_adopt(run, h);
	else
		cms_alloc_vmm(a)->handle = h;
}

cms_status cms_vmm_unback(struct cms_alloc *a)
{
	cms_status st;

	/* The handle first: the driver keeps released memory while it is mapped, so a failed
	 * release changes nothing, and after a failed unmap the memory is still mapped with its
	 * content: its handle is taken back from the mapping. Neither needs an undo of the
	 * content. */
	st = cms_vmm_release(a);
	if (st)
		return st;
	st = cms_vmm_unmap(a);
	if (st && a->mapped)
		retain(a);
	return st;
}
