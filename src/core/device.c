/* SPDX-License-Identifier: MIT */
/* device.c - lazy driver loading, devices, their primary contexts and library streams. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core_internal.h"

uint64_t cms_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

volatile unsigned cms_fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int atfork_status;
/* The hook table seen before a fork, whose handlers the after-fork ones pair with: per
 * thread, two threads may fork at once (the child is the forking thread). */
static _Thread_local const struct cms_hook_ops *fork_ops;

static void before_fork(void)
{
	fork_ops = cms_hook_ops();
	if (fork_ops && fork_ops->before_fork)
		fork_ops->before_fork();
}

static void after_fork_in_parent(void)
{
	if (fork_ops && fork_ops->after_fork_parent)
		fork_ops->after_fork_parent();
}

static void after_fork_in_child(void)
{
	cms_fork_generation++;
	if (fork_ops && fork_ops->after_fork_child)
		fork_ops->after_fork_child();
}

/* The process-wide locks (the hook adapter's, through struct cms_hook_ops): every other lock
 * belongs to a context, which a child does not use (CMS_ERR_FORKED before any lock is taken). */
static void register_atfork(void)
{
	atfork_status = pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

cms_status cms_fork_watch(void)
{
	pthread_once(&atfork_once, register_atfork);
	if (atfork_status)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "pthread_atfork failed");
	return CMS_OK;
}

/* Loads the driver on first use; ctx->lock must be held. */
static cms_status cms_ctx_driver_locked(cms_context *ctx)
{
	if (!ctx->drv_tried) {
		ctx->drv_tried = true;
		ctx->drv_status = cms_driver_open(&ctx->drv, ctx->driver_path, ctx->drv_error,
						  sizeof(ctx->drv_error));
		if (ctx->drv_status) {
			/* Not sticky: a later call tries again (a driver may appear, a fault pass).
			 */
			ctx->drv_tried = false;
			cms_log(ctx, CMS_LOG_WARN, "%s", ctx->drv_error);
		} else {
			if (ctx->ops && ctx->ops->driver_loaded)
				ctx->ops->driver_loaded(ctx); /* the tunables (engine/tunables.c) */
			cms_log(ctx, CMS_LOG_INFO, "driver loaded (version %d%s)", ctx->drv.version,
				ctx->drv.is_sim ? ", host simulation" : "");
		}
	}
	if (ctx->drv_status)
		return cms_set_error(ctx->drv_status, "%s", ctx->drv_error);
	return CMS_OK;
}

static cms_status device_init_locked(cms_context *ctx, int32_t ordinal, struct cms_device *d)
{
	CUmemAllocationProp prop;
	int count = 0, vmm = 0, gdr = 0, i;
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuDeviceGetCount(&count), st, out);
	if (ordinal >= count)
		return cms_set_error(CMS_ERR_INVALID_DEVICE,
				     "device %d does not exist (%d devices)", ordinal, count);
	CU_TRY(ctx, cuDeviceGet(&d->cu, ordinal), st, out);
	CU_TRY(ctx,
	       cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
				    d->cu),
	       st, out);
	if (!vmm)
		return cms_set_error(CMS_ERR_NOT_SUPPORTED,
				     "device %d does not support virtual memory management",
				     ordinal);
	CU_TRY(ctx,
	       cuDeviceGetAttribute(
		       &gdr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, d->cu),
	       st, out);
	d->gdr = gdr != 0;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = ordinal;
	prop.allocFlags.gpuDirectRDMACapable = d->gdr;
	CU_TRY(ctx,
	       cuMemGetAllocationGranularity(&d->granularity, &prop,
					     CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	       st, out);
	if (!d->granularity || (d->granularity & (d->granularity - 1)))
		return cms_set_error(CMS_ERR_DRIVER, "device %d reports granularity %zu", ordinal,
				     d->granularity);
	CU_TRY(ctx, cuDevicePrimaryCtxRetain(&d->primary, d->cu), st, out);
	CU_TRY(ctx, cuCtxPushCurrent(d->primary), st, err_release);
	for (i = 0; i < CMS_COPY_STREAMS; i++)
		CU_TRY(ctx, cuStreamCreate(&d->streams[i], CU_STREAM_NON_BLOCKING), st,
		       err_streams);
	for (i = 0; i < CMS_COPY_STREAMS; i++)
		CU_TRY(ctx, cuEventCreate(&d->events[i], CU_EVENT_DISABLE_TIMING), st, err_events);
	cms_pop(ctx);
	d->ready = true;
	if (ctx->ops && ctx->ops->device_ready)
		ctx->ops->device_ready(ctx, ordinal, d->granularity);
	cms_log(ctx, CMS_LOG_INFO, "device %d: granularity %zu, GPUDirect RDMA flag %d", ordinal,
		d->granularity, d->gdr);
	return CMS_OK;

err_events:
	while (i-- > 0)
		ctx->drv.cuEventDestroy(d->events[i]);
	i = CMS_COPY_STREAMS;
err_streams:
	while (i-- > 0)
		ctx->drv.cuStreamDestroy(d->streams[i]);
	cms_pop(ctx);
err_release:
	ctx->drv.cuDevicePrimaryCtxRelease(d->cu);
out:
	return st;
}

