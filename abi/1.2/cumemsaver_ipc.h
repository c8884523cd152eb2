/* SPDX-License-Identifier: MIT */
/*
 * cumemsaver_ipc.h - sharing pausable memory between processes, and the
 * control socket, of libcumemsaver (since 1.1).
 *
 * Part of the public C ABI: include <cumemsaver.h>, which includes this file;
 * its conventions (units, statuses, fork, threads, sized structs: the structs
 * here first appeared in 1.1) hold here too.
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
 * docs/ipc.md.
 *
 * Socket paths are NUL-terminated, 1..107 bytes, absolute or relative to the
 * current directory at the time of the call: an exporter or control socket
 * keeps the directory the path named then (an open descriptor of it), so a
 * later chdir() changes nothing, and its destroy removes its socket file only
 * while that file is still the one it created (same device and inode;
 * another file put at the path meanwhile stays). A listening socket's file is
 * created with mode 0600, and every peer's uid is checked with SO_PEERCRED
 * against an allow-list (default: this process's uid only).
 *
 * An existing file at a listening socket's path is replaced only when it is a
 * stale socket file: no socket of any process is bound to it (a stream and a
 * datagram connect to it are both refused with ECONNREFUSED). A socket file
 * bound by a live socket, listening or not listening yet, of any type, one
 * that cannot be probed (e.g. EACCES), or any other kind of file is left in
 * place and the call returns CMS_ERR_EXISTS.
 *
 * Destroy every exporter, import and control socket of a context before the
 * context (cms_context_destroy refuses otherwise).
 */
#ifndef CUMEMSAVER_IPC_H
#define CUMEMSAVER_IPC_H

#include "cumemsaver.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cms_exporter cms_exporter;
typedef struct cms_import cms_import;
typedef struct cms_control cms_control;

/* ---- Exporter -------------------------------------------------------------- */

/* Access granted to importers of a published region. */
#define CMS_ACCESS_READ 1u	/* map read-only (CU_MEM_ACCESS_FLAGS_PROT_READ) */
#define CMS_ACCESS_READWRITE 3u /* map read-write (CU_MEM_ACCESS_FLAGS_PROT_READWRITE) */

typedef struct cms_exporter_options {
	size_t struct_size; /* sizeof(cms_exporter_options) */
	/*
	 * uids allowed to import (SO_PEERCRED), copied. NULL / 0: this process's
	 * uid only. With a list, only the listed uids (add getuid() to keep your
	 * own).
	 */
	const uint32_t *allowed_uids;
	uint32_t nallowed_uids; /* entries of allowed_uids */
	/* How long a pause waits for every importer to drop its mappings (ms; 0: 10000). */
	uint32_t revoke_timeout_ms;
	uint64_t flags; /* reserved, must be 0 */
} cms_exporter_options;

#define CMS_EXPORTER_OPTIONS_INIT                           \
	{                                                   \
		sizeof(cms_exporter_options), NULL, 0, 0, 0 \
	}

/*
 * cms_exporter_options_init - fills *opts like CMS_EXPORTER_OPTIONS_INIT.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_exporter_options_init(cms_exporter_options *opts);

/*
 * cms_exporter_create - listens on the Unix socket path for importers and
 * starts the exporter's server thread.
 * The thread accepts importers, checks their uid, answers their requests and
 * never calls back into the application. Nothing is published yet
 * (cms_exporter_publish). A connection that asks for no region within 5 s, or
 * sends a message that is not whole within 5 s, is closed; at most 128
 * connections are kept, more wait in the listen backlog.
 *   path: socket path (1..107 bytes; see the top of this file).
 *   opts: NULL for the defaults (CMS_EXPORTER_OPTIONS_INIT).
 *   out:  receives the exporter; NULL on failure.
 * Ownership: *out is the caller's: free it with cms_exporter_destroy, before
 * the context. path and opts->allowed_uids are copied.
 * Threads: thread-safe. The server thread runs with all signals blocked.
 * CUDA: none in the call; the server thread calls cuMemExportToShareableHandle
 * for each grant (and cuStreamSynchronize for an asynchronous restore in
 * flight).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx, path or out is NULL; path is empty or too
 *     long; unknown flags; allowed_uids is NULL with nallowed_uids > 0.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_EXISTS: a file at path that is not a stale socket file (see the
 *     top of this file).
 *   CMS_ERR_IO: path's directory does not exist or cannot be opened; socket,
 *     bind, listen, pipe or thread creation failed.
 */
