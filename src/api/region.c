/* SPDX-License-Identifier: MIT */
/* region.c - regions: creation by tag, lookup, destruction, info, allocation lists. */
#include <stdlib.h>
#include <string.h>

#include "api.h"

static struct cms_region *find_locked(cms_context *ctx, const char *tag, int32_t device)
{
	struct cms_region *r;

	for (r = ctx->regions; r; r = r->next)
		if (r->device == device && !strcmp(r->tag, tag))
			return r;
	return NULL;
}

static cms_status exists_error(const char *tag, int32_t device)
{
	return cms_set_error(CMS_ERR_EXISTS, "a region tagged \"%s\" exists on device %d", tag,
			     device);
}

cms_status cms_region_options_check(const cms_region_options *opts, cms_region_options *out)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_status st;

	if (opts) {
		st = CMS_COPY_IN(&o, opts, cms_region_options);
		if (st)
			return st;
	}
	if (o.policy >= cms_store_count())
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown restore policy %u",
				     o.policy);
	/* flags: the feature table's rules (engine/feature.c) */
	st = cms_feature_check(&(struct cms_feature_query){
		.when = CMS_FEATURE_CREATE, .flags = o.flags, .policy = o.policy });
	if (st)
		return st;
	*out = o;
	return CMS_OK;
}

CMS_API cms_status cms_region_create(cms_context *ctx, const char *tag,
				     const cms_region_options *opts, cms_region **out)
{
	return cms_region_create_dir(ctx, tag, opts, NULL, out);
}

