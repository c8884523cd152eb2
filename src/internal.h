/* SPDX-License-Identifier: MIT */
/* internal.h - shared internal declarations of libcumemsaver. */
#ifndef CMS_INTERNAL_H
#define CMS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cumemsaver.h"
#include "driver.h"

#define CMS_MAX_DEVICES 64

/* ---- errors and logging (error.c, log.c) ---- */

cms_status cms_set_error(cms_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Maps a CUresult to a status and records "call: NAME (description)". */
cms_status cms_cu_error(const struct cms_driver *drv, CUresult res, const char *call);
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

/* Copies a caller's option struct (struct_size first) into ours, see the header. */
cms_status cms_copy_in(void *ours, size_t ours_size, const void *theirs, const char *what);
/* Validates an output struct's struct_size; returns the bytes we may write. */
cms_status cms_out_size(const void *theirs, size_t ours_size, size_t *n, const char *what);
/* Writes ours into theirs (min of sizes), keeping their struct_size, zeroing their extra bytes. */
void cms_copy_out(void *theirs, const void *ours, size_t ours_size);
cms_status cms_check_tag(const char *tag);

/* ---- objects ---- */

struct cms_device {
	bool ready;
	CUdevice cu;
	CUcontext primary;
	CUstream stream; /* the library's own non-blocking stream for copies and memsets */
	size_t granularity;
	bool gdr; /* GPUDirect RDMA flag accepted with VMM */
};

struct cms_alloc {
	struct cms_region *region;
	CUdeviceptr base;
	size_t size;	 /* logical */
	size_t physical; /* rounded to granularity */
	CUmemGenericAllocationHandle handle;
	bool backed;  /* handle created and mapped with access */
	bool claimed; /* a cms_free() removed it from the index and will free it */
	void *backup; /* host copy while paused (HOST policy) */
	struct cms_alloc *prev, *next;
};

struct cms_region {
	cms_context *ctx;
	uint64_t id; /* creation order: the lock order between regions */
	char tag[CMS_TAG_MAX + 1];
	int32_t device;
	uint32_t policy;
	uint64_t flags;
	pthread_mutex_t lock;
	unsigned refs;	/* protected by ctx->lock */
	bool dead;	/* destroyed; protected by ctx->lock */
	uint32_t state; /* written under lock, read atomically by cms_pointer_info_get */
	uint64_t epoch;
	uint64_t nallocs, logical_bytes, physical_bytes, backed_bytes, backup_bytes;
	struct cms_alloc *allocs;
	struct cms_region *prev, *next;
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
	void *index;		  /* tsearch tree of struct cms_alloc by address range */
	unsigned fork_generation; /* cms_fork_generation when created */
};

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
void *cms_host_alloc(cms_context *ctx, size_t bytes);
void cms_host_free(cms_context *ctx, void *p, size_t bytes);

/* ---- vmm.c ---- */
/* Creates a physical allocation with the region's properties. */
cms_status cms_vmm_create(struct cms_region *r, size_t bytes, CUmemGenericAllocationHandle *h);
/* Maps handle h at a->base and grants read-write access to the region's device. */
cms_status cms_vmm_map(struct cms_alloc *a, CUmemGenericAllocationHandle h);
/* create + map into a->handle; rolled back on failure. */
cms_status cms_vmm_back(struct cms_alloc *a);
/* unmap + release of a->handle; rolled back (mapped again) on failure. */
cms_status cms_vmm_unback(struct cms_alloc *a);
cms_status cms_vmm_reserve(struct cms_alloc *a);
cms_status cms_vmm_unreserve(struct cms_alloc *a);

/* Makes device dev's primary context current (popping the one of *cur if any). */
cms_status cms_switch_device(cms_context *ctx, int32_t *cur, int32_t dev);
/* Pops what cms_switch_device pushed. */
void cms_switch_done(cms_context *ctx, int32_t *cur);
/* Saves/restores the thread's error message around a rollback. */
void cms_error_save(char *buf, size_t len);

/* ---- pause.c / resume.c: transactional engine over regions (their locks held) ---- */
cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t n,
			    const cms_pause_options *opts, cms_pause_result *res);
cms_status cms_collect_allocs(struct cms_region **regions, size_t n, struct cms_alloc ***out,
			      size_t *count);
cms_status cms_free_bytes(cms_context *ctx, struct cms_region **regions, size_t n, uint64_t *sum);
cms_status cms_sync_streams(cms_context *ctx, struct cms_region **regions, size_t n);
cms_status cms_restore_content(cms_context *ctx, struct cms_alloc *a, uint64_t *bytes);
void cms_drop_backups(cms_context *ctx, struct cms_alloc **v, size_t n);
cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t n,
			     const cms_resume_options *opts, cms_resume_result *res);

uint64_t cms_now_ns(void);

#endif /* CMS_INTERNAL_H */
