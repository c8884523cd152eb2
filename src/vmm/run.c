/* SPDX-License-Identifier: MIT */
/*
 * run.c - coalesced re-backing.
 *
 * Every driver mapping costs ~35-40 us to create (cuMemCreate + cuMemMap +
 * cuMemSetAccess) and about as much to release on an H200, so 2048 small
 * allocations cost 70-80 ms each way with one handle each. In a region
 * created with CMS_REGION_COALESCE a resume therefore backs each run of address-adjacent
 * allocations of one region (carved from one arena, see arena.c) with ONE physical handle of the
 * run's size, mapped ONCE over the whole run: the addresses do not change, only how many driver
 * objects back them. The driver refuses partial unmaps and non-zero map offsets, so a run is
 * mapped, unmapped and released as a whole; its members' handle and mapped fields mirror the run's.
 *
 * A member freed while the run is live cannot give its memory back alone:
 * it is detached and its bytes (and addresses) are "retained" by the run
 * (counted in the region's retained_bytes, not in backed_bytes) until the
 * run is released, at the next pause or when its last member is freed. Only
 * regions created with CMS_REGION_COALESCE get runs, never shareable ones
 * (importers map every allocation's own handle).
 */
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

static int by_address(const void *x, const void *y)
{
	CUdeviceptr a = (*(struct cms_alloc *const *)x)->base;
	CUdeviceptr b = (*(struct cms_alloc *const *)y)->base;

	return (a > b) - (a < b);
}

static bool may_join(const struct cms_alloc *a)
{
	const struct cms_region *r = a->region;

	return !r->handle_types && (r->flags & CMS_REGION_COALESCE) && !a->handle && !a->mapped &&
	       !a->run && a->arena;
}

static bool adjacent(const struct cms_alloc *a, const struct cms_alloc *b)
{
	return b->region == a->region && b->arena == a->arena && a->base + a->physical == b->base;
}

static cms_status run_new(struct cms_alloc **v, size_t n)
{
	struct cms_run *run;
	size_t i;

	run = calloc(1, sizeof(*run) + n * sizeof(run->slots[0]));
	if (!run)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
	run->region = v[0]->region;
	run->arena = v[0]->arena;
	run->base = v[0]->base;
	run->users = run->nslots = n;
	for (i = 0; i < n; i++) {
		run->slots[i].base = v[i]->base;
		run->slots[i].len = v[i]->physical;
		run->slots[i].a = v[i];
		run->len += v[i]->physical;
		v[i]->run = run;
	}
	return CMS_OK;
}

/* Back to separate allocations: members forget the run, retained bytes go back to the arena. */
static void dissolve(struct cms_run *run)
{
	struct cms_region *r = run->region;
	size_t i;

	r->retained_bytes -= run->retained;
	for (i = 0; i < run->nslots; i++) {
		struct cms_run_slot *sl = &run->slots[i];

		if (sl->a) {
			sl->a->run = NULL;
			continue;
		}
		/* A live member keeps the arena in use, so this frees no reservation: it can
		 * only fail for want of host memory, and then the addresses stay unusable. */
		if (cms_arena_give(r, run->arena, sl->base, sl->len))
			cms_log(r->ctx, CMS_LOG_ERROR,
				"0x%llx: %zu bytes of address space not given back: %s",
				(unsigned long long)sl->base, sl->len, cms_last_error());
	}
	free(run);
}

void cms_run_order(struct cms_alloc **v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof(*v), by_address);
}

cms_status cms_run_plan(struct cms_alloc **v, size_t n)
{
	size_t k = 0, j;
	cms_status st;

	while (k < n) {
		if (!may_join(v[k])) {
			k++;
			continue;
		}
		for (j = k + 1; j < n && may_join(v[j]) && adjacent(v[j - 1], v[j]); j++)
			;
		if (j - k > 1) {
			st = run_new(v + k, j - k);
			if (st)
				return st; /* runs made so far are valid plans */
		}
		k = j;
	}
	return CMS_OK;
}

cms_status cms_run_create(struct cms_run *run)
{
	cms_status st;
	size_t i;

	st = cms_vmm_create_handle(run->region, run->len, &run->handle);
	if (st)
		return st;
	for (i = 0; i < run->nslots; i++)
		if (run->slots[i].a)
			run->slots[i].a->handle = run->handle;
	return CMS_OK;
}

static void set_mapped(struct cms_run *run, bool mapped)
{
	size_t i;

	run->mapped = mapped;
	for (i = 0; i < run->nslots; i++)
		if (run->slots[i].a)
			cms_alloc_set_mapped(run->slots[i].a, mapped);
}

cms_status cms_run_map(struct cms_run *run)
{
	cms_status st = cms_vmm_map_range(run->region, run->base, run->len, run->handle);

	if (!st)
		set_mapped(run, true);
	else if (st == CMS_ERR_ROLLBACK_FAILED) /* mapped without access: unmapped later */
		set_mapped(run, true);
	return st;
}

cms_status cms_run_unmap(struct cms_run *run)
{
	cms_context *ctx = run->region->ctx;
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuMemUnmap(run->base, run->len), st, out);
	set_mapped(run, false);
out:
	return st;
}

cms_status cms_run_release(struct cms_run *run)
{
	cms_context *ctx = run->region->ctx;
	cms_status st = CMS_OK;
	size_t i;

	if (run->handle) {
		CU_TRY(ctx, cuMemRelease(run->handle), st, out);
		run->handle = 0;
		for (i = 0; i < run->nslots; i++)
			if (run->slots[i].a)
				run->slots[i].a->handle = 0;
	}
out:
	return st;
}

void cms_run_dissolve(struct cms_alloc **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i]->run && !v[i]->run->handle && !v[i]->run->mapped)
			dissolve(v[i]->run);
}

cms_status cms_run_set_access(struct cms_run *run, uint64_t mask, uint64_t revoke)
{
	return cms_vmm_access_range(run->region, run->base, run->len, mask, revoke);
}

bool cms_run_keeps(const struct cms_alloc *a)
{
	return a->run && a->run->users > 1;
}

void cms_run_retire(struct cms_alloc *a)
{
	struct cms_run *run = a->run;
	size_t i;

	for (i = 0; i < run->nslots && run->slots[i].a != a; i++)
		;
	run->slots[i].a = NULL;
	run->users--;
	run->retained += a->physical;
	a->region->retained_bytes += a->physical;
	cms_alloc_set_mapped(a, false);
	a->handle = 0;
	a->run = NULL;
	a->arena = NULL; /* its addresses belong to the run until the run is released */
}

bool cms_run_is_last(const struct cms_alloc *a)
{
	const struct cms_run *run = a->run;
	size_t i = run->nslots;

	while (i-- > 0)
		if (run->slots[i].a)
			return run->slots[i].a == a;
	return false;
}
