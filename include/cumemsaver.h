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
 *  - Each function's comment is its contract, and its manual page
 *    (cms_pause(3), ...) is made from it: a summary line, what it does and
 *    what its parameters mean, then Ownership (who frees what, how long a
 *    returned pointer lives), Threads, CUDA (the main driver calls, or
 *    "none") and Returns (every status it returns for its own reasons).
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
 * cms_version - the version of the library loaded at run time, as
 * CMS_VERSION_NUMBER encodes it.
 * A library of the header's major version and at least its minor version has
 * everything the header declares.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns: the version number; never fails.
 */
CMS_API uint32_t cms_version(void);

/*
 * cms_version_string - the version of the library loaded at run time as
 * "MAJOR.MINOR.PATCH".
 * Ownership: static storage; never NULL, never to be freed.
 * Threads: thread-safe.
 * CUDA: none.
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
 * cms_status_name - the name of a status: "CMS_OK", "CMS_ERR_NOT_FOUND", ...
 * A number that is no status gives "CMS_ERR_UNKNOWN_STATUS".
 * Ownership: static storage; never NULL, never to be freed.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns: the name; never fails.
 */
CMS_API const char *cms_status_name(cms_status status);

/*
 * cms_status_string - a one-line English description of a status.
 * A number that is no status gives "unknown status code".
 * Ownership: static storage; never NULL, never to be freed.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns: the description; never fails.
 */
CMS_API const char *cms_status_string(cms_status status);

/*
 * cms_last_error - the message of the last failed call on the calling thread.
 * What failed and why (the driver call and its CUresult, errno, the tag or
 * pointer concerned), at most 511 bytes, one line of printable text (control
 * characters of quoted text are escaped: \n, \r, \t, \xHH). A successful call
 * leaves it unchanged.
 * Ownership: thread-local storage of the library, valid on the calling thread
 * until its next failing call; never NULL ("" before any failure).
 * Threads: thread-safe (one message per thread).
 * CUDA: none.
 * Returns: the message; never fails.
 */
CMS_API const char *cms_last_error(void);

/*
 * cms_last_error_message - copies the calling thread's last error message into
 * buf.
 * At most len - 1 bytes and a terminating NUL are written.
 *   buf: len bytes, the caller's; may be NULL when len is 0.
 *   len: size of buf in bytes.
 * Threads: thread-safe (one message per thread).
 * CUDA: none.
 * Returns: the full message length in bytes without the NUL, like snprintf (>=
 * len: truncated); never fails.
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
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_context_options_init(cms_context_options *opts);

/*
 * cms_context_create - creates a context: the owner of regions, allocations
 * and every other object of the library.
 * The driver is loaded by the first call that needs it. The context uses each
 * device's primary context, so it shares the address space with the CUDA
 * runtime and PyTorch in the same process.
 *   opts: NULL for the defaults (CMS_CONTEXT_OPTIONS_INIT).
 *   out:  receives the context; NULL on failure.
 * Ownership: *out is the caller's: free it with cms_context_destroy.
 * opts->driver_path is copied; opts->log_user is borrowed for the context's
 * life.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: out is NULL; opts->flags is not 0;
 *     opts->log_level is not a CMS_LOG_* level.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: also when the fork handler (pthread_atfork)
 *     cannot be registered.
 */
CMS_API cms_status cms_context_create(const cms_context_options *opts, cms_context **out);

/*
 * cms_context_destroy - destroys every region of the context (as
 * cms_region_destroy, in creation order), then the context.
 * It stops being the hook context if it is one, and releases the primary
 * contexts it retained and the driver. Driver cleanups that fail here (after
 * every region is gone) are logged and leaked: the context goes in every case.
 * Since 1.3 it first stops and joins the context's preparation thread
 * (CMS_REGION_PREPARE), giving back a buffer it is making.
 *   ctx: NULL is accepted (CMS_OK, nothing done).
 * Ownership: on success ctx is freed. On failure it stays valid with the
 * regions not yet destroyed (each as it was); a retry continues.
 * Threads: not thread-safe against any other call on ctx or on its objects.
 * CUDA: as cms_region_destroy per region; cuStreamDestroy, cuEventDestroy,
 * cuMemRelease (guards), cuDevicePrimaryCtxRelease.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT (since 1.1): an exporter, import or control
 *     socket of the context is still open; nothing was touched.
 *   driver statuses: destroying a region failed (see Ownership).
 */
CMS_API cms_status cms_context_destroy(cms_context *ctx);

/*
 * cms_device_memory_info - the driver's view of a device's memory
 * (cuMemGetInfo in its primary context).
 * Use it to check that a pause gave memory back. Prepares the device at its
 * first use, as cms_region_create.
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
 * Region flag: give host memory back after each successful resume. By default
 * a HOST region keeps its host backup buffers (page-locked where the system
 * allows) and a DISK region its file's space from one cycle to the next, so
 * that only the first cycle pays for making them; with this flag a resumed
 * region holds none. Not combinable with CMS_RESUME_ASYNC.
 */
#define CMS_REGION_RELEASE_HOST 0x1ull
/*
 * Region flag (since 1.1): shareable with other processes (docs/ipc.md). Its
 * physical allocations are created with the POSIX file descriptor handle type,
 * so that cms_exporter_publish can hand them to importers. Needs
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
 * Region flag (since 1.1): coalesced backing. A resume backs each run of
 * address-adjacent allocations with one physical handle and one mapping, at
 * the same addresses, and a pause releases it whole: a region of many small
 * allocations pauses and resumes in few driver calls. The cost: a cms_free of
 * an allocation that shares a handle with live neighbours keeps its bytes in
 * that handle (cms_region_info.retained_bytes) until the next pause or until
 * they are freed too. Ignored for shareable regions.
 */
