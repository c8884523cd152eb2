/* SPDX-License-Identifier: MIT */
/*
 * vmm.h - reservations, physical handles and mappings of allocations: the
 * arenas a region's addresses are carved from (arena.c), coalesced runs of
 * adjacent allocations backed by one handle (run.c), and the driver objects
 * of one allocation (vmm.c). Region lock held throughout.
 */
#ifndef CMS_VMM_H
#define CMS_VMM_H

#include "core.h"

/* vmm's part of an allocation (core.h says how the parts compose). */
struct cms_vmm_alloc {
	struct cms_alloc core;
	/* A physical handle is held (!= 0); core's mapped: it is mapped at base. */
	CUmemGenericAllocationHandle handle;
	struct cms_arena *arena; /* the reservation its addresses are carved from (arena.c) */
	/* Coalesced: its memory is a part of run's physical handle and mapping (run.c); handle
	 * and mapped then mirror the run's (every member changes with it). */
	struct cms_run *run;
	/* CMS_REGION_GUARD: pieces of the device's zero handle mapped read-only over
	 * [base, base + physical), from base up (vmm/guard.c); exact on every failure path. */
	size_t guarded;
};

/* vmm's part of a region; under the region's lock. */
struct cms_vmm_region {
	struct cms_region core;
	uint64_t retained_bytes;  /* of freed allocations, still in runs (run.c) */
	uint64_t spare_bytes;	  /* chunks' tails not yet handed out (run.c); in retained */
	struct cms_run *chunk;	  /* the open chunk: new allocations carved from its tail */
	struct cms_arena *arenas; /* its address space (arena.c) */
	struct cms_extent *ready; /* for the next cms_arena_give (cms_arena_give_ready) */
	uint32_t handle_types;	  /* CU_MEM_HANDLE_TYPE_* given to cuMemCreate (since 1.1) */
	uint64_t peer_mask;	  /* other devices given read-write access (since 1.1) */
};

/* ---- tune.c: a tunable size, in bytes or relative to a device's granularity ---- */
/* The range of a size (bytes), the alignment of its bytes, and whether a device takes it in
 * whole granules, at least two (else 0); key: its name in CMS_TUNABLES (engine/tunables.c). */
struct cms_tune_limits {
	const char *key;
	uint64_t min, max;
	uint32_t align;
	bool granules;
};
/* A size: bytes, or when div is not 0, granules * granularity / div of the device's; lim: its
 * limits (set with it by cms_tunables_load). */
struct cms_tune_size {
	uint64_t bytes;
	uint32_t granules, div;
	const struct cms_tune_limits *lim;
};
/* The bytes of s as given on a device of that granularity, brought into its range and
 * alignment (a size in bytes is checked when read). */
uint64_t cms_tune_given(const struct cms_tune_size *s, size_t granularity);
/* The bytes of s on a device of that granularity: cms_tune_given, in whole granules (at least
 * two, else 0, rounded down) when its limits ask for them. */
uint64_t cms_tune_bytes(const struct cms_tune_size *s, size_t granularity);

/* vmm's tunables (engine/tunables.c sets every layer's part when the driver loads; read-only
 * afterwards). */
struct cms_vmm_tunables {
	struct cms_tune_size run_chunk; /* run.c: the most bytes of a chunk (0: none) */
};

/* Sizes of the guard's zero handles: 2^0 .. 2^5 granules (126 MiB at a 2 MiB granularity). */
#define CMS_GUARD_ORDERS 6

/* vmm's part of a context (core.h says how the parts compose). */
struct cms_vmm_context {
	struct cms_context core;
	struct cms_vmm_tunables tune;
	/* Each device's zero-filled physical handles of 1, 2, 4, ... 2^(CMS_GUARD_ORDERS-1)
	 * granules, each mapped whole and read-only over pieces of the released allocations of
	 * paused CMS_REGION_GUARD regions (guard.c); 0 until the first such region. ctx->lock. */
	CUmemGenericAllocationHandle zero[CMS_MAX_DEVICES][CMS_GUARD_ORDERS];
};

