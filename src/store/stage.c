/* SPDX-License-Identifier: MIT */
/*
 * stage.c - page-locked staging buffers: two buffers of one chunk each, made
 * for a call (or kept by a region between calls) and freed after it. DMA
 * between the device and memory that is not page-locked (a DISK file's
 * pages, pageable HOST backups) goes through them: the device copies into
 * or out of one buffer while the host side works on the other. Page-locked
 * memory whose unregister fails is kept as a cleanup (core/cleanup.c) of the
 * kind defined here.
 */
#include <string.h>
#include <sys/mman.h>

#include "store_internal.h"

/* The cleanup of page-locked memory (core's struct cms_cleanup_ops): unregistered, then
 * unmapped; kept until the unregister succeeds, never unmapped while page-locked. */
static CUresult staging_run(cms_context *ctx, struct cms_cleanup *c)
{
	return ctx->drv.cuMemHostUnregister(c->p);
}

static void staging_done(cms_context *ctx, struct cms_cleanup *c)
{
	munmap(c->p, c->len);
	if (c->hooked)
		ctx->drv.host_free_hook(c->len);
}

static const struct cms_cleanup_ops staging_ops = { .call = "cuMemHostUnregister",
						    .run = staging_run,
						    .done = staging_done };

void cms_stage_cleanup(cms_context *ctx, int32_t dev, void *base, size_t len, bool hooked)
{
	struct cms_cleanup c = {
		.ops = &staging_ops, .dev = dev, .p = base, .len = len, .hooked = hooked
	};

	cms_cleanup_run(ctx, &c);
}

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
		cms_stage_cleanup(ctx, s->dev, s->base, 2 * s->chunk, s->hooked);
	else {
		munmap(s->base, 2 * s->chunk);
		if (s->hooked)
			ctx->drv.host_free_hook(2 * s->chunk);
	}
	s->base = NULL;
}
