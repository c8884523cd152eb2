/* SPDX-License-Identifier: MIT */
/*
 * store.h - where paused content lives: one restore policy per file (discard.c,
 * zero.c, host_*.c, disk.c), each an operations table (struct cms_store_ops);
 * store.c holds the table and the helpers that apply it to a list of
 * allocations. A store moves bytes between device memory and its storage and
 * keeps the allocation's saved/storage fields; it knows no transaction: the
 * engine decides when to save, restore or forget, and undoes.
 *
 * What the layers above use; the store's own declarations (the policies'
 * tables, live pieces, host buffers, staging, DISK blocks) are in
 * store_internal.h, which no file above the store may open.
 *
 * Every function here runs with the locks of the allocations' regions held.
 * Functions taking a struct cms_lanes run with that device's primary context
 * current on the calling thread (the engine makes it current once per call).
 */
#ifndef CMS_STORE_H
#define CMS_STORE_H

#include "vmm.h"

/* The store's part of an allocation (core.h says how the parts compose); under its region's
 * lock. Core's saved: the store holds the content. */
struct cms_store_alloc {
	struct cms_vmm_alloc below;
	void *backup;	   /* HOST: this allocation's slice of hostbuf */
	size_t backup_len; /* page-rounded size of the slice */
	struct cms_hostbuf
		*hostbuf;  /* shared with allocations of the same region (host_buffer.c) */
	bool fresh_buffer; /* the slice was made by the running pause (the engine clears it) */
	bool prepared;	   /* the slice was made ahead (host_ahead.c) and holds no content yet */
	bool disk_slot;	   /* DISK: has a slot in its region's file, at disk_off (disk.c) */
	uint64_t disk_off;
	/* Frozen region (cms_region_freeze): the backup its storage holds (backup_held) equals
	 * the device content and cannot diverge, so a pause need not copy it. Set by the engine's
	 * commit (a pause of the frozen region saved it, or a resume of it restored it whole);
	 * cleared by a thaw, a retention flags change, a failed call and a resume of a region not
	 * frozen. Meaningless, and never used, while the store holds no backup of it
	 * (cms_store_current).
	 */
	bool current;
};

/* The store's part of a region; under the region's lock. */
struct cms_store_region {
	struct cms_vmm_region below;
	uint64_t pinned_bytes;	  /* page-locked part of host_bytes (host_buffer.c) */
	uint64_t host_free_bytes; /* part of host_bytes in no allocation's slice (host_holes.c) */
	struct cms_hostbuf *hostbufs;	     /* its host backup buffers (host_buffer.c) */
	struct cms_stage *host_stage;	     /* staging kept between restores (host_pageable.c) */
	struct cms_disk *disk;		     /* DISK: its directory and file (disk.c) */
	struct cms_prep_job *prep_job;	     /* a buffer being made ahead for it (host_ahead.c) */
	uint64_t bytes_prepared, prepare_ns; /* its cms_region_stats: host_ahead.c counts */
};

/* Staging buffers (host_stage, disk_stage) are whole multiples of it: DISK files are read and
 * written in such blocks (O_DIRECT, CMS_DISK_ALIGN). */
#define CMS_TUNE_STAGE_ALIGN 4096u
#define CMS_PREP_THREADS_MAX 64
#define CMS_DISK_THREADS_MAX 16
/* The store's tunables (engine/tunables.c sets them when the driver loads; read-only after). */
struct cms_store_tunables {
	struct cms_tune_size host_group; /* host_buffer.c: backups sharing one host buffer */
	struct cms_tune_size host_stage; /* host_pageable.c: a pageable copy's staging buffer */
	struct cms_tune_size disk_stage; /* disk.c: a DISK staging buffer */
	/* host_buffer.c, host_policy.c, making new host buffers (the options lab/hoststore
	 * measures): */
	bool prep_hugetlb;     /* MAP_HUGETLB for buffers of whole 2 MiB pages */
	bool prep_nothp;       /* no MADV_HUGEPAGE advice */
	bool prep_noprefault;  /* workers do not fault pages in (cuMemHostRegister does) */
	bool prep_lazyfree;    /* buffers given back are MADV_FREE'd and kept for the next pause */
	unsigned prep_threads; /* workers, 1..CMS_PREP_THREADS_MAX; 0: the CPUs, at most 16 */
	size_t prep_slice;     /* bytes a worker faults at a time */
	unsigned disk_threads; /* disk.c: transfers of one batch at once, 1..CMS_DISK_THREADS_MAX */
};

/* The store's part of a context (core.h says how the parts compose). */
struct cms_store_context {
	struct cms_vmm_context below;
	struct cms_store_tunables tune;
	atomic_int warned_register; /* cuMemHostRegister failure logged (host_buffer.c) */
};

