/* SPDX-License-Identifier: MIT */
/*
 * resume.c - the resume schedule of one device (regions' locks held, the
 * device's context current):
 *
 *   1. collect the allocations missing memory; plan runs of adjacent ones
 *   2. create a physical handle for each (one per run), map it, and restore
 *      its content per policy while the next ones are backed (in.c)
 *   3. async resume: make the caller's stream wait for the copies; else
 *      synchronize them, run the features' after_restore hooks (feature.c;
 *      CMS_REGION_VERIFY checks the checksums of the pause, verify.c; never
 *      async: its row refuses CMS_RESUME_ASYNC), then
 *      make frozen regions read-only (a frozen region's resume is never async)
 *   4. vote (every device backed and restored), commit: states, epochs
 * On failure everything this call created or mapped is undone and every
 * allocation stays paused with its stored content.
 */
#include "engine_internal.h"

static cms_status resume_run(struct cms_work *w)
{
	struct cms_lanes all = cms_work_lanes(w, 0, CMS_COPY_STREAMS);
	const cms_resume_options *o = w->call->ro;
	/* a frozen region becomes read-only after its copies: synchronous */
	bool async = (o->flags & CMS_RESUME_ASYNC) && !cms_in_frozen(w);
	cms_status st, rb;

	w->failed_in = true; /* any failure is on the in side */
	st = cms_work_collect(w);
	if (!st)
		st = cms_in_back(w, &all);
	if (!st && async) {
		st = cms_in_order_after(w, (CUstream)(uintptr_t)o->stream);
		if (!st)
			st = cms_xdev_vote(w->xv); /* every device backed: commit */
		if (!st)
			goto commit;
	}
	rb = cms_lanes_sync(&all); /* also after a failure: copies may be in flight */
	if (!st)
		st = rb;
	if (!st &&
	    !async) /* features (CMS_REGION_VERIFY: the restored content is the paused one) */
		st = cms_feature_after_restore(w, cms_lane_at(&all, 0));
	if (!st)
		st = cms_work_refreeze(w->in, w->nin, false); /* frozen regions: read-only */
	if (!st && !async)
		st = cms_xdev_vote(w->xv); /* every device backed and restored: commit */
	if (st) {
		st = cms_abort(w, st);
		goto out;
	}
commit:
	cms_commit(w, async);
out:
	cms_work_release(w);
	return st;
}

const struct cms_schedule cms_sched_resume = { .name = "resume", .run = resume_run };
