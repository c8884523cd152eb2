/* SPDX-License-Identifier: MIT */
/*
 * vmm.c - reservations, physical handles and mappings of one allocation.
 * One mapping per physical handle, at offset 0 (the H200 driver refuses
 * non-zero offsets and partial unmaps). Each function undoes its own partial
 * work on failure.
 */
#include <string.h>

#include "internal.h"

static void alloc_prop(const struct cms_region *r, CUmemAllocationProp *prop)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = r->device;
	prop->allocFlags.gpuDirectRDMACapable = r->ctx->devices[r->device].gdr;
}

cms_status cms_vmm_reserve(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	size_t gran = ctx->devices[a->region->device].granularity;
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuMemAddressReserve(&a->base, a->physical, gran, 0, 0), st, out);
out:
	return st;
}

cms_status cms_vmm_unreserve(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuMemAddressFree(a->base, a->physical), st, out);
out:
	return st;
}

cms_status cms_vmm_create(struct cms_region *r, size_t bytes, CUmemGenericAllocationHandle *h)
{
	cms_context *ctx = r->ctx;
	CUmemAllocationProp prop;
	cms_status st = CMS_OK;

	alloc_prop(r, &prop);
	CU_TRY(ctx, cuMemCreate(h, bytes, &prop, 0), st, out);
out:
	return st;
}

cms_status cms_vmm_map(struct cms_alloc *a, CUmemGenericAllocationHandle h)
{
	cms_context *ctx = a->region->ctx;
	CUmemAccessDesc access;
	cms_status st = CMS_OK;

	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = a->region->device;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_TRY(ctx, cuMemMap(a->base, a->physical, 0, h, 0), st, out);
	CU_TRY(ctx, cuMemSetAccess(a->base, a->physical, &access, 1), st, err_unmap);
	return CMS_OK;

err_unmap:
	ctx->drv.cuMemUnmap(a->base, a->physical);
out:
	return st;
}

cms_status cms_vmm_back(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	CUmemGenericAllocationHandle h;
	cms_status st;

	st = cms_vmm_create(a->region, a->physical, &h);
	if (st)
		return st;
	st = cms_vmm_map(a, h);
	if (st)
		goto err_release;
	a->handle = h;
	a->backed = true;
	return CMS_OK;

err_release:
	ctx->drv.cuMemRelease(h);
	return st;
}

cms_status cms_vmm_unback(struct cms_alloc *a)
{
	cms_context *ctx = a->region->ctx;
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuMemUnmap(a->base, a->physical), st, out);
	CU_TRY(ctx, cuMemRelease(a->handle), st, err_remap);
	a->handle = 0;
	a->backed = false;
	return CMS_OK;

err_remap:
	if (cms_vmm_map(a, a->handle)) {
		cms_log(ctx, CMS_LOG_ERROR,
			"allocation 0x%llx: cannot map again after a failed release",
			(unsigned long long)a->base);
		a->backed = false;
		st = CMS_ERR_ROLLBACK_FAILED;
	}
out:
	return st;
}
