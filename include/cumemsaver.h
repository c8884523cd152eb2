/* SPDX-License-Identifier: MIT */
/*
 * cumemsaver.h - release GPU memory and take it back at the same virtual
 * addresses.
 *
 * This is the one public C ABI of libcumemsaver (SONAME libcumemsaver.so.1).
 * It is built on the CUDA driver's virtual memory management API: every
 * allocation is a virtual address range (carved from its region's
 * cuMemAddressReserve reservations) that lives from cms_alloc() to
 * cms_free(), backed by physical memory (cuMemCreate + cuMemMap +
 * cuMemSetAccess) that a pause releases (cuMemUnmap + cuMemRelease) and a
 * resume creates and maps again at the same address (one physical handle
 * per run of adjacent allocations with CMS_REGION_COALESCE). Pointers, kernel arguments and
 * captured CUDA graphs therefore stay valid across any number of pause/resume cycles.
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

#define CMS_VERSION_MAJOR 1
#define CMS_VERSION_MINOR 1
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
/* Since 1.1 (IPC, docs/ipc.md): a message from a peer is malformed, of an unknown type or of
 * an unsupported protocol version; the connection is dropped. */
#define CMS_ERR_PROTOCOL (-19)
/* Since 1.1: the peer's uid (SO_PEERCRED) is not allowed, or the exporter refused us for it. */
#define CMS_ERR_PERMISSION (-20)
/* Since 1.1: a peer did not answer in time (the message names it: pid, uid, name). */
#define CMS_ERR_TIMEOUT (-21)
/* Since 1.1: the peer process closed its socket or exited (crashed). */
#define CMS_ERR_DISCONNECTED (-22)
/* Since 1.1: an exporter's region no longer has the layout an importer mapped (allocations
 * added or freed between exports); nothing was mapped. */
#define CMS_ERR_LAYOUT_CHANGED (-23)
/* Since 1.1: an importer or the application's control callback refused the request. */
#define CMS_ERR_REFUSED (-24)
/* Since 1.1: a system call on a socket or file failed (the message names it and errno). */
#define CMS_ERR_IO (-25)
/* Lowest status number in use (for bindings and tests). */
#define CMS_STATUS_MIN (-25)

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
 * CMS_ERR_INVALID_ARGUMENT (since 1.1) while an exporter, import or control
 * socket of the context is still open (nothing is touched);
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
/* Since 1.1: written to a file in a directory on pause, read back on resume (needs
 * cms_region_disk_dir_set before the first pause). */
#define CMS_POLICY_DISK 3u
/* 4.. reserved for later policies. */

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
 * cost) and a resumed region holds no host memory. A DISK region with this
 * flag empties its file after each resume (by default the file keeps its
 * space for the next pause, see cms_region_disk_dir_set).
 */
#define CMS_REGION_RELEASE_HOST 0x1ull
/*
 * Region flag (since 1.1): shareable with other processes (docs/ipc.md). Its
 * physical allocations are created with the POSIX file descriptor handle type
 * (cuMemCreate, requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
 * so that cms_exporter_publish() can hand them to importers. Needs
 * CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED (else
 * cms_region_create returns CMS_ERR_NOT_SUPPORTED).
 */
#define CMS_REGION_SHAREABLE 0x2ull
/*
 * Region flag (since 1.1): also request fabric handles (CU_MEM_HANDLE_TYPE_FABRIC,
 * for multi-node NVLink), with or without CMS_REGION_SHAREABLE. Needs
 * CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED (else CMS_ERR_NOT_SUPPORTED).
 * The IPC of this library passes POSIX descriptors only; the fabric type is
 * reported in cms_region_info.handle_types for the application's own use.
 */
#define CMS_REGION_SHAREABLE_FABRIC 0x4ull
/*
 * Region flag (since 1.1): coalesced re-backing. A resume then backs each run
 * of address-adjacent allocations of the region (allocations are carved one
 * after another from the region's 2 GiB reservations) with ONE physical
 * handle (cuMemCreate of the run's size) mapped ONCE (cuMemMap +
 * cuMemSetAccess), at the same addresses: thousands of small allocations
 * pause and resume in a few driver calls (each handle costs ~35-40 us to
 * create or release on an H200). The cost: a cms_free() of an allocation
 * that shares a handle with live neighbours cannot give its device memory
 * back by itself (the driver cannot unmap part of a mapping); its bytes stay
 * in the shared handle (cms_region_info.retained_bytes) until the next pause
 * or until its neighbours are freed too. Without the flag (the 1.0
 * behaviour) every allocation keeps its own handle and every free returns
 * its memory at once. Ignored for shareable regions (CMS_REGION_SHAREABLE*:
 * importers map each allocation's own handle).
 */
#define CMS_REGION_COALESCE 0x8ull

/* Handle types of a region's physical allocations (cms_region_info.handle_types, since 1.1);
 * the values of CUmemAllocationHandleType. */
