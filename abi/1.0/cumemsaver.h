/* SPDX-License-Identifier: MIT */
/*
 * cumemsaver.h - release GPU memory and take it back at the same virtual
 * addresses.
 *
 * This is the one public C ABI of libcumemsaver (SONAME libcumemsaver.so.1).
 * It is built on the CUDA driver's virtual memory management API: every
 * allocation is a virtual address reservation (cuMemAddressReserve) that
 * lives from cms_alloc() to cms_free(), backed by a physical allocation
 * (cuMemCreate + cuMemMap + cuMemSetAccess) that a pause releases
 * (cuMemUnmap + cuMemRelease) and a resume creates and maps again at the same
 * address. Pointers, kernel arguments and captured CUDA graphs therefore stay
 * valid across any number of pause/resume cycles.
 *
 * Conventions that hold for every function below:
 *  - Sizes are in bytes; devices are CUDA device ordinals (as cuDeviceGet);
 *    device pointers are CUdeviceptr values carried as uint64_t.
 *  - Every function returns a cms_status: CMS_OK (0) or a negative error.
 *    After an error, cms_last_error() describes it on the calling thread.
 *    Successful calls leave the message unchanged.
 *  - No function aborts, exits or prints. A failed call changes nothing
 *    (pause and resume are transactional over every allocation they touch).
 *  - All functions are thread-safe, with one exception stated where it
 *    applies: a handle may not be destroyed while another thread uses it.
 *  - Option structs start with `size_t struct_size`. Initialise them with the
 *    CMS_*_INIT macro or the *_init() function. A struct from an older
 *    header (smaller, but at least the struct's size in release 1.0, where
 *    it first appeared) is accepted; a larger one is accepted only if the
 *    bytes this library does not know are zero; anything else (or more than
 *    4096 bytes) is CMS_ERR_STRUCT_SIZE. Output structs follow the same size
 *    rules, are filled up to min(caller's struct_size, ours), and the
 *    caller's extra bytes are zeroed.
 *  - Statuses: each function lists the ones it returns for its own reasons.
 *    A function documented to call the driver may also return the status a
 *    failed driver call maps to: CMS_ERR_OUT_OF_DEVICE_MEMORY
 *    (CUDA_ERROR_OUT_OF_MEMORY), CMS_ERR_INVALID_DEVICE, CMS_ERR_NOT_SUPPORTED,
 *    CMS_ERR_NO_DEVICE, CMS_ERR_NO_DRIVER, else CMS_ERR_DRIVER; the message
 *    names the driver call and its CUresult. Any call may return
 *    CMS_ERR_OUT_OF_HOST_MEMORY when a small bookkeeping allocation fails.
 *  - Handles (cms_region *) are owned by the context and valid until
 *    destroyed; one obtained from cms_region_find or cms_pointer_info_get is
 *    the same handle, not a new reference: the caller keeps its use and its
 *    destruction apart.
 *  - Destroy functions accept NULL.
 *  - In a child process created by fork() after a context was created, every
 *    call on that context, its regions or pointers returns CMS_ERR_FORKED
 *    without touching anything (not even a lock); the statuses listed per
 *    function below leave this one out.
 *
 * The CUDA driver (libcuda.so.1) is loaded at run time by the first call that
 * needs it; the library has no link-time dependency on CUDA. A machine
 * without a driver gets CMS_ERR_NO_DRIVER from that call.
 */
#ifndef CUMEMSAVER_H
#define CUMEMSAVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CMS_BUILDING_LIBRARY)
#define CMS_API __attribute__((visibility("default")))
#else
#define CMS_API
#endif

/* ---- Versions ------------------------------------------------------------ */

#define CMS_VERSION_MAJOR 1
#define CMS_VERSION_MINOR 0
#define CMS_VERSION_PATCH 0
/* (major << 16) | (minor << 8) | patch */
#define CMS_VERSION_NUMBER \
	((CMS_VERSION_MAJOR << 16) | (CMS_VERSION_MINOR << 8) | CMS_VERSION_PATCH)

/*
 * cms_version - version of the library loaded at run time, encoded as
 * CMS_VERSION_NUMBER. Compare with CMS_VERSION_NUMBER of the header compiled
 * against. Never fails; thread-safe.
 */
CMS_API uint32_t cms_version(void);

/* cms_version_string - "1.0.0"; static storage, never NULL. Thread-safe. */
CMS_API const char *cms_version_string(void);