static inline struct cms_vmm_context *cms_ctx_vmm(const cms_context *ctx)
{
	return cms_container_of(ctx, struct cms_vmm_context, core);
}

static inline struct cms_vmm_alloc *cms_alloc_vmm(const struct cms_alloc *a)
{
	return cms_container_of(a, struct cms_vmm_alloc, core);
}

static inline struct cms_vmm_region *cms_region_vmm(const struct cms_region *r)
{
	return cms_container_of(r, struct cms_vmm_region, core);
}

/* ---- cleanup_ranges.c: temporary ranges whose cleanup failed (core/cleanup.c) ---- */
/* Unmaps (when mapped) and frees len bytes of device dev's reservation at va (a temporary
 * mapping); on failure, of the push too, keeps what is left for cms_cleanup_retry (logged). */
void cms_cleanup_range(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len, bool mapped);
/* As cms_cleanup_range of a mapped range whose memory (own bytes, its handle released) is
 * counted in device dev's own_bytes until the unmap gives it back: uncounted then. */
void cms_cleanup_own_range(cms_context *ctx, int32_t dev, CUdeviceptr va, size_t len, uint64_t own);

/* Adjacent allocations of one region (same arena) backed by ONE physical handle with ONE
 * mapping over [base, base + len) (run.c). Bytes of members freed while it is mapped stay in
 * it ("retained") until it is released. A chunk is a run made by cms_alloc with a spare tail
 * that the region's next allocations are carved from (slots has room for len / granularity). */
struct cms_run {
	struct cms_region *region;
	struct cms_arena *arena;
	CUdeviceptr base;
	size_t len;
	CUmemGenericAllocationHandle handle;
	bool mapped;
	size_t users;	 /* live members */
	size_t retained; /* bytes of freed members and the spare tail, in the handle and mapping */
	size_t spare;	 /* a chunk's tail [base + len - spare, base + len), not handed out */
	size_t nslots;	 /* members at creation, by address */
	struct cms_run_slot {
		CUdeviceptr base;
		size_t len;
		struct cms_alloc *a; /* NULL once freed (retained) */
	} slots[];
};

/* ---- arena.c: address space of a region (region lock held) ---- */
/* A destroyed region's arenas that bookkeeping failures left behind: freed, best effort. */
void cms_arena_drop_all(struct cms_region *r);

/* ---- run.c: coalesced re-backing (region lock held) ---- */
/* Sorts v[0..n) by address (cms_collect_allocs): the members of each run become consecutive. */
void cms_run_order(struct cms_alloc **v, size_t n);
/* Groups the allocations of v[0..n) that have no memory into runs of adjacent allocations
 * of one region and arena (regions allowing it); v in address order. No driver call. */
cms_status cms_run_plan(struct cms_alloc **v, size_t n);
/* Dissolves the runs of v[0..n) that hold no handle and no mapping (released, or planned and
 * never backed): members become separate allocations, retained bytes' addresses go back to
 * the arena. After a commit or an undo. No driver call. */
void cms_run_dissolve(struct cms_alloc **v, size_t n);
/* Whether freeing a leaves its bytes in its run (other members are live). */
bool cms_run_keeps(const struct cms_alloc *a);
/* Detaches a from its run for a free (cms_run_keeps true): its bytes and addresses stay in
 * the run until the run is released. No driver call; cannot fail. */
void cms_run_retire(struct cms_alloc *a);
/* After a's cms_vmm_back succeeded: its chunk, if it has a spare tail, becomes the open one. */
void cms_run_open(struct cms_alloc *a);
/* Undoes the carving of a (the newest member of a chunk with other live members) after a
 * failure: its bytes go back to the tail. No driver call; cannot fail. */
void cms_run_untake(struct cms_alloc *a);
/* Whether a is the live member of its run with the highest address (a run's members are
 * copied in address order: after this one's copy the run may be released). */
bool cms_run_is_last(const struct cms_alloc *a);

/* ---- guard.c: guarded paused ranges (CMS_REGION_GUARD; region lock held) ---- */
/* Makes dev's zero handle (cuMemCreate, zero-filled through a temporary mapping) unless it
 * exists; dev's context current. */
