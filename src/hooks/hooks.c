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
 *
 * Lifetime rules that keep a hooked process from crashing:
 * - Callers using the hook context count themselves in hook_inflight before
 *   loading it; clearing or replacing it waits until no caller that may
 *   have loaded the old one is left (so a context is never destroyed under
 *   a free in flight).
 * - Each stack entry remembers its region's id; an allocation checks, under
 *   the context lock, that the region is still alive with that id (a
 *   destroyed region on a stack is refused, never touched).
 * - Allocations of the hook context released by a region or context destroy
 *   are remembered ("retired"): a later free of one by PyTorch is a no-op
 *   success, not an unknown pointer that an interposer would hand to the
 *   CUDA runtime (which refuses it, and PyTorch terminates).
 * - After fork() the child's stack is empty and the hook context answers
 *   CMS_ERR_FORKED, which the interposer treats as "not ours".
 */
#include <sched.h>
#include <search.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

static _Atomic(cms_context *) hook_ctx;
static atomic_uint hook_inflight;

struct hook_entry {
	cms_region *region;
	uint64_t id;
};

static _Thread_local struct {
	unsigned depth;
	unsigned fork_generation;
	struct hook_entry stack[CMS_HOOK_DEPTH_MAX];
} hook_tls;

static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static void *retired;	       /* tsearch tree of uint64_t device pointers (heap nodes) */
static atomic_size_t nretired; /* entries in it; read without the lock */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The calling thread's stack, emptied if this process forked since it was filled. */
static void hook_tls_check(void)
{
	if (hook_tls.fork_generation != cms_fork_generation) {
		hook_tls.depth = 0;
		hook_tls.fork_generation = cms_fork_generation;
	}
}

/* Loads the hook context for a caller that will use it; pair with hook_leave. */
static cms_context *hook_enter(void)
{
	atomic_fetch_add(&hook_inflight, 1);
	return atomic_load(&hook_ctx);
}

static void hook_leave(void)
{
	atomic_fetch_sub(&hook_inflight, 1);
}

/* Replaces the hook context (if it is old, for a compare-and-swap) and waits until no
 * caller that may still hold the old one is in flight. */
static bool hook_swap(cms_context *old, cms_context *new, bool cas)
{
	if (cas) {
		if (!atomic_compare_exchange_strong(&hook_ctx, &old, new))
			return false;
	} else {
		atomic_store(&hook_ctx, new);
	}
	while (atomic_load(&hook_inflight))
		sched_yield();
	return true;
}

CMS_API cms_status cms_hook_context_set(cms_context *ctx)
{
	if (ctx) {
		cms_status st = cms_check_fork(ctx);

		if (st)
			return st;
	}
	hook_swap(NULL, ctx, false);
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
	hook_tls_check();
	if (hook_tls.depth >= CMS_HOOK_DEPTH_MAX)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "this thread already has %d active regions (the most)",
				     CMS_HOOK_DEPTH_MAX);
	hook_tls.stack[hook_tls.depth].region = region;
	hook_tls.stack[hook_tls.depth].id = region->id;
	hook_tls.depth++;
	return CMS_OK;
}

CMS_API cms_status cms_hook_region_pop(void)
{
	hook_tls_check();
	if (!hook_tls.depth)
		return cms_set_error(CMS_ERR_NOT_FOUND, "this thread has no active region");
	hook_tls.depth--;
	hook_tls.stack[hook_tls.depth].region = NULL;
	return CMS_OK;
}

CMS_API cms_region *cms_hook_region_current(void)
{
	hook_tls_check();
	return hook_tls.depth ? hook_tls.stack[hook_tls.depth - 1].region : NULL;
}

