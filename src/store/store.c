/* SPDX-License-Identifier: MIT */
/*
 * store.c - the table of restore policies (by CMS_POLICY_* number) and the
 * helpers that apply a policy's operations to lists of allocations of any
 * policies. Adding a policy: one file with its struct cms_store_ops, one entry
 * here, one CMS_POLICY_* number in the public header.
 */
#include <stdlib.h>

#include "store_internal.h"

static const struct cms_store_ops *const table[] = {
	&cms_store_discard, /* CMS_POLICY_DISCARD */
	&cms_store_zero,    /* CMS_POLICY_ZERO */
	&cms_store_host,    /* CMS_POLICY_HOST */
	&cms_store_disk,    /* CMS_POLICY_DISK */
};

#define NPOLICIES (sizeof(table) / sizeof(table[0]))

const struct cms_store_ops *cms_store_of(const struct cms_region *r)
{
	return table[r->policy];
}

uint32_t cms_store_count(void)
{
	return NPOLICIES;
}

cms_status cms_store_check(struct cms_region **regions, size_t n)
{
	cms_status st;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct cms_store_ops *ops = cms_store_of(regions[i]);

		st = ops->check ? ops->check(regions[i]) : CMS_OK;
		if (st)
			return st;
	}
	return CMS_OK;
}

/* An operation of a policy over a list of its allocations (save or restore). */
typedef cms_status (*list_op)(struct cms_lanes *, struct cms_alloc **, size_t, uint64_t *);

/*
 * For each policy for which pick() gives an operation, calls it for the allocations of
 * v[0..n) of that policy for which want() holds (all when want is NULL), in v's order.
 */
static cms_status each_policy(struct cms_lanes *l, struct cms_alloc **v, size_t n,
			      list_op (*pick)(const struct cms_store_ops *ops, bool arg), bool arg,
			      bool (*want)(const struct cms_alloc *a), uint64_t *bytes)
{
	struct cms_alloc **w;
	cms_status st = CMS_OK;
	uint32_t p;
	size_t i, k;

	if (!n)
		return CMS_OK;
	w = malloc(n * sizeof(*w));
	if (!w)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
	for (p = 0; p < NPOLICIES && !st; p++) {
		list_op fn = pick(table[p], arg);

		for (i = k = 0; fn && i < n; i++)
			if (cms_store_of(v[i]->region) == table[p] && (!want || want(v[i])))
				w[k++] = v[i];
		st = k ? fn(l, w, k, bytes) : CMS_OK;
	}
	free(w);
	return st;
}

bool cms_store_current(const struct cms_alloc *a)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);
	void *host;

	return cms_alloc_store(a)->current && a->mapped && ops->save && ops->backup_held &&
	       ops->backup_held(a, &host);
}

uint64_t cms_store_unchanged_bytes(const struct cms_alloc *a)
{
	return cms_store_current(a) ? cms_span_live_bytes(a, 0, a->size) : 0;
}

void cms_store_stale(struct cms_region *r)
{
	struct cms_alloc *a;

	for (a = r->allocs; a; a = a->next)
		cms_alloc_store(a)->current = false;
}

/* A mapped allocation whose content the store does not hold already. */
static bool needs_copy(const struct cms_alloc *a)
{
	return a->mapped && !cms_store_current(a);
}

static list_op pick_save(const struct cms_store_ops *ops, bool sync)
{
	return ops->save_sync == sync ? ops->save : NULL;
}

cms_status cms_store_save(struct cms_lanes *l, struct cms_alloc **v, size_t n, bool sync,
			  uint64_t *bytes)
{
	size_t i;

	for (i = 0; i < n; i++) /* a buffer being made ahead (host_ahead.c): waited for, used */
		if (!i || v[i]->region != v[i - 1]->region)
			cms_store_prepare_take(v[i]->region, false);
	for (i = 0; i < n; i++) /* frozen: the backup holds the content (no copy) */
		if (cms_store_current(v[i]))
			cms_alloc_set_saved(v[i], true);
	return each_policy(l, v, n, pick_save, sync, needs_copy, bytes);
}

bool cms_store_save_ready(struct cms_alloc **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct cms_store_ops *ops = cms_store_of(v[i]->region);

		if (needs_copy(v[i]) && ops->save &&
		    (ops->save_sync || !ops->save_ready || !ops->save_ready(v[i])))
			return false;
	}
	return true;
}

bool cms_store_saves_async(const struct cms_alloc *a)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);

	return ops->save && !ops->save_sync;
}

