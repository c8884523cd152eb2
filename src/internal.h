/* SPDX-License-Identifier: MIT */
/* internal.h - shared internal declarations of libcumemsaver. */
#ifndef CMS_INTERNAL_H
#define CMS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cumemsaver.h"
#include "driver.h"

#define CMS_MAX_DEVICES 64
#define CMS_COPY_STREAMS 4

/* ---- errors and logging (error.c, log.c) ---- */

cms_status cms_set_error(cms_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Maps a CUresult to a status and records "call: NAME (description)". */
cms_status cms_cu_error(const struct cms_driver *drv, CUresult res, const char *call);
/*
 * After a rollback: st with the saved message of the original failure when the
 * rollback succeeded (rb == 0), else CMS_ERR_ROLLBACK_FAILED naming both.
 */
cms_status cms_rollback_status(const cms_context *ctx, cms_status st, const char *saved,
			       cms_status rb, const char *what);
void cms_log(const cms_context *ctx, int32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * CU_TRY - runs a driver call through the context's table; on failure maps
 * the result to a status, records the driver's error name and jumps to label.
 */
#define CU_TRY(ctx, call, st, label)                                      \
	do {                                                              \
		CUresult cu_res_ = (ctx)->drv.call;                       \
		if (cu_res_ != CUDA_SUCCESS) {                            \
			(st) = cms_cu_error(&(ctx)->drv, cu_res_, #call); \
			goto label;                                       \
		}                                                         \
	} while (0)

/* ---- options (options.c) ---- */

/*
 * Sizes of the public structs in the release that introduced them (the
 * smallest struct_size accepted, the kernel's VER0). All of 1.0 for now; a
 * field added later leaves these as they are.
 */
#define CMS_CONTEXT_OPTIONS_SIZE_VER0 sizeof(cms_context_options)
#define CMS_REGION_OPTIONS_SIZE_VER0 sizeof(cms_region_options)
#define CMS_PAUSE_OPTIONS_SIZE_VER0 sizeof(cms_pause_options)
#define CMS_RESUME_OPTIONS_SIZE_VER0 sizeof(cms_resume_options)
#define CMS_REGION_INFO_SIZE_VER0 offsetof(cms_region_info, handle_types) /* 1.0 */
#define CMS_POINTER_INFO_SIZE_VER0 sizeof(cms_pointer_info)
#define CMS_PAUSE_RESULT_SIZE_VER0 offsetof(cms_pause_result, devices)	 /* 1.0 */
#define CMS_RESUME_RESULT_SIZE_VER0 offsetof(cms_resume_result, devices) /* 1.0 */

/* Copies a caller's option struct (struct_size first) into ours, see the header. */
cms_status cms_copy_in(void *ours, size_t ours_size, size_t ver0, const void *theirs,
		       const char *what);
/* Validates an output struct's struct_size. */
cms_status cms_check_out(const void *theirs, size_t ver0, const char *what);
/* Writes ours into theirs (min of sizes), keeping their struct_size, zeroing their extra bytes. */
void cms_copy_out(void *theirs, const void *ours, size_t ours_size);
cms_status cms_check_tag(const char *tag);

/* ---- objects ---- */

struct cms_device {
	bool ready;
	CUdevice cu;
	CUcontext primary;
	/* The library's own non-blocking streams for copies and memsets: allocations are spread
	 * over them so that the setup of one copy overlaps the transfer of another. */
	CUstream streams[CMS_COPY_STREAMS];
	CUevent events[CMS_COPY_STREAMS]; /* recorded on streams[] by an async resume */
	size_t granularity;
	bool gdr; /* GPUDirect RDMA flag accepted with VMM */
};

/* Host memory shared by the backups of several allocations of one region (host.c). */
struct cms_hostbuf {
	void *base;
	size_t len;
	unsigned users;	 /* allocations with a slice; under their region's lock */
	bool registered; /* page-locked with cuMemHostRegister */
	CUresult register_result;
	atomic_bool failed; /* no memory to fault its pages in */
	int32_t device;
};

struct cms_alloc {
	struct cms_region *region;
	CUdeviceptr base;
	size_t size;	 /* logical */
	size_t physical; /* rounded to granularity */
	/* State, each field the truth about one driver object (kept exact on every
	 * failure path, so a later call can always work from it):
	 *   handle != 0  a physical handle is held
	 *   mapped       it is mapped at base with read-write access (counted in backed_bytes)
	 *   backup       host buffer (kept across cycles; counted in host_bytes)
	 *   saved        the buffer holds the content (counted in backup_bytes) */
	CUmemGenericAllocationHandle handle;
	bool mapped;
	void *backup;		     /* this allocation's slice of hostbuf */
	size_t backup_len;	     /* page-rounded size of the slice */
	struct cms_hostbuf *hostbuf; /* shared with allocations of the same region (host.c) */
	bool saved;
	bool claimed;		/* a cms_free() removed it from the index and will free it */
	bool fresh_buffer;	/* scratch of the pause engine: buffer made by the running call */
	bool fresh_saved;	/* scratch of the pause engine: content saved by the running call */
	bool rollback_released; /* scratch of the pause rollback: its memory had been released */
	bool disk_slot;		/* DISK: has a slot in its region's file, at disk_off (disk.c) */
	uint64_t disk_off;
	struct cms_arena *arena; /* the reservation its addresses are carved from (arena.c) */
	/* Coalesced: its memory is a part of run's physical handle and mapping (run.c); handle
	 * and mapped then mirror the run's (every member changes with it). */
	struct cms_run *run;
	struct cms_alloc *prev, *next;
};

/* Address space of a region: reservations that allocations are carved from, so that
 * allocations made one after another are adjacent and a resume can coalesce them (arena.c). */
struct cms_extent {
	CUdeviceptr base;
	size_t len;
	struct cms_extent *next;
};
struct cms_arena {
	CUdeviceptr base; /* cuMemAddressReserve */
	size_t len;
	size_t used;		 /* bytes carved out (allocations, retained bytes of runs) */
	struct cms_extent *free; /* free extents, by address, merged */
	struct cms_arena *next;
};

/* Adjacent allocations of one region (same arena) backed by ONE physical handle with ONE
 * mapping over [base, base + len) (run.c). Bytes of members freed while it is mapped stay in
 * it ("retained") until it is released. */
struct cms_run {
	struct cms_region *region;
	struct cms_arena *arena;
	CUdeviceptr base;
	size_t len;
	CUmemGenericAllocationHandle handle;
	bool mapped;
	size_t users;	 /* live members */
	size_t retained; /* bytes of freed members, still in the handle and mapping */
	size_t nslots;	 /* members at creation, by address */
	struct cms_run_slot {
		CUdeviceptr base;
		size_t len;
		struct cms_alloc *a; /* NULL once freed (retained) */
	} slots[];
};

struct cms_region {
	cms_context *ctx;
	uint64_t id; /* creation order: the lock order between regions */
	char tag[CMS_TAG_MAX + 1];
	int32_t device;
	uint32_t policy;
	uint64_t flags;
	pthread_mutex_t lock;
	unsigned refs;		  /* protected by ctx->lock */
	bool dead;		  /* destroyed; protected by ctx->lock */
	unsigned nclaimed;	  /* allocations claimed by a cms_free() in flight; ctx->lock */
	pthread_cond_t unclaimed; /* signalled (with lock held) when such a free finishes */
	uint32_t state;		  /* written under lock, read atomically by cms_pointer_info_get */
	bool restore_pending; /* an async resume's copies may still run on the device's streams */
	uint64_t epoch;
	uint64_t nallocs, logical_bytes, physical_bytes, backed_bytes, backup_bytes, host_bytes;
	uint64_t retained_bytes; /* of freed allocations, still in runs (run.c) */
	uint64_t pinned_bytes;	 /* page-locked part of host_bytes (host.c) */
	struct cms_alloc *allocs;
	struct cms_region *prev, *next;
	uint32_t handle_types; /* CU_MEM_HANDLE_TYPE_* given to cuMemCreate (since 1.1) */
	uint64_t peer_mask;    /* other devices given read-write access (cms_vmm_map; since 1.1) */
	struct cms_ipc_pub *ipc;  /* exporters publishing it (ipc_export.c); under lock */
	struct cms_disk *disk;	  /* DISK: its directory and file (disk.c); under lock */
	struct cms_arena *arenas; /* its address space (arena.c); under lock */
};

struct cms_context {
	pthread_mutex_t lock; /* regions list, pointer index, devices, driver */
	struct cms_driver drv;
	bool drv_tried;
	cms_status drv_status;
	char drv_error[256];
	char *driver_path;
	cms_log_fn log_fn;
	void *log_user;
	int32_t log_level;
	struct cms_device devices[CMS_MAX_DEVICES];
	struct cms_region *regions, *regions_tail;
	uint64_t next_region_id;
	void *index;		     /* tsearch tree of struct cms_alloc by address range */
	unsigned fork_generation;    /* cms_fork_generation when created */
	atomic_int warned_register;  /* cuMemHostRegister failure logged */
	atomic_int ipc_objects;	     /* exporters, importers, control sockets alive (ipc_*.c) */
	cms_progress_fn progress_fn; /* cms_context_progress_set (progress.c); under lock */
	void *progress_user;
};

/* ---- hooks/hooks.c ---- */
/* Clears the hook context if it is ctx, once no hooked call uses it (cms_context_destroy). */
void cms_hook_forget_context(cms_context *ctx);
/* Remembers ptr, an allocation of ctx being released by a region or context destroy, if ctx
 * is the hook context: a later hooked free of it succeeds as a no-op. */
void cms_hook_retire(cms_context *ctx, uint64_t ptr);
/* Forgets ptr as retired (its address is an allocation again). */
void cms_hook_unretire(uint64_t ptr);

/* ---- context.c ---- */
/* Bumped in the child by a pthread_atfork handler. */
extern volatile unsigned cms_fork_generation;
/* CMS_ERR_FORKED (with a message) when called in a child forked after ctx was created. */
static inline cms_status cms_check_fork(const cms_context *ctx)
{
	if (__builtin_expect(ctx->fork_generation != cms_fork_generation, 0))
		return cms_set_error(CMS_ERR_FORKED,
				     "this process was forked after the context was "
				     "created: its GPU state belongs to the parent");
	return CMS_OK;
}

/* Loads the driver on first use; ctx->lock must be held. */
cms_status cms_ctx_driver_locked(cms_context *ctx);
/* Loads the driver and prepares a device (primary context, granularity). */
cms_status cms_ctx_device(cms_context *ctx, int32_t device, struct cms_device **out);
cms_status cms_push(cms_context *ctx, int32_t device);
void cms_pop(cms_context *ctx);
/* Makes device dev's primary context current (popping the one of *cur if any). */
cms_status cms_switch_device(cms_context *ctx, int32_t *cur, int32_t dev);
/* Pops what cms_switch_device pushed. */
void cms_switch_done(cms_context *ctx, int32_t *cur);

/* ---- index.c (ctx->lock held) ---- */
cms_status cms_index_insert(cms_context *ctx, struct cms_alloc *a);
void cms_index_remove(cms_context *ctx, struct cms_alloc *a);
struct cms_alloc *cms_index_find(cms_context *ctx, CUdeviceptr ptr);

/* ---- region.c ---- */
void cms_region_unref_locked(struct cms_region *r); /* ctx->lock held */
void cms_region_link_alloc(struct cms_region *r, struct cms_alloc *a);
void cms_region_unlink_alloc(struct cms_region *r, struct cms_alloc *a);
/* Frees what an allocation holds (region lock held); on failure it is kept as it was. */
cms_status cms_alloc_release(struct cms_alloc *a);

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
void cms_alloc_set_saved(struct cms_alloc *a, bool saved);

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
/* Closes the region's file (its space goes back to the filesystem). */
void cms_disk_close(struct cms_region *r);

/* ---- arena.c: address space of a region (region lock held) ---- */
/* Default reservation size; a larger allocation gets a reservation of its own. */
#define CMS_ARENA_BYTES (2ull << 30)
#define CMS_ARENA_ALIGN CMS_ARENA_BYTES /* a power of two, a multiple of any granularity */
/* Carves len bytes (a granularity multiple) for a->base and a->arena; may reserve. */
cms_status cms_arena_take(struct cms_region *r, size_t len, CUdeviceptr *base,
			  struct cms_arena **arena);
/* Gives [base, base + len) back; frees the reservation once nothing of it is used. On a
 * failure of that cuMemAddressFree nothing changed. */
cms_status cms_arena_give(struct cms_region *r, struct cms_arena *arena, CUdeviceptr base,
			  size_t len);
/* A destroyed region's arenas that bookkeeping failures left behind: freed, best effort. */
void cms_arena_drop_all(struct cms_region *r);

/* ---- run.c: coalesced re-backing (region lock held) ---- */
/* Sorts v[0..n) by address (cms_collect_allocs): the members of each run become consecutive. */
void cms_run_order(struct cms_alloc **v, size_t n);
/* Groups the allocations of v[0..n) that have no memory into runs of adjacent allocations
 * of one region and arena (regions allowing it); v in address order. No driver call. */
cms_status cms_run_plan(struct cms_alloc **v, size_t n);
/* cuMemCreate of the run's handle; every member's handle follows. */
cms_status cms_run_create(struct cms_run *run);
/* cuMemMap + cuMemSetAccess of the run; every member becomes mapped. */
cms_status cms_run_map(struct cms_run *run);
/* cuMemUnmap of the run; no member is mapped then. */
cms_status cms_run_unmap(struct cms_run *run);
/* cuMemRelease of the run's handle. The run stays (a rollback re-backs it whole) until
 * cms_run_dissolve. */
cms_status cms_run_release(struct cms_run *run);
/* Dissolves the runs of v[0..n) that hold no handle and no mapping (released, or planned and
 * never backed): members become separate allocations, retained bytes' addresses go back to
 * the arena. After a commit or an undo. No driver call. */
void cms_run_dissolve(struct cms_alloc **v, size_t n);
/* cuMemSetAccess over the whole run (see cms_vmm_set_access). */
cms_status cms_run_set_access(struct cms_run *run, uint64_t mask, uint64_t revoke);
/* Whether freeing a leaves its bytes in its run (other members are live). */
bool cms_run_keeps(const struct cms_alloc *a);
/* Detaches a from its run for a free (cms_run_keeps true): its bytes and addresses stay in
 * the run until the run is released. No driver call; cannot fail. */
void cms_run_retire(struct cms_alloc *a);
/* Whether a is the live member of its run with the highest address (a run's members are
 * copied in address order: after this one's copy the run may be released). */
bool cms_run_is_last(const struct cms_alloc *a);

/* ---- vmm.c: driver objects of one allocation (region lock held) ---- */
/* Accounting follows the state: change mapped and backup only through these. */
void cms_alloc_set_mapped(struct cms_alloc *a, bool mapped);
cms_status cms_vmm_reserve(struct cms_alloc *a);
cms_status cms_vmm_unreserve(struct cms_alloc *a);
/* cuMemCreate of size bytes with the region's properties. */
cms_status cms_vmm_create_handle(const struct cms_region *r, size_t size,
				 CUmemGenericAllocationHandle *handle);
/* cuMemMap of handle over [base, base + len) + cuMemSetAccess read-write for the region's
 * device and peers; CMS_ERR_ROLLBACK_FAILED: mapped without access (the unmap failed). */
cms_status cms_vmm_map_range(const struct cms_region *r, CUdeviceptr base, size_t len,
			     CUmemGenericAllocationHandle handle);
/* cuMemSetAccess over a mapped range (see cms_vmm_set_access). */
cms_status cms_vmm_access_range(const struct cms_region *r, CUdeviceptr base, size_t len,
				uint64_t mask, uint64_t revoke);
/* cuMemCreate into a->handle (which must be 0) with the region's properties. */
cms_status cms_vmm_create(struct cms_alloc *a);
/* cuMemRelease of a->handle if held; a->handle = 0 on success. */
cms_status cms_vmm_release(struct cms_alloc *a);
/* cuMemMap of a->handle at a->base + cuMemSetAccess read-write; sets mapped. */
cms_status cms_vmm_map(struct cms_alloc *a);
/* cuMemSetAccess of a mapped allocation: its region's device and the devices of mask
 * read-write, those of revoke not in mask none. On failure nothing changed. */
cms_status cms_vmm_set_access(struct cms_alloc *a, uint64_t mask, uint64_t revoke);
/* cuMemUnmap if mapped; clears mapped on success. */
cms_status cms_vmm_unmap(struct cms_alloc *a);
/* Whatever is missing of handle + mapping; on failure as before. */
cms_status cms_vmm_back(struct cms_alloc *a);
/* Unmap and release; a failed release is rolled back by mapping again. */
cms_status cms_vmm_unback(struct cms_alloc *a);

/* ---- pause.c / resume.c: transactional engine over regions (their locks held) ---- */
/* Across devices: multidev.c runs the *_dev engines below, one worker thread per device. */
cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t n,
			    const cms_pause_options *opts, cms_pause_result *res);
/* The allocations of the regions for which want() is true, in address order (NULL when none). */
cms_status cms_collect_allocs(struct cms_region **regions, size_t n,
			      bool (*want)(struct cms_alloc *), struct cms_alloc ***out,
			      size_t *count);
/* The distinct devices of the regions, into devs (room for CMS_MAX_DEVICES). */
size_t cms_region_devices(struct cms_region **regions, size_t n, int32_t *devs);
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
/* The library stream that the k-th copy of a call on device dev uses. */
static inline CUstream cms_copy_stream(const cms_context *ctx, int32_t dev, size_t k)
{
	return ctx->devices[dev].streams[k % CMS_COPY_STREAMS];
}
/* Waits for an async resume's restore copies of the region (region lock held). */
cms_status cms_region_settle(struct cms_region *r);
/* Synchronizes the library streams of each device. */
cms_status cms_sync_streams(cms_context *ctx, const int32_t *devs, size_t nd);
/* Enqueues the content restore of a freshly backed allocation per its policy. */
cms_status cms_restore_content(cms_context *ctx, struct cms_alloc *a, CUstream s, uint64_t *bytes);
cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t n,
			     const cms_resume_options *opts, cms_resume_result *res);

/* ---- multidev.c: pause/resume across devices, one worker thread per device ---- */
/* A device worker's part in the agreement of the devices of one call; NULL: one device. */
struct cms_xvote;
/* Status of a device that failed only because another one did: never returned to callers. */
#define CMS_XDEV_ABORTED 1
/*
 * An agreement point: waits until every device of the call got here (or failed before);
 * CMS_OK when none failed, else CMS_XDEV_ABORTED (with a message): roll back. CMS_OK at once
 * for xv NULL. A device's engine votes at the same points every call, and nothing may fail
 * after its last vote (the other devices commit then).
 */
cms_status cms_xdev_vote(struct cms_xvote *xv);
/* The engines of one device (regions all on one device when xv is not NULL). */
cms_status cms_engine_pause_dev(cms_context *ctx, struct cms_region **regions, size_t n,
				const cms_pause_options *opts, cms_pause_result *res,
				struct cms_xvote *xv);
cms_status cms_engine_resume_dev(cms_context *ctx, struct cms_region **regions, size_t n,
				 const cms_resume_options *opts, cms_resume_result *res,
				 struct cms_xvote *xv);
/*
 * Writes a pause/resume result to the caller: on success; on failure only when the engine
 * ran (devices != 0) and the caller's struct_size covers the 1.1 fields (ver0 is the 1.0
 * size), so that a 1.0 caller sees no change.
 */
void cms_result_out(void *theirs, const void *ours, size_t ours_size, size_t ver0, uint32_t devices,
		    cms_status st);

/*
 * Checks a region's peer_device_mask for device: existing devices (cuDeviceGetCount), not
 * device itself, each able to access device's memory (cuDeviceCanAccessPeer). Driver loaded.
 */
cms_status cms_check_peers(cms_context *ctx, int32_t device, uint64_t mask);

/* ---- log.c: log lines of worker threads ---- */
struct cms_logline {
	int32_t level;
	char text[512];
};
struct cms_logq {
	struct cms_logline *v;
	size_t n, cap;
	size_t dropped; /* lines that found no room */
};
/* From now on cms_log() on the calling thread queues into q (NULL: logs again). */
void cms_log_defer(struct cms_logq *q);
/* Emits q's lines through ctx's log path on the calling thread and empties q. */
void cms_log_flush(const cms_context *ctx, struct cms_logq *q);

uint64_t cms_now_ns(void);

/* ---- ipc_share.c: shareable regions ---- */
/* The CU_MEM_HANDLE_TYPE_* bits region flags ask for, checked against the device's attributes. */
cms_status cms_ipc_handle_types(cms_context *ctx, int32_t device, uint64_t flags, uint32_t *out);

/* ---- ipc_export.c: hooks of pause/resume into IPC (region locks held) ---- */
/*
 * Before a pause releases anything: asks every importer of the published regions among
 * regions[0..n) to drop its mappings and waits for the acknowledgements. On failure (timeout,
 * refusal) the importers that already dropped theirs are granted the memory again and the
 * status names the importer that did not consent. CMS_OK at once when nothing is published.
 */
cms_status cms_ipc_revoke(cms_context *ctx, struct cms_region **regions, size_t n);
/* After a resume (or a failed pause): grants the memory again to every importer that dropped
 * it; they re-map at their same addresses. Never fails (problems reach the importers). */
void cms_ipc_regrant(cms_context *ctx, struct cms_region **regions, size_t n);
/* Before a published region is destroyed (its lock held): revokes its importers, best effort
 * (a failure is logged; the thread's error message is kept). */
void cms_ipc_region_gone(struct cms_region *r);

/* ---- progress.c: the progress callback of one pause / resume / swap ---- */
struct cms_progress {
	cms_progress_fn fn; /* snapshot of the context's; NULL: no reports */
	void *user;
	const char *operation;
	uint64_t total, done;
	bool final_sent;
	pthread_mutex_t lock; /* serialises reports of the operation's threads */
};
/* Snapshot of ctx's callback at the start of an operation (takes ctx->lock briefly: the
 * innermost lock, so region locks may be held). */
void cms_progress_begin(struct cms_progress *p, cms_context *ctx, const char *operation,
			uint64_t total);
/* bytes more are done (NULL p or 0 bytes: nothing); calls the callback with done < total. */
void cms_progress_add(struct cms_progress *p, uint64_t bytes);
/* The final call (done == total) when ok; frees what begin set up. */
void cms_progress_end(struct cms_progress *p, bool ok);
/* Makes p the calling thread's operation for cms_progress_note; returns the previous one. */
struct cms_progress *cms_progress_enter(struct cms_progress *p);
/* cms_progress_add to the calling thread's operation (set by multidev.c), if any. */
void cms_progress_note(uint64_t bytes);

/* ---- pause_pipe.c: steady-state HOST pause, release overlapped with the copies ---- */
/* Whether v (one device, no other device in the call, no DISK allocation to write) has HOST
 * allocations with buffers to copy, enough for it. */
bool cms_pause_can_pipeline(struct cms_alloc **v, size_t n, size_t ndevices, bool other_devices);
/* Copies the mapped HOST allocations of v out in batches and unmaps and releases each batch
 * once its copies are done; v in address order. On failure copies may still run (synchronize
 * the device's library streams) and released ones hold their content in their backups. */
cms_status cms_pause_pipelined(cms_context *ctx, struct cms_alloc **v, size_t n, int32_t dev,
			       uint64_t *backed_up, uint64_t *released);

/* ---- pause.c helpers shared with swap.c ---- */
cms_status cms_pause_wait(cms_context *ctx, const int32_t *devs, size_t nd,
			  const cms_pause_options *o);
cms_status cms_pause_rollback(cms_context *ctx, struct cms_alloc **v, size_t n, const int32_t *devs,
			      size_t nd);
void cms_pause_drop_fresh(cms_context *ctx, struct cms_alloc **v, size_t n);

#endif /* CMS_INTERNAL_H */