cms_status cms_region_create_dir(cms_context *ctx, const char *tag, const cms_region_options *opts,
				 const char *dir, cms_region **out)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	uint32_t handle_types = 0;
	bool exists, dir_set = false;
	struct cms_region *r;
	cms_status st;

	if (!ctx || !out)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", ctx ? "out" : "ctx");
	*out = NULL;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	st = cms_check_tag(tag);
	if (st)
		return st;
	st = cms_region_options_check(opts, &o);
	if (st)
		return st;
	st = cms_ctx_device(ctx, o.device, NULL);
	if (st)
		return st;
	st = cms_vmm_handle_types(ctx, o.device, o.flags, &handle_types);
	if (st)
		return st;
	/* a duplicate is refused before the flags' device work (checked again when listed) */
	pthread_mutex_lock(&ctx->lock);
	exists = find_locked(ctx, tag, o.device) != NULL;
	pthread_mutex_unlock(&ctx->lock);
	if (exists)
		return exists_error(tag, o.device);
	/* What the flags hold on the device (CMS_REGION_GUARD's zeros, CMS_REGION_VERIFY's
	 * kernel), made now so that a pause on a full device need not find memory. */
	st = cms_feature_attach(ctx, o.device, o.flags);
	if (st)
		return st;
	r = calloc(1, sizeof(struct cms_api_region)); /* its core part, at offset 0 */
	if (!r) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a region");
		goto err_attached;
	}
	if (pthread_mutex_init(&r->lock, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
		goto err_free;
	}
	if (pthread_cond_init(&r->unclaimed, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a condition");
		goto err_lock;
	}
	r->ctx = ctx;
	memcpy(r->tag, tag, strlen(tag) + 1);
	r->device = o.device;
	r->policy = o.policy;
	r->flags = o.flags;
	cms_region_vmm(r)->handle_types = handle_types;
	r->state = CMS_STATE_ACTIVE;
	r->refs = 1;
	if (dir) { /* set before the region is in the list: nobody sees it without one */
		/* id 0 in the file's name (unlinked at once; clashes are retried), so that ids
		 * still ascend in list order */
		st = cms_store_dir_set(r, dir);
		if (st)
			goto err_cond;
		dir_set = true;
	}

	pthread_mutex_lock(&ctx->lock);
	if (find_locked(ctx, tag, o.device)) {
		pthread_mutex_unlock(&ctx->lock);
		goto out_exists;
	}
	r->id = ctx->next_region_id++;
	r->prev = ctx->regions_tail;
	if (ctx->regions_tail)
		ctx->regions_tail->next = r;
	else
		ctx->regions = r;
	ctx->regions_tail = r;
	pthread_mutex_unlock(&ctx->lock);
	cms_log(ctx, CMS_LOG_DEBUG, "region \"%s\" created on device %d, policy %u", tag, o.device,
		o.policy);
	*out = r;
	return CMS_OK;

out_exists:
	st = exists_error(tag, o.device);
	if (dir_set)
		cms_store_region_close(r); /* its file */
err_cond:
	pthread_cond_destroy(&r->unclaimed);
err_lock:
	pthread_mutex_destroy(&r->lock);
err_free:
	free(r);
err_attached:
	cms_feature_detach(ctx, o.device, o.flags);
	return st;
}

CMS_API cms_status cms_region_find(cms_context *ctx, const char *tag, int32_t device,
				   cms_region **out)
{
	struct cms_region *r;
	cms_status st;

	if (!ctx || !out)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", ctx ? "out" : "ctx");
	*out = NULL;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	st = cms_check_tag(tag);
	if (st)
		return st;
	pthread_mutex_lock(&ctx->lock);
	r = find_locked(ctx, tag, device);
	pthread_mutex_unlock(&ctx->lock);
	if (!r)
		return cms_set_error(CMS_ERR_NOT_FOUND, "no region tagged \"%s\" on device %d", tag,
				     device);
	*out = r;
	return CMS_OK;
}

/* Frees the region's allocations; waits for cms_free() calls in flight on them. r->lock held. */
static cms_status release_all_locked(struct cms_region *r)
{
	cms_context *ctx = r->ctx;
	struct cms_alloc *a, *next;
	unsigned claimed;
	cms_status st;

	for (;;) {
		for (a = r->allocs; a; a = next) {
			next = a->next;
			pthread_mutex_lock(&ctx->lock);
			if (a->claimed) { /* a concurrent cms_free() owns it */
				pthread_mutex_unlock(&ctx->lock);
				continue;
			}
			cms_index_remove(ctx, a);
			pthread_mutex_unlock(&ctx->lock);
			st = cms_engine_free(a); /* memory, storage, out of the region's list */
			if (st) {
				/* Keep this allocation and the rest as they are: a retry continues.
				 */
				pthread_mutex_lock(&ctx->lock);
				if (cms_index_insert(ctx, a))
					cms_log(ctx, CMS_LOG_ERROR, "0x%llx: cannot index again",
						(unsigned long long)a->base);
				pthread_mutex_unlock(&ctx->lock);
				return st;
			}
			cms_hook_retire(ctx, a->base);
			free(a);
		}
		pthread_mutex_lock(&ctx->lock);
		claimed = r->nclaimed;
		pthread_mutex_unlock(&ctx->lock);
		if (!claimed)
			return CMS_OK;
		/* A free that fails gives its allocation back to us: wait, then look again. */
		pthread_cond_wait(&r->unclaimed, &r->lock);
	}
}

CMS_API cms_status cms_region_destroy(cms_region *region)
{
	struct cms_region *r = region;
	cms_context *ctx;
	cms_status st;

	if (!r)
		return CMS_OK;
	ctx = r->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	pthread_mutex_lock(&r->lock);
	r->dying = true;	/* no new allocation while release_all_locked waits for frees */
	cms_ipc_region_gone(r); /* importers drop their mappings first (ipc_export.c) */
	st = release_all_locked(r);
	if (st)
		r->dying = false; /* kept as it is: a retry continues */
	if (!st) {
		pthread_mutex_lock(&ctx->lock);
		if (r->prev)
			r->prev->next = r->next;
		else
			ctx->regions = r->next;
		if (r->next)
			r->next->prev = r->prev;
		else
			ctx->regions_tail = r->prev;
		r->dead = true;
		cms_hook_default_drop_locked(ctx, r); /* no default names it from now on */
		pthread_mutex_unlock(&ctx->lock);
		cms_arena_drop_all(r);	   /* none left unless bookkeeping failed (arena.c) */
		cms_store_region_close(r); /* a file's space goes back now */
		cms_feature_detach(ctx, r->device, r->flags); /* what its create attached */
	}
	pthread_mutex_unlock(&r->lock);
	if (st)
		return st;
	pthread_mutex_lock(&ctx->lock);
	cms_region_unref_locked(r);
	pthread_mutex_unlock(&ctx->lock);
	return CMS_OK;
}

/* Whether the copies of an async resume on the region's device are done (cuEventQuery). */
static bool restore_done(struct cms_region *r)
{
	struct cms_device *d = &r->ctx->devices[r->device];
	bool done = true;
	size_t k;

	if (cms_push(r->ctx, r->device))
		return false;
	for (k = 0; k < CMS_COPY_STREAMS && done; k++)
		done = r->ctx->drv.cuEventQuery(d->events[k]) == CUDA_SUCCESS;
	cms_pop(r->ctx);
	return done;
}

CMS_API cms_status cms_region_info_get(cms_region *region, cms_region_info *info)
{
	cms_region_info o;
	cms_status st;

	if (!region || !info)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL",
				     region ? "info" : "region");
	st = cms_check_fork(region->ctx);
	if (st)
		return st;
	st = CMS_CHECK_OUT(info, cms_region_info);
	if (st)
		return st;
	memset(&o, 0, sizeof(o));
	o.struct_size = sizeof(o);
	pthread_mutex_lock(&region->lock);
	memcpy(o.tag, region->tag, sizeof(o.tag));
	o.device = region->device;
	o.policy = region->policy;
	o.state = region->state;
	o.flags = region->flags;
	o.allocations = region->nallocs;
	o.logical_bytes = region->logical_bytes;
	o.physical_bytes = region->physical_bytes;
	o.backed_bytes = region->backed_bytes;
	o.backup_bytes = region->backup_bytes;
	o.host_bytes = region->host_bytes;
	o.pinned_bytes = cms_region_store(region)->pinned_bytes;
	o.retained_bytes = cms_region_vmm(region)->retained_bytes;
	if (region->restore_pending && restore_done(region))
		region->restore_pending = false;
	o.restore_pending = region->restore_pending;
	o.epoch = region->epoch;
	o.granularity = region->ctx->devices[region->device].granularity;
	o.handle_types = cms_region_vmm(region)->handle_types;
	o.peer_device_mask = cms_region_vmm(region)->peer_mask;
	o.frozen = cms_region_engine(region)->frozen;
	pthread_mutex_unlock(&region->lock);
	cms_copy_out(info, &o, sizeof(o));
	return CMS_OK;
}

