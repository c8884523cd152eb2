/* SPDX-License-Identifier: MIT */
/*
 * cleanup.c - driver cleanups that failed (a page-locked DISK staging area
 * still registered, an event not destroyed, a temporary mapping or
 * reservation not removed) are kept on the context's list
 * and tried again at the start of its next pause, resume or swap and at its
 * destroy, instead of being leaked for the life of the process. Each kind of
 * cleanup is an operations table (struct cms_cleanup_ops): the event here,
 * the temporary range in vmm (vmm/cleanup_ranges.c), the page-locked staging
 * area in the store (store/stage.c); each layer runs its own kinds through
 * cms_cleanup_run.
 */
#include <stdlib.h>

#include "core_internal.h"

static CUresult event_run(cms_context *ctx, struct cms_cleanup *c)
{
	return ctx->drv.cuEventDestroy((CUevent)c->p);
}

static const struct cms_cleanup_ops event_ops = { .call = "cuEventDestroy", .run = event_run };

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

void cms_cleanup_keep(cms_context *ctx, const struct cms_cleanup *c, CUresult res)
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

void cms_cleanup_run(cms_context *ctx, const struct cms_cleanup *c)
{
	struct cms_cleanup t = *c;
	CUresult res = attempt(ctx, &t);

	if (res != CUDA_SUCCESS)
		cms_cleanup_keep(ctx, &t, res);
}

void cms_cleanup_event(cms_context *ctx, int32_t dev, CUevent ev)
{
	struct cms_cleanup c = { .ops = &event_ops, .dev = dev, .p = (void *)ev };

	cms_cleanup_run(ctx, &c);
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
