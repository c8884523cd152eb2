/* SPDX-License-Identifier: MIT */
/*
 * api.h - the public entry points for contexts, regions, allocations and
 * pause/resume/swap: argument checks, option copy-in, tag selection and
 * locking; below them the engine (engine/) and sharing (ipc/).
 */
#ifndef CMS_API_H
#define CMS_API_H

#include "ipc.h"

/*
 * The objects this layer makes whole (core.h says how the parts compose): an allocation, a
 * region and a context are allocated as the part of the highest layer that keeps state of them,
 * whose address is that of the core part (each part is the first member of the one above).
 */
struct cms_api_alloc {
	struct cms_engine_alloc below;
};
struct cms_api_region {
	struct cms_ipc_region below;
};
struct cms_hook_defaults; /* private to adapters/hookctx.c */
struct cms_api_context {
	struct cms_ipc_context below;
	/* Default regions and default-region template of the hook context (adapters/hookctx.c;
	 * since 1.2), made by the first set: NULL = none; under ctx->lock; freed at destroy
	 * through core's struct cms_hook_ops. */
	struct cms_hook_defaults *hook_defaults;
};

static inline struct cms_api_context *cms_ctx_api(const cms_context *ctx)
{
	return cms_container_of(cms_ctx_ipc(ctx), struct cms_api_context, below);
}

/* ---- select.c ---- */
/* The regions of a call, referenced and locked. */
struct cms_selection {
	cms_context *ctx;
	struct cms_region **v; /* n regions, creation order; room for 2 * n */
	size_t n;
	size_t n1; /* of them tagged tag1 */
};
/*
 * References and locks (creation order) the regions tagged tag1 or tag2 (either may be NULL;
 * both NULL: every region). An empty selection (n == 0) is not an error here.
 */
/*
 * The allocation of ctx containing ptr (any address inside it), with its region referenced
 * and locked (cms_alloc_unlock undoes both); CMS_ERR_NOT_FOUND (message prefixed with what)
 * if there is none. Found again once the region is locked: a free or destroy that finished
 * meanwhile took it out of the index, and none can start while the lock is held.
 */
cms_status cms_alloc_lock(cms_context *ctx, uint64_t ptr, const char *what, struct cms_alloc **out);
void cms_alloc_unlock(cms_context *ctx, struct cms_alloc *a);
/* Waits until the device of the allocation holding ptr is idle (cuCtxSynchronize in its
 * primary context); CMS_ERR_NOT_FOUND, with no message set, when ptr is in none;
 * CMS_ERR_FORKED (no driver call, no lock) in a child forked after ctx was created. */
cms_status cms_alloc_device_sync(cms_context *ctx, uint64_t ptr);
/* opts (NULL: the defaults) copied into *out and checked as cms_region_create checks them:
 * struct size, policy, flags. */
cms_status cms_region_options_check(const cms_region_options *opts, cms_region_options *out);
/* cms_region_create, with dir (non-NULL: a CMS_POLICY_DISK region's directory, checked by
 * the caller) set before the region joins the context's list, so that no other thread sees
 * it without one; a directory that cannot take the region's file fails the creation. */
cms_status cms_region_create_dir(cms_context *ctx, const char *tag, const cms_region_options *opts,
				 const char *dir, cms_region **out);
cms_status cms_select_lock(cms_context *ctx, const char *tag1, const char *tag2,
			   struct cms_selection *s);
/* Unlocks and unreferences what cms_select_lock took. */
void cms_select_unlock(struct cms_selection *s);
/*
 * Writes a pause/resume result to the caller: on success; on failure only when the engine
 * ran (devices != 0) and the caller's struct_size covers the 1.1 fields (ver0 is the 1.0
 * size), so that a 1.0 caller sees no change.
 */
void cms_result_out(void *theirs, const void *ours, size_t ours_size, size_t ver0, uint32_t devices,
		    cms_status st);

#endif /* CMS_API_H */
