/* SPDX-License-Identifier: MIT */
/*
 * pause.c - transactional pause of a set of regions whose locks are held.
 *
 *   0. wait for GPU work (context, stream or event synchronize)
 *   1. HOST policy: copy every allocation to a host buffer
 *   2. unmap every allocation          (failure: map the earlier ones again)
 *   3. release every physical handle   (failure: map the unreleased ones again,
 *                                       re-back the released ones per policy)
 *   4. commit: states, accounting
 * Nothing but step 3's rollback can lose content, and only for DISCARD/ZERO.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Collects the allocations of the regions into one array (NULL when there are none). */
cms_status cms_collect_allocs(struct cms_region **regions, size_t n, struct cms_alloc ***out,
			      size_t *count)
{
	struct cms_alloc **v, *a;
	size_t i, k = 0, total = 0;

	for (i = 0; i < n; i++)
		total += regions[i]->nallocs;
	*out = NULL;
	*count = total;
	if (!total)
		return CMS_OK;
	v = malloc(total * sizeof(*v));
	if (!v)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate a work list of %zu", total);
	for (i = 0; i < n; i++)
		for (a = regions[i]->allocs; a; a = a->next)
			v[k++] = a;
	*out = v;
	return CMS_OK;
}

/* Sum of cuMemGetInfo free bytes over the devices of the regions. */
cms_status cms_free_bytes(cms_context *ctx, struct cms_region **regions, size_t n, uint64_t *sum)
{
	uint64_t seen = 0;
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i, f, t;

	*sum = 0;
	for (i = 0; i < n; i++) {
		int32_t dev = regions[i]->device;

		if (dev < 64 && (seen & (1ull << dev)))
			continue;
		seen |= dev < 64 ? 1ull << dev : 0;
		st = cms_switch_device(ctx, &cur, dev);
		if (st)
			break;
		CU_TRY(ctx, cuMemGetInfo(&f, &t), st, out);
		*sum += f;
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

/* Synchronizes the library stream of every device of the regions. */
cms_status cms_sync_streams(cms_context *ctx, struct cms_region **regions, size_t n)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i;

	for (i = 0; i < n; i++) {
		struct cms_device *d = &ctx->devices[regions[i]->device];

		if (i && regions[i - 1]->device == regions[i]->device)
			continue;
		st = cms_switch_device(ctx, &cur, regions[i]->device);
		if (st)
			break;
		CU_TRY(ctx, cuStreamSynchronize(d->stream), st, out);
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

static cms_status wait_for_work(cms_context *ctx, struct cms_region **regions, size_t n,
				const cms_pause_options *o)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i;

	if (o->flags & CMS_PAUSE_NO_SYNC)
		return CMS_OK;
	if (o->stream || o->event) {
		st = cms_switch_device(ctx, &cur, regions[0]->device);
		if (st)
			return st;
		if (o->stream)
			CU_TRY(ctx, cuStreamSynchronize((CUstream)(uintptr_t)o->stream), st, out);
		if (o->event)
			CU_TRY(ctx, cuEventSynchronize((CUevent)(uintptr_t)o->event), st, out);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (i && regions[i - 1]->device == regions[i]->device)
			continue;
		st = cms_switch_device(ctx, &cur, regions[i]->device);
		if (st)
			break;
		CU_TRY(ctx, cuCtxSynchronize(), st, out);
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

/* Step 1: copies HOST-policy allocations out. On failure frees what it made. */
static cms_status backup_all(cms_context *ctx, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i;

	*bytes = 0;
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];
		struct cms_device *d = &ctx->devices[a->region->device];

		if (a->region->policy != CMS_POLICY_HOST)
			continue;
		a->backup = cms_host_alloc(ctx, a->size);
		if (!a->backup) {
			st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
					   "cannot allocate a host backup of %zu bytes for 0x%llx",
					   a->size, (unsigned long long)a->base);
			goto err;
		}
		st = cms_switch_device(ctx, &cur, a->region->device);
		if (st)
			goto err;
		CU_TRY(ctx, cuMemcpyDtoHAsync(a->backup, a->base, a->size, d->stream), st, err);
		*bytes += a->size;
	}
	cms_switch_done(ctx, &cur);
	return CMS_OK;

err:
	cms_switch_done(ctx, &cur);
	return st;
}

void cms_drop_backups(cms_context *ctx, struct cms_alloc **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		cms_host_free(ctx, v[i]->backup, v[i]->size);
		v[i]->backup = NULL;
	}
}

/* Restores content of a freshly backed allocation per its region's policy (async on the region's
 * stream). */
