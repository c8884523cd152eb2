/* SPDX-License-Identifier: MIT */
/*
 * checksum.c - checksums of device memory (kernels/checksum.h) computed on the
 * device by the library's kernel (kernels/checksum_kernel.c, JITted from the
 * PTX of kernels/checksum_ptx.h), for CMS_REGION_VERIFY (verify.c).
 *
 * Each device has a checksummer, loaded while a CMS_REGION_VERIFY region of
 * the device holds it (cms_checksum_hold: the first hold loads, the last
 * release unloads): the kernel's module and function, and one granule of
 * device memory (a reservation, a handle, a read-write mapping) holding a
 * round's task table (the first 3/4) and its sums (the rest), counted in the
 * device's own_bytes. So a pause, which is meant to free device memory, never
 * needs any to checksum. A round: the task table copied in
 * (cuMemcpyHtoDAsync), the sums zeroed (cuMemsetD8Async), one launch, the sums
 * copied out (cuMemcpyDtoHAsync), the stream synchronized. The checksummer's
 * lock serializes the calls of one device (a leaf lock: nothing is taken
 * under it).
 */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "checksum.h"
#include "checksum_ptx.h"

struct cms_checksummer {
	pthread_mutex_t lock;
	CUmodule module; /* NULL until loaded */
	CUfunction fn;
	CUdeviceptr va; /* scratch: len bytes, mapped read-write when mapped */
	size_t len;
	CUmemGenericAllocationHandle handle;
	bool mapped;
	struct cms_checksum_task *table; /* host copy of a round's tasks */
	uint64_t *sums;			 /* host copy of a round's sums */
	size_t max_tasks, max_slots;
	unsigned holds; /* CMS_REGION_VERIFY regions of the device (cms_checksum_hold) */
};

/* dev's checksummer, made (unloaded) on first use when make; NULL without memory or, when
 * not make, without one. */
static struct cms_checksummer *checksummer(cms_context *ctx, int32_t dev, bool make)
{
	struct cms_checksummer **slot = &cms_ctx_engine(ctx)->checksum[dev];
	struct cms_checksummer *c;

	pthread_mutex_lock(&ctx->lock);
	c = *slot;
	if (!c && make) {
		c = calloc(1, sizeof(*c));
		if (c && pthread_mutex_init(&c->lock, NULL)) {
			free(c);
			c = NULL;
		}
		*slot = c;
	}
	pthread_mutex_unlock(&ctx->lock);
	if (!c && make)
		cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a checksummer");
	return c;
}

/* Releases c's scratch handle; its memory is given back once unmapped too (unmapped), and
 * uncounted then: now, or by the cleanup that unmaps it later. */
static void release_scratch(cms_context *ctx, int32_t dev, struct cms_checksummer *c, bool unmapped)
{
	bool released = true;

	if (c->handle && ctx->drv.cuMemRelease(c->handle) != CUDA_SUCCESS) {
		/* a leaked handle still holds its memory: it stays counted */
		cms_log(ctx, CMS_LOG_ERROR, "device %d: the checksum scratch handle leaked", dev);
		released = false;
	}
	if (unmapped) {
		if (c->handle && released)
			atomic_fetch_sub(&ctx->devices[dev].own_bytes, c->len);
	} else { /* unmaps and frees it later */
		cms_cleanup_own_range(ctx, dev, c->va, c->len, released ? c->len : 0);
		c->va = 0;
	}
	c->handle = 0;
	c->mapped = false;
}

/* Unmaps and frees what c holds (its lock held, or the context going); tries all. */
static void unload(cms_context *ctx, int32_t dev, struct cms_checksummer *c)
{
	release_scratch(ctx, dev, c,
			!c->mapped || ctx->drv.cuMemUnmap(c->va, c->len) == CUDA_SUCCESS);
	if (c->va && ctx->drv.cuMemAddressFree(c->va, c->len) != CUDA_SUCCESS)
		cms_cleanup_range(ctx, dev, c->va, c->len, false);
	c->va = 0;
	if (c->module && ctx->drv.cuModuleUnload(c->module) != CUDA_SUCCESS)
		cms_log(ctx, CMS_LOG_ERROR, "device %d: the checksum module leaked", dev);
	c->module = NULL;
	c->fn = NULL;
	free(c->table);
	free(c->sums);
	c->table = NULL;
	c->sums = NULL;
}

/* Loads the kernel and maps the scratch (c's lock held, device context current). */
static cms_status load(cms_context *ctx, int32_t dev, struct cms_checksummer *c)
{
	struct cms_device *d = &ctx->devices[dev];
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	cms_status st = CMS_OK;

	c->len = d->granularity;
	c->max_tasks = c->len / 4 * 3 / sizeof(struct cms_checksum_task);
	c->max_slots = c->len / 4 / sizeof(uint64_t);
	c->table = malloc(c->max_tasks * sizeof(*c->table));
	c->sums = malloc(c->max_slots * sizeof(*c->sums));
	if (!c->table || !c->sums) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate checksum tables");
		goto err;
	}
	CU_TRY(ctx, cuModuleLoadData(&c->module, cms_checksum_ptx), st, err);
	CU_TRY(ctx, cuModuleGetFunction(&c->fn, c->module, CMS_CHECKSUM_ENTRY), st, err);
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = dev;
	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = dev;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_TRY(ctx, cuMemAddressReserve(&c->va, c->len, 0, 0, 0), st, err);
	CU_TRY(ctx, cuMemCreate(&c->handle, c->len, &prop, 0), st, err);
	atomic_fetch_add(&d->own_bytes, c->len);
	CU_TRY(ctx, cuMemMap(c->va, c->len, 0, c->handle, 0), st, err);
	c->mapped = true;
	CU_TRY(ctx, cuMemSetAccess(c->va, c->len, &access, 1), st, err);
	cms_log(ctx, CMS_LOG_DEBUG,
		"device %d: checksum kernel loaded, %zu bytes of scratch reserved (the library "
		"holds %llu bytes of the device)",
		dev, c->len, (unsigned long long)atomic_load(&d->own_bytes));
	return CMS_OK;

