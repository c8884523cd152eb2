/* SPDX-License-Identifier: MIT */
/*
 * hookctx.c - the process-wide hook context and the ledger of retired pointers.
 *
 * The allocator hooks (adapters/hooks.c) route frees from any thread through
 * one context. A caller counts itself in flight in the current generation
 * before it loads the context; replacing the context starts a new generation
 * and waits only for the callers counted in the previous one (the only ones
 * that may have loaded the previous context): steady hooked traffic never
 * holds a replacement up, since new callers count in the new generation.
 * Allocations of that context released by a region or context destroy are
 * "retired": a later hooked free of one succeeds as a no-op, unless the
 * driver knows memory at that address again (another allocator, such as the
 * CUDA runtime, was handed the freed address): that free is not ours, and
 * swallowing it would leak the other allocator's memory. Both live here,
 * with the hooks; destroying a region or a context (api/), an allocation and
 * fork() update them through core's struct cms_hook_ops, which this file fills
 * and registers when the library loads (hook_ops, at the end). So do the default regions of the
 * hook context's devices (a region destroy drops its own), kept in a struct of the context made by
 * the first set (struct cms_hook_defaults), under the context's lock, and stamped with the
 * generation they were set in: a replacement of the hook context bumps the generation, which clears
 * them all at once (a default set by a call that entered before the bump is stale as soon as it is
 * written).
 */
#include <dlfcn.h>
#include <sched.h>
#include <search.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters.h"

static _Atomic(cms_context *) hook_ctx;
static atomic_uint hook_gen;	     /* generation: bumped by each replacement */
static atomic_uint hook_inflight[2]; /* callers in flight, by their generation's parity */
static pthread_mutex_t swap_lock = PTHREAD_MUTEX_INITIALIZER; /* one replacement at a time */

static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static void *retired;	       /* tsearch tree of uint64_t device pointers (heap nodes) */
static atomic_size_t nretired; /* entries in it; read without the lock */
/* The driver the retired allocations came from: its file (dladdr) and the entry point it was
 * found from, under retired_lock. */
static char retired_driver[4096];
static void *retired_driver_fn;

/* The default region of each device for hooked allocations (since 1.2), valid only in hook
 * generation region_gen[d], and the template a device's default region is made from when it
 * has none (cms_hook_region_default_template_set; since 1.2): tag "" = none, valid only in
 * hook generation template_gen. The api's part of the context holds them (hook_defaults),
 * under ctx->lock; made by the first set (zeroed: none in generation 0, like the zeroed
 * context before it), freed with the context. */
