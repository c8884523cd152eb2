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
 *  - Each function's comment says what it does and what its parameters mean,
 *    then, in this order: Ownership (who frees what, how long a returned
 *    pointer lives), Threads (thread safety), CUDA (the driver calls it makes,
 *    or "none") and Returns (every status it returns for its own reasons).
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
 *    The host simulation does support such a child (it takes its locks
 *    around fork()).
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

/* The version of this header: 1.2.0. */
#define CMS_VERSION_MAJOR 1
#define CMS_VERSION_MINOR 2
#define CMS_VERSION_PATCH 0
/* (major << 16) | (minor << 8) | patch */
#define CMS_VERSION_NUMBER \
	((CMS_VERSION_MAJOR << 16) | (CMS_VERSION_MINOR << 8) | CMS_VERSION_PATCH)

/*
 * cms_version - the version of the library loaded at run time, encoded as
 * CMS_VERSION_NUMBER. Compare it with the CMS_VERSION_NUMBER of the header
 * compiled against: a library of the same major version and at least the
 * header's minor version has everything the header declares.
 * Threads: thread-safe. CUDA: none.
 * Returns: the version number; never fails.
 */
CMS_API uint32_t cms_version(void);

/*
 * cms_version_string - the version of the library loaded at run time as
 * "MAJOR.MINOR.PATCH" ("1.2.0" for a library of this header).
 * Ownership: static storage; never NULL, never to be freed.
 * Threads: thread-safe. CUDA: none.
 * Returns: the string; never fails.
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
/* Lowest status number in use (for bindings and tests). */
#define CMS_STATUS_MIN (-25)

/*
 * cms_status_name - the status's name: "CMS_OK", "CMS_ERR_NOT_FOUND", ...;
 * "CMS_ERR_UNKNOWN_STATUS" for a number not listed above.
 * Ownership: static storage; never NULL, never to be freed.
 * Threads: thread-safe. CUDA: none.
 * Returns: the name; never fails.
 */
CMS_API const char *cms_status_name(cms_status status);

/*
 * cms_status_string - a one-line English description of the status
 * ("unknown status code" for a number not listed above).
 * Ownership: static storage; never NULL, never to be freed.
 * Threads: thread-safe. CUDA: none.
 * Returns: the description; never fails.
 */
CMS_API const char *cms_status_string(cms_status status);

/*
 * cms_last_error - the message of the last failed call on the calling thread:
 * what failed and why (the driver call and its CUresult, errno, the tag or
 * pointer concerned). At most 511 bytes; longer messages are truncated.
 * Control characters of quoted text (a path, a peer's message) are escaped
 * (\n, \r, \t, \xHH): a message is one line of printable text.
 * Ownership: thread-local storage of the library; valid on the calling thread
 * until its next failing call (which overwrites it); never NULL ("" before
 * any failure).
 * Threads: thread-safe (one message per thread). CUDA: none.
 * Returns: the message; never fails.
 */
CMS_API const char *cms_last_error(void);

/*
 * cms_last_error_message - copies the calling thread's last error message (as
 * cms_last_error) into buf: at most len - 1 bytes and a terminating NUL.
 * buf: len bytes, written; may be NULL when len is 0 (nothing is written).
 * Ownership: buf stays the caller's.
 * Threads: thread-safe (one message per thread). CUDA: none.
 * Returns: the full message length in bytes without the NUL, like snprintf (a
 * result >= len means the copy was truncated); never fails.
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
 * cms_context_options_init - fills *opts like CMS_CONTEXT_OPTIONS_INIT.
 * Threads: thread-safe. CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_context_options_init(cms_context_options *opts);

/*
 * cms_context_create - creates a context: the owner of regions, their
 * allocations and every other object of this library. The driver is not
 * loaded yet: the first call that needs it does so. The context uses each
 * device's primary context (cuDevicePrimaryCtxRetain, at the device's first
 * use), so it shares the address space with the CUDA runtime and PyTorch in
 * the same process.
 *   opts: NULL for the defaults (CMS_CONTEXT_OPTIONS_INIT).
 *   out:  receives the context; NULL on failure.
 * Ownership: *out belongs to the caller: free it with cms_context_destroy().
 * opts->driver_path is copied; opts->log_user is borrowed.
 * Threads: thread-safe. CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: out is NULL; opts->flags is not 0; opts->log_level
 *     is not a CMS_LOG_* level.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: also when the process's fork handler
 *     (pthread_atfork) cannot be registered.
 */
CMS_API cms_status cms_context_create(const cms_context_options *opts, cms_context **out);

/*
 * cms_context_destroy - destroys every region of the context in creation
 * order (as cms_region_destroy: every allocation is freed, all their device
 * pointers become invalid), stops being the hook context if it is one,
 * destroys the library's streams and events, tries again the driver
 * cleanups that failed earlier (see below), releases the primary contexts it
 * retained and unloads the driver.
 * Cleanups: when a cleanup driver call of
 * the library fails (cuMemHostUnregister of a DISK region's page-locked
 * staging buffers, cuEventDestroy, or the cuCtxPushCurrent before them), the
 * object is kept and the call tried again at the start of the context's next
 * pause, resume or swap (a failure there does not fail that call) and a
 * last time here; what fails here again is logged (CMS_LOG_ERROR) and
 * leaked, as are the streams and events of a device whose cuCtxPushCurrent
 * fails here: once its regions are destroyed the context always goes.
 *   ctx: NULL is accepted (CMS_OK, nothing done).
 * Ownership: on success ctx is freed. On failure it stays valid, holding the
 * regions and allocations not yet freed (each as it was): a retry continues.
 * In a forked child the call returns CMS_ERR_FORKED and the child's copy of
 * the context is leaked, by design.
 * Threads: not thread-safe against any other call on ctx or on its regions,
 * allocations and other objects.
 * CUDA: cuMemUnmap, cuMemRelease, cuMemAddressFree, cuMemHostUnregister and
 * cuStreamSynchronize (as cms_region_destroy); cuStreamDestroy,
 * cuEventDestroy, cuDevicePrimaryCtxRelease.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT (since 1.1): an exporter, import or control socket
 *     of the context is still open; nothing was touched.
 *   driver statuses: freeing an allocation of a region failed (see
 *     Ownership).
 */
CMS_API cms_status cms_context_destroy(cms_context *ctx);

