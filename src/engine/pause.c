/* SPDX-License-Identifier: MIT */
/*
 * pause.c - transactional pause of a set of regions whose locks are held.
 *
 *   0. wait for GPU work (context, stream or event synchronize)
 *   1. HOST policy: copy every allocation to a host buffer (in the steady state
 *      each batch is unmapped and released as soon as its copies are done,
 *      pause_pipe.c: its content is in the backup, so a rollback restores it)
 *   2. unmap every allocation          (failure: map the earlier ones again)
 *   3. release every physical handle   (failure: map the unreleased ones again,
 *                                       re-back the released ones per policy)
 *   4. commit: region states
 * Across devices (multidev.c) each device runs this on its own thread, and
 * the devices agree (cms_xdev_vote) after step 2 and after step 3: if one
 * failed, the others roll back too.
 * Only step 3's rollback can lose content, and only for DISCARD/ZERO. A
 * rollback tries every allocation; one it cannot restore keeps its exact
 * state (and its backup), so that the next pause, resume or free completes it.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

cms_status cms_collect_allocs(struct cms_region **regions, size_t n,
			      bool (*want)(struct cms_alloc *), struct cms_alloc ***out,
			      size_t *count)
{
	struct cms_alloc **v, *a;
	size_t i, k = 0, total = 0;

	for (i = 0; i < n; i++)
		total += regions[i]->nallocs;
	*out = NULL;
	*count = 0;
	if (!total)
		return CMS_OK;
	v = malloc(total * sizeof(*v));
	if (!v)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate a work list of %zu", total);
	for (i = 0; i < n; i++)
		for (a = regions[i]->allocs; a; a = a->next)
			if (want(a))
				v[k++] = a;
	/* Address order: runs' members consecutive (run.c), backups laid out like the device
	 * bytes so that copies cover adjacent allocations (host.c), DISK slots in order. */
	cms_run_order(v, k);
	*out = v;
	*count = k;
	return CMS_OK;
}

size_t cms_region_devices(struct cms_region **regions, size_t n, int32_t *devs)
{
	uint64_t seen = 0;
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		uint64_t bit = 1ull << regions[i]->device; /* device < CMS_MAX_DEVICES = 64 */

		if (!(seen & bit))
			devs[k++] = regions[i]->device;
		seen |= bit;
	}
	return k;
}

/* Sum of cuMemGetInfo free bytes over devs. */
static cms_status free_bytes(cms_context *ctx, const int32_t *devs, size_t nd, uint64_t *sum)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i, f, t;

	*sum = 0;
	for (i = 0; i < nd && !st; i++) {
		st = cms_switch_device(ctx, &cur, devs[i]);
		if (st)
			break;
		CU_TRY(ctx, cuMemGetInfo(&f, &t), st, out);
		*sum += f;
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

static cms_status wait_for_work(cms_context *ctx, const int32_t *devs, size_t nd,
				const cms_pause_options *o)
{
	int32_t cur = -1;
	cms_status st = CMS_OK;
	size_t i;

	if (o->flags & CMS_PAUSE_NO_SYNC)
		return CMS_OK;
	if (o->stream || o->event) {
		st = cms_switch_device(ctx, &cur, devs[0]);
		if (st)
			return st;
		if (o->stream)
			CU_TRY(ctx, cuStreamSynchronize((CUstream)(uintptr_t)o->stream), st, out);
		if (o->event)
			CU_TRY(ctx, cuEventSynchronize((CUevent)(uintptr_t)o->event), st, out);
		goto out;
	}
	for (i = 0; i < nd && !st; i++) {
		st = cms_switch_device(ctx, &cur, devs[i]);
		if (st)
			break;
		CU_TRY(ctx, cuCtxSynchronize(), st, out);
	}
out:
	cms_switch_done(ctx, &cur);
	return st;
}

/*
 * After a failed pause: forgets the content this call saved for allocations
 * that are mapped again (their content is on the device) and frees the
 * buffers it made for them; an allocation left unmapped keeps both.
 */
static void drop_fresh_backups(cms_context *ctx, struct cms_alloc **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];

		if (a->mapped) /* the device holds the content: a saved copy is stale */
			cms_alloc_set_saved(a, false);
		if (a->mapped && a->fresh_buffer)
			cms_backup_free(ctx, a);
		a->fresh_saved = a->fresh_buffer = false;
	}
}

cms_status cms_restore_content(cms_context *ctx, struct cms_alloc *a, CUstream s, uint64_t *bytes)
{
	cms_status st = CMS_OK;

	switch (a->region->policy) {
	case CMS_POLICY_HOST:
		if (!a->saved)
			break; /* content was never saved (see cms_alloc_release); undefined */
		CU_TRY(ctx, cuMemcpyHtoDAsync(a->base, a->backup, a->size, s), st, out);
		*bytes += a->size;
		break;
	case CMS_POLICY_ZERO:
		CU_TRY(ctx, cuMemsetD8Async(a->base, 0, a->physical, s), st, out);
		break;
	case CMS_POLICY_DISK: /* synchronous, its own streams (a rollback; resume batches) */
		st = cms_disk_restore(ctx, &a, 1, bytes);
		break;
	default:
		break;
	}
out:
	return st;
}

/*
 * Rollback of steps 2-3: makes every allocation of v mapped again, with its
 * content per policy where its memory was released. Tries all; returns the
 * first failure.
 */