#define CMS_REGION_COALESCE 0x8ull
/*
 * Region flag (since 1.2), with CMS_REGION_COALESCE only (else
 * cms_region_create returns CMS_ERR_INVALID_ARGUMENT): coalesced from the
 * first allocation. cms_alloc of at most half the chunk size (64 MiB) carves
 * the allocation out of a shared physical handle, a chunk, so that the first
 * pause of many small allocations releases one handle per chunk. The cost: the
 * region may hold up to the chunk size of device memory ahead of need (the
 * tail of its open chunk, counted in cms_region_info.retained_bytes), which a
 * pause releases and a resume does not take back. Larger allocations get
 * handles of their own. Ignored for shareable regions.
 */
#define CMS_REGION_CHUNKS 0x40ull
/*
 * Region flag (since 1.2): guarded paused ranges. While the region is paused
 * (or an allocation of it has no memory after a failed call), each
 * allocation's range stays mapped read-only to zeros for the region's device
 * and peers: a stray read by a kernel reads zeros instead of faulting and
 * killing the CUDA context; a write still faults. The cost: six zero-filled
 * physical handles per device (126 MiB at 2 MiB granularity), made by the
 * first cms_region_create with the flag on the device (which may then return
 * the statuses of those driver calls, e.g. CMS_ERR_OUT_OF_DEVICE_MEMORY) and
 * kept until cms_context_destroy.
 */
#define CMS_REGION_GUARD 0x10ull
/*
 * Region flag (since 1.2), with CMS_POLICY_HOST only (else cms_region_create
 * returns CMS_ERR_INVALID_ARGUMENT): pageable host backups. The backups live
 * in ordinary pageable memory, never page-locked: the kernel may swap them
 * out, and the process's RSS grows by the backup's size at a pause. Copies go
 * through page-locked staging buffers of the library, at host-memcpy rather
 * than DMA speed. Not combinable with CMS_RESUME_ASYNC; changeable between
 * cycles (cms_region_flags_set). torch_memory_saver's
 * cpu_backup_backend="mmap" maps to it.
 */
#define CMS_REGION_HOST_PAGEABLE 0x20ull
/*
 * Region flag (since 1.3), with CMS_POLICY_HOST or CMS_POLICY_DISK only (else
 * cms_region_create returns CMS_ERR_INVALID_ARGUMENT): verified backups. A
 * pause computes a 64-bit checksum of each allocation's device content (the
 * bytes it saves: not ranges declared with cms_range_discard) with a GPU
 * kernel of the library, before the memory is released; the resume, once its
 * restore copies are done, checksums the restored device content and compares.
 * A mismatch fails the resume (cms_resume, cms_region_resume, cms_swap) with
 * CMS_ERR_VERIFY_FAILED, rolled back: the region stays paused with its backup
 * (cms_backup_read shows it). Changeable between cycles
 * (cms_region_flags_set): a resume checks only what the pause before it
 * checksummed, and not while the flag is clear, so clearing it takes a
 * mismatching backup back as it is. The cost: the kernel reads the content
 * once at the pause and once at the resume (device memory bandwidth; bytes
 * and time in cms_region_stats.bytes_verified, verify_ns); while a region of
 * a device has the flag, the device holds the kernel (cuModuleLoadData) and
 * one granule of device memory for its tables and results (one for all its
 * verified regions), so that a pause, meant to free device memory, needs none
 * to checksum: made when the first region gets the flag (cms_region_create
 * with it, cms_region_flags_set setting it; on a full device those calls
 * return CMS_ERR_OUT_OF_DEVICE_MEMORY and change nothing), given back when
 * the last one clears it or is destroyed. Not combinable with
 * CMS_RESUME_ASYNC.
 */
#define CMS_REGION_VERIFY 0x80ull
/*
 * Region flag (since 1.3), with CMS_POLICY_HOST only and not with
 * CMS_REGION_RELEASE_HOST (else cms_region_create returns
 * CMS_ERR_INVALID_ARGUMENT): host backups prepared ahead. After each cms_alloc
 * in the region (also an allocation through the allocator hooks), a
 * background thread of the library (one per context, started by the first
 * such allocation, every signal blocked, joined by cms_context_destroy) makes
 * the host backup buffers of the allocations that have none: mapped, faulted
 * in and page-locked (cuMemHostRegister, the device's primary context pushed
 * on that thread; with CMS_REGION_HOST_PAGEABLE faulted in only), exactly as
 * the first pause would make them. A first pause that comes after the
 * preparation then only copies, at the link's speed; one that comes while a
 * buffer is being made waits for it and makes the rest itself. The slow steps
 * run without the region's lock: cms_alloc, cms_free, pauses and the
 * application's kernels are not held up, though the faulting and page-locking
 * compete for host CPU and memory bandwidth. The buffers are held from the
 * allocation on (cms_region_info.host_bytes, pinned_bytes; progress in
 * cms_region_stats.bytes_prepared and prepare_ns) and kept from one cycle to
 * the next as any retained backup. Best effort: a preparation that fails (no
 * host memory; page-locking refused, e.g. RLIMIT_MEMLOCK: the buffer is kept
 * pageable and the pause tries to page-lock it) fails no call, is logged at
 * CMS_LOG_DEBUG, and leaves the work to the pause. cms_region_flags_set may
 * set CMS_REGION_RELEASE_HOST later: preparation stops, the prepared buffers
 * are given back at once, and it starts again when the flag is cleared (on an
 * active region: at once). cms_region_stats_get or cms_region_info_get show when
 * it is done (host_bytes covers every allocation).
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
 * cms_region_options_init - fills *opts like CMS_REGION_OPTIONS_INIT.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_region_options_init(cms_region_options *opts);

/*
 * cms_region_create - creates an empty, active region named tag on
 * opts->device with opts->policy and opts->flags.
 * The device's first use by the context loads the driver if needed, checks
 * virtual memory management, computes the allocation granularity and retains
 * the device's primary context.
 *   tag:  CMS_TAG_MAX; copied.
 *   opts: NULL for the defaults (device 0, CMS_POLICY_DISCARD, no flags).
 *   out:  receives the region; NULL on failure.
 * Ownership: *out is owned by the context: valid until cms_region_destroy or
 * cms_context_destroy.
 * Threads: thread-safe.
 * CUDA: cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetAttribute,
 * cuMemGetAllocationGranularity, cuDevicePrimaryCtxRetain, cuStreamCreate,
 * cuEventCreate (first use of the device); cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemsetD8Async (CMS_REGION_GUARD, first region with it on
 * the device); cuModuleLoadData, cuModuleGetFunction, cuMemAddressReserve,
 * cuMemCreate, cuMemMap, cuMemSetAccess (CMS_REGION_VERIFY, when no region of
 * the device has it).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx, tag or out is NULL; a bad tag; an unknown
 *     policy; unknown flag bits; CMS_REGION_CHUNKS without
 *     CMS_REGION_COALESCE; CMS_REGION_HOST_PAGEABLE or CMS_REGION_PREPARE
 *     without CMS_POLICY_HOST; CMS_REGION_PREPARE with
 *     CMS_REGION_RELEASE_HOST; CMS_REGION_VERIFY without CMS_POLICY_HOST or
 *     CMS_POLICY_DISK.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_EXISTS: a region with this tag exists on this device.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: no device memory for what CMS_REGION_VERIFY
 *     holds (since 1.3: its kernel and scratch) or for CMS_REGION_GUARD's zero
 *     handles (since 1.2); no region is created.
 *   CMS_ERR_INVALID_DEVICE: opts->device is negative, 64 or more, or not a
 *     device of this process.
 *   CMS_ERR_NOT_SUPPORTED: the device has no virtual memory management, or
 *     lacks the handle type a CMS_REGION_SHAREABLE* flag needs.
 *   CMS_ERR_NO_DRIVER: the driver cannot be loaded or initialised (a later
 *     call tries again).
 *   CMS_ERR_NO_DEVICE: no CUDA device.
 *   driver statuses.
 */
