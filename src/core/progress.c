/* SPDX-License-Identifier: MIT */
/*
 * progress.c - cms_context_progress_set, and the calling thread's progress
 * sink: the copy loops below the engine (store) report the bytes they move
 * through it, without knowing the operation they belong to. The engine sets
 * the sink around each thread's part of a call (engine/fanout.c) and owns
 * what it reports to (engine/progress_report.c).
 */
#include "core_internal.h"

static _Thread_local struct cms_progress_sink *current;

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

struct cms_progress_sink *cms_progress_enter(struct cms_progress_sink *s)
{
	struct cms_progress_sink *old = current;

	current = s;
	return old;
}

void cms_progress_note(uint64_t bytes)
{
	if (current && bytes)
		current->add(current, bytes);
}
