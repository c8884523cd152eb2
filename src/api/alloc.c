/* SPDX-License-Identifier: MIT */
/* alloc.c - cms_alloc, cms_free and pointer lookup. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

CMS_API cms_status cms_alloc(cms_region *region, uint64_t size, uint64_t *ptr)
{
	struct cms_region *r = region;
	struct cms_alloc *a;
	cms_context *ctx;
	bool keep = false;
	size_t gran;
	cms_status st;

	if (!r || !ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", r ? "ptr" : "region");
	*ptr = 0;
	if (!size)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "size is 0");
	ctx = r->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	gran = ctx->devices[r->device].granularity;
	if (size > SIZE_MAX - (gran - 1) || size > UINT64_MAX - (gran - 1))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "size %llu overflows when rounded to the granularity %zu",
				     (unsigned long long)size, gran);
	a = calloc(1, sizeof(struct cms_api_alloc)); /* its core part, at offset 0 */
	if (!a)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate bookkeeping");
	a->region = r;
	a->size = size;
	a->physical = (size + gran - 1) & ~(gran - 1);

	pthread_mutex_lock(&r->lock);
	/* Only a caller holding a reference sees these (cms_hook_alloc): an allocation never
	 * lands in a region being destroyed, which would otherwise free it, wait for its
	 * frees, and find a new one each time it looks (a livelock under steady traffic). */
	if (r->dead || r->dying) {
		st = cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region \"%s\" was destroyed", r->tag);
		goto err_unlock;
	}
	if (r->state != CMS_STATE_ACTIVE) {
		st = cms_set_error(CMS_ERR_PAUSED,
				   "region \"%s\" is paused: resume it before allocating", r->tag);
		goto err_unlock;
	}
	if (cms_region_engine(r)->frozen) {
		st = cms_set_error(CMS_ERR_FROZEN,
				   "region \"%s\" is frozen (read-only): thaw it before allocating",
				   r->tag);
		goto err_unlock;
	}
	st = cms_engine_alloc(a, &keep); /* reserved, linked, backed */
	if (st)
		goto err_kept;
	/* The address is an allocation again; before it can be found (and retired again by a
	 * destroy, which the region lock orders after this). */
	cms_hook_unretire(a->base);
	pthread_mutex_lock(&ctx->lock);
	st = cms_index_insert(ctx, a);
	pthread_mutex_unlock(&ctx->lock);
	if (st) {
		keep = cms_engine_alloc_undo(a);
		goto err_kept;
	}
	/* Read under the region lock: once it is released, a free or a destroy may free a. */
	*ptr = a->base;
	cms_engine_alloc_done(a); /* CMS_REGION_PREPARE: its host backup made in the background */
	pthread_mutex_unlock(&r->lock);
	return CMS_OK;

err_kept:
	if (keep) { /* the undo failed: kept (unindexed) rather than lose track of driver objects */
		pthread_mutex_unlock(&r->lock);
		return st;
	}
err_unlock:
	pthread_mutex_unlock(&r->lock);
	free(a);
	return st;
}

CMS_API cms_status cms_free(cms_context *ctx, uint64_t ptr)
{
	struct cms_region *r;
	struct cms_alloc *a;
	uint64_t base;
	cms_status st;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	if (!ptr)
		return CMS_OK; /* as free(NULL) and cudaFree(0): nothing to free (since 1.3) */
	st = cms_check_fork(ctx);
	if (st)
		return st;
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr);
	if (!a || ptr - a->base >= a->size) {
		pthread_mutex_unlock(&ctx->lock);
		return cms_set_error(CMS_ERR_NOT_FOUND,
				     "0x%llx is not an allocation of this context (or was freed)",
				     (unsigned long long)ptr);
	}
	if (ptr != a->base) {
		/* Read under the lock: once it is released, a destroy may free a. */
		base = a->base;
		pthread_mutex_unlock(&ctx->lock);
		return cms_set_error(CMS_ERR_NOT_BASE,
				     "0x%llx is %llu bytes into the allocation at 0x%llx",
				     (unsigned long long)ptr, (unsigned long long)(ptr - base),
				     (unsigned long long)base);
	}
	/* Claim it: no other thread can find it from now on. A region destroy waits for the
	 * claims in flight (nclaimed) before it frees the region's address space. */
	cms_index_remove(ctx, a);
	a->claimed = true;
	r = a->region;
	r->refs++;
	r->nclaimed++;
	pthread_mutex_unlock(&ctx->lock);

	pthread_mutex_lock(&r->lock);
	st = cms_engine_free(a); /* memory, storage, then out of the region's list */
	pthread_mutex_lock(&ctx->lock);
	if (st) {
		/* Still held: make it findable again (its region cannot be gone: we hold a
		 * reference), or leave it to the destroy that waits for it. */
		a->claimed = false;
		if (!r->dead)
			cms_index_insert(ctx, a);
	}
	r->nclaimed--;
	pthread_mutex_unlock(&ctx->lock);
	/* With the region lock held: a destroy checks nclaimed and waits under it. */
	pthread_cond_broadcast(&r->unclaimed);
	pthread_mutex_unlock(&r->lock);

	pthread_mutex_lock(&ctx->lock);
	cms_region_unref_locked(r);
	pthread_mutex_unlock(&ctx->lock);
	if (!st)
		free(a);
	return st;
}