/* ---- Status codes -------------------------------------------------------- */

/* Status codes are never renumbered or reused. */
typedef int32_t cms_status;

#define CMS_OK 0
/* An argument is NULL, zero, out of range, has unknown flag bits, or a size overflows. */
#define CMS_ERR_INVALID_ARGUMENT (-1)
/* libcuda.so.1 (or the library named by CMS_DRIVER_LIBRARY) could not be loaded or initialised. */
#define CMS_ERR_NO_DRIVER (-2)
/* A driver call failed for a reason not covered by a more specific status. */
#define CMS_ERR_DRIVER (-3)
/* The device has no memory left (cuMemCreate / cuMemAddressReserve: CUDA_ERROR_OUT_OF_MEMORY). */
#define CMS_ERR_OUT_OF_DEVICE_MEMORY (-4)
/* A host allocation (backup buffer, bookkeeping) failed. */
#define CMS_ERR_OUT_OF_HOST_MEMORY (-5)
/* No region has this tag (and device), or the pointer is not in any allocation of this context. */
#define CMS_ERR_NOT_FOUND (-6)
/* A region with this tag already exists on this device. */
#define CMS_ERR_EXISTS (-7)
/* Pause of a region (or of a tag whose regions are all) already paused. Nothing changed. */
#define CMS_ERR_ALREADY_PAUSED (-8)
/* Resume of a region (or of a tag whose regions are all) not paused. Nothing changed. */
#define CMS_ERR_NOT_PAUSED (-9)
/* The operation needs an active region (alloc in a paused region). */
#define CMS_ERR_PAUSED (-10)
/* The device ordinal does not name a device of this process. */
#define CMS_ERR_INVALID_DEVICE (-11)
/* The device or driver lacks a needed feature (virtual memory management). */
#define CMS_ERR_NOT_SUPPORTED (-12)
/* struct_size is too small or too large, or unknown trailing bytes are non-zero. */
#define CMS_ERR_STRUCT_SIZE (-13)
/* The pointer lies inside an allocation but is not its base (cms_free). */
#define CMS_ERR_NOT_BASE (-14)
/* A rollback after a failure failed as well; the message names the allocation. */
#define CMS_ERR_ROLLBACK_FAILED (-15)
/* No CUDA device is present. */
#define CMS_ERR_NO_DEVICE (-16)
/* Internal invariant broken; please report. */
#define CMS_ERR_INTERNAL (-17)
/* Called in a child process created by fork() after the context was created: the GPU
 * state belongs to the parent. The child can only create new contexts. */
#define CMS_ERR_FORKED (-18)
/* Lowest status number in use (for bindings and tests). */
#define CMS_STATUS_MIN (-18)

/* cms_status_name - "CMS_OK", "CMS_ERR_NOT_FOUND", ...; "CMS_ERR_UNKNOWN_STATUS" for numbers not
 * listed. Never NULL. */
CMS_API const char *cms_status_name(cms_status status);
/* cms_status_string - one-line English description. Never NULL. */
CMS_API const char *cms_status_string(cms_status status);

/*
 * cms_last_error - message of the last failed call on the calling thread
 * (thread-local storage, valid until the thread's next failing call). Never
 * NULL: "" before any failure.
 */
CMS_API const char *cms_last_error(void);

/*
 * cms_last_error_message - copies the thread's last error message into buf
 * (len bytes, NUL-terminated, truncated if needed; buf may be NULL when len
 * is 0). Returns the full message length without the NUL, like snprintf.
 */
CMS_API size_t cms_last_error_message(char *buf, size_t len);

/* ---- Logging ------------------------------------------------------------- */

#define CMS_LOG_ERROR 0
#define CMS_LOG_WARN 1
#define CMS_LOG_INFO 2
#define CMS_LOG_DEBUG 3

/*
 * Log callback: level is CMS_LOG_*, message a NUL-terminated line without a
 * newline, valid during the call only. It may be called from any thread that
 * calls into the library, with library locks held: it must not call back
 * into cumemsaver.
 */
typedef void (*cms_log_fn)(void *user, int32_t level, const char *message);

/* ---- Context --------------------------------------------------------------- */

typedef struct cms_context cms_context;
typedef struct cms_region cms_region;

