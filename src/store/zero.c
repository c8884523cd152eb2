/* SPDX-License-Identifier: MIT */
/*
 * zero.c - CMS_POLICY_ZERO: nothing is kept; a resume sets every byte of the
 * allocation (its whole physical size) to 0.
 */
#include "store_internal.h"

static cms_status zero_restore(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	cms_context *ctx = l->ctx;
	cms_status st = CMS_OK;
	size_t i;

	(void)bytes; /* nothing is copied from a store */
	for (i = 0; i < n; i++)
		CU_TRY(ctx, cuMemsetD8Async(v[i]->base, 0, v[i]->physical, cms_lane(l)), st, out);
out:
	return st;
}

const struct cms_store_ops cms_store_zero = {
	.name = "zero",
	.restore = zero_restore,
};
