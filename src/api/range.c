/* SPDX-License-Identifier: MIT */
/* range.c - cms_range_discard and cms_range_keep: content-free ranges of an allocation. */
#include "api.h"

/*
 * Finds the allocation holding [ptr, ptr + size) and runs op on that range with its
 * region locked, the allocation still indexed (a concurrent cms_free either claimed it
 * first, and it is not found, or waits for the region lock).
 */
static cms_status on_range(cms_context *ctx, uint64_t ptr, uint64_t size, const char *what,
			   cms_status (*op)(struct cms_alloc *, uint64_t, uint64_t))
{
	struct cms_region *r;
	struct cms_alloc *a;
	cms_status st;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	if (!size)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s: size is 0", what);
	if (size > UINT64_MAX - ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s: 0x%llx + %llu overflows", what,
				     (unsigned long long)ptr, (unsigned long long)size);
	st = cms_check_fork(ctx);
	if (st)
		return st;
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr);
	if (!a || ptr - a->base >= a->size) {
		pthread_mutex_unlock(&ctx->lock);
		return cms_set_error(CMS_ERR_NOT_FOUND,
				     "%s: 0x%llx is not in any allocation of this context", what,
				     (unsigned long long)ptr);
	}
	r = a->region;
	r->refs++; /* the region outlives the wait for its lock */
	pthread_mutex_unlock(&ctx->lock);

	pthread_mutex_lock(&r->lock);
	pthread_mutex_lock(&ctx->lock);
	a = cms_index_find(ctx, ptr); /* freed meanwhile? */
	if (a && (a->region != r || ptr - a->base >= a->size))
		a = NULL;
	pthread_mutex_unlock(&ctx->lock);
	if (!a)
		st = cms_set_error(CMS_ERR_NOT_FOUND, "%s: 0x%llx was freed", what,
				   (unsigned long long)ptr);
	else if (size > a->size - (ptr - a->base))
		st = cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				   "%s: %llu bytes at 0x%llx cross the end of the allocation at "
				   "0x%llx (%zu bytes)",
				   what, (unsigned long long)size, (unsigned long long)ptr,
				   (unsigned long long)a->base, a->size);
	else if (r->state != CMS_STATE_ACTIVE)
		st = cms_set_error(CMS_ERR_PAUSED,
				   "%s: region \"%s\" is paused: its content is already stored",
				   what, r->tag);
	else
		st = op(a, ptr - a->base, size);
	pthread_mutex_unlock(&r->lock);

	pthread_mutex_lock(&ctx->lock);
	cms_region_unref_locked(r);
	pthread_mutex_unlock(&ctx->lock);
	return st;
}

CMS_API cms_status cms_range_discard(cms_context *ctx, uint64_t ptr, uint64_t size)
{
	return on_range(ctx, ptr, size, "cms_range_discard", cms_span_discard);
}

CMS_API cms_status cms_range_keep(cms_context *ctx, uint64_t ptr, uint64_t size)
{
	return on_range(ctx, ptr, size, "cms_range_keep", cms_span_keep);
}
