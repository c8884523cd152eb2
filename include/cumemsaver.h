/* SPDX-License-Identifier: MIT */
/*
 * cumemsaver.h - release GPU memory and take it back at the same virtual
 * addresses.
 *
 * The public C ABI of libcumemsaver (SONAME libcumemsaver.so.1). Include this
 * file only: it includes cumemsaver_hooks.h (allocator hooks, PyTorch entry
 * points) and cumemsaver_ipc.h (sharing between processes, control socket).
 *
 * Built on the CUDA driver's virtual memory management API: every allocation
 * is a virtual address range reserved by its region (cuMemAddressReserve)
 * that lives from cms_alloc() to cms_free(), backed by physical memory
 * (cuMemCreate + cuMemMap + cuMemSetAccess) that a pause releases (cuMemUnmap
 * + cuMemRelease) and a resume creates and maps again at the same address.
 * Pointers, kernel arguments and captured CUDA graphs therefore stay valid
 * across any number of pause/resume cycles. How the library does it (threads,
 * streams, buffers, files) is in docs/internals.md; only what this header
 * says is the contract.
 *
 * Conventions that hold for every function of the three headers:
 *  - Units: sizes, lengths and byte counts are in bytes; durations carry
 *    their unit in their name (_ns nanoseconds, _ms milliseconds). Devices are
 *    CUDA device ordinals (as cuDeviceGet). Device pointers, CUstream and
 *    CUevent handles are carried as uint64_t.
 *  - Each function's comment here is its short contract; the full one is its
 *    manual page (cms_pause(3), ...), made from abi/contracts/<function>.txt:
 *    what it does and what its parameters mean, Ownership (who frees what, how
 *    long a returned pointer lives), Threads, CUDA (the driver calls it makes,
 *    or "none"; not repeated: cuCtxPushCurrent / cuCtxPopCurrent around them,
 *    cuGetErrorName for a failure's message) and Returns (every status it
 *    returns for its own reasons).
 *  - Every function returning cms_status returns CMS_OK (0) or a negative
 *    CMS_ERR_*. After an error, cms_last_error() describes it on the calling
 *    thread; a successful call leaves the message unchanged (one exception:
 *    cms_hook_free).
 *  - Driver statuses: a function whose Returns list ends with "driver
 *    statuses" may also return the status a failed CUDA call maps to:
 *    CMS_ERR_OUT_OF_DEVICE_MEMORY (CUDA_ERROR_OUT_OF_MEMORY),
 *    CMS_ERR_INVALID_DEVICE, CMS_ERR_NOT_SUPPORTED, CMS_ERR_NO_DEVICE,
 *    CMS_ERR_NO_DRIVER, else CMS_ERR_DRIVER; the message names the call and
 *    its CUresult.
 *  - Not repeated per function: any function returning cms_status may return
 *    CMS_ERR_OUT_OF_HOST_MEMORY when a small bookkeeping allocation fails, and
 *    CMS_ERR_INTERNAL when it finds an internal invariant broken (a bug:
 *    please report it).
 *  - Fork: in a child process created by fork() after a context was created,
 *    every function given that context or one of its objects (region, pointer,
 *    exporter, import, control socket; the hook functions through the hook
 *    context) returns CMS_ERR_FORKED without touching anything (not even a
 *    lock). Not repeated per function either. That is all the library
 *    promises there: the child's hook stacks are empty, and its exit never
 *    touches the parent's objects (the child's copies are leaked, by design);
 *    cms_context_create works in the child (it makes no driver call). But the
 *    CUDA driver does not support a child using CUDA after its parent
 *    initialised it (any context of the parent that made a driver call, or
 *    the parent's own CUDA use): the driver calls a context of the child
 *    makes then fail or misbehave, at the driver's discretion, and the
 *    library returns what they return. A child that needs the GPU must
 *    exec() a program (or be forked before the parent's first CUDA call).
 *  - No function aborts, exits or prints. A failed call changes nothing unless
 *    its comment says otherwise (pause, resume and swap are transactional over
 *    every allocation they touch).
 *  - Threads: every function is thread-safe unless its Threads line says
 *    otherwise; in any case no handle may be destroyed while another thread
 *    uses it.
 *  - Sized structs start with `size_t struct_size`, set by the caller
 *    (CMS_*_INIT macros and *_init() functions do it). A struct from an older
 *    header (smaller, but at least the struct's size in the release where it
 *    first appeared: 1.0, or 1.1 for the structs marked "since 1.1") is
 *    accepted; a larger one only if the bytes this library does not know are
 *    zero; anything else, or more than 4096 bytes, is CMS_ERR_STRUCT_SIZE.
 *    Input (options) structs are copied: the fields the caller's size does
 *    not cover read as zero (a field added later means "as before" at zero).
 *    Output (info, result) structs are written up to min(caller's
 *    struct_size, ours); the caller's bytes past ours are zeroed; struct_size
 *    is left as the caller set it.
 *  - Handles (cms_region *) are owned by their context and valid until
 *    destroyed; one obtained from cms_region_find or cms_pointer_info_get is
 *    the same handle, not a new reference: the caller keeps its use and its
 *    destruction apart. Destroy functions accept NULL.
 *  - The CUDA driver (libcuda.so.1) is loaded at run time by the first call
 *    that needs it; the library has no link-time dependency on CUDA. A machine
 *    without a driver gets CMS_ERR_NO_DRIVER from that call.
 */
