/* SPDX-License-Identifier: MIT */
/*
 * hooks.c - allocator hooks: the process-wide hook context, the per-thread
 * stack of active regions, and PyTorch's CUDAPluggableAllocator entry points.
 *
 * PyTorch calls cms_torch_alloc on the thread that allocates a tensor (the
 * one inside the Python region() block, which pushed its region here), and
 * cms_torch_free on whatever thread drops the last reference (the garbage
 * collector, empty_cache, another thread): frees therefore go through the
 * process-wide hook context, never through the thread's stack.
 */
#include <stdatomic.h>

#include "internal.h"

static _Atomic(cms_context *) hook_ctx;

static _Thread_local struct {
	unsigned depth;
	cms_region *stack[CMS_HOOK_DEPTH_MAX];
} hook_tls;

static bool hook_forked(void)
{
	cms_context *ctx = atomic_load(&hook_ctx);

	return ctx && cms_check_fork(ctx) != CMS_OK;
}

CMS_API cms_status cms_hook_context_set(cms_context *ctx)
{
	if (ctx) {
		cms_status st = cms_check_fork(ctx);

		if (st)
			return st;
	}
	atomic_store(&hook_ctx, ctx);
	return CMS_OK;
}

CMS_API cms_status cms_hook_region_push(cms_region *region)
{
	cms_context *ctx = atomic_load(&hook_ctx);
	cms_status st;

	if (!region)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(region->ctx);
	if (st)
		return st;
	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "no hook context: call cms_hook_context_set first");
	if (region->ctx != ctx)
		return cms_set_error(
			CMS_ERR_INVALID_ARGUMENT,
			"region \"%s\" belongs to another context than the hook context",
			region->tag);
	if (hook_tls.depth >= CMS_HOOK_DEPTH_MAX)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "this thread already has %d active regions (the most)",
				     CMS_HOOK_DEPTH_MAX);
	hook_tls.stack[hook_tls.depth++] = region;
	return CMS_OK;
}

CMS_API cms_status cms_hook_region_pop(void)
{
	if (hook_forked())
		return cms_check_fork(atomic_load(&hook_ctx));
	if (!hook_tls.depth)
		return cms_set_error(CMS_ERR_NOT_FOUND, "this thread has no active region");
	hook_tls.stack[--hook_tls.depth] = NULL;
	return CMS_OK;
}

CMS_API cms_region *cms_hook_region_current(void)
{
	return hook_tls.depth ? hook_tls.stack[hook_tls.depth - 1] : NULL;
}

CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream)
{
	cms_region *r = cms_hook_region_current();
	uint64_t ptr = 0;

	(void)stream;
	if (!r) {
		cms_set_error(CMS_ERR_INVALID_ARGUMENT,
			      "cms_torch_alloc: no region is active on this thread");
		return NULL;
	}
	if (size <= 0) {
		cms_set_error(CMS_ERR_INVALID_ARGUMENT, "cms_torch_alloc: size %zd", size);
		return NULL;
	}
	if (device != r->device) {
		cms_set_error(CMS_ERR_INVALID_DEVICE,
			      "cms_torch_alloc: device %d, but the active region \"%s\" is on "
			      "device %d",
			      device, r->tag, (int)r->device);
		return NULL;
	}
	if (cms_alloc(r, (uint64_t)size, &ptr) != CMS_OK)
		return NULL;
	return (void *)(uintptr_t)ptr;
}

CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
	cms_context *ctx = atomic_load(&hook_ctx);

	(void)size;
	(void)device;
	(void)stream;
	if (!ptr)
		return;
	if (!ctx) {
		cms_set_error(CMS_ERR_INVALID_ARGUMENT,
			      "cms_torch_free: no hook context; %p not freed", ptr);
		return;
	}
	if (cms_free(ctx, (uint64_t)(uintptr_t)ptr) != CMS_OK)
		cms_log(ctx, CMS_LOG_WARN, "cms_torch_free(%p): %s", ptr, cms_last_error());
}

CMS_API cms_status cms_hook_free(void *ptr)
{
	cms_context *ctx = atomic_load(&hook_ctx);

	if (!ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ptr is NULL");
	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "no hook context: call cms_hook_context_set first");
	return cms_free(ctx, (uint64_t)(uintptr_t)ptr);
}

void cms_hook_forget_context(cms_context *ctx)
{
	cms_context *expected = ctx;

	atomic_compare_exchange_strong(&hook_ctx, &expected, NULL);
}