/*
 * cms_device_memory_info - the driver's view of a device's memory: cuMemGetInfo
 * in the device's primary context. Use it to check that a pause really
 * returned memory to the driver. Loads the driver and prepares the device on
 * first use (as cms_region_create).
 *   device:      CUDA device ordinal.
 *   free_bytes:  receives the free bytes; may be NULL.
 *   total_bytes: receives the total bytes; may be NULL.
 * Threads: thread-safe.
 * CUDA: cuMemGetInfo; at the device's first use what cms_region_create lists.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL.
 *   CMS_ERR_INVALID_DEVICE: device is negative, 64 or more, or not a device of
 *     this process.
 *   CMS_ERR_NOT_SUPPORTED: the device has no virtual memory management.
 *   CMS_ERR_NO_DRIVER: the driver cannot be loaded or initialised (a later
 *     call tries again).
 *   CMS_ERR_NO_DEVICE: no CUDA device.
 *   driver statuses.
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
 * Region flag: give host memory back after each successful resume. By
 * default a HOST region keeps its host backup buffers (page-locked where the
 * system allows, see cms_region_info.pinned_bytes) from one cycle to the
 * next, so that only the first cycle pays for making them; with this flag
 * every cycle makes new buffers and a resumed region holds no host memory.
 * A DISK region with this flag empties its file after each successful resume
 * (by default the file keeps its space for the next pause, see
 * cms_region_disk_dir_set). Not combinable with CMS_RESUME_ASYNC.
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
 * Region flag (since 1.1): coalesced backing, so that a region of many small
 * allocations pauses and resumes in a few driver calls.
 *
 * At allocation time, with CMS_REGION_CHUNKS too (since 1.2): see there.
 *
 * At resume: each run of address-adjacent allocations of the region
 * (allocations made one after another usually are) is backed with ONE
 * physical handle (cuMemCreate of the run's size) mapped ONCE (cuMemMap +
 * cuMemSetAccess), at the same addresses; a pause releases each run whole
 * (one cuMemUnmap + cuMemRelease).
 *
 * The cost: a cms_free() of an allocation that shares a handle with live
 * neighbours cannot give its device memory back by itself (the driver cannot
 * unmap part of a mapping); its bytes stay in the shared handle
 * (cms_region_info.retained_bytes) until the next pause or until its
 * neighbours are freed too. Without the flag every allocation keeps its own
 * handle and every free returns its memory at once. Ignored for shareable
 * regions (CMS_REGION_SHAREABLE*: importers map each allocation's own handle).
 */
#define CMS_REGION_COALESCE 0x8ull
/*
 * Region flag (since 1.2), with CMS_REGION_COALESCE only (else
 * cms_region_create returns CMS_ERR_INVALID_ARGUMENT): coalesced backing from
 * the first allocation. cms_alloc() of at most half the chunk size (64 MiB,
 * whatever the granularity) carves the allocation out of a shared physical
 * handle, a "chunk": the first such allocation, and each one that no longer
 * fits the tail of the region's open chunk, creates a chunk of as many
 * allocations of its size as the chunk size holds (cuMemCreate), maps it whole
 * (cuMemMap) and gives it read-write access (cuMemSetAccess); the next
 * allocations take the chunk's tail, one after another, with no driver call.
 * So the first pause of many small allocations releases one handle per chunk
 * instead of one per allocation. The cost: the region may hold device memory
 * ahead of need: the tails of its chunks not yet handed out, at most the
 * chunk size per region (a chunk is made smaller near that bound; an
 * allocation the bound leaves no room for gets a handle of its own), counted
 * in cms_region_info.retained_bytes. A pause releases those tails with their
 * chunk and never backs them up (HOST and DISK copy the allocations only); the
 * resume backs the allocations only (CMS_REGION_COALESCE's runs), so it takes
 * back up to the chunk size less device memory than the first pause gave.
 * Larger allocations get handles of their own. Ignored for shareable regions.
 */
#define CMS_REGION_CHUNKS 0x40ull
/*
 * Region flag (since 1.2): guarded paused ranges. While the region is paused
 * (or an allocation of it has no memory after a failed call), the address
 * range of each of its allocations stays mapped, read-only, to zeros: a
 * stray read by a kernel (one that touches a paused KV cache after only the
 * weights were resumed) reads zeros instead of faulting and killing the CUDA
 * context; a write still faults (an illegal-address error, as without the
 * flag). Only the device and the region's peers (cms_region_peer_devices_set)
 * get read access: the peers set when the guard was mapped (at the pause); a
 * peer set changed while the region is paused applies to its guard from the
 * next pause.
 *
 * Cost: six zero-filled physical handles per device, of 1, 2, 4, 8, 16 and
 * 32 granules (126 MiB at 2 MiB granularity), made by the first
 * cms_region_create with the flag on that device (for each: cuMemCreate,
 * cuMemAddressReserve, cuMemMap, cuMemSetAccess, cuMemsetD8Async,
 * cuStreamSynchronize, cuMemUnmap, cuMemAddressFree) and kept until
 * cms_context_destroy (cuMemRelease). A pause maps whole handles over each
 * released allocation, 32-granule ones first and the rest by its binary
 * digits (cuMemMap + cuMemSetAccess CU_MEM_ACCESS_FLAGS_PROT_READ per piece:
 * 16 pairs for 1 GiB, one for 8 MiB); a
 * resume, a cms_free() of a paused allocation and a region destroy unmap
 * them first (cuMemUnmap, one per piece). Every step is undone when a call
 * fails, as the rest of a pause or resume. cms_region_create with the flag
 * may return the statuses of those driver calls (e.g.
 * CMS_ERR_OUT_OF_DEVICE_MEMORY).
 */
#define CMS_REGION_GUARD 0x10ull
/*
 * Region flag (since 1.2): pageable host backups. Only with CMS_POLICY_HOST
 * (else cms_region_create returns CMS_ERR_INVALID_ARGUMENT). The region's
 * backups live in ordinary pageable host memory (anonymous mmap), never
 * page-locked (no cuMemHostRegister of them): the kernel may swap them out
 * under memory pressure, and the process's RSS grows by the backup's size at
 * a pause. Copies go through the library's page-locked staging buffers (two
 * of 16 MiB per region and pause, resume or swap call, registered with
 * cuMemHostRegister by the call's first copy and unregistered when the call
 * ends, whether it succeeds or fails: cuMemcpyDtoHAsync / cuMemcpyHtoDAsync
 * into and out of them, cuStreamSynchronize, and a host memcpy of each
 * chunk on the calling thread), so both directions run at host-memcpy speed
 * rather than at DMA speed. As without
 * the flag, the buffers are kept from one cycle to the next unless the region
 * also has CMS_REGION_RELEASE_HOST: then they are unmapped after each
 * successful resume and RSS falls back. Not combinable with CMS_RESUME_ASYNC
 * (a resume of such a region with it returns CMS_ERR_INVALID_ARGUMENT): the
 * staging copies need the host until they end. Combines with
 * CMS_REGION_COALESCE and CMS_REGION_GUARD; changeable between cycles with
 * cms_region_flags_set. torch_memory_saver's cpu_backup_backend="mmap" maps to it.
 */