#ifndef CUMEMSAVER_H
#define CUMEMSAVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CMS_BUILDING_LIBRARY)
#define CMS_API __attribute__((visibility("default")))
#else
#define CMS_API
#endif

/* ---- Versions ------------------------------------------------------------ */

/* The version of this header: 1.3.0. */
#define CMS_VERSION_MAJOR 1
#define CMS_VERSION_MINOR 3
#define CMS_VERSION_PATCH 0
/* (major << 16) | (minor << 8) | patch */
#define CMS_VERSION_NUMBER \
	((CMS_VERSION_MAJOR << 16) | (CMS_VERSION_MINOR << 8) | CMS_VERSION_PATCH)

/*
 * The version of the library loaded at run time, encoded as CMS_VERSION_NUMBER. Thread-safe;
 * never fails. See cms_version(3).
 */
CMS_API uint32_t cms_version(void);

/*
 * The loaded library's version as "MAJOR.MINOR.PATCH": static storage, never NULL, never freed.
 * Thread-safe; never fails. See cms_version_string(3).
 */
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
/* A host allocation (backup buffer, bookkeeping, thread) failed. */
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
/*
 * Called in a child process created by fork() after the context was created:
 * the GPU state belongs to the parent. The child may create contexts of its
 * own, but the CUDA driver does not support a child using CUDA once its parent
 * initialised it (see the fork convention at the top of cumemsaver.h).
 */
#define CMS_ERR_FORKED (-18)
/*
 * Since 1.1 (IPC, docs/ipc.md): a message from a peer is malformed, of an
 * unknown type or of an unsupported protocol version; the connection is dropped.
 */
#define CMS_ERR_PROTOCOL (-19)
/* Since 1.1: the peer's uid (SO_PEERCRED) is not allowed, or the exporter refused us for it. */
#define CMS_ERR_PERMISSION (-20)
/* Since 1.1: a peer did not answer in time (the message names it: pid, uid, name). */
#define CMS_ERR_TIMEOUT (-21)
/* Since 1.1: the peer process closed its socket or exited (crashed). */
#define CMS_ERR_DISCONNECTED (-22)
/*
 * Since 1.1: an exporter's region no longer has the layout an importer mapped
 * (allocations added or freed between exports); nothing was mapped.
 */
#define CMS_ERR_LAYOUT_CHANGED (-23)
/* Since 1.1: an importer or the application's control callback refused the request. */
#define CMS_ERR_REFUSED (-24)
/* Since 1.1: a system call on a socket or file failed (the message names it and errno). */
#define CMS_ERR_IO (-25)
/* Since 1.3: the region is frozen: its memory is read-only (cms_region_freeze). */
#define CMS_ERR_FROZEN (-26)
/*
 * Since 1.3: content restored differs from the content paused: the checksum
 * of a CMS_REGION_VERIFY allocation's restored device content is not the one
 * its pause took (the message names the region's tag and the allocation's
 * base). The resume was rolled back: the region stays paused, its backup kept.
 */
#define CMS_ERR_VERIFY_FAILED (-27)
/* Lowest status number in use (for bindings and tests). */
#define CMS_STATUS_MIN (-27)

/*
 * The name of a status ("CMS_ERR_NOT_FOUND"; unknown: "CMS_ERR_UNKNOWN_STATUS"): static
 * storage, never NULL. Thread-safe; never fails. See cms_status_name(3).
 */
CMS_API const char *cms_status_name(cms_status status);

/*
 * A one-line English description of a status: static storage, never NULL. Thread-safe; never
 * fails. See cms_status_string(3).
 */
CMS_API const char *cms_status_string(cms_status status);

/*
 * The message of the calling thread's last failed call ("" before any): thread-local, valid
 * until that thread's next failing call, never NULL. Thread-safe; never fails. See
 * cms_last_error(3).
 */
CMS_API const char *cms_last_error(void);

