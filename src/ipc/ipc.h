/* SPDX-License-Identifier: MIT */
/* ipc.h - private declarations shared by ipc_export.c, ipc_import.c, control.c and ipc_loop.c. */
#ifndef CMS_IPC_H
#define CMS_IPC_H

#include "engine.h"
#include "ipc_proto.h"
#include "ipc_sock.h"

/* Deadline of one message's I/O once it has started (a stuck peer costs at most this). */
#define CMS_IPC_IO_MS 5000
/* A connection that has not sent its request (exporter: HELLO; control socket: the request)
 * within this is closed. Servers read without waiting, so it costs nobody else time. */
#define CMS_IPC_IDLE_MS 5000
/* Connections a server keeps at most; more wait in the listen backlog. */
#define CMS_IPC_EXPORTER_CONNS 128
#define CMS_IPC_CONTROL_CONNS 8
/* After accept failed for want of descriptors or memory: first and longest pause. */
#define CMS_IPC_BACKOFF_MIN_MS 100
#define CMS_IPC_BACKOFF_MAX_MS 1000
#define CMS_IPC_DEFAULT_TIMEOUT_MS 10000
/* Deadline of a whole grant (layout + every descriptor) after its first message. */
#define CMS_IPC_GRANT_MS 60000

/* One region published by one exporter. */
struct cms_ipc_pub {
	cms_exporter *exp;
	struct cms_region *region; /* holds a reference (refs) */
	uint32_t access;	   /* CMS_IPC_ACCESS_* */
	bool waiting;		   /* a revocation waits for its importers; exp->lock */
	struct cms_ipc_pub *next;  /* in exp->pubs; exp->lock */
	struct cms_ipc_pub *rnext; /* in region->ipc; region lock */
};

/* The ipc layer's part of a region (core.h says how the parts compose). */
struct cms_ipc_region {
	struct cms_store_region below;
	struct cms_ipc_pub *ipc; /* exporters publishing it (ipc_export.c); under its lock */
};

static inline struct cms_ipc_region *cms_region_ipc(const struct cms_region *r)
{
	return cms_container_of(cms_region_store(r), struct cms_ipc_region, below);
}

/*
 * cms_ipc_check_args - the checks an IPC constructor (cms_exporter_create,
 * cms_import_open, cms_control_create) starts with: ctx, path and out given,
 * then cms_check_fork. Sets the error. Returns CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT, CMS_ERR_FORKED.
 */
cms_status cms_ipc_check_args(cms_context *ctx, const char *path, const void *out);

/* The body of cms_*_options_init: copies init (size bytes) into opts. CMS_OK,
 * CMS_ERR_INVALID_ARGUMENT (NULL). */
cms_status cms_ipc_options_init(void *opts, const void *init, size_t size);

/* A socket path fits sun_path and is not empty. CMS_OK, CMS_ERR_INVALID_ARGUMENT (error set). */
cms_status cms_ipc_check_path(const char *path);

/* Copies a uid allow-list (n may be 0); *out NULL when n is 0. */
cms_status cms_ipc_copy_uids(const uint32_t *uids, uint32_t n, uint32_t **out);

/* Importers connected to the region through any exporter (region lock held). */
uint32_t cms_ipc_importers(struct cms_region *r);

/* Wakes a poll loop through its pipe (the write end). */
void cms_ipc_wake(int fd);

/*
 * The thread of an IPC object (exporter, import, control socket) and the pipe
 * that wakes its poll loop. stop is read and written under the owner's lock
 * (given to the calls below), thread only by its starter and stopper.
 */
struct cms_ipc_loop {
	int wake[2]; /* -1 when not open */
	pthread_t thread;
	bool stop;
};

/* Opens the wake pipe (non-blocking, close-on-exec). CMS_OK, CMS_ERR_IO (error set; wake -1). */
cms_status cms_ipc_loop_init(struct cms_ipc_loop *l);

/*
 * Starts fn(arg) on l's thread with every signal blocked (the application's
 * handlers stay its own). CMS_OK, CMS_ERR_IO ("cannot start the <what>'s thread").
 */
cms_status cms_ipc_loop_start(struct cms_ipc_loop *l, void *(*fn)(void *), void *arg,
			      const char *what);

/*
 * On l's thread: waits for input on fd or a wake-up. Returns 1 when fd is
 * readable, 0 when not (interrupted or woken: wait again), -1 once stop is
 * set (leave the loop). Takes lock to read stop.
 */
int cms_ipc_loop_wait(struct cms_ipc_loop *l, pthread_mutex_t *lock, int fd);

/* Sets stop under lock, wakes the thread and joins it. lock not held by the caller. */
void cms_ipc_loop_stop(struct cms_ipc_loop *l, pthread_mutex_t *lock);

/* Closes the wake pipe if open (wake -1 after). */
void cms_ipc_loop_fini(struct cms_ipc_loop *l);

/* Empties the wake pipe (after poll saw it readable). */
void cms_ipc_loop_drain(struct cms_ipc_loop *l);

/* When a server polls its listening socket (server thread's only). */
struct cms_ipc_accepting {
	int64_t until; /* backing off until then (cms_ipc_now_ms clock) */
	int ms;	       /* the last pause; 0: none */
};

/*
 * Whether to poll the listening socket now: fewer than max connections and
 * not backing off (then *timeout_ms is lowered to the pause's end).
 */
bool cms_ipc_accepting_now(struct cms_ipc_accepting *a, size_t conns, size_t max, int64_t now,
			   int *timeout_ms);

/* Records an accept's outcome: CMS_ERR_OUT_OF_HOST_MEMORY starts or doubles a pause, CMS_OK
 * ends them. */
void cms_ipc_accepted(struct cms_ipc_accepting *a, cms_status st);

/* Lowers *timeout_ms (of poll, >= 0) to the time left until at (ms, cms_ipc_now_ms clock). */
void cms_ipc_timeout_until(int *timeout_ms, int64_t now, int64_t at);

/* ---- ipc_export.c: hooks of pause/resume into IPC (region locks held) ---- */
/*
 * Before a pause releases anything: asks every importer of the published regions among
 * regions[0..n) to drop its mappings and waits for the acknowledgements. On failure (timeout,
 * refusal) the importers that already dropped theirs are granted the memory again and the
 * status names the importer that did not consent. CMS_OK at once when nothing is published.
 */
cms_status cms_ipc_revoke(cms_context *ctx, struct cms_region **regions, size_t n);
/* After a resume (or a failed pause): grants the memory again to every importer that dropped
 * it; they re-map at their same addresses. Never fails (problems reach the importers). */
void cms_ipc_regrant(cms_context *ctx, struct cms_region **regions, size_t n);
/* Before a published region is destroyed (its lock held): revokes its importers, best effort
 * (a failure is logged; the thread's error message is kept). */
void cms_ipc_region_gone(struct cms_region *r);

#endif /* CMS_IPC_H */
