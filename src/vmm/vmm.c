/* SPDX-License-Identifier: MIT */
/*
 * vmm.c - addresses, physical handles and mappings of one allocation.
 * One mapping per physical handle, at offset 0 (the H200 driver refuses
 * non-zero offsets and partial unmaps). An allocation's addresses come from
 * its region's arenas (arena.c); a member of a run (run.c) shares the run's
 * handle and mapping, and every function here acts on the whole run for it.
 * Every function leaves the allocation's state fields exact, whatever fails.
 */

#include <stdlib.h>
#include <string.h>

#include "vmm.h"

cms_status cms_vmm_reserve(struct cms_alloc *a)
{
	return cms_run_take(a); /* from a chunk in a CMS_REGION_COALESCE region (run.c) */
}

cms_status cms_vmm_unreserve(struct cms_alloc *a)
{
	bool guarded = a->guarded != 0;
	cms_status st;

	if (!a->arena) /* retired from a run: its addresses went with the run */
		return CMS_OK;
	st = cms_vmm_unguard(a); /* the addresses go back unmapped */
	if (st)
		return st;
	st = cms_arena_give(a->region, a->arena, a->base, a->physical);
	if (!st) {
		a->arena = NULL;
		return CMS_OK;
	}
	if (guarded) { /* as it was */
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
	if (a->run)
		return cms_run_create(a->run);
	return cms_vmm_create_handle(a->region, a->physical, &a->handle);
}

cms_status cms_vmm_release(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st = CMS_OK;

	if (a->run)
		return cms_run_release(a->run);
	if (!a->handle)
		return CMS_OK;
	CU_TRY(ctx, cuMemRelease(a->handle), st, out);
	a->handle = 0;
out:
	return st;
}

cms_status cms_vmm_set_access(struct cms_alloc *a, uint64_t mask, uint64_t revoke)
{
	if (a->run)
		return cms_run_set_access(a->run, mask, revoke);
	return cms_vmm_access_range(a->region, a->base, a->physical, mask, revoke);
}

cms_status cms_vmm_map(struct cms_alloc *a)
{
	cms_status st;

	if (a->run)
		return cms_run_map(a->run);
	st = cms_vmm_map_range(a->region, a->base, a->physical, a->handle);
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
	if (a->run)
		return cms_run_unmap(a->run);
	CU_TRY(ctx, cuMemUnmap(a->base, a->physical), st, out);
	cms_alloc_set_mapped(a, false);
out:
	return st;
}

/* Whether a has a mapping of its own (not a run's) and b's directly follows it in the same
 * reservation, so that one cuMemUnmap can cover both. */
static bool unmap_together(const struct cms_alloc *a, const struct cms_alloc *b)
{
	return a->mapped && !a->run && b->mapped && !b->run && a->arena && a->arena == b->arena &&
	       a->base + a->physical == b->base;
}

/* One cuMemUnmap over the n adjacent mappings of v; false (nothing changed, no error set)
 * when the driver refuses it. */
static bool unmap_span(struct cms_alloc **v, size_t n)
{
	cms_context *ctx = v[0]->region->ctx;
	CUdeviceptr end = v[n - 1]->base + v[n - 1]->physical;
	size_t i;

	if (ctx->drv.cuMemUnmap(v[0]->base, end - v[0]->base) != CUDA_SUCCESS)
		return false;
	for (i = 0; i < n; i++)
		cms_alloc_set_mapped(v[i], false);
	return true;
}

/* Lab switch (not an interface): CMS_LAB_SPAN_UNMAP=off unmaps one allocation at a time, for
 * measuring what span unmaps gain or cost on a GPU (lab/gpu-session/e.sh). */
static bool lab_span_off(void)
{
	const char *env = secure_getenv("CMS_LAB_SPAN_UNMAP");

	return env && !strcmp(env, "off");
}

cms_status cms_vmm_unmap_many(struct cms_alloc **v, size_t n)
{
	bool span = !lab_span_off();
	size_t i = 0, j;
	cms_status st;

	while (i < n) {
		for (j = i + 1; j < n && unmap_together(v[j - 1], v[j]); j++)
			;
		if (span && j - i > 1 && unmap_span(v + i, j - i)) {
			i = j;
			continue;
		}
		for (; i < j; i++) { /* one at a time: alone, or the driver refused the span */
			st = cms_vmm_unmap(v[i]);
			if (st)
				return st;
		}
	}
	return CMS_OK;
}

cms_status cms_vmm_back(struct cms_alloc *a)
{
	bool created = false;
	cms_status st;

	if (!a->handle) {
		st = cms_vmm_create(a);
		if (st)
			return st;
		created = true;
	}
	if (a->mapped)
		return CMS_OK;
	if (a->run && a->run->mapped) { /* carved from a chunk's tail (cms_run_take) */
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

cms_status cms_vmm_unback(struct cms_alloc *a)
{
	cms_status st;

	st = cms_vmm_unmap(a);
	if (st)
		return st;
	st = cms_vmm_release(a);
	if (!st)
		cms_run_dissolve(&a, 1);
	if (st && a->handle) {
		char why[512];

		cms_last_error_message(why, sizeof(why));
		if (cms_vmm_map(a))
			cms_log(a->region->ctx, CMS_LOG_ERROR,
				"0x%llx: not mapped again after a failed release; a later call "
				"retries",
				(unsigned long long)a->base);
		cms_set_error(st, "%s", why);
	}
	return st;
}
