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
 * Fills *opts like CMS_EXPORTER_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_exporter_options_init(3).
 */
CMS_API cms_status cms_exporter_options_init(cms_exporter_options *opts);

/*
 * Listens on the Unix socket path for importers, with a server thread; *out is the caller's
 * (cms_exporter_destroy, before the context). Thread-safe. See cms_exporter_create(3).
 */
CMS_API cms_status cms_exporter_create(cms_context *ctx, const char *path,
				       const cms_exporter_options *opts, cms_exporter **out);

/*
 * Offers region to the exporter's importers, which ask for it by tag (and device). Thread-safe.
 * See cms_exporter_publish(3).
 */
CMS_API cms_status cms_exporter_publish(cms_exporter *exp, cms_region *region, uint32_t access);

/*
 * The number of importers connected now into *count. Thread-safe. See
 * cms_exporter_importers(3).
 */
CMS_API cms_status cms_exporter_importers(cms_exporter *exp, uint64_t *count);

/*
 * Stops publishing, closes every importer's connection, removes the socket file and frees exp
 * (NULL: nothing done). Not thread-safe against other calls on exp. See
 * cms_exporter_destroy(3).
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
 * Fills *opts like CMS_IMPORT_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_import_options_init(3).
 */
CMS_API cms_status cms_import_options_init(cms_import_options *opts);

/*
 * Connects to the exporter at path and maps the region tagged tag at addresses of this process;
 * *out is the caller's (cms_import_close, before the context). Thread-safe. See
 * cms_import_open(3).
 */
CMS_API cms_status cms_import_open(cms_context *ctx, const char *path, const char *tag,
				   const cms_import_options *opts, cms_import **out);

/*
 * Stops the import's thread, unmaps and releases what it imported, closes the connection and
 * frees imp, also on failure (NULL: nothing done). Not thread-safe against other calls on imp.
 * See cms_import_close(3).
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
 * A snapshot of the import's state into info (written up to info->struct_size). Thread-safe.
 * See cms_import_info_get(3).
 */
CMS_API cms_status cms_import_info_get(cms_import *imp, cms_import_info *info);

/*
 * The local device pointer and size (bytes) of the index-th allocation of the import's layout;
 * the memory belongs to the import. Thread-safe. See cms_import_alloc_get(3).
 */
CMS_API cms_status cms_import_alloc_get(cms_import *imp, uint64_t index, uint64_t *ptr,
					uint64_t *size);

/*
 * The local address of an exporter's address into *ptr. Thread-safe. See
 * cms_import_translate(3).
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
 * Fills *opts like CMS_CONTROL_OPTIONS_INIT. Thread-safe. Returns CMS_OK or
 * CMS_ERR_INVALID_ARGUMENT (opts NULL). See cms_control_options_init(3).
 */
CMS_API cms_status cms_control_options_init(cms_control_options *opts);

/*
 * Listens on the Unix socket path for control requests, served on its own thread; *out is the
 * caller's (cms_control_destroy, before the context). Thread-safe. See cms_control_create(3).
 */
CMS_API cms_status cms_control_create(cms_context *ctx, const char *path,
				      const cms_control_options *opts, cms_control **out);

/*
 * Stops the control socket's thread, closes the socket, removes its file and frees ctl (NULL:
 * nothing done). Not thread-safe against other calls on ctl. See cms_control_destroy(3).
 */
CMS_API cms_status cms_control_destroy(cms_control *ctl);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_IPC_H */
