/* SPDX-License-Identifier: MIT */
/* transition.c - cms_pause / cms_resume by tag and by region: selection and locking. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

struct transition {
	bool pause;
	cms_pause_options popts;
	cms_resume_options ropts;
	cms_pause_result pres;
	cms_resume_result rres;
};

static cms_status prepare(struct transition *t, bool pause, const void *opts, void *result)
{
	static const cms_pause_options pinit = CMS_PAUSE_OPTIONS_INIT;
	static const cms_resume_options rinit = CMS_RESUME_OPTIONS_INIT;
	cms_status st;

	memset(t, 0, sizeof(*t));
	t->pause = pause;
	t->popts = pinit;
	t->ropts = rinit;
	t->pres.struct_size = sizeof(t->pres);
	t->rres.struct_size = sizeof(t->rres);
	if (opts) {
		st = pause ? CMS_COPY_IN(&t->popts, opts, cms_pause_options) :
			     CMS_COPY_IN(&t->ropts, opts, cms_resume_options);
		if (st)
			return st;
	}
	if (pause && (t->popts.flags & ~(uint64_t)CMS_PAUSE_NO_SYNC))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown pause flags 0x%llx",
				     (unsigned long long)t->popts.flags);
	if (!pause && (t->ropts.flags & ~(uint64_t)CMS_RESUME_ASYNC))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown resume flags 0x%llx",
				     (unsigned long long)t->ropts.flags);
	if (result)
		return pause ? CMS_CHECK_OUT(result, cms_pause_result) :
			       CMS_CHECK_OUT(result, cms_resume_result);
	return CMS_OK;
}

/*
 * Runs the transition on those of the n locked regions v that are not yet in
 * the target state, collected into w (room for n).
 */
static cms_status run_locked(cms_context *ctx, struct transition *t, struct cms_region **v,
			     size_t n, struct cms_region **w, void *result)
{
	uint32_t from = t->pause ? CMS_STATE_ACTIVE : CMS_STATE_PAUSED;
	size_t i, m = 0, live = 0;
	cms_status st;

	for (i = 0; i < n; i++) {
		live += !v[i]->dead; /* a concurrent destroy may have finished: written under its
					lock */
		if (v[i]->state == from && !v[i]->dead)
			w[m++] = v[i];
	}
	if (!live)
		return cms_set_error(CMS_ERR_NOT_FOUND, "the region was destroyed");
	if (!m)
		return t->pause ? cms_set_error(CMS_ERR_ALREADY_PAUSED, "already paused") :
				  cms_set_error(CMS_ERR_NOT_PAUSED, "not paused");
	if (!t->pause) { /* flags that need a synchronous resume (engine/feature.c) */
		st = cms_feature_check(&(struct cms_feature_query){
			.when = CMS_FEATURE_RESUME, .flags = t->ropts.flags, .v = w, .n = m });
		if (st)
			return st;
	}
	if (t->pause) {
		st = cms_ipc_revoke(ctx, w, m); /* importers drop their mappings first */
		if (!st)
			st = cms_engine_pause(ctx, w, m, &t->popts, result ? &t->pres : NULL);
		if (st)
			cms_ipc_regrant(ctx, w, m); /* the memory stays: they map it again */
	} else {
		st = cms_engine_resume(ctx, w, m, &t->ropts, result ? &t->rres : NULL);
		if (!st)
			cms_ipc_regrant(ctx, w, m); /* importers map the new memory (new epoch) */
	}
	cms_counters_fail(w, m, st); /* the regions' locks are held */
	if (result && t->pause)
		cms_result_out(result, &t->pres, sizeof(t->pres), CMS_SIZED(cms_pause_result)->ver0,
			       t->pres.devices, st);
	else if (result)
		cms_result_out(result, &t->rres, sizeof(t->rres),
			       CMS_SIZED(cms_resume_result)->ver0, t->rres.devices, st);
	return st;
}

/* The message of a pause or resume by tag that found nothing to change: which regions. */
static void state_error(cms_status st, const char *tag)
{
	bool pause = st == CMS_ERR_ALREADY_PAUSED;

	if (tag)
		cms_set_error(st,
			      pause ? "every region tagged \"%s\" is already paused" :
				      "no region tagged \"%s\" is paused",
			      tag);
	else
		cms_set_error(st, pause ? "every region is already paused" : "no region is paused");
}

static cms_status by_tag(cms_context *ctx, const char *tag, bool pause, const void *opts,
			 void *result)
{
	struct cms_selection sel;
	struct transition t;
	cms_status st;
	size_t i;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	if (tag) {
		st = cms_check_tag(tag);
		if (st)
			return st;
	}
	st = prepare(&t, pause, opts, result);
	if (st)
		return st;
	(void)cms_cleanup_retry(ctx); /* earlier cleanups that failed; kept if they fail again */
	st = cms_select_lock(ctx, tag, NULL, &sel);
	if (st)
		return st;
	/* none selected, or a destroy took them all after the selection (they are dead) */
	for (i = 0; i < sel.n && sel.v[i]->dead; i++)
		;
	if (i == sel.n) {
		cms_select_unlock(&sel);
		if (!tag)
			return pause ? cms_set_error(CMS_ERR_ALREADY_PAUSED,
						     "no regions to pause") :
				       cms_set_error(CMS_ERR_NOT_PAUSED, "no regions to resume");
		return cms_set_error(CMS_ERR_NOT_FOUND, "no region is tagged \"%s\"", tag);
	}
	st = run_locked(ctx, &t, sel.v, sel.n, sel.v + sel.n, result);
	cms_select_unlock(&sel);
	if (st == CMS_ERR_ALREADY_PAUSED || st == CMS_ERR_NOT_PAUSED)
		state_error(st, tag);
	return st;
}

CMS_API cms_status cms_pause(cms_context *ctx, const char *tag, const cms_pause_options *opts,
			     cms_pause_result *result)
{
	return by_tag(ctx, tag, true, opts, result);
}

CMS_API cms_status cms_resume(cms_context *ctx, const char *tag, const cms_resume_options *opts,
			      cms_resume_result *result)
{
	return by_tag(ctx, tag, false, opts, result);
}

static cms_status one_region(cms_region *region, bool pause, const void *opts, void *result)
{
	struct cms_region *v[1] = { region }, *w[1];
	struct transition t;
	cms_status st;

	if (!region)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(region->ctx);
	if (st)
		return st;
	st = prepare(&t, pause, opts, result);
	if (st)
		return st;
	(void)cms_cleanup_retry(region->ctx);
	pthread_mutex_lock(&region->lock);
	st = run_locked(region->ctx, &t, v, 1, w, result);
	pthread_mutex_unlock(&region->lock);
	if (st == CMS_ERR_ALREADY_PAUSED || st == CMS_ERR_NOT_PAUSED)
		cms_set_error(st, "region \"%s\" on device %d is %s", region->tag, region->device,
			      pause ? "already paused" : "not paused");
	return st;
}

CMS_API cms_status cms_region_pause(cms_region *region, const cms_pause_options *opts,
				    cms_pause_result *result)
{
	return one_region(region, true, opts, result);
}

CMS_API cms_status cms_region_resume(cms_region *region, const cms_resume_options *opts,
				     cms_resume_result *result)
{
	return one_region(region, false, opts, result);
}
