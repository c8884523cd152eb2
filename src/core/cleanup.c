/* SPDX-License-Identifier: MIT */
/*
 * cleanup.c - driver cleanups that failed (a page-locked DISK staging area
 * still registered, an event not destroyed, a temporary mapping or
 * reservation not removed) are kept on the context's list
 * and tried again at the start of its next pause, resume or swap and at its
 * destroy, instead of being leaked for the life of the process. Each kind of
 * cleanup is an operations table.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "core.h"

struct cms_cleanup_ops {
	const char *call; /* the driver call, for messages */
	CUresult (*run)(cms_context *ctx, struct cms_cleanup *c);
	void (*done)(cms_context *ctx, struct cms_cleanup *c); /* after run succeeded */
};

struct cms_cleanup {
	const struct cms_cleanup_ops *ops;
	int32_t dev;
	void *p; /* the event, or the staging area */
	size_t len;
	bool hooked;  /* staging: counted by the driver's host allocation hook */
	bool mapped;  /* range: still mapped (unmapped before its reservation is freed) */
	uint64_t own; /* range: bytes of the device's own_bytes that its unmap gives back */
	struct cms_cleanup *next;
};

static CUresult event_run(cms_context *ctx, struct cms_cleanup *c)
{
	return ctx->drv.cuEventDestroy((CUevent)c->p);
}

static const struct cms_cleanup_ops event_ops = { .call = "cuEventDestroy", .run = event_run };

static CUresult staging_run(cms_context *ctx, struct cms_cleanup *c)
{
	return ctx->drv.cuMemHostUnregister(c->p);
}

static void staging_done(cms_context *ctx, struct cms_cleanup *c)
{
	munmap(c->p, c->len);
	if (c->hooked)
		ctx->drv.host_free_hook(c->len);
}

static const struct cms_cleanup_ops staging_ops = { .call = "cuMemHostUnregister",
						    .run = staging_run,
						    .done = staging_done };

static CUresult range_run(cms_context *ctx, struct cms_cleanup *c)
{
	CUdeviceptr va = (CUdeviceptr)(uintptr_t)c->p;
	CUresult res;

	if (c->mapped) {
		res = ctx->drv.cuMemUnmap(va, c->len);
		if (res != CUDA_SUCCESS)
			return res;
		c->mapped = false; /* kept so: a retry only frees the reservation */
		atomic_fetch_sub(&ctx->devices[c->dev].own_bytes, c->own);
		c->own = 0;
	}
	return ctx->drv.cuMemAddressFree(va, c->len);
}

static const struct cms_cleanup_ops range_ops = { .call = "cuMemUnmap/cuMemAddressFree",
						  .run = range_run };

/* Runs c with its device's primary context pushed; CUDA_SUCCESS once done. */
static CUresult attempt(cms_context *ctx, struct cms_cleanup *c)
{
	CUresult res = ctx->drv.cuCtxPushCurrent(ctx->devices[c->dev].primary);

	if (res != CUDA_SUCCESS)
		return res;
	res = c->ops->run(ctx, c);
	cms_pop(ctx);
	if (res == CUDA_SUCCESS && c->ops->done)
		c->ops->done(ctx, c);
	return res;
}

static void keep(cms_context *ctx, struct cms_cleanup *c)
{
	pthread_mutex_lock(&ctx->cleanup_lock);
	c->next = ctx->cleanups;
	ctx->cleanups = c;
	pthread_mutex_unlock(&ctx->cleanup_lock);
}

/* Keeps a copy of c (c may be on the stack), whose driver call failed with res; logged. */
static void keep_copy(cms_context *ctx, const struct cms_cleanup *c, CUresult res)
{
	struct cms_cleanup *k = malloc(sizeof(*k));

	cms_log(ctx, CMS_LOG_ERROR, "%s on device %d failed (%s): %s", c->ops->call, c->dev,
		cms_driver_error_name(&ctx->drv, res),
		k ? "tried again at the next pause, resume or swap and at context destroy" :
		    "leaked (no memory to remember it)");
	if (!k)
		return;
	*k = *c;
	keep(ctx, k);
}

/* Tries c once; on failure keeps it on ctx's list. */
static void run_or_keep(cms_context *ctx, const struct cms_cleanup *c)
{
	struct cms_cleanup t = *c;
	CUresult res = attempt(ctx, &t);

	if (res != CUDA_SUCCESS)
		keep_copy(ctx, &t, res);
}

void cms_cleanup_event(cms_context *ctx, int32_t dev, CUevent ev)
{
	struct cms_cleanup c = { .ops = &event_ops, .dev = dev, .p = (void *)ev };

	run_or_keep(ctx, &c);
}

void cms_cleanup_staging(cms_context *ctx, int32_t dev, void *base, size_t len, bool hooked)
{
	struct cms_cleanup c = {
		.ops = &staging_ops, .dev = dev, .p = base, .len = len, .hooked = hooked
	};

	run_or_keep(ctx, &c);
}

void cms_cleanup_range(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len, bool mapped)
{
	struct cms_cleanup c = { .ops = &range_ops,
				 .dev = dev,
				 .p = (void *)(uintptr_t)va,
				 .len = len,
				 .mapped = mapped };

	run_or_keep(ctx, &c);
}

void cms_cleanup_own_range(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len, uint64_t own)
{
	struct cms_cleanup c = { .ops = &range_ops,
				 .dev = dev,
				 .p = (void *)(uintptr_t)va,
				 .len = len,
				 .mapped = true,
				 .own = own };

	run_or_keep(ctx, &c);
}

void cms_cleanup_reservation(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len,
			     CUresult res)
{
	struct cms_cleanup c = {
		.ops = &range_ops, .dev = dev, .p = (void *)(uintptr_t)va, .len = len
	};

	keep_copy(ctx, &c, res);
}

cms_status cms_cleanup_retry(cms_context *ctx)
{
	struct cms_cleanup *list, *c, *failed = NULL;
	cms_status st = CMS_OK;

	pthread_mutex_lock(&ctx->cleanup_lock);
	list = ctx->cleanups;
	ctx->cleanups = NULL;
	pthread_mutex_unlock(&ctx->cleanup_lock);
	while ((c = list)) {
		CUresult res = attempt(ctx, c);

		list = c->next;
		if (res == CUDA_SUCCESS) {
			free(c);
			continue;
		}
		if (!st)
			st = cms_cu_error(&ctx->drv, res, c->ops->call);
		c->next = failed;
		failed = c;
	}
	while ((c = failed)) {
		failed = c->next;
		keep(ctx, c);
	}
	return st;
}

void cms_cleanup_abandon(cms_context *ctx)
{
	struct cms_cleanup *c;

	pthread_mutex_lock(&ctx->cleanup_lock);
	while ((c = ctx->cleanups)) {
		ctx->cleanups = c->next;
		cms_log(ctx, CMS_LOG_ERROR,
			"%s on device %d failed again at context destroy: leaked", c->ops->call,
			c->dev);
		free(c);
	}
	pthread_mutex_unlock(&ctx->cleanup_lock);
}