#define CMS_REGION_HOST_PAGEABLE 0x20ull

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
 * cms_region_options_init - fills *opts like CMS_REGION_OPTIONS_INIT.
 * Threads: thread-safe. CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_region_options_init(cms_region_options *opts);

/*
 * cms_region_create - creates an empty, active region named tag on
 * opts->device with opts->policy and opts->flags. At the device's first use
 * by the context it loads the driver (if not loaded yet; a driver that failed
 * to load is tried again by the next call), checks that the device supports
 * virtual memory management, computes the allocation granularity (minimum
 * granularity of pinned device memory, with the GPUDirect RDMA flag where the
 * device supports it with VMM), retains the device's primary context and
 * creates the library's streams and events on it.
 *   tag:  see CMS_TAG_MAX; copied.
 *   opts: NULL for the defaults (device 0, CMS_POLICY_DISCARD, no flags).
 *   out:  receives the region; NULL on failure.
 * Ownership: *out is owned by the context: valid until cms_region_destroy()
 * or cms_context_destroy().
 * Threads: thread-safe.
 * CUDA: cuInit (loading the driver), cuDeviceGetCount, cuDeviceGet,
 * cuDeviceGetAttribute, cuMemGetAllocationGranularity,
 * cuDevicePrimaryCtxRetain, cuStreamCreate, cuEventCreate (first use of the
 * device); cuDeviceGetAttribute (CMS_REGION_SHAREABLE*).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx, tag or out is NULL; a bad tag; an unknown
 *     policy; unknown flag bits; CMS_REGION_HOST_PAGEABLE with a policy
 *     other than CMS_POLICY_HOST.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_EXISTS: a region with this tag exists on this device.
 *   CMS_ERR_INVALID_DEVICE: opts->device is negative, 64 or more, or not a
 *     device of this process.
 *   CMS_ERR_NOT_SUPPORTED: the device has no virtual memory management, or
 *     lacks the handle type a CMS_REGION_SHAREABLE* flag needs.
 *   CMS_ERR_NO_DRIVER: the driver cannot be loaded or initialised.
 *   CMS_ERR_NO_DEVICE: no CUDA device.
 *   driver statuses.
 */
CMS_API cms_status cms_region_create(cms_context *ctx, const char *tag,
				     const cms_region_options *opts, cms_region **out);

/*
 * cms_region_find - looks up the region tagged tag on device.
 *   tag:    see CMS_TAG_MAX.
 *   device: CUDA device ordinal; not checked (a device that does not exist
 *           has no regions: CMS_ERR_NOT_FOUND).
 *   out:    receives the region; NULL on failure.
 * Ownership: *out is the handle cms_region_create returned (owned by the
 * context), not a new reference.
 * Threads: thread-safe; another thread may destroy the region right after.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx, tag or out is NULL; a bad tag.
 *   CMS_ERR_NOT_FOUND: no region has this tag on this device.
 */
CMS_API cms_status cms_region_find(cms_context *ctx, const char *tag, int32_t device,
				   cms_region **out);

/*
 * cms_region_destroy - frees every allocation of the region (as cms_free:
 * their pointers become invalid; host backups and the DISK file are dropped)
 * and then the region. Importers of a published region are first asked to
 * drop their mappings, as for a pause (cms_exporter_publish); the region is
 * destroyed whether or not they answer in time. Waits for cms_free calls on
 * the region's allocations in flight on other threads.
 *   region: NULL is accepted (CMS_OK, nothing done).
 * Ownership: on success region is freed. On failure the allocations freed so
 * far stay freed, the failing one and the rest stay as they were, the region
 * stays valid and a retry continues.
 * Threads: must not run concurrently with other calls that name this region
 * handle (calls by tag or by pointer are safe); takes the region's lock
 * (waits for a pause or resume of it in progress).
 * CUDA: cuStreamSynchronize (an asynchronous restore still in flight),
 * cuMemUnmap, cuMemRelease, cuMemHostUnregister, cuMemAddressFree.
 * Returns:
 *   CMS_OK
 *   driver statuses: freeing an allocation failed (see Ownership).
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
	/*
	 * Host memory held by backup buffers (kept across cycles). Bounded under
	 * any sequence of cms_alloc, cms_free, pause and resume: at most the sum
	 * over the region's live allocations of their sizes rounded up to the
	 * host page size, plus one buffer's worth of freed slices. One buffer's
	 * worth is the most bytes of backups one host buffer holds for several
	 * allocations: 1 GiB (on the host simulation, 16 granules). A freed
	 * allocation's slice is reused by the next pause's new backups; beyond
	 * the bound a cms_free gives the freed slices back at once (it
	 * unregisters the buffer with cuMemHostUnregister; the rest is
	 * page-locked again by its next copy). Only when cuMemHostUnregister
	 * fails there does the region hold more until a later cms_free.
	 */
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
	/*
	 * Since 1.1: bytes of this region's host backup buffers currently
	 * page-locked with cuMemHostRegister: a subset of host_bytes, kept across
	 * cycles with them (a buffer whose registration failed stays pageable and
	 * is not counted). Buffers that a DISK region's pause or resume page-locks
	 * for the duration of the call only are not counted.
	 */
	uint64_t pinned_bytes;
	/*
	 * Since 1.1: device bytes of allocations freed while they shared a
	 * physical handle with live neighbours (see CMS_REGION_COALESCE): still
	 * held in that handle until the next pause or until the neighbours are
	 * freed. Since 1.2 also the tails of the region's chunks not yet handed
	 * out (CMS_REGION_COALESCE; at most 64 MiB per region), released with
	 * them. Not part of physical_bytes or backed_bytes.
	 */
	uint64_t retained_bytes;
} cms_region_info;