/*
 * Copies the calling thread's last error message into buf (len bytes, NUL-terminated); returns
 * the full length like snprintf. Thread-safe; never fails. See cms_last_error_message(3).
 */
CMS_API size_t cms_last_error_message(char *buf, size_t len);

/* ---- Logging ------------------------------------------------------------- */

#define CMS_LOG_ERROR 0
#define CMS_LOG_WARN 1
#define CMS_LOG_INFO 2
#define CMS_LOG_DEBUG 3

/*
 * Log callback. level: CMS_LOG_*. message: a NUL-terminated line without a
 * newline (at most 511 bytes), valid during the call only; control
 * characters of quoted text (paths, peers' messages) are escaped as in
 * cms_last_error. user: the
 * context's log_user. Called on a thread that called into the library (lines
 * of the library's own threads are passed on by the calling thread once they
 * are done), possibly with library locks held: it must not call back into
 * cumemsaver.
 */
typedef void (*cms_log_fn)(void *user, int32_t level, const char *message);

/* ---- Context --------------------------------------------------------------- */

typedef struct cms_context cms_context;
typedef struct cms_region cms_region;

typedef struct cms_context_options {
	size_t struct_size; /* sizeof(cms_context_options) */
	/*
	 * Driver library to dlopen, copied. NULL or "": the environment variable
	 * CMS_DRIVER_LIBRARY (read with secure_getenv) if set and not empty, else
	 * "libcuda.so.1". Point it at libcumemsaver-sim.so to run on the host
	 * simulation; "sim" (here or in CMS_DRIVER_LIBRARY) names the one installed
	 * with this library (libcumemsaver-sim.so beside libcumemsaver.so.1, in its
	 * cumemsaver/ directory, or in the build tree's src/sim/).
	 */
	const char *driver_path;
	/*
	 * Log callback. NULL: no callback; lines go to stderr only when the
	 * environment variable CMS_LOG is set (read once per process: "0" to "3"
	 * is the highest level printed, any other non-empty value CMS_LOG_WARN).
	 */
	cms_log_fn log_fn;
	void *log_user; /* passed to log_fn; borrowed: keep it valid while the context lives */
	/* With log_fn: the highest CMS_LOG_* level passed to it (default CMS_LOG_WARN). */
	int32_t log_level;
	uint32_t flags; /* reserved, must be 0 */
} cms_context_options;

#define CMS_CONTEXT_OPTIONS_INIT                                               \
	{                                                                      \
		sizeof(cms_context_options), NULL, NULL, NULL, CMS_LOG_WARN, 0 \
	}

/*
 * Fills *opts like CMS_CONTEXT_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_context_options_init(3).
 */
CMS_API cms_status cms_context_options_init(cms_context_options *opts);

/*
 * Creates a context, the owner of every object of the library; *out is the caller's
 * (cms_context_destroy). Makes no driver call. Thread-safe. See cms_context_create(3).
 */
CMS_API cms_status cms_context_create(const cms_context_options *opts, cms_context **out);

/*
 * Destroys every region of ctx, then ctx (NULL: nothing done); on failure ctx stays valid and a
 * retry continues. Not thread-safe against any other call on ctx or its objects. See
 * cms_context_destroy(3).
 */
CMS_API cms_status cms_context_destroy(cms_context *ctx);

/*
 * Free and total bytes of a device (cuMemGetInfo in its primary context); either pointer may be
 * NULL. Thread-safe. See cms_device_memory_info(3).
 */
CMS_API cms_status cms_device_memory_info(cms_context *ctx, int32_t device, uint64_t *free_bytes,
					  uint64_t *total_bytes);

/* ---- Regions --------------------------------------------------------------- */

/* Restore policies: what content survives a pause. */
#define CMS_POLICY_DISCARD 0u /* content undefined after resume (KV cache, scratch) */
#define CMS_POLICY_ZERO 1u    /* every byte reads 0 after resume */
#define CMS_POLICY_HOST 2u    /* copied to host memory on pause, copied back on resume */
/*
 * Since 1.1: written to a file in a directory on pause, read back on resume
 * (needs cms_region_disk_dir_set before the first pause).
 */
#define CMS_POLICY_DISK 3u
/* 4.. reserved for later policies. */

/* Region states */
#define CMS_STATE_ACTIVE 0u /* physical memory mapped; pointers usable */
#define CMS_STATE_PAUSED 1u /* physical memory released; addresses reserved, not accessible */

/*
 * Longest tag, in bytes, without the terminating NUL. A tag is a
 * NUL-terminated string of 1..CMS_TAG_MAX bytes without control characters
 * (bytes below 0x20 and 0x7f); tags are compared byte by byte.
 */
#define CMS_TAG_MAX 63

