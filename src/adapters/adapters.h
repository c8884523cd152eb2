/* SPDX-License-Identifier: MIT */
/*
 * adapters.h - clients of the API inside the library: PyTorch's allocator
 * hooks (hooks.c) and the control socket (control.c). The LD_PRELOAD
 * interposer (preload.c) is a library of its own over the public header.
 */
#ifndef CMS_ADAPTERS_H
#define CMS_ADAPTERS_H

#include "api.h"

/* ---- hookctx.c: the process-wide hook context, retired pointers, default regions ---- */
/* Loads the hook context for a caller that will use it, counting the caller in flight in the
 * current generation (*ticket: that generation); pair with cms_hookctx_leave(*ticket). */
cms_context *cms_hookctx_enter(unsigned *ticket);
void cms_hookctx_leave(unsigned ticket);
/* The hook context now (not to be used past the call: see enter/leave). */
cms_context *cms_hookctx_peek(void);
/* Replaces the hook context (only if it is old when cas) and waits until no caller that may
 * still hold the old one (one that entered before the replacement) is in flight. */
bool cms_hookctx_swap(cms_context *old, cms_context *new, bool cas);
/* Forgets ptr if it is retired; returns whether a hooked free of it is to be swallowed: it was
 * retired and the driver knows no memory at that address now (else another allocator was
 * handed the address again, and the free is that allocator's). */
bool cms_hook_retired_free(uint64_t ptr);
/*
 * Default regions of the hook context (cms_hook_region_default_set): ctx is the hook context
 * a caller entered in generation ticket (cms_hookctx_enter). A default set in an earlier
 * generation is none: replacing the hook context clears every default. Each takes ctx->lock.
 * cms_ctx_api(ctx)->hook_defaults is made by the first set of a default or template (a clear
 * makes none). What a region or context destroy, an allocation and fork() need of this file
 * they reach through core's struct cms_hook_ops, which it registers when the library loads.
 */
/* Makes r (NULL: none) device dev's default; CMS_ERR_INVALID_ARGUMENT if r is not a live
 * region of ctx on dev, CMS_ERR_OUT_OF_HOST_MEMORY if the defaults cannot be made. */
cms_status cms_hook_default_set(cms_context *ctx, unsigned ticket, int32_t dev,
				struct cms_region *r);
/* Device dev's default region, or NULL; with ref, referenced (cms_region_unref_locked). */
struct cms_region *cms_hook_default_get(cms_context *ctx, unsigned ticket, int32_t dev, bool ref);
/* Sets (tag non-NULL) or clears the default-region template of generation ticket; dir: its
 * regions' disk directory (absolute, shorter than PATH_MAX), or NULL.
 * CMS_ERR_OUT_OF_HOST_MEMORY if the defaults cannot be made. */
cms_status cms_hook_template_set(cms_context *ctx, unsigned ticket, const char *tag,
				 const cms_region_options *opts, const char *dir);
/* Copies the template of generation ticket into tag, *opts and dir ("" = none); false when
 * there is none. */
bool cms_hook_template_get(cms_context *ctx, unsigned ticket, char tag[CMS_TAG_MAX + 1],
			   cms_region_options *opts, char dir[PATH_MAX]);

#endif /* CMS_ADAPTERS_H */
