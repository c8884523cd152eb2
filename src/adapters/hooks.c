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
 * - Callers using the hook context count themselves in flight in the hook
 *   context's current generation before loading it (cms_hookctx_enter);
 *   clearing or replacing it starts a new generation and waits until no
 *   caller of the previous one is left (so a context is never destroyed
 *   under a free in flight, and steady traffic cannot hold a replacement
 *   up: later callers count in the new generation).
 * - Each stack entry remembers its region's id; an allocation checks, under
 *   the context lock, that the region is still alive with that id (a
 *   destroyed region on a stack is refused, never touched) and takes a
 *   reference on it for the allocation: a destroy that runs meanwhile cannot
 *   free the region under it, and cms_alloc refuses the region once the
 *   destroy marked it dead.
 * - Allocations of the hook context released by a region or context destroy
 *   are remembered ("retired"): a later free of one by PyTorch is a no-op
 *   success, not an unknown pointer that an interposer would hand to the
 *   CUDA runtime (which refuses it, and PyTorch terminates) - unless the
 *   driver knows memory at that address again (the runtime was handed the
 *   freed address): that free is the runtime's, and not swallowing it keeps
 *   the interposer from leaking the runtime's memory.
 * - After fork() the child's stack is empty and the hook context answers
 *   CMS_ERR_FORKED, which the interposer treats as "not ours".
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "adapters.h"

struct hook_entry {
	cms_region *region;
	uint64_t id;
};

static _Thread_local struct {
	unsigned depth;
	unsigned fork_generation;
	struct hook_entry stack[CMS_HOOK_DEPTH_MAX];
} hook_tls;

/* The calling thread's stack, emptied if this process forked since it was filled. */
static void hook_tls_check(void)
{
	if (hook_tls.fork_generation != cms_fork_generation) {
		hook_tls.depth = 0;
		hook_tls.fork_generation = cms_fork_generation;
	}
}

CMS_API cms_status cms_hook_context_set(cms_context *ctx)
{
	if (ctx) {
		cms_status st = cms_check_fork(ctx);

		if (st)
			return st;
	}
	cms_hookctx_swap(NULL, ctx, false);
	return CMS_OK;
}

CMS_API cms_status cms_hook_region_push(cms_region *region)
{
	cms_context *ctx = cms_hookctx_peek();
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

/* Takes a reference on region r (not dereferenced unless found) if it is alive in ctx with id:
 * a destroy may then run, but the region's memory stays until region_put. */
static bool region_get(cms_context *ctx, cms_region *r, uint64_t id)
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
	if (alive)
		r->refs++;
	pthread_mutex_unlock(&ctx->lock);
	return alive;
}

static void region_put(cms_context *ctx, cms_region *r)
{
	pthread_mutex_lock(&ctx->lock);
	cms_region_unref_locked(r);
	pthread_mutex_unlock(&ctx->lock);
}

/* cms_hook_memory_margin_set: device bytes a hooked allocation must leave free (0: none). */
static _Atomic uint64_t hook_margin;

/* Whether an allocation of size bytes on r's device leaves the margin free (cuMemGetInfo). */
static cms_status margin_check(cms_context *ctx, const struct cms_region *r, uint64_t size)
{
	uint64_t margin = atomic_load(&hook_margin), free_bytes = 0, total = 0;
	cms_status st;

	if (!margin)
		return CMS_OK;
	st = cms_device_memory_info(ctx, r->device, &free_bytes, &total);
	if (st)
		return st;
	if (free_bytes < margin || free_bytes - margin < size)
		return cms_set_error(CMS_ERR_OUT_OF_DEVICE_MEMORY,
				     "allocating %llu bytes on device %d would leave less than the "
				     "memory margin of %llu bytes free (%llu free)",
				     (unsigned long long)size, (int)r->device,
				     (unsigned long long)margin, (unsigned long long)free_bytes);
	return CMS_OK;
}

/* Makes device's default region from the template of generation ticket, if there is one:
 * the region of its tag on device, created with its options (and the template's disk
 * directory) when it does not exist, else taken as it is. CMS_OK also when there is no
 * template (the caller then finds no default); else why the region could not be made. */
static cms_status default_from_template(cms_context *ctx, unsigned ticket, int32_t device)
{
	char tag[CMS_TAG_MAX + 1], dir[PATH_MAX];
	cms_region_options o;
	cms_region *r = NULL;
	cms_status st;

	if (!cms_hook_template_get(ctx, ticket, tag, &o, dir))
		return CMS_OK;
	o.device = device;
	st = cms_region_create_dir(ctx, tag, &o, dir[0] ? dir : NULL, &r);
	if (st == CMS_ERR_EXISTS) /* made meanwhile by another thread, or by the application */
		st = cms_region_find(ctx, tag, device, &r);
	/* refused if a destroy took it meanwhile: the caller then finds no default (never out of
	 * memory: the template's defaults exist) */
	if (!st)
		(void)cms_hook_default_set(ctx, ticket, device, r);
	return st;
}

/* A hooked allocation of a thread without an active region: in device's default region of
 * the hook context, if it has one (cms_hook_region_default_set), else one made from the
 * template (cms_hook_region_default_template_set). */