CMS_API cms_status cms_pointer_info_get(cms_context *ctx, uint64_t ptr, cms_pointer_info *info)
{
	cms_pointer_info o;
	struct cms_alloc *a;
	cms_status st;

	if (!ctx || !info)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", ctx ? "info" : "ctx");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	st = CMS_CHECK_OUT(info, cms_pointer_info);
	if (st)
		return st;
	memset(&o, 0, sizeof(o));
	o.struct_size = sizeof(o);
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr);
	if (a && ptr - a->base < a->size) {
		o.region = a->region;
		o.base = a->base;
		o.size = a->size;
		o.offset = ptr - a->base;
		o.physical_size = a->physical;
		o.device = a->region->device;
		o.state = __atomic_load_n(&a->region->state, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&ctx->lock);
	if (!o.base)
		return cms_set_error(CMS_ERR_NOT_FOUND,
				     "0x%llx is not in any allocation of this context",
				     (unsigned long long)ptr);
	cms_copy_out(info, &o, sizeof(o));
	return CMS_OK;
}

cms_status cms_alloc_lock(cms_context *ctx, uint64_t ptr, const char *what, struct cms_alloc **out)
{
	struct cms_region *r;
	struct cms_alloc *a;
	bool same;

	*out = NULL;
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr);
	if (!a || ptr - a->base >= a->size) {
		pthread_mutex_unlock(&ctx->lock);
		goto err;
	}
	r = a->region;
	r->refs++; /* the region outlives the wait for its lock */
	pthread_mutex_unlock(&ctx->lock);
	pthread_mutex_lock(&r->lock);
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr); /* freed meanwhile? */
	same = a && ptr - a->base < a->size && a->region == r;
	pthread_mutex_unlock(&ctx->lock);
	if (same) {
		*out = a;
		return CMS_OK;
	}
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_lock(&ctx->lock);
	cms_region_unref_locked(r);
	pthread_mutex_unlock(&ctx->lock);
err:
	return cms_set_error(CMS_ERR_NOT_FOUND,
			     "%s: 0x%llx is not in any allocation of this context (or was freed)",
			     what, (unsigned long long)ptr);
}

cms_status cms_alloc_device_sync(cms_context *ctx, uint64_t ptr)
{
	struct cms_alloc *a;
	int32_t dev = -1;
	cms_status st;

	st = cms_check_fork(ctx); /* before its lock, which a parent's thread may have held */
	if (st)
		return st;
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr);
	if (a && ptr - a->base < a->size)
		dev = a->region->device; /* fixed for the region's life */
	pthread_mutex_unlock(&ctx->lock);
	if (dev < 0)
		return CMS_ERR_NOT_FOUND;
	st = cms_push(ctx, dev);
	if (st)
		return st;
	CU_TRY(ctx, cuCtxSynchronize(), st, pop);
pop:
	cms_pop(ctx);
	return st;
}

void cms_alloc_unlock(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_region *r = a->region;

	pthread_mutex_unlock(&r->lock);
	pthread_mutex_lock(&ctx->lock);
	cms_region_unref_locked(r);
	pthread_mutex_unlock(&ctx->lock);
}