CMS_API cms_status cms_region_create(cms_context *ctx, const char *tag,
				     const cms_region_options *opts, cms_region **out);

/*
 * cms_region_find - looks up the region tagged tag on device.
 *   tag:    CMS_TAG_MAX.
 *   device: CUDA device ordinal; not checked (a device that does not exist has
 *           no regions).
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
 * cms_region_destroy - frees every allocation of the region (as cms_free),
 * then the region.
 * Importers of a published region are asked to drop their mappings first; the
 * region goes whether or not they answer in time. Waits for cms_free calls on
 * its allocations in flight on other threads.
 *   region: NULL is accepted (CMS_OK, nothing done).
 * Ownership: on success region is freed. On failure the allocations freed so
 * far stay freed, the rest stay as they were (as after a failed cms_free:
 * content, access and backup kept) and the region stays valid: a retry
 * continues.
 * Threads: not concurrently with other calls naming this handle (calls by tag
 * or pointer are safe); waits for a pause or resume of the region in progress.
 * CUDA: cuMemRelease, cuMemUnmap, cuMemRetainAllocationHandle (after a failed
 * cuMemUnmap), cuMemAddressFree; cuStreamSynchronize (an asynchronous restore
 * in flight), cuMemHostUnregister (HOST backups);
 * cuModuleUnload (the device's last CMS_REGION_VERIFY region).
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
 * cms_region_info_get - a consistent snapshot of the region (cms_region_info).
 * While restore_pending is set, the call checks whether the asynchronous
 * restore is done (and then clears it).
 *   info: struct_size set by the caller (at least the 1.0 size); written up to
 *         it.
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: cuEventQuery, only while restore_pending is set (a failed query reads
 * "still pending").
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 */
CMS_API cms_status cms_region_info_get(cms_region *region, cms_region_info *info);

/*
 * cms_region_peer_devices_set (since 1.1) - gives other devices read-write
 * access to the region's memory (peer access).
 * The allocations mapped now get it at once, later allocations and every
 * resume map with it; a device dropped from the previous mask loses access.
 *
 * All or nothing: on failure the allocations already changed get their
 * previous access back and the mask stays. cms_region_info.peer_device_mask
 * reports it.
 *   device_mask: bit d for device ordinal d; 0: only the region's own device.
 *                Each bit must name an existing device, not the region's own,
 *                that can access the region's device (cuDeviceCanAccessPeer).
 * Since 1.3, while the region is frozen (cms_region_freeze), the devices get
 * read-only access.
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: cuDeviceGetCount, cuDeviceGet, cuDeviceCanAccessPeer, cuMemSetAccess.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; device_mask names the region's
 *     own device.
 *   CMS_ERR_INVALID_DEVICE: a bit at or beyond the device count.
 *   CMS_ERR_NOT_SUPPORTED: a device that cannot access the region's device.
 *   CMS_ERR_ROLLBACK_FAILED: restoring the previous access failed too (the
 *     message names the allocation); the new mask is kept, so the next resume
 *     maps every allocation with it.
 *   driver statuses: cuMemSetAccess failed; nothing changed.
 */
CMS_API cms_status cms_region_peer_devices_set(cms_region *region, uint64_t device_mask);