static cms_status default_alloc(uint64_t size, int32_t device, uint64_t *ptr)
{
	struct cms_region *r = NULL;
	cms_context *ctx;
	unsigned ticket;
	cms_status st;

	if (!size)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "size is 0");
	ctx = cms_hookctx_enter(&ticket);
	/* A forked child has none (the parent's are not its own): its lock is not taken. */
	st = ctx ? cms_check_fork(ctx) : CMS_OK;
	if (!st && ctx && device >= 0 && device < CMS_MAX_DEVICES) {
		r = cms_hook_default_get(ctx, ticket, device, true);
		if (!r) {
			st = default_from_template(ctx, ticket, device);
			if (!st)
				r = cms_hook_default_get(ctx, ticket, device, true);
		}
	}
	if (!st && !r)
		st = cms_set_error(CMS_ERR_NOT_FOUND,
				   "no region is active on this thread and device %d has no "
				   "default region",
				   (int)device);
	if (!st)
		st = margin_check(ctx, r, size);
	if (!st) /* refuses the region if a destroy finished meanwhile (it is dead) */
		st = cms_alloc(r, size, ptr);
	if (r)
		region_put(ctx, r);
	cms_hookctx_leave(ticket);
	return st;
}

CMS_API cms_status cms_hook_alloc(uint64_t size, int32_t device, uint64_t *ptr)
{
	struct hook_entry e;
	cms_context *ctx;
	unsigned ticket;
	cms_status st;

	if (!ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ptr is NULL");
	*ptr = 0;
	hook_tls_check();
	if (!hook_tls.depth)
		return default_alloc(size, device, ptr);
	if (!size)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "size is 0");
	e = hook_tls.stack[hook_tls.depth - 1];
	ctx = cms_hookctx_enter(&ticket);
	if (!ctx || !region_get(ctx, e.region, e.id)) {
		cms_hookctx_leave(ticket);
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
		st = margin_check(ctx, e.region, size);
	if (!st) /* refuses the region if a destroy finished meanwhile (it is dead) */
		st = cms_alloc(e.region, size, ptr);
	region_put(ctx, e.region);
	cms_hookctx_leave(ticket);
	return st;
}

CMS_API cms_status cms_hook_region_default_set(int32_t device, cms_region *region)
{
	cms_context *ctx;
	unsigned ticket;
	cms_status st;

	if (device < 0 || device >= CMS_MAX_DEVICES)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "device %d", (int)device);
	ctx = cms_hookctx_enter(&ticket);
	if (!ctx) {
		cms_hookctx_leave(ticket);
		if (!region)
			return CMS_OK; /* no hook context: no default to clear */
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "no hook context: call cms_hook_context_set first");
	}
	st = cms_check_fork(ctx);
	/* Looks region up in the context's list under its lock before touching it: a region
	 * of another context, or one destroyed meanwhile, is refused unread. */
	if (!st)
		st = cms_hook_default_set(ctx, ticket, device, region);
	cms_hookctx_leave(ticket);
	return st;
}

/* Checks a template's disk directory: given only with CMS_POLICY_DISK, a directory; *abs its
 * absolute path (the caller frees it), kept whole by the template (cms_hook_template_set). */
_Static_assert(CMS_DISK_DIR_MAX < PATH_MAX, "a template's directory fits in PATH_MAX bytes");
static cms_status template_dir(const cms_region_options *o, const char *dir, char **abs)
{
	*abs = NULL;
	if (o->policy != CMS_POLICY_DISK)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "a disk directory needs CMS_POLICY_DISK (policy %u)",
				     o->policy);
	return cms_store_dir_resolve(dir, abs);
}

CMS_API cms_status cms_hook_region_default_template_set(const char *tag,
							const cms_region_options *opts,
							const char *disk_dir)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx;
	char *abs = NULL;
	unsigned ticket;
	cms_status st;

	if (tag) {
		st = cms_check_tag(tag);
		if (!st)
			st = cms_region_options_check(opts, &o);
		if (!st && disk_dir)
			st = template_dir(&o, disk_dir, &abs);
		if (st)
			return st;
	}
	ctx = cms_hookctx_enter(&ticket);
	st = CMS_OK;
	if (!ctx && tag)
		st = cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				   "no hook context: call cms_hook_context_set first");
	else if (ctx)
		st = cms_check_fork(ctx);
	if (!st && ctx)
		st = cms_hook_template_set(ctx, ticket, tag, &o, abs);
	cms_hookctx_leave(ticket);
	free(abs);
	return st;
}

CMS_API cms_status cms_hook_memory_margin_set(uint64_t bytes)
{
	atomic_store(&hook_margin, bytes);
	return CMS_OK;
}

CMS_API cms_region *cms_hook_region_default(int32_t device)
{
	struct cms_region *r = NULL;
	cms_context *ctx;
	unsigned ticket;

	if (device < 0 || device >= CMS_MAX_DEVICES)
		return NULL;
	ctx = cms_hookctx_enter(&ticket);
	if (ctx && !cms_check_fork(ctx))
		r = cms_hook_default_get(ctx, ticket, device, false);
	cms_hookctx_leave(ticket);
	return r;
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

CMS_API cms_status cms_hook_free(void *ptr)
{
	cms_context *ctx;
	unsigned ticket;
	cms_status st;

	if (!ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ptr is NULL");
	ctx = cms_hookctx_enter(&ticket);
	if (!ctx) {
		cms_hookctx_leave(ticket);
		if (cms_hook_retired_free((uint64_t)(uintptr_t)ptr))
			return CMS_OK; /* already released with its region or context */
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "no hook context: call cms_hook_context_set first");
	}
	/* as the runtime's cudaFree: kernels may still be writing it (PyTorch's out-of-memory
	 * retry frees cached segments right after launching into them) */
	st = cms_alloc_device_sync(ctx, (uint64_t)(uintptr_t)ptr);
	if (st == CMS_OK || st == CMS_ERR_NOT_FOUND)
		st = cms_free(ctx, (uint64_t)(uintptr_t)ptr);
	cms_hookctx_leave(ticket);
	if (st == CMS_ERR_NOT_FOUND && cms_hook_retired_free((uint64_t)(uintptr_t)ptr))
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