#define CMS_HANDLE_TYPE_POSIX_FD 0x1u
#define CMS_HANDLE_TYPE_FABRIC 0x8u

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
	uint64_t allocations;	  /* live allocations */
	uint64_t logical_bytes;	  /* sum of the sizes asked for */
	uint64_t physical_bytes;  /* sum of the sizes rounded to granularity */
	uint64_t backed_bytes;	  /* physical bytes currently backed by device memory */
	uint64_t backup_bytes;	  /* bytes saved in host backups (DISK: in its file) while paused */
	uint64_t epoch;		  /* bumped by every successful resume, starts at 0 */
	uint64_t granularity;	  /* allocation granularity of this region's properties */
	uint64_t host_bytes;	  /* host memory held by backup buffers (kept across cycles) */
	uint32_t restore_pending; /* 1 while an async resume's restore copies may still run */
	uint32_t reserved2;	  /* 0 */
	/* Since 1.1: CMS_HANDLE_TYPE_* bits its physical allocations are created with (0: not
	 * shareable). */
	uint32_t handle_types;
	uint32_t reserved3; /* 0 */
	/* Since 1.1: the devices given access besides the region's own (bit d = ordinal d;
	 * cms_region_peer_devices_set). */
	uint64_t peer_device_mask;
	/* Since 1.1: bytes of this region's host backup buffers currently page-locked with
	 * cuMemHostRegister (a subset of host_bytes, kept across cycles with them; a buffer
	 * whose registration failed stays pageable and is not counted). The DISK policy's
	 * staging buffers are not counted: they are page-locked only during a pause or resume
	 * call (2 x 64 MiB per device and call, 2 x 1 MiB on the host simulation). */
	uint64_t pinned_bytes;
	/* Since 1.1: device bytes of allocations freed while they shared a physical handle with
	 * live neighbours (coalesced by a resume, see CMS_REGION_COALESCE): still held in
	 * that handle until the next pause or until the neighbours are freed. Not part of
	 * physical_bytes or backed_bytes. */
	uint64_t retained_bytes;
} cms_region_info;

/*
 * cms_region_info_get - a consistent snapshot of the region (taken under its
 * lock: waits for a pause or resume of it in progress). info->struct_size
 * must be set. Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE.
 */
CMS_API cms_status cms_region_info_get(cms_region *region, cms_region_info *info);

/*
 * cms_region_peer_devices_set (since 1.1) - gives other devices read-write
 * access to the region's memory: device_mask has bit d set for device
 * ordinal d (0: only the region's own device), so that kernels on those
 * devices read and write it through NVLink or PCIe peer access (a tensor on
 * GPU 0 read by a kernel on GPU 1). Access belongs to each mapping: every
 * allocation made later is mapped with it, every resume grants it again (a
 * new mapping has no access), and the allocations mapped now get it at once
 * (cuMemSetAccess of each, one descriptor per device: read-write for the
 * region's device and each device of the mask, none for a device dropped
 * from the previous mask). Peer access of VMM memory needs no
 * cuCtxEnablePeerAccess; none is called. Call it right after
 * cms_region_create to have every allocation mapped for the peers from the
 * start. Checks: every bit names an existing device (cuDeviceGetCount), not
 * the region's own, that can access the region's device's memory
 * (cuDeviceCanAccessPeer(peer, device)). All or nothing: if setting the
 * access of an allocation fails, those already changed get their previous
 * access back and the mask stays as it was. cms_region_info.peer_device_mask
 * reports the mask. Thread-safe: takes the region's lock (waits for a pause
 * or resume of it in progress).
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL region, device_mask naming
 * the region's device), CMS_ERR_INVALID_DEVICE (a bit beyond the device
 * count), CMS_ERR_NOT_SUPPORTED (a device that cannot access the region's
 * device), a driver status (cuMemSetAccess failed; nothing changed), or
 * CMS_ERR_ROLLBACK_FAILED (restoring the previous access failed too: the
 * message names the allocation; the new mask is kept, so that the next
 * resume maps every allocation with it).
 */
CMS_API cms_status cms_region_peer_devices_set(cms_region *region, uint64_t device_mask);

/*
 * cms_region_disk_dir_set (since 1.1) - chooses the directory where a
 * CMS_POLICY_DISK region keeps its content while paused. dir: NUL-terminated
 * path (1..4000 bytes), absolute or relative to the current directory at the
 * time of the call; NULL closes the region's file without choosing another.
 * The call creates the region's file there at once (open with O_CREAT |
 * O_EXCL, mode 0600, O_DIRECT where the filesystem accepts it, named
 * cumemsaver-PID-N-K.swp) and unlinks it immediately: the file lives only as
 * the region's open descriptor, so it never outlives the process and no name
 * is left in the directory. Like a HOST region's buffers, the file keeps its
 * space from one cycle to the next, so that every pause after the first
 * overwrites blocks already allocated (content stale while the region is
 * active); with CMS_REGION_RELEASE_HOST it is emptied after each successful
 * resume instead (a new empty file takes the same descriptor number and a
 * library thread closes the old one, so the filesystem frees and discards
 * its blocks off the resume's path; in place with ftruncate where no new
 * file can be made). A freed allocation's part is punched out at once, and
 * the file is closed, giving everything back, when the region or its
 * context is destroyed or another directory is set.
 * Pause writes every allocation to the file (cuMemcpyDtoHAsync into a staging
 * pool of two page-locked buffers of 64 MiB per device and call, made with
 * cuMemHostRegister for the call and freed after it, so never counted in
 * cms_region_info.pinned_bytes; pipelined with pwrite; then fdatasync, so
 * that errors a buffered filesystem defers fail the pause, since 1.1); resume
 * reads it back (pread, cuMemcpyHtoDAsync, pipelined the same way). Resume
 * with CMS_RESUME_ASYNC reads a DISK region synchronously. Both stay
 * transactional: a failed write or fdatasync (a full disk: CMS_ERR_IO,
 * message "... (disk full)") makes the pause roll back with nothing lost; a failed read makes
 * the resume roll back, the region staying paused with its file. A DISK
 * region without a directory refuses to pause (CMS_ERR_INVALID_ARGUMENT).
 * Thread-safe: takes the region's lock (waits for a pause or resume of it in
 * progress). Wraps no CUDA call (the file system only).
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL region, region not DISK,
 * empty or too long dir, dir not a directory), CMS_ERR_NOT_FOUND (dir does
 * not exist), CMS_ERR_PERMISSION (dir not writable: EACCES, EPERM, EROFS),
 * CMS_ERR_IO (another failure creating or unlinking the file; the message
 * names dir and errno), CMS_ERR_PAUSED (the region's content is in its
 * current file), CMS_ERR_OUT_OF_HOST_MEMORY, CMS_ERR_FORKED. On failure the
 * previous directory and file stay.
 */
