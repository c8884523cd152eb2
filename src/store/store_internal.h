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

/* The i-th policy, i < cms_store_count(). */
const struct cms_store_ops *cms_store_at(uint32_t i);

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

/* ---- host.c: host backup buffers (the HOST policy) ---- */

/*
 * b directly follows a on both sides of a backup copy: its device bytes in the
 * same reservation (arena.c) and its backup in the same host buffer (one
 * registration, host.c). One cuMemcpy*Async can then move both: a copy may
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

/* ---- host.c: host buffers made ahead, for host_ahead.c ---- */

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
#define CMS_DISK_ALIGN 4096u /* file slots, batches and buffers (O_DIRECT) */
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

#endif /* CMS_STORE_INTERNAL_H */
