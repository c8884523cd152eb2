/* SPDX-License-Identifier: MIT */
/*
 * progress.c - the progress callback of long pause / resume / swap calls
 * (cms_context_progress_set).
 *
 * An operation takes a snapshot of the context's callback when it starts
 * (under the context lock, released before any copy), so that a concurrent
 * cms_context_progress_set never changes a callback in the middle of a call.
 * Reports of one operation may come from several threads (one per device, or
 * the two sides of a swap): a mutex of the operation (no library lock)
 * serialises them so that done_bytes never goes backwards. The engines of
 * cms_pause / cms_resume reach their operation through a thread-local pointer
 * set by engine/fanout.c around each device's schedule (cms_progress_note).
 */
#include <string.h>

#include "core_internal.h"

static _Thread_local struct cms_progress *current;

CMS_API cms_status cms_context_progress_set(cms_context *ctx, cms_progress_fn fn, void *user)
{
	cms_status st;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	pthread_mutex_lock(&ctx->lock);
	ctx->progress_fn = fn;
	ctx->progress_user = fn ? user : NULL;
	pthread_mutex_unlock(&ctx->lock);
	return CMS_OK;
}

void cms_progress_begin(struct cms_progress *p, cms_context *ctx, const char *operation,
			uint64_t total)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_lock(&ctx->lock);
	p->fn = ctx->progress_fn;
	p->user = ctx->progress_user;
	pthread_mutex_unlock(&ctx->lock);
	p->operation = operation;
	p->total = total;
	if (p->fn && pthread_mutex_init(&p->lock, NULL))
		p->fn = NULL; /* only a report: not a reason to fail the operation */
}

static void report(struct cms_progress *p, uint64_t bytes, bool final)
{
	pthread_mutex_lock(&p->lock);
	if (final)
		p->done = p->total;
	else
		p->done = p->total - p->done < bytes ? p->total : p->done + bytes;
	if (!p->final_sent && (final || p->done < p->total)) {
		p->final_sent = final;
		p->fn(p->user, p->operation, p->done, p->total);
	}
	pthread_mutex_unlock(&p->lock);
}

/* bytes more are done (NULL p or 0 bytes: nothing); calls the callback with done < total. */
static void cms_progress_add(struct cms_progress *p, uint64_t bytes)
{
	if (p && p->fn && bytes)
		report(p, bytes, false);
}

void cms_progress_end(struct cms_progress *p, bool ok)
{
	if (!p->fn)
		return;
	if (ok)
		report(p, 0, true);
	pthread_mutex_destroy(&p->lock);
	p->fn = NULL;
}

struct cms_progress *cms_progress_enter(struct cms_progress *p)
{
	struct cms_progress *old = current;

	current = p;
	return old;
}

void cms_progress_note(uint64_t bytes)
{
	cms_progress_add(current, bytes);
}
