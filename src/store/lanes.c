/* SPDX-License-Identifier: MIT */
/* lanes.c - the copy streams of one side of an engine call (store.h: struct cms_lanes). */
#include "store_internal.h"

cms_status cms_lanes_sync(const struct cms_lanes *l)
{
	cms_context *ctx = l->ctx;
	cms_status st = CMS_OK;
	unsigned k;

	for (k = 0; k < l->count; k++)
		CU_TRY(ctx, cuStreamSynchronize(cms_lane_at(l, k)), st, out);
out:
	return st;
}
