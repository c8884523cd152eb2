/* SPDX-License-Identifier: MIT */
/* context.c - cms_context_create / cms_context_destroy, fork detection, device memory info. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* What core calls up for (core.h: struct cms_context_ops). */
static const struct cms_context_ops context_ops = {
	.driver_loaded = cms_tunables_load,
	.device_ready = cms_tunables_check_device,
};

CMS_API cms_status cms_context_create(const cms_context_options *opts, cms_context **out)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	struct cms_api_context *whole;
	cms_context *ctx;
	cms_status st;

	if (!out)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "out is NULL");
	*out = NULL;
	if (opts) {
		st = CMS_COPY_IN(&o, opts, cms_context_options);
		if (st)
			return st;
	}
	if (o.flags)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "cms_context_options.flags: unknown bits 0x%x", o.flags);
	if (o.log_level < CMS_LOG_ERROR || o.log_level > CMS_LOG_DEBUG)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "cms_context_options.log_level %d is not a CMS_LOG_* level",
				     o.log_level);
	st = cms_fork_watch();
	if (st)
		return st;
	cms_trace_init();
	whole = calloc(1, sizeof(*whole)); /* every layer's part (api.h), core's first */
	if (!whole)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a context");
	ctx = &whole->below.below.below.below.core;
	ctx->ops = &context_ops;
	if (o.driver_path) {
		ctx->driver_path = strdup(o.driver_path);
		if (!ctx->driver_path) {
			st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot copy driver_path");
			goto err_free;
		}
	}
	if (pthread_mutex_init(&ctx->lock, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
		goto err_path;
	}
	if (pthread_mutex_init(&ctx->cleanup_lock, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
		goto err_lock;
	}
	ctx->log_fn = o.log_fn;
	ctx->log_user = o.log_user;
	ctx->log_level = o.log_level;
	ctx->next_region_id = 1;
	ctx->fork_generation = cms_fork_generation;
	*out = ctx;
	return CMS_OK;

err_lock:
	pthread_mutex_destroy(&ctx->lock);
err_path:
	free(ctx->driver_path);
err_free:
	free(whole);
	return st;
}

CMS_API cms_status cms_context_destroy(cms_context *ctx)
{
	cms_status st;
	int i, k;

	if (!ctx)
		return CMS_OK;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	if (atomic_load(&cms_ctx_ipc(ctx)->objects))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "%d exporters, imports or control sockets of this context are "
				     "still open: destroy them first",
				     atomic_load(&cms_ctx_ipc(ctx)->objects));
	cms_engine_context_end(ctx); /* CMS_REGION_PREPARE's thread; a later cms_alloc starts
				      * it again if a destroy fails */
	while (ctx->regions) {
		st = cms_region_destroy(ctx->regions);
		if (st)
			return st; /* the context stays usable; a retry continues */
	}
	cms_hook_forget_context(ctx); /* after its allocations are retired */
	/* Each device's streams and events, every step done once (a retry skips it). */
	for (i = 0; i < CMS_MAX_DEVICES; i++) {
		struct cms_device *d = &ctx->devices[i];

		if (!d->ready)
			continue;
		if (cms_push(ctx, i)) { /* nothing can be done without it: logged, leaked */
			cms_log(ctx, CMS_LOG_ERROR, "device %d: streams and events leaked: %s", i,
				cms_last_error());
			continue;
		}
		cms_vmm_guard_drop(ctx, i); /* every region, so every guard, is gone */
		cms_checksum_drop(ctx, i);  /* CMS_REGION_VERIFY's kernel and scratch */
		for (k = 0; k < CMS_COPY_STREAMS; k++) {
			if (d->events[k])
				cms_cleanup_event(ctx, i, d->events[k]); /* kept if it fails */
			if (d->streams[k])
				ctx->drv.cuStreamDestroy(d->streams[k]);
			d->events[k] = NULL;
			d->streams[k] = NULL;
		}
		cms_pop(ctx);
	}
	/* Cleanups that failed, a last time before the primary contexts they need go; what fails
	 * again is leaked (logged): the context goes in every case. */
	if (cms_cleanup_retry(ctx))
		cms_cleanup_abandon(ctx);
	for (i = 0; i < CMS_MAX_DEVICES; i++) {
		struct cms_device *d = &ctx->devices[i];

		if (d->ready)
			ctx->drv.cuDevicePrimaryCtxRelease(d->cu);
		d->ready = false;
	}
	if (ctx->drv.dl)
		cms_driver_close(&ctx->drv);
	pthread_mutex_destroy(&ctx->cleanup_lock);
	pthread_mutex_destroy(&ctx->lock);
	cms_hook_defaults_free(ctx); /* no hooked call uses ctx since cms_hook_forget_context */
	free(ctx->driver_path);
	free(cms_ctx_api(ctx));
	return CMS_OK;
}

CMS_API cms_status cms_device_memory_info(cms_context *ctx, int32_t device, uint64_t *free_bytes,
					  uint64_t *total_bytes)
{
	size_t f = 0, t = 0;
	cms_status st;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	st = cms_ctx_device(ctx, device, NULL);
	if (st)
		return st;
	st = cms_push(ctx, device);
	if (st)
		return st;
	CU_TRY(ctx, cuMemGetInfo(&f, &t), st, out_pop);
	if (free_bytes)
		*free_bytes = f;
	if (total_bytes)
		*total_bytes = t;
out_pop:
	cms_pop(ctx);
	return st;
}