/*
 * Region flag: give host backups (and a DISK file's space) back after each resume. Not with
 * CMS_RESUME_ASYNC. cms_region_create(3).
 */
#define CMS_REGION_RELEASE_HOST 0x1ull
/*
 * Region flag (since 1.1): shareable with other processes (POSIX descriptor handles;
 * cms_exporter_publish). cms_region_create(3).
 */
#define CMS_REGION_SHAREABLE 0x2ull
/*
 * Region flag (since 1.1): also request fabric handles (CU_MEM_HANDLE_TYPE_FABRIC).
 * cms_region_create(3).
 */
#define CMS_REGION_SHAREABLE_FABRIC 0x4ull
/*
 * Region flag (since 1.1): coalesced backing, one handle and mapping per run of adjacent
 * allocations. cms_region_create(3).
 */
#define CMS_REGION_COALESCE 0x8ull
/*
 * Region flag (since 1.2), with CMS_REGION_COALESCE: small allocations carved from shared 64
 * MiB chunks. cms_region_create(3).
 */
#define CMS_REGION_CHUNKS 0x40ull
/*
 * Region flag (since 1.2): paused ranges stay mapped read-only to zeros (six zero handles per
 * device). cms_region_create(3).
 */
#define CMS_REGION_GUARD 0x10ull
/*
 * Region flag (since 1.2), CMS_POLICY_HOST only: pageable host backups, never page-locked.
 * Changeable. cms_region_create(3).
 */
#define CMS_REGION_HOST_PAGEABLE 0x20ull
/*
 * Region flag (since 1.3), HOST or DISK only: checksummed backups; a resume that restores other
 * content fails (CMS_ERR_VERIFY_FAILED). Changeable. cms_region_create(3).
 */
#define CMS_REGION_VERIFY 0x80ull
/*
 * Region flag (since 1.3), CMS_POLICY_HOST only: host backups made ahead, after each cms_alloc,
 * by a library thread. cms_region_create(3).
 */
#define CMS_REGION_PREPARE 0x100ull

/*
 * Handle types of a region's physical allocations (cms_region_info.handle_types,
 * since 1.1); the values of CUmemAllocationHandleType.
 */
#define CMS_HANDLE_TYPE_POSIX_FD 0x1u
#define CMS_HANDLE_TYPE_FABRIC 0x8u

typedef struct cms_region_options {
	size_t struct_size; /* sizeof(cms_region_options) */
	int32_t device;	    /* CUDA device ordinal (default 0) */
	uint32_t policy;    /* CMS_POLICY_* (default CMS_POLICY_DISCARD) */
	uint64_t flags;	    /* CMS_REGION_* (default 0) */
} cms_region_options;

#define CMS_REGION_OPTIONS_INIT                                      \
	{                                                            \
		sizeof(cms_region_options), 0, CMS_POLICY_DISCARD, 0 \
	}

/*
 * Fills *opts like CMS_REGION_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_region_options_init(3).
 */
CMS_API cms_status cms_region_options_init(cms_region_options *opts);

/*
 * Creates an empty, active region named tag (copied) on opts->device with opts->policy and
 * opts->flags (NULL opts: device 0, DISCARD); *out is owned by ctx. Thread-safe. See
 * cms_region_create(3).
 */
CMS_API cms_status cms_region_create(cms_context *ctx, const char *tag,
				     const cms_region_options *opts, cms_region **out);

/*
 * Looks up the region tagged tag on device; *out is the handle cms_region_create returned, not
 * a new reference. Thread-safe. See cms_region_find(3).
 */
CMS_API cms_status cms_region_find(cms_context *ctx, const char *tag, int32_t device,
				   cms_region **out);

/*
 * Frees every allocation of the region (as cms_free), then the region (NULL: nothing done); on
 * failure it stays valid and a retry continues. Not concurrently with other calls naming this
 * handle. See cms_region_destroy(3).
 */
CMS_API cms_status cms_region_destroy(cms_region *region);