/*
 * cms_region_info_get - a consistent snapshot of the region, taken under its
 * lock. While restore_pending is set, the call checks whether the
 * asynchronous restore is done (and then clears it).
 *   info: struct_size set by the caller (at least the 1.0 size); written up
 *         to it.
 * Threads: thread-safe; takes the region's lock (waits for a pause or resume
 * of it in progress).
 * CUDA: cuEventQuery, only while restore_pending is set (a failed query reads
 * as "still pending").
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 */
CMS_API cms_status cms_region_info_get(cms_region *region, cms_region_info *info);

/*
 * cms_region_peer_devices_set (since 1.1) - gives other devices read-write
 * access to the region's memory, so that kernels on those devices read and
 * write it through NVLink or PCIe peer access (a tensor on GPU 0 read by a
 * kernel on GPU 1). Access belongs to each mapping: every allocation made
 * later is mapped with it, every resume grants it again, and the allocations
 * mapped now get it at once (one cuMemSetAccess each, with a descriptor per
 * device: read-write for the region's device and each device of the mask,
 * none for a device dropped from the previous mask). Peer access of VMM
 * memory needs no cuCtxEnablePeerAccess; none is called. Call it right after
 * cms_region_create to have every allocation mapped for the peers from the
 * start. All or nothing: if setting the access of an allocation fails, those
 * already changed get their previous access back and the mask stays as it
 * was. cms_region_info.peer_device_mask reports the mask.
 *   device_mask: bit d set for device ordinal d; 0: only the region's own
 *                device. Every bit must name an existing device, not the
 *                region's own, that can access the region's device's memory
 *                (cuDeviceCanAccessPeer(peer, device)).
 * Threads: thread-safe; takes the region's lock (waits for a pause or resume
 * of it in progress).
 * CUDA: cuDeviceGetCount, cuDeviceGet, cuDeviceCanAccessPeer, cuMemSetAccess.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; device_mask names the region's
 *     own device.
 *   CMS_ERR_INVALID_DEVICE: a bit at or beyond the device count.
 *   CMS_ERR_NOT_SUPPORTED: a device that cannot access the region's device.
 *   CMS_ERR_ROLLBACK_FAILED: restoring the previous access failed too (the
 *     message names the allocation); the new mask is kept, so that the next
 *     resume maps every allocation with it.
 *   driver statuses: cuMemSetAccess failed; nothing changed.
 */
CMS_API cms_status cms_region_peer_devices_set(cms_region *region, uint64_t device_mask);

/*
 * cms_region_disk_dir_set (since 1.1) - chooses the directory where a
 * CMS_POLICY_DISK region keeps its content while paused. The call creates the
 * region's file there at once and unlinks it immediately: the file exists
 * only as a descriptor of the region (close-on-exec), leaves no name in the
 * directory and never outlives the process. Like a HOST region's buffers,
 * the file keeps its space from one cycle to the next (every pause after the
 * first overwrites space already allocated; its content is stale while the
 * region is active); with CMS_REGION_RELEASE_HOST it is emptied after each
 * successful resume instead. A freed allocation's part of the file is given
 * back at once; the whole file when the region or its context is destroyed
 * or another directory (or NULL) is set.
 * A pause writes every allocation to the file and ends with fdatasync; a
 * resume reads it back (synchronously, also with CMS_RESUME_ASYNC). Both stay
 * transactional: a failed write or fdatasync (a full disk: CMS_ERR_IO,
 * message "... (disk full)") makes the pause roll back with nothing lost; a
 * failed read makes the resume roll back, the region staying paused with its
 * file. A DISK region without a directory refuses to pause
 * (CMS_ERR_INVALID_ARGUMENT).
 *   dir: NUL-terminated path (1..4000 bytes), absolute or relative to the
 *        current directory at the time of the call; resolved to an absolute
 *        path then (realpath) and kept, so a later chdir() of the process
 *        does not move the region's later files; NULL closes the region's
 *        file without choosing another.
 * Threads: thread-safe; takes the region's lock (waits for a pause or resume
 * of it in progress).
 * CUDA: none (the file system only).
 * Returns (on failure the previous directory and file stay):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; the region's policy is not
 *     CMS_POLICY_DISK; dir is empty or too long; dir is not a directory.
 *   CMS_ERR_NOT_FOUND: dir, or a component of it, does not exist.
 *   CMS_ERR_PERMISSION: dir is not writable (EACCES, EPERM, EROFS).
 *   CMS_ERR_IO: another failure creating or unlinking the file (the message
 *     names dir and errno).
 *   CMS_ERR_PAUSED: the region's content is in its current file.
 */
CMS_API cms_status cms_region_disk_dir_set(cms_region *region, const char *dir);

/*
 * cms_region_flags_set (since 1.2) - changes the region's retention flags
 * between cycles: sets the flags selected by mask to their values in flags.
 * Changeable: CMS_REGION_RELEASE_HOST and CMS_REGION_HOST_PAGEABLE. A change
 * takes effect from the next pause or resume: CMS_REGION_RELEASE_HOST set on
 * a paused region applies at its resume (which then gives the backups back);
 * set on an active region, it gives back now what the region keeps from its
 * last pause (host backup buffers, as a resume with the flag does; a DISK
 * region's file space). Changing CMS_REGION_HOST_PAGEABLE on an active region
 * gives its kept host buffers back now (the next pause makes them anew, of
 * the new kind); on a paused one it is refused. Clearing
 * CMS_REGION_RELEASE_HOST makes later resumes keep the backups.
 * cms_region_info.flags reports the flags. A host buffer whose
 * cuMemHostUnregister fails is kept (logged) until a later resume or free, as
 * after a resume with CMS_REGION_RELEASE_HOST; the call still succeeds.
 *   mask:  the flags to change; only the two above.
 *   flags: their new values; no bit outside mask.
 * Threads: thread-safe; takes the region's lock (waits for a pause, resume or
 * swap of it in progress); must not run concurrently with cms_region_destroy
 * of the region.
 * CUDA: cuStreamSynchronize (an asynchronous restore still in flight, before
 * anything is given back), cuMemHostUnregister (buffers given back).
 * Returns (on failure nothing changed):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; mask has a bit other than the
 *     changeable ones; flags has a bit outside mask; flags sets
 *     CMS_REGION_HOST_PAGEABLE on a region whose policy is not CMS_POLICY_HOST.
 *   CMS_ERR_PAUSED: CMS_REGION_HOST_PAGEABLE would change on a paused region.
 *   driver statuses: waiting for an asynchronous restore failed.
 */
