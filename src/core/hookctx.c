/* SPDX-License-Identifier: MIT */
/*
 * hookctx.c - the process-wide hook context and the ledger of retired pointers.
 *
 * The allocator hooks (adapters/hooks.c) route frees from any thread through
 * one context; callers count themselves in flight while they use it, and
 * replacing it waits until none is left. Allocations of that context released
 * by a region or context destroy are "retired": a later hooked free of one
 * succeeds as a no-op. Both live here, below the API, because destroying a
 * region or a context (api/) must update them.
 */
#include <sched.h>
#include <search.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core.h"

static _Atomic(cms_context *) hook_ctx;
static atomic_uint hook_inflight;

static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static void *retired;	       /* tsearch tree of uint64_t device pointers (heap nodes) */
static atomic_size_t nretired; /* entries in it; read without the lock */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Loads the hook context for a caller that will use it; pair with hook_leave. */
cms_context *cms_hookctx_enter(void)
{
	atomic_fetch_add(&hook_inflight, 1);
	return atomic_load(&hook_ctx);
}

void cms_hookctx_leave(void)
{
	atomic_fetch_sub(&hook_inflight, 1);
}

/* Replaces the hook context (if it is old, for a compare-and-swap) and waits until no
 * caller that may still hold the old one is in flight. */
bool cms_hookctx_swap(cms_context *old, cms_context *new, bool cas)
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

/* Forgets ptr if it is retired; returns whether it was. */
bool cms_hook_unretire_found(uint64_t ptr)
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
		cms_hook_unretire_found(ptr);
}

void cms_hook_forget_context(cms_context *ctx)
{
	cms_hookctx_swap(ctx, NULL, true);
}

cms_context *cms_hookctx_peek(void)
{
	return atomic_load(&hook_ctx);
}
