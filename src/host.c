/* SPDX-License-Identifier: MIT */
/*
 * host.c - host backup buffers. v1 uses pageable memory from malloc; the
 * host simulation, when loaded as the driver, may veto an allocation (fault
 * injection) and counts live buffers for leak checks.
 */
#include <stdlib.h>

#include "internal.h"

void *cms_host_alloc(cms_context *ctx, size_t bytes)
{
	void *p;

	if (ctx->drv.host_alloc_hook && ctx->drv.host_alloc_hook(bytes))
		return NULL;
	p = malloc(bytes ? bytes : 1);
	if (!p && ctx->drv.host_free_hook)
		ctx->drv.host_free_hook(bytes);
	return p;
}

void cms_host_free(cms_context *ctx, void *p, size_t bytes)
{
	if (!p)
		return;
	free(p);
	if (ctx->drv.host_free_hook)
		ctx->drv.host_free_hook(bytes);
}