typedef struct cms_region_info {
	size_t struct_size;	   /* sizeof(cms_region_info), set by the caller */
	char tag[CMS_TAG_MAX + 1]; /* NUL-terminated */
	int32_t device;
	uint32_t policy;	 /* CMS_POLICY_* */
	uint32_t state;		 /* CMS_STATE_* */
	uint32_t reserved;	 /* 0 */
	uint64_t flags;		 /* CMS_REGION_* */
	uint64_t allocations;	 /* live allocations */
	uint64_t logical_bytes;	 /* sum of the sizes asked for */
	uint64_t physical_bytes; /* sum of the sizes rounded to granularity */
	uint64_t backed_bytes;	 /* physical bytes currently backed by device memory */
	uint64_t backup_bytes;	 /* bytes saved in host backups (DISK: in its file) while paused */
	uint64_t epoch;		 /* bumped by every successful resume, starts at 0 */
	uint64_t granularity;	 /* allocation granularity of this region's properties */
	/* Host memory held by backup buffers, kept across cycles; bounded (docs/internals.md). */
	uint64_t host_bytes;
	uint32_t restore_pending; /* 1 while an async resume's restore copies may still run */
	uint32_t reserved2;	  /* 0 */
	/*
	 * Since 1.1: the CMS_HANDLE_TYPE_* bits its physical allocations are
	 * created with (0: not shareable).
	 */
	uint32_t handle_types;
	uint32_t reserved3; /* 0 */
	/*
	 * Since 1.1: the devices given access besides the region's own (bit d =
	 * ordinal d; cms_region_peer_devices_set).
	 */
	uint64_t peer_device_mask;
	/* Since 1.1: bytes of host_bytes page-locked with cuMemHostRegister. */
	uint64_t pinned_bytes;
	/*
	 * Since 1.1: device bytes held beyond the live allocations: freed
	 * allocations sharing a handle with live neighbours (CMS_REGION_COALESCE)
	 * and, since 1.2, chunk tails not handed out yet (CMS_REGION_CHUNKS).
	 * Not part of physical_bytes or backed_bytes.
	 */
	uint64_t retained_bytes;
	/* Since 1.3: 1 while the region is frozen (cms_region_freeze). */
	uint32_t frozen;
	uint32_t reserved4; /* 0 */
} cms_region_info;

/*
 * A consistent snapshot of the region into info (written up to info->struct_size). Thread-safe.
 * See cms_region_info_get(3).
 */
CMS_API cms_status cms_region_info_get(cms_region *region, cms_region_info *info);

/*
 * Gives the devices of device_mask (bit d = ordinal d) read-write access to the region's
 * memory, from now on and across resumes. Thread-safe. See cms_region_peer_devices_set(3).
 */
CMS_API cms_status cms_region_peer_devices_set(cms_region *region, uint64_t device_mask);

/*
 * Makes the region's memory read-only, so that pauses of content that does not change copy
 * nothing. Thread-safe. See cms_region_freeze(3).
 */
CMS_API cms_status cms_region_freeze(cms_region *region);

/*
 * Ends cms_region_freeze: the memory is writable again. Thread-safe. See cms_region_thaw(3).
 */
CMS_API cms_status cms_region_thaw(cms_region *region);

/*
 * Chooses the directory (copied) where a CMS_POLICY_DISK region keeps its content while paused.
 * Thread-safe. See cms_region_disk_dir_set(3).
 */
CMS_API cms_status cms_region_disk_dir_set(cms_region *region, const char *dir);

/*
 * Changes the region's changeable flags between cycles: those in mask take their values in
 * flags. Thread-safe. See cms_region_flags_set(3).
 */
CMS_API cms_status cms_region_flags_set(cms_region *region, uint64_t mask, uint64_t flags);

/* ---- Allocations ----------------------------------------------------------- */

/*
 * Allocates size bytes of device memory in an active region at an address that never changes
 * until cms_free; the allocation belongs to the region. Thread-safe. See cms_alloc(3).
 */
CMS_API cms_status cms_alloc(cms_region *region, uint64_t size, uint64_t *ptr);

/*
 * Frees the allocation whose base is ptr, in any region state (ptr 0: nothing done); a failed
 * call changes nothing. Thread-safe. See cms_free(3).
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
 * Finds the allocation of ctx that contains ptr and describes it into info; info->region is the
 * region's handle, not a new reference. Thread-safe. See cms_pointer_info_get(3).
 */
CMS_API cms_status cms_pointer_info_get(cms_context *ctx, uint64_t ptr, cms_pointer_info *info);

/*
 * Declares the bytes [ptr, ptr + size) of one live allocation content-free: pauses do not save
 * them. Thread-safe. See cms_range_discard(3).
 */
CMS_API cms_status cms_range_discard(cms_context *ctx, uint64_t ptr, uint64_t size);

/*
 * Ends the cms_range_discard declarations over [ptr, ptr + size). Thread-safe. See
 * cms_range_keep(3).
 */
CMS_API cms_status cms_range_keep(cms_context *ctx, uint64_t ptr, uint64_t size);
/* cms_backup_info.state (since 1.2) */
#define CMS_BACKUP_CURRENT 0u  /* region paused: the backup IS the allocation's content */
#define CMS_BACKUP_RETAINED 1u /* region active: kept by retention, content of the last pause */

