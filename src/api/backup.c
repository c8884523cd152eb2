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

#define CHANGEABLE (CMS_REGION_RELEASE_HOST | CMS_REGION_HOST_PAGEABLE | CMS_REGION_VERIFY)

CMS_API cms_status cms_region_flags_set(cms_region *region, uint64_t mask, uint64_t flags)
{
	struct cms_region *r = region;
	uint64_t next, changed;
	cms_status st;

	if (!r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(r->ctx);
	if (st)
		return st;
	if (mask & ~(uint64_t)CHANGEABLE)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "region flags 0x%llx cannot be changed (only 0x%llx can)",
				     (unsigned long long)(mask & ~(uint64_t)CHANGEABLE),
				     (unsigned long long)CHANGEABLE);
	if (flags & ~mask)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "flags 0x%llx are outside the mask 0x%llx",
				     (unsigned long long)flags, (unsigned long long)mask);
	if ((flags & CMS_REGION_HOST_PAGEABLE) && r->policy != CMS_POLICY_HOST) /* as at create */
		return cms_set_error(
			CMS_ERR_INVALID_ARGUMENT,
			"CMS_REGION_HOST_PAGEABLE needs CMS_POLICY_HOST (region \"%s\" has "
			"policy %u)",
			r->tag, r->policy);
	st = cms_region_verify_check(flags, r->policy); /* as at create */
	if (st)
		return st;
	pthread_mutex_lock(&r->lock);
	next = (r->flags & ~mask) | flags;
	changed = r->flags ^ next;
	if ((changed & CMS_REGION_HOST_PAGEABLE) && r->state != CMS_STATE_ACTIVE) {
		st = cms_set_error(CMS_ERR_PAUSED,
				   "region \"%s\" is paused: its backups are where they are until "
				   "it is resumed",
				   r->tag);
		goto out;
	}
	if (changed & next & CMS_REGION_VERIFY) {
		/* held from now on, so that a pause on a full device need not find memory */
		st = cms_verify_hold(r->ctx, r->device);
		if (st)
			goto out; /* nothing changed */
	}
	/* Active and asked to keep less: what it keeps goes now, once no copy reads it. */
	if (r->state == CMS_STATE_ACTIVE &&
	    ((next & CMS_REGION_RELEASE_HOST) || (changed & CMS_REGION_HOST_PAGEABLE))) {
		st = cms_region_settle(r);
		if (st)
			goto err_verify; /* nothing changed */
		cms_store_release_kept(r, next & CMS_REGION_RELEASE_HOST);
	}
	r->flags = next;
	if (changed & ~next & CMS_REGION_VERIFY)
		cms_verify_release(r->ctx, r->device); /* the region's hold */
	/* What it keeps may have gone: a frozen region's next pause copies. CMS_REGION_VERIFY
	 * changes no backup (the next pause checksums the memory, copied or not). */
	if (changed & ~(uint64_t)CMS_REGION_VERIFY)
		cms_store_stale(r);
	cms_prepare_kick(r); /* CMS_REGION_PREPARE without CMS_REGION_RELEASE_HOST: again */
	cms_log(r->ctx, CMS_LOG_DEBUG, "region \"%s\": flags 0x%llx", r->tag,
		(unsigned long long)next);
	goto out;

err_verify:
	if (changed & next & CMS_REGION_VERIFY)
		cms_verify_release(r->ctx, r->device);
out:
	pthread_mutex_unlock(&r->lock);
	return st;
}
