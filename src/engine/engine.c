/* SPDX-License-Identifier: MIT */
/* engine.c - the engine's entry points: a call of a schedule over locked regions. */
#include "engine_internal.h"

cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t n,
			    const cms_pause_options *opts, cms_pause_result *res)
{
	struct cms_call c = { .ctx = ctx,
			      .sched = &cms_sched_pause,
			      .out = regions,
			      .nout = n,
			      .po = opts,
			      .measure = res != NULL };

	return cms_fanout(&c, res, NULL);
}

cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t n,
			     const cms_resume_options *opts, cms_resume_result *res)
{
	struct cms_call c = {
		.ctx = ctx, .sched = &cms_sched_resume, .in = regions, .nin = n, .ro = opts
	};

	return cms_fanout(&c, NULL, res);
}

cms_status cms_engine_swap(cms_context *ctx, struct cms_region **out, size_t nout,
			   struct cms_region **in, size_t nin, const cms_pause_options *popts,
			   const cms_resume_options *ropts, cms_pause_result *pres,
			   cms_resume_result *rres)
{
	struct cms_call c = { .ctx = ctx,
			      .sched = &cms_sched_swap,
			      .out = out,
			      .nout = nout,
			      .in = in,
			      .nin = nin,
			      .po = popts,
			      .ro = ropts,
			      .measure = pres != NULL };

	return cms_fanout(&c, pres, rres);
}
