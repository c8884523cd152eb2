/* SPDX-License-Identifier: MIT */
/*
 * mapping.c - the driver calls on a range of addresses with the properties of
 * a region: cuMemCreate of a physical handle, cuMemMap with cuMemSetAccess
 * (read-write; read-only for the zero handle of a guard, guard.c),
 * cuMemSetAccess alone (read-write, or read-only for a frozen region). The
 * base of vmm.c (one allocation) and run.c (a run of adjacent allocations).
 */
#include <string.h>

#include "vmm_internal.h"

cms_status cms_vmm_create_handle(const struct cms_region *r, size_t size,
				 CUmemGenericAllocationHandle *handle)
{
	cms_context *ctx = r->ctx;
	CUmemAllocationProp prop;
	cms_status st = CMS_OK;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes =
		(int)cms_region_vmm(r)->handle_types; /* NONE unless shareable */
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = r->device;
	prop.allocFlags.gpuDirectRDMACapable = ctx->devices[r->device].gdr;
	CU_TRY(ctx, cuMemCreate(handle, size, &prop, 0), st, out);
out:
	return st;
}

/*
 * One descriptor per device: prot (read-write, or read for a guard) for the
 * region's device and each device of mask (peers), none for each device of
 * revoke not in mask.
 */
static size_t access_descs(const struct cms_region *r, uint64_t mask, uint64_t revoke, int prot,
			   CUmemAccessDesc *d)
{
	size_t n = 0;
	int dev;

	for (dev = -1; dev < CMS_MAX_DEVICES; dev++) {
		uint64_t bit = dev < 0 ? 0 : 1ull << dev;

		if (dev >= 0 && !((mask | revoke) & bit))
			continue;
		memset(&d[n], 0, sizeof(d[n]));
		d[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		d[n].location.id = dev < 0 ? r->device : dev;
		d[n].flags = dev < 0 || (mask & bit) ? prot : CU_MEM_ACCESS_FLAGS_PROT_NONE;
		n++;
	}
	return n;
}

static cms_status set_access(const struct cms_region *r, CUdeviceptr base, size_t len,
			     uint64_t mask, uint64_t revoke, int prot)
{
	cms_context *ctx = r->ctx;
	CUmemAccessDesc access[CMS_MAX_DEVICES + 1];
	size_t naccess = access_descs(r, mask, revoke, prot, access);
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuMemSetAccess(base, len, access, naccess), st, out);
out:
	return st;
}

cms_status cms_vmm_access_range(const struct cms_region *r, CUdeviceptr base, size_t len,
				uint64_t mask, uint64_t revoke, bool read_only)
{
	return set_access(r, base, len, mask, revoke,
			  read_only ? CU_MEM_ACCESS_FLAGS_PROT_READ :
				      CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

/* cuMemMap of the first len bytes of handle over [base, base + len), then cuMemSetAccess. */
static cms_status map_with(const struct cms_region *r, CUdeviceptr base, size_t len,
			   CUmemGenericAllocationHandle handle, int prot)
{
	cms_context *ctx = r->ctx;
	cms_status st = CMS_OK;
	CUresult res;

	CU_TRY(ctx, cuMemMap(base, len, 0, handle, 0), st, out);
	st = set_access(r, base, len, cms_region_vmm(r)->peer_mask, 0, prot);
	if (!st)
		return CMS_OK;
	res = ctx->drv.cuMemUnmap(base, len);
	if (res != CUDA_SUCCESS)
		st = cms_set_error(CMS_ERR_ROLLBACK_FAILED,
				   "cuMemSetAccess failed at 0x%llx and cuMemUnmap failed: %s",
				   (unsigned long long)base, cms_driver_error_name(&ctx->drv, res));
out:
	return st;
}

cms_status cms_vmm_map_range(const struct cms_region *r, CUdeviceptr base, size_t len,
			     CUmemGenericAllocationHandle handle)
{
	return map_with(r, base, len, handle, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

cms_status cms_vmm_map_range_read(const struct cms_region *r, CUdeviceptr base, size_t len,
				  CUmemGenericAllocationHandle handle)
{
	return map_with(r, base, len, handle, CU_MEM_ACCESS_FLAGS_PROT_READ);
}