CMS_API cms_status cms_region_disk_dir_set(cms_region *region, const char *dir);

/* ---- Allocations ----------------------------------------------------------- */

/*
 * cms_alloc - allocates size bytes in an active region: carves a virtual
 * range (size rounded up to the granularity, aligned to it) out of the
 * region's reservations (cuMemAddressReserve of 2 GiB at a time, or of the
 * rounded size if larger), creates a physical allocation (cuMemCreate) and
 * maps it read-write for the region's device and its peer devices
 * (cuMemMap, one cuMemSetAccess with a descriptor per device); a later
 * resume may back it together with its neighbours (CMS_REGION_COALESCE).
 * Content is undefined,
 * as with cudaMalloc. *ptr receives the device pointer; it stays the same
 * until cms_free(), whatever pauses and resumes happen in between.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL, size 0, size overflowing
 * when rounded), CMS_ERR_PAUSED, CMS_ERR_OUT_OF_DEVICE_MEMORY,
 * CMS_ERR_OUT_OF_HOST_MEMORY, or a driver status. On failure nothing is held.
 */
CMS_API cms_status cms_alloc(cms_region *region, uint64_t size, uint64_t *ptr);

/*
 * cms_free - frees the allocation whose base is ptr, in any state and from
 * any thread: unmaps and releases its physical memory if backed (if it
 * shares a physical handle with live neighbours since a resume, its bytes
 * stay in that handle until the next pause or until those neighbours are
 * freed too, see CMS_REGION_COALESCE and
 * cms_region_info.retained_bytes), drops its host backup if any, gives its
 * range back to the region's reservations (a reservation nothing uses any
 * more is freed with cuMemAddressFree). The caller
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
#define CMS_PAUSE_NO_SYNC 0x1ull

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

/*
 * Per-device results (since 1.1). A pause or resume spanning several devices
 * runs one worker thread per device (see cms_pause); each reports here.
 * Entries are in ascending device order; a call over more than
 * CMS_DEVICE_RESULTS_MAX devices reports the first CMS_DEVICE_RESULTS_MAX.
 */
#define CMS_DEVICE_RESULTS_MAX 16

typedef struct cms_device_result {
	int32_t device; /* CUDA device ordinal */
	/* CMS_OK: this device's part succeeded (on a failed call it was then rolled back
	 * because another device failed); else the status of this device's own failure
	 * (CMS_ERR_ROLLBACK_FAILED when undoing its part failed too). */
	cms_status status;
	uint64_t regions;     /* regions of this device in the call */
	uint64_t allocations; /* allocations paused / re-backed (0 on a failed call) */
	uint64_t bytes;	      /* pause: physical bytes released; resume: bytes created and mapped */
	uint64_t bytes_copied; /* pause: bytes copied to host backups; resume: bytes restored */
	/* Wall time of this device's work, without its waits for the other devices. */
	uint64_t elapsed_ns;
} cms_device_result;

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
	/* Since 1.1 (see cms_device_result): devices the call worked on, and on failure the
	 * device whose own step failed first (lowest ordinal among them); -1 when none did. */
	uint32_t devices;
	int32_t failed_device;
	cms_device_result device_results[CMS_DEVICE_RESULTS_MAX];
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
	/* Since 1.1: as in cms_pause_result. */
	uint32_t devices;
	int32_t failed_device;
	cms_device_result device_results[CMS_DEVICE_RESULTS_MAX];
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
 * Several devices (since 1.1): the regions are grouped by device and every
 * device is processed at the same time by a worker thread of its own (the
 * calling thread takes the lowest device; one device means no extra thread),
 * with that device's primary context current and its own copy streams. The
 * devices agree before releasing anything and again before committing: if
 * one fails, every device is rolled back as above, so the call stays all or
 * nothing across devices (memory another device had already released by
 * then is re-backed per policy). Log lines of the workers reach the log
 * callback on the calling thread, after them. result (if its struct_size
 * covers the 1.1 fields) also reports each device (cms_device_result),
 * and then is written on failure too: the 1.0 fields 0, failed_device and
 * each device's status saying what failed where.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE,
 * CMS_ERR_NOT_FOUND (no region has tag), CMS_ERR_ALREADY_PAUSED (all its
 * regions are paused; also for tag NULL), CMS_ERR_OUT_OF_HOST_MEMORY (a host
 * backup), a driver status (CMS_ERR_OUT_OF_DEVICE_MEMORY when the rollback
 * of a failed release needs memory), or CMS_ERR_ROLLBACK_FAILED: a rollback
 * step failed too; every allocation is then left in an exact state (mapped,
 * or released with its HOST backup kept) that the next pause, resume or free
 * completes. The driver's free-memory readings in the result are only
 * measurements: a failure to read them gives 0, not an error. With several
 * devices the status and message are those of the device that failed
 * (message prefixed "device N: "), or CMS_ERR_ROLLBACK_FAILED naming each
 * device whose rollback failed; CMS_ERR_OUT_OF_HOST_MEMORY also when a
 * worker thread cannot be started (nothing was done then).
 * Since 1.1, before anything else, every importer of a region published with
 * cms_exporter_publish is asked to drop its mappings, and the pause waits for
 * all of them (cms_exporter_options.revoke_timeout_ms): CMS_ERR_TIMEOUT or
 * CMS_ERR_REFUSED, naming the importer, when one does not consent in time;
 * nothing is released then and the importers that had dropped their
 * mappings get the memory again. After a successful cms_resume every such
 * importer maps the memory again at its same addresses (docs/ipc.md).
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
 * skipped. opts and result may be NULL. Several devices are resumed at the
 * same time, one worker thread each, and agree before committing, exactly
 * as cms_pause describes (results per device, all or nothing across devices;
 * with CMS_RESUME_ASYNC, opts->stream is made to wait for every device's
 * restore). Peer access (cms_region_peer_devices_set) is granted
 * again with every mapping.
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