static inline struct cms_store_context *cms_ctx_store(const cms_context *ctx)
{
	return cms_container_of(cms_ctx_vmm(ctx), struct cms_store_context, below);
}

static inline struct cms_store_alloc *cms_alloc_store(const struct cms_alloc *a)
{
	return cms_container_of(cms_alloc_vmm(a), struct cms_store_alloc, below);
}

static inline struct cms_store_region *cms_region_store(const struct cms_region *r)
{
	return cms_container_of(cms_region_vmm(r), struct cms_store_region, below);
}

/* ---- lanes.c: the copy streams of one side of an engine call ---- */
/*
 * The copy streams one side of an engine call may use on device dev: the
 * library streams [first, first + count) (core.h: CMS_COPY_STREAMS per
 * device). Copies are spread over them in turn (next), so that the setup of
 * one copy overlaps the transfer of another.
 */
struct cms_lanes {
	cms_context *ctx;
	int32_t dev;
	unsigned first, count;
	size_t next; /* copies issued through cms_lane() */
};

/* The stream of the next copy. */
static inline CUstream cms_lane(struct cms_lanes *l)
{
	return l->ctx->devices[l->dev].streams[l->first + l->next++ % l->count];
}

/* The k-th stream of the lanes (k taken modulo their count). */
static inline CUstream cms_lane_at(const struct cms_lanes *l, size_t k)
{
	return l->ctx->devices[l->dev].streams[l->first + k % l->count];
}

/* cuStreamSynchronize of each of the lanes' streams; the first failure is returned. */
cms_status cms_lanes_sync(const struct cms_lanes *l);

/* Bytes one backup copy may move at most when it covers several allocations. */
#define CMS_COPY_MERGE_MAX (64ull << 20)

/*
 * A restore policy. Operations a policy does not need are NULL. "v[0..n)" is
 * always a list of allocations of this policy on the lanes' device, in
 * address order.
 */
struct cms_store_ops {
	const char *name; /* as cmsctl prints it: "discard", "zero", "host", "disk" */
	/*
	 * Pause: copies the content of the mapped allocations v[0..n) into the
	 * store and marks each saved (cms_alloc_set_saved); *bytes += bytes
	 * copied. With save_sync false the copies may still run on the lanes'
	 * streams when it returns (the engine synchronizes before it releases
	 * anything); with save_sync true the content is stored on return. On
	 * failure the allocations marked saved keep their (possibly partial)
	 * copies: the engine's undo forgets them (their device memory is intact).
	 * NULL: the content is not kept.
	 */
	cms_status (*save)(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes);
	bool save_sync;
	/* Whether saving a needs no new storage (every pause after the first): the engine may
	 * then release memory while other copies still run (engine/overlap.c). */
	bool (*save_ready)(const struct cms_alloc *a);
	/*
	 * Resume, and the rollback of a pause: writes the policy's content into
	 * the freshly mapped allocations v[0..n) (async on the lanes' streams:
	 * the engine synchronizes); *bytes += bytes copied from the store.
	 * restore_batched: the engine calls it once with every allocation of the
	 * policy a call backs, after all are mapped (the store batches its I/O
	 * itself); else in address order as allocations get mapped, at most
	 * CMS_COPY_MERGE_MAX bytes at a time, so that the copies overlap the
	 * backing of the next ones.
	 */
	cms_status (*restore)(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes);
	bool restore_batched;
	/* After a committed resume of a: its stored content is stale (cms_alloc_set_saved has
	 * cleared saved); drop storage the region does not keep between cycles. */
	void (*resumed)(cms_context *ctx, struct cms_alloc *a);
	/* After a committed resume of region r (once per region). */
	void (*region_resumed)(struct cms_region *r);
	/*
	 * Letting go of a's storage (a is freed, or a failed pause made it): in
	 * two halves so that a free stays transactional. forget_begin may fail
	 * and then changes nothing; forget cannot fail; forget_cancel undoes
	 * forget_begin when a later step of the free failed.
	 */
	cms_status (*forget_begin)(cms_context *ctx, struct cms_alloc *a);
	void (*forget)(cms_context *ctx, struct cms_alloc *a);
	void (*forget_cancel)(cms_context *ctx, struct cms_alloc *a);
	/* After a free of one of r's allocations (forget): give back storage r keeps beyond its
	 * bound (HOST: freed slices over one buffer's worth). Best effort: cannot fail; what it
	 * leaves, a later call trims. */
	void (*trim)(struct cms_region *r);
	/* Whether region r can be paused now (DISK: it has a directory); with a message. */
	cms_status (*check)(const struct cms_region *r);
	/* cms_region_disk_dir_set: sets (dir) or clears (NULL) where r keeps its content. */
	cms_status (*dir_set)(struct cms_region *r, const char *dir);
	/* A pause, resume or swap of r ends (committed or rolled back, no copy running): free
	 * what the call made for itself (HOST: the staging of pageable backups). */
	void (*call_done)(struct cms_region *r);
	/* r is destroyed (or its last reference goes): give its storage back. */
	void (*region_close)(struct cms_region *r);
	/* Bytes of a that a pause (out) or resume (!out) reports through the progress callback. */
	uint64_t (*progress_bytes)(const struct cms_alloc *a, bool out);
	/*
	 * cms_backup_get / cms_backup_read (since 1.2). backup_held: whether a's storage holds
	 * a backup now (the content of its region's last pause: paused, the content itself;
	 * active, storage kept by retention) and, in *host, its byte 0 in host memory (NULL:
	 * not in host memory). backup_read copies len bytes of it from offset off into buf.
	 * NULL: the policy keeps no content.
	 */
	bool (*backup_held)(const struct cms_alloc *a, void **host);
	cms_status (*backup_read)(struct cms_alloc *a, uint64_t off, void *buf, uint64_t len);
	/* cms_region_flags_set: gives back the storage that active region r keeps between
	 * cycles (no copy runs): host buffers, and with files too the space of its file. Best
	 * effort: what fails stays (logged) until a later resume, free or trim. */
	void (*release_kept)(struct cms_region *r, bool files);
};

