/* SPDX-License-Identifier: MIT */
/*
 * vmm_internal.h - declarations shared by the files of src/vmm/ only
 * (tests/check_layers.py fails any file above vmm/ that opens it): arenas and
 * runs, the driver calls on a range, a reservation kept as a cleanup. vmm.h
 * declares what the layers above use.
 */
#ifndef CMS_VMM_INTERNAL_H
#define CMS_VMM_INTERNAL_H

#include "vmm.h"

#define CMS_ARENA_ALIGN CMS_ARENA_BYTES /* a power of two, a multiple of any granularity */

/* Default reservation size; a larger allocation gets a reservation of its own. */
#define CMS_ARENA_BYTES (2ull << 30)

/* Gives [base, base + len) back; frees the reservation once nothing of it is used (a
 * cuMemAddressFree that fails is kept for later: cms_cleanup_range). Fails only when the
 * bookkeeping of a new free extent cannot be allocated (nothing changed), never after
 * cms_arena_give_ready. */
cms_status cms_arena_give(struct cms_region *r, struct cms_arena *arena, CUdeviceptr base,
			  size_t len);

/* Holds the bookkeeping of one free extent ready for r's next cms_arena_give. */
cms_status cms_arena_give_ready(struct cms_region *r);

/* Carves len bytes (a granularity multiple) for a->base and a->arena; may reserve. */
cms_status cms_arena_take(struct cms_region *r, size_t len, CUdeviceptr *base,
			  struct cms_arena **arena);

/* Keeps device dev's reservation at va, len bytes, whose cuMemAddressFree just failed with res,
 * for cms_cleanup_retry (logged); not tried again now (a retry at once usually fails the
 * same way, and the caller could not undo what it did before). */
void cms_cleanup_reservation(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len,
			     CUresult res);

/* handle becomes the run's and every member's (cms_run_create; a handle retained back). */
void cms_run_adopt(struct cms_run *run, CUmemGenericAllocationHandle handle);

/* cuMemCreate of the run's handle; every member's handle follows. */
cms_status cms_run_create(struct cms_run *run);

/* cuMemMap + cuMemSetAccess of the run; every member becomes mapped. */
cms_status cms_run_map(struct cms_run *run);

/* cuMemRelease of the run's handle. The run stays (a rollback re-backs it whole) until
 * cms_run_dissolve. */
cms_status cms_run_release(struct cms_run *run);

/* cuMemSetAccess over the whole run (see cms_vmm_set_access). */
cms_status cms_run_set_access(struct cms_run *run, uint64_t mask, uint64_t revoke, bool read_only);

/* Addresses for a new allocation (a->physical set): carved from the region's open chunk
 * when it is mapped and its tail has room (a gets the chunk's handle, not yet mapped: see
 * cms_vmm_back), else from a new chunk (planned, no handle yet: cms_vmm_back creates and
 * maps it whole), else from the arena (cms_arena_take). No driver call but
 * cuMemAddressReserve. On failure nothing changed. */
cms_status cms_run_take(struct cms_alloc *a);

/* cuMemUnmap of the run; no member is mapped then. */
cms_status cms_run_unmap(struct cms_run *run);

/* cuMemSetAccess over a mapped range (see cms_vmm_set_access). */
cms_status cms_vmm_access_range(const struct cms_region *r, CUdeviceptr base, size_t len,
				uint64_t mask, uint64_t revoke, bool read_only);

/* cuMemCreate of size bytes with the region's properties. */
cms_status cms_vmm_create_handle(const struct cms_region *r, size_t size,
				 CUmemGenericAllocationHandle *handle);

/* cuMemMap of handle over [base, base + len) + cuMemSetAccess read-write for the region's
 * device and peers; CMS_ERR_ROLLBACK_FAILED: mapped without access (the unmap failed). */
cms_status cms_vmm_map_range(const struct cms_region *r, CUdeviceptr base, size_t len,
			     CUmemGenericAllocationHandle handle);

/* As cms_vmm_map_range with read-only access (a guard); len may be less than the handle's
 * size (its first len bytes are mapped). */
cms_status cms_vmm_map_range_read(const struct cms_region *r, CUdeviceptr base, size_t len,
				  CUmemGenericAllocationHandle handle);

/* cuMemSetAccess of a mapped allocation (its whole run): its region's device and the devices
 * of mask read-write (read-only when read_only), those of revoke not in mask none. On failure
 * nothing changed. */
cms_status cms_vmm_set_access(struct cms_alloc *a, uint64_t mask, uint64_t revoke, bool read_only);

/* Address space of a region: reservations that allocations are carved from, so that
 * allocations made one after another are adjacent and a resume can coalesce them (arena.c). */
struct cms_arena {
	CUdeviceptr base; /* cuMemAddressReserve */
	size_t len;
	size_t used;		 /* bytes carved out (allocations, retained bytes of runs) */
	struct cms_extent *free; /* free extents, by address, merged */
	struct cms_arena *next;
};

#endif /* CMS_VMM_INTERNAL_H */
