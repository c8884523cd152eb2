/* SPDX-License-Identifier: MIT */
/*
 * host_buffer.c - the HOST policy's buffers and their lifecycle: made, page-locked,
 * sliced among allocations, unpinned and given back (the buffers made ahead,
 * for host_ahead.c, too); holes are host_holes.c's, copies host_policy.c's.
 *
 * Backups live in host buffers of anonymous memory (mmap, transparent huge
 * pages where the kernel allows) that are faulted in and then page-locked
 * with cuMemHostRegister, so that the copies run by DMA at PCIe speed. One
 * buffer holds the backups of up to cms_host_group_max bytes (the tunable host_group,
 * 1 GiB) of consecutive allocations of one region (each copy stays inside one registration, as the
 * driver requires, and thousands of small allocations need few
 * registrations). Buffers are kept from one cycle to the next unless the
 * region gives host memory back after each resume: the steady state is then
 * a plain DMA each way. A buffer is unmapped when its last allocation lets go
 * of its slice.
 *
 * A region that gives its buffers back after each resume (CMS_REGION_RELEASE_HOST) backs each
 * allocation's live extent only (cms_host_slice_need: up to its last byte not declared
 * content-free): a pause faults in and page-locks what it copies; the buffer's mapping reaches past
 * its last slice (map_len), so that a backup is still read at the allocation's own offsets.
 */

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#define HUGETLB_SIZE (2ull << 20)
size_t cms_host_page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) & ~(pg - 1);
}

/*
 * One buffer's worth: the most bytes of backups one buffer holds for several
 * allocations (a single larger allocation gets a buffer of its own), and the
 * most bytes of freed slices region r keeps (cms_host_region_trim). 1 GiB; on the
 * simulation 16 granules, so that small tests reach it.
 */
uint64_t cms_host_group_max(const struct cms_region *r)
{
	const cms_context *ctx = r->ctx;
	uint64_t g = ctx->devices[r->device].granularity;

	return cms_tune_bytes(&cms_ctx_store(ctx)->tune.host_group, g);
}

/*
 * The bytes of a's slice in a new buffer: its size, page-rounded; in a region that gives its
 * backups back after each resume (CMS_REGION_RELEASE_HOST), only up to its last live byte
 * (cms_range_discard: the tails of a PyTorch pool's segments), so that a pause faults in and
 * page-locks only what it copies. The slice is still read at the allocation's own offsets
 * (cms_backup_get): its buffer's mapping reaches past the end of its last slice (map_len).
 */
/* The bytes a pause copies into a's backup at most: up to its last live byte, page-rounded. */
size_t cms_host_live_need(const struct cms_alloc *a)
{
	return cms_host_page_round(cms_span_live_end(a));
}

size_t cms_host_slice_need(const struct cms_alloc *a)
{
	if (a->region->flags & CMS_REGION_RELEASE_HOST)
		return cms_host_live_need(a);
	return cms_host_page_round(a->size);
}

void cms_host_buffer_unlink(struct cms_region *r, struct cms_hostbuf *hb)
{
	struct cms_hostbuf **pp;

	for (pp = &cms_region_store(r)->hostbufs; *pp; pp = &(*pp)->next)
		if (*pp == hb) {
			*pp = hb->next;
			return;
		}
}

/* Page-locks a buffer; a failure leaves it pageable (logged once per context). */
void cms_host_buffer_register(cms_context *ctx, struct cms_hostbuf *hb)
{
	CUresult res;

	res = ctx->drv.cuCtxPushCurrent(ctx->devices[hb->device].primary);
	if (res == CUDA_SUCCESS) {
		res = ctx->drv.cuMemHostRegister(hb->base, hb->len, CU_MEMHOSTREGISTER_PORTABLE);
		cms_pop(ctx);
	}
	hb->registered = res == CUDA_SUCCESS;
	hb->register_result = res; /* logged by the calling thread (see cms_host_note_registered) */
}

/* Counts a buffer just registered in its region's pinned_bytes, or logs, once per context,
 * that it could not be page-locked (calling thread only). */
void cms_host_note_registered(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb)
{
	if (hb->registered)
		cms_region_store(r)->pinned_bytes += hb->len;
	/* Unregistered with CUDA_SUCCESS: never tried (a failed pause skipped it). */
	if (hb->registered || hb->register_result == CUDA_SUCCESS || atomic_load(&hb->failed) ||
	    atomic_exchange(&cms_ctx_store(ctx)->warned_register, 1))
		return;
	cms_log(ctx, CMS_LOG_WARN,
		"cuMemHostRegister of %zu bytes failed (%s): host backups stay pageable and "
		"copies run slower (check RLIMIT_MEMLOCK)",
		hb->len, cms_driver_error_name(&ctx->drv, hb->register_result));
}

/* A buffer of len bytes in no region yet, mapped with reach bytes more (short slices: map_len),
 * not yet faulted in or registered; NULL when out of memory (or the simulation refuses it). */