cms_status cms_vmm_guard_prepare(cms_context *ctx, int32_t dev);
/* cuMemRelease of dev's zero handle (context destroy, every guard unmapped). */
void cms_vmm_guard_drop(cms_context *ctx, int32_t dev);
/* Maps the zero handle read-only over [a->base, a->base + a->physical) (a has no memory),
 * in pieces of the handle's size; all or nothing (what a failure could not unmap stays
 * counted in a->guarded). */
cms_status cms_vmm_guard(struct cms_alloc *a);
/* cuMemUnmap of a's guard pieces, one call over them all; when it fails, piece by piece, the
 * last first, and when one of those fails the pieces unmapped so far are mapped again (best
 * effort): on failure a->guarded counts the pieces mapped, all of them unless that failed too. */
cms_status cms_vmm_unguard(struct cms_alloc *a);

/* ---- vmm.c: driver objects of one allocation (region lock held) ---- */
/* Addresses for a new allocation: cms_run_take. */
cms_status cms_vmm_reserve(struct cms_alloc *a);
/* Makes sure that cms_vmm_unreserve of a cannot fail for want of host memory
 * (cms_arena_give_ready); before the steps a free cannot undo. */
cms_status cms_vmm_unreserve_ready(struct cms_alloc *a);
/* Unmaps a's guard (guard.c: on failure nothing changed), then gives its addresses back to
 * the arena; when that fails an allocation that was guarded is guarded again (best effort,
 * logged). After cms_vmm_unreserve_ready only the guard's cuMemUnmap can fail: never for an
 * allocation without a guard (an active one). */
cms_status cms_vmm_unreserve(struct cms_alloc *a);
/* cuMemCreate into a->handle (which must be 0) with the region's properties. */
cms_status cms_vmm_create(struct cms_alloc *a);
/* cuMemRelease of a->handle if held; a->handle = 0 on success. */
cms_status cms_vmm_release(struct cms_alloc *a);
/* cuMemMap of a->handle at a->base + cuMemSetAccess read-write; sets mapped. */
cms_status cms_vmm_map(struct cms_alloc *a);

/* ---- device_caps.c: what the device allows a region's handles (no lock needed) ---- */
/* The CU_MEM_HANDLE_TYPE_* bits region flags ask for, checked against the device's attributes. */
cms_status cms_vmm_handle_types(cms_context *ctx, int32_t device, uint64_t flags, uint32_t *out);
/* Checks a region's peer_device_mask for device (each able to access its memory). */
cms_status cms_vmm_peers_check(cms_context *ctx, int32_t device, uint64_t mask);

/* ---- access.c: the access of a whole region's mappings (region lock held) ---- */
/*
 * Changes the access of every mapping of r (each allocation mapped, a run once: allocations,
 * coalesced runs, chunks with their tails) from old_mask read-only or not (old_ro) to mask
 * read-only or not (ro): see cms_vmm_set_access, revoking the devices of old_mask not in
 * mask. All or nothing: on failure the mappings already changed get their old access back,
 * and if that fails too, CMS_ERR_ROLLBACK_FAILED names the allocation (the mappings are then
 * mixed: some changed).
 */
cms_status cms_vmm_region_access(struct cms_region *r, uint64_t old_mask, bool old_ro,
				 uint64_t mask, bool ro);
/* cuMemUnmap if mapped; clears mapped on success. */
cms_status cms_vmm_unmap(struct cms_alloc *a);
/* Whatever is missing of handle + mapping (a member carved from a mapped chunk's tail only
 * becomes mapped: no driver call); nothing when mapped (also without a handle: see
 * cms_vmm_unback). On failure as before. */
cms_status cms_vmm_back(struct cms_alloc *a);
/* Release, then unmap (a's whole run: its last member; the run stays until
 * cms_run_dissolve); no undo. On failure a is as before: after a failed unmap the handle is
 * retained back from the mapping (cuMemRetainAllocationHandle). Only when that fails too is a
 * left mapped with its content but without a handle (the memory goes with the mapping: a pause
 * unmaps it, a resume backs it with a new handle). */
cms_status cms_vmm_unback(struct cms_alloc *a);

#endif /* CMS_VMM_H */