/* ---- Swap and progress (since 1.1) ------------------------------------------ */

/*
 * cms_swap (since 1.1) - pauses every active region tagged pause_tag and
 * resumes every paused region tagged resume_tag in one call, with the two
 * directions' copies running at the same time (device-to-host and
 * host-to-device use separate copy engines: both at once move more bytes per
 * second than either alone). The pause side works allocation by allocation:
 * it copies a HOST allocation to its host backup (cuMemcpyDtoHAsync on one of
 * the library's streams, followed by cuEventRecord), and as soon as that copy
 * is done (cuEventSynchronize) unmaps it (cuMemUnmap) and releases its
 * physical memory (cuMemRelease); DISCARD and ZERO allocations are released
 * without a copy. The resume side runs on a second thread (its own streams):
 * for each allocation it creates physical memory (cuMemCreate), maps it at its
 * address (cuMemMap, cuMemSetAccess) and restores its content per policy
 * (cuMemcpyHtoDAsync from the backup, cuMemsetD8Async for ZERO). When
 * cuMemCreate reports CUDA_ERROR_OUT_OF_MEMORY while the pause side has memory
 * left to release, the resume side waits for the next release and tries again,
 * so a device that only fits one of the two tags (plus one allocation) still
 * swaps them. Before anything is copied the pause side waits for GPU work as
 * popts says (default: cuCtxSynchronize of every device of pause_tag) and
 * importers of published regions drop their mappings (as cms_pause).
 *
 * Transactional: the call commits only when both sides succeeded. If either
 * fails, the resume side is undone first (what it mapped is unmapped and
 * released: resume_tag stays paused with its backups) and then the pause side
 * is rolled back (every allocation of pause_tag mapped again; HOST content
 * copied back from the backup; memory of a DISCARD / ZERO allocation that was
 * already released comes back undefined / zeroed, as in cms_pause's release
 * step). On success the pause side's regions are PAUSED (host backups kept as
 * by cms_pause) and the resume side's ACTIVE, epoch bumped, importers
 * granted the memory again (as cms_resume).
 *
 * pause_tag and resume_tag: NUL-terminated tags (1..CMS_TAG_MAX bytes),
 * different from each other; every region with the tag, on every device, is
 * included. Regions of pause_tag already paused and regions of resume_tag
 * already active are skipped. Policies DISCARD, ZERO and HOST are supported.
 * popts (NULL: defaults) as for cms_pause; ropts (NULL: defaults) as for
 * cms_resume except that CMS_RESUME_ASYNC is refused. presult and rresult
 * (each may be NULL) receive what cms_pause / cms_resume would report for
 * their side; elapsed_ns is the wall time of the whole swap in both;
 * device_results has one entry per device of that side (elapsed_ns the whole
 * call). On failure they are written only when their struct_size covers the
 * 1.1 fields (all counts 0, failed_device as in cms_pause).
 * Progress (cms_context_progress_set): operation "swap", total = bytes copied
 * out plus bytes copied back; done counts copies that have completed.
 * Locks: holds the locks of the regions of both tags (taken in creation
 * order) for the whole call; thread-safe like cms_pause. Starts one thread
 * for the call (its signals blocked) and creates events
 * (4 per device of each side: cuEventCreate / cuEventDestroy).
 * Returns CMS_OK; CMS_ERR_INVALID_ARGUMENT (ctx, a tag NULL, the same tag
 * twice, unknown flags, CMS_RESUME_ASYNC); CMS_ERR_STRUCT_SIZE;
 * CMS_ERR_NOT_FOUND (no region has one of the tags); CMS_ERR_ALREADY_PAUSED
 * (every region of pause_tag is paused); CMS_ERR_NOT_PAUSED (every region of
 * resume_tag is active); CMS_ERR_NOT_SUPPORTED (a region of another policy);
 * CMS_ERR_OUT_OF_HOST_MEMORY (host backup, or the thread could not start);
 * CMS_ERR_OUT_OF_DEVICE_MEMORY (cuMemCreate failed with nothing left to
 * release); CMS_ERR_TIMEOUT / CMS_ERR_REFUSED (an importer, as cms_pause);
 * a driver status; or CMS_ERR_ROLLBACK_FAILED (as cms_pause / cms_resume:
 * exact per-allocation state is kept for the next call to complete).
 */
CMS_API cms_status cms_swap(cms_context *ctx, const char *pause_tag, const char *resume_tag,
			    const cms_pause_options *popts, const cms_resume_options *ropts,
			    cms_pause_result *presult, cms_resume_result *rresult);

/*
 * Progress callback (since 1.1): op is "pause", "resume" or "swap" (static
 * strings); done and total count the bytes of content
 * copied (HOST backups out and in: total equals the result's
 * bytes_backed_up / bytes_restored, their sum for a swap; 0 when nothing is
 * copied). Called from the thread(s) running the operation (with several
 * devices: each device's worker; swap: both of its threads), never two calls
 * of one operation at once; done never decreases. Calls with done < total
 * come at least once per copy (cms_pause / cms_resume: when it has been
 * issued to the device; allocations adjacent both on the device and in their
 * host backup share one copy of up to 64 MiB; cms_swap: once per allocation,
 * when its copy has completed); after a successful operation exactly one last call has
 * done == total (also when total is 0). A failed operation
 * makes no last call. The locks of the regions being paused or resumed are
 * held during the calls (the context's lock is not): the callback may call
 * cms_pointer_info_get, cms_region_find, cms_device_memory_info,
 * cms_status_name / cms_status_string / cms_last_error* and cms_version*,
 * but no function that takes a region's lock (pause, resume, swap, alloc,
 * free, region info, destroy, ...: they may deadlock on a region of the
 * operation). It should return quickly: copies already queued keep running,
 * but the engine waits for it.
 */