/*
 * cms_region_freeze (since 1.3) - makes the region's memory read-only, so
 * that pauses of content that does not change (weights) copy nothing.
 * Every mapping of the region (its allocations, coalesced runs and chunks)
 * becomes read-only for its device and its peer devices, all or nothing: a
 * copy into it fails, a kernel writing to it faults (an illegal address: the
 * context is lost), so a write never changes content silently. On a paused
 * region only the flag is set now: its next resume maps read-only.
 * While frozen:
 *   - a pause saves an allocation without copying it when its retained backup
 *     (CMS_POLICY_HOST without CMS_REGION_RELEASE_HOST, CMS_POLICY_DISK) still
 *     holds its content: the backup was saved by a pause of the frozen region,
 *     or restored whole by a resume of it (no range declared content-free by
 *     cms_range_discard). The first pause after freezing an active region
 *     copies everything (the memory may have changed since the last resume);
 *     the later ones copy only allocations without such a backup.
 *     cms_region_stats.bytes_unchanged counts the bytes not copied.
 *   - a resume (also the resume side of cms_swap) maps read-write, restores,
 *     waits for its copies, then makes the memory read-only before it returns;
 *     CMS_RESUME_ASYNC is served synchronously (restore_pending stays 0).
 *   - cms_alloc (and hooked allocations into the region) fails with
 *     CMS_ERR_FROZEN; cms_free works; peer devices added get read-only access.
 * cms_region_thaw ends it. cms_region_info.frozen reports it.
 * Freezing a frozen region returns CMS_OK and does nothing.
 * Threads: thread-safe; waits for a pause, resume or swap of the region in
 * progress (and for an asynchronous resume's copies into it).
 * CUDA: cuMemSetAccess (CU_MEM_ACCESS_FLAGS_PROT_READ), cuStreamSynchronize
 * (an asynchronous restore in flight).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL.
 *   CMS_ERR_NOT_SUPPORTED: the region is CMS_REGION_SHAREABLE or
 *     CMS_REGION_SHAREABLE_FABRIC (importers map it read-write themselves).
 *   CMS_ERR_ROLLBACK_FAILED: a cuMemSetAccess failed and giving read-write
 *     access back to the mappings already changed failed too (the message
 *     names the allocation); the region is not frozen.
 *   driver statuses: waiting for an asynchronous restore failed, or
 *     cuMemSetAccess failed; nothing changed.
 */
CMS_API cms_status cms_region_freeze(cms_region *region);

/*
 * cms_region_thaw (since 1.3) - ends cms_region_freeze: the region's memory
 * becomes read-write again for its device and its peer devices (all or
 * nothing; a paused region: from its next resume on), and no backup counts as
 * holding the content any more: the next pause copies everything. Thawing a
 * region that is not frozen returns CMS_OK and does nothing.
 * Threads: thread-safe; waits for a pause, resume or swap of the region in
 * progress.
 * CUDA: cuMemSetAccess (CU_MEM_ACCESS_FLAGS_PROT_READWRITE).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL.
 *   CMS_ERR_ROLLBACK_FAILED: a cuMemSetAccess failed and making the mappings
 *     already changed read-only again failed too (the message names the
 *     allocation); the region stays frozen, and its next pause copies
 *     everything.
 *   driver statuses: cuMemSetAccess failed; nothing changed (still frozen).
 */
CMS_API cms_status cms_region_thaw(cms_region *region);

/*
 * cms_region_disk_dir_set (since 1.1) - chooses the directory where a
 * CMS_POLICY_DISK region keeps its content while paused.
 * The region's file is created there at once and unlinked: it leaves no name,
 * is closed on exec and never outlives the process. A pause writes every
 * allocation to it and syncs it, a resume reads it back (also with
 * CMS_RESUME_ASYNC); both stay all or nothing. The file keeps its space from
 * one cycle to the next unless CMS_REGION_RELEASE_HOST. A DISK region without
 * a directory refuses to pause.
 *   dir: path of 1..4000 bytes, absolute or relative to the current directory
 *        now (resolved with realpath and kept open: one descriptor while the
 *        region has the directory, and its files are made there even if the
 *        directory is renamed or its name replaced later); NULL closes the
 *        region's file without choosing another.
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: none (the file system only).
 * Returns (on failure the previous directory and file stay):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; the policy is not
 *     CMS_POLICY_DISK; dir is empty, too long or not a directory.
 *   CMS_ERR_NOT_FOUND: dir, or a component of it, does not exist.
 *   CMS_ERR_PERMISSION: dir is not writable (EACCES, EPERM, EROFS).
 *   CMS_ERR_IO: another failure opening dir, or creating or unlinking the
 *     file (the message names dir and errno).
 *   CMS_ERR_PAUSED: the region is paused (its content is in its current file).
 */
CMS_API cms_status cms_region_disk_dir_set(cms_region *region, const char *dir);

/*
 * cms_region_flags_set (since 1.2) - changes the region's retention flags
 * between cycles: the flags in mask take their values in flags.
 * Changeable: CMS_REGION_RELEASE_HOST, CMS_REGION_HOST_PAGEABLE and (since
 * 1.3) CMS_REGION_VERIFY. A change applies from the next pause or resume
 * (CMS_REGION_VERIFY cleared on a paused region: its resume checks nothing).
 * On an active region, setting CMS_REGION_RELEASE_HOST or changing
 * CMS_REGION_HOST_PAGEABLE gives back now what the region keeps from its last
 * pause (host backups; a DISK file's space for RELEASE_HOST); a host buffer
 * whose cuMemHostUnregister fails is kept (logged) and the call still
 * succeeds. Since 1.3, on a CMS_REGION_PREPARE region setting
 * CMS_REGION_RELEASE_HOST also stops its preparation (a buffer being made is
 * given back; waits for it) and clearing it prepares again. On a frozen
 * region (since 1.3) a change of CMS_REGION_RELEASE_HOST or
 * CMS_REGION_HOST_PAGEABLE makes the next pause copy everything; one of
 * CMS_REGION_VERIFY does not. Setting CMS_REGION_VERIFY (since 1.3) makes
 * what its checksum needs on the region's device now, if no region of the
 * device has the flag: the kernel and one granule of device memory (see
 * CMS_REGION_VERIFY); clearing it on the device's last such region gives them
 * back.
 * cms_region_info.flags reports the flags.
 *   mask:  the flags to change; only those above.
 *   flags: their new values; no bit outside mask.
 * Threads: thread-safe; waits for a pause, resume or swap of the region in
 * progress (setting or clearing CMS_REGION_VERIFY: also for a checksum in
 * progress on the device); not concurrently with cms_region_destroy of the
 * region.
 * CUDA: cuStreamSynchronize (an asynchronous restore in flight),
 * cuMemHostUnregister; CMS_REGION_VERIFY set: cuModuleLoadData,
 * cuModuleGetFunction, cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess; cleared: cuModuleUnload, cuMemUnmap, cuMemRelease,
 * cuMemAddressFree.
 * Returns (on failure nothing changed):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; mask has a bit other than the
 *     changeable ones; flags has a bit outside mask; CMS_REGION_HOST_PAGEABLE
 *     set on a region whose policy is not CMS_POLICY_HOST; CMS_REGION_VERIFY
 *     set on one whose policy is neither CMS_POLICY_HOST nor CMS_POLICY_DISK.
 *   CMS_ERR_PAUSED: CMS_REGION_HOST_PAGEABLE would change on a paused region.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY (since 1.3): CMS_REGION_VERIFY set with no
 *     device memory left for its kernel and scratch.
 *   driver statuses: waiting for an asynchronous restore failed; loading the
 *     checksum kernel failed.
 */