typedef struct cms_context_options {
	size_t struct_size; /* sizeof(cms_context_options) */
	/* Driver library to dlopen. NULL: environment variable CMS_DRIVER_LIBRARY
	 * (read with secure_getenv), else "libcuda.so.1". Point it at
	 * libcumemsaver-sim.so to run on the host simulation. Copied. */
	const char *driver_path;
	/* Log callback; NULL: silent, unless environment variable CMS_LOG is set
	 * (to a level 0-3), in which case lines go to stderr. */
	cms_log_fn log_fn;
	void *log_user;
	int32_t log_level; /* highest CMS_LOG_* level passed to log_fn */
	uint32_t flags;	   /* reserved, must be 0 */
} cms_context_options;

#define CMS_CONTEXT_OPTIONS_INIT                                               \
	{                                                                      \
		sizeof(cms_context_options), NULL, NULL, NULL, CMS_LOG_WARN, 0 \
	}

/* cms_context_options_init - fills *opts like CMS_CONTEXT_OPTIONS_INIT. Returns
 * CMS_ERR_INVALID_ARGUMENT on NULL. */
CMS_API cms_status cms_context_options_init(cms_context_options *opts);

/*
 * cms_context_create - creates a context. opts may be NULL (defaults). The
 * driver is not loaded yet: the first call that needs it does so (and gets
 * CMS_ERR_NO_DRIVER if it cannot). The context uses each device's primary
 * context (cuDevicePrimaryCtxRetain), so it shares the address space with
 * the CUDA runtime and PyTorch in the same process.
 * Ownership: *out belongs to the caller; free it with cms_context_destroy().
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (out NULL, flags set),
 * CMS_ERR_STRUCT_SIZE, CMS_ERR_OUT_OF_HOST_MEMORY.
 */
CMS_API cms_status cms_context_create(const cms_context_options *opts, cms_context **out);

/*
 * cms_context_destroy - destroys every region (freeing every allocation: all
 * their device pointers become invalid), releases the primary contexts
 * (cuDevicePrimaryCtxRelease) and unloads the driver. Not thread-safe against
 * other calls on the same context. NULL is accepted. Returns CMS_OK;
 * CMS_ERR_DRIVER (or another driver status) if freeing an allocation failed:
 * then the context stays valid, holding the regions and allocations not yet
 * freed (each as it was), and the call may be retried; CMS_ERR_FORKED in a
 * child process after fork() (nothing is touched; the child's copy of the
 * context is leaked, by design).
 */
CMS_API cms_status cms_context_destroy(cms_context *ctx);

/*
 * cms_device_memory_info - the driver's view of device memory: cuMemGetInfo
 * in the device's primary context. free_bytes / total_bytes may each be NULL.
 * Use it to check that a pause really returned memory to the driver.
 * Loads the driver and prepares the device on first use (as cms_region_create).
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_INVALID_DEVICE,
 * CMS_ERR_NOT_SUPPORTED (no VMM), CMS_ERR_NO_DRIVER, CMS_ERR_NO_DEVICE,
 * or a driver status.
 */
CMS_API cms_status cms_device_memory_info(cms_context *ctx, int32_t device, uint64_t *free_bytes,
					  uint64_t *total_bytes);

/* ---- Regions --------------------------------------------------------------- */

/* Restore policies: what content survives a pause. */
#define CMS_POLICY_DISCARD 0u /* content undefined after resume (KV cache, scratch) */
#define CMS_POLICY_ZERO 1u    /* every byte reads 0 after resume */
#define CMS_POLICY_HOST 2u    /* copied to host memory on pause, copied back on resume */
/* 3.. reserved for pinned host retention, disk and later policies. */

/* Region states */
#define CMS_STATE_ACTIVE 0u /* physical memory mapped; pointers usable */
#define CMS_STATE_PAUSED 1u /* physical memory released; addresses reserved, not accessible */

/* Longest tag, in bytes, without the terminating NUL. */
#define CMS_TAG_MAX 63

/*
 * Region flag: give host memory back after each successful resume. By
 * default a HOST region keeps its page-locked host buffers from one cycle to
 * the next, so that every pause and resume after the first is a plain DMA at
 * PCIe speed; with this flag every cycle makes new buffers (the first-cycle
 * cost) and a resumed region holds no host memory.
 */
#define CMS_REGION_RELEASE_HOST 0x1ull

typedef struct cms_region_options {
	size_t struct_size; /* sizeof(cms_region_options) */
	int32_t device;	    /* CUDA device ordinal */
	uint32_t policy;    /* CMS_POLICY_* */
	uint64_t flags;	    /* CMS_REGION_* */
} cms_region_options;

