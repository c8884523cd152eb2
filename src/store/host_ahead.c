/* SPDX-License-Identifier: MIT */
/*
 * host_ahead.c - host backups made ahead (CMS_REGION_PREPARE): the store's half
 * of the background preparation (engine/preparer.c runs the thread).
 *
 * A job is one host buffer for a group of allocations of one region that have
 * no backup yet, the group host_policy.c's first pause would make (consecutive in
 * address order, up to one buffer's worth). It is planned under the region's
 * lock (the bases and sizes only: no pointer to an allocation survives the
 * unlock), made without the lock (mmap, faulting in, cuMemHostRegister: the
 * slow steps, which must not hold up cms_alloc, cms_free or a pause), and
 * attached under the lock again to the planned allocations that still need
 * it, found again by base and size: an allocation freed meanwhile leaves a
 * hole that a later pause fills (host_holes.c, cms_host_reuse_holes); when none is left the
 * buffer goes back. Whoever takes the region's lock meanwhile sees the job in
 * flight (cms_store_region.prep_job): a pause waits for the buffer and uses
 * it (no work done twice), a flag change or a destroy cancels it (the making
 * stops at the next slice) and waits, so that no buffer outlives its region.
 *
 * Nothing here fails a call: a buffer that cannot be made or faulted in is
 * given back and the pause makes its own; one that cannot be page-locked is
 * attached pageable and page-locked by its first copy, as the pause would try
 * it. The reason is kept in the job for the thread's log (debug level).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_internal.h"

static size_t round_page(uint64_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (size_t)((n + pg - 1) & ~(uint64_t)(pg - 1));
}

/* An allocation that a buffer made ahead would serve: mapped, without a backup. */
static bool needs_backup(const struct cms_alloc *a)
{
	return a->mapped && !cms_alloc_store(a)->hostbuf;
}

static int by_base(const void *x, const void *y)
{
	const struct cms_alloc *a = *(struct cms_alloc *const *)x,
			       *b = *(struct cms_alloc *const *)y;

	return a->base < b->base ? -1 : a->base > b->base;
}

/* r's allocations that need a backup, in address order, into *out (*n of them); false when
 * out of memory. */
static bool needing(struct cms_region *r, struct cms_alloc ***out, size_t *n)
{
	struct cms_alloc *a, **v;
	size_t k = 0;

	for (a = r->allocs; a; a = a->next)
		k += needs_backup(a);
	*n = 0;
	*out = NULL;
	if (!k)
		return true;
	v = malloc(k * sizeof(*v));
	if (!v)
		return false;
	for (a = r->allocs; a; a = a->next)
		if (needs_backup(a))
			v[(*n)++] = a;
	qsort(v, *n, sizeof(*v), by_base);
	*out = v;
	return true;
}

static void plan_free(struct cms_prep_job *j)
{
	free(j->base);
	free(j->size);
	free(j->off);
	j->base = j->size = NULL;
	j->off = NULL;
}

bool cms_store_prepare_wanted(const struct cms_region *r)
{
	return r->policy == CMS_POLICY_HOST && (r->flags & CMS_REGION_PREPARE) &&
	       !(r->flags & CMS_REGION_RELEASE_HOST) && r->state == CMS_STATE_ACTIVE && !r->dead &&
	       !r->dying && !cms_region_store(r)->prep_job;
}

bool cms_store_prepare_plan(struct cms_region *r, struct cms_prep_job *j)
{
	uint64_t max = cms_hostbuf_group_max(r);
	struct cms_alloc **v;
	size_t n, k, len = 0;

	memset(j, 0, sizeof(*j));
	if (!cms_store_prepare_wanted(r) || !needing(r, &v, &n) || !n)
		return false;
	for (k = 0; k < n && (!k || len + round_page(v[k]->size) <= max); k++)
		len += round_page(v[k]->size);
	j->base = malloc(k * sizeof(*j->base));
	j->size = malloc(k * sizeof(*j->size));
	j->off = malloc(k * sizeof(*j->off));
	if (!j->base || !j->size || !j->off || pthread_mutex_init(&j->lock, NULL)) {
		plan_free(j);
		free(v);
		return false;
	}
	if (pthread_cond_init(&j->cond, NULL)) {
		pthread_mutex_destroy(&j->lock);
		plan_free(j);
		free(v);
		return false;
	}
	for (j->n = 0; j->n < k; j->n++) {
		j->base[j->n] = v[j->n]->base;
		j->size[j->n] = v[j->n]->size;
		j->off[j->n] = j->len;
		j->len += round_page(v[j->n]->size);
	}
	j->device = r->device;
	j->pageable = (r->flags & CMS_REGION_HOST_PAGEABLE) != 0;
	atomic_init(&j->cancel, false);
	cms_region_store(r)->prep_job = j;
	free(v);
	return true;
}

