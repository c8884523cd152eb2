/* SPDX-License-Identifier: MIT */
/*
 * store_internal.h - declarations shared by the files of src/store/ only
 * (tests/check_layers.py fails any file above the store that opens it): the
 * policies' tables, the live pieces of a copy, HOST buffers (cms_hostbuf_*),
 * DISK blocks and page-locked staging. store.h declares what the layers
 * above use.
 */
#ifndef CMS_STORE_INTERNAL_H
#define CMS_STORE_INTERNAL_H

#include "store.h"

/* The policies, by their CMS_POLICY_* number (store.c). */
extern const struct cms_store_ops cms_store_discard, cms_store_zero, cms_store_host, cms_store_disk;

/* ---- piece.c: the live pieces of a copy (content-free ranges left out, core/span.c) ---- */

/* Moves [off, off + len) of a copy, offsets from the first allocation's base. */
typedef cms_status (*cms_piece_fn)(void *arg, uint64_t off, uint64_t len);
/*
 * Calls fn, in address order, for each live piece of [off, off + len) of the
 * consecutive allocations v[0..n) (each one's bytes directly follow the previous
 * one's on both sides of the copy: cms_backup_adjacent, or n == 1), offsets
 * from v[0]->base; pieces that touch across allocations are one. Every copy
 * list of a store goes through it, so that bytes declared content-free
 * (cms_range_discard) are neither saved nor restored; without declarations it
 * is one call for the whole range. *bytes += the live bytes; stops at the
 * first failure of fn and returns it.
 */
cms_status cms_store_pieces(struct cms_alloc *const *v, size_t n, uint64_t off, uint64_t len,
			    cms_piece_fn fn, void *arg, uint64_t *bytes);

/* ---- host_policy.c: host backup buffers (the HOST policy) ---- */

/*
 * b directly follows a on both sides of a backup copy: its device bytes in the
 * same reservation (arena.c) and its backup in the same host buffer (one
 * registration, host_buffer.c). One cuMemcpy*Async can then move both: a copy may
 * span mappings of several physical handles that are adjacent in the virtual
 * address space, but never two host registrations.
 */
static inline bool cms_backup_adjacent(const struct cms_alloc *a, const struct cms_alloc *b)
{
	return cms_alloc_vmm(a)->arena && cms_alloc_vmm(b)->arena == cms_alloc_vmm(a)->arena &&
	       cms_alloc_store(a)->hostbuf &&
	       cms_alloc_store(b)->hostbuf == cms_alloc_store(a)->hostbuf &&
	       a->base + a->size == b->base &&
	       (char *)cms_alloc_store(a)->backup + a->size == (char *)cms_alloc_store(b)->backup;
}

/* ---- host_buffer.c: host buffers made ahead, for host_ahead.c ---- */

/* A buffer of len bytes for device's backups in no region yet, mapped (transparent huge pages
 * advised, not inherited by a fork) but neither faulted in nor page-locked; NULL when out of
 * host memory. Any thread, no lock. */
struct cms_hostbuf *cms_hostbuf_new(cms_context *ctx, int32_t device, size_t len, bool pageable);
size_t cms_hostbuf_len(const struct cms_hostbuf *hb);
/* Faults [off, off + len) of hb in; false when the kernel has no memory for it. No lock. */
bool cms_hostbuf_fault(struct cms_hostbuf *hb, size_t off, size_t len);
/* Page-locks hb (cuMemHostRegister, its device's primary context pushed); whether it is. No
 * lock; a refusal is not logged here. */
bool cms_hostbuf_pin(cms_context *ctx, struct cms_hostbuf *hb);
/* Gives back hb, in no region: unregistered (kept for cms_cleanup_retry if the driver refuses)
 * and unmapped. */
void cms_hostbuf_free(cms_context *ctx, struct cms_hostbuf *hb);
/* Makes hb one of r's buffers, with the slice at off[i] for v[i] (each without one, in
 * address order; the rest of hb: holes), each marked prepared; counted in r's host_bytes and,
 * page-locked, pinned_bytes; a buffer that could not be page-locked is page-locked by its
 * first copy (as a split buffer's pieces). r's lock held. */