CMS_API cms_status cms_region_flags_set(cms_region *region, uint64_t mask, uint64_t flags);

/* ---- Allocations ----------------------------------------------------------- */

/*
 * cms_alloc - allocates size bytes of device memory in an active region.
 * The range is size rounded up to the region's granularity, aligned to it,
 * mapped read-write for the region's device and its peer devices. The content
 * is undefined, as with cudaMalloc. The pointer stays the same until cms_free,
 * whatever pauses and resumes happen in between.
 *   size: bytes, > 0.
 *   ptr:  receives the device pointer; 0 on failure.
 * Ownership: the allocation belongs to the region: cms_free frees it, and so
 * do cms_region_destroy and cms_context_destroy.
 * In a CMS_REGION_PREPARE region (since 1.3) it also wakes the context's
 * preparation thread (started by the first such call), which makes the host
 * backup in the background; a thread that cannot be started is logged and
 * only loses the preparation.
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess (on failure
 * cuMemUnmap, cuMemRelease, cuMemAddressFree); CMS_REGION_PREPARE: on the
 * preparation thread cuCtxPushCurrent, cuMemHostRegister, cuCtxPopCurrent
 * (cuMemHostUnregister for a buffer given back).
 * Returns (on failure nothing is held, except after CMS_ERR_ROLLBACK_FAILED):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region or ptr is NULL; size is 0 or overflows
 *     when rounded up to the granularity; the region is being destroyed.
 *   CMS_ERR_PAUSED: the region is paused.
 *   CMS_ERR_FROZEN (since 1.3): the region is frozen (cms_region_freeze).
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: no device memory or address space left.
 *   CMS_ERR_ROLLBACK_FAILED: undoing a failed step failed too; what is left
 *     stays in the region (freed with it) and no pointer is returned.
 *   driver statuses.
 */
CMS_API cms_status cms_alloc(cms_region *region, uint64_t size, uint64_t *ptr);

/*
 * cms_free - frees the allocation whose base is ptr, in any region state.
 * Its physical memory goes back to the driver, its backup is dropped and its
 * range goes back to the region (an allocation sharing a physical handle with
 * live neighbours, CMS_REGION_COALESCE, keeps its bytes in it until the next
 * pause or until they are freed too: cms_region_info.retained_bytes). The
 * caller must have finished the GPU work using it: the call does not
 * synchronize the application's streams.
 *   ptr: the device pointer cms_alloc returned; 0 does nothing and returns
 *        CMS_OK, as free(NULL) and cudaFree(0) do (since 1.3; before:
 *        CMS_ERR_INVALID_ARGUMENT).
 * Ownership: on success ptr no longer names memory; a later cms_alloc may hand
 * the range out again.
 * A failed call changes nothing the application can see, also when a second
 * driver call fails after the first: the steps that can fail come before the
 * one that gives the memory back (the physical handle is released while still
 * mapped, then unmapped), and a reservation whose cuMemAddressFree fails is
 * freed later (at the context's next pause, resume or swap, or its destroy).
 * The one step undone is the host backup's cuMemHostUnregister: if page-locking
 * it again fails too, the backup stays, pageable (logged; see
 * cms_region_info.pinned_bytes).
 * Threads: thread-safe, from any thread; waits for a pause or resume of the
 * region in progress.
 * CUDA: cuMemHostUnregister, cuMemRelease, cuMemUnmap,
 * cuMemRetainAllocationHandle (after a failed cuMemUnmap: the handle back),
 * cuMemAddressFree; cuStreamSynchronize (an asynchronous restore in flight).
 * Returns:
 *   CMS_OK: freed; or ptr is 0 (nothing done).
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL.
 *   CMS_ERR_NOT_FOUND: ptr is not in an allocation of ctx (or was freed
 *     already).
 *   CMS_ERR_NOT_BASE: ptr is inside an allocation, not at its base.
 *   driver statuses: the allocation is kept as it was: valid, in its region's
 *     state, with its content, its access (read-only while frozen) and its
 *     backup (a frozen region's next pause still copies nothing for it); a
 *     retry continues. After a failed cuMemUnmap the physical handle it had
 *     released is retained back from the mapping, so that it is whole again
 *     (an exporter, cumemsaver_ipc.h, grants it as before). Only if that
 *     fails too does its memory stay mapped without a handle of its own until
 *     the region's next pause (which gives it back and counts it released; the
 *     resume backs it with a new one); until then an exporter cannot grant the
 *     region (logged).
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
 * cms_pointer_info_get - finds the allocation of ctx that contains ptr (base
 * <= ptr < base + size) and describes it.
 *   ptr:  any device address.
 *   info: struct_size set by the caller; written up to it.
 * Ownership: info->region is the region's handle (owned by the context), not a
 * new reference.
 * Threads: thread-safe; does not wait for a pause or resume (state is the
 * region's at the time).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx.
 */
CMS_API cms_status cms_pointer_info_get(cms_context *ctx, uint64_t ptr, cms_pointer_info *info);