CMS_API cms_status cms_region_peer_devices_set(cms_region *region, uint64_t device_mask)
{
	struct cms_region *r = region;
	cms_context *ctx;
	uint64_t old;
	cms_status st;
	bool ro;

	if (!r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	ctx = r->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	st = cms_vmm_peers_check(ctx, r->device, device_mask);
	if (st)
		return st;
	pthread_mutex_lock(&r->lock);
	old = cms_region_vmm(r)->peer_mask;
	/* all or nothing (vmm/access.c); read-only while frozen */
	ro = cms_region_engine(r)->frozen;
	if (old != device_mask)
		st = cms_vmm_region_access(r, old, ro, device_mask, ro);
	if (!st || st == CMS_ERR_ROLLBACK_FAILED)
		cms_region_vmm(r)->peer_mask = device_mask;
	pthread_mutex_unlock(&r->lock);
	if (!st)
		cms_log(ctx, CMS_LOG_DEBUG, "region \"%s\" on device %d: peer devices 0x%llx",
			r->tag, r->device, (unsigned long long)device_mask);
	return st;
}

CMS_API cms_status cms_region_disk_dir_set(cms_region *region, const char *dir)
{
	struct cms_region *r = region;
	cms_status st;

	if (!r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(r->ctx);
	if (st)
		return st;
	pthread_mutex_lock(&r->lock);
	st = cms_store_dir_set(r, dir);
	pthread_mutex_unlock(&r->lock);
	return st;
}
