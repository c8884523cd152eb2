/* SPDX-License-Identifier: MIT */
/*
 * arena.c - the address space of a region.
 *
 * A region reserves virtual address space in arenas of CMS_ARENA_BYTES (one
 * cuMemAddressReserve each; an allocation larger than that gets an arena of
 * its own size) and carves its allocations out of them, first fit, in
 * granularity multiples. Allocations made one after another are therefore
 * adjacent, which lets a resume back a run of them with one physical handle
 * and one mapping (run.c): a driver mapping must lie inside one reservation.
 * Freed extents merge with their neighbours; an arena is freed
 * (cuMemAddressFree) as soon as nothing of it is in use.
 */
#include <stdlib.h>

#include "vmm_internal.h"

/* A free piece of an arena's address space. */
struct cms_extent {
	CUdeviceptr base;
	size_t len;
	struct cms_extent *next;
};

/* First fit in one arena; 0 when no free extent is large enough. */
static CUdeviceptr carve(struct cms_arena *ar, size_t len)
{
	struct cms_extent **pp, *e;

	for (pp = &ar->free; (e = *pp); pp = &e->next) {
		CUdeviceptr base = e->base;

		if (e->len < len)
			continue;
		e->base += len;
		e->len -= len;
		if (!e->len) {
			*pp = e->next;
			free(e);
		}
		ar->used += len;
		return base;
	}
	return 0;
}

static cms_status arena_new(struct cms_region *r, size_t len, struct cms_arena **out)
{
	cms_context *ctx = r->ctx;
	size_t gran = ctx->devices[r->device].granularity;
	size_t size = len > CMS_ARENA_BYTES ? len : CMS_ARENA_BYTES;
	struct cms_arena *ar;
	struct cms_extent *e;
	cms_status st = CMS_OK;

	size = (size + gran - 1) & ~(gran - 1);
	ar = calloc(1, sizeof(*ar));
	e = calloc(1, sizeof(*e));
	if (!ar || !e) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
		goto err_free;
	}
	/* Aligned to its default size: large allocations and runs then start on large
	 * boundaries, as a reservation of their own would (the driver maps and unmaps
	 * large-aligned ranges with fewer page-table entries). */
	CU_TRY(ctx, cuMemAddressReserve(&ar->base, size, CMS_ARENA_ALIGN, 0, 0), st, err_free);
	ar->len = size;
	e->base = ar->base;
	e->len = size;
	ar->free = e;
	ar->next = cms_region_vmm(r)->arenas;
	cms_region_vmm(r)->arenas = ar;
	*out = ar;
	return CMS_OK;

err_free:
	free(e);
	free(ar);
	return st;
}

cms_status cms_arena_take(struct cms_region *r, size_t len, CUdeviceptr *base,
			  struct cms_arena **arena)
{
	struct cms_arena *ar;
	cms_status st;

	for (ar = cms_region_vmm(r)->arenas; ar; ar = ar->next) {
		*base = carve(ar, len);
		if (*base) {
			*arena = ar;
			return CMS_OK;
		}
	}
	st = arena_new(r, len, &ar);
	if (st)
		return st;
	*base = carve(ar, len); /* cannot fail: the new arena is free and large enough */
	*arena = ar;
	return CMS_OK;
}

/* Frees an arena whose last extent in use is being given back. A reservation whose
 * cuMemAddressFree fails goes to the context's cleanups (tried again at the next pause,
 * resume or swap and at context destroy): the free that gave the extent back has released its
 * memory already and could not undo that. */
static void arena_free(struct cms_region *r, struct cms_arena *ar)
{
	cms_context *ctx = r->ctx;
	CUresult res = ctx->drv.cuMemAddressFree(ar->base, ar->len);
	struct cms_arena **pp;
	struct cms_extent *e;

	if (res != CUDA_SUCCESS) /* kept as it is: not tried again at once */
		cms_cleanup_reservation(ctx, r->device, ar->base, ar->len, res);
	for (pp = &cms_region_vmm(r)->arenas; *pp != ar; pp = &(*pp)->next)
		;
	*pp = ar->next;
	while ((e = ar->free)) {
		ar->free = e->next;
		free(e);
	}
	free(ar);
}

cms_status cms_arena_give_ready(struct cms_region *r)
{
	if (!cms_region_vmm(r)->ready)
		cms_region_vmm(r)->ready = malloc(sizeof(struct cms_extent));
	if (!cms_region_vmm(r)->ready)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
	return CMS_OK;
}

cms_status cms_arena_give(struct cms_region *r, struct cms_arena *ar, CUdeviceptr base, size_t len)
{
	struct cms_extent **pp, *e, *prev = NULL, *n;

	if (ar->used == len) { /* the last extent in use: the whole reservation goes */
		arena_free(r, ar);
		return CMS_OK;
	}
	for (pp = &ar->free; (e = *pp) && e->base < base; pp = &e->next)
		prev = e;
	if (prev && prev->base + prev->len == base) { /* merge with the free extent below */
		prev->len += len;
		if (e && base + len == e->base) {
			prev->len += e->len;
			prev->next = e->next;
			free(e);
		}
		ar->used -= len;
		return CMS_OK;
	}
	if (e && base + len == e->base) { /* merge with the free extent above */
		e->base = base;
		e->len += len;
		ar->used -= len;
		return CMS_OK;
	}
	n = cms_region_vmm(r)->ready;
	cms_region_vmm(r)->ready = NULL;
	if (!n)
		n = malloc(sizeof(*n));
	if (!n)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
	n->base = base;
	n->len = len;
	n->next = e;
	*pp = n;
	ar->used -= len;
	return CMS_OK;
}

void cms_arena_drop_all(struct cms_region *r)
{
	struct cms_arena *ar;
	struct cms_extent *e;

	free(cms_region_vmm(r)->ready);
	cms_region_vmm(r)->ready = NULL;
	while ((ar = cms_region_vmm(r)->arenas)) {
		cms_region_vmm(r)->arenas = ar->next;
		if (r->ctx->drv.cuMemAddressFree(ar->base, ar->len) != CUDA_SUCCESS)
			cms_log(r->ctx, CMS_LOG_ERROR, "0x%llx: reservation of %zu bytes not freed",
				(unsigned long long)ar->base, ar->len);
		while ((e = ar->free)) {
			ar->free = e->next;
			free(e);
		}
		free(ar);
	}
}