#define CMS_REGION_OPTIONS_INIT                                      \
	{                                                            \
		sizeof(cms_region_options), 0, CMS_POLICY_DISCARD, 0 \
	}

/* cms_region_options_init - fills *opts like CMS_REGION_OPTIONS_INIT. Returns
 * CMS_ERR_INVALID_ARGUMENT on NULL. */
CMS_API cms_status cms_region_options_init(cms_region_options *opts);

/*
 * cms_region_create - creates an empty region named tag on opts->device with
 * opts->policy. tag: NUL-terminated, 1..CMS_TAG_MAX bytes, copied. opts may
 * be NULL (device 0, DISCARD). Loads the driver, retains the device's primary
 * context and computes the allocation granularity
 * (cuMemGetAllocationGranularity, minimum, for pinned device memory with the
 * GPUDirect RDMA flag where the device supports it with VMM).
 * Ownership: *out is owned by the context; destroy it with
 * cms_region_destroy() or with the context.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL, bad tag, unknown policy,
 * flags), CMS_ERR_STRUCT_SIZE, CMS_ERR_EXISTS, CMS_ERR_INVALID_DEVICE,
 * CMS_ERR_NOT_SUPPORTED (no VMM), CMS_ERR_NO_DRIVER, CMS_ERR_NO_DEVICE,
 * CMS_ERR_OUT_OF_HOST_MEMORY, or a driver status. A driver that failed to
 * load is tried again by the next call.
 */
CMS_API cms_status cms_region_create(cms_context *ctx, const char *tag,
				     const cms_region_options *opts, cms_region **out);

/*
 * cms_region_find - looks up the region with this tag on this device.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_NOT_FOUND.
 */
CMS_API cms_status cms_region_find(cms_context *ctx, const char *tag, int32_t device,
				   cms_region **out);

/*
 * cms_region_destroy - frees every allocation of the region (as cms_free:
 * their pointers become invalid; host backups are dropped) and the region
 * itself. NULL is accepted. Must not run concurrently with other calls that
 * name this region handle (calls by tag or pointer are safe). Returns CMS_OK;
 * a driver status (CMS_ERR_DRIVER, ...) if freeing an allocation failed: the
 * allocations freed so far stay freed, the failing one and the rest stay as
 * they were, the region stays valid and the call may be retried;
 * CMS_ERR_FORKED.
 */
CMS_API cms_status cms_region_destroy(cms_region *region);

typedef struct cms_region_info {
	size_t struct_size;	   /* sizeof(cms_region_info), set by the caller */
	char tag[CMS_TAG_MAX + 1]; /* NUL-terminated */
	int32_t device;
	uint32_t policy;   /* CMS_POLICY_* */
	uint32_t state;	   /* CMS_STATE_* */
	uint32_t reserved; /* 0 */
	uint64_t flags;
	uint64_t allocations;	 /* live allocations */
	uint64_t logical_bytes;	 /* sum of the sizes asked for */
	uint64_t physical_bytes; /* sum of the sizes rounded to granularity (reserved address space)
				  */
	uint64_t backed_bytes;	 /* physical bytes currently backed by device memory */
	uint64_t backup_bytes;	 /* bytes of content saved in host backups (while paused) */
	uint64_t epoch;		 /* bumped by every successful resume, starts at 0 */
	uint64_t granularity;	 /* allocation granularity of this region's properties */
	uint64_t host_bytes;	 /* host memory held by backup buffers (kept across cycles) */
	uint32_t restore_pending; /* 1 while an async resume's restore copies may still run */
	uint32_t reserved2;	  /* 0 */
} cms_region_info;

/*
 * cms_region_info_get - a consistent snapshot of the region (taken under its
 * lock: waits for a pause or resume of it in progress). info->struct_size
 * must be set. Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE.
 */
CMS_API cms_status cms_region_info_get(cms_region *region, cms_region_info *info);

/* ---- Allocations ----------------------------------------------------------- */

