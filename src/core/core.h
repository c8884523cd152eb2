/* SPDX-License-Identifier: MIT */
/*
 * core.h - the bottom layer above the driver loader: the objects' core parts,
 * their locks and lists, devices, errors, logging, option structs, progress.
 */
#ifndef CMS_CORE_H
#define CMS_CORE_H

#include <limits.h>
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
/* Copies src into dst (cap bytes with the NUL), control characters escaped (text.c). */
size_t cms_text_escape(char *dst, size_t cap, const char *src);
/* The thread's message: fmt formatted, then escaped (cms_text_escape). */
cms_status cms_set_error(cms_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Maps a CUresult to a status and records "call: NAME (description)". */
cms_status cms_cu_error(const struct cms_driver *drv, CUresult res, const char *call);
/* After a rollback: st and saved if it succeeded (rb == 0), else CMS_ERR_ROLLBACK_FAILED. */
cms_status cms_rollback_status(const cms_context *ctx, cms_status st, const char *saved,
			       cms_status rb, const char *what);
/* A log line (log.c): fmt formatted, then escaped (cms_text_escape). */
void cms_log(const cms_context *ctx, int32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Runs a driver call; on failure sets st (cms_cu_error) and jumps to label. */
#define CU_TRY(ctx, call, st, label)                                      \
	do {                                                              \
		CUresult cu_res_ = (ctx)->drv.call;                       \
		if (cu_res_ != CUDA_SUCCESS) {                            \
			(st) = cms_cu_error(&(ctx)->drv, cu_res_, #call); \
			goto label;                                       \
		}                                                         \
	} while (0)

/* ---- options (options.c) ---- */
/* Sized public structs (docs/abi.md, "The smallest size accepted"): the struct, the last field
 * of the release that introduced it, and its size then on LP64 (ver0). */
#define CMS_SIZED_STRUCTS(X)                           \
	X(cms_context_options, flags, 40)    /* 1.0 */ \
	X(cms_region_options, flags, 24)     /* 1.0 */ \
	X(cms_pause_options, flags, 32)	     /* 1.0 */ \
	X(cms_resume_options, stream, 24)    /* 1.0 */ \
	X(cms_region_info, reserved2, 168)   /* 1.0 */ \
	X(cms_pointer_info, state, 56)	     /* 1.0 */ \
	X(cms_pause_result, elapsed_ns, 64)  /* 1.0 */ \
	X(cms_resume_result, elapsed_ns, 48) /* 1.0 */ \
	X(cms_exporter_options, flags, 32)   /* 1.1 */ \
	X(cms_import_options, name, 72)	     /* 1.1 */ \
	X(cms_import_info, reserved, 136)    /* 1.1 */ \
	X(cms_control_options, reserved, 48) /* 1.1 */ \
	X(cms_region_stats, resume_ns, 432)  /* 1.2 */ \
	X(cms_backup_info, state, 40)	     /* 1.2 */
struct cms_sized {			     /* a sized struct: its name (in messages) and ver0 */
	const char *name;
	size_t ver0;
};
#define CMS_SIZED_DECLARE(type, last, lp64) extern const struct cms_sized cms_sized_##type;
CMS_SIZED_STRUCTS(CMS_SIZED_DECLARE)
#undef CMS_SIZED_DECLARE
/* The descriptor of a struct of the table (a struct not in it does not compile). */
#define CMS_SIZED(type) (&cms_sized_##type)

/* Copies a caller's option struct into ours; validates an output struct's struct_size. */
cms_status cms_copy_in(void *ours, size_t ours_size, const void *theirs, const struct cms_sized *s);
cms_status cms_check_out(const void *theirs, const struct cms_sized *s);
/* The same, for a struct of the table by its type: theirs must point to that type. */
#define CMS_COPY_IN(ours, theirs, type)                                                       \
	cms_copy_in((1 ? (ours) : (type *)0), sizeof(type), (1 ? (theirs) : (const type *)0), \
		    CMS_SIZED(type))
#define CMS_CHECK_OUT(theirs, type) cms_check_out((1 ? (theirs) : (const type *)0), CMS_SIZED(type))
/* Writes ours into theirs (min of sizes), keeping their struct_size, zeroing their extra bytes. */
void cms_copy_out(void *theirs, const void *ours, size_t ours_size);
cms_status cms_check_tag(const char *tag);

/* ---- objects: core's parts; each layer embeds the part below it (docs/architecture.md) ---- */
#define cms_container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct cms_device {
	bool ready;
	CUdevice cu;
	CUcontext primary;
	CUstream streams[CMS_COPY_STREAMS]; /* the library's own, for copies and memsets */
	CUevent events[CMS_COPY_STREAMS];   /* recorded on streams[] by an async resume */
	size_t granularity;
	bool gdr;		    /* GPUDirect RDMA flag accepted with VMM */
	_Atomic uint64_t own_bytes; /* the library's own device memory (checksum scratch) */
};

struct cms_alloc {
	struct cms_region *region;
	CUdeviceptr base;
	size_t size;	 /* logical */
	size_t physical; /* rounded to granularity */
	bool mapped;	 /* mapped read-write at base (backed_bytes; account.c) */
	bool saved;	 /* its store holds the content (backup_bytes; account.c) */
	bool claimed;	 /* a cms_free() took it from the index and frees it; ctx->lock */
	/* Content-free ranges (cms_range_discard; span.c): sorted, disjoint, not adjacent. */
	struct cms_span *discarded;
	size_t ndiscarded, discarded_cap;
	uint64_t discarded_bytes;
	struct cms_alloc *prev, *next;
};

/* [off, off + len) of an allocation. */
struct cms_span {
	uint64_t off, len;
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
	bool dead;		  /* destroyed; written under lock and ctx->lock */
	bool dying;		  /* a cms_region_destroy is freeing its allocations; lock */
	unsigned nclaimed;	  /* allocations claimed by a cms_free() in flight; ctx->lock */
	pthread_cond_t unclaimed; /* signalled (with lock held) when such a free finishes */
	uint32_t state;		  /* written under lock, read atomically by cms_pointer_info_get */
	bool restore_pending; /* an async resume's copies may still run on the device's streams */
	uint64_t epoch;
	uint64_t nallocs, logical_bytes, physical_bytes, backed_bytes, backup_bytes, host_bytes;
	struct cms_alloc *allocs;
	struct cms_region *prev, *next;
};

/* Core calls up only through these tables, filled above (docs/architecture.md). Of a context,
 * filled by the api when it makes the context: NULL members do nothing. */
struct cms_context_ops {
	void (*driver_loaded)(cms_context *ctx); /* the driver just loaded: load the tunables */
	void (*device_ready)(cms_context *ctx, int32_t dev, size_t granularity); /* set up */
};

/* Of the process: the hook adapter's (adapters/hookctx.c), registered when the library loads;
 * none registered or a NULL member: nothing to do. */
struct cms_hook_ops {
	void (*before_fork)(void); /* pthread_atfork's handlers (device.c) */
	void (*after_fork_parent)(void);
	void (*after_fork_child)(void);
	void (*retire)(cms_context *ctx, uint64_t ptr); /* a destroy released the allocation */
	void (*unretire)(uint64_t ptr);			/* an allocation at ptr again */
	void (*region_gone_locked)(cms_context *ctx, const struct cms_region *r); /* ctx->lock */
	void (*context_gone)(cms_context *ctx); /* no hooked call may use ctx from now on */
	void (*context_free)(cms_context *ctx); /* frees what it keeps of ctx */
};
/* hookops.c: registers the table; the wrappers call its members for the api. */
void cms_hook_ops_register(const struct cms_hook_ops *ops);
void cms_hook_retire(cms_context *ctx, uint64_t ptr);
void cms_hook_unretire(uint64_t ptr);
void cms_hook_default_drop_locked(cms_context *ctx, const struct cms_region *r);
void cms_hook_forget_context(cms_context *ctx);
void cms_hook_defaults_free(cms_context *ctx);

/* The context's core part (the api allocates the whole object, api.h). */
struct cms_context {
	pthread_mutex_t lock; /* regions list, pointer index, devices, driver */
	struct cms_driver drv;
	const struct cms_context_ops *ops; /* set at creation (api) */
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
	cms_progress_fn progress_fn; /* cms_context_progress_set (progress.c); under lock */
	void *progress_user;
	pthread_mutex_t cleanup_lock; /* cleanups (cleanup.c); a leaf lock */
	struct cms_cleanup *cleanups; /* driver cleanups that failed, tried again later */
};

/* ---- cleanup.c: driver cleanups that failed, tried again later ---- */
struct cms_cleanup_ops {  /* a kind (vmm: ranges, store: staging), run in the device's context */
	const char *call; /* the driver call, for messages */
	CUresult (*run)(cms_context *ctx, struct cms_cleanup *c);
	void (*done)(cms_context *ctx, struct cms_cleanup *c); /* after run succeeded; or NULL */
};
struct cms_cleanup { /* one: what its kind's run and done need */
	const struct cms_cleanup_ops *ops;
	int32_t dev;
	void *p; /* the event, the staging area, the range */
	size_t len;
	bool hooked;  /* staging: counted by the driver's host allocation hook */
	bool mapped;  /* range: still mapped (unmapped before its reservation is freed) */
	uint64_t own; /* range: bytes of the device's own_bytes that its unmap gives back */
	struct cms_cleanup *next;
};
/* Runs c (a copy; c may be on the stack); on failure keeps it for cms_cleanup_retry. */
void cms_cleanup_run(cms_context *ctx, const struct cms_cleanup *c);
/* Keeps a copy of c, whose driver call just failed with res, for cms_cleanup_retry. */
void cms_cleanup_keep(cms_context *ctx, const struct cms_cleanup *c, CUresult res);
/* Destroys ev of device dev; on failure keeps it for cms_cleanup_retry. */
void cms_cleanup_event(cms_context *ctx, int32_t dev, CUevent ev);
/* Tries every kept cleanup again: CMS_OK when none is left, else the first failure's. */
cms_status cms_cleanup_retry(cms_context *ctx);
/* Gives up the kept cleanups (context destroy): each is logged as leaked. */
void cms_cleanup_abandon(cms_context *ctx);

/* ---- device.c: driver, devices, fork detection ---- */
extern volatile unsigned cms_fork_generation; /* bumped in a forked child */
/* CMS_ERR_FORKED (with a message) when called in a child forked after ctx was created. */
static inline cms_status cms_check_fork(const cms_context *ctx)
{
	if (__builtin_expect(ctx->fork_generation != cms_fork_generation, 0))
		return cms_set_error(CMS_ERR_FORKED,
				     "this process was forked after the context was "
				     "created: its GPU state belongs to the parent");
	return CMS_OK;
}

/* Loads the driver and prepares a device (primary context, granularity). */
cms_status cms_ctx_device(cms_context *ctx, int32_t device, struct cms_device **out);
cms_status cms_push(cms_context *ctx, int32_t device);
/* cuCtxPopCurrent, tried again when it fails (a failed pop leaves the context current). */
void cms_pop(cms_context *ctx);
/* Synchronizes the library streams of each device. */
cms_status cms_sync_streams(cms_context *ctx, const int32_t *devs, size_t nd);

/* Registers (once) the pthread_atfork handler that bumps cms_fork_generation. */
cms_status cms_fork_watch(void);
uint64_t cms_now_ns(void);

/* ---- thread.c: pthread_create of fn(arg) with every signal blocked in the new thread ---- */
int cms_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

/* ---- index.c (ctx->lock held) ---- */
cms_status cms_index_insert(cms_context *ctx, struct cms_alloc *a);
void cms_index_remove(cms_context *ctx, struct cms_alloc *a);
struct cms_alloc *cms_index_find(cms_context *ctx, CUdeviceptr ptr);

/* ---- account.c: allocation lists and byte counters (region lock held) ---- */
void cms_region_link_alloc(struct cms_region *r, struct cms_alloc *a);
void cms_region_unlink_alloc(struct cms_region *r, struct cms_alloc *a);
/* Accounting follows the state: change mapped and saved only through these. */
void cms_alloc_set_mapped(struct cms_alloc *a, bool mapped);
void cms_alloc_set_saved(struct cms_alloc *a, bool saved);

/* ---- span.c: content-free ranges of an allocation (region lock held) ---- */
/* Declares [off, off + len) content-free (len > 0); OUT_OF_HOST_MEMORY changes nothing. */
cms_status cms_span_discard(struct cms_alloc *a, uint64_t off, uint64_t len);
/* Ends the declaration over [off, off + len); OUT_OF_HOST_MEMORY changes nothing. */
cms_status cms_span_keep(struct cms_alloc *a, uint64_t off, uint64_t len);
/* Ends every declaration of a (a resume completed, the allocation goes). */
void cms_span_clear(struct cms_alloc *a);
/* The first live piece of [*off, end): *off its start, *len its bytes; false when none. */
bool cms_span_next_live(const struct cms_alloc *a, uint64_t *off, uint64_t end, uint64_t *len);
/* Live bytes of [off, end). */
uint64_t cms_span_live_bytes(const struct cms_alloc *a, uint64_t off, uint64_t end);
/* The end of a's last live byte: its size unless a declaration covers its tail (0: none live). */
uint64_t cms_span_live_end(const struct cms_alloc *a);

/* ---- trace.c: NVTX ranges (no-ops unless built with CMS_NVTX) ---- */
/* Initializes NVTX once, before any pause (cms_context_create; trace.c says why). */
void cms_trace_init(void);
/* Pushes a range named by fmt on the calling thread (nvtxRangePushA); pair with cms_trace_pop. */
void cms_trace_push(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cms_trace_pop(void);

/* ---- log.c: log lines of worker threads (struct cms_logline: core_internal.h) ---- */
struct cms_logq {
	struct cms_logline *v;
	size_t n, cap;
	size_t dropped; /* lines that found no room */
};
/* From now on cms_log() on the calling thread queues into q (NULL: logs again). */
void cms_log_defer(struct cms_logq *q);
/* Emits q's lines through ctx's log path on the calling thread and empties q. */
void cms_log_flush(const cms_context *ctx, struct cms_logq *q);

/* ---- progress.c: the calling thread's progress sink (engine/progress_report.c) ---- */
struct cms_progress_sink {
	void (*add)(struct cms_progress_sink *s, uint64_t bytes); /* bytes more are done */
};
/* Makes s the calling thread's sink (NULL: none) for cms_progress_note; returns the previous. */
struct cms_progress_sink *cms_progress_enter(struct cms_progress_sink *s);
/* Adds bytes to the calling thread's sink, if any. */
void cms_progress_note(uint64_t bytes);

#endif /* CMS_CORE_H */