/* The policy of r (its number was checked when r was created). */
const struct cms_store_ops *cms_store_of(const struct cms_region *r);
/* The number of policies (valid CMS_POLICY_* values are 0 .. count - 1). */
uint32_t cms_store_count(void);
/* ---- store.c: a policy's operation over a list of allocations of any policies ---- */

/* CMS_OK, or the first region of regions[0..n) whose policy's check fails. */
cms_status cms_store_check(struct cms_region **regions, size_t n);
/* Calls save for the mapped allocations of each policy of v[0..n) whose save_sync is sync;
 * those with a current backup (cms_store_current) are marked saved without a copy. */
cms_status cms_store_save(struct cms_lanes *l, struct cms_alloc **v, size_t n, bool sync,
			  uint64_t *bytes);
/* Whether pausing v[0..n) may release memory while copies run: every mapped allocation's
 * policy saves asynchronously into storage it already has, or keeps nothing, or its backup is
 * current (cms_store_current). */
bool cms_store_save_ready(struct cms_alloc **v, size_t n);
/* Whether a's policy saves asynchronously (copies left running on the lanes). */
bool cms_store_saves_async(const struct cms_alloc *a);
/* Calls restore for v[0..n) (all of one policy; the policy's restore_batched is false). */
cms_status cms_store_restore(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes);
/* Calls each restore_batched policy's restore for its allocations among v[0..n). */
cms_status cms_store_restore_batched(struct cms_lanes *l, struct cms_alloc **v, size_t n,
				     uint64_t *bytes);
/* After a committed resume: resumed for each allocation of v, region_resumed for each
 * region of regions. */
void cms_store_resumed(cms_context *ctx, struct cms_alloc **v, size_t n,
		       struct cms_region **regions, size_t nr);
/* The halves of letting go of a's storage (see forget_begin in struct cms_store_ops). */
cms_status cms_store_forget_begin(cms_context *ctx, struct cms_alloc *a);
void cms_store_forget(cms_context *ctx, struct cms_alloc *a);
void cms_store_forget_cancel(cms_context *ctx, struct cms_alloc *a);
/* After a free of one of r's allocations: its policy's trim. */
void cms_store_trim(struct cms_region *r);
cms_status cms_store_dir_set(struct cms_region *r, const char *dir);
/* The longest disk directory, given and absolute: its files' names (dir/cumemsaver-...) fit in
 * PATH_MAX, and so does the copy a hook template keeps (core.h). */
#define CMS_DISK_DIR_MAX 4000u
/* Checks that dir (1..CMS_DISK_DIR_MAX bytes) is a directory and resolves it to an absolute path
 * (realpath, also at most CMS_DISK_DIR_MAX bytes) in *abs (the caller frees it); on failure *abs
 * is NULL and the status says why (disk.c). */
cms_status cms_store_dir_resolve(const char *dir, char **abs);
void cms_store_region_close(struct cms_region *r);
/* Whether a has a backup now (backup_held): CMS_OK with *host (NULL: not in host memory),
 * CMS_ERR_NOT_SUPPORTED (its policy keeps no content) or CMS_ERR_NOT_PAUSED, with a message. */
