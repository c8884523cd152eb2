/* SPDX-License-Identifier: MIT */
/* range.c - cms_range_discard and cms_range_keep: content-free ranges of an allocation. */
#include "api.h"

/* Runs op on [ptr, ptr + size) of the allocation holding it, with its region locked
 * (cms_alloc_lock: a concurrent cms_free either claimed it first, and it is not found, or
 * waits for the region lock). */
static cms_status on_range(cms_context *ctx, uint64_t ptr, uint64_t size, const char *what,
			   cms_status (*op)(struct cms_alloc *, uint64_t, uint64_t))
{
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
	if (!st)
		st = cms_alloc_lock(ctx, ptr, what, &a);
	if (st)
		return st;
	if (size > a->size - (ptr - a->base))
		st = cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				   "%s: %llu bytes at 0x%llx cross the end of the allocation at "
				   "0x%llx (%zu bytes)",
				   what, (unsigned long long)size, (unsigned long long)ptr,
				   (unsigned long long)a->base, a->size);
	else if (a->region->state != CMS_STATE_ACTIVE)
		st = cms_set_error(CMS_ERR_PAUSED,
				   "%s: region \"%s\" is paused: its content is already stored",
				   what, a->region->tag);
	else
		st = op(a, ptr - a->base, size);
	cms_alloc_unlock(ctx, a);
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