/*
 * cms_alloc - allocates size bytes in an active region: reserves a virtual
 * range (cuMemAddressReserve, size rounded up to the granularity, aligned to
 * it), creates a physical allocation (cuMemCreate) and maps it read-write
 * for the region's device (cuMemMap, cuMemSetAccess). Content is undefined,
 * as with cudaMalloc. *ptr receives the device pointer; it stays the same
 * until cms_free(), whatever pauses and resumes happen in between.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL, size 0, size overflowing
 * when rounded), CMS_ERR_PAUSED, CMS_ERR_OUT_OF_DEVICE_MEMORY,
 * CMS_ERR_OUT_OF_HOST_MEMORY, or a driver status. On failure nothing is held.
 */
CMS_API cms_status cms_alloc(cms_region *region, uint64_t size, uint64_t *ptr);

/*
 * cms_free - frees the allocation whose base is ptr, in any state and from
 * any thread: unmaps and releases its physical memory if backed, drops its
 * host backup if any, frees its reservation (cuMemAddressFree). The caller
 * must have finished GPU work using it. Returns CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT (ptr 0), CMS_ERR_NOT_FOUND (not an allocation of
 * this context, or already freed), CMS_ERR_NOT_BASE (inside an allocation,
 * not at its base), a driver status (the allocation is kept, valid and in
 * its region's state; a paused allocation keeps its host backup, an active
 * one may have lost its content; a retry continues).
 */
CMS_API cms_status cms_free(cms_context *ctx, uint64_t ptr);

typedef struct cms_pointer_info {
	size_t struct_size;	/* sizeof(cms_pointer_info), set by the caller */
	cms_region *region;	/* owning region (owned by the context) */
	uint64_t base;		/* allocation's device pointer */
	uint64_t size;		/* size asked for */
	uint64_t offset;	/* ptr - base, < size */
	uint64_t physical_size; /* size rounded to granularity */
	int32_t device;
	uint32_t state; /* CMS_STATE_* of the region */
} cms_pointer_info;

/*
 * cms_pointer_info_get - "is this pointer ours?": finds the allocation that
 * contains ptr (base <= ptr < base + size). Returns CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE, CMS_ERR_NOT_FOUND.
 */
CMS_API cms_status cms_pointer_info_get(cms_context *ctx, uint64_t ptr, cms_pointer_info *info);

/* ---- Pause and resume ------------------------------------------------------ */

/* Pause flag: the caller guarantees no GPU work uses the memory; skip waiting. */
#define CMS_PAUSE_NO_SYNC 0x1u

typedef struct cms_pause_options {
	size_t struct_size; /* sizeof(cms_pause_options) */
	/* What the pause waits for before unmapping. Default (both 0): synchronize
	 * the primary context of every device touched (cuCtxSynchronize). stream:
	 * a CUstream to wait for instead (cuStreamSynchronize). event: a CUevent
	 * to wait for instead (cuEventSynchronize). */
	uint64_t stream;
	uint64_t event;
	uint64_t flags; /* CMS_PAUSE_* */
} cms_pause_options;

#define CMS_PAUSE_OPTIONS_INIT                     \
	{                                          \
		sizeof(cms_pause_options), 0, 0, 0 \
	}
CMS_API cms_status cms_pause_options_init(cms_pause_options *opts);

typedef struct cms_pause_result {
	size_t struct_size;	     /* sizeof(cms_pause_result), set by the caller */
	uint64_t regions;	     /* regions paused by this call */
	uint64_t allocations;	     /* allocations paused */
	uint64_t bytes_released;     /* physical bytes released (cuMemRelease) */
	uint64_t bytes_backed_up;    /* bytes copied to host backups */
	uint64_t driver_free_before; /* cuMemGetInfo free bytes before, summed over devices touched
				      */
	uint64_t driver_free_after;  /* ... and after the release */
	uint64_t elapsed_ns;	     /* wall time of the call */
} cms_pause_result;

/*
 * Resume flag: asynchronous restore. The call returns once every allocation
 * is backed and mapped (its pointer usable) and the content restores (HOST
 * copies, ZERO memsets) are enqueued on the library's streams; `stream` is
 * made to wait for them (cuStreamWaitEvent), so work the caller enqueues on
 * it afterwards sees the restored content without any host wait. Other
 * streams must wait on `stream` (or the caller checks
 * cms_region_info.restore_pending). Failures up to the return are rolled back
 * as usual; a copy that fails later is a CUDA error of the device context.
 * Not combinable with CMS_REGION_RELEASE_HOST (CMS_ERR_INVALID_ARGUMENT): the
 * host buffers are needed until the copies are done.
 */
#define CMS_RESUME_ASYNC 0x1ull

