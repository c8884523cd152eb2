/* SPDX-License-Identifier: MIT */
/*
 * guard.c - guarded paused ranges (CMS_REGION_GUARD). Each device has zero-filled
 * physical handles of 1, 2, 4, ... 32 granules, made once. While a guarded
 * allocation has no memory, its range is covered by pieces, each one whole
 * zero handle mapped at offset 0 with read-only access: as many 32-granule
 * pieces as fit, then the rest in descending powers of two (the driver maps
 * only whole handles: an H200 refuses a mapping shorter than its handle with
 * CUDA_ERROR_NOT_SUPPORTED). A stray read sees zeros and a write faults.
 * a->guarded counts the pieces mapped from the allocation's base up, exact on
 * every failure path; they are unmapped together (one cuMemUnmap), and piece by piece, the
 * last first, when that call fails (a failure there maps the pieces unmapped so far again,
 * best effort).
 */
#include <string.h>

#include "vmm_internal.h"

#define TOP (CMS_GUARD_ORDERS - 1) /* the largest piece: 2^TOP granules (64 MiB on an H200) */

/* Fills the first len bytes of handle with zeros through a temporary mapping (device
 * context current); a failure to remove that mapping goes to the context's cleanups. */
static cms_status zero_fill(cms_context *ctx, int32_t dev, CUmemGenericAllocationHandle handle,
			    size_t len)
{
	CUstream stream = ctx->devices[dev].streams[0];
	CUmemAccessDesc access;
	CUdeviceptr va = 0;
	cms_status st = CMS_OK;
	CUresult res;

	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = dev;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_TRY(ctx, cuMemAddressReserve(&va, len, 0, 0, 0), st, out);
	CU_TRY(ctx, cuMemMap(va, len, 0, handle, 0), st, free_va);
	CU_TRY(ctx, cuMemSetAccess(va, len, &access, 1), st, unmap);
	CU_TRY(ctx, cuMemsetD8Async(va, 0, len, stream), st, unmap);
	CU_TRY(ctx, cuStreamSynchronize(stream), st, unmap);
unmap: /* a temporary mapping the handle does not need: one that stays is a cleanup */
	res = ctx->drv.cuMemUnmap(va, len);
	if (res != CUDA_SUCCESS) {
		cms_cleanup_range(ctx, dev, va, len, true);
		goto out;
	}
free_va:
	res = ctx->drv.cuMemAddressFree(va, len);
	if (res != CUDA_SUCCESS)
		cms_cleanup_range(ctx, dev, va, len, false);
out:
	return st;
}

/* Makes dev's zero handle of 2^order granules (no lock held while the driver works). */
static cms_status make_zero(cms_context *ctx, int32_t dev, int order)
{
	CUmemGenericAllocationHandle handle = 0, *zero = cms_ctx_vmm(ctx)->zero[dev];
	CUmemAllocationProp prop;
	cms_status st = CMS_OK;
	size_t len = ((size_t)1 << order) * ctx->devices[dev].granularity;
	bool have;

	pthread_mutex_lock(&ctx->lock);
	have = zero[order] != 0;
	pthread_mutex_unlock(&ctx->lock);
	if (have)
		return CMS_OK;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	CU_TRY(ctx, cuMemCreate(&handle, len, &prop, 0), st, out);
	st = zero_fill(ctx, dev, handle, len);
	if (st)
		goto release;
	pthread_mutex_lock(&ctx->lock);
	if (!zero[order]) { /* else another thread made one meanwhile: ours goes */
		zero[order] = handle;
		handle = 0;
	}
	pthread_mutex_unlock(&ctx->lock);
release:
	if (handle && ctx->drv.cuMemRelease(handle) != CUDA_SUCCESS)
		cms_log(ctx, CMS_LOG_ERROR, "device %d: a zero handle could not be released", dev);
out:
	return st;
}

cms_status cms_vmm_guard_prepare(cms_context *ctx, int32_t dev)
{
	cms_status st = CMS_OK;
	int k;

	for (k = 0; k < CMS_GUARD_ORDERS && !st; k++)
		st = make_zero(ctx, dev, k);
	return st; /* handles made stay for the next call, released with the context */
}

void cms_vmm_guard_drop(cms_context *ctx, int32_t dev)
{
	CUmemGenericAllocationHandle *zero = cms_ctx_vmm(ctx)->zero[dev];
	int k;

	for (k = 0; k < CMS_GUARD_ORDERS; k++) {
		if (!zero[k])
			continue;
		if (ctx->drv.cuMemRelease(zero[k]) != CUDA_SUCCESS) {
			cms_log(ctx, CMS_LOG_ERROR,
				"device %d: a zero handle could not be released", dev);
			continue;
		}
		zero[k] = 0;
	}
}

/* dev's zero handle of 2^order granules (0 when it has none). */
static CUmemGenericAllocationHandle zero_of(const struct cms_alloc *a, int order)
{
	cms_context *ctx = a->region->ctx;
	CUmemGenericAllocationHandle zero;

	pthread_mutex_lock(&ctx->lock);
	zero = cms_ctx_vmm(ctx)->zero[a->region->device][order];
	pthread_mutex_unlock(&ctx->lock);
	return zero;
}