struct cms_hook_defaults {
	struct cms_region *region[CMS_MAX_DEVICES];
	unsigned region_gen[CMS_MAX_DEVICES];
	char template_tag[CMS_TAG_MAX + 1];
	cms_region_options template_opts;
	char template_dir[PATH_MAX]; /* a DISK template's directory, absolute; "" = none */
	unsigned template_gen;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

cms_context *cms_hookctx_enter(unsigned *ticket)
{
	unsigned g;

	/* Counted in generation g only if g is still current after counting: a replacement
	 * that bumped it meanwhile may already have seen no caller of g (sequentially
	 * consistent atomics: either it sees this count or this sees its bump). */
	for (;;) {
		g = atomic_load(&hook_gen);
		atomic_fetch_add(&hook_inflight[g & 1], 1);
		if (atomic_load(&hook_gen) == g)
			break;
		atomic_fetch_sub(&hook_inflight[g & 1], 1);
	}
	*ticket = g;		       /* its parity names the counter */
	return atomic_load(&hook_ctx); /* stored before the generation it is counted in began */
}

void cms_hookctx_leave(unsigned ticket)
{
	atomic_fetch_sub(&hook_inflight[ticket & 1], 1);
}

static void hook_ops_register(void);

bool cms_hookctx_swap(cms_context *old, cms_context *new, bool cas)
{
	unsigned g;

	if (new) /* hook state begins with a hook context: the table is in place first */
		hook_ops_register();
	pthread_mutex_lock(&swap_lock);
	if (cas) {
		if (!atomic_compare_exchange_strong(&hook_ctx, &old, new)) {
			pthread_mutex_unlock(&swap_lock);
			return false;
		}
	} else {
		atomic_store(&hook_ctx, new);
	}
	/* Callers of the generations before g finished while earlier replacements (serialised
	 * by swap_lock) waited: only those of g may still hold the old context. */
	g = atomic_fetch_add(&hook_gen, 1);
	while (atomic_load(&hook_inflight[g & 1]))
		sched_yield();
	pthread_mutex_unlock(&swap_lock);
	return true;
}

/* retired_lock is a leaf lock held briefly: fork() waits for it, and the child gets the ledger
 * whole. swap_lock is held while a replacement waits for hooked calls (a device wait each):
 * fork() does not wait for it, and the child, which has no replacement, initialises it again. */
static void hookctx_before_fork(void)
{
	pthread_mutex_lock(&retired_lock);
}

static void hookctx_after_fork_parent(void)
{
	pthread_mutex_unlock(&retired_lock);
}

static void hookctx_after_fork(void)
{
	/* Only the forking thread exists in the child: no caller is in flight, and no
	 * replacement holds swap_lock (a parent thread in one may have, at the fork). */
	atomic_store(&hook_inflight[0], 0);
	atomic_store(&hook_inflight[1], 0);
	pthread_mutex_init(&swap_lock, NULL);
	pthread_mutex_unlock(&retired_lock); /* taken by this thread before the fork */
}

/* Forgets ptr if it is retired; returns whether it was. */
static bool unretire_found(uint64_t ptr)
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

/* Whether the driver the retired allocations came from knows memory at ptr now
 * (cuPointerGetAttribute). A driver no longer loaded in the process knows none. */
static bool driver_has_memory_at(uint64_t ptr)
{
	char path[sizeof(retired_driver)];
	CUresult (*fn)(void *, int, CUdeviceptr);
	CUdeviceptr start = 0;
	bool found;
	void *dl;

	pthread_mutex_lock(&retired_lock);
	memcpy(path, retired_driver, sizeof(path));
	pthread_mutex_unlock(&retired_lock);
	if (!path[0])
		return false;
	dl = dlopen(path, RTLD_LAZY | RTLD_NOLOAD); /* holds it loaded during the call */
	if (!dl)
		return false;
	fn = (CUresult(*)(void *, int, CUdeviceptr))(uintptr_t)dlsym(dl, "cuPointerGetAttribute");
	found = fn && fn(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr) == CUDA_SUCCESS;
	dlclose(dl);
	return found;
}

bool cms_hook_retired_free(uint64_t ptr)
{
	if (!unretire_found(ptr))
		return false;
	return !driver_has_memory_at(ptr);
}

/* The file that holds fn, or NULL when dladdr cannot tell or the name does not fit; called
 * without retired_lock (dladdr takes the loader's lock). */
static const char *driver_file(void *fn)
{
	Dl_info info;

	if (!fn || !dladdr(fn, &info) || !info.dli_fname ||
	    strlen(info.dli_fname) >= sizeof(retired_driver))
		return NULL;
	return info.dli_fname;
}

/* Records file, that of the driver's fn, for driver_has_memory_at; retired_lock held. */
static void note_driver_locked(void *fn, const char *file)
{
	if (fn == retired_driver_fn)
		return;
	if (!file) {
		retired_driver[0] = 0; /* cannot ask: retired frees are swallowed as before */
		retired_driver_fn = NULL;
		return;
	}
	memcpy(retired_driver, file, strlen(file) + 1);
	retired_driver_fn = fn;
}

static void hook_retire(cms_context *ctx, uint64_t ptr)
{
	void *fn = (void *)(uintptr_t)ctx->drv.cuPointerGetAttribute;
	uint64_t *key, **node;
	const char *file;
	bool added;

	if (atomic_load(&hook_ctx) != ctx)
		return;
	file = driver_file(fn);
	key = malloc(sizeof(*key));
	if (!key)
		return; /* a later free of ptr is then "not ours": what it was before 1.1 */
	*key = ptr;
	pthread_mutex_lock(&retired_lock);
	note_driver_locked(fn, file);
	node = tsearch(key, &retired, cmp_u64);
	added = node && *node == key; /* the node only under the lock: a free may delete it */
	if (added)
		atomic_fetch_add(&nretired, 1);
	pthread_mutex_unlock(&retired_lock);
	if (!added)
		free(key); /* no memory for the node, or already there */
}

static void hook_unretire(uint64_t ptr)
{
	if (atomic_load(&nretired))
		unretire_found(ptr);
}

static void hook_forget_context(cms_context *ctx)
{
	cms_hookctx_swap(ctx, NULL, true);
}

cms_context *cms_hookctx_peek(void)
{
	return atomic_load(&hook_ctx);
}

/* Makes ctx's hook defaults if there are none; ctx->lock held. NULL when there is no memory
 * for it (the caller sets the error, without the lock). */
static struct cms_hook_defaults *defaults_make_locked(cms_context *ctx)
{
	struct cms_hook_defaults **hd = &cms_ctx_api(ctx)->hook_defaults;

