/* SPDX-License-Identifier: MIT */
/*
 * overlap.c - the out side with its releases overlapped with its copies.
 *
 * Releasing after all copies (~1 ms per GiB on an H200) costs a few percent
 * of a pause's copy time; a swap's in side needs the memory as early as
 * possible. Here the saves are enqueued in batches of about BATCH bytes
 * (whole runs, run.c), an event recorded on each of the lanes' streams after
 * each batch, and each batch is unmapped and released as soon as its events
 * complete, while the next batches copy. The content of a released
 * allocation is in its store, so the rollback restores it like any released
 * allocation: the call stays all or nothing.
 *
 * A pause does this only when nothing may fail after an early release but
 * what the rollback can redo from the stores: one device in the call, and
 * every save asynchronous into storage that exists already (every pause after
 * the first), with more than a batch to copy (a frozen region's current
 * backups copy nothing; cms_out_can_overlap). A swap always does it, for every
 * allocation: its in side waits for these releases (in.c).
 */
#include <stdlib.h>

#include "engine_internal.h"

#define TAPER_MIN 16 /* the smallest batch: BATCH / 16 (64 MiB) */

/* BATCH: the tunable overlap_batch (1 GiB; the simulation an eighth of a granule). */
static uint64_t batch_bytes(const struct cms_work *w)
{
	const cms_context *ctx = w->ctx;

	return cms_tune_bytes(&cms_ctx_engine(ctx)->tune.overlap_batch,
			      ctx->devices[w->dev].granularity);
}

/* Whether a goes in a batch: every allocation (all), or the mapped ones its policy saves
 * asynchronously (the others follow the ordinary steps afterwards). The same for every member
 * of a run (one region): a batch releases a run whole. */
static bool early(const struct cms_alloc *a, bool all)
{
	return all || (a->mapped && cms_store_saves_async(a));
}

bool cms_out_can_overlap(const struct cms_work *w)
{
	uint64_t bytes = 0;
	size_t i;

	if (w->xv || !w->no || !cms_store_save_ready(w->vo, w->no))
		return false;
	for (i = 0; i < w->no; i++) /* what copies: a current backup is only marked saved */
		if (early(w->vo[i], false) && !cms_store_current(w->vo[i]))
			bytes += w->vo[i]->physical;
	return bytes > batch_bytes(w);
}

struct batch {
	size_t first, end;
	CUevent ev[CMS_COPY_STREAMS]; /* one per lane */
};

/*
 * Splits the early allocations of v (address order) into batches of whole
 * runs: a batch closes once it holds min(BATCH, half of what is left) bytes,
 * but never below BATCH / TAPER_MIN (it may pass its cap by one allocation or
 * the rest of a run). The last batches are thus small, and so are the
 * releases that nothing overlaps (1 GiB of 8 MiB handles: ~7 ms on an H200).
 */
static size_t plan(struct cms_alloc **v, size_t n, bool all, uint64_t max, struct batch *b)
{
	uint64_t left = 0;
	size_t k, nb = 0;

	for (k = 0; k < n; k++)
		left += early(v[k], all) ? v[k]->physical : 0;
	k = 0;
	while (k < n) {
		uint64_t bytes = 0, cap = left / 2 < max ? left / 2 : max;

		if (!early(v[k], all)) {
			k++;
			continue;
		}
		if (cap < max / TAPER_MIN)
			cap = max / TAPER_MIN;
		b[nb].first = k;
		while (k < n && early(v[k], all) &&
		       (bytes < cap || (cms_alloc_vmm(v[k])->run &&
					cms_alloc_vmm(v[k])->run == cms_alloc_vmm(v[k - 1])->run)))
			bytes += v[k++]->physical;
		b[nb++].end = k;
		left -= bytes;
	}
	return nb;
}

/* Tells the in side of a swap on this device that memory came free. */
static void signal_in_side(struct cms_work *w)
{
	pthread_mutex_lock(&w->lock);
	w->releases++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Waits for a batch's copies, then unmaps and releases its allocations. */
static cms_status release_batch(struct cms_work *w, const struct cms_lanes *l,
				const struct batch *b)
{
	cms_context *ctx = w->ctx;
	cms_status st = CMS_OK;
	uint64_t bytes = 0;
	size_t i, q;

	for (q = 0; q < l->count; q++)
		CU_TRY(ctx, cuEventSynchronize(b->ev[q]), st, out);
	/* a run goes with its first member; memory is held by a handle, or by a mapping alone
	 * (cms_vmm_unback) */
	for (i = b->first; i < b->end; i++)
		if (cms_work_holds_memory(w->vo[i]))
			bytes += cms_out_bytes(w->vo[i]);
	for (i = b->first; i < b->end && !st; i++) {
		st = cms_vmm_unmap(w->vo[i]);
		if (!st)
			st = cms_vmm_release(w->vo[i]);
	}
	if (!st)
		w->released += bytes;
out:
	return st;
}

/*
 * Every batch's saves are issued first, then the batches are released in order as their
 * copies complete. (A swap whose saves are slow to issue, a first cycle that makes host
 * buffers or DISK batches written before their release, would give its in side memory
 * sooner by releasing batch i - 1 once batch i is issued: docs/architecture.md, open points.)
 */
cms_status cms_out_overlapped(struct cms_work *w, struct cms_lanes *l, bool all)
{
	cms_context *ctx = w->ctx;
	struct batch *b;
	size_t nb, i, q, made = 0, done = 0;
	cms_status st = CMS_OK;

	if (!w->no)
		return CMS_OK;
	b = calloc(w->no, sizeof(*b));
	if (!b)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
	nb = plan(w->vo, w->no, all, batch_bytes(w), b);
	for (i = 0; i < nb && !st; i++) {
		size_t k = b[i].end - b[i].first;

		st = all ? cms_work_stop_check(w) : CMS_OK;
		if (st)
			break;
		st = cms_store_save(l, w->vo + b[i].first, k, false, &w->saved);
		if (!st) /* synchronous saves (a swap of DISK regions) are done here */
			st = cms_store_save(l, w->vo + b[i].first, k, true, &w->saved);
		for (q = 0; q < l->count && !st; q++) {
			CU_TRY(ctx, cuEventCreate(&b[i].ev[q], CU_EVENT_DISABLE_TIMING), st, out);
			made++;
			CU_TRY(ctx, cuEventRecord(b[i].ev[q], cms_lane_at(l, q)), st, out);
		}
	}
	for (; done < nb && !st; done++) {
		st = all ? cms_work_stop_check(w) : CMS_OK;
		if (!st)
			st = release_batch(w, l, &b[done]);
		if (!st && all)
			signal_in_side(w);
	}
out:
	for (i = 0; i < nb; i++)
		for (q = 0; q < l->count && made; q++, made--)
			cms_cleanup_event(ctx, l->dev, b[i].ev[q]);
	free(b);
	return st;
}