CMS_API cms_status cms_exporter_create(cms_context *ctx, const char *path,
				       const cms_exporter_options *opts, cms_exporter **out);

/*
 * cms_exporter_publish - offers region to importers, which ask for it by tag
 * (and device).
 * The region must have been created with CMS_REGION_SHAREABLE, in the
 * exporter's context. Each grant exports every allocation's physical handle as
 * a POSIX descriptor; the layout an importer maps is the region's allocations
 * at the grant, in address order. Allocations made or freed later reach
 * importers at their next grant (after a resume), which they report as
 * CMS_ERR_LAYOUT_CHANGED. From now on a pause or destroy of the region revokes
 * importers' mappings first (cms_pause).
 *   access: CMS_ACCESS_READ or CMS_ACCESS_READWRITE: the most an importer
 *           gets.
 * Ownership: the exporter keeps a reference to the region's bookkeeping until
 * it is destroyed; the region may still be destroyed (importers then lose it).
 * Threads: thread-safe; waits for a pause or resume of the region in progress.
 * CUDA: none (the grants: cms_exporter_create).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: exp or region is NULL; the region belongs to
 *     another context or is not CMS_REGION_SHAREABLE; unknown access.
 *   CMS_ERR_EXISTS: the region is published on this exporter already.
 *   CMS_ERR_NOT_FOUND: the region was destroyed.
 */
CMS_API cms_status cms_exporter_publish(cms_exporter *exp, cms_region *region, uint32_t access);

/*
 * cms_exporter_importers - the number of importers connected now, through all
 * published regions.
 *   count: receives the number.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: exp or count is NULL.
 */
CMS_API cms_status cms_exporter_importers(cms_exporter *exp, uint64_t *count);

/*
 * cms_exporter_destroy - stops publishing, closes every importer's connection
 * and removes the socket file.
 * Waits for a pause or resume of a published region in progress. Importers'
 * next calls return CMS_ERR_DISCONNECTED; memory they still map stays valid
 * for them until they close the import.
 *   exp: NULL is accepted (CMS_OK, nothing done).
 * Ownership: exp is freed.
 * Threads: not thread-safe against other calls on the same exporter.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 */
CMS_API cms_status cms_exporter_destroy(cms_exporter *exp);

/* ---- Importer -------------------------------------------------------------- */

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
 * (finish or wait for GPU work reading or writing it) and return CMS_OK (or
 * any non-negative value) to consent: the library then unmaps it. Return a
 * negative status to refuse: the exporter's pause fails with CMS_ERR_REFUSED
 * naming this importer. Called on the import's own thread; it may call
 * cms_import_info_get and cms_import_alloc_get but must not close the import.
 * epoch: the exporter's epoch of the memory mapped.
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
	/* The region's device in the exporter (the exporter's ordinal); -1: any (default). */
	int32_t exporter_device;
	uint64_t flags; /* CMS_IMPORT_* */
	/* uids the exporter may run as (SO_PEERCRED). NULL / 0: this process's uid only. */
	const uint32_t *allowed_uids;
	uint32_t nallowed_uids; /* entries of allowed_uids */
	uint32_t timeout_ms;	/* connect + first grant (ms; 0: 10000) */
	/* NULL: before unmapping, synchronize the local device's primary context. */
	cms_import_quiesce_fn quiesce_fn;
	cms_import_event_fn event_fn; /* may be NULL */
	void *user;		      /* passed to both callbacks */
	/* Shown in the exporter's messages: <= 63 bytes, no control characters; NULL: "". */
	const char *name;
} cms_import_options;

#define CMS_IMPORT_OPTIONS_INIT                                                          \
	{                                                                                \
		sizeof(cms_import_options), 0, -1, 0, NULL, 0, 0, NULL, NULL, NULL, NULL \
	}

