/* SPDX-License-Identifier: MIT */
/*
 * cleanup_ranges.c - the cleanup of a range of device addresses (a temporary
 * mapping: a guard's zero fill, the checksum's scratch; or an arena's
 * reservation): unmapped when mapped, then its reservation freed; a kind of
 * core's cleanups (core/cleanup.c), kept and tried again when the driver
 * refuses.
 */
#include "vmm_internal.h"

static CUresult range_run(cms_context *ctx, struct cms_cleanup *c)
{
	CUdeviceptr va = (CUdeviceptr)(uintptr_t)c->p;
	CUresult res;

	if (c->mapped) {
		res = ctx->drv.cuMemUnmap(va, c->len);
		if (res != CUDA_SUCCESS)
			return res;
		c->mapped = false; /* kept so: a retry only frees the reservation */
		atomic_fetch_sub(&ctx->devices[c->dev].own_bytes, c->own);
		c->own = 0;
	}
	return ctx->drv.cuMemAddressFree(va, c->len);
}

static const struct cms_cleanup_ops range_ops = { .call = "cuMemUnmap/cuMemAddressFree",
						  .run = range_run };

void cms_cleanup_range(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len, bool mapped)
{
	struct cms_cleanup c = { .ops = &range_ops,
				 .dev = dev,
				 .p = (void *)(uintptr_t)va,
				 .len = len,
				 .mapped = mapped };

	cms_cleanup_run(ctx, &c);
}

void cms_cleanup_own_range(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len, uint64_t own)
{
	struct cms_cleanup c = { .ops = &range_ops,
				 .dev = dev,
				 .p = (void *)(uintptr_t)va,
				 .len = len,
				 .mapped = true,
				 .own = own };

	cms_cleanup_run(ctx, &c);
}

void cms_cleanup_reservation(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len,
			     CUresult res)
{
	struct cms_cleanup c = {
		.ops = &range_ops, .dev = dev, .p = (void *)(uintptr_t)va, .len = len
	};

	cms_cleanup_keep(ctx, &c, res);
}
