/* SPDX-License-Identifier: MIT */
/*
 * resume.c - transactional resume of a set of paused regions whose locks are held.
 *
 *   1. create a physical handle for every allocation without one (one per run
 *      of adjacent allocations, run.c)
 *   2. map + set access for every allocation not mapped (one mapping per run)
 *   3. restore content per policy and synchronize
 *   4. commit: drop host backups, states, epochs
 * Across devices (multidev.c) each device runs this on its own thread, and
 * the devices agree (cms_xdev_vote) before step 4: if one failed, the others
 * undo their steps 1-3 too.
 * On failure everything this call created or mapped is undone and every
 * allocation stays paused with its backup; a rollback that fails itself
 * leaves exact per-allocation state (and CMS_ERR_ROLLBACK_FAILED) for the
 * next call to finish.
 */
#include <stdlib.h>

#include "engine.h"

static bool needs_memory(struct cms_alloc *a)
{
	return !a->mapped || !a->handle;
}

/* Undoes steps 1-2 for v[0..n): unmaps and releases what this call made. Tries all. */
static cms_status undo(struct cms_alloc **v, size_t n, const bool *had_handle)
{
	cms_status first = CMS_OK, st;
	size_t i;

	for (i = 0; i < n; i++) {
		st = cms_vmm_unmap(v[i]);
		if (!st && !had_handle[i])
			st = cms_vmm_release(v[i]);
		if (st && !first)
			first = st;
	}
	cms_run_dissolve(v, n); /* the runs this call planned, where released */
	return first;
}