/*
 * cms_import_options_init - fills *opts like CMS_IMPORT_OPTIONS_INIT.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_import_options_init(cms_import_options *opts);

/*
 * cms_import_open - connects to the exporter at path and maps the region
 * tagged tag at addresses of this process.
 * Checks the exporter's uid, reserves one address range for all the region's
 * allocations, imports and maps each (read-write or read-only as granted) for
 * opts->device. If the exporter's region is paused, the import starts
 * CMS_IMPORT_REVOKED and is mapped at its resume. A thread of the import then
 * serves the exporter's revocations and grants (all signals blocked; the
 * callbacks run on it). Blocks up to opts->timeout_ms.
 *   path: the exporter's socket path (1..107 bytes).
 *   tag:  the region's tag (CMS_TAG_MAX).
 *   opts: NULL for the defaults (CMS_IMPORT_OPTIONS_INIT).
 *   out:  receives the import; NULL on failure.
 * Ownership: *out is the caller's: free it with cms_import_close, before the
 * context. opts->user is borrowed for the import's life; opts->name is copied;
 * opts->allowed_uids is read during the call only.
 * Threads: thread-safe.
 * CUDA: cuMemAddressReserve, cuMemImportFromShareableHandle, cuMemMap,
 * cuMemSetAccess; at the device's first use what cms_region_create lists.
 * Later, on the import's thread: cuCtxSynchronize (without quiesce_fn),
 * cuMemUnmap, cuMemRelease, and the mapping calls at each grant.
 * Returns (on failure nothing is held):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx, path, tag or out is NULL; a bad tag; path
 *     is empty or too long; unknown flags; exporter_device below -1 or 64 or
 *     more; a bad name; allowed_uids is NULL with nallowed_uids > 0.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_NOT_FOUND: nothing listens at path, or the exporter publishes no
 *     such region.
 *   CMS_ERR_PERMISSION: the exporter refused our uid, or its uid is not
 *     allowed.
 *   CMS_ERR_TIMEOUT: no answer within opts->timeout_ms.
 *   CMS_ERR_DISCONNECTED: the exporter closed the connection.
 *   CMS_ERR_PROTOCOL: a malformed or unexpected message.
 *   CMS_ERR_IO: a socket call failed.
 *   CMS_ERR_NOT_SUPPORTED: the exporter's granularity does not fit the local
 *     device (or as cms_region_create for opts->device).
 *   CMS_ERR_INTERNAL: the exporter failed to grant and reported it (it may
 *     report CMS_ERR_DRIVER so too).
 *   driver statuses: opts->device as cms_region_create; mapping
 *     (CMS_ERR_OUT_OF_DEVICE_MEMORY: no address space).
 */
CMS_API cms_status cms_import_open(cms_context *ctx, const char *path, const char *tag,
				   const cms_import_options *opts, cms_import **out);

/*
 * cms_import_close - stops the import's thread, unmaps the memory, releases
 * the imported handles and the address range and closes the connection.
 * The caller must have finished GPU work on the memory.
 *   imp: NULL is accepted (CMS_OK, nothing done).
 * Ownership: imp is freed, also on failure (the message then names what could
 * not be undone).
 * Threads: not thread-safe against other calls on the same import; not from
 * the import's callbacks.
 * CUDA: cuMemUnmap, cuMemRelease, cuMemAddressFree.
 * Returns:
 *   CMS_OK
 *   driver statuses.
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
 * cms_import_info_get - a snapshot of the import's state (cms_import_info), in
 * every state.
 *   info: struct_size set by the caller; written up to it.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: imp or info is NULL.
 *   CMS_ERR_STRUCT_SIZE: info->struct_size.
 */
CMS_API cms_status cms_import_info_get(cms_import *imp, cms_import_info *info);

/*
 * cms_import_alloc_get - the local device pointer and size of the index-th
 * allocation of the layout.
 * Allocations are in the exporter's address order. The pointer stays the same
 * for the life of the import, across revocations; the memory is accessible
 * while the state is CMS_IMPORT_MAPPED.
 *   index: 0 .. cms_import_info.allocations - 1.
 *   ptr:   receives the device pointer; may be NULL.
 *   size:  receives the size in bytes; may be NULL.
 * Ownership: the memory belongs to the import (valid until cms_import_close).
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: imp is NULL; index is out of range.
 *   CMS_ERR_DISCONNECTED, CMS_ERR_PROTOCOL, CMS_ERR_TIMEOUT: the exporter is
 *     gone (closed or exited; broke the protocol; stopped answering).
 *   CMS_ERR_LAYOUT_CHANGED: the exporter's layout changed: close and import
 *     again.
 *   CMS_ERR_NOT_SUPPORTED: mapping the last grant failed (state
 *     CMS_IMPORT_FAILED; cms_import_info.error holds this status).
 *   driver statuses: likewise, for a grant whose mapping failed.
 */