typedef void (*cms_progress_fn)(void *user, const char *op, uint64_t done, uint64_t total);

/*
 * cms_context_progress_set (since 1.1) - sets (fn NULL: clears) the progress
 * callback of every later cms_pause / cms_resume / cms_region_pause /
 * cms_region_resume / cms_swap of the context; an operation already running
 * keeps the callback it started with. user is passed to fn, borrowed. No CUDA
 * call. Thread-safe (takes the context's lock briefly). Returns CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT (ctx NULL).
 */
CMS_API cms_status cms_context_progress_set(cms_context *ctx, cms_progress_fn fn, void *user);

/* ---- Allocator hooks (since 1.1) ------------------------------------------
 *
 * Entry points for allocators that cannot pass a region: PyTorch's
 * CUDAPluggableAllocator (cms_torch_alloc / cms_torch_free, loaded by name
 * from this library) and the LD_PRELOAD interposer libcumemsaver-preload.so
 * (cms_hook_alloc / cms_hook_free). A process-wide hook context receives
 * frees from any thread; a per-thread stack of regions says where the
 * calling thread's allocations go. Allocations of the hook context that a
 * region or context destroy released are remembered, so that a free of one
 * arriving later (PyTorch frees its pools' segments late) is a no-op success
 * rather than an unknown pointer. After fork() the child's stacks are empty
 * and the parent's hook context answers CMS_ERR_FORKED.
 */

/*
 * cms_hook_context_set - makes ctx the process-wide hook context (NULL
 * clears it): the context hooked frees go to and hooked allocations' regions
 * must belong to. Replacing or clearing it waits until no hooked call that
 * may use the previous one is in flight, so the previous context can then be
 * destroyed safely. cms_context_destroy clears it when it destroys the hook
 * context (after releasing its allocations). The caller keeps ownership of
 * ctx. Thread-safe. Returns CMS_OK or CMS_ERR_FORKED (ctx was created before
 * a fork). No CUDA call.
 */
CMS_API cms_status cms_hook_context_set(cms_context *ctx);

/*
 * cms_hook_region_push - makes region the calling thread's active region,
 * above the ones pushed before (at most CMS_HOOK_DEPTH_MAX deep). Hooked
 * allocations of this thread go to the region on top. region is borrowed: if
 * it is destroyed while on a stack, hooked allocations refuse it (they never
 * touch it). Affects only the calling thread. Returns CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT (region NULL; no hook context; region of another
 * context than the hook context; stack full), CMS_ERR_FORKED. No CUDA call.
 */
#define CMS_HOOK_DEPTH_MAX 16
CMS_API cms_status cms_hook_region_push(cms_region *region);

/*
 * cms_hook_region_pop - removes the calling thread's top active region.
 * Affects only the calling thread; never blocks. Returns CMS_OK or
 * CMS_ERR_NOT_FOUND (the stack is empty, which it always is in a child
 * after fork()). No CUDA call.
 */
CMS_API cms_status cms_hook_region_pop(void);

/*
 * cms_hook_region_current - the calling thread's top active region, or NULL
 * when none is active. Borrowed; never fails; affects and reads only the
 * calling thread.
 */
CMS_API cms_region *cms_hook_region_current(void);

/*
 * cms_hook_alloc - allocates size bytes with cms_alloc (cuMemAddressReserve,
 * cuMemCreate, cuMemMap, cuMemSetAccess) in the calling thread's active
 * region, which must be on device ordinal device (device < 0: any). *ptr
 * receives the device pointer (0 on failure), owned by the region until
 * cms_hook_free / cms_free. Thread-safe. Returns CMS_OK, CMS_ERR_NOT_FOUND
 * (no region is active on this thread: not ours to serve),
 * CMS_ERR_INVALID_DEVICE (the active region is on another device),
 * CMS_ERR_INVALID_ARGUMENT (ptr NULL, size 0, no hook context, or the active
 * region was destroyed), CMS_ERR_FORKED, or what cms_alloc returns
 * (CMS_ERR_PAUSED, CMS_ERR_OUT_OF_DEVICE_MEMORY, ...).
 */
CMS_API cms_status cms_hook_alloc(uint64_t size, int32_t device, uint64_t *ptr);

/*
 * cms_hook_free - frees ptr into the hook context with cms_free (cuMemUnmap,
 * cuMemRelease, cuMemAddressFree): for interposers that must tell their own
 * pointers from others'. Thread-safe; never waits for GPU work. Returns
 * CMS_OK (also for an allocation already released by its region's or
 * context's destroy), CMS_ERR_NOT_FOUND (in no allocation of the hook
 * context: not ours, free it elsewhere), CMS_ERR_NOT_BASE (inside one of
 * ours but not its base), CMS_ERR_INVALID_ARGUMENT (ptr NULL, or no hook
 * context), CMS_ERR_FORKED, or what cms_free returns.
 */
CMS_API cms_status cms_hook_free(void *ptr);

/*
 * cms_torch_alloc - PyTorch CUDAPluggableAllocator allocation entry point
 * (signature fixed by PyTorch): cms_hook_alloc of size bytes on device
 * ordinal device; stream is ignored (the memory is usable from any stream).
 * Returns the device pointer, owned by the region until cms_torch_free, or
 * NULL (PyTorch then reports out-of-memory) when no region is active, size
 * <= 0, device < 0 or differs from the region's, the region is paused or
 * destroyed, or the allocation fails; the reason is in cms_last_error().
 * Thread-safe.
 */
CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream);

