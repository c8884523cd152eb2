/* SPDX-License-Identifier: MIT */
/*
 * guard.c - guarded paused ranges (CMS_REGION_GUARD). Each device has one
 * zero-filled physical handle of CMS_GUARD_GRANULES granules, made once; while
 * a guarded allocation has no memory, its range is covered by pieces of that
 * handle, each mapped at offset 0 with read-only access (the last piece maps
 * only the first part of the handle), so that a stray read sees zeros and a
 * write faults. a->guarded counts the pieces mapped from the allocation's
 * base up, exact on every failure path.
 */
#include <string.h>

#include "vmm.h"

/* Granules of the zero handle: 64 MiB at the H200's 2 MiB granularity, so that a 1 GiB
 * allocation is covered by 16 mappings (docs/internals.md). */
#define CMS_GUARD_GRANULES 32

/* Fills the first len bytes of handle with zeros through a temporary mapping (device
 * context current). */
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
unmap:
	res = ctx->drv.cuMemUnmap(va, len);
	if (res != CUDA_SUCCESS) { /* the reservation stays with the mapping */
		if (!st)
			st = cms_cu_error(&ctx->drv, res, "cuMemUnmap");
		goto out;
	}
free_va:
	res = ctx->drv.cuMemAddressFree(va, len);
	if (res != CUDA_SUCCESS && !st)
		st = cms_cu_error(&ctx->drv, res, "cuMemAddressFree");
out:
	return st;
}

cms_status cms_vmm_guard_prepare(cms_context *ctx, int32_t dev)
{
	struct cms_device *d = &ctx->devices[dev];
	CUmemGenericAllocationHandle handle = 0;
	CUmemAllocationProp prop;
	cms_status st = CMS_OK;
	size_t len;
	bool have;

	pthread_mutex_lock(&ctx->lock);
	have = d->zero != 0;
	len = CMS_GUARD_GRANULES * d->granularity;
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
	if (!d->zero) { /* else another thread made one meanwhile: ours goes */
		d->zero = handle;
		d->zero_len = len;
		handle = 0;
	}
	pthread_mutex_unlock(&ctx->lock);
release:
	if (handle && ctx->drv.cuMemRelease(handle) != CUDA_SUCCESS)
		cms_log(ctx, CMS_LOG_ERROR, "device %d: a zero handle could not be released", dev);
out:
	return st;
}

void cms_vmm_guard_drop(cms_context *ctx, int32_t dev)
{
	struct cms_device *d = &ctx->devices[dev];

	if (!d->zero)
		return;
	if (ctx->drv.cuMemRelease(d->zero) != CUDA_SUCCESS) {
		cms_log(ctx, CMS_LOG_ERROR, "device %d: the zero handle could not be released",
			dev);
		return;
	}
	d->zero = 0;
	d->zero_len = 0;
}

/* The zero handle of a's device and its length (0 when it has none). */
static CUmemGenericAllocationHandle zero_of(const struct cms_alloc *a, size_t *len)
{
	cms_context *ctx = a->region->ctx;
	struct cms_device *d = &ctx->devices[a->region->device];
	CUmemGenericAllocationHandle zero;

	pthread_mutex_lock(&ctx->lock);
	zero = d->zero;
	*len = d->zero_len;
	pthread_mutex_unlock(&ctx->lock);
	return zero;
}

/* Length of piece i of a range of physical bytes covered by pieces of zlen bytes. */
static size_t piece_len(size_t physical, size_t zlen, size_t i)
{
	size_t off = i * zlen;

	return physical - off < zlen ? physical - off : zlen;
}

cms_status cms_vmm_unguard(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st = CMS_OK;
	size_t zlen;

	if (!a->guarded)
		return CMS_OK;
	(void)zero_of(a, &zlen);
	while (a->guarded) {
		size_t i = a->guarded - 1;

		CU_TRY(ctx, cuMemUnmap(a->base + i * zlen, piece_len(a->physical, zlen, i)), st,
		       out);
		a->guarded--;
	}
out:
	return st;
}

cms_status cms_vmm_guard(struct cms_alloc *a)
{
	struct cms_region *r = a->region;
	CUmemGenericAllocationHandle zero;
	size_t zlen, n;
	char why[512];
	cms_status st;

	st = cms_vmm_guard_prepare(r->ctx, r->device);
	if (st)
		return st;
	zero = zero_of(a, &zlen);
	n = (a->physical + zlen - 1) / zlen;
	while (a->guarded < n) {
		size_t i = a->guarded;

		st = cms_vmm_map_range_read(r, a->base + i * zlen, piece_len(a->physical, zlen, i),
					    zero);
		if (st == CMS_ERR_ROLLBACK_FAILED) /* mapped without access: unmapped later */
			a->guarded++;
		if (st)
			goto unguard;
		a->guarded++;
	}
	return CMS_OK;

unguard: /* all or nothing; what cannot be unmapped now stays counted for a later call */
	cms_last_error_message(why, sizeof(why));
	if (cms_vmm_unguard(a))
		cms_log(r->ctx, CMS_LOG_ERROR, "0x%llx: %zu guard mappings kept after a failure",
			(unsigned long long)a->base, a->guarded);
	return cms_set_error(st, "%s", why);
}