CMS_API cms_status cms_region_flags_set(cms_region *region, uint64_t mask, uint64_t flags);

/* ---- Allocations ----------------------------------------------------------- */

/*
 * cms_alloc - allocates size bytes in an active region: takes a virtual range
 * of size rounded up to the region's granularity, aligned to it, from the
 * region's reservations (reserving more address space when none has room),
 * creates physical memory for it and maps it read-write for the region's
 * device and its peer devices. The content is undefined, as with cudaMalloc.
 * A later resume may back it together with its neighbours
 * (CMS_REGION_COALESCE).
 *   size: bytes, > 0.
 *   ptr:  receives the device pointer (0 on failure). It stays the same until
 *         cms_free(), whatever pauses and resumes happen in between.
 * Ownership: the allocation belongs to the region: cms_free() frees it, and
 * so do cms_region_destroy() and cms_context_destroy().
 * Threads: thread-safe; takes the region's lock (waits for a pause or resume
 * of it in progress).
 * CUDA: cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess (on
 * failure cuMemUnmap, cuMemRelease, cuMemAddressFree).
 * Returns (on failure nothing is held, except after CMS_ERR_ROLLBACK_FAILED):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region or ptr is NULL; size is 0 or overflows
 *     when rounded up to the granularity.
 *   CMS_ERR_PAUSED: the region is paused.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: no device memory or address space left.
 *   CMS_ERR_ROLLBACK_FAILED: undoing a failed step failed too; what is left
 *     stays in the region (freed with it) and no pointer is returned.
 *   driver statuses.
 */
CMS_API cms_status cms_alloc(cms_region *region, uint64_t size, uint64_t *ptr);

/*
 * cms_free - frees the allocation whose base is ptr, in any region state:
 * unmaps and releases its physical memory if backed (if it shares a physical
 * handle with live neighbours since a resume, its bytes stay in that handle
 * until the next pause or until those neighbours are freed too, see
 * CMS_REGION_COALESCE), drops its host backup or its part of the DISK file,
 * and gives its range back to the region (address space nothing uses any
 * more is freed). The caller must have finished GPU work using it: the call
 * does not synchronize the application's streams (it waits only for the
 * library's own restore copies of an asynchronous resume still in flight).
 *   ptr: the device pointer cms_alloc returned.
 * Ownership: on success ptr no longer names memory; the range may be handed
 * out again by a later cms_alloc.
 * Threads: thread-safe, from any thread; takes the context's lock briefly and
 * the region's lock (waits for a pause or resume of the region in progress).
 * CUDA: cuStreamSynchronize (see above), cuMemUnmap, cuMemRelease,
 * cuMemHostUnregister, cuMemAddressFree.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; ptr is 0.
 *   CMS_ERR_NOT_FOUND: ptr is not in an allocation of this context (or was
 *     freed already).
 *   CMS_ERR_NOT_BASE: ptr is inside an allocation, not at its base.
 *   driver statuses: the allocation is kept, valid and in its region's state
 *     (a paused one keeps its backup, an active one may have lost its
 *     content); a retry continues.
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
 * cms_pointer_info_get - "is this pointer ours?": finds the allocation of the
 * context that contains ptr (base <= ptr < base + size) and describes it.
 *   ptr:  any device address.
 *   info: struct_size set by the caller; written up to it.
 * Ownership: info->region is the region's handle (owned by the context), not
 * a new reference.
 * Threads: thread-safe; takes the context's lock briefly and no region lock
 * (does not wait for a pause or resume; state is the region's at the time).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of the context.
 */
CMS_API cms_status cms_pointer_info_get(cms_context *ctx, uint64_t ptr, cms_pointer_info *info);

/*
 * cms_range_discard (since 1.2) - declares the bytes [ptr, ptr + size) of one
 * live allocation content-free: the next pause of its region neither copies
 * them to its store (CMS_POLICY_HOST, CMS_POLICY_DISK) nor does the resume
 * after it restore them; after that resume they read undefined (as with
 * CMS_POLICY_DISCARD), every other byte as before. So do they after a pause
 * that failed once memory was released (its rollback restores the rest). The backup keeps the
 * allocation's byte offsets. A pause reports only the bytes it copied
 * (cms_pause_result.bytes_backed_up, cms_resume_result.bytes_restored,
 * cms_region_stats.bytes_to_store / bytes_from_store). Meant for memory an
 * allocator holds but no tensor uses (a free block of a caching allocator).
 * The declaration ends when the resume after the next pause completes, when
 * cms_range_keep covers the bytes again, or when the allocation is freed;
 * declarations that overlap or touch merge into one, and cms_range_keep over
 * part of one splits it. Data written into a declared range before the pause
 * is lost unless cms_range_keep covered it after the write: call
 * cms_range_keep before reusing the bytes. Policies that keep no content
 * (DISCARD, ZERO) accept declarations and are not changed by them.
 *   ptr:  a device address inside an allocation of ctx (not only its base).
 *   size: bytes, > 0; [ptr, ptr + size) must stay inside that allocation.
 * Ownership: nothing is kept beyond the declaration's bookkeeping (host memory
 * of the library, freed when the declaration ends).
 * Threads: thread-safe; takes the context's lock briefly and the region's
 * lock (waits for a pause or resume of it in progress).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; size is 0; ptr + size overflows;
 *     the range crosses the end of the allocation.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx (or it was freed).
 *   CMS_ERR_PAUSED: the allocation's region is paused (its content is stored
 *     already).
 *   CMS_ERR_OUT_OF_HOST_MEMORY: no memory for the bookkeeping (nothing changed).
 *   CMS_ERR_FORKED: ctx was created in the parent of a fork.
 */
CMS_API cms_status cms_range_discard(cms_context *ctx, uint64_t ptr, uint64_t size);