err: /* nothing stays half made: the next use tries again */
	unload(ctx, dev, c);
	return st;
}

/* One round: tasks c->table[0..ntasks) into sums[0..nslots) on stream (c's lock held). */
static cms_status round_run(cms_context *ctx, struct cms_checksummer *c, CUstream stream,
			    size_t ntasks, size_t nslots)
{
	CUdeviceptr table = c->va, sums = c->va + c->len / 4 * 3;
	uint64_t n = ntasks;
	void *params[] = { &table, &n, &sums };
	cms_status st = CMS_OK;
	CUresult res;

	CU_TRY(ctx, cuMemcpyHtoDAsync(table, c->table, ntasks * sizeof(*c->table), stream), st,
	       out);
	CU_TRY(ctx, cuMemsetD8Async(sums, 0, nslots * sizeof(uint64_t), stream), st, out);
	CU_TRY(ctx,
	       cuLaunchKernel(c->fn, (unsigned)ntasks, 1, 1, CMS_CHECKSUM_BLOCK, 1, 1, 0, stream,
			      params, NULL),
	       st, out);
	CU_TRY(ctx, cuMemcpyDtoHAsync(c->sums, sums, nslots * sizeof(uint64_t), stream), st, out);
out: /* also after a failure: the table and the scratch are reused next */
	res = ctx->drv.cuStreamSynchronize(stream);
	if (res != CUDA_SUCCESS && !st)
		st = cms_cu_error(&ctx->drv, res, "cuStreamSynchronize(stream)");
	return st;
}

static cms_status not_held(int32_t dev)
{
	return cms_set_error(CMS_ERR_INTERNAL,
			     "device %d: the checksum kernel is not loaded (no CMS_REGION_VERIFY "
			     "region of the device holds it)",
			     dev);
}

cms_status cms_checksum_hold(cms_context *ctx, int32_t dev)
{
	struct cms_checksummer *c = checksummer(ctx, dev, true);
	cms_status st = CMS_OK;

	if (!c)
		return CMS_ERR_OUT_OF_HOST_MEMORY;
	pthread_mutex_lock(&c->lock);
	if (!c->fn) /* also with holds 0: a release that could not unload left it loaded */
		st = load(ctx, dev, c);
	if (!st)
		c->holds++;
	pthread_mutex_unlock(&c->lock);
	return st;
}

void cms_checksum_release(cms_context *ctx, int32_t dev, bool current)
{
	struct cms_checksummer *c = checksummer(ctx, dev, false);

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	if (c->holds && !--c->holds && current && c->fn) {
		unload(ctx, dev, c);
		cms_log(ctx, CMS_LOG_DEBUG,
			"device %d: checksum kernel unloaded, its scratch given back (the library "
			"holds %llu bytes of the device)",
			dev, (unsigned long long)atomic_load(&ctx->devices[dev].own_bytes));
	}
	pthread_mutex_unlock(&c->lock);
}

cms_status cms_checksum_device(cms_context *ctx, int32_t dev, CUstream stream,
			       const struct cms_checksum_span *v, size_t n, uint64_t *sums,
			       size_t nslots)
{
	struct cms_checksummer *c = checksummer(ctx, dev, false);
	size_t i = 0, ntasks = 0, k;
	uint64_t done = 0; /* bytes of v[i] in earlier rounds */
	size_t lo = 0;	   /* the first slot of the round */
	cms_status st = CMS_OK;

	memset(sums, 0, nslots * sizeof(*sums));
	if (!c)
		return not_held(dev);
	pthread_mutex_lock(&c->lock);
	if (!c->holds) /* loaded only for a verified region: none would be a bug */
		st = not_held(dev);
	while (!st && i < n) {
		const struct cms_checksum_span *s = &v[i];
		uint64_t len = s->len - done < CMS_CHECKSUM_TASK_BYTES ? s->len - done :
									 CMS_CHECKSUM_TASK_BYTES;

		if (!s->len) {
			i++;
			continue;
		}
		if (!ntasks)
			lo = s->slot;
		c->table[ntasks].ptr = s->ptr + done;
		c->table[ntasks].len = len;
		c->table[ntasks].off = s->off + done;
		c->table[ntasks].slot = s->slot - lo;
		ntasks++;
		done += len;
		if (done == s->len) {
			i++;
			done = 0;
		}
		/* A round ends with the table full, before a slot it cannot hold, or at the end. */
		if (ntasks < c->max_tasks && i < n && v[i].slot - lo < c->max_slots)
			continue;
		st = round_run(ctx, c, stream, ntasks, c->table[ntasks - 1].slot + 1);
		for (k = 0; !st && k <= c->table[ntasks - 1].slot; k++)
			sums[lo + k] += c->sums[k];
		ntasks = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

void cms_checksum_drop(cms_context *ctx, int32_t dev)
{
	struct cms_checksummer **slot = &cms_ctx_engine(ctx)->checksum[dev];
	struct cms_checksummer *c = *slot;

	if (!c)
		return;
	unload(ctx, dev, c);
	pthread_mutex_destroy(&c->lock);
	free(c);
	*slot = NULL;
}