cms_status cms_restore_content(cms_context *ctx, struct cms_alloc *a, uint64_t *bytes)
{
	struct cms_device *d = &ctx->devices[a->region->device];
	cms_status st = CMS_OK;

	switch (a->region->policy) {
	case CMS_POLICY_HOST:
		CU_TRY(ctx, cuMemcpyHtoDAsync(a->base, a->backup, a->size, d->stream), st, out);
		*bytes += a->size;
		break;
	case CMS_POLICY_ZERO:
		CU_TRY(ctx, cuMemsetD8Async(a->base, 0, a->physical, d->stream), st, out);
		break;
	default:
		break;
	}
out:
	return st;
}

/* Rollback of step 3 for the allocations whose memory is gone: back and restore them. */
static cms_status reback(cms_context *ctx, struct cms_region **regions, size_t nr,
			 struct cms_alloc **v, size_t n)
{
	cms_status st = CMS_OK;
	int32_t cur = -1;
	uint64_t unused = 0;
	size_t i;

	for (i = 0; i < n && !st; i++) {
		st = cms_vmm_back(v[i]);
		if (!st)
			st = cms_switch_device(ctx, &cur, v[i]->region->device);
		if (!st)
			st = cms_restore_content(ctx, v[i], &unused);
	}
	cms_switch_done(ctx, &cur);
	if (!st)
		st = cms_sync_streams(ctx, regions, nr);
	return st;
}

cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t nr,
			    const cms_pause_options *o, cms_pause_result *res)
{
	uint64_t t0 = cms_now_ns(), backed_up = 0, released = 0;
	char saved[512];
	struct cms_alloc **v;
	cms_status st, rb = CMS_OK;
	size_t n, i, k;

	st = cms_collect_allocs(regions, nr, &v, &n);
	if (st)
		return st;
	if (res) {
		st = cms_free_bytes(ctx, regions, nr, &res->driver_free_before);
		if (st)
			goto out;
	}
	st = wait_for_work(ctx, regions, nr, o);
	if (st)
		goto out;
	st = backup_all(ctx, v, n, &backed_up);
	if (!st)
		st = cms_sync_streams(ctx, regions, nr);
	if (st)
		goto err_backups;

	for (k = 0; k < n; k++) {
		CUresult r = ctx->drv.cuMemUnmap(v[k]->base, v[k]->physical);

		if (r != CUDA_SUCCESS) {
			st = cms_cu_error(&ctx->drv, r, "cuMemUnmap");
			cms_error_save(saved, sizeof(saved));
			for (i = 0; i < k && !rb; i++)
				rb = cms_vmm_map(v[i], v[i]->handle);
			goto err_rollback;
		}
	}
	for (k = 0; k < n; k++) {
		CUresult r = ctx->drv.cuMemRelease(v[k]->handle);

		if (r != CUDA_SUCCESS) {
			st = cms_cu_error(&ctx->drv, r, "cuMemRelease");
			cms_error_save(saved, sizeof(saved));
			for (i = k; i < n && !rb; i++)
				rb = cms_vmm_map(v[i], v[i]->handle);
			if (!rb)
				rb = reback(ctx, regions, nr, v, k);
			goto err_rollback;
		}
		released += v[k]->physical;
	}

	/* Commit. */
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];

		a->handle = 0;
		a->backed = false;
		a->region->backed_bytes -= a->physical;
		if (a->backup)
			a->region->backup_bytes += a->size;
	}
	for (i = 0; i < nr; i++)
		__atomic_store_n(&regions[i]->state, CMS_STATE_PAUSED, __ATOMIC_RELAXED);
	if (res) {
		res->regions = nr;
		res->allocations = n;
		res->bytes_released = released;
		res->bytes_backed_up = backed_up;
		if (cms_free_bytes(ctx, regions, nr, &res->driver_free_after))
			res->driver_free_after = 0; /* the pause itself succeeded */
		res->elapsed_ns = cms_now_ns() - t0;
	}
	cms_log(ctx, CMS_LOG_INFO, "paused %zu regions, %zu allocations, %llu bytes in %.3f ms", nr,
		n, (unsigned long long)released, (double)(cms_now_ns() - t0) / 1e6);
	goto out;

err_rollback:
	if (rb) {
		cms_log(ctx, CMS_LOG_ERROR, "pause rollback failed: %s", cms_last_error());
		st = cms_set_error(CMS_ERR_ROLLBACK_FAILED, "%s; rollback failed too: %s", saved,
				   cms_last_error());
	} else {
		cms_set_error(st, "%s", saved);
	}
err_backups:
	cms_drop_backups(ctx, v, n);
out:
	free(v);
	return st;
}