static struct cms_hostbuf *buffer_new(cms_context *ctx, size_t len, size_t reach,
				      const struct cms_store_tunables *o, bool pageable,
				      int32_t device)
{
	struct cms_hostbuf *hb = calloc(1, sizeof(*hb));

	if (!hb)
		return NULL;
	if (ctx->drv.host_alloc_hook && ctx->drv.host_alloc_hook(len))
		goto err_free;
	hb->map_len = len + reach;
	hb->base = MAP_FAILED;
	if (o->prep_hugetlb && !(hb->map_len % HUGETLB_SIZE))
		hb->base = mmap(NULL, hb->map_len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (hb->base == MAP_FAILED)
		hb->base = mmap(NULL, hb->map_len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hb->base == MAP_FAILED) {
		if (ctx->drv.host_free_hook)
			ctx->drv.host_free_hook(len);
		goto err_free;
	}
	if (!o->prep_nothp) /* advice only: fewer faults where THP is on */
		madvise(hb->base, hb->map_len, MADV_HUGEPAGE);
	/* A forked child cannot use it (CMS_ERR_FORKED) and must not copy page-locked memory. */
	madvise(hb->base, hb->map_len, MADV_DONTFORK);
	hb->len = len;
	hb->pageable = pageable;
	hb->device = device;
	return hb;

err_free:
	free(hb);
	return NULL;
}

/* Makes hb one of r's buffers (counted in its host_bytes). */
static void buffer_link(struct cms_region *r, struct cms_hostbuf *hb)
{
	r->host_bytes += hb->len;
	hb->next = cms_region_store(r)->hostbufs;
	cms_region_store(r)->hostbufs = hb;
}

/* Gives a the slice of hb at off, of len bytes (one more user). */
static void slice_take(struct cms_alloc *a, struct cms_hostbuf *hb, size_t off, size_t len)
{
	cms_alloc_store(a)->hostbuf = hb;
	cms_alloc_store(a)->backup = (char *)hb->base + off;
	cms_alloc_store(a)->backup_len = len;
	hb->users++;
}

/* A new buffer with a slice for each of the n allocations (not yet faulted in or registered). */
cms_status cms_host_buffer_map(cms_context *ctx, struct cms_alloc **v, size_t n,
			       const struct cms_store_tunables *o)
{
	struct cms_hostbuf *hb;
	size_t len = 0, reach = 0, off = 0, i;

	for (i = 0; i < n; i++) { /* a short slice's tail reaches past the slices after it */
		size_t need = cms_host_slice_need(v[i]), full = cms_host_page_round(v[i]->size);

		len += need;
		reach = full - need > reach ? full - need : reach;
	}
	hb = buffer_new(ctx, len, reach, o, (v[0]->region->flags & CMS_REGION_HOST_PAGEABLE) != 0,
			v[0]->region->device);
	if (!hb)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate %zu bytes of host backup for %zu allocations",
				     len, n);
	buffer_link(v[0]->region, hb);
	for (i = 0; i < n; i++) {
		slice_take(v[i], hb, off, cms_host_slice_need(v[i]));
		cms_alloc_store(v[i])->fresh_buffer = true;
		off += cms_alloc_store(v[i])->backup_len;
	}
	return CMS_OK;
}

/* Faults the pages in; false when the kernel has no memory for them (not the OOM killer's turn). */
bool cms_host_fault_in(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), i;

	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return true;
	if (errno != EINVAL)
		return false;
	for (i = 0; i < len; i += pg) /* kernels before 5.14 */
		((volatile char *)p)[i] = 0;
	return true;
}

cms_status cms_host_backup_unpin(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_hostbuf *hb = cms_alloc_store(a)->hostbuf;
	cms_status st = CMS_OK;

	/* Only the buffer's last user unpins it; the others leave it as it is. */
	if (!hb || !hb->registered || hb->users > 1)
		return CMS_OK;
	CU_TRY(ctx, cuCtxPushCurrent(ctx->devices[hb->device].primary), st, out);
	CU_TRY(ctx, cuMemHostUnregister(hb->base), st, out_pop);
	hb->registered = false;
	cms_region_store(a->region)->pinned_bytes -= hb->len;
out_pop:
	cms_pop(ctx);
out:
	return st;
}

void cms_host_backup_repin(cms_context *ctx, struct cms_alloc *a)
{
	/* A buffer waiting for its next copy to page-lock it (cms_host_pin_on_use) stays waiting; a
	 * pageable one is never page-locked. */
	if (cms_alloc_store(a)->hostbuf && !cms_alloc_store(a)->hostbuf->registered &&
	    !cms_alloc_store(a)->hostbuf->pin_on_use && !cms_alloc_store(a)->hostbuf->pageable) {
		cms_host_buffer_register(ctx, cms_alloc_store(a)->hostbuf);
		cms_host_note_registered(ctx, a->region, cms_alloc_store(a)->hostbuf);
	}
}

/* Page-locks a's buffer if it waits for its next copy to do so (a piece of a split buffer). */
void cms_host_pin_on_use(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_hostbuf *hb = cms_alloc_store(a)->hostbuf;

	if (!hb || !hb->pin_on_use)
		return;
	hb->pin_on_use = false;
	cms_host_buffer_register(ctx, hb);
	cms_host_note_registered(ctx, a->region, hb);
}