CMS_API cms_status cms_import_alloc_get(cms_import *imp, uint64_t index, uint64_t *ptr,
					uint64_t *size);

/*
 * cms_import_translate - the local address of an exporter's address.
 *   exporter_ptr: an address inside one of the layout's allocations, as the
 *                 exporter sees it (cms_alloc's pointer plus an offset).
 *   ptr:          receives the local device pointer.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: imp or ptr is NULL.
 *   CMS_ERR_NOT_FOUND: exporter_ptr is in no allocation of the layout.
 *   CMS_ERR_DISCONNECTED, CMS_ERR_PROTOCOL, CMS_ERR_TIMEOUT,
 *     CMS_ERR_LAYOUT_CHANGED, CMS_ERR_NOT_SUPPORTED: as cms_import_alloc_get.
 *   driver statuses: as cms_import_alloc_get.
 */
CMS_API cms_status cms_import_translate(cms_import *imp, uint64_t exporter_ptr, uint64_t *ptr);

/* ---- Control socket -------------------------------------------------------
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
 * destroy the control socket). req is valid during the call only.
 */
typedef cms_status (*cms_control_fn)(void *user, const cms_control_request *req);

/* Control flag: without a callback, act on every pause/resume request (default: refuse). */
#define CMS_CONTROL_ALLOW_ALL 0x1ull

typedef struct cms_control_options {
	size_t struct_size; /* sizeof(cms_control_options) */
	uint64_t flags;	    /* CMS_CONTROL_* flags */
	cms_control_fn fn;  /* NULL: status only, unless CMS_CONTROL_ALLOW_ALL */
	void *user;	    /* passed to fn */
	/* uids allowed to connect, copied; NULL / 0: this process's uid only. */
	const uint32_t *allowed_uids;
	uint32_t nallowed_uids; /* entries of allowed_uids */
	uint32_t reserved;	/* 0 */
} cms_control_options;

#define CMS_CONTROL_OPTIONS_INIT                                       \
	{                                                              \
		sizeof(cms_control_options), 0, NULL, NULL, NULL, 0, 0 \
	}

/*
 * cms_control_options_init - fills *opts like CMS_CONTROL_OPTIONS_INIT.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: opts is NULL.
 */
CMS_API cms_status cms_control_options_init(cms_control_options *opts);

/*
 * cms_control_create - listens on the Unix socket path for control requests
 * and serves them on its own thread.
 * One request per connection, one at a time: STATUS (every region's
 * cms_region_info and importers), PAUSE tag and RESUME tag (cms_pause /
 * cms_resume of the context once the callback consents, with progress messages
 * to the requester). A request not whole within 5 s is closed with
 * CMS_ERR_TIMEOUT; at most 8 connections are kept.
 *   path: socket path (1..107 bytes), created as for cms_exporter_create.
 *   opts: NULL for the defaults (CMS_CONTROL_OPTIONS_INIT: status only).
 *   out:  receives the control socket; NULL on failure.
 * Ownership: *out is the caller's: free it with cms_control_destroy, before
 * the context. path and opts->allowed_uids are copied; opts->user is borrowed
 * for the control socket's life.
 * Threads: thread-safe. The thread runs with all signals blocked.
 * CUDA: none in the call; the thread makes the calls of cms_pause, cms_resume
 * and cms_region_info_get.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ctx, path or out is NULL; path is empty or too
 *     long; unknown flags or reserved not 0; allowed_uids is NULL with
 *     nallowed_uids > 0.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_EXISTS: as for cms_exporter_create.
 *   CMS_ERR_IO: path's directory does not exist or cannot be opened; socket,
 *     bind, listen, pipe or thread creation failed.
 */
CMS_API cms_status cms_control_create(cms_context *ctx, const char *path,
				      const cms_control_options *opts, cms_control **out);

/*
 * cms_control_destroy - stops the control socket's thread (after the request
 * in progress), closes the socket and removes its file.
 *   ctl: NULL is accepted (CMS_OK, nothing done).
 * Ownership: ctl is freed.
 * Threads: not thread-safe against other calls on the same control socket; not
 * from the control callback.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 */
CMS_API cms_status cms_control_destroy(cms_control *ctl);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_IPC_H */