typedef struct cms_resume_options {
	size_t struct_size; /* sizeof(cms_resume_options) */
	uint64_t flags;	    /* CMS_RESUME_* */
	uint64_t
		stream; /* CMS_RESUME_ASYNC: CUstream to order after the restore (0: NULL stream) */
} cms_resume_options;

#define CMS_RESUME_OPTIONS_INIT                  \
	{                                        \
		sizeof(cms_resume_options), 0, 0 \
	}
CMS_API cms_status cms_resume_options_init(cms_resume_options *opts);

typedef struct cms_resume_result {
	size_t struct_size;
	uint64_t regions;	 /* regions resumed */
	uint64_t allocations;	 /* allocations re-backed */
	uint64_t bytes_backed;	 /* physical bytes created and mapped */
	uint64_t bytes_restored; /* bytes copied back from host backups */
	uint64_t elapsed_ns;
} cms_resume_result;

/*
 * cms_pause - pauses every active region whose tag is tag (every tag when tag
 * is NULL), on every device: waits for GPU work (see cms_pause_options),
 * copies HOST-policy allocations to host memory (cuMemcpyDtoH), unmaps
 * (cuMemUnmap) and releases (cuMemRelease) their physical memory. Addresses
 * stay reserved. Regions already paused are skipped. opts and result may be
 * NULL. All or nothing: if any step fails, every allocation touched is
 * mapped again with its content (allocations whose physical memory was
 * already released get it back per policy: HOST content restored, ZERO
 * zeroed, DISCARD undefined) and the status says what failed.
 * Locks: holds the locks of the regions it pauses, never the context's for
 * long; alloc/free in other regions proceed.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE,
 * CMS_ERR_NOT_FOUND (no region has tag), CMS_ERR_ALREADY_PAUSED (all its
 * regions are paused; also for tag NULL), CMS_ERR_OUT_OF_HOST_MEMORY (a host
 * backup), a driver status (CMS_ERR_OUT_OF_DEVICE_MEMORY when the rollback
 * of a failed release needs memory), or CMS_ERR_ROLLBACK_FAILED: a rollback
 * step failed too; every allocation is then left in an exact state (mapped,
 * or released with its HOST backup kept) that the next pause, resume or free
 * completes. The driver's free-memory readings in the result are only
 * measurements: a failure to read them gives 0, not an error.
 */
CMS_API cms_status cms_pause(cms_context *ctx, const char *tag, const cms_pause_options *opts,
			     cms_pause_result *result);

/*
 * cms_resume - resumes every paused region whose tag is tag (every tag when
 * NULL): creates physical memory (cuMemCreate), maps it at the same
 * addresses (cuMemMap, cuMemSetAccess), restores content per policy (HOST:
 * cuMemcpyHtoD from the backup, which is then freed; ZERO: cuMemsetD8Async +
 * synchronize) and bumps each region's epoch. Returns when the memory is
 * ready for use from any stream, or, with CMS_RESUME_ASYNC, as soon as it is
 * mapped, with the restore ordered before opts->stream (see the flag). The
 * create, map and restore of one allocation overlap with the next's; copies
 * are spread over the library's own streams. All or nothing: on failure every touched
 * allocation stays paused with its backup. Regions already active are
 * skipped. opts and result may be NULL.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE,
 * CMS_ERR_NOT_FOUND, CMS_ERR_NOT_PAUSED, CMS_ERR_OUT_OF_DEVICE_MEMORY (from
 * cuMemCreate: distinguishable, retry when memory is available),
 * CMS_ERR_OUT_OF_HOST_MEMORY (bookkeeping), a driver status, or
 * CMS_ERR_ROLLBACK_FAILED (undoing the partial resume failed too: the
 * allocations keep exact state and backups; the next resume completes).
 */
CMS_API cms_status cms_resume(cms_context *ctx, const char *tag, const cms_resume_options *opts,
			      cms_resume_result *result);

/*
 * cms_region_pause / cms_region_resume - the same for one region.
 * Return CMS_ERR_ALREADY_PAUSED / CMS_ERR_NOT_PAUSED (nothing changed) when
 * the region is already in the target state, and otherwise as above.
 */
CMS_API cms_status cms_region_pause(cms_region *region, const cms_pause_options *opts,
				    cms_pause_result *result);
CMS_API cms_status cms_region_resume(cms_region *region, const cms_resume_options *opts,
				     cms_resume_result *result);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_H */