/* Where an allocation's backup is (cms_backup_get, since 1.2). */
typedef struct cms_backup_info {
	size_t struct_size; /* sizeof(cms_backup_info), set by the caller */
	uint64_t base;	    /* the allocation's base (device virtual address) */
	uint64_t size;	    /* the allocation's size in bytes = the backup's size */
	/*
	 * Host address of the backup's byte 0: host + (ptr - base) is the byte
	 * of ptr. NULL when the backup is not in host memory (CMS_POLICY_DISK:
	 * use cms_backup_read).
	 */
	void *host;
	uint32_t policy; /* the region's CMS_POLICY_* */
	uint32_t state;	 /* CMS_BACKUP_* */
} cms_backup_info;

/*
 * Where the backup of the allocation containing ptr is (host buffer or file) into info;
 * info->host points into a buffer of the library with a limited life. Thread-safe. See
 * cms_backup_get(3).
 */
CMS_API cms_status cms_backup_get(cms_context *ctx, uint64_t ptr, cms_backup_info *info);

/*
 * Copies len bytes of the backup of the allocation containing ptr, from the byte that backs
 * ptr, into buf. Thread-safe. See cms_backup_read(3).
 */
CMS_API cms_status cms_backup_read(cms_context *ctx, uint64_t ptr, void *buf, uint64_t len);

/* ---- Pause and resume ------------------------------------------------------ */

/* Pause flag: the caller guarantees no GPU work uses the memory; skip waiting. */
#define CMS_PAUSE_NO_SYNC 0x1ull

typedef struct cms_pause_options {
	size_t struct_size; /* sizeof(cms_pause_options) */
	/*
	 * What the pause waits for before touching the memory. Default (both 0):
	 * synchronize the primary context of every device of the call
	 * (cuCtxSynchronize). stream: a CUstream to synchronize instead
	 * (cuStreamSynchronize). event: a CUevent to synchronize instead
	 * (cuEventSynchronize). Both set: both are waited for.
	 */
	uint64_t stream;
	uint64_t event;
	uint64_t flags; /* CMS_PAUSE_* */
} cms_pause_options;

#define CMS_PAUSE_OPTIONS_INIT                     \
	{                                          \
		sizeof(cms_pause_options), 0, 0, 0 \
	}

/*
 * Fills *opts like CMS_PAUSE_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_pause_options_init(3).
 */
CMS_API cms_status cms_pause_options_init(cms_pause_options *opts);

/*
 * Per-device results (since 1.1). A pause or resume spanning several devices
 * works on every device at once (see cms_pause); each reports here. Entries
 * are in ascending device order; a call over more than
 * CMS_DEVICE_RESULTS_MAX devices reports the first CMS_DEVICE_RESULTS_MAX.
 */
#define CMS_DEVICE_RESULTS_MAX 16

typedef struct cms_device_result {
	int32_t device; /* CUDA device ordinal */
	/*
	 * CMS_OK: this device's part succeeded (on a failed call it was then
	 * rolled back because another device failed); else the status of this
	 * device's own failure (CMS_ERR_ROLLBACK_FAILED when undoing its part
	 * failed too).
	 */
	cms_status status;
	uint64_t regions;     /* regions of this device in the call */
	uint64_t allocations; /* allocations paused / re-backed (0 on a failed call) */
	uint64_t bytes;	      /* pause: physical bytes released; resume: bytes created and mapped */
	uint64_t bytes_copied; /* pause: bytes copied to backups; resume: bytes restored */
	/* Wall time of this device's work, without its waits for the other devices. */
	uint64_t elapsed_ns;
} cms_device_result;

typedef struct cms_pause_result {
	size_t struct_size;	 /* sizeof(cms_pause_result), set by the caller */
	uint64_t regions;	 /* regions paused by this call */
	uint64_t allocations;	 /* allocations paused */
	uint64_t bytes_released; /* physical bytes released (cuMemRelease) */
	/* Content bytes copied out of device memory to host backups (DISK: to its file);
	 * since 1.2 without the ranges declared content-free (cms_range_discard). */
	uint64_t bytes_backed_up;
	/*
	 * cuMemGetInfo free bytes, summed over the devices of the call, before
	 * and after the release. Measurements only: a failed reading gives 0.
	 */
	uint64_t driver_free_before;
	uint64_t driver_free_after;
	uint64_t elapsed_ns; /* wall time of the call */
	/*
	 * Since 1.1 (see cms_device_result): devices the call worked on, and on
	 * failure the device whose own step failed first (lowest ordinal among
	 * them); -1 when none did.
	 */
	uint32_t devices;
	int32_t failed_device;
	cms_device_result device_results[CMS_DEVICE_RESULTS_MAX];
} cms_pause_result;

