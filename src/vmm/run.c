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
 *
 * Chunks: such a region also coalesces from the first allocation. cms_alloc
 * of less than cms_run_chunk_bytes() carves its addresses from the tail of
 * the region's open chunk, a run made at allocation time of one handle of
 * as many allocations of the first one's size as the tunable run_chunk holds,
 * mapped whole (the driver refuses a mapping shorter than its handle), whose
 * tail has not been handed out yet ("spare", counted with the retained bytes:
 * released with the run). An allocation of more than half of it gets its own
 * handle. When the tail is too short a new chunk opens; the tails of all chunks of a region (those
 * left too short included) are kept at most cms_run_chunk_bytes() in all, so a chunk's size shrinks
 * towards the allocation's own near that bound (an allocation the bound leaves no spare for gets
 * its own handle, as without the flag). A pause releases a chunk as any run and dissolves it (its
 * tail's addresses go back to the arena); the resume re-plans runs of the members only.
 */
#include <stdlib.h>
#include <string.h>

#include "vmm_internal.h"

static int by_address(const void *x, const void *y)
{
	CUdeviceptr a = (*(struct cms_alloc *const *)x)->base;
	CUdeviceptr b = (*(struct cms_alloc *const *)y)->base;

	return (a > b) - (a < b);
}

static bool may_join(const struct cms_alloc *a)
{
	const struct cms_region *r = a->region;

	return !cms_region_vmm(r)->handle_types && (r->flags & CMS_REGION_COALESCE) &&
	       !cms_alloc_vmm(a)->handle && !a->mapped && !cms_alloc_vmm(a)->run &&
	       cms_alloc_vmm(a)->arena;
}

static bool adjacent(const struct cms_alloc *a, const struct cms_alloc *b)
{
	return b->region == a->region && cms_alloc_vmm(b)->arena == cms_alloc_vmm(a)->arena &&
	       a->base + a->physical == b->base;
}

static cms_status run_new(struct cms_alloc **v, size_t n)
{
	struct cms_run *run;
	size_t i;

	run = calloc(1, sizeof(*run) + n * sizeof(run->slots[0]));
	if (!run)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
	run->region = v[0]->region;
	run->arena = cms_alloc_vmm(v[0])->arena;
	run->base = v[0]->base;
	run->users = run->nslots = n;
	for (i = 0; i < n; i++) {
		run->slots[i].base = v[i]->base;
		run->slots[i].len = v[i]->physical;
		run->slots[i].a = v[i];
		run->len += v[i]->physical;
		cms_alloc_vmm(v[i])->run = run;
	}
	return CMS_OK;
}

/* Back to separate allocations: members forget the run, retained bytes go back to the arena. */
static void dissolve(struct cms_run *run)
{
	struct cms_region *r = run->region;
	size_t i;

	cms_region_vmm(r)->retained_bytes -= run->retained;
	cms_region_vmm(r)->spare_bytes -= run->spare;
	if (cms_region_vmm(r)->chunk == run)
		cms_region_vmm(r)->chunk = NULL;
	if (run->spare &&
	    cms_arena_give(r, run->arena, run->base + run->len - run->spare, run->spare))
		cms_log(r->ctx, CMS_LOG_ERROR,
			"0x%llx: %zu bytes of address space not given back: %s",
			(unsigned long long)(run->base + run->len - run->spare), run->spare,
			cms_last_error());
	for (i = 0; i < run->nslots; i++) {
		struct cms_run_slot *sl = &run->slots[i];

		if (sl->a) {
			cms_alloc_vmm(sl->a)->run = NULL;
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

void cms_run_adopt(struct cms_run *run, CUmemGenericAllocationHandle handle)
{
	size_t i;

	run->handle = handle;
	for (i = 0; i < run->nslots; i++)
		if (run->slots[i].a)
			cms_alloc_vmm(run->slots[i].a)->handle = handle;
}

cms_status cms_run_create(struct cms_run *run)
{
	CUmemGenericAllocationHandle handle;
	cms_status st;

	st = cms_vmm_create_handle(run->region, run->len, &handle);
	if (!st)
		cms_run_adopt(run, handle);
	return st;
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
				cms_alloc_vmm(run->slots[i].a)->handle = 0;
	}
out:
	return st;
}

void cms_run_dissolve(struct cms_alloc **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (cms_alloc_vmm(v[i])->run && !cms_alloc_vmm(v[i])->run->handle &&
		    !cms_alloc_vmm(v[i])->run->mapped)
			dissolve(cms_alloc_vmm(v[i])->run);
}

cms_status cms_run_set_access(struct cms_run *run, uint64_t mask, uint64_t revoke, bool read_only)
{
	return cms_vmm_access_range(run->region, run->base, run->len, mask, revoke, read_only);
}

bool cms_run_keeps(const struct cms_alloc *a)
{
	return cms_alloc_vmm(a)->run && cms_alloc_vmm(a)->run->users > 1;
}

void cms_run_retire(struct cms_alloc *a)
{
	struct cms_run *run = cms_alloc_vmm(a)->run;
	size_t i;

	for (i = 0; i < run->nslots && run->slots[i].a != a; i++)
		;
	run->slots[i].a = NULL;
	run->users--;
	run->retained += a->physical;
	cms_region_vmm(a->region)->retained_bytes += a->physical;
	cms_alloc_set_mapped(a, false);
	cms_alloc_vmm(a)->handle = 0;
	cms_alloc_vmm(a)->run = NULL;
	cms_alloc_vmm(a)->arena =
		NULL; /* its addresses belong to the run until the run is released */
}

/* Most bytes of a chunk (the tunable run_chunk: 64 MiB; the simulation 16 granules, so that
 * small tests fill several): a CMS_REGION_COALESCE region's allocations of at most
 * half of that are carved from chunks (of as many allocations of the first one's size as
 * fit), and the region holds at most that many bytes of chunk tails not yet handed out.
 * 0: the region makes no chunks. */
static size_t cms_run_chunk_bytes(const struct cms_region *r)
{
	size_t gran = r->ctx->devices[r->device].granularity;
	size_t n = (size_t)cms_tune_bytes(&cms_ctx_vmm(r->ctx)->tune.run_chunk, gran);

	if (cms_region_vmm(r)->handle_types || !(r->flags & CMS_REGION_CHUNKS) ||
	    !(r->flags & CMS_REGION_COALESCE) || !gran || !n) /* n: whole granules (tunables.c) */
		return 0;
	return n;
}

/* a gets the next bytes of the open chunk's tail (mapped: checked by the caller). */
static void carve_tail(struct cms_run *run, struct cms_alloc *a)
{
	struct cms_region *r = run->region;
	struct cms_run_slot *sl = &run->slots[run->nslots++];

	sl->base = run->base + run->len - run->spare;
	sl->len = a->physical;
	sl->a = a;
	run->users++;
	run->spare -= a->physical;
	run->retained -= a->physical;
	cms_region_vmm(r)->retained_bytes -= a->physical;
	cms_region_vmm(r)->spare_bytes -= a->physical;
	if (!run->spare)
		cms_region_vmm(r)->chunk = NULL; /* full: closed */
	a->base = sl->base;
	cms_alloc_vmm(a)->arena = run->arena;
	cms_alloc_vmm(a)->run = run;
	cms_alloc_vmm(a)->handle = run->handle;
}

/* A new chunk of len bytes (a granularity multiple > a->physical) with a as its first member. */
static cms_status chunk_new(struct cms_alloc *a, size_t len)
{
	struct cms_region *r = a->region;
	size_t gran = r->ctx->devices[r->device].granularity;
	struct cms_run *run;
	cms_status st;

	run = calloc(1, sizeof(*run) + len / gran * sizeof(run->slots[0]));
	if (!run)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
	st = cms_arena_take(r, len, &run->base, &run->arena);
	if (st) {
		free(run);
		return st;
	}
	run->region = r;
	run->len = len;
	run->users = run->nslots = 1;
	run->slots[0].base = run->base;
	run->slots[0].len = a->physical;
	run->slots[0].a = a;
	run->spare = run->retained = len - a->physical;
	cms_region_vmm(r)->retained_bytes += run->spare;
	cms_region_vmm(r)->spare_bytes += run->spare;
	a->base = run->base;
	cms_alloc_vmm(a)->arena = run->arena;
	cms_alloc_vmm(a)->run = run;
	return CMS_OK;
}

cms_status cms_run_take(struct cms_alloc *a)
{
	struct cms_region *r = a->region;
	struct cms_run *run = cms_region_vmm(r)->chunk;
	size_t cb = cms_run_chunk_bytes(r), spare;

	if (!cb || a->physical >= cb)
		return cms_arena_take(r, a->physical, &a->base, &cms_alloc_vmm(a)->arena);
	if (run && run->mapped && run->handle && run->spare >= a->physical) {
		carve_tail(run, a);
		return CMS_OK;
	}
	/* As many allocations of this size as fit: no unused end when the next ones are alike
	 * (an unused end would split a resume's runs). */
	spare = cb / a->physical * a->physical - a->physical;
	if (spare > cb - cms_region_vmm(r)->spare_bytes) /* the bound on tails held ahead of need */
		spare = cb - cms_region_vmm(r)->spare_bytes;
	if (!spare)
		return cms_arena_take(r, a->physical, &a->base, &cms_alloc_vmm(a)->arena);
	return chunk_new(a, a->physical + spare);
}

void cms_run_open(struct cms_alloc *a)
{
	if (cms_alloc_vmm(a)->run && cms_alloc_vmm(a)->run->spare && cms_alloc_vmm(a)->run->mapped)
		cms_region_vmm(a->region)->chunk = cms_alloc_vmm(a)->run;
}

void cms_run_untake(struct cms_alloc *a)
{
	struct cms_run *run = cms_alloc_vmm(a)->run;
	struct cms_region *r = a->region;

	run->nslots--;
	run->users--;
	run->spare += a->physical;
	run->retained += a->physical;
	cms_region_vmm(r)->retained_bytes += a->physical;
	cms_region_vmm(r)->spare_bytes += a->physical;
	cms_region_vmm(r)->chunk = run;
	cms_alloc_set_mapped(a, false);
	cms_alloc_vmm(a)->handle = 0;
	cms_alloc_vmm(a)->run = NULL;
	cms_alloc_vmm(a)->arena = NULL; /* its addresses are the chunk's tail again */
}

bool cms_run_is_last(const struct cms_alloc *a)
{
	const struct cms_run *run = cms_alloc_vmm(a)->run;
	size_t i = run->nslots;

	while (i-- > 0)
		if (run->slots[i].a)
			return run->slots[i].a == a;
	return false;
}