	if (!*hd)
		*hd = calloc(1, sizeof(**hd));
	return *hd;
}

static cms_status defaults_oom(void)
{
	return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
			     "cannot allocate the hook context's default regions");
}

cms_status cms_hook_default_set(cms_context *ctx, unsigned ticket, int32_t dev,
				struct cms_region *r)
{
	struct cms_region *it = NULL;
	struct cms_hook_defaults *hd;

	pthread_mutex_lock(&ctx->lock);
	if (r)
		for (it = ctx->regions; it && it != r; it = it->next)
			;
	if (r && (!it || it->dead || it->device != dev)) {
		pthread_mutex_unlock(&ctx->lock);
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "the region is not a live region of the hook context (it "
				     "belongs to another context or was destroyed) on device %d",
				     (int)dev);
	}
	hd = r ? defaults_make_locked(ctx) :
		 cms_ctx_api(ctx)->hook_defaults; /* none: no default to clear */
	if (hd) {
		hd->region[dev] = r;
		hd->region_gen[dev] = ticket;
	}
	pthread_mutex_unlock(&ctx->lock);
	return r && !hd ? defaults_oom() : CMS_OK;
}

struct cms_region *cms_hook_default_get(cms_context *ctx, unsigned ticket, int32_t dev, bool ref)
{
	struct cms_hook_defaults *hd;
	struct cms_region *r = NULL;

	pthread_mutex_lock(&ctx->lock);
	hd = cms_ctx_api(ctx)->hook_defaults;
	if (hd && hd->region_gen[dev] == ticket)
		r = hd->region[dev];
	if (r && ref)
		r->refs++;
	pthread_mutex_unlock(&ctx->lock);
	return r;
}

cms_status cms_hook_template_set(cms_context *ctx, unsigned ticket, const char *tag,
				 const cms_region_options *opts, const char *dir)
{
	struct cms_hook_defaults *hd;

	pthread_mutex_lock(&ctx->lock);
	hd = tag ? defaults_make_locked(ctx) :
		   cms_ctx_api(ctx)->hook_defaults; /* none: nothing to clear */
	if (hd) {
		hd->template_tag[0] = '\0';
		hd->template_dir[0] = '\0';
		if (tag) {
			snprintf(hd->template_tag, sizeof(hd->template_tag), "%s", tag);
			hd->template_opts = *opts;
			if (dir)
				snprintf(hd->template_dir, sizeof(hd->template_dir), "%s", dir);
		}
		hd->template_gen = ticket;
	}
	pthread_mutex_unlock(&ctx->lock);
	return tag && !hd ? defaults_oom() : CMS_OK;
}

bool cms_hook_template_get(cms_context *ctx, unsigned ticket, char tag[CMS_TAG_MAX + 1],
			   cms_region_options *opts, char dir[PATH_MAX])
{
	struct cms_hook_defaults *hd;
	bool set;

	pthread_mutex_lock(&ctx->lock);
	hd = cms_ctx_api(ctx)->hook_defaults;
	set = hd && hd->template_gen == ticket && hd->template_tag[0];
	if (set) {
		memcpy(tag, hd->template_tag, CMS_TAG_MAX + 1);
		*opts = hd->template_opts;
		memcpy(dir, hd->template_dir, PATH_MAX);
	}
	pthread_mutex_unlock(&ctx->lock);
	return set;
}

static void hook_default_drop_locked(cms_context *ctx, const struct cms_region *r)
{
	struct cms_hook_defaults *hd = cms_ctx_api(ctx)->hook_defaults;
	int32_t d;

	for (d = 0; hd && d < CMS_MAX_DEVICES; d++)
		if (hd->region[d] == r)
			hd->region[d] = NULL;
}

static void hook_defaults_free(cms_context *ctx)
{
	free(cms_ctx_api(ctx)->hook_defaults);
	cms_ctx_api(ctx)->hook_defaults = NULL;
}

/* What the layers below need of this file (core.h: struct cms_hook_ops). */
static const struct cms_hook_ops hook_ops = {
	.before_fork = hookctx_before_fork,
	.after_fork_parent = hookctx_after_fork_parent,
	.after_fork_child = hookctx_after_fork,
	.retire = hook_retire,
	.unretire = hook_unretire,
	.region_gone_locked = hook_default_drop_locked,
	.context_gone = hook_forget_context,
	.context_free = hook_defaults_free,
};

/* Registered when the library is loaded and again by every cms_hook_context_set: in a static
 * link a program's own constructor may run before this file's, and it must not set a hook
 * context the context's destroy cannot reach. A library linked statically without this file
 * (no hooks used) registers none, and retires nothing. */
__attribute__((constructor)) static void hook_ops_register(void)
{
	cms_hook_ops_register(&hook_ops);
}
