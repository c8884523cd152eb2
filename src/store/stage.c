/* SPDX-License-Identifier: MIT */
/*
 * stage.c - page-locked staging buffers: two buffers of one chunk each, made
 * for a call (or kept by a region between calls) and freed after it. DMA
 * between the device and memory that is not page-locked (a DISK file's
 * pages, pageable HOST backups) goes through them: the device copies into
 * or out of one buffer while the host side works on the other.
 */
#include <string.h>
#include <sys/mman.h>

#include "store.h"

cms_status cms_stage_make(cms_context *ctx, int32_t dev, uint64_t total, uint64_t chunk,
			  const char *what, struct cms_stage *s)
{
	size_t len;

	memset(s, 0, sizeof(*s));
	if (total < chunk)
		chunk = (total + CMS_DISK_ALIGN - 1) & ~(uint64_t)(CMS_DISK_ALIGN - 1);
	s->chunk = (size_t)chunk;
	len = 2 * s->chunk;
	if (ctx->drv.host_alloc_hook && ctx->drv.host_alloc_hook(len))
		goto err;
	s->hooked = ctx->drv.host_alloc_hook != NULL;
	s->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->base == MAP_FAILED) {
		s->base = NULL;
		if (s->hooked)
			ctx->drv.host_free_hook(len);
		goto err;
	}
	madvise(s->base, len, MADV_DONTFORK);
	s->dev = dev;
	if (ctx->drv.cuCtxPushCurrent(ctx->devices[dev].primary) == CUDA_SUCCESS) {
		s->registered =
			ctx->drv.cuMemHostRegister(s->base, len, CU_MEMHOSTREGISTER_PORTABLE) ==
			CUDA_SUCCESS; /* else pageable: slower, still correct */
		cms_pop(ctx);
	}
	return CMS_OK;
err:
	return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
			     "cannot allocate %zu bytes of %s staging buffers", len, what);
}

void cms_stage_free(cms_context *ctx, struct cms_stage *s)
{
	if (!s->base)
		return;
	if (s->registered) /* never unmap page-locked memory: a failed unregister is retried */
		cms_cleanup_staging(ctx, s->dev, s->base, 2 * s->chunk, s->hooked);
	else {
		munmap(s->base, 2 * s->chunk);
		if (s->hooked)
			ctx->drv.host_free_hook(2 * s->chunk);
	}
	s->base = NULL;
}
