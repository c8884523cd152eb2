/* SPDX-License-Identifier: MIT */
/*
 * swap_schedule.c - the swap schedule of one device: its out side (the regions it
 * pauses) and its in side (those it resumes) at once, so that both copy
 * directions run together and each release's memory can serve the in side.
 *
 *   the out side, on the device's worker thread, on copy stream 0: wait for
 *   GPU work, then save and release in batches (overlap.c, every allocation);
 *   the in side, on a thread of its own (the device's context current there
 *   too), on streams 1-3: back and restore (in.c); on out of memory it waits
 *   for the out side's next release while that has any left;
 *   either side stops early once the other failed;
 *   vote (every device done), then commit both; or undo the in side and roll
 *   the out side back (commit.c).
 * Every restore policy works both ways (a DISK file is written before its
 * batch is released and read back after its allocations are mapped).
 */
#include <stdio.h>

#include "engine_internal.h"

#define OUT_STREAM 0 /* the out side's lane; the in side gets the others */

struct in_side {
	struct cms_work *w;
	struct cms_progress_sink *progress; /* the call's, for the thread's reports */
	struct cms_logq logq;
	pthread_t thread;
	cms_status st;
	char msg[512];
};

static void stop_other(struct cms_work *w, bool out_finished)
{
	pthread_mutex_lock(&w->lock);
	w->stop |= !out_finished;
	w->out_done |= out_finished;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static cms_status in_side_run(struct in_side *s)
{
	struct cms_work *w = s->w;
	struct cms_lanes l = cms_work_lanes(w, OUT_STREAM + 1, CMS_COPY_STREAMS - 1);
	cms_status st, rb;

	st = cms_in_back(w, &l);
	rb = cms_lanes_sync(&l);
	if (!st)
		st = rb;
	if (!st) /* features (CMS_REGION_VERIFY: the restored content is the paused one) */
		st = cms_feature_after_restore(w, cms_lane_at(&l, 0));
	if (!st)
		st = cms_work_refreeze(w->in, w->nin, false); /* frozen regions: read-only */
	return st;
}

static void *in_side_main(void *arg)
{
	struct in_side *s = arg;
	struct cms_progress_sink *prev = cms_progress_enter(s->progress);
	cms_status st;

	cms_log_defer(&s->logq);
	st = cms_push(s->w->ctx, s->w->dev);
	if (!st) {
		st = in_side_run(s);
		cms_pop(s->w->ctx);
	}
	if (st) {
		cms_last_error_message(s->msg, sizeof(s->msg));
		stop_other(s->w, false);
	}
	s->st = st;
	cms_log_defer(NULL);
	cms_progress_enter(prev);
	return NULL;
}

static cms_status out_side(struct cms_work *w)
{
	struct cms_lanes l = cms_work_lanes(w, OUT_STREAM, 1);
	cms_status st, rb;

	st = cms_out_overlapped(w, &l, true);
	rb = cms_lanes_sync(&l);
	if (!st)
		st = rb;
	if (!st)
		st = cms_out_guard(w); /* CMS_REGION_GUARD: zeros, read-only */
	return st;
}

/* The status of the call on this device from its two sides (the real failure first). */
static cms_status sides_status(struct cms_work *w, cms_status out, const char *out_msg,
			       struct in_side *in)
{
	bool in_first = in->st && in->st != CMS_XDEV_ABORTED && (!out || out == CMS_XDEV_ABORTED);

	if (!out && !in->st)
		return CMS_OK;
	w->failed_in = in_first;
	if (in_first)
		return cms_set_error(in->st, "resume side: %s", in->msg);
	if (out && out != CMS_XDEV_ABORTED)
		return cms_set_error(out, "pause side: %s", out_msg);
	if (w->xv && w->xv->aborted) /* another device failed (both threads are done) */
		return cms_set_error(CMS_XDEV_ABORTED, "rolled back: another device failed");
	return cms_set_error(CMS_ERR_INTERNAL, "swap: both sides stopped"); /* cannot be */
}

static cms_status start_in_side(struct in_side *s)
{
	if (cms_thread_start(&s->thread, in_side_main, s))
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot start the resume thread of the swap");
	return CMS_OK;
}

static cms_status swap_run(struct cms_work *w)
{
	struct in_side in = { .w = w, .progress = cms_progress_enter(NULL) };
	char out_msg[512] = "";
	cms_status st;

	cms_progress_enter(in.progress);       /* peeked: the thread reports to it too */
	st = cms_store_check(w->out, w->nout); /* as cms_pause; the in side as cms_resume */
	if (!st)
		st = cms_work_settle(w);
	if (!st)
		st = cms_work_collect(w);
	if (w->nout && !st) {
		if (w->call->measure)
			w->free_before = cms_work_free_bytes(w);
		st = cms_out_wait(w);
		if (!st) /* features: before the in side starts, on the out lane */
			st = cms_feature_before_save(w,
						     w->ctx->devices[w->dev].streams[OUT_STREAM]);
	}
	if (st)
		goto out;
	if (pthread_mutex_init(&w->lock, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
		goto out;
	}
	if (pthread_cond_init(&w->cond, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a condition");
		goto out_lock;
	}
	w->sides = true;
	if (w->ni && w->no) {
		st = start_in_side(&in);
		if (st)
			goto out_cond; /* nothing was done */
	}
	st = w->no ? out_side(w) : CMS_OK;
	if (st)
		cms_last_error_message(out_msg, sizeof(out_msg));
	if (st && st != CMS_XDEV_ABORTED)
		stop_other(w, false);
	stop_other(w, true);
	if (w->ni && w->no) {
		pthread_join(in.thread, NULL);
		cms_log_flush(w->ctx, &in.logq);
	} else if (w->ni) { /* nothing to wait for: the in side on this thread */
		in.st = in_side_run(&in);
		if (in.st)
			cms_last_error_message(in.msg, sizeof(in.msg));
	}
	st = sides_status(w, st, out_msg, &in);
	if (!st)
		st = cms_xdev_vote(w->xv); /* every device done: commit */
	if (st) {
		st = cms_abort(w, st);
		goto out_cond;
	}
	cms_commit(w, false);
	if (w->nout && w->call->measure)
		w->free_after = cms_work_free_bytes(w);
out_cond:
	w->sides = false;
	pthread_cond_destroy(&w->cond);
out_lock:
	pthread_mutex_destroy(&w->lock);
out:
	cms_work_release(w);
	return st;
}

const struct cms_schedule cms_sched_swap = { .name = "swap", .run = swap_run };
