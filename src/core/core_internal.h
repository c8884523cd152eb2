/* SPDX-License-Identifier: MIT */
/*
 * core_internal.h - declarations shared by the files of src/core/ only
 * (tests/check_layers.py fails any file above core that opens it). core.h
 * declares what the layers above use.
 */
#ifndef CMS_CORE_INTERNAL_H
#define CMS_CORE_INTERNAL_H

#include "core.h"

/* A log line queued by a worker thread (cms_log_defer). */
struct cms_logline {
	int32_t level;
	uint64_t realtime_ns; /* when it was logged (CLOCK_REALTIME) */
	int32_t tid;	      /* the thread that logged it */
	char text[512];
};

/* Loads the driver on first use; ctx->lock must be held. */
cms_status cms_ctx_driver_locked(cms_context *ctx);

/* Makes device dev's primary context current (popping the one of *cur if any). */
cms_status cms_switch_device(cms_context *ctx, int32_t *cur, int32_t dev);

/* Pops what cms_switch_device pushed. */
void cms_switch_done(cms_context *ctx, int32_t *cur);

/* Whether the library was built with NVTX. */
bool cms_trace_enabled(void);

/* bytes more are done (NULL p or 0 bytes: nothing); calls the callback with done < total. */
void cms_progress_add(struct cms_progress *p, uint64_t bytes);

/* The registered hook table (hookops.c), or NULL. */
const struct cms_hook_ops *cms_hook_ops(void);

#endif /* CMS_CORE_INTERNAL_H */