/*
 * cms_range_keep (since 1.2) - ends the declarations of cms_range_discard over
 * [ptr, ptr + size): those bytes are copied by the next pause and restored by
 * the next resume again. Bytes not declared are left as they are (no error);
 * a declaration covering more than the range keeps the rest (split).
 *   ptr, size: as in cms_range_discard.
 * Threads: thread-safe; takes the context's lock briefly and the region's
 * lock.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; size is 0; ptr + size overflows;
 *     the range crosses the end of the allocation.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx (or it was freed).
 *   CMS_ERR_PAUSED: the allocation's region is paused (what it did not copy
 *     cannot come back).
 *   CMS_ERR_OUT_OF_HOST_MEMORY: a split needed memory (nothing changed).
 *   CMS_ERR_FORKED: ctx was created in the parent of a fork.
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
 * cms_backup_get (since 1.2) - where the backup of the allocation containing
 * ptr is: the bytes a HOST or DISK region's pause copied out of it. While the
 * region is paused the backup is the allocation's content
 * (CMS_BACKUP_CURRENT); while it is active, a backup kept by retention (a
 * region without CMS_REGION_RELEASE_HOST keeps its buffers and file space
 * from one cycle to the next) holds the content as of the last pause
 * (CMS_BACKUP_RETAINED; after a failed pause, possibly partly that pause's).
 * The backup keeps the allocation's byte offsets whatever the store's
 * packing. A HOST backup is readable in place at info->host; a DISK one only
 * with cms_backup_read.
 *   ptr:  any address inside a live allocation of ctx (not only its base).
 *   info: struct_size set by the caller; written up to it (on CMS_OK only).
 * Ownership: info->host points into the region's buffer, owned by the
 * library: valid until the region's next pause, its next resume that does
 * not retain, a cms_free of the allocation, cms_region_flags_set, or the
 * region's destroy; the caller orders those after its reads. Reads only:
 * writing through it changes what a resume restores (while paused) or what
 * nothing reads (while active).
 * Threads: thread-safe; takes the context's lock briefly and the region's
 * lock (waits for a pause, resume or swap of it in progress).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx.
 *   CMS_ERR_NOT_SUPPORTED: the region's policy keeps no content
 *     (CMS_POLICY_DISCARD, CMS_POLICY_ZERO).
 *   CMS_ERR_NOT_PAUSED: the allocation has no backup now (the region is
 *     active and keeps none: never paused since the allocation was made, or
 *     CMS_REGION_RELEASE_HOST gave it back).
 */
CMS_API cms_status cms_backup_get(cms_context *ctx, uint64_t ptr, cms_backup_info *info);

/*
 * cms_backup_read (since 1.2) - copies len bytes of the backup (see
 * cms_backup_get) of the allocation containing ptr, starting at the byte
 * that backs ptr, into buf: memcpy from a HOST buffer, pread from a DISK
 * region's file (through an aligned bounce buffer when the file is opened
 * with O_DIRECT; the file's mode does not change).
 *   ptr: any address inside a live allocation of ctx; ptr + len must not
 *        pass the allocation's end.
 *   buf: len bytes, the caller's; len 0 copies nothing (the other checks
 *        still apply).
 * Threads: thread-safe; takes the context's lock briefly and the region's
 * lock for the whole copy (a pause, resume or swap of the region waits).
 * CUDA: none (the file system for DISK).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or buf is NULL; ptr + len passes the end
 *     of the allocation.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx.
 *   CMS_ERR_NOT_SUPPORTED: the region's policy keeps no content.
 *   CMS_ERR_NOT_PAUSED: the allocation has no backup now.
 *   CMS_ERR_IO, CMS_ERR_OUT_OF_HOST_MEMORY: reading the DISK file failed
 *     (the message names the file and errno); buf is then undefined.
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
 * cms_pause_options_init - fills *opts like CMS_PAUSE_OPTIONS_INIT.
 * Threads: thread-safe. CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
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
 * Resume flag: asynchronous restore. The call returns once every allocation
 * is backed and mapped (its pointer usable) and the content restores (HOST
 * copies, ZERO memsets) are enqueued on the library's streams; opts->stream
 * is made to wait for them (cuStreamWaitEvent), so work the caller enqueues
 * on it afterwards sees the restored content without any host wait. Other
 * streams must wait on that stream (or the caller checks
 * cms_region_info.restore_pending). Failures up to the return are rolled back
 * as usual; a copy that fails later is a CUDA error of the device context.
 * DISK regions are still read synchronously. Not combinable with
 * CMS_REGION_RELEASE_HOST nor CMS_REGION_HOST_PAGEABLE
 * (CMS_ERR_INVALID_ARGUMENT): the host buffers (the staging) are needed until
 * the copies are done.
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
 * cms_resume_options_init - fills *opts like CMS_RESUME_OPTIONS_INIT.
 * Threads: thread-safe. CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
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
 * cms_pause - pauses every active region tagged tag (every region of the
 * context when tag is NULL), on every device: waits for GPU work (see
 * cms_pause_options), saves content per policy (HOST: copied to host
 * backups; DISK: written to the region's file), then unmaps and releases the
 * physical memory. Addresses stay reserved: pointers keep their values but
 * the memory is not accessible until a resume. Regions already paused are
 * skipped.
 * Importers (since 1.1): before anything else, every importer of a region
 * published with cms_exporter_publish is asked to drop its mappings, and the
 * pause waits for all of them (cms_exporter_options.revoke_timeout_ms). One
 * that refuses or does not answer in time fails the pause (CMS_ERR_REFUSED /
 * CMS_ERR_TIMEOUT, naming it) with nothing released, and the importers that
 * had dropped their mappings get the memory again. After a successful resume
 * every such importer maps the memory again at its same addresses
 * (docs/ipc.md).
 * All or nothing: if any step fails, every allocation touched is mapped again
 * with its content (an allocation whose memory was already released gets it
 * back per policy: HOST and DISK content restored, ZERO zeroed, DISCARD
 * undefined) and the status says what failed. If a rollback step fails too,
 * the status is CMS_ERR_ROLLBACK_FAILED and every allocation is left in an
 * exact state (mapped, or released with its backup kept). A region with an
 * allocation left without its memory (or whose restore failed) is then
 * reported CMS_STATE_PAUSED (cms_region_info), even if its other allocations
 * are mapped again: its memory must not be accessed, cms_alloc refuses it,
 * and the next resume (cms_resume, cms_region_resume, cms_swap) completes it:
 * it backs every such allocation, restores its content per policy (HOST and
 * DISK from the store; ZERO zeroed; DISCARD undefined) and makes the region
 * active. A region whose allocations were all mapped again with their
 * content stays CMS_STATE_ACTIVE. cms_free completes an allocation in either
 * state.
 * Several devices (since 1.1): the regions are grouped by device and the
 * devices are worked on at the same time, each by a thread of its own (the
 * calling thread takes the lowest device; the others are library threads
 * started for the call, all signals blocked). The devices agree before
 * releasing anything and again before committing: if one fails, every device
 * is rolled back as above, so the call stays all or nothing across devices.
 * The status and message are then those of the device that failed (message
 * prefixed "device N: "), or CMS_ERR_ROLLBACK_FAILED naming each device
 * whose rollback failed.
 *   tag:    a tag (see CMS_TAG_MAX), or NULL for every region.
 *   opts:   NULL for the defaults (CMS_PAUSE_OPTIONS_INIT).
 *   result: NULL, or written on success. If its struct_size covers the 1.1
 *           fields it also reports each device, and is then written on
 *           failure too: the 1.0 fields 0, failed_device and each device's
 *           status saying what failed where.
 * Threads: thread-safe. Holds the locks of the regions it pauses for the
 * whole call (other calls naming them wait), the context's lock only
 * briefly: allocations and frees in other regions proceed. Log lines of the
 * device threads reach the log callback on the calling thread, after them;
 * progress callbacks (cms_context_progress_set) come from the device threads.
 * CUDA: cuCtxSynchronize, cuStreamSynchronize or cuEventSynchronize (opts);
 * cuMemGetInfo (result); cuMemHostRegister, cuMemcpyDtoHAsync, cuEventRecord,
 * cuEventSynchronize, cuStreamSynchronize (HOST and DISK content);
 * cuMemUnmap, cuMemRelease; on rollback cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemcpyHtoDAsync, cuMemsetD8Async.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; a bad tag; unknown opts->flags; a
 *     DISK region without a directory (cms_region_disk_dir_set).
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size or result->struct_size.
 *   CMS_ERR_NOT_FOUND: no region has this tag.
 *   CMS_ERR_ALREADY_PAUSED: every region of tag is paused (tag NULL: every
 *     region of the context, or it has none); nothing changed.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: a host backup, or a device thread, could not
 *     be made.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: the rollback of a failed release needed
 *     device memory.
 *   CMS_ERR_TIMEOUT, CMS_ERR_REFUSED (since 1.1): an importer (see above).
 *   CMS_ERR_IO (since 1.1): writing or syncing a DISK region's file failed (a
 *     full disk: message "... (disk full)"; errno EACCES, EPERM or EROFS give
 *     CMS_ERR_PERMISSION instead).
 *   CMS_ERR_ROLLBACK_FAILED: see above.
 *   driver statuses.
 */
