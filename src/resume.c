/* SPDX-License-Identifier: MIT */
/*
 * resume.c - transactional resume of a set of paused regions whose locks are held.
 *
 *   1. create every physical handle       (failure: release the created ones)
 *   2. map + set access for each          (failure: unmap the mapped, release all)
 *   3. restore content per policy, sync   (failure: unmap all, release all)
 *   4. commit: drop host backups, states, epochs
 * On failure every allocation stays paused with its backup.
 */
#include <stdlib.h>

#include "internal.h"

static void unmap_release(cms_context *ctx, struct cms_alloc **v, size_t mapped, size_t created)
{
	size_t i;

	for (i = 0; i < mapped; i++)
		ctx->drv.cuMemUnmap(v[i]->base, v[i]->physical);
	for (i = 0; i < created; i++) {
		ctx->drv.cuMemRelease(v[i]->handle);
		v[i]->handle = 0;
	}
}

cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t nr,
			     const cms_resume_options *o, cms_resume_result *res)
{
	uint64_t t0 = cms_now_ns(), restored = 0, backed = 0;
	struct cms_alloc **v;
	int32_t cur = -1;
	size_t n, i, created = 0, mapped = 0;
	cms_status st;

	(void)o;
	st = cms_collect_allocs(regions, nr, &v, &n);
	if (st)
		return st;
	for (; created < n; created++) {
		st = cms_vmm_create(v[created]->region, v[created]->physical, &v[created]->handle);
		if (st)
			goto err;
	}
	for (; mapped < n; mapped++) {
		st = cms_vmm_map(v[mapped], v[mapped]->handle);
		if (st)
			goto err;
		backed += v[mapped]->physical;
	}
	for (i = 0; i < n; i++) {
		st = cms_switch_device(ctx, &cur, v[i]->region->device);
		if (!st)
			st = cms_restore_content(ctx, v[i], &restored);
		if (st)
			break;
	}
	cms_switch_done(ctx, &cur);
	if (!st)
		st = cms_sync_streams(ctx, regions, nr);
	if (st)
		goto err;

	/* Commit. */
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];

		a->backed = true;
		a->region->backed_bytes += a->physical;
		if (a->backup)
			a->region->backup_bytes -= a->size;
	}
	cms_drop_backups(ctx, v, n);
	for (i = 0; i < nr; i++) {
		__atomic_store_n(&regions[i]->state, CMS_STATE_ACTIVE, __ATOMIC_RELAXED);
		regions[i]->epoch++;
	}
	if (res) {
		res->regions = nr;
		res->allocations = n;
		res->bytes_backed = backed;
		res->bytes_restored = restored;
		res->elapsed_ns = cms_now_ns() - t0;
	}
	cms_log(ctx, CMS_LOG_INFO, "resumed %zu regions, %zu allocations, %llu bytes in %.3f ms",
		nr, n, (unsigned long long)backed, (double)(cms_now_ns() - t0) / 1e6);
	free(v);
	return CMS_OK;

err:
	unmap_release(ctx, v, mapped, created);
	free(v);
	return st;
}