/* The pieces of a's range: as many of 2^TOP granules as fit, then the rest's set bits from
 * the highest down. */
static size_t npieces(const struct cms_alloc *a)
{
	size_t n = a->physical / a->region->ctx->devices[a->region->device].granularity;

	return n / ((size_t)1 << TOP) + (size_t)__builtin_popcountll(n % ((size_t)1 << TOP));
}

/* Piece i of a: its offset from a->base and its order (length 2^order granules). */
static void piece(const struct cms_alloc *a, size_t i, size_t *off, int *order)
{
	size_t g = a->region->ctx->devices[a->region->device].granularity;
	size_t n = a->physical / g, full = n >> TOP, at;
	int k;

	if (i < full) {
		*off = (i << TOP) * g;
		*order = TOP;
		return;
	}
	i -= full;
	at = full << TOP;
	for (k = TOP - 1; k >= 0; k--) {
		if (!(n & ((size_t)1 << k)))
			continue;
		if (!i--)
			break;
		at += (size_t)1 << k;
	}
	*off = at * g;
	*order = k;
}

/* Maps a's guard pieces from a->guarded up again (zero handles, read-only), counting each;
 * stops at a failure (logged), a->guarded exact. */
static void reguard(struct cms_alloc *a)
{
	struct cms_region *r = a->region;
	size_t g = r->ctx->devices[r->device].granularity, n = npieces(a), off;
	cms_status st;
	int order;

	while (cms_alloc_vmm(a)->guarded < n) {
		piece(a, cms_alloc_vmm(a)->guarded, &off, &order);
		st = cms_vmm_map_range_read(r, a->base + off, ((size_t)1 << order) * g,
					    zero_of(a, order));
		if (!st || st == CMS_ERR_ROLLBACK_FAILED) /* that one: mapped without access */
			cms_alloc_vmm(a)->guarded++;
		if (st) {
			cms_log(r->ctx, CMS_LOG_ERROR,
				"0x%llx: %zu of %zu guard pieces mapped after a failed unmap; "
				"the rest fault until it is resumed",
				(unsigned long long)a->base, cms_alloc_vmm(a)->guarded, n);
			return;
		}
	}
}

cms_status cms_vmm_unguard(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	size_t g = ctx->devices[a->region->device].granularity, off;
	cms_status st = CMS_OK;
	char why[512];
	int order;

	if (!cms_alloc_vmm(a)->guarded)
		return CMS_OK;
	/* One cuMemUnmap over the adjacent pieces (one driver call; a failure usually changes
	 * nothing, so needs no undo that could fail too). */
	piece(a, cms_alloc_vmm(a)->guarded - 1, &off, &order);
	if (ctx->drv.cuMemUnmap(a->base, off + ((size_t)1 << order) * g) == CUDA_SUCCESS) {
		cms_alloc_vmm(a)->guarded = 0;
		return CMS_OK;
	}
	/* The driver does not say what a failed unmap over several mappings leaves (it may have
	 * unmapped some; over a hole it succeeds): piece by piece, the last first, counting
	 * a->guarded down, so that it stays exact whatever fails. */
	while (cms_alloc_vmm(a)->guarded) {
		piece(a, cms_alloc_vmm(a)->guarded - 1, &off, &order);
		CU_TRY(ctx, cuMemUnmap(a->base + off, ((size_t)1 << order) * g), st, remap);
		cms_alloc_vmm(a)->guarded--;
	}
	return CMS_OK;

remap: /* as it was, best effort: the pieces unmapped here are mapped again */
	cms_last_error_message(why, sizeof(why));
	reguard(a);
	return cms_set_error(st, "%s", why);
}

cms_status cms_vmm_guard(struct cms_alloc *a)
{
	struct cms_region *r = a->region;
	size_t g = r->ctx->devices[r->device].granularity, n;
	char why[512];
	cms_status st;

	st = cms_vmm_guard_prepare(r->ctx, r->device);
	if (st)
		return st;
	n = npieces(a);
	while (cms_alloc_vmm(a)->guarded < n) {
		size_t off;
		int order;

		piece(a, cms_alloc_vmm(a)->guarded, &off, &order);
		st = cms_vmm_map_range_read(r, a->base + off, ((size_t)1 << order) * g,
					    zero_of(a, order));
		if (st == CMS_ERR_ROLLBACK_FAILED) /* mapped without access: unmapped later */
			cms_alloc_vmm(a)->guarded++;
		if (st)
			goto unguard;
		cms_alloc_vmm(a)->guarded++;
	}
	return CMS_OK;

unguard: /* all or nothing; what cannot be unmapped now stays counted for a later call */
	cms_last_error_message(why, sizeof(why));
	if (cms_vmm_unguard(a))
		cms_log(r->ctx, CMS_LOG_ERROR, "0x%llx: %zu guard mappings kept after a failure",
			(unsigned long long)a->base, cms_alloc_vmm(a)->guarded);
	return cms_set_error(st, "%s", why);
}
