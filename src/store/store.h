/* SPDX-License-Identifier: MIT */
/*
 * store.h - where paused content lives: host backup buffers (host.c), files
 * (disk.c). Moves bytes between device memory and a store; knows no
 * transaction.
 */
#ifndef CMS_STORE_H
#define CMS_STORE_H

#include "vmm.h"

/* Bytes one backup copy may move at most when it covers several allocations. */
#define CMS_COPY_MERGE_MAX (64ull << 20)
/*
 * b directly follows a on both sides of a backup copy: its device bytes in the
 * same reservation (arena.c) and its backup in the same host buffer (one
 * registration, host.c). One cuMemcpy*Async can then move both: a copy may
 * span mappings of several physical handles that are adjacent in the virtual
 * address space, but never two host registrations.
 */
static inline bool cms_backup_adjacent(const struct cms_alloc *a, const struct cms_alloc *b)
{
	return a->arena && b->arena == a->arena && a->hostbuf && b->hostbuf == a->hostbuf &&
	       a->base + a->size == b->base && (char *)a->backup + a->size == (char *)b->backup;
}

/* ---- host.c: host backup buffers ---- */
/* Saves the content of the mapped HOST allocations of v that have none saved (async copies on
 * each device's library stream: synchronize before use), making buffers where needed. */
cms_status cms_backup_copy_out(cms_context *ctx, struct cms_alloc **v, size_t n, uint64_t *bytes);
/* Lets go of the allocation's slice of its host buffer (the buffer is unregistered and
 * unmapped with its last user); on failure nothing changes. */
cms_status cms_backup_free(cms_context *ctx, struct cms_alloc *a);
/* The two halves: cuMemHostUnregister (may fail, nothing changed then) and munmap. */
cms_status cms_backup_unpin(cms_context *ctx, struct cms_alloc *a);
void cms_backup_drop(cms_context *ctx, struct cms_alloc *a);
/* Registers an unpinned buffer again (a failure leaves it pageable). */
void cms_backup_repin(cms_context *ctx, struct cms_alloc *a);

/* ---- disk.c: the DISK restore policy (region locks held) ---- */
#define CMS_DISK_CHUNK (64ull << 20)	/* bytes per staging buffer; two per device and call */
#define CMS_DISK_ALIGN 4096u		/* file slots, batches and buffers (O_DIRECT) */
#define CMS_DISK_CHUNK_SIM (1ull << 20) /* with the host simulation: small tests, many batches */
/* CMS_ERR_INVALID_ARGUMENT if a DISK region of the list has no directory. */
cms_status cms_disk_check(struct cms_region **regions, size_t n);
/* Writes the content of the mapped DISK allocations of v (one device) to their regions'
 * files, pipelined through page-locked staging; synchronous. On failure none is saved. */
cms_status cms_disk_copy_out(cms_context *ctx, struct cms_alloc **v, size_t n, uint64_t *bytes);
/* Reads back the saved content of the mapped DISK allocations of v (one device); synchronous:
 * the copies are done when it returns. */
cms_status cms_disk_restore(cms_context *ctx, struct cms_alloc **v, size_t n, uint64_t *bytes);
/* Gives back an allocation's slot (it is being freed). */
void cms_disk_drop(struct cms_alloc *a);
/* Truncates the region's file when no allocation's content is kept there. */
void cms_disk_trim(struct cms_region *r);
/* Sets (dir) or clears (NULL) a DISK region's directory (region lock held). */
cms_status cms_store_dir_set(struct cms_region *r, const char *dir);
/* Closes the region's file (its space goes back to the filesystem). */
void cms_disk_close(struct cms_region *r);

#endif /* CMS_STORE_H */