/*
 * cms_torch_free - PyTorch CUDAPluggableAllocator free entry point
 * (signature fixed by PyTorch): cms_hook_free(ptr), from any thread, whether
 * or not a region is active; never waits for GPU work (PyTorch has already
 * ordered its streams' uses). size, device and stream are ignored. Cannot
 * fail visibly: NULL, unknown pointers and failures are recorded in
 * cms_last_error() only. Thread-safe.
 */
CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream);

/* ---- Sharing between processes (since 1.1) --------------------------------
 *
 * A process (the exporter) publishes regions created with
 * CMS_REGION_SHAREABLE on a Unix domain socket; other processes (importers)
 * of an allowed uid connect, receive the region's layout and its physical
 * allocations as file descriptors (SCM_RIGHTS), and map them at addresses of
 * their own. When the exporter pauses such a region, every importer first
 * waits for its own GPU work, drops its mappings and acknowledges; only then
 * is the memory released, so it really goes back to the driver. On resume
 * every importer maps the new memory at the SAME addresses in its process and
 * sees the new epoch. Protocol, security model and failure semantics:
 * docs/ipc.md. A socket path is at most 107 bytes; its file is created with
 * mode 0600, and every peer's uid is checked with SO_PEERCRED.
 *
 * Destroy every exporter, import and control socket of a context before the
 * context (cms_context_destroy refuses otherwise). None of them is usable in
 * a forked child (CMS_ERR_FORKED).
 */

typedef struct cms_exporter cms_exporter;
typedef struct cms_import cms_import;
typedef struct cms_control cms_control;

/* Access granted to importers of a published region. */
#define CMS_ACCESS_READ 1u	/* map read-only (CU_MEM_ACCESS_FLAGS_PROT_READ) */
#define CMS_ACCESS_READWRITE 3u /* map read-write (CU_MEM_ACCESS_FLAGS_PROT_READWRITE) */

typedef struct cms_exporter_options {
	size_t struct_size; /* sizeof(cms_exporter_options) */
	/* uids allowed to import (SO_PEERCRED). NULL / 0: this process's uid only. With a
	 * list, only the listed uids (add getuid() to keep your own). Copied. */
	const uint32_t *allowed_uids;
	uint32_t nallowed_uids;
	/* How long a pause waits for every importer to drop its mappings (ms; 0: 10000). */
	uint32_t revoke_timeout_ms;
	uint64_t flags; /* reserved, must be 0 */
} cms_exporter_options;

#define CMS_EXPORTER_OPTIONS_INIT                           \
	{                                                   \
		sizeof(cms_exporter_options), NULL, 0, 0, 0 \
	}
/* cms_exporter_options_init - fills *opts like CMS_EXPORTER_OPTIONS_INIT. Returns
 * CMS_ERR_INVALID_ARGUMENT on NULL. */
CMS_API cms_status cms_exporter_options_init(cms_exporter_options *opts);

/*
 * cms_exporter_create - listens on the Unix socket path (created, mode 0600;
 * a stale socket file left by a dead process is replaced) and starts the
 * exporter's server thread, which accepts importers, checks their uid,
 * answers their requests and never calls back into the application. opts may
 * be NULL. Nothing is published yet (cms_exporter_publish).
 * Ownership: *out belongs to the caller; cms_exporter_destroy frees it.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL, empty or too long path,
 * flags), CMS_ERR_STRUCT_SIZE, CMS_ERR_EXISTS (path in use by a live socket
 * or another file), CMS_ERR_IO (socket, bind, listen, thread creation),
 * CMS_ERR_OUT_OF_HOST_MEMORY. Thread-safe.
 */
CMS_API cms_status cms_exporter_create(cms_context *ctx, const char *path,
				       const cms_exporter_options *opts, cms_exporter **out);

/*
 * cms_exporter_publish - offers region (created with CMS_REGION_SHAREABLE, of
 * the exporter's context) to importers, granting access (CMS_ACCESS_*). An
 * importer asks for it by tag (and device). Each grant exports every
 * allocation's physical handle as a POSIX descriptor
 * (cuMemExportToShareableHandle) at the time of the grant; the layout the
 * importer maps is the region's allocations at that time, in address order.
 * Allocations made or freed later reach importers at their next grant (after
 * a resume), which they report as CMS_ERR_LAYOUT_CHANGED. From now on a pause
 * of the region revokes importers' mappings first (see cms_pause).
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL, not shareable, another
 * context, unknown access), CMS_ERR_EXISTS (already published here),
 * CMS_ERR_NOT_FOUND (region destroyed), CMS_ERR_OUT_OF_HOST_MEMORY.
 * Thread-safe; waits for a pause or resume of the region in progress.
 */
CMS_API cms_status cms_exporter_publish(cms_exporter *exp, cms_region *region, uint32_t access);

/*
 * cms_exporter_importers - number of importers connected now (through all
 * published regions). Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT. Thread-safe.
 */
CMS_API cms_status cms_exporter_importers(cms_exporter *exp, uint64_t *count);

/*
 * cms_exporter_destroy - stops publishing: waits for a pause or resume of a
 * published region in progress, stops the server thread, closes every
 * importer's connection (their next call returns CMS_ERR_DISCONNECTED; memory
 * they still map stays valid for them until they close the import) and
 * removes the socket file. NULL is accepted. Returns CMS_OK, CMS_ERR_FORKED.
 * Not thread-safe against other calls on the same exporter.
 */
CMS_API cms_status cms_exporter_destroy(cms_exporter *exp);

/* Import states (cms_import_info.state). */
#define CMS_IMPORT_MAPPED 0u	     /* the memory is mapped at the import's addresses */
#define CMS_IMPORT_REVOKED 1u	     /* exporter paused: addresses reserved, not accessible */
#define CMS_IMPORT_LAYOUT_CHANGED 2u /* the exporter's layout changed: nothing mapped */
#define CMS_IMPORT_DISCONNECTED 3u   /* the exporter closed or exited */
#define CMS_IMPORT_FAILED 4u	     /* mapping a grant failed (info.error says why) */

