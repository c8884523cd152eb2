/* SPDX-License-Identifier: MIT */
/*
 * index.c - pointer index of a context: a binary tree (POSIX tsearch) of
 * allocations ordered by their reserved address ranges, which never overlap.
 * A lookup key of one byte finds the allocation containing that byte.
 * Callers hold ctx->lock.
 */
#include <search.h>

#include "core_internal.h"

static int range_cmp(const void *pa, const void *pb)
{
	const struct cms_alloc *a = pa, *b = pb;

	if (a->base + a->physical <= b->base)
		return -1;
	if (b->base + b->physical <= a->base)
		return 1;
	return 0;
}

cms_status cms_index_insert(cms_context *ctx, struct cms_alloc *a)
{
	void *node = tsearch(a, &ctx->index, range_cmp);

	if (!node)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot grow the pointer index");
	if (*(struct cms_alloc **)node != a)
		return cms_set_error(CMS_ERR_INTERNAL,
				     "allocation at 0x%llx overlaps an indexed allocation",
				     (unsigned long long)a->base);
	return CMS_OK;
}

void cms_index_remove(cms_context *ctx, struct cms_alloc *a)
{
	tdelete(a, &ctx->index, range_cmp);
}

struct cms_alloc *cms_index_find(cms_context *ctx, CUdeviceptr ptr)
{
	struct cms_alloc key = { .base = ptr, .physical = 1 };
	void *node = tfind(&key, &ctx->index, range_cmp);

	return node ? *(struct cms_alloc **)node : NULL;
}