/*
 * cms_range_discard (since 1.2) - declares the bytes [ptr, ptr + size) of one
 * live allocation content-free.
 * The next pause of its region does not save them (HOST, DISK) and the resume
 * after it does not restore them: they read undefined, every other byte as
 * before. Meant for memory an allocator holds but no tensor uses. The
 * declaration ends when the resume after the next pause completes, when
 * cms_range_keep covers the bytes, or when the allocation is freed;
 * overlapping or touching declarations merge. Data written into a declared
 * range is lost at the pause unless cms_range_keep covered it: call it before
 * reusing the bytes. Results and statistics count only the bytes copied.
 * DISCARD and ZERO regions accept declarations and ignore them.
 *   ptr:  a device address inside an allocation of ctx (not only its base).
 *   size: bytes, > 0; [ptr, ptr + size) must stay inside that allocation.
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; size is 0; ptr + size overflows or
 *     crosses the end of the allocation.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx (or it was freed).
 *   CMS_ERR_PAUSED: the allocation's region is paused (its content is stored
 *     already).
 *   CMS_ERR_OUT_OF_HOST_MEMORY: no memory for the bookkeeping; nothing
 *     changed.
 */
CMS_API cms_status cms_range_discard(cms_context *ctx, uint64_t ptr, uint64_t size);

/*
 * cms_range_keep (since 1.2) - ends the cms_range_discard declarations over
 * [ptr, ptr + size).
 * Those bytes are saved by the next pause and restored by the resume again.
 * Bytes not declared are left as they are; a declaration covering more than
 * the range keeps the rest.
 *   ptr, size: as for cms_range_discard.
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; size is 0; ptr + size overflows or
 *     crosses the end of the allocation.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx (or it was freed).
 *   CMS_ERR_PAUSED: the allocation's region is paused (what it did not save
 *     cannot come back).
 *   CMS_ERR_OUT_OF_HOST_MEMORY: splitting a declaration needed memory; nothing
 *     changed.
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
 * ptr is.
 * The backup is what a HOST or DISK region's pause saved. While the region is
 * paused it is the allocation's content (CMS_BACKUP_CURRENT); while it is
 * active, a backup kept by retention holds the content as of the last pause
 * (CMS_BACKUP_RETAINED). Byte offsets are the allocation's. A HOST backup is
 * readable at info->host, a DISK one only with cms_backup_read.
 *   ptr:  any address inside a live allocation of ctx.
 *   info: struct_size set by the caller; written up to it, on CMS_OK only.
 * Ownership: info->host points into a buffer of the library, valid until the
 * region's next pause, its next resume that does not retain, a cms_free of the
 * allocation, cms_region_flags_set or the region's destroy. Read it only:
 * writing changes what a resume restores.
 * Threads: thread-safe; waits for a pause, resume or swap of the region in
 * progress.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx.
 *   CMS_ERR_NOT_SUPPORTED: the region's policy keeps no content (DISCARD,
 *     ZERO).
 *   CMS_ERR_NOT_PAUSED: the allocation has no backup now (active and none
 *     kept: never paused since it was made, or CMS_REGION_RELEASE_HOST gave it
 *     back).
 */
CMS_API cms_status cms_backup_get(cms_context *ctx, uint64_t ptr, cms_backup_info *info);

/*
 * cms_backup_read (since 1.2) - copies len bytes of the backup of the
 * allocation containing ptr, from the byte that backs ptr, into buf.
 * HOST: a copy from the host buffer; DISK: a read of the region's file.
 *   ptr: any address inside a live allocation of ctx; ptr + len must not pass
 *        its end.
 *   buf: len bytes, the caller's.
 *   len: bytes to copy; 0 copies nothing (the other checks still apply).
 * Threads: thread-safe; holds the region's lock for the copy (a pause, resume
 * or swap of it waits).
 * CUDA: none (the file system for DISK).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or buf is NULL; ptr + len passes the end of
 *     the allocation.
 *   CMS_ERR_NOT_FOUND: ptr is in no allocation of ctx.
 *   CMS_ERR_NOT_SUPPORTED: the region's policy keeps no content.
 *   CMS_ERR_NOT_PAUSED: the allocation has no backup now.
 *   CMS_ERR_IO, CMS_ERR_OUT_OF_HOST_MEMORY: reading the DISK file failed (the
 *     message names the file and errno); buf is then undefined.
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
 * Threads: thread-safe.
 * CUDA: none.
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
 * Resume flag: asynchronous restore. The call returns once every allocation is
 * backed and mapped (its pointer usable) and the content restores are enqueued
 * on the library's streams; opts->stream is made to wait for them, so work
 * enqueued on it afterwards sees the restored content without a host wait.
 * Other streams must wait on that stream (or poll
 * cms_region_info.restore_pending). A copy that fails after the return is a
 * CUDA error of the device context. DISK regions are still read synchronously.
 * Not combinable with CMS_REGION_RELEASE_HOST nor CMS_REGION_HOST_PAGEABLE
 * (CMS_ERR_INVALID_ARGUMENT).
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
 * Threads: thread-safe.
 * CUDA: none.
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
 * cms_pause - releases the physical memory of every active region tagged tag.
 * Every region tagged tag (NULL: every region of ctx), on every device: waits
 * for GPU work (opts), saves the content per policy (HOST: to host backups;
 * DISK: to the region's file), then unmaps and releases the physical memory.
 * Addresses stay reserved: pointers keep their values, but the memory must not
 * be accessed until a resume. Regions already paused are skipped. Importers of
 * published regions (cms_exporter_publish) drop their mappings first; after
 * the resume they map the memory again at the same addresses. Since 1.3 a
 * frozen region's allocations whose retained backup still holds their content
 * are not copied (cms_region_freeze).
 *
 * All or nothing, across every device of the call: on failure every allocation
 * touched is mapped again with its content (one whose memory was released
 * already gets it back per policy: HOST and DISK content, ZERO zeros, DISCARD
 * undefined) and the status says what failed. If undoing fails too, the status
 * is CMS_ERR_ROLLBACK_FAILED and each allocation is left either mapped or
 * released with its backup: a region with an allocation left without memory
 * reads CMS_STATE_PAUSED, and the next resume completes it.
 *   tag:    a tag (CMS_TAG_MAX), or NULL for every region.
 *   opts:   NULL for the defaults (CMS_PAUSE_OPTIONS_INIT).
 *   result: NULL, or written on success; when its struct_size covers the 1.1
 *           fields, also on failure (1.0 fields 0, failed_device and each
 *           device's status saying what failed where).
 * Threads: thread-safe. Holds the locks of the regions it pauses for the whole
 * call (other calls naming them wait); allocations and frees in other regions
 * proceed. Progress callbacks come from the call's device threads.
 * CUDA: cuCtxSynchronize (or cuStreamSynchronize / cuEventSynchronize per
 * opts); cuMemcpyDtoHAsync for HOST and DISK; cuMemUnmap, cuMemRelease; on
 * rollback cuMemCreate, cuMemMap, cuMemSetAccess, cuMemcpyHtoDAsync.
 * CMS_REGION_VERIFY (since 1.3): cuMemcpyHtoDAsync, cuMemsetD8Async,
 * cuLaunchKernel, cuMemcpyDtoHAsync, into the kernel's scratch made with the
 * flag (no device memory taken).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; a bad tag; unknown opts->flags; a
 *     DISK region has no directory (cms_region_disk_dir_set).
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size or result->struct_size.
 *   CMS_ERR_NOT_FOUND: no region is tagged tag.
 *   CMS_ERR_ALREADY_PAUSED: every region of tag is paused (tag NULL: every
 *     region of ctx, or ctx has none); nothing changed.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: a host backup or a device thread could not be
 *     made.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: the rollback of a failed release found no
 *     device memory (a pause itself creates none, CMS_REGION_VERIFY included:
 *     see there).
 *   CMS_ERR_TIMEOUT, CMS_ERR_REFUSED (since 1.1): an importer did not drop its
 *     mappings in time (cms_exporter_options.revoke_timeout_ms), or refused;
 *     nothing was released.
 *   CMS_ERR_IO, CMS_ERR_PERMISSION (since 1.1): writing or syncing a DISK
 *     region's file failed (a full disk: CMS_ERR_IO, message "(disk full)";
 *     EACCES, EPERM, EROFS: CMS_ERR_PERMISSION).
 *   CMS_ERR_ROLLBACK_FAILED: see above.
 *   driver statuses.
 */
