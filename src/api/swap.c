/* SPDX-License-Identifier: MIT */
/* swap.c - cms_swap: arguments, options, the regions of both tags, locking. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

struct sel {
	cms_context *ctx;
	const cms_pause_options *po;
	const cms_resume_options *ro;
	struct {
		struct cms_region **regions;
		size_t nr;
	} p, r;
};

/* ---- the call ---- */

static cms_status options_in(const cms_pause_options *popts, const cms_resume_options *ropts,
			     cms_pause_options *po, cms_resume_options *ro)
{
	static const cms_pause_options pinit = CMS_PAUSE_OPTIONS_INIT;
	static const cms_resume_options rinit = CMS_RESUME_OPTIONS_INIT;
	cms_status st;

	*po = pinit;
	*ro = rinit;
	if (popts) {
		st = CMS_COPY_IN(po, popts, cms_pause_options);
		if (st)
			return st;
	}
	if (ropts) {
		st = CMS_COPY_IN(ro, ropts, cms_resume_options);
		if (st)
			return st;
	}
	if (po->flags & ~(uint64_t)CMS_PAUSE_NO_SYNC)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown pause flags 0x%llx",
				     (unsigned long long)po->flags);
	if (ro->flags & CMS_RESUME_ASYNC)
		return cms_set_error(
			CMS_ERR_INVALID_ARGUMENT,
			"cms_swap restores synchronously: CMS_RESUME_ASYNC is refused");
	if (ro->flags)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown resume flags 0x%llx",
				     (unsigned long long)ro->flags);
	return CMS_OK;
}

/* Picks the regions to work on among the locked regions v (both tags), checks them. */
static cms_status select_regions(struct sel *s, struct cms_region **v, size_t n,
				 const char *pause_tag, const char *resume_tag,
				 struct cms_region **w)
{
	size_t i, live_p = 0, live_r = 0;

	s->p.regions = w;
	for (i = 0; i < n; i++) {
		bool p = !strcmp(v[i]->tag, pause_tag);

		if (v[i]->dead)
			continue;
		live_p += p;
		live_r += !p;
		if (p && v[i]->state == CMS_STATE_ACTIVE)
			w[s->p.nr++] = v[i];
	}
	s->r.regions = w + s->p.nr;
	for (i = 0; i < n; i++)
		if (!v[i]->dead && strcmp(v[i]->tag, pause_tag) && v[i]->state == CMS_STATE_PAUSED)
			s->r.regions[s->r.nr++] = v[i];
	if (!live_p || !live_r)
		return cms_set_error(CMS_ERR_NOT_FOUND, "the regions of \"%s\" were destroyed",
				     !live_p ? pause_tag : resume_tag);
	if (!s->p.nr)
		return cms_set_error(CMS_ERR_ALREADY_PAUSED,
				     "every region of \"%s\" is already paused", pause_tag);
	if (!s->r.nr)
		return cms_set_error(CMS_ERR_NOT_PAUSED, "no region of \"%s\" is paused",
				     resume_tag);
	return CMS_OK;
}

static cms_status run_locked(struct sel *s, struct cms_region **v, size_t n, const char *pause_tag,
			     const char *resume_tag, cms_pause_result *presult,
			     cms_resume_result *rresult)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_status st;

	st = select_regions(s, v, n, pause_tag, resume_tag, v + n);
	if (st)
		return st;
	st = cms_ipc_revoke(s->ctx, s->p.regions, s->p.nr); /* importers drop their mappings */
	if (!st)
		st = cms_engine_swap(s->ctx, s->p.regions, s->p.nr, s->r.regions, s->r.nr, s->po,
				     s->ro, presult ? &pr : NULL, rresult ? &rr : NULL);
	if (st) {
		cms_ipc_regrant(s->ctx, s->p.regions, s->p.nr); /* the memory stays */
		cms_counters_fail(s->p.regions, s->p.nr, st);
		cms_counters_fail(s->r.regions, s->r.nr, st);
	} else
		cms_ipc_regrant(s->ctx, s->r.regions, s->r.nr); /* new memory, new epoch */
	if (presult)
		cms_result_out(presult, &pr, sizeof(pr), CMS_SIZED(cms_pause_result)->ver0,
			       pr.devices, st);
	if (rresult)
		cms_result_out(rresult, &rr, sizeof(rr), CMS_SIZED(cms_resume_result)->ver0,
			       rr.devices, st);
	return st;
}

static cms_status check_args(cms_context *ctx, const char *pause_tag, const char *resume_tag,
			     cms_pause_result *presult, cms_resume_result *rresult)
{
	cms_status st;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	if (!pause_tag || !resume_tag)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL",
				     !pause_tag ? "pause_tag" : "resume_tag");
	st = cms_check_tag(pause_tag);
	if (!st)
		st = cms_check_tag(resume_tag);
	if (st)
		return st;
	if (!strcmp(pause_tag, resume_tag))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "cms_swap of \"%s\" with itself: the tags must differ",
				     pause_tag);
	if (presult) {
		st = CMS_CHECK_OUT(presult, cms_pause_result);
		if (st)
			return st;
	}
	if (rresult)
		st = CMS_CHECK_OUT(rresult, cms_resume_result);
	return st;
}

CMS_API cms_status cms_swap(cms_context *ctx, const char *pause_tag, const char *resume_tag,
			    const cms_pause_options *popts, const cms_resume_options *ropts,
			    cms_pause_result *presult, cms_resume_result *rresult)
{
	struct cms_selection sel;
	cms_pause_options po;
	cms_resume_options ro;
	struct sel s;
	cms_status st;

	st = check_args(ctx, pause_tag, resume_tag, presult, rresult);
	if (!st)
		st = options_in(popts, ropts, &po, &ro);
	if (st)
		return st;

	(void)cms_cleanup_retry(ctx); /* earlier cleanups that failed; kept if they fail again */
	st = cms_select_lock(ctx, pause_tag, resume_tag, &sel);
	if (st)
		return st;
	if (!sel.n1 || sel.n == sel.n1) {
		cms_select_unlock(&sel);
		return cms_set_error(CMS_ERR_NOT_FOUND, "no region is tagged \"%s\"",
				     !sel.n1 ? pause_tag : resume_tag);
	}
	memset(&s, 0, sizeof(s));
	s.ctx = ctx;
	s.po = &po;
	s.ro = &ro;
	st = run_locked(&s, sel.v, sel.n, pause_tag, resume_tag, presult, rresult);
	cms_select_unlock(&sel);
	return st;
}