/* Whether region r (not dereferenced unless found) is alive in ctx with id. */
static bool region_alive(cms_context *ctx, cms_region *r, uint64_t id)
{
	struct cms_region *it;
	bool alive = false;

	pthread_mutex_lock(&ctx->lock);
	for (it = ctx->regions; it; it = it->next) {
		if (it == r) {
			alive = !it->dead && it->id == id;
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return alive;
}

CMS_API cms_status cms_hook_alloc(uint64_t size, int32_t device, uint64_t *ptr)
{
	struct hook_entry e;
	cms_context *ctx;
	cms_status st;

	if (!ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ptr is NULL");
	*ptr = 0;
	hook_tls_check();
	if (!hook_tls.depth)
		return cms_set_error(CMS_ERR_NOT_FOUND, "no region is active on this thread");
	if (!size)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "size is 0");
	e = hook_tls.stack[hook_tls.depth - 1];
	ctx = hook_enter();
	if (!ctx || !region_alive(ctx, e.region, e.id)) {
		hook_leave();
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "the thread's active region was destroyed, or is not in the "
				     "hook context");
	}
	st = cms_check_fork(ctx);
	if (!st && device >= 0 && device != e.region->device)
		st = cms_set_error(
			CMS_ERR_INVALID_DEVICE,
			"device %d, but the thread's active region \"%s\" is on device %d",
			(int)device, e.region->tag, (int)e.region->device);
	if (!st)
		st = cms_alloc(e.region, size, ptr);
	hook_leave();
	return st;
}

CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream)
{
	uint64_t ptr = 0;

	(void)stream;
	if (size <= 0) {
		cms_set_error(CMS_ERR_INVALID_ARGUMENT, "cms_torch_alloc: size %zd", size);
		return NULL;
	}
	if (device < 0) {
		cms_set_error(CMS_ERR_INVALID_DEVICE, "cms_torch_alloc: device %d", device);
		return NULL;
	}
	if (cms_hook_alloc((uint64_t)size, device, &ptr) != CMS_OK)
		return NULL;
	return (void *)(uintptr_t)ptr;
}

/* Forgets ptr if it is retired; returns whether it was. */
static bool unretire(uint64_t ptr)
{
	uint64_t **node;
	uint64_t *key = NULL;

	pthread_mutex_lock(&retired_lock);
	node = tfind(&ptr, &retired, cmp_u64);
	if (node) {
		key = *node;
		tdelete(&ptr, &retired, cmp_u64);
		atomic_fetch_sub(&nretired, 1);
	}
	pthread_mutex_unlock(&retired_lock);
	free(key);
	return key != NULL;
}

CMS_API cms_status cms_hook_free(void *ptr)
{
	cms_context *ctx;
	cms_status st;

	if (!ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ptr is NULL");
	ctx = hook_enter();
	if (!ctx) {
		hook_leave();
		if (unretire((uint64_t)(uintptr_t)ptr))
			return CMS_OK; /* already released with its region or context */
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "no hook context: call cms_hook_context_set first");
	}
	st = cms_free(ctx, (uint64_t)(uintptr_t)ptr);
	hook_leave();
	if (st == CMS_ERR_NOT_FOUND && unretire((uint64_t)(uintptr_t)ptr))
		return CMS_OK;
	return st;
}

CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
	(void)size;
	(void)device;
	(void)stream;
	if (!ptr) {
		cms_set_error(CMS_ERR_INVALID_ARGUMENT, "cms_torch_free: ptr is NULL");
		return;
	}
	cms_hook_free(ptr); /* a failure is in cms_last_error(); PyTorch cannot take one */
}

void cms_hook_retire(cms_context *ctx, uint64_t ptr)
{
	uint64_t *key, **node;

	if (atomic_load(&hook_ctx) != ctx)
		return;
	key = malloc(sizeof(*key));
	if (!key)
		return; /* a later free of ptr is then "not ours": what it was before 1.1 */
	*key = ptr;
	pthread_mutex_lock(&retired_lock);
	node = tsearch(key, &retired, cmp_u64);
	if (node && *node == key)
		atomic_fetch_add(&nretired, 1);
	pthread_mutex_unlock(&retired_lock);
	if (!node || *node != key)
		free(key); /* no memory for the node, or already there */
}

void cms_hook_unretire(uint64_t ptr)
{
	if (atomic_load(&nretired))
		unretire(ptr);
}

void cms_hook_forget_context(cms_context *ctx)
{
	hook_swap(ctx, NULL, true);
}