/* Unmaps hb, one of r's buffers without users, and forgets it. */
static void buffer_drop(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb)
{
	cms_host_buffer_unlink(r, hb);
	r->host_bytes -= hb->len;
	cms_region_store(r)->host_free_bytes -= hb->free_bytes;
	munmap(hb->base, hb->map_len);
	if (ctx->drv.host_free_hook)
		ctx->drv.host_free_hook(hb->len);
	free(hb);
}

/* Unmaps r's buffers kept without users (lazy: the store's tunable prep_lazyfree). */
void cms_host_lazy_drop(struct cms_region *r)
{
	struct cms_hostbuf *hb, *next;

	for (hb = cms_region_store(r)->hostbufs; hb; hb = next) {
		next = hb->next;
		if (!hb->users)
			buffer_drop(r->ctx, r, hb);
	}
}

/* a lets go of its slice: a hole that a later pause reuses (plan_buffers), or, from the last
 * user, the whole buffer (unmapped; kept MADV_FREE'd instead when keep). Page-locked memory
 * is never unmapped (cms_host_backup_unpin first). */
static void slice_put_keep(cms_context *ctx, struct cms_alloc *a, bool keep)
{
	struct cms_hostbuf *hb = cms_alloc_store(a)->hostbuf;
	struct cms_region *r = a->region;

	if (!hb)
		return;
	cms_alloc_set_saved(a, false);
	hb->free_bytes += cms_alloc_store(a)->backup_len;
	cms_region_store(r)->host_free_bytes += cms_alloc_store(a)->backup_len;
	cms_alloc_store(a)->hostbuf = NULL;
	cms_alloc_store(a)->backup = NULL;
	cms_alloc_store(a)->backup_len = 0;
	cms_alloc_store(a)->prepared = false;
	if (--hb->users)
		return;
	if (keep && !hb->registered) {
		(void)madvise(hb->base, hb->len, MADV_FREE); /* advice: stays mapped, reclaimable */
		hb->lazy = true;
		hb->pin_on_use = false; /* registered again by the pause that reuses it */
		return;
	}
	buffer_drop(ctx, r, hb);
}

void cms_host_slice_put(cms_context *ctx, struct cms_alloc *a)
{
	slice_put_keep(ctx, a, false);
}

void cms_host_resumed(cms_context *ctx, struct cms_alloc *a)
{
	/* The buffer is kept for the next pause unless the region gives host memory back
	 * (never after an async resume: the API refuses the combination). */
	if ((a->region->flags & CMS_REGION_RELEASE_HOST) && !cms_host_backup_unpin(ctx, a))
		slice_put_keep(ctx, a,
			       cms_ctx_store(ctx)
				       ->tune.prep_lazyfree); /* never unmap page-locked memory */
}

/* ---- buffers made ahead (host_ahead.c, CMS_REGION_PREPARE) ---- */

struct cms_hostbuf *cms_hostbuf_new(cms_context *ctx, int32_t device, size_t len, bool pageable)
{
	return buffer_new(ctx, len, 0, &cms_ctx_store(ctx)->tune, pageable, device);
}

size_t cms_hostbuf_len(const struct cms_hostbuf *hb)
{
	return hb->len;
}

bool cms_hostbuf_fault(struct cms_hostbuf *hb, size_t off, size_t len)
{
	return cms_host_fault_in((char *)hb->base + off, len);
}

bool cms_hostbuf_pin(cms_context *ctx, struct cms_hostbuf *hb)
{
	cms_host_buffer_register(ctx, hb);
	return hb->registered;
}

void cms_hostbuf_free(cms_context *ctx, struct cms_hostbuf *hb)
{
	if (hb->registered) /* never unmapped while page-locked (kept if the driver refuses) */
		cms_stage_cleanup(ctx, hb->device, hb->base, hb->len,
				  ctx->drv.host_alloc_hook != NULL);
	else {
		munmap(hb->base, hb->map_len);
		if (ctx->drv.host_free_hook)
			ctx->drv.host_free_hook(hb->len);
	}
	free(hb);
}

void cms_hostbuf_attach(struct cms_region *r, struct cms_hostbuf *hb, struct cms_alloc **v,
			const size_t *off, size_t n)
{
	size_t used = 0, i;

	buffer_link(r, hb);
	for (i = 0; i < n; i++) {
		slice_take(v[i], hb, off[i], cms_host_page_round(v[i]->size));
		cms_alloc_store(v[i])->prepared = true;
		used += cms_alloc_store(v[i])->backup_len;
	}
	hb->free_bytes = hb->len - used; /* slices of allocations freed meanwhile: holes */
	cms_region_store(r)->host_free_bytes += hb->free_bytes;
	if (hb->registered)
		cms_region_store(r)->pinned_bytes += hb->len;
	else if (!hb->pageable)
		hb->pin_on_use = true; /* page-locking was refused: the first copy tries again */
}

uint64_t cms_hostbuf_group_max(const struct cms_region *r)
{
	return cms_host_group_max(r);
}