CMS_API cms_status cms_pause(cms_context *ctx, const char *tag, const cms_pause_options *opts,
			     cms_pause_result *result);

/*
 * cms_resume - resumes every paused region tagged tag (every region of the
 * context when tag is NULL), on every device: creates physical memory, maps
 * it at the same addresses (read-write for the region's device and its peer
 * devices, cms_region_peer_devices_set), restores content per policy (HOST:
 * copied back from the backup, which is kept for the next pause unless the
 * region has CMS_REGION_RELEASE_HOST; DISK: read back from the file; ZERO:
 * zeroed) and bumps each region's epoch. Returns when the memory is ready for
 * use from any stream, or, with CMS_RESUME_ASYNC, as soon as it is mapped,
 * with the restore ordered before opts->stream (see the flag). Regions
 * already active are skipped. Importers of published regions map the new
 * memory at their same addresses (cms_pause).
 * All or nothing: on failure every allocation touched stays paused with its
 * backup. If undoing the partial resume fails too, the status is
 * CMS_ERR_ROLLBACK_FAILED and the allocations keep an exact state and their
 * backups; the next resume completes.
 * Several devices (since 1.1): worked on at the same time, one thread each,
 * agreeing before committing, exactly as cms_pause describes (results per
 * device, all or nothing across devices; with CMS_RESUME_ASYNC, opts->stream
 * waits for every device's restore).
 *   tag:    a tag (see CMS_TAG_MAX), or NULL for every region.
 *   opts:   NULL for the defaults (CMS_RESUME_OPTIONS_INIT).
 *   result: NULL, or written as cms_pause's.
 * Threads: as cms_pause.
 * CUDA: cuMemCreate, cuMemMap, cuMemSetAccess; cuMemcpyHtoDAsync,
 * cuMemsetD8Async, cuMemHostRegister, cuStreamSynchronize (content);
 * cuEventRecord, cuStreamWaitEvent (CMS_RESUME_ASYNC); on rollback cuMemUnmap,
 * cuMemRelease.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; a bad tag; unknown opts->flags;
 *     CMS_RESUME_ASYNC with a region that has CMS_REGION_RELEASE_HOST or
 *     CMS_REGION_HOST_PAGEABLE.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size or result->struct_size.
 *   CMS_ERR_NOT_FOUND: no region has this tag.
 *   CMS_ERR_NOT_PAUSED: no region of tag is paused (tag NULL: no region of
 *     the context, or it has none); nothing changed.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: cuMemCreate found no memory; retry when
 *     memory is available.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: bookkeeping, or a device thread.
 *   CMS_ERR_IO (since 1.1): reading a DISK region's file failed (errno mapped
 *     as for cms_pause).
 *   CMS_ERR_ROLLBACK_FAILED: see above.
 *   driver statuses.
 */
CMS_API cms_status cms_resume(cms_context *ctx, const char *tag, const cms_resume_options *opts,
			      cms_resume_result *result);

/*
 * cms_region_pause - cms_pause of one region.
 * Threads: as cms_pause; must not run concurrently with cms_region_destroy of
 * the region.
 * Returns: as cms_pause, except that CMS_ERR_INVALID_ARGUMENT covers region
 * NULL (not ctx or tag), CMS_ERR_NOT_FOUND does not occur, and
 * CMS_ERR_ALREADY_PAUSED means this region is paused (nothing changed).
 */
CMS_API cms_status cms_region_pause(cms_region *region, const cms_pause_options *opts,
				    cms_pause_result *result);

/*
 * cms_region_resume - cms_resume of one region.
 * Threads: as cms_resume; must not run concurrently with cms_region_destroy
 * of the region.
 * Returns: as cms_resume, except that CMS_ERR_INVALID_ARGUMENT covers region
 * NULL (not ctx or tag), CMS_ERR_NOT_FOUND does not occur, and
 * CMS_ERR_NOT_PAUSED means this region is active (nothing changed).
 */
CMS_API cms_status cms_region_resume(cms_region *region, const cms_resume_options *opts,
				     cms_resume_result *result);

/* ---- Swap and progress (since 1.1) ------------------------------------------ */