/* Async resume: records the library streams' work in events and makes `stream` wait for them. */
static cms_status order_after_restore(cms_context *ctx, const int32_t *devs, size_t nd,
				      CUstream stream)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i, k;

	for (i = 0; i < nd && !st; i++) {
		struct cms_device *d = &ctx->devices[devs[i]];

		st = cms_switch_device(ctx, &cur, devs[i]);
		for (k = 0; k < CMS_COPY_STREAMS && !st; k++) {
			CU_TRY(ctx, cuEventRecord(d->events[k], d->streams[k]), st, out);
			CU_TRY(ctx, cuStreamWaitEvent(stream, d->events[k], 0), st, out);
		}
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

/* HOST allocations whose backups are restored by one copy (cms_backup_adjacent). */
struct restore_group {
	struct cms_alloc *first, *last;
	uint64_t len;
	size_t copies; /* copies issued by the call: the next one's stream */
};

/* Enqueues the copy of the group, if any, and empties it. */
static cms_status group_flush(cms_context *ctx, struct restore_group *g, int32_t *cur,
			      uint64_t *restored)
{
	struct cms_alloc *a = g->first;
	cms_status st;

	if (!a)
		return CMS_OK;
	st = cms_switch_device(ctx, cur, a->region->device);
	if (st)
		return st;
	CU_TRY(ctx,
	       cuMemcpyHtoDAsync(a->base, a->backup, g->len,
				 cms_copy_stream(ctx, a->region->device, g->copies++)),
	       st, out);
	*restored += g->len;
	cms_progress_note(g->len); /* issued (progress.c) */
	g->first = g->last = NULL;
	g->len = 0;
out:
	return st;
}

cms_status cms_engine_resume_dev(cms_context *ctx, struct cms_region **regions, size_t nr,
				 const cms_resume_options *o, cms_resume_result *res,
				 struct cms_xvote *xv)
{
	uint64_t t0 = cms_now_ns(), restored = 0, backed = 0;
	int32_t devs[CMS_MAX_DEVICES], cur = -1;
	char saved[512];
	struct cms_alloc **v;
	bool *had_handle = NULL;
	struct restore_group group = { 0 };
	size_t n, i, nd;
	cms_status st, rb;

	nd = cms_region_devices(regions, nr, devs);
	st = cms_collect_allocs(regions, nr, needs_memory, &v, &n);
	if (st)
		return st;
	if (n) {
		had_handle = malloc(n * sizeof(*had_handle));
		if (!had_handle) {
			st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
					   "cannot allocate a work list");
			goto out;
		}
	}
	/* Adjacent allocations share one handle and one mapping (run.c); v is in address order
	 * (cms_collect_allocs). */
	st = cms_run_plan(v, n);
	for (i = 0; i < n; i++)
		had_handle[i] = v[i]->handle != 0;
	if (st)
		goto err;
	/* Pipelined: a copy runs while the next allocations are created and mapped. HOST
	 * allocations adjacent on both sides share one copy (up to CMS_COPY_MERGE_MAX bytes). */
	for (i = 0; i < n && !st; i++) {
		struct cms_alloc *a = v[i];

		if (!a->handle)
			st = cms_vmm_create(a);
		if (!st && !a->mapped)
			st = cms_vmm_map(a);
		if (st)
			break;
		backed += a->physical;
		if (a->region->policy == CMS_POLICY_DISK)
			continue; /* batched below */
		if (a->region->policy == CMS_POLICY_HOST && a->saved) {
			if (!group.first || !cms_backup_adjacent(group.last, a) ||
			    group.len + a->size > CMS_COPY_MERGE_MAX)
				st = group_flush(ctx, &group, &cur, &restored);
			if (st)
				break;
			if (!group.first)
				group.first = a;
			group.last = a;
			group.len += a->size;
			continue;
		}
		st = group_flush(ctx, &group, &cur, &restored);
		if (!st)
			st = cms_switch_device(ctx, &cur, a->region->device);
		if (!st)
			st = cms_restore_content(
				ctx, a, cms_copy_stream(ctx, a->region->device, group.copies++),
				&restored);
	}
	if (!st)
		st = group_flush(ctx, &group, &cur, &restored);
	cms_switch_done(ctx, &cur);
	if (!st) /* DISK: read back and copied, synchronously (disk.c) */
		st = cms_disk_restore(ctx, v, n, &restored);
	if (!st && (o->flags & CMS_RESUME_ASYNC)) {
		st = order_after_restore(ctx, devs, nd, (CUstream)(uintptr_t)o->stream);
		if (!st)
			st = cms_xdev_vote(xv); /* every device backed: commit */
		if (!st)
			goto commit;
		/* else: the copies may still run, wait for them below before undoing */
	}
	rb = cms_sync_streams(ctx, devs, nd); /* also after a failure: copies may be in flight */
	if (!st)
		st = rb;
	if (!st && !(o->flags & CMS_RESUME_ASYNC))
		st = cms_xdev_vote(xv); /* every device backed and restored: commit */
	if (st)
		goto err;
commit:

	/* Commit. */
	for (i = 0; i < n; i++) {
		/* The buffer is kept for the next pause unless the region gives host memory back.
		 */
		cms_alloc_set_saved(v[i], false);
		if (v[i]->region->flags & CMS_REGION_RELEASE_HOST) /* never async: refused */
			cms_backup_free(ctx, v[i]);
	}
	for (i = 0; i < nr; i++) {
		struct cms_alloc *a;

		/* Also allocations an earlier failed call left mapped: their saved copy is stale.
		 */
		for (a = regions[i]->allocs; a; a = a->next)
			if (a->mapped)
				cms_alloc_set_saved(a, false);
		cms_disk_trim(regions[i]); /* a resumed region's file content is stale */
		__atomic_store_n(&regions[i]->state, CMS_STATE_ACTIVE, __ATOMIC_RELAXED);
		regions[i]->epoch++;
		regions[i]->restore_pending = (o->flags & CMS_RESUME_ASYNC) != 0;
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
	goto out;

err:
	cms_last_error_message(saved, sizeof(saved));
	rb = undo(v, n, had_handle);
	st = cms_rollback_status(ctx, st, saved, rb, "resume");
out:
	cms_run_dissolve(v, n); /* a plan left by a failure before the undo */
	free(had_handle);
	free(v);
	return st;
}