void cms_hostbuf_attach(struct cms_region *r, struct cms_hostbuf *hb, struct cms_alloc **v,
			const size_t *off, size_t n);
/* The most bytes one host buffer holds for several allocations of r. */
uint64_t cms_hostbuf_group_max(const struct cms_region *r);

/* Takes over r's job in flight, if any: waits until it is built, then attaches its buffer as
 * finish does (cancel false: a pause), or gives it back (cancel true: it stops early; a flag
 * change, a destroy). r's lock held. */
void cms_store_prepare_take(struct cms_region *r, bool cancel);

/* ---- disk.c: the DISK policy ---- */
#define CMS_DISK_ALIGN 4096u		/* file slots, batches and buffers (O_DIRECT) */
#define CMS_DISK_PIECE_MIN (256u << 10) /* len / it: the most pieces of a transfer */
/* A batch of whole blocks fills a staging buffer of disk_stage bytes (tunables.c's range). */
_Static_assert(CMS_TUNE_STAGE_ALIGN % CMS_DISK_ALIGN == 0, "disk_stage is whole DISK blocks");

/* ---- stage.c: page-locked staging buffers (DISK, pageable HOST backups) ---- */
struct cms_stage {
	char *base;   /* two buffers of chunk bytes: base and base + chunk */
	size_t chunk; /* bytes per buffer */
	int32_t dev;
	bool registered, hooked;
};

/* Two staging buffers of chunk bytes (a multiple of CMS_DISK_ALIGN: cms_tune_bytes of a
 * staging size; less when total, rounded up to CMS_DISK_ALIGN, is smaller), page-locked where
 * cuMemHostRegister allows (else pageable: slower, still correct). CMS_ERR_OUT_OF_HOST_MEMORY ("...
 * of <what> staging buffers"); *s zeroed then. */
cms_status cms_stage_make(cms_context *ctx, int32_t dev, uint64_t total, uint64_t chunk,
			  const char *what, struct cms_stage *s);
/* Frees s (no copy may still use it); a zeroed s is nothing to free. */
void cms_stage_free(cms_context *ctx, struct cms_stage *s);
/* Unregisters (cuMemHostUnregister) and unmaps len bytes of page-locked staging at base
 * (hooked: counted by the driver's host allocation hook); on failure, of the push too, keeps
 * them for cms_cleanup_retry (logged): page-locked memory is never unmapped. */
void cms_stage_cleanup(cms_context *ctx, int32_t dev, void *base, size_t len, bool hooked);

/* ---- host_*.c: the HOST policy (cms_store_host) across its files ---- */
/* Host memory shared by the backups of several allocations of one region. Its bytes
 * are its users' slices plus free_bytes of freed slices (holes), which a later pause reuses. */
struct cms_hostbuf {
	void *base;
	size_t len;	/* bytes of its slices and holes: faulted in, page-locked, counted */
	size_t map_len; /* bytes mapped: len, plus the reach of short slices past it (slice_need) */
	unsigned users; /* allocations with a slice; under their region's lock */
	size_t free_bytes; /* bytes of no user's slice (counted in the region's host_free_bytes) */
	bool registered;   /* page-locked with cuMemHostRegister */
	bool pin_on_use;   /* not page-locked yet: the next copy into or out of it registers it */
	bool pageable; /* never page-locked: copies go through staging (CMS_REGION_HOST_PAGEABLE) */
	bool lazy; /* no user, kept MADV_FREEd for the next pause (store tunables: prep_lazyfree) */
	size_t prep_slot; /* during a pause: 1 + its index in the preparation list, or 0 */
	CUresult register_result;
	atomic_bool failed; /* no memory to fault its pages in */
	int32_t device;
	struct cms_hostbuf *next; /* the region's buffers (hostbufs) */
};

/* host_buffer.c */
/* forget_cancel: page-locks a's buffer again after cms_host_backup_unpin (unless it waits for
 * its next copy, or is pageable). */
void cms_host_backup_repin(cms_context *ctx, struct cms_alloc *a);
/* forget_begin: unregisters a's buffer when a is its last user (so that it can be unmapped). */
cms_status cms_host_backup_unpin(cms_context *ctx, struct cms_alloc *a);
/* A new buffer with a slice for each of the n allocations (not yet faulted in or registered). */
cms_status cms_host_buffer_map(cms_context *ctx, struct cms_alloc **v, size_t n,
			       const struct cms_store_tunables *o);