/*
 * Resume flag: return once mapped, the restore ordered before opts->stream. Not with
 * RELEASE_HOST, HOST_PAGEABLE. cms_resume(3).
 */
#define CMS_RESUME_ASYNC 0x1ull

typedef struct cms_resume_options {
	size_t struct_size; /* sizeof(cms_resume_options) */
	uint64_t flags;	    /* CMS_RESUME_* */
	/* CMS_RESUME_ASYNC: the CUstream to order after the restore (0: the NULL stream). */
	uint64_t stream;
} cms_resume_options;

#define CMS_RESUME_OPTIONS_INIT                  \
	{                                        \
		sizeof(cms_resume_options), 0, 0 \
	}

/*
 * Fills *opts like CMS_RESUME_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_resume_options_init(3).
 */
CMS_API cms_status cms_resume_options_init(cms_resume_options *opts);

typedef struct cms_resume_result {
	size_t struct_size;    /* sizeof(cms_resume_result), set by the caller */
	uint64_t regions;      /* regions resumed */
	uint64_t allocations;  /* allocations re-backed */
	uint64_t bytes_backed; /* physical bytes created and mapped */
	/* Content bytes copied back from host backups (DISK: from its file); since 1.2
	 * without the ranges declared content-free. */
	uint64_t bytes_restored;
	uint64_t elapsed_ns; /* wall time of the call */
	/* Since 1.1: as in cms_pause_result. */
	uint32_t devices;
	int32_t failed_device;
	cms_device_result device_results[CMS_DEVICE_RESULTS_MAX];
} cms_resume_result;

/*
 * Releases the physical memory of every active region tagged tag (NULL: every region of ctx),
 * on every device, saving the content per policy; addresses stay reserved. All or nothing.
 * Thread-safe. See cms_pause(3).
 */
CMS_API cms_status cms_pause(cms_context *ctx, const char *tag, const cms_pause_options *opts,
			     cms_pause_result *result);

/*
 * Backs every paused region tagged tag (NULL: every region of ctx) with new physical memory at
 * the same addresses and restores the content per policy. All or nothing. Thread-safe. See
 * cms_resume(3).
 */
CMS_API cms_status cms_resume(cms_context *ctx, const char *tag, const cms_resume_options *opts,
			      cms_resume_result *result);

/*
 * cms_pause of one region. Thread-safe, not concurrently with cms_region_destroy of region. See
 * cms_region_pause(3).
 */
CMS_API cms_status cms_region_pause(cms_region *region, const cms_pause_options *opts,
				    cms_pause_result *result);

/*
 * cms_resume of one region. Thread-safe, not concurrently with cms_region_destroy of region.
 * See cms_region_resume(3).
 */
CMS_API cms_status cms_region_resume(cms_region *region, const cms_resume_options *opts,
				     cms_resume_result *result);

/* ---- Swap and progress (since 1.1) ------------------------------------------ */

/*
 * Pauses every active region tagged pause_tag and resumes every paused region tagged resume_tag
 * in one call, all or nothing. Thread-safe. See cms_swap(3).
 */
CMS_API cms_status cms_swap(cms_context *ctx, const char *pause_tag, const char *resume_tag,
			    const cms_pause_options *popts, const cms_resume_options *ropts,
			    cms_pause_result *presult, cms_resume_result *rresult);

/*
 * Progress callback (since 1.1). op: "pause", "resume" or "swap" (static
 * strings). done and total count bytes of HOST content copied (backups out
 * and in; DISK regions' file transfers are not reported): without DISK
 * regions, total equals the result's bytes_backed_up / bytes_restored, their
 * sum for a swap; 0 when nothing is copied. Called from the thread(s) running the operation (with
 * several devices: each device's thread; swap: both of its threads), never two calls of one
 * operation at once; done never decreases. Calls with done < total come at least once per copy
 * (when it has been issued to the device; allocations adjacent both on the device and in their
 * backup may share one copy); after a successful operation exactly one last call has
 * done == total (also when total is 0). A failed operation makes no last
 * call. The locks of the regions being paused or resumed are held during the
 * calls (the context's lock is not): the callback may call
 * cms_pointer_info_get, cms_region_find, cms_device_memory_info,
 * cms_status_name / cms_status_string / cms_last_error* and cms_version*, but
 * no function that takes a region's lock (pause, resume, swap, alloc, free,
 * region info, destroy, ...: they may deadlock on a region of the
 * operation). It should return quickly: copies already queued keep running,
 * but the operation waits for it.
 */
typedef void (*cms_progress_fn)(void *user, const char *op, uint64_t done, uint64_t total);