CMS_API cms_status cms_pause(cms_context *ctx, const char *tag, const cms_pause_options *opts,
			     cms_pause_result *result);

/*
 * cms_resume - backs every paused region tagged tag with new physical memory
 * at the same addresses.
 * Every region tagged tag (NULL: every region of ctx), on every device:
 * creates physical memory, maps it at the same addresses (read-write for the
 * region's device and its peer devices), restores the content per policy
 * (HOST: from the backup, kept for the next pause unless
 * CMS_REGION_RELEASE_HOST; DISK: from the file; ZERO: zeroed) and bumps each
 * region's epoch. Returns when the memory is ready for use from any stream or,
 * with CMS_RESUME_ASYNC, as soon as it is mapped, the restore ordered before
 * opts->stream. Regions already active are skipped. Importers of published
 * regions map the new memory at their same addresses. Since 1.3 a frozen
 * region (cms_region_freeze) is made read-only once its restore is done, and a
 * device with one is resumed synchronously even with CMS_RESUME_ASYNC.
 *
 * All or nothing, across every device of the call: on failure every allocation
 * touched stays paused with its backup. If undoing fails too, the status is
 * CMS_ERR_ROLLBACK_FAILED; the allocations keep their backups and the next
 * resume completes.
 *   tag:    a tag (CMS_TAG_MAX), or NULL for every region.
 *   opts:   NULL for the defaults (CMS_RESUME_OPTIONS_INIT).
 *   result: NULL, or written as cms_pause writes its result.
 * Threads: as cms_pause.
 * CUDA: cuMemCreate, cuMemMap, cuMemSetAccess; cuMemcpyHtoDAsync (HOST, DISK),
 * cuMemsetD8Async (ZERO), cuStreamSynchronize; cuEventRecord,
 * cuStreamWaitEvent with CMS_RESUME_ASYNC; CMS_REGION_VERIFY:
 * cuMemcpyHtoDAsync, cuMemsetD8Async, cuLaunchKernel, cuMemcpyDtoHAsync; on
 * rollback cuMemUnmap, cuMemRelease.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx is NULL; a bad tag; unknown opts->flags;
 *     CMS_RESUME_ASYNC with a region that has CMS_REGION_RELEASE_HOST,
 *     CMS_REGION_HOST_PAGEABLE or CMS_REGION_VERIFY.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size or result->struct_size.
 *   CMS_ERR_NOT_FOUND: no region is tagged tag.
 *   CMS_ERR_NOT_PAUSED: no region of tag is paused (tag NULL: no region of
 *     ctx, or ctx has none); nothing changed.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: cuMemCreate found no memory; retry when
 *     memory is free.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: bookkeeping, or a device thread.
 *   CMS_ERR_IO, CMS_ERR_PERMISSION (since 1.1): reading a DISK region's file
 *     failed.
 *   CMS_ERR_VERIFY_FAILED (since 1.3): a CMS_REGION_VERIFY allocation's
 *     restored content differs from what its pause checksummed (the message
 *     names the region's tag and the allocation's base); rolled back.
 *   CMS_ERR_ROLLBACK_FAILED: see above.
 *   driver statuses.
 */
CMS_API cms_status cms_resume(cms_context *ctx, const char *tag, const cms_resume_options *opts,
			      cms_resume_result *result);

/*
 * cms_region_pause - cms_pause of one region.
 *   region: the region to pause.
 *   opts, result: as for cms_pause.
 * Threads: as cms_pause; not concurrently with cms_region_destroy of region.
 * CUDA: as cms_pause.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; unknown opts->flags; a DISK
 *     region without a directory.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size or result->struct_size.
 *   CMS_ERR_NOT_FOUND: the region was destroyed.
 *   CMS_ERR_ALREADY_PAUSED: the region is paused; nothing changed.
 *   CMS_ERR_OUT_OF_HOST_MEMORY, CMS_ERR_OUT_OF_DEVICE_MEMORY, CMS_ERR_TIMEOUT,
 *     CMS_ERR_REFUSED, CMS_ERR_IO, CMS_ERR_PERMISSION,
 *     CMS_ERR_ROLLBACK_FAILED: as cms_pause.
 *   driver statuses.
 */
