/* SPDX-License-Identifier: MIT */
/*
 * preparer.c - the background thread that makes host backups ahead
 * (CMS_REGION_PREPARE); store/host_ahead.c makes and attaches the buffers.
 *
 * One thread per context, started by the first cms_alloc that needs it (every
 * signal blocked: cms_thread_start) and joined by cms_context_destroy. Each
 * wake-up (a "kick": an allocation, a flag change) makes it go over the
 * context's regions, each referenced so that a concurrent destroy cannot free
 * it under the thread, and for each region that wants it make buffers, one
 * job (one buffer) at a time, until every allocation has a backup: planned
 * and attached under the region's lock, made without it. A job that fails
 * ends the region's turn until the next kick, so that a refusal is not
 * retried in a loop.
 *
 * The engine starts it through the feature table (feature.c: changed, after
 * a cms_alloc or a flag change; context_end, at cms_context_destroy).
 *
 * The thread never calls the application's log callback: its lines are
 * queued (core/log.c) and emitted by the next kick or by the stop, on a
 * thread that called into the library.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

struct cms_preparer {
	cms_context *ctx;
	pthread_t thread;
	bool started; /* ctx->lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;  /* signalled by a kick and by the stop */
	uint64_t kicks, seen; /* lock */
	atomic_bool stop;     /* set under lock; read by the making, between slices */
	struct cms_logq log;  /* the thread's lines not yet emitted (lock) */
};

/* Moves the thread's queued lines (src) to the ones waiting to be emitted (dst, p->lock). */
static void log_move(struct cms_logq *dst, struct cms_logq *src)
{
	if (!src->n && !src->dropped)
		return;
	if (!dst->n && !dst->dropped) {
		free(dst->v);
		*dst = *src;
	} else {
		dst->dropped += src->n + src->dropped;
		free(src->v);
	}
	memset(src, 0, sizeof(*src));
}

/* Makes buffers for r's allocations until none needs one, the thread stops or a job fails. */
static void prepare_region(struct cms_preparer *p, struct cms_region *r)
{
	struct cms_prep_job j;
	struct cms_hostbuf *unused;
	bool planned, made;

	while (!atomic_load(&p->stop)) {
		pthread_mutex_lock(&r->lock);
		planned = cms_store_prepare_plan(r, &j);
		pthread_mutex_unlock(&r->lock);
		if (!planned)
			return;
		cms_store_prepare_build(p->ctx, &j, &p->stop);
		made = j.hb != NULL;
		pthread_mutex_lock(&r->lock);
		if (j.why[0])
			cms_log(p->ctx, CMS_LOG_DEBUG,
				"region \"%s\": host backup of %zu bytes not prepared ahead: %s",
				r->tag, j.len, j.why);
		unused = cms_store_prepare_finish(r, &j);
		pthread_mutex_unlock(&r->lock);
		if (unused)
			cms_store_prepare_free(p->ctx, unused);
		if (!made)
			return;
	}
}

/* One pass over the context's regions (each referenced meanwhile). */
static void prepare_pass(struct cms_preparer *p)
{
	cms_context *ctx = p->ctx;
	struct cms_region *r, **v;
	size_t n = 0, k = 0, i;

	pthread_mutex_lock(&ctx->lock);
	for (r = ctx->regions; r; r = r->next)
		n++;
	v = n ? malloc(n * sizeof(*v)) : NULL;
	for (r = ctx->regions; v && r; r = r->next) {
		r->refs++;
		v[k++] = r;
	}
	pthread_mutex_unlock(&ctx->lock);
	for (i = 0; i < k; i++)
		prepare_region(p, v[i]);
	pthread_mutex_lock(&ctx->lock);
	for (i = 0; i < k; i++)
		cms_region_unref_locked(v[i]);
	pthread_mutex_unlock(&ctx->lock);
	free(v);
}

static void *prepare_thread(void *arg)
{
	struct cms_preparer *p = arg;
	struct cms_logq q = { 0 };

	cms_log_defer(&q);
	pthread_mutex_lock(&p->lock);
	while (!atomic_load(&p->stop)) {
		if (p->seen == p->kicks) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		p->seen = p->kicks;
		pthread_mutex_unlock(&p->lock);
		prepare_pass(p);
		pthread_mutex_lock(&p->lock);
		log_move(&p->log, &q);
	}
	pthread_mutex_unlock(&p->lock);
	cms_log_defer(NULL);
	return NULL;
}

/* ctx's preparer, made on first use; NULL when out of memory (ctx->lock held). */
static struct cms_preparer *preparer_get(cms_context *ctx)
{
	struct cms_preparer *p = cms_ctx_engine(ctx)->preparer;

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (pthread_mutex_init(&p->lock, NULL))
		goto err_free;
	if (pthread_cond_init(&p->cond, NULL))
		goto err_lock;
	p->ctx = ctx;
	atomic_init(&p->stop, false);
	cms_ctx_engine(ctx)->preparer = p;
	return p;

err_lock:
	pthread_mutex_destroy(&p->lock);
err_free:
	free(p);
	return NULL;
}

/* r (its lock held) may have allocations to prepare (after a cms_alloc, a flag change): wakes
 * the context's preparation thread, starting it on first need, and emits the lines it logged
 * since the last call. Nothing for a region that wants no preparation; best effort (a thread
 * that cannot be started is logged). */
static void prepare_kick(struct cms_region *r)
{
	cms_context *ctx = r->ctx;
	struct cms_preparer *p;
	int err;

	if (!cms_store_prepare_wanted(r))
		return;
	pthread_mutex_lock(&ctx->lock);
	p = preparer_get(ctx);
	if (!p) {
		cms_log(ctx, CMS_LOG_DEBUG, "no memory for the preparation of host backups");
		goto out;
	}
	if (!p->started) {
		atomic_store(&p->stop, false);
		err = cms_thread_start(&p->thread, prepare_thread, p);
		if (err) {
			cms_log(ctx, CMS_LOG_DEBUG,
				"cannot start the preparation thread (error %d): pauses make their "
				"host backups",
				err);
			goto out;
		}
		p->started = true;
	}
	pthread_mutex_lock(&p->lock);
	p->kicks++;
	pthread_cond_signal(&p->cond);
	cms_log_flush(ctx, &p->log);
	pthread_mutex_unlock(&p->lock);
out:
	pthread_mutex_unlock(&ctx->lock);
}

/* Stops and joins the context's preparation thread (a buffer it is making goes back) and
 * frees its state; emits its last log lines. No lock held (cms_context_destroy). */
static void prepare_stop(cms_context *ctx)
{
	struct cms_preparer *p;

	pthread_mutex_lock(&ctx->lock);
	p = cms_ctx_engine(ctx)->preparer;
	cms_ctx_engine(ctx)->preparer = NULL;
	pthread_mutex_unlock(&ctx->lock);
	if (!p)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		atomic_store(&p->stop, true);
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
	}
	cms_log_flush(ctx, &p->log);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

const struct cms_feature_ops cms_feature_prepare = {
	.changed = prepare_kick,
	.context_end = prepare_stop,
};
