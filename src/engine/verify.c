/* SPDX-License-Identifier: MIT */
/*
 * verify.c - verified backups (CMS_REGION_VERIFY): the out side of a call
 * checksums each allocation's device content before anything is saved or
 * released, the in side checksums the restored content once its copies are
 * done and compares. The checksum covers the bytes the store copies (the live
 * pieces: cms_range_discard declarations cannot change while the region is
 * paused, so both sides see the same pieces) and is computed on the device by
 * checksum.c. A checksum lives in the allocation's engine part from the
 * pause that took it to the next pause (which takes a new one or none); the
 * in side checks only allocations that have one, of regions that have the
 * flag now (cms_region_flags_set may clear it to take a backup back anyway).
 * What the checksum needs on the device (its kernel and a granule of scratch)
 * is held from the moment a region has the flag (verify_hold, its attach hook,
 * at its create or when cms_region_flags_set sets it) until it clears it or
 * goes (verify_release, detach), so a pause never needs device memory to
 * checksum.
 * A checksum counts only in the region's epoch it was taken in (a resume
 * that committed ends it) and is dropped when a rollback maps its allocation
 * again, so that a pause of the region without the flag (which runs no hook
 * of it) leaves none that a later resume could take for its own.
 * The engine runs these through the feature table (feature.c: attach, detach,
 * before_save, after_restore, rollback, plan, count).
 */
#include <stdlib.h>

#include "engine_internal.h"

static bool verified(const struct cms_alloc *a)
{
	return (a->region->flags & CMS_REGION_VERIFY) != 0;
}

/* What the checksum needs on device dev, held for a region that gets the flag; on failure
 * nothing is held. Pushes the device's context. */
static cms_status verify_hold(cms_context *ctx, int32_t dev)
{
	cms_status st = cms_push(ctx, dev);

	if (st)
		return st;
	st = cms_checksum_hold(ctx, dev);
	cms_pop(ctx);
	return st;
}

/* Gives a hold back: the last one of the device unloads the kernel and frees the scratch. */
static void verify_release(cms_context *ctx, int32_t dev)
{
	bool current = cms_push(ctx, dev) == CMS_OK;

	if (!current)
		cms_log(ctx, CMS_LOG_ERROR, "device %d: the checksum kernel stays loaded: %s", dev,
			cms_last_error());
	cms_checksum_release(ctx, dev, current);
	if (current)
		cms_pop(ctx);
}

/* Whether a has a checksum its next resume checks: taken in its region's epoch. */
static bool has_checksum(const struct cms_alloc *a)
{
	const struct cms_engine_alloc *e = cms_alloc_engine(a);

	return e->checksummed && e->checksum_epoch == a->region->epoch;
}

/* Bytes of a the in side would check (its live bytes, or 0). */
static uint64_t verify_bytes(const struct cms_alloc *a)
{
	return verified(a) && has_checksum(a) ? cms_span_live_bytes(a, 0, a->size) : 0;
}

/* The checksums of v[0..n) (mapped allocations) into sums[0..n), on stream; *bytes += the
 * bytes read; w->verify_ns += the time. */
static cms_status checksum(struct cms_work *w, CUstream stream, struct cms_alloc **v, size_t n,
			   uint64_t *sums, uint64_t *bytes)
{
	uint64_t t0 = cms_now_ns(), off, len;
	struct cms_checksum_span *s = NULL;
	size_t i, ns = 0, cap = 0;
	cms_status st = CMS_OK;

	for (i = 0; i < n; i++)
		cap += v[i]->ndiscarded + 1; /* live pieces: at most one more than the declared */
	s = malloc((cap ? cap : 1) * sizeof(*s));
	if (!s)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate checksum spans");
	for (i = 0; i < n; i++)
		for (off = 0; cms_span_next_live(v[i], &off, v[i]->size, &len); off += len) {
			s[ns++] = (struct cms_checksum_span){
				.ptr = v[i]->base + off, .len = len, .off = off, .slot = i
			};
			*bytes += len;
		}
	st = cms_checksum_device(w->ctx, w->dev, stream, s, ns, sums, n);
	free(s);
	w->verify_ns += cms_now_ns() - t0;
	return st;
}

/* The allocations of v[0..n) that pass, into a new array (*out, *m); NULL when none. */
static cms_status pick(struct cms_alloc **v, size_t n, bool (*pass)(const struct cms_alloc *),
		       struct cms_alloc ***out, size_t *m)
{
	size_t i;