CMS_API cms_status cms_region_pause(cms_region *region, const cms_pause_options *opts,
				    cms_pause_result *result);

/*
 * cms_region_resume - cms_resume of one region.
 *   region: the region to resume.
 *   opts, result: as for cms_resume.
 * Threads: as cms_resume; not concurrently with cms_region_destroy of region.
 * CUDA: as cms_resume.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; unknown opts->flags;
 *     CMS_RESUME_ASYNC with CMS_REGION_RELEASE_HOST,
 *     CMS_REGION_HOST_PAGEABLE or CMS_REGION_VERIFY.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size or result->struct_size.
 *   CMS_ERR_NOT_FOUND: the region was destroyed.
 *   CMS_ERR_NOT_PAUSED: the region is active; nothing changed.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY, CMS_ERR_OUT_OF_HOST_MEMORY, CMS_ERR_IO,
 *     CMS_ERR_PERMISSION, CMS_ERR_VERIFY_FAILED, CMS_ERR_ROLLBACK_FAILED: as
 *     cms_resume.
 *   driver statuses.
 */
CMS_API cms_status cms_region_resume(cms_region *region, const cms_resume_options *opts,
				     cms_resume_result *result);

/* ---- Swap and progress (since 1.1) ------------------------------------------ */

/*
 * cms_swap (since 1.1) - pauses every active region tagged pause_tag and
 * resumes every paused region tagged resume_tag in one call.
 * The two directions' copies run at the same time on each device; when the
 * device is out of memory for the resume side while the pause side still has
 * memory to release, the resume side waits for the next release, so a device
 * that fits only one of the tags (plus one batch) still swaps them. Before any
 * copy it waits for GPU work as popts says (default: cuCtxSynchronize of the
 * devices of pause_tag), and importers of published regions drop their
 * mappings (as cms_pause).
 *
 * All or nothing: on failure the resume side is undone (resume_tag stays
 * paused with its backups), then the pause side rolled back as cms_pause does.
 * On success pause_tag's regions are paused and resume_tag's active, epoch
 * bumped, as cms_pause and cms_resume would leave them.
 *   pause_tag, resume_tag: different tags (CMS_TAG_MAX); every region with the
 *                          tag, on every device; regions already in the target
 *                          state are skipped.
 *   popts: NULL for the defaults; as for cms_pause.
 *   ropts: NULL for the defaults; as for cms_resume, without CMS_RESUME_ASYNC.
 *   presult, rresult: NULL, or what cms_pause / cms_resume would report for
 *                     their side; elapsed_ns is the whole swap's. On failure
 *                     written only when their struct_size covers the 1.1
 *                     fields.
 * Threads: thread-safe; holds the locks of the regions of both tags for the
 * call. Progress callbacks (operation "swap") come from the call's threads.
 * CUDA: as cms_pause and cms_resume; cuEventCreate, cuEventRecord,
 * cuEventSynchronize, cuEventDestroy.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx or a tag is NULL; a bad tag; the same tag
 *     twice; unknown flags; CMS_RESUME_ASYNC; a DISK region without a
 *     directory.
 *   CMS_ERR_STRUCT_SIZE: an options or result struct_size.
 *   CMS_ERR_NOT_FOUND: no region has one of the tags.
 *   CMS_ERR_ALREADY_PAUSED: every region of pause_tag is paused.
 *   CMS_ERR_NOT_PAUSED: every region of resume_tag is active.
 *   CMS_ERR_IO, CMS_ERR_PERMISSION: a DISK file's write, sync or read.
 *   CMS_ERR_OUT_OF_HOST_MEMORY: a host backup, or a thread of the call.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: cuMemCreate failed with nothing left to
 *     release.
 *   CMS_ERR_TIMEOUT, CMS_ERR_REFUSED: an importer, as for cms_pause.
 *   CMS_ERR_VERIFY_FAILED (since 1.3): as for cms_resume, on the resume side;
 *     both sides rolled back.
 *   CMS_ERR_ROLLBACK_FAILED: as for cms_pause and cms_resume; the next call
 *     completes.
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
 * cms_context_progress_set (since 1.1) - sets the progress callback of the
 * context's later pauses, resumes and swaps.
 * An operation already running keeps the callback it started with.
 *   fn:   the callback (cms_progress_fn); NULL clears it.
 *   user: passed to fn.
 * Ownership: user is borrowed: keep it valid while fn is set.
 * Threads: thread-safe.
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
 * cms_region_stats_get (since 1.2) - the region's identity and cumulative
 * counters (cms_region_stats), a consistent snapshot.
 *   stats: struct_size set by the caller (at least the 1.2 size); written up
 *          to it.
 * Threads: thread-safe; waits for a pause or resume of the region in progress;
 * not concurrently with cms_region_destroy of the region (cms_region_list has
 * no such restriction).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region or stats is NULL.
 *   CMS_ERR_STRUCT_SIZE: stats->struct_size.
 */
CMS_API cms_status cms_region_stats_get(cms_region *region, cms_region_stats *stats);

/*
 * cms_region_list (since 1.2) - a snapshot of each live region of ctx (as
 * cms_region_stats_get) into the caller's array, in creation order.
 * An entry is a copy, valid whatever happens to its region; use (tag, device)
 * with cms_region_find to act on one. A region destroyed during the call may
 * be left out, one created during it may or may not be listed.
 *   v:       cap entries, each with struct_size set by the caller, all the
 *            same (at least the 1.2 size); written up to it. NULL only when
 *            cap is 0.
 *   cap:     entries of v; 0 to ask only for total.
 *   written: NULL, or receives the entries written (<= cap).
 *   total:   NULL, or receives the regions of ctx when the call began (total >
 *            cap: a larger v is needed).
 * Ownership: v stays the caller's.
 * Threads: thread-safe, also against cms_region_destroy; waits for a pause or
 * resume of each region in turn. Not from a progress or control callback.
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