cms_status cms_store_restore(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	const struct cms_store_ops *ops = n ? cms_store_of(v[0]->region) : NULL;

	return ops && ops->restore ? ops->restore(l, v, n, bytes) : CMS_OK;
}

static list_op pick_batched_restore(const struct cms_store_ops *ops, bool unused)
{
	(void)unused;
	return ops->restore_batched ? ops->restore : NULL;
}

cms_status cms_store_restore_batched(struct cms_lanes *l, struct cms_alloc **v, size_t n,
				     uint64_t *bytes)
{
	return each_policy(l, v, n, pick_batched_restore, false, NULL, bytes);
}

void cms_store_resumed(cms_context *ctx, struct cms_alloc **v, size_t n,
		       struct cms_region **regions, size_t nr)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct cms_store_ops *ops = cms_store_of(v[i]->region);

		if (ops->resumed)
			ops->resumed(ctx, v[i]);
	}
	for (i = 0; i < nr; i++) {
		const struct cms_store_ops *ops = cms_store_of(regions[i]);

		if (ops->region_resumed)
			ops->region_resumed(regions[i]);
	}
}

cms_status cms_store_forget_begin(cms_context *ctx, struct cms_alloc *a)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);

	return ops->forget_begin ? ops->forget_begin(ctx, a) : CMS_OK;
}

void cms_store_forget(cms_context *ctx, struct cms_alloc *a)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);

	if (ops->forget)
		ops->forget(ctx, a);
}

void cms_store_forget_cancel(cms_context *ctx, struct cms_alloc *a)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);

	if (ops->forget_cancel)
		ops->forget_cancel(ctx, a);
}

void cms_store_trim(struct cms_region *r)
{
	const struct cms_store_ops *ops = cms_store_of(r);

	if (ops->trim)
		ops->trim(r);
}

cms_status cms_store_dir_set(struct cms_region *r, const char *dir)
{
	const struct cms_store_ops *ops = cms_store_of(r);

	if (!ops->dir_set)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "region \"%s\" has policy %u (%s), which keeps no file: only "
				     "CMS_POLICY_DISK regions have a disk directory",
				     r->tag, r->policy, ops->name);
	return ops->dir_set(r, dir);
}

void cms_store_call_done(struct cms_region **regions, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct cms_store_ops *ops = cms_store_of(regions[i]);

		if (ops->call_done)
			ops->call_done(regions[i]);
	}
}

void cms_store_region_close(struct cms_region *r)
{
	const struct cms_store_ops *ops = cms_store_of(r);

	cms_store_prepare_take(r, true); /* a buffer being made ahead goes back first */
	if (ops->region_close)
		ops->region_close(r);
}

uint64_t cms_store_progress_bytes(const struct cms_alloc *a, bool out)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);

	if (out && cms_store_current(a))
		return 0;
	return ops->progress_bytes ? ops->progress_bytes(a, out) : 0;
}

uint64_t cms_store_copy_bytes(const struct cms_alloc *a, bool out)
{
	if (!cms_store_of(a->region)->save || (out && cms_store_current(a)))
		return 0;
	return (out ? a->mapped : a->saved) ? cms_span_live_bytes(a, 0, a->size) : 0;
}

cms_status cms_store_backup(const struct cms_alloc *a, void **host)
{
	const struct cms_store_ops *ops = cms_store_of(a->region);

	*host = NULL;
	if (!ops->backup_held)
		return cms_set_error(CMS_ERR_NOT_SUPPORTED,
				     "region \"%s\" has policy %s: it keeps no content",
				     a->region->tag, ops->name);
	if (!ops->backup_held(a, host))
		return cms_set_error(CMS_ERR_NOT_PAUSED,
				     "0x%llx has no backup now (region \"%s\" %s)",
				     (unsigned long long)a->base, a->region->tag,
				     a->region->state == CMS_STATE_PAUSED ?
					     "is paused but kept no content of it" :
					     "is active and keeps no backup of it");
	return CMS_OK;
}

cms_status cms_store_backup_read(struct cms_alloc *a, uint64_t off, void *buf, uint64_t len)
{
	return cms_store_of(a->region)->backup_read(a, off, buf, len);
}

void cms_store_release_kept(struct cms_region *r, bool files)
{
	const struct cms_store_ops *ops = cms_store_of(r);

	cms_store_prepare_take(r, true); /* a buffer being made ahead goes too */
	if (ops->release_kept)
		ops->release_kept(r, files);
}
