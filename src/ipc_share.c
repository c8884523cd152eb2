/* SPDX-License-Identifier: MIT */
/* ipc_share.c - shareable regions: which handle types their physical allocations get. */
#include "internal.h"

cms_status cms_ipc_handle_types(cms_context *ctx, int32_t device, uint64_t flags, uint32_t *out)
{
	CUdevice dev = ctx->devices[device].cu;
	uint32_t types = 0;
	cms_status st = CMS_OK;
	int v = 0;

	*out = 0;
	if (flags & CMS_REGION_SHAREABLE) {
		CU_TRY(ctx,
		       cuDeviceGetAttribute(
			       &v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
			       dev),
		       st, out);
		if (!v)
			return cms_set_error(CMS_ERR_NOT_SUPPORTED,
					     "device %d cannot export POSIX file descriptors "
					     "(CMS_REGION_SHAREABLE)",
					     device);
		types |= CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	}
	if (flags & CMS_REGION_SHAREABLE_FABRIC) {
		v = 0;
		CU_TRY(ctx,
		       cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
					    dev),
		       st, out);
		if (!v)
			return cms_set_error(CMS_ERR_NOT_SUPPORTED,
					     "device %d does not support fabric handles "
					     "(CMS_REGION_SHAREABLE_FABRIC)",
					     device);
		types |= CU_MEM_HANDLE_TYPE_FABRIC;
	}
	*out = types;
out:
	return st;
}
