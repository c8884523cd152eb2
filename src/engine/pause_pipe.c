/* SPDX-License-Identifier: MIT */
/*
 * pause_pipe.c - steady-state pause of HOST allocations with the release
 * overlapped with the copies.
 *
 * Once every HOST allocation has its host buffer (every pause after the
 * first), a pause is a plain DMA plus the release of the memory, and
 * releasing after all copies (~1 ms per GiB on an H200) costs 3-5% of the
 * copy time. Here the copies are enqueued in batches of about BATCH bytes
 * (whole runs, run.c), an event recorded on every library stream after each
 * batch, and each batch is unmapped and released as soon as its events
 * complete, while the next batches copy. The content of a released
 * allocation is in its backup, so the pause's rollback restores it like any
 * released HOST allocation: the pause stays all or nothing.
 */
#include <stdlib.h>

#include "engine.h"

#define BATCH (1ull << 30)
#define BATCH_SIM (256ull << 10) /* the host simulation: small tests, many batches */
#define TAPER_MIN 16		 /* the smallest batch: BATCH / 16 (64 MiB) */

static uint64_t batch_bytes(const cms_context *ctx)
{
	return ctx->drv.is_sim ? BATCH_SIM : BATCH;
}

static bool early(const struct cms_alloc *a)
{
	return a->region->policy == CMS_POLICY_HOST && a->mapped;
}

bool cms_pause_can_pipeline(struct cms_alloc **v, size_t n, size_t ndevices, bool other_devices)
{
	uint64_t bytes = 0;
	size_t i;

	/* Releasing early is safe only when nothing may fail after it but what the rollback
	 * can redo from the backups: not while other devices of the call may still fail, and
	 * not before a DISK write (a full disk) in the same call. */
	if (ndevices != 1 || other_devices || !n)
		return false;
	for (i = 0; i < n; i++)
		if (v[i]->region->policy == CMS_POLICY_DISK && v[i]->mapped)
			return false;
	for (i = 0; i < n; i++) {
		if (!early(v[i]))
			continue;
		if (!v[i]->hostbuf) /* a first cycle: buffers are made while copying (host.c) */
			return false;
		bytes += v[i]->physical;
	}
	return bytes > batch_bytes(v[0]->region->ctx);
}

struct batch {
	size_t first, end;
	CUevent ev[CMS_COPY_STREAMS];
};

/*
 * Splits the early allocations of v (in address order) into batches of whole
 * runs: a batch closes once it holds min(BATCH, half of what is left) bytes,
 * but never below BATCH / TAPER_MIN (it may pass its cap by one allocation or
 * the rest of a run). The last batches are thus small, and so are the
 * releases that nothing overlaps (1 GiB of 8 MiB handles: ~7 ms on an H200).
 */
static size_t plan(struct cms_alloc **v, size_t n, struct batch *b)
{
	uint64_t max = batch_bytes(v[0]->region->ctx), left = 0;
	size_t k, nb = 0;

	for (k = 0; k < n; k++)
		left += early(v[k]) ? v[k]->physical : 0;
	k = 0;
	while (k < n) {
		uint64_t bytes = 0, cap = left / 2 < max ? left / 2 : max;

		if (!early(v[k])) {
			k++;
			continue;
		}
		if (cap < max / TAPER_MIN)
			cap = max / TAPER_MIN;
		b[nb].first = k;
		while (k < n && early(v[k]) &&
		       (bytes < cap || (v[k]->run && v[k]->run == v[k - 1]->run)))
			bytes += v[k++]->physical;
		b[nb++].end = k;
		left -= bytes;
	}
	return nb;
}

/* Waits for a batch's copies, then unmaps and releases its allocations. */
static cms_status release_batch(cms_context *ctx, struct cms_alloc **v, const struct batch *b,
				uint64_t *released)
{
	cms_status st = CMS_OK;
	uint64_t bytes = 0;
	size_t i, q;

	for (q = 0; q < CMS_COPY_STREAMS; q++)
		CU_TRY(ctx, cuEventSynchronize(b->ev[q]), st, out);
	for (i = b->first; i < b->end; i++) { /* a run goes with its first member */
		bytes += v[i]->handle ? v[i]->physical : 0;
		if (v[i]->run && cms_run_is_last(v[i]))
			bytes += v[i]->run->retained;
	}
	for (i = b->first; i < b->end && !st; i++) {
		st = cms_vmm_unmap(v[i]);
		if (!st)
			st = cms_vmm_release(v[i]);
	}
	if (!st)
		*released += bytes;
out:
	return st;
}

cms_status cms_pause_pipelined(cms_context *ctx, struct cms_alloc **v, size_t n, int32_t dev,
			       uint64_t *backed_up, uint64_t *released)
{
	struct cms_device *d = &ctx->devices[dev];
	struct batch *b;
	int32_t cur = -1;
	size_t nb, i, q, made = 0;
	cms_status st;

	b = calloc(n, sizeof(*b));
	if (!b)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
	nb = plan(v, n, b);
	st = cms_switch_device(ctx, &cur, dev);
	for (i = 0; i < nb && !st; i++) {
		uint64_t bytes = 0;

		st = cms_backup_copy_out(ctx, v + b[i].first, b[i].end - b[i].first, &bytes);
		*backed_up += bytes;
		for (q = 0; q < CMS_COPY_STREAMS && !st; q++) {
			CU_TRY(ctx, cuEventCreate(&b[i].ev[q], CU_EVENT_DISABLE_TIMING), st, out);
			made++;
			CU_TRY(ctx, cuEventRecord(b[i].ev[q], d->streams[q]), st, out);
		}
	}
	for (i = 0; i < nb && !st; i++)
		st = release_batch(ctx, v, &b[i], released);
out:
	for (i = 0; i < nb; i++)
		for (q = 0; q < CMS_COPY_STREAMS && made; q++, made--)
			ctx->drv.cuEventDestroy(b[i].ev[q]);
	cms_switch_done(ctx, &cur);
	free(b);
	return st;
}