/* Page-locks a buffer; a failure leaves it pageable (logged once per context). */
void cms_host_buffer_register(cms_context *ctx, struct cms_hostbuf *hb);
/* Takes hb out of r's list of buffers. */
void cms_host_buffer_unlink(struct cms_region *r, struct cms_hostbuf *hb);
/* Faults the pages in; false when the kernel has no memory for them (not the OOM killer's turn). */
bool cms_host_fault_in(void *p, size_t len);
/*
 * One buffer's worth: the most bytes of backups one buffer holds for several
 * allocations (a single larger allocation gets a buffer of its own), and the
 * most bytes of freed slices region r keeps (cms_host_region_trim). 1 GiB; on the
 * simulation 16 granules, so that small tests reach it.
 */
uint64_t cms_host_group_max(const struct cms_region *r);
/* resumed: a's slice goes back when its region gives host memory back (RELEASE_HOST). */
void cms_host_resumed(cms_context *ctx, struct cms_alloc *a);
/* Unmaps r's buffers kept without users (lazy: the store's tunable prep_lazyfree). */
void cms_host_lazy_drop(struct cms_region *r);
/* The bytes a pause copies into a's backup at most: up to its last live byte, page-rounded. */
size_t cms_host_live_need(const struct cms_alloc *a);
/* Counts a buffer just registered in its region's pinned_bytes, or logs, once per context,
 * that it could not be page-locked (calling thread only). */
void cms_host_note_registered(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb);
/* n rounded up to whole pages. */
size_t cms_host_page_round(size_t n);
/* Page-locks a's buffer if it waits for its next copy to do so (a piece of a split buffer). */
void cms_host_pin_on_use(cms_context *ctx, struct cms_alloc *a);
/* The bytes of a's slice: its live extent with RELEASE_HOST (cms_host_live_need), else its size
 * page-rounded. */
size_t cms_host_slice_need(const struct cms_alloc *a);
/* forget: a lets go of its slice; the last user unmaps the buffer. */
void cms_host_slice_put(cms_context *ctx, struct cms_alloc *a);

/* host_holes.c */
/*
 * Keeps the holes of r's buffers at most one buffer's worth (cms_host_group_max): splits the
 * buffers with the most holes until they are. Best effort, after a free or a resume: a failure
 * leaves the holes for the next call. Never while an async resume's copies may still run.
 */
void cms_host_region_trim(struct cms_region *r);
/*
 * Gives each allocation of r among v[0..n) that needs a slice one in a hole of r's buffers,
 * first fit, so that churn (a free, an alloc of a similar size) reuses the host memory it
 * already has, page-locked, without a new buffer. Best effort: out of memory, it gives none.
 */
void cms_host_reuse_holes(struct cms_region *r, struct cms_alloc **v, size_t n);

/* host_pageable.c */
/* Whether r's new buffers are pageable (CMS_REGION_HOST_PAGEABLE). */
bool cms_host_region_pageable(const struct cms_region *r);
/* r's staging kept between restores, made on first use; NULL with the error set. */
struct cms_stage *cms_host_region_stage(cms_context *ctx, struct cms_region *r);
/* Frees r's staging (call_done, region_close). */
void cms_host_region_stage_free(struct cms_region *r);
/* Copies len bytes of pageable host memory at src to device memory at dst through the
 * staging sg; returns with every lane synchronized (the staging may be reused at once). */
cms_status cms_host_staged_in(struct cms_lanes *l, const struct cms_stage *sg, CUdeviceptr dst,
			      const char *src, size_t len);
/*
 * Copies len bytes of device memory at src into pageable host memory at dst through the
 * staging sg: the device fills one of its buffers while this thread empties the other.
 * Returns with no copy running into the staging (every lane synchronized on failure).
 */
cms_status cms_host_staged_out(struct cms_lanes *l, const struct cms_stage *sg, char *dst,
			       CUdeviceptr src, size_t len);

#endif /* CMS_STORE_INTERNAL_H */
