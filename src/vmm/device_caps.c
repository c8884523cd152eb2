/* SPDX-License-Identifier: MIT */
/*
 * device_caps.c - what a device allows a region's physical handles: the
 * shareable handle types its flags ask for, and access from peer devices
 * (checked before anything is made, so a refusal changes nothing).
 */
#include "vmm_internal.h"

cms_status cms_vmm_handle_types(cms_context *ctx, int32_t device, uint64_t flags, uint32_t *out)
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

cms_status cms_vmm_peers_check(cms_context *ctx, int32_t device, uint64_t mask)
{
	int count = 0, can = 0, d;
	cms_status st = CMS_OK;
	CUdevice peer;

	if (!mask)
		return CMS_OK;
	if (mask & (1ull << device))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "peer_device_mask 0x%llx names the region's own device %d",
				     (unsigned long long)mask, device);
	CU_TRY(ctx, cuDeviceGetCount(&count), st, out);
	for (d = 0; d < CMS_MAX_DEVICES; d++) {
		if (!(mask & (1ull << d)))
			continue;
		if (d >= count)
			return cms_set_error(CMS_ERR_INVALID_DEVICE,
					     "peer_device_mask 0x%llx: device %d does not exist "
					     "(%d devices)",
					     (unsigned long long)mask, d, count);
		CU_TRY(ctx, cuDeviceGet(&peer, d), st, out);
		CU_TRY(ctx, cuDeviceCanAccessPeer(&can, peer, ctx->devices[device].cu), st, out);
		if (!can)
			return cms_set_error(CMS_ERR_NOT_SUPPORTED,
					     "device %d cannot access the memory of device %d "
					     "(cuDeviceCanAccessPeer): drop it from "
					     "peer_device_mask",
					     d, device);
	}
out:
	return st;
}