static bool stopped(struct cms_prep_job *j, const atomic_bool *stop)
{
	return atomic_load(&j->cancel) || (stop && atomic_load(stop));
}

void cms_store_prepare_build(cms_context *ctx, struct cms_prep_job *j, const atomic_bool *stop)
{
	const struct cms_store_tunables *t = &cms_ctx_store(ctx)->tune;
	uint64_t t0 = cms_now_ns();
	size_t step = t->prep_slice ? t->prep_slice : j->len, off = 0;

	j->hb = cms_hostbuf_new(ctx, j->device, j->len, j->pageable);
	if (!j->hb)
		snprintf(j->why, sizeof(j->why), "cannot map %zu bytes", j->len);
	if (t->prep_noprefault) /* as a pause's workers: the registration faults */
		off = j->len;
	for (; j->hb && off < j->len && !stopped(j, stop); off += step)
		if (!cms_hostbuf_fault(j->hb, off, j->len - off < step ? j->len - off : step)) {
			snprintf(j->why, sizeof(j->why), "no host memory to fault in %zu bytes",
				 j->len);
			break;
		}
	if (j->hb && off < j->len) { /* failed or cancelled: the pause makes its own */
		cms_hostbuf_free(ctx, j->hb);
		j->hb = NULL;
	}
	if (j->hb && !j->pageable && !stopped(j, stop) && !cms_hostbuf_pin(ctx, j->hb))
		snprintf(j->why, sizeof(j->why),
			 "cuMemHostRegister of %zu bytes refused: kept pageable, the pause tries "
			 "again",
			 j->len);
	if (j->hb && stopped(j, stop)) {
		cms_hostbuf_free(ctx, j->hb);
		j->hb = NULL;
	}
	j->ns = cms_now_ns() - t0;
	pthread_mutex_lock(&j->lock);
	j->built = true;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* Attaches j's buffer to the planned allocations of r still without a backup (base and size
 * unchanged); returns it when none is left (not attached). */
static struct cms_hostbuf *attach(struct cms_region *r, struct cms_prep_job *j)
{
	struct cms_hostbuf *hb = j->hb;
	struct cms_alloc **v, **use = NULL;
	size_t n, i = 0, k = 0, m = 0, *off = NULL;

	if (!hb || !cms_store_prepare_wanted(r) || !needing(r, &v, &n))
		return hb;
	if (n) {
		use = malloc(n * sizeof(*use));
		off = malloc(n * sizeof(*off));
	}
	while (use && off && i < n && k < j->n) { /* both in address order */
		if (v[i]->base < j->base[k]) {
			i++;
		} else if (v[i]->base > j->base[k]) {
			k++;
		} else {
			if (v[i]->size == j->size[k]) {
				use[m] = v[i];
				off[m++] = j->off[k];
			}
			i++;
			k++;
		}
	}
	if (m) {
		cms_hostbuf_attach(r, hb, use, off, m);
		cms_region_store(r)->bytes_prepared += cms_hostbuf_len(hb);
		hb = NULL;
	}
	free(off);
	free(use);
	free(v);
	return hb;
}

static void job_done(struct cms_prep_job *j)
{
	pthread_cond_destroy(&j->cond);
	pthread_mutex_destroy(&j->lock);
	plan_free(j);
}

struct cms_hostbuf *cms_store_prepare_finish(struct cms_region *r, struct cms_prep_job *j)
{
	struct cms_hostbuf *hb = NULL;

	if (!j->taken) {
		cms_region_store(r)->prep_job = NULL;
		cms_region_store(r)->prepare_ns += j->ns;
		hb = attach(r, j);
	}
	job_done(j);
	return hb;
}

void cms_store_prepare_take(struct cms_region *r, bool cancel)
{
	struct cms_prep_job *j = cms_region_store(r)->prep_job;
	struct cms_hostbuf *hb;

	if (!j)
		return;
	if (cancel)
		atomic_store(&j->cancel, true);
	pthread_mutex_lock(&j->lock);
	while (!j->built)
		pthread_cond_wait(&j->cond, &j->lock);
	pthread_mutex_unlock(&j->lock);
	j->taken = true; /* the making thread frees only the plan (cms_store_prepare_finish) */
	cms_region_store(r)->prep_job = NULL;
	cms_region_store(r)->prepare_ns += j->ns;
	hb = cancel ? j->hb : attach(r, j);
	if (hb)
		cms_hostbuf_free(r->ctx, hb);
}

void cms_store_prepare_free(cms_context *ctx, struct cms_hostbuf *hb)
{
	cms_hostbuf_free(ctx, hb);
}
