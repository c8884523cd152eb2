/* SPDX-License-Identifier: MIT */
/*
 * host_pageable.c - copies of pageable HOST backups (CMS_REGION_HOST_PAGEABLE)
 * through page-locked staging.
 *
 * A region created with CMS_REGION_HOST_PAGEABLE keeps its buffers pageable
 * (never registered): each copy goes through two page-locked staging buffers
 * (stage.c) of the tunable host_stage bytes (16 MiB), the device copying into
 * (out of) one while the host copies the other into the backup (out of it). The staging is made
 * by a call's first such copy of the region, kept on the region (host_stage)
 * for the rest of the call (a resume restores 64 MiB at a time) and freed when
 * the call ends, committed or rolled back (call_done).
 * Each buffer knows its kind (hb->pageable): a region whose flag changed
 * between cycles lets go of the retained buffers of the other kind at its next
 * pause (or at once through cms_store_release_kept).
 */

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store_internal.h"

/* ---- pageable buffers: copies through page-locked staging ---- */

static uint64_t stage_chunk(const struct cms_region *r)
{
	const cms_context *ctx = r->ctx;

	return cms_tune_bytes(&cms_ctx_store(ctx)->tune.host_stage,
			      ctx->devices[r->device].granularity);
}

/* Bytes of chunk k of a copy of len bytes in chunks of c bytes. */
static size_t chunk_len(size_t len, size_t c, size_t k)
{
	return len - k * c < c ? len - k * c : c;
}

/*
 * Copies len bytes of device memory at src into pageable host memory at dst through the
 * staging sg: the device fills one of its buffers while this thread empties the other.
 * Returns with no copy running into the staging (every lane synchronized on failure).
 */
cms_status cms_host_staged_out(struct cms_lanes *l, const struct cms_stage *sg, char *dst,
			       CUdeviceptr src, size_t len)
{
	cms_context *ctx = l->ctx;
	size_t c = sg->chunk, n = (len + c - 1) / c, k;
	cms_status st = CMS_OK;

	for (k = 0; k <= n; k++) {
		if (k < n)
			CU_TRY(ctx,
			       cuMemcpyDtoHAsync(sg->base + (k % 2) * c, src + k * c,
						 chunk_len(len, c, k), cms_lane_at(l, k % 2)),
			       st, err);
		if (!k)
			continue;
		CU_TRY(ctx, cuStreamSynchronize(cms_lane_at(l, (k - 1) % 2)), st, err);
		memcpy(dst + (k - 1) * c, sg->base + ((k - 1) % 2) * c, chunk_len(len, c, k - 1));
	}
	return CMS_OK;
err:
	(void)cms_lanes_sync(l);
	return st;
}

/* Copies len bytes of pageable host memory at src to device memory at dst through the
 * staging sg; returns with every lane synchronized (the staging may be reused at once). */
cms_status cms_host_staged_in(struct cms_lanes *l, const struct cms_stage *sg, CUdeviceptr dst,
			      const char *src, size_t len)
{
	cms_context *ctx = l->ctx;
	size_t c = sg->chunk, n = (len + c - 1) / c, k;
	cms_status st = CMS_OK, st2;

	for (k = 0; k < n; k++) {
		CUstream s = cms_lane_at(l, k % 2);
		char *buf = sg->base + (k % 2) * c;

		if (k >= 2) /* the buffer's previous copy (chunk k - 2) must be done */
			CU_TRY(ctx, cuStreamSynchronize(s), st, out);
		memcpy(buf, src + k * c, chunk_len(len, c, k));
		CU_TRY(ctx, cuMemcpyHtoDAsync(dst + k * c, buf, chunk_len(len, c, k), s), st, out);
	}
out:
	st2 = cms_lanes_sync(l);
	return st ? st : st2;
}

/* r's staging kept between restores, made on first use; NULL with the error set. */
struct cms_stage *cms_host_region_stage(cms_context *ctx, struct cms_region *r)
{
	struct cms_stage *sg = cms_region_store(r)->host_stage;

	if (sg)
		return sg;
	sg = malloc(sizeof(*sg));
	if (!sg) {
		cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a staging descriptor");
		return NULL;
	}
	if (cms_stage_make(ctx, r->device, stage_chunk(r), stage_chunk(r), "host backup", sg)) {
		free(sg);
		return NULL;
	}
	cms_region_store(r)->host_stage = sg;
	return sg;
}

void cms_host_region_stage_free(struct cms_region *r)
{
	if (!cms_region_store(r)->host_stage)
		return;
	cms_stage_free(r->ctx, cms_region_store(r)->host_stage);
	free(cms_region_store(r)->host_stage);
	cms_region_store(r)->host_stage = NULL;
}

/* Whether r's new buffers are pageable (CMS_REGION_HOST_PAGEABLE). */
bool cms_host_region_pageable(const struct cms_region *r)
{
	return (r->flags & CMS_REGION_HOST_PAGEABLE) != 0;
}
