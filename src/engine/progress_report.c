/* SPDX-License-Identifier: MIT */
/*
 * progress_report.c - the progress callback of one pause / resume / swap
 * (cms_context_progress_set).
 *
 * An operation takes a snapshot of the context's callback when it starts
 * (under the context lock, released before any copy), so that a concurrent
 * cms_context_progress_set never changes a callback in the middle of a call.
 * Reports of one operation may come from several threads (one per device, or
 * the two sides of a swap): a mutex of the operation (no library lock)
 * serialises them so that done_bytes never goes backwards. The copy loops
 * reach their operation through the thread's sink (core/progress.c), set by
 * fanout.c around each device's schedule.
 */
#include <string.h>

#include "engine_internal.h"

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

/* The sink's add: bytes more are done; calls the callback with done < total. */
static void add(struct cms_progress_sink *s, uint64_t bytes)
{
	struct cms_progress *p = cms_container_of(s, struct cms_progress, sink);

	if (p->fn && bytes)
		report(p, bytes, false);
}

void cms_progress_begin(struct cms_progress *p, cms_context *ctx, const char *operation,
			uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->sink.add = add;
	pthread_mutex_lock(&ctx->lock);
	p->fn = ctx->progress_fn;
	p->user = ctx->progress_user;
	pthread_mutex_unlock(&ctx->lock);
	p->operation = operation;
	p->total = total;
	if (p->fn && pthread_mutex_init(&p->lock, NULL))
		p->fn = NULL; /* only a report: not a reason to fail the operation */
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