static cms_status rollback(cms_context *ctx, struct cms_alloc **v, size_t n, const int32_t *devs,
			   size_t nd)
{
	cms_status first = CMS_OK, st;
	int32_t cur = -1;
	uint64_t unused = 0;
	size_t i;

	for (i = 0; i < n; i++) /* a run's members get their handle with the first one */
		v[i]->rollback_released = !v[i]->handle;
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];
		size_t k;

		st = cms_vmm_back(a);
		/* Once mapped, every released member of its run gets its content back (a member
		 * whose own attempt failed earlier is mapped now by a later one). */
		for (k = 0; !st && k < (a->run ? a->run->nslots : 1); k++) {
			struct cms_alloc *m = a->run ? a->run->slots[k].a : a;

			if (!m || !m->rollback_released || !m->mapped)
				continue;
			m->rollback_released = false;
			st = cms_switch_device(ctx, &cur, m->region->device);
			if (!st)
				st = cms_restore_content(ctx, m,
							 cms_copy_stream(ctx, m->region->device, i),
							 &unused);
		}
		if (st && !first)
			first = st;
	}
	cms_switch_done(ctx, &cur);
	st = cms_sync_streams(ctx, devs, nd);
	return first ? first : st;
}

static bool has_memory(struct cms_alloc *a)
{
	return a->mapped || a->handle;
}

cms_status cms_engine_pause_dev(cms_context *ctx, struct cms_region **regions, size_t nr,
				const cms_pause_options *o, cms_pause_result *res,
				struct cms_xvote *xv)
{
	uint64_t t0 = cms_now_ns(), backed_up = 0, released = 0;
	int32_t devs[CMS_MAX_DEVICES];
	char saved[512];
	struct cms_alloc **v;
	size_t n, i, nd;
	cms_status st, rb;

	nd = cms_region_devices(regions, nr, devs);
	st = cms_disk_check(regions, nr); /* a DISK region needs its directory */
	if (st)
		return st;
	for (i = 0; i < nr; i++) { /* an async resume's copies must be done first */
		st = cms_region_settle(regions[i]);
		if (st)
			return st;
	}
	st = cms_collect_allocs(regions, nr, has_memory, &v, &n);
	if (st)
		return st;
	if (res && free_bytes(ctx, devs, nd, &res->driver_free_before))
		res->driver_free_before = 0; /* only a measurement: not a reason to fail */
	st = wait_for_work(ctx, devs, nd, o);
	if (st)
		goto out;
	if (cms_pause_can_pipeline(v, n, nd, xv != NULL)) /* HOST, steady state: release early */
		st = cms_pause_pipelined(ctx, v, n, devs[0], &backed_up, &released);
	else
		st = cms_backup_copy_out(ctx, v, n, &backed_up);
	rb = cms_sync_streams(ctx, devs, nd); /* also after a failure: copies may be in flight */
	if (!st)
		st = rb;
	if (!st) { /* DISK: written and synchronized (disk.c) */
		uint64_t disk_bytes = 0;

		st = cms_disk_copy_out(ctx, v, n, &disk_bytes);
		backed_up += disk_bytes;
	}
	if (st)
		goto err;

	for (i = 0; i < n; i++) {
		st = cms_vmm_unmap(v[i]);
		if (st)
			goto err;
	}
	st = cms_xdev_vote(xv); /* every device unmapped: nothing lost yet if one failed */
	if (st)
		goto err;
	for (i = 0; i < n; i++) { /* a run's handle goes with its first member (run.c) */
		released += v[i]->handle ? v[i]->physical : 0;
		if (v[i]->handle && v[i]->run && cms_run_is_last(v[i])) /* not released yet */
			released += v[i]->run->retained;
	}
	for (i = 0; i < n; i++) {
		st = cms_vmm_release(v[i]);
		if (st)
			goto err;
	}
	st = cms_xdev_vote(xv); /* every device released: commit (nothing fails after this) */
	if (st)
		goto err;

	/* Commit. */
	cms_run_dissolve(v, n); /* released runs: separate allocations until the next resume */
	for (i = 0; i < n; i++)
		v[i]->fresh_saved = v[i]->fresh_buffer = false;
	for (i = 0; i < nr; i++)
		__atomic_store_n(&regions[i]->state, CMS_STATE_PAUSED, __ATOMIC_RELAXED);
	if (res) {
		res->regions = nr;
		res->allocations = n;
		res->bytes_released = released;
		res->bytes_backed_up = backed_up;
		if (free_bytes(ctx, devs, nd, &res->driver_free_after))
			res->driver_free_after = 0;
		res->elapsed_ns = cms_now_ns() - t0;
	}
	cms_log(ctx, CMS_LOG_INFO, "paused %zu regions, %zu allocations, %llu bytes in %.3f ms", nr,
		n, (unsigned long long)released, (double)(cms_now_ns() - t0) / 1e6);
	goto out;

err:
	cms_last_error_message(saved, sizeof(saved));
	rb = rollback(ctx, v, n, devs, nd);
	st = cms_rollback_status(ctx, st, saved, rb, "pause");
	drop_fresh_backups(ctx, v, n);
out:
	free(v);
	return st;
}

/* ---- shared with swap.c ---- */

cms_status cms_pause_wait(cms_context *ctx, const int32_t *devs, size_t nd,
			  const cms_pause_options *o)
{
	return wait_for_work(ctx, devs, nd, o);
}

cms_status cms_pause_rollback(cms_context *ctx, struct cms_alloc **v, size_t n, const int32_t *devs,
			      size_t nd)
{
	return rollback(ctx, v, n, devs, nd);
}

void cms_pause_drop_fresh(cms_context *ctx, struct cms_alloc **v, size_t n)
{
	drop_fresh_backups(ctx, v, n);
}