/* Import events (cms_import_event_fn). */
#define CMS_IMPORT_EVENT_REVOKED 1u	   /* mappings dropped for an exporter's pause */
#define CMS_IMPORT_EVENT_REMAPPED 2u	   /* mapped again at the same addresses, new epoch */
#define CMS_IMPORT_EVENT_LAYOUT_CHANGED 3u /* a grant with another layout: not mapped */
#define CMS_IMPORT_EVENT_DISCONNECTED 4u   /* the exporter is gone */
#define CMS_IMPORT_EVENT_FAILED 5u	   /* a grant could not be mapped */

/*
 * Quiesce callback: the exporter is about to pause. Stop using the memory
 * (finish or wait for GPU work reading or writing it) and return CMS_OK to
 * consent: the library then unmaps it. Return a negative status to refuse:
 * the exporter's pause fails with CMS_ERR_REFUSED naming this importer.
 * Called on the import's own thread; it may call cms_import_info_get and
 * cms_import_alloc_get but must not close the import. epoch: the epoch mapped.
 */
typedef cms_status (*cms_import_quiesce_fn)(void *user, cms_import *imp, uint64_t epoch);
/*
 * Event callback (CMS_IMPORT_EVENT_*), called on the import's thread after the
 * state changed; epoch is the exporter's epoch now mapped (REMAPPED: re-register
 * the memory with NCCL/RDMA). Same restrictions as the quiesce callback.
 */
typedef void (*cms_import_event_fn)(void *user, cms_import *imp, uint32_t event, uint64_t epoch);

/* Import flag: ask for read-only access (the exporter may grant less than asked, never more). */
#define CMS_IMPORT_READ_ONLY 0x1ull

typedef struct cms_import_options {
	size_t struct_size; /* sizeof(cms_import_options) */
	int32_t device;	    /* local CUDA device ordinal to map on (default 0) */
	/* The exporter's device of the region (the exporter's ordinal); -1: any (default). */
	int32_t exporter_device;
	uint64_t flags; /* CMS_IMPORT_* */
	/* uids the exporter may run as (SO_PEERCRED). NULL / 0: this process's uid only. */
	const uint32_t *allowed_uids;
	uint32_t nallowed_uids;
	uint32_t timeout_ms; /* connect + first grant (ms; 0: 10000) */
	/* NULL: before unmapping, synchronize the local device's primary context. */
	cms_import_quiesce_fn quiesce_fn;
	cms_import_event_fn event_fn; /* may be NULL */
	void *user;		      /* passed to both callbacks */
	const char *name;	      /* shown in the exporter's messages (<= 63 bytes; NULL: "") */
} cms_import_options;

#define CMS_IMPORT_OPTIONS_INIT                                                          \
	{                                                                                \
		sizeof(cms_import_options), 0, -1, 0, NULL, 0, 0, NULL, NULL, NULL, NULL \
	}
/* cms_import_options_init - fills *opts like CMS_IMPORT_OPTIONS_INIT. Returns
 * CMS_ERR_INVALID_ARGUMENT on NULL. */
CMS_API cms_status cms_import_options_init(cms_import_options *opts);

/*
 * cms_import_open - connects to the exporter at path, checks its uid, asks for
 * the region tagged tag and maps it: reserves one address range for all its
 * allocations (cuMemAddressReserve, aligned to the granularity), imports each
 * descriptor (cuMemImportFromShareableHandle; descriptors are closed right
 * after), maps (cuMemMap) and sets access for opts->device (cuMemSetAccess,
 * read-write or read-only as granted). If the exporter's region is paused,
 * the import starts REVOKED and is mapped at its resume. Then a thread of the
 * import serves the exporter's revocations and grants. Blocks up to
 * opts->timeout_ms. opts may be NULL.
 * Ownership: *out belongs to the caller; cms_import_close frees it.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL, bad tag or path, flags),
 * CMS_ERR_STRUCT_SIZE, CMS_ERR_NOT_FOUND (no socket at path, or the exporter
 * publishes no such region), CMS_ERR_PERMISSION (the exporter refused our uid,
 * or its uid is not allowed), CMS_ERR_TIMEOUT, CMS_ERR_DISCONNECTED,
 * CMS_ERR_PROTOCOL, CMS_ERR_IO, CMS_ERR_OUT_OF_HOST_MEMORY, or a driver
 * status (CMS_ERR_OUT_OF_DEVICE_MEMORY: no address space). On failure
 * nothing is held. Thread-safe.
 */
CMS_API cms_status cms_import_open(cms_context *ctx, const char *path, const char *tag,
				   const cms_import_options *opts, cms_import **out);

/*
 * cms_import_close - stops the import's thread, unmaps (cuMemUnmap), releases
 * the imported handles (cuMemRelease), frees the reservation
 * (cuMemAddressFree) and closes the connection. The caller must have finished
 * GPU work on the memory. NULL is accepted. Returns CMS_OK, CMS_ERR_FORKED,
 * or a driver status (the import is freed anyway; the message names what
 * could not be undone). Not thread-safe against other calls on the same import.
 */
CMS_API cms_status cms_import_close(cms_import *imp);

typedef struct cms_import_info {
	size_t struct_size; /* sizeof(cms_import_info), set by the caller */
	char tag[CMS_TAG_MAX + 1];
	int32_t exporter_device; /* the region's device in the exporter */
	int32_t device;		 /* local device mapped on */
	uint32_t state;		 /* CMS_IMPORT_* */
	uint32_t access;	 /* CMS_ACCESS_* granted */
	uint64_t epoch;		 /* exporter's epoch of the memory mapped (or last mapped) */
	uint64_t allocations;	 /* allocations in the layout */
	uint64_t base;		 /* start of the reserved range (device pointer) */
	uint64_t bytes;		 /* bytes reserved (sum of the allocations' physical sizes) */
	int32_t exporter_pid;
	uint32_t exporter_uid;
	int32_t error;	   /* status that led to LAYOUT_CHANGED, DISCONNECTED or FAILED; else 0 */
	uint32_t reserved; /* 0 */
} cms_import_info;

