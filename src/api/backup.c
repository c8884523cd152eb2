/* SPDX-License-Identifier: MIT */
/*
 * backup.c - host backups readable (cms_backup_get, cms_backup_read) and the
 * retention flags changeable between cycles (cms_region_flags_set), since 1.2.
 *
 * Both work under the region's lock, so they wait for a pause, resume or swap
 * of the region in progress and never see a backup half written. The store
 * says whether an allocation has a backup and where (store.c: backup_held).
 */
#include <string.h>

#include "api.h"

CMS_API cms_status cms_backup_get(cms_context *ctx, uint64_t ptr, cms_backup_info *info)
{
	cms_backup_info o;
	struct cms_alloc *a;
	cms_status st;
	void *host;

	if (!ctx || !info)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", ctx ? "info" : "ctx");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	st = CMS_CHECK_OUT(info, cms_backup_info);
	if (st)
		return st;
	st = cms_alloc_lock(ctx, ptr, "cms_backup_get", &a);
	if (st)
		return st;
	st = cms_store_backup(a, &host);
	if (!st) {
		memset(&o, 0, sizeof(o));
		o.struct_size = sizeof(o);
		o.base = a->base;
		o.size = a->size;
		o.host = host;
		o.policy = a->region->policy;
		o.state = a->region->state == CMS_STATE_PAUSED ? CMS_BACKUP_CURRENT :
								 CMS_BACKUP_RETAINED;
	}
	cms_alloc_unlock(ctx, a);
	if (!st)
		cms_copy_out(info, &o, sizeof(o));
	return st;
}

CMS_API cms_status cms_backup_read(cms_context *ctx, uint64_t ptr, void *buf, uint64_t len)
{
	struct cms_alloc *a;
	uint64_t off;
	cms_status st;
	void *host;

	if (!ctx || !buf)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", ctx ? "buf" : "ctx");
	st = cms_check_fork(ctx);
	if (st)
		return st;
	st = cms_alloc_lock(ctx, ptr, "cms_backup_read", &a);
	if (st)
		return st;
	off = ptr - a->base;
	if (len > a->size - off)
		st = cms_set_error(
			CMS_ERR_INVALID_ARGUMENT,
			"%llu bytes from 0x%llx pass the end of the allocation at 0x%llx "
			"(%llu bytes)",
			(unsigned long long)len, (unsigned long long)ptr,
			(unsigned long long)a->base, (unsigned long long)a->size);
	if (!st)
		st = cms_store_backup(a, &host);
	if (!st && len)
		st = cms_store_backup_read(a, off, buf, len);
	cms_alloc_unlock(ctx, a);
	return st;
}

CMS_API cms_status cms_region_flags_set(cms_region *region, uint64_t mask, uint64_t flags)
{
	struct cms_region *r = region;
	struct cms_feature_query q = {
		.when = CMS_FEATURE_CHANGE, .mask = mask, .flags = flags, .v = &r, .n = 1
	};
	cms_status st;

	if (!r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(r->ctx);
	if (st)
		return st;
	/* both checks under the lock: the rules of the flags set read the region's other
	 * flags, which a concurrent cms_region_flags_set changes under it */
	pthread_mutex_lock(&r->lock);
	st = cms_feature_check(&q); /* changeable, requires, excludes, policies */
	if (!st) {
		q.when = CMS_FEATURE_CHANGE_LOCKED; /* what depends on its state */
		st = cms_feature_check(&q);
	}
	if (!st)
		st = cms_engine_flags_set(r, (r->flags & ~mask) | flags);
	pthread_mutex_unlock(&r->lock);
	return st;
}