/*
 * cms_swap (since 1.1) - pauses every active region tagged pause_tag and
 * resumes every paused region tagged resume_tag in one call, with the two
 * directions' copies running at the same time. On each device the pause side
 * saves its allocations' content per policy (HOST: to the host backup; DISK:
 * to the region's file; DISCARD and ZERO: nothing) in batches and, as soon as
 * a batch is saved, unmaps it and releases its physical memory. The resume
 * side runs on a second thread per device: for each allocation it creates
 * physical memory, maps it at its address and restores its content per
 * policy, adjacent backups sharing one copy as in cms_resume. When the device
 * is out of memory (CUDA_ERROR_OUT_OF_MEMORY) while the pause side has memory
 * left to release, the resume side waits for the next release and tries
 * again, so a device that only fits one of the two tags (plus one batch)
 * still swaps them. Before anything is copied the pause side waits for GPU
 * work as popts says (default: cuCtxSynchronize of every device of
 * pause_tag) and importers of published regions drop their mappings (as
 * cms_pause).
 * Transactional: the call commits only when both sides succeeded. If either
 * fails, the resume side is undone first (what it mapped is unmapped and
 * released: resume_tag stays paused with its backups) and then the pause side
 * is rolled back (every allocation of pause_tag mapped again; HOST content
 * copied back from the backup; memory of a DISCARD / ZERO allocation that was
 * already released comes back undefined / zeroed, as in cms_pause). On
 * success the pause side's regions are PAUSED (host backups kept as by
 * cms_pause) and the resume side's ACTIVE, epoch bumped, importers granted
 * the memory again (as cms_resume).
 *   pause_tag, resume_tag: tags (see CMS_TAG_MAX), different from each other;
 *            every region with the tag, on every device, is included.
 *            Regions of pause_tag already paused and regions of resume_tag
 *            already active are skipped. Every policy is supported (a DISK
 *            region needs its directory, as for cms_pause).
 *   popts:   NULL for the defaults; as for cms_pause.
 *   ropts:   NULL for the defaults; as for cms_resume, except that
 *            CMS_RESUME_ASYNC is refused.
 *   presult, rresult: NULL, or receive what cms_pause / cms_resume would
 *            report for their side; elapsed_ns is the wall time of the whole
 *            swap in both; device_results has one entry per device of that
 *            side (elapsed_ns: that device's own work, both sides, without
 *            waiting for the other devices, as in cms_pause). On failure they are written
 *            only when their struct_size covers the 1.1 fields (all counts
 *            0, failed_device as in cms_pause).
 * Progress (cms_context_progress_set): operation "swap", total = HOST bytes
 * copied out plus HOST bytes copied back; done counts copies issued.
 * Threads: thread-safe. Holds the locks of the regions of both tags (taken in
 * creation order) for the whole call; starts a library thread per device
 * that has regions of both tags, and one per further device (all signals
 * blocked).
 * CUDA: as cms_pause and cms_resume, with cuEventCreate / cuEventDestroy for
 * the call's events.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or a tag is NULL; a bad tag; the same tag
 *     twice; unknown flags; CMS_RESUME_ASYNC.
 *   CMS_ERR_STRUCT_SIZE: an options or result struct_size.
 *   CMS_ERR_NOT_FOUND: no region has one of the tags.
 *   CMS_ERR_ALREADY_PAUSED: every region of pause_tag is paused.
 *   CMS_ERR_NOT_PAUSED: every region of resume_tag is active.
 *   CMS_ERR_INVALID_ARGUMENT: a DISK region without a directory.
 *   CMS_ERR_IO, CMS_ERR_PERMISSION: a DISK file's write, sync or read.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: a host backup, or the call's thread.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: cuMemCreate failed with nothing left to
 *     release.
 *   CMS_ERR_TIMEOUT, CMS_ERR_REFUSED: an importer, as cms_pause.
 *   CMS_ERR_ROLLBACK_FAILED: as cms_pause / cms_resume: exact per-allocation
 *     state is kept for the next call to complete (a region of pause_tag left
 *     with an allocation unbacked is reported paused; a resume completes it).
 *   driver statuses.
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
 * cms_context_progress_set (since 1.1) - sets the progress callback of every
 * later cms_pause / cms_resume / cms_region_pause / cms_region_resume /
 * cms_swap of the context; an operation already running keeps the callback
 * it started with.
 *   fn:   the callback; NULL clears it.
 *   user: passed to fn.
 * Ownership: user is borrowed: keep it valid while fn is set.
 * Threads: thread-safe; takes the context's lock briefly.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL.
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
} cms_region_stats;

/*
 * cms_region_stats_get (since 1.2) - the region's identity and cumulative
 * counters (cms_region_stats), a consistent snapshot taken under its lock.
 *   stats: struct_size set by the caller (at least the 1.2 size); written up
 *          to it.
 * Threads: thread-safe; takes the region's lock (waits for a pause or resume
 * of it in progress); must not run concurrently with cms_region_destroy of the
 * region (cms_region_list has no such restriction).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region or stats is NULL.
 *   CMS_ERR_STRUCT_SIZE: stats->struct_size.
 */
CMS_API cms_status cms_region_stats_get(cms_region *region, cms_region_stats *stats);

/*
 * cms_region_list (since 1.2) - enumerates the regions of the context: a
 * snapshot of each live region's identity and counters (as
 * cms_region_stats_get) into the caller's array, in creation order. No handle
 * is returned: an entry is a copy, valid whatever happens to its region
 * afterwards; use (tag, device) with cms_region_find to act on one. The
 * regions are referenced while the call reads them, so a concurrent
 * cms_region_destroy is safe: a region destroyed before its entry is read is
 * left out, one created during the call may or may not be listed.
 *   v:       cap entries; each entry's struct_size set by the caller, all the
 *            same (at least the 1.2 size); written up to it. NULL only when
 *            cap is 0.
 *   cap:     entries of v; 0 to ask only for total.
 *   written: NULL, or receives the entries written (<= cap; fewer than
 *            min(cap, total) when regions were destroyed during the call).
 *   total:   NULL, or receives the regions of the context when the call began
 *            (a larger buffer is needed when total > cap).
 * Ownership: v stays the caller's; nothing to free.
 * Threads: thread-safe, also against cms_region_destroy and
 * cms_context_progress_set; takes the context's lock briefly and then each
 * region's lock in turn (waits for a pause or resume in progress). Not to be
 * called from a progress or control callback.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; v is NULL with cap > 0.
 *   CMS_ERR_STRUCT_SIZE: an entry's struct_size (nothing written).
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
