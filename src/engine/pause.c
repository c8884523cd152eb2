/* SPDX-License-Identifier: MIT */
/*
 * pause.c - the pause schedule of one device (regions' locks held, the
 * device's context current):
 *
 *   0. check the stores (a DISK region needs its directory), wait for an async
 *      resume's copies, collect the allocations holding memory
 *   1. wait for GPU work (context, stream or event synchronize); the features'
 *      before_save hooks (feature.c; CMS_REGION_VERIFY: checksums, verify.c)
 *   2. save the content per policy (store/): asynchronous copies, synchronized,
 *      then synchronous stores; in the steady state of a one-device call each
 *      batch is released as soon as its copies are done (overlap.c)
 *   3. unmap every allocation           (vote: every device unmapped)
 *   4. release every physical handle; regions with CMS_REGION_GUARD map the
 *      zero handle read-only over each released allocation
 *                                       (vote: every device released)
 *   5. commit: region states
 * A failure at any step rolls back (commit.c: map again, restore released
 * content from the stores); only content of DISCARD/ZERO memory already
 * released is lost then. A rollback that fails itself leaves each allocation
 * in an exact state (and its stored content), and a region with an allocation
 * left without memory PAUSED, for the next resume to complete.
 */
#include "engine_internal.h"

static cms_status pause_run(struct cms_work *w)
{
	struct cms_lanes all = cms_work_lanes(w, 0, CMS_COPY_STREAMS);
	cms_status st;

	st = cms_store_check(w->out, w->nout);
	if (!st)
		st = cms_work_settle(w);
	if (!st)
		st = cms_work_collect(w);
	if (st)
		goto out;
	if (w->call->measure)
		w->free_before = cms_work_free_bytes(w);
	st = cms_out_wait(w);
	if (!st) /* features (CMS_REGION_VERIFY: checksums of what the saves below copy) */
		st = cms_feature_before_save(w, cms_lane_at(&all, 0));
	if (st)
		goto out;
	if (cms_out_can_overlap(w))
		st = cms_out_overlapped(w, &all, false);
	if (!st)
		st = cms_out_save(w, &all); /* what is still mapped; synchronizes the lanes */
	if (!st)
		st = cms_out_unmap(w);
	if (!st)
		st = cms_xdev_vote(w->xv); /* every device unmapped: nothing lost yet */
	if (!st)
		st = cms_out_release(w);
	if (!st)
		st = cms_out_guard(w); /* CMS_REGION_GUARD: zeros, read-only */
	if (!st)
		st = cms_xdev_vote(w->xv); /* every device released: commit */
	if (st) {
		st = cms_abort(w, st);
		goto out;
	}
	cms_commit(w, false);
	if (w->call->measure)
		w->free_after = cms_work_free_bytes(w);
out:
	cms_work_release(w);
	return st;
}

const struct cms_schedule cms_sched_pause = { .name = "pause", .run = pause_run };