cms_status cms_store_backup(const struct cms_alloc *a, void **host);
/* Copies len bytes of a's backup (cms_store_backup CMS_OK) from offset off into buf. */
cms_status cms_store_backup_read(struct cms_alloc *a, uint64_t off, void *buf, uint64_t len);
/* Its policy's release_kept, if any: what active region r keeps between cycles goes (HOST:
 * retained host buffers, page-locked or pageable, and staging; DISK: the file's space when
 * files), for a change of CMS_REGION_RELEASE_HOST or CMS_REGION_HOST_PAGEABLE
 * (cms_region_flags_set). Region lock held. */
void cms_store_release_kept(struct cms_region *r, bool files);
/* The end of a pause, resume or swap of regions[0..n): each policy's call_done. */
void cms_store_call_done(struct cms_region **regions, size_t n);
/* Bytes a's policy reports as progress for a pause (out) or resume (!out) of it (its
 * progress_bytes; 0 when it has none). */
uint64_t cms_store_progress_bytes(const struct cms_alloc *a, bool out);

/* Content bytes of a that a pause (out: a is mapped) or resume (!out: a is saved) copies to or
 * from its store; 0 for a policy that keeps nothing and for a pause of a current backup
 * (counters, cms_region_stats). */
uint64_t cms_store_copy_bytes(const struct cms_alloc *a, bool out);

/* ---- store.c: backups of frozen regions (cms_region_freeze) ---- */
/* Whether a pause may save mapped allocation a without a copy: its current flag is set and its
 * policy holds a backup of it now (backup_held: HOST slices kept, DISK slots kept). */
bool cms_store_current(const struct cms_alloc *a);
/* Content bytes a pause of a does not copy because its backup is current (bytes_unchanged). */
uint64_t cms_store_unchanged_bytes(const struct cms_alloc *a);
/* No backup of r's allocations is current any more (thaw, retention flags change). */
void cms_store_stale(struct cms_region *r);

/* ---- host_ahead.c: host backups made ahead (CMS_REGION_PREPARE) ---- */

/*
 * One buffer made ahead for a group of allocations of one region, by the engine's background
 * thread: planned under the region's lock, made without it, then attached under it again.
 * Whoever holds the region's lock meanwhile (a pause, a flag change, the region's destroy) may
 * take it over (cms_store_prepare_take). Lives on the making thread's stack.
 */
struct cms_prep_job {
	size_t n;	/* allocations planned for */
	uint64_t *base; /* their bases and sizes, in address order */
	uint64_t *size;
	size_t *off; /* their slices' offsets in the buffer */
	size_t len;  /* the buffer's bytes */
	int32_t device;
	bool pageable;
	struct cms_hostbuf *hb; /* made (NULL: it failed or was cancelled) */
	char why[160];		/* why it failed ("" if it did not) */
	uint64_t ns;		/* the making's time */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast when built */
	bool built;	     /* lock */
	bool taken;	     /* taken over (the region's lock) */
	atomic_bool cancel;  /* give the buffer back instead of making it */
};

/* Whether r wants buffers made ahead: CMS_POLICY_HOST, CMS_REGION_PREPARE without
 * CMS_REGION_RELEASE_HOST, active, not being destroyed. r's lock held. */
bool cms_store_prepare_wanted(const struct cms_region *r);
/* Plans j for the first allocations of r, in address order, that have no host backup, up to
 * one buffer's worth (cms_hostbuf_group_max), and registers it as r's job in flight; false
 * when there is none (or r wants none, or no memory for the plan). r's lock held. */
bool cms_store_prepare_plan(struct cms_region *r, struct cms_prep_job *j);
/* Makes j's buffer (mapped, faulted in, page-locked unless pageable), stopping early when j is
 * cancelled or *stop is set; marks j built. No lock held. */
void cms_store_prepare_build(cms_context *ctx, struct cms_prep_job *j, const atomic_bool *stop);
/* After cms_store_prepare_build: unless taken over, attaches the buffer to those of its
 * allocations that still need it (counted in r's bytes_prepared, prepare_ns) and returns
 * NULL, or returns the buffer when none does (the caller frees it, cms_store_prepare_free,
 * after unlocking). Frees j's plan. r's lock held. */
struct cms_hostbuf *cms_store_prepare_finish(struct cms_region *r, struct cms_prep_job *j);
/* Gives back a buffer cms_store_prepare_finish returned: unregistered (kept for
 * cms_cleanup_retry if the driver refuses) and unmapped. No lock held. */
void cms_store_prepare_free(cms_context *ctx, struct cms_hostbuf *hb);
#endif /* CMS_STORE_H */