/*
 * Sets the progress callback of the context's later pauses, resumes and swaps (fn NULL: none);
 * user is borrowed while fn is set. Thread-safe. See cms_context_progress_set(3).
 */
CMS_API cms_status cms_context_progress_set(cms_context *ctx, cms_progress_fn fn, void *user);

/* ---- Observability (since 1.2) --------------------------------------------- */

/* Entries of cms_region_stats.failures_by_status: entry k counts status -k (k >= 1). */
#define CMS_STATS_STATUS_SLOTS 32

/*
 * Cumulative counters of one region since its creation (since 1.2), with its
 * identity. A "pause" is a committed transition of the region to PAUSED
 * (cms_pause, cms_region_pause or the pause side of cms_swap), a "resume" one
 * to ACTIVE; a call that skips the region (already in the target state)
 * counts nothing.
 */
typedef struct cms_region_stats {
	size_t struct_size;	   /* sizeof(cms_region_stats), set by the caller */
	char tag[CMS_TAG_MAX + 1]; /* NUL-terminated */
	int32_t device;
	uint32_t policy;    /* CMS_POLICY_* */
	uint32_t state;	    /* CMS_STATE_* when read */
	uint32_t reserved;  /* 0 */
	uint64_t region_id; /* creation number, unique in its context, ascending */
	/* Committed pauses / resumes. A pause that fails with CMS_ERR_ROLLBACK_FAILED and
	 * leaves the region PAUSED counts no pause (it is counted in failures), so the resume
	 * that completes it makes resumes exceed pauses by one. */
	uint64_t pauses;
	uint64_t resumes;
	uint64_t swaps; /* of pauses + resumes, those made by cms_swap */
	/*
	 * Failed pause, resume and swap calls that were to change this region
	 * (after their argument checks, selection and the skip of regions already
	 * in the target state): every region of such a call counts the call's
	 * status once, also when another region or device caused it.
	 */
	uint64_t failures;
	/* failures by status: entry k counts status -k; entry 0 statuses below -31. */
	uint64_t failures_by_status[CMS_STATS_STATUS_SLOTS];
	uint64_t bytes_released;   /* physical bytes released by its pauses (cuMemRelease) */
	uint64_t bytes_backed;	   /* physical bytes created and mapped by its resumes */
	uint64_t bytes_to_store;   /* content bytes its pauses copied to its store (HOST, DISK) */
	uint64_t bytes_from_store; /* content bytes its resumes copied back from its store */
	/*
	 * Nanoseconds (CLOCK_MONOTONIC) of its device's work in the calls that
	 * paused / resumed it (a swap counts its device's whole swap on both
	 * sides); not divided among the regions of a call.
	 */
	uint64_t pause_ns;
	uint64_t resume_ns;
	/*
	 * Since 1.3 (CMS_REGION_PREPARE): bytes of host backup buffers that the
	 * background preparation made and that became backups of the region's
	 * allocations (also those a pause took over while they were being made),
	 * and the nanoseconds (CLOCK_MONOTONIC) the background thread spent making
	 * host buffers for the region (mapping, faulting in, page-locking), also
	 * of buffers given back unused (the allocations were freed or paused
	 * meanwhile). 0 for a region without the flag.
	 */
	uint64_t bytes_prepared;
	uint64_t prepare_ns;
	/*
	 * Since 1.3 (CMS_REGION_VERIFY): content bytes its resumes checked
	 * against the checksum its pause before took, and nanoseconds
	 * (CLOCK_MONOTONIC) its device spent checksumming in the calls that
	 * paused or resumed it (as pause_ns: not divided among regions).
	 */
	uint64_t bytes_verified;
	uint64_t verify_ns;
	/*
	 * Since 1.3: content bytes its pauses did not copy because the region was
	 * frozen and its backup still held that content (cms_region_freeze); not
	 * in bytes_to_store.
	 */
	uint64_t bytes_unchanged;
} cms_region_stats;

/*
 * The region's identity and cumulative counters into stats (written up to stats->struct_size).
 * Thread-safe, not concurrently with cms_region_destroy of region. See cms_region_stats_get(3).
 */
CMS_API cms_status cms_region_stats_get(cms_region *region, cms_region_stats *stats);

/*
 * A snapshot of each live region of ctx into the caller's array v (cap entries; *written,
 * *total counts). Thread-safe, also against cms_region_destroy. See cms_region_list(3).
 */
CMS_API cms_status cms_region_list(cms_context *ctx, cms_region_stats *v, size_t cap,
				   size_t *written, size_t *total);

#ifdef __cplusplus
}
#endif

/* The subsystems' declarations (each includes this header first). */
#include "cumemsaver_hooks.h"
#include "cumemsaver_ipc.h"

#endif /* CUMEMSAVER_H */