/*
 * cms_import_info_get - a snapshot of the import's state; works in every
 * state (also after the exporter is gone). Returns CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE, CMS_ERR_FORKED. Thread-safe.
 */
CMS_API cms_status cms_import_info_get(cms_import *imp, cms_import_info *info);

/*
 * cms_import_alloc_get - the local device pointer and logical size of the
 * index-th allocation of the layout (address order of the exporter). The
 * pointer stays the same for the life of the import, across revocations;
 * it is accessible while the state is CMS_IMPORT_MAPPED. ptr or size may be
 * NULL. Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (NULL imp, index out of
 * range), CMS_ERR_DISCONNECTED (the exporter is gone), CMS_ERR_LAYOUT_CHANGED,
 * or the status that made the import FAILED. Thread-safe.
 */
CMS_API cms_status cms_import_alloc_get(cms_import *imp, uint64_t index, uint64_t *ptr,
					uint64_t *size);

/*
 * cms_import_translate - the local address of an address of the exporter's
 * (exporter_ptr inside one of the layout's allocations, as the exporter sees
 * it: cms_alloc's pointer plus an offset). Returns as cms_import_alloc_get,
 * and CMS_ERR_NOT_FOUND when exporter_ptr is in no allocation of the layout.
 */
CMS_API cms_status cms_import_translate(cms_import *imp, uint64_t exporter_ptr, uint64_t *ptr);

/* ---- Control socket (since 1.1) --------------------------------------------
 *
 * Lets another process of an allowed uid (cmsctl --socket PATH ...) ask for
 * the status of the context's regions, or to pause / resume a tag. Pause and
 * resume requests reach the application through a callback that decides.
 */

/* Control operations (cms_control_request.op). */
#define CMS_CONTROL_STATUS 1u
#define CMS_CONTROL_PAUSE 2u
#define CMS_CONTROL_RESUME 3u
/* Phases of a pause/resume request (cms_control_request.phase). */
#define CMS_CONTROL_BEFORE 0u /* decide: return CMS_OK to let the library act, else refuse */
#define CMS_CONTROL_AFTER 1u  /* informed: result holds the outcome; the return is ignored */

typedef struct cms_control_request {
	size_t struct_size; /* sizeof(cms_control_request) of the library */
	uint32_t op;	    /* CMS_CONTROL_PAUSE or CMS_CONTROL_RESUME */
	uint32_t phase;	    /* CMS_CONTROL_BEFORE / CMS_CONTROL_AFTER */
	const char *tag;    /* valid during the call */
	int32_t peer_pid;   /* the requesting process (SO_PEERCRED) */
	uint32_t peer_uid;
	cms_status result; /* AFTER: what cms_pause / cms_resume returned */
	uint32_t reserved;
} cms_control_request;

/*
 * Control callback, called on the control socket's thread. BEFORE: stop
 * launching work on the tag's memory (or start again after a resume: see
 * AFTER) and return CMS_OK to let the library call cms_pause / cms_resume
 * with the tag, or a negative status (e.g. CMS_ERR_REFUSED) to refuse; the
 * requester gets that status. The callback may call the library (but not
 * destroy the control socket).
 */
typedef cms_status (*cms_control_fn)(void *user, const cms_control_request *req);

/* Control flag: without a callback, act on every pause/resume request (default: refuse). */
#define CMS_CONTROL_ALLOW_ALL 0x1ull

typedef struct cms_control_options {
	size_t struct_size; /* sizeof(cms_control_options) */
	uint64_t flags;	    /* CMS_CONTROL_* flags */
	cms_control_fn fn;  /* NULL: status only, unless CMS_CONTROL_ALLOW_ALL */
	void *user;
	/* uids allowed to connect; NULL / 0: this process's uid only. Copied. */
	const uint32_t *allowed_uids;
	uint32_t nallowed_uids;
	uint32_t reserved; /* 0 */
} cms_control_options;

#define CMS_CONTROL_OPTIONS_INIT                                       \
	{                                                              \
		sizeof(cms_control_options), 0, NULL, NULL, NULL, 0, 0 \
	}
/* cms_control_options_init - fills *opts like CMS_CONTROL_OPTIONS_INIT. Returns
 * CMS_ERR_INVALID_ARGUMENT on NULL. */
CMS_API cms_status cms_control_options_init(cms_control_options *opts);

/*
 * cms_control_create - listens on the Unix socket path (mode 0600, as
 * cms_exporter_create) and serves one request at a time on its own thread:
 * STATUS (a table of every region: cms_region_info and importers), PAUSE tag
 * and RESUME tag (after the callback consents: cms_pause / cms_resume of the
 * context, with progress messages to the requester). opts may be NULL.
 * Ownership: *out belongs to the caller; cms_control_destroy frees it.
 * Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT, CMS_ERR_STRUCT_SIZE,
 * CMS_ERR_EXISTS, CMS_ERR_IO, CMS_ERR_OUT_OF_HOST_MEMORY. Thread-safe.
 */
CMS_API cms_status cms_control_create(cms_context *ctx, const char *path,
				      const cms_control_options *opts, cms_control **out);

/*
 * cms_control_destroy - stops the thread (after the request in progress),
 * closes the socket and removes its file. NULL is accepted. Returns CMS_OK,
 * CMS_ERR_FORKED. Must not be called from the control callback.
 */
CMS_API cms_status cms_control_destroy(cms_control *ctl);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_H */