	*out = NULL;
	*m = 0;
	for (i = 0; i < n; i++)
		*m += pass(v[i]);
	if (!*m)
		return CMS_OK;
	*out = malloc(*m * sizeof(**out));
	if (!*out)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a verify list");
	*m = 0;
	for (i = 0; i < n; i++)
		if (pass(v[i]))
			(*out)[(*m)++] = v[i];
	return CMS_OK;
}

static bool to_sum(const struct cms_alloc *a)
{
	return verified(a) && a->mapped;
}

static bool to_check(const struct cms_alloc *a)
{
	return verified(a) && a->mapped && has_checksum(a);
}

/* Out side, before any save: checksums the device content of w->vo's mapped allocations of
 * CMS_REGION_VERIFY regions on stream (the others of w->vo get none). */
static cms_status verify_out(struct cms_work *w, CUstream stream)
{
	struct cms_alloc **v;
	uint64_t *sums = NULL, bytes = 0;
	cms_status st;
	size_t i, n;

	for (i = 0; i < w->no; i++) /* a checksum is of the content this pause saves, or none */
		cms_alloc_engine(w->vo[i])->checksummed = false;
	st = pick(w->vo, w->no, to_sum, &v, &n);
	if (st || !n)
		return st;
	sums = malloc(n * sizeof(*sums));
	st = sums ? checksum(w, stream, v, n, sums, &bytes) :
		    cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate checksums");
	for (i = 0; !st && i < n; i++) {
		cms_alloc_engine(v[i])->checksum = sums[i];
		cms_alloc_engine(v[i])->checksum_epoch = v[i]->region->epoch;
		cms_alloc_engine(v[i])->checksummed = true;
	}
	free(sums);
	free(v);
	return st;
}

/* In side, once the restores are done: checksums the content of w->vi's allocations that have
 * a checksum, in regions with the flag, on stream; CMS_ERR_VERIFY_FAILED (naming the region
 * and the allocation) at the first mismatch. */
static cms_status verify_in(struct cms_work *w, CUstream stream)
{
	struct cms_alloc **v;
	uint64_t *sums = NULL, bytes = 0;
	cms_status st;
	size_t i, n;

	st = pick(w->vi, w->ni, to_check, &v, &n);
	if (st || !n)
		return st;
	sums = malloc(n * sizeof(*sums));
	st = sums ? checksum(w, stream, v, n, sums, &bytes) :
		    cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate checksums");
	for (i = 0; !st && i < n; i++) {
		const struct cms_engine_alloc *e = cms_alloc_engine(v[i]);

		if (sums[i] == e->checksum)
			continue;
		st = cms_set_error(
			CMS_ERR_VERIFY_FAILED,
			"region \"%s\": allocation 0x%llx: content restored differs "
			"from the content paused (checksum 0x%016llx, paused 0x%016llx); "
			"the backup is kept",
			v[i]->region->tag, (unsigned long long)v[i]->base,
			(unsigned long long)sums[i], (unsigned long long)e->checksum);
	}
	free(sums);
	free(v);
	return st;
}

/* A rolled back pause: an allocation mapped again holds its content, not the checksummed one
 * (one left without memory keeps its checksum for the resume that completes the pause). */
static void verify_rollback(struct cms_work *w)
{
	size_t i;

	for (i = 0; i < w->no; i++)
		if (w->vo[i]->mapped)
			cms_alloc_engine(w->vo[i])->checksummed = false;
}

/* Counters: the bytes a resume of r will check (before the call), the time it took (after). */
static void verify_plan(const struct cms_region *r, bool out, struct cms_counted *c)
{
	const struct cms_alloc *a;

	for (a = r->allocs; !out && a; a = a->next)
		if (cms_work_lacks_memory(a))
			c->verified += verify_bytes(a);
}

static void verify_count(const struct cms_work *w, const struct cms_region *r, bool out,
			 struct cms_counted *c)
{
	(void)r;
	(void)out;
	c->verify_ns = w->verify_ns;
}

const struct cms_feature_ops cms_feature_verify = {
	.attach = verify_hold,
	.detach = verify_release,
	.before_save = verify_out,
	.after_restore = verify_in,
	.rollback = verify_rollback,
	.plan = verify_plan,
	.count = verify_count,
};
