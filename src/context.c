/* SPDX-License-Identifier: MIT */
/* context.c - contexts, lazy driver loading, devices and their primary contexts. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

uint64_t cms_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

volatile unsigned cms_fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int atfork_status;

static void after_fork_in_child(void)
{
	cms_fork_generation++;
}

static void register_atfork(void)
{
	atfork_status = pthread_atfork(NULL, NULL, after_fork_in_child);
}

CMS_API cms_status cms_context_create(const cms_context_options *opts, cms_context **out)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx;
	cms_status st;

	if (!out)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "out is NULL");
	*out = NULL;
	if (opts) {
		st = cms_copy_in(&o, sizeof(o), CMS_CONTEXT_OPTIONS_SIZE_VER0, opts,
				 "cms_context_options");
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
	pthread_once(&atfork_once, register_atfork);
	if (atfork_status)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "pthread_atfork failed");
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a context");
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
	ctx->log_fn = o.log_fn;
	ctx->log_user = o.log_user;
	ctx->log_level = o.log_level;
	ctx->next_region_id = 1;
	ctx->fork_generation = cms_fork_generation;
	*out = ctx;
	return CMS_OK;

err_path:
	free(ctx->driver_path);
err_free:
	free(ctx);
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
	if (atomic_load(&ctx->ipc_objects))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "%d exporters, imports or control sockets of this context are "
				     "still open: destroy them first",
				     atomic_load(&ctx->ipc_objects));
	while (ctx->regions) {
		st = cms_region_destroy(ctx->regions);
		if (st)
			return st; /* the context stays usable; a retry continues */
	}
	cms_hook_forget_context(ctx); /* after its allocations are retired */
	for (i = 0; i < CMS_MAX_DEVICES; i++) {
		struct cms_device *d = &ctx->devices[i];

		if (!d->ready)
			continue;
		if (!cms_push(ctx, i)) {
			for (k = 0; k < CMS_COPY_STREAMS; k++) {
				ctx->drv.cuEventDestroy(d->events[k]);
				ctx->drv.cuStreamDestroy(d->streams[k]);
			}
			cms_pop(ctx);
		}
		ctx->drv.cuDevicePrimaryCtxRelease(d->cu);
	}
	if (ctx->drv.dl)
		cms_driver_close(&ctx->drv);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx->driver_path);
	free(ctx);
	return CMS_OK;
}

cms_status cms_ctx_driver_locked(cms_context *ctx)
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
		} else
			cms_log(ctx, CMS_LOG_INFO, "driver loaded (version %d%s)", ctx->drv.version,
				ctx->drv.is_sim ? ", host simulation" : "");
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

void cms_pop(cms_context *ctx)
{
	CUcontext c;
	CUresult res = ctx->drv.cuCtxPopCurrent(&c);

	if (res != CUDA_SUCCESS)
		cms_log(ctx, CMS_LOG_ERROR, "cuCtxPopCurrent failed: %s",
			cms_driver_error_name(&ctx->drv, res));
}

cms_status cms_switch_device(cms_context *ctx, int32_t *cur, int32_t dev)
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

void cms_switch_done(cms_context *ctx, int32_t *cur)
{
	if (*cur >= 0)
		cms_pop(ctx);
	*cur = -1;
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
