/* SPDX-License-Identifier: MIT */
/*
 * hookops.c - the hook adapter's table (core.h: struct cms_hook_ops): the
 * process-wide state of the allocator hooks (the hook context, its retired
 * pointers and default regions) lives with them in adapters/hookctx.c, above
 * the api; the api's destroys and allocations and the fork handlers
 * (device.c) reach it through this table, which that file registers when the
 * library loads. With none registered every call here does nothing: no hook
 * context was ever set, so nothing was retired or made a default.
 */
#include "core_internal.h"

static _Atomic(const struct cms_hook_ops *) hook_ops;

void cms_hook_ops_register(const struct cms_hook_ops *ops)
{
	atomic_store(&hook_ops, ops);
}

const struct cms_hook_ops *cms_hook_ops(void)
{
	return atomic_load(&hook_ops);
}

void cms_hook_retire(cms_context *ctx, uint64_t ptr)
{
	const struct cms_hook_ops *h = cms_hook_ops();

	if (h && h->retire)
		h->retire(ctx, ptr);
}

void cms_hook_unretire(uint64_t ptr)
{
	const struct cms_hook_ops *h = cms_hook_ops();

	if (h && h->unretire)
		h->unretire(ptr);
}

void cms_hook_default_drop_locked(cms_context *ctx, const struct cms_region *r)
{
	const struct cms_hook_ops *h = cms_hook_ops();

	if (h && h->region_gone_locked)
		h->region_gone_locked(ctx, r);
}

void cms_hook_forget_context(cms_context *ctx)
{
	const struct cms_hook_ops *h = cms_hook_ops();

	if (h && h->context_gone)
		h->context_gone(ctx);
}

void cms_hook_defaults_free(cms_context *ctx)
{
	const struct cms_hook_ops *h = cms_hook_ops();

	if (h && h->context_free)
		h->context_free(ctx);
}
