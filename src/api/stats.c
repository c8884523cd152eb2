/* SPDX-License-Identifier: MIT */
/* stats.c - cms_region_stats_get and cms_region_list: counters and enumeration (since 1.2). */
#include <stdlib.h>
#include <string.h>

#include "api.h"

CMS_API cms_status cms_region_stats_get(cms_region *region, cms_region_stats *stats)
{
	cms_region_stats o;
	cms_status st;

	if (!region || !stats)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL",
				     region ? "stats" : "region");
	st = cms_check_fork(region->ctx);
	if (st)
		return st;
	st = CMS_CHECK_OUT(stats, cms_region_stats);
	if (st)
		return st;
	pthread_mutex_lock(&region->lock);
	cms_counters_read(region, &o);
	pthread_mutex_unlock(&region->lock);
	cms_copy_out(stats, &o, sizeof(o));
	return CMS_OK;
}

/* Every entry's struct_size: valid and the same (the array's stride). */
static cms_status check_entries(const cms_region_stats *v, size_t cap, size_t *stride)
{
	size_t i, first;
	cms_status st;

	if (!cap)
		return CMS_OK;
	st = CMS_CHECK_OUT(v, cms_region_stats);
	if (st)
		return st;
	memcpy(&first, v, sizeof(first));
	for (i = 1; i < cap; i++) {
		size_t sz;

		memcpy(&sz, (const char *)v + i * first, sizeof(sz));
		if (sz != first)
			return cms_set_error(CMS_ERR_STRUCT_SIZE,
					     "cms_region_stats entry %zu: struct_size %zu, entry 0 "
					     "has %zu",
					     i, sz, first);
	}
	*stride = first;
	return CMS_OK;
}

/* References the context's regions (creation order) into *out; *n of them. */
static cms_status reference_all(cms_context *ctx, struct cms_region ***out, size_t *n)
{
	struct cms_region *r, **v = NULL;
	size_t k = 0;

	pthread_mutex_lock(&ctx->lock);
	for (r = ctx->regions; r; r = r->next)
		k++;
	if (k) {
		v = malloc(k * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&ctx->lock);
			return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
					     "cannot allocate a region list");
		}
		k = 0;
		for (r = ctx->regions; r; r = r->next) {
			r->refs++; /* keeps r's memory past a concurrent destroy */
			v[k++] = r;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	*out = v;
	*n = k;
	return CMS_OK;
}

CMS_API cms_status cms_region_list(cms_context *ctx, cms_region_stats *v, size_t cap,
				   size_t *written, size_t *total)
{
	struct cms_region **regions = NULL;
	size_t i, n = 0, stride = 0, w = 0;
	cms_status st;

	if (!ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "ctx is NULL");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	if (!v && cap)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "v is NULL with cap %zu", cap);
	st = check_entries(v, cap, &stride);
	if (st)
		return st;
	st = reference_all(ctx, &regions, &n);
	if (st)
		return st;
	for (i = 0; i < n && w < cap; i++) {
		struct cms_region *r = regions[i];
		cms_region_stats o;
		bool dead;

		pthread_mutex_lock(&r->lock);
		dead = r->dead; /* set under its lock and the context's */
		if (!dead)
			cms_counters_read(r, &o);
		pthread_mutex_unlock(&r->lock);
		if (!dead)
			cms_copy_out((char *)v + w++ * stride, &o, sizeof(o));
	}
	pthread_mutex_lock(&ctx->lock);
	for (i = 0; i < n; i++)
		cms_region_unref_locked(regions[i]);
	pthread_mutex_unlock(&ctx->lock);
	free(regions);
	if (written)
		*written = w;
	if (total)
		*total = n;
	return CMS_OK;
}