cms_status cms_ctx_device(cms_context *ctx, int32_t device, struct cms_device **out)
{
	cms_status st;

	st = cms_check_fork(ctx);
	if (st)
		return st;
	if (device < 0 || device >= CMS_MAX_DEVICES)
		return cms_set_error(CMS_ERR_INVALID_DEVICE, "device %d is out of range", device);
	pthread_mutex_lock(&ctx->lock);
	st = cms_ctx_driver_locked(ctx);
	if (!st && !ctx->devices[device].ready)
		st = device_init_locked(ctx, device, &ctx->devices[device]);
	pthread_mutex_unlock(&ctx->lock);
	if (!st && out)
		*out = &ctx->devices[device];
	return st;
}

cms_status cms_push(cms_context *ctx, int32_t device)
{
	cms_status st = CMS_OK;

	CU_TRY(ctx, cuCtxPushCurrent(ctx->devices[device].primary), st, out);
out:
	return st;
}

/* A failed driver call changes nothing: after a failed cuCtxPopCurrent the context pushed is
 * still current on this thread. Left there, every failed pop would grow the thread's context
 * stack until the driver refuses pushes, so the pop is tried again. */
#define CMS_POP_TRIES 3

void cms_pop(cms_context *ctx)
{
	CUresult res = CUDA_ERROR_UNKNOWN;
	CUcontext c;
	int i;

	for (i = 0; i < CMS_POP_TRIES && res != CUDA_SUCCESS; i++) {
		res = ctx->drv.cuCtxPopCurrent(&c);
		if (res != CUDA_SUCCESS)
			cms_log(ctx, CMS_LOG_ERROR, "cuCtxPopCurrent failed: %s%s",
				cms_driver_error_name(&ctx->drv, res),
				i + 1 < CMS_POP_TRIES ?
					"; trying again" :
					"; the context stays current on this thread");
	}
}

/* Pops what cms_switch_device pushed. */
static void cms_switch_done(cms_context *ctx, int32_t *cur)
{
	if (*cur >= 0)
		cms_pop(ctx);
	*cur = -1;
}

/* Makes device dev's primary context current (popping the one of *cur if any). */
static cms_status cms_switch_device(cms_context *ctx, int32_t *cur, int32_t dev)
{
	cms_status st;

	if (*cur == dev)
		return CMS_OK;
	cms_switch_done(ctx, cur);
	st = cms_push(ctx, dev);
	if (!st)
		*cur = dev;
	return st;
}

cms_status cms_sync_streams(cms_context *ctx, const int32_t *devs, size_t nd)
{
	size_t k;

	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i;

	for (i = 0; i < nd && !st; i++) {
		st = cms_switch_device(ctx, &cur, devs[i]);
		for (k = 0; k < CMS_COPY_STREAMS && !st; k++)
			CU_TRY(ctx, cuStreamSynchronize(ctx->devices[devs[i]].streams[k]), st, out);
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}
