/* SPDX-License-Identifier: MIT */
/*
 * ipc_internal.h - declarations shared by the files of src/ipc/ only
 * (tests/check_layers.py fails any file above ipc/ that opens it): deadlines
 * and limits, published regions, the poll loop's calls, the server's queue.
 * ipc.h declares what the layers above use; ipc_proto.h and ipc_sock.h are
 * reused by the tools.
 */
#ifndef CMS_IPC_INTERNAL_H
#define CMS_IPC_INTERNAL_H

#include "ipc.h"

/* Deadline of one message's I/O once it has started (a stuck peer costs at most this). */
#define CMS_IPC_IO_MS 5000
/* A connection that has not sent its request (exporter: HELLO; control socket: the request)
 * within this is closed. Servers read without waiting, so it costs nobody else time. */
#define CMS_IPC_IDLE_MS 5000
/* Connections a server keeps at most; past it, one that waits for its first request makes
 * room for a new one: one that has sent nothing, the oldest, else the one whose request has
 * made the least progress (ipc_server.c, victim()); when none waits, the rest wait in the
 * listen backlog. */
#define CMS_IPC_EXPORTER_CONNS 128

/* One region published by one exporter. */
struct cms_ipc_pub {
	cms_exporter *exp;
	struct cms_region *region; /* holds a reference (refs) */
	uint32_t access;	   /* CMS_IPC_ACCESS_* */
	bool waiting;		   /* a revocation waits for its importers; exp->lock */
	struct cms_ipc_pub *next;  /* in exp->pubs; exp->lock */
	struct cms_ipc_pub *rnext; /* in region->ipc; region lock */
};

static inline struct cms_ipc_region *cms_region_ipc(const struct cms_region *r)
{
	return cms_container_of(cms_region_engine(r), struct cms_ipc_region, below);
}

/* Copies a uid allow-list (n may be 0); *out NULL when n is 0. */
cms_status cms_ipc_copy_uids(const uint32_t *uids, uint32_t n, uint32_t **out);

/* Wakes a poll loop through its pipe (the write end). */
void cms_ipc_wake(int fd);

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
 * set (leave the loop).
 */
int cms_ipc_loop_wait(struct cms_ipc_loop *l, int fd);

/* Whether cms_ipc_loop_stop was called (any thread). */
bool cms_ipc_loop_stopping(struct cms_ipc_loop *l);

/* Sets stop, wakes the thread and joins it. Takes no lock: the thread may hold its owner's
 * lock while it waits on a socket, which the wake-up cancels (cms_ipc_recv_cancellable). */
void cms_ipc_loop_stop(struct cms_ipc_loop *l);

/* Closes the wake pipe if open (wake -1 after). */
void cms_ipc_loop_fini(struct cms_ipc_loop *l);

/* Empties the wake pipe (after poll saw it readable). */
void cms_ipc_loop_drain(struct cms_ipc_loop *l);

/* Lowers *timeout_ms (of poll, >= 0) to the time left until at (ms, cms_ipc_now_ms clock). */
void cms_ipc_timeout_until(int *timeout_ms, int64_t now, int64_t at);

/* Largest message a server takes from a client (its requests are small; larger ones are
 * refused at their header, before anything is allocated for them). */
#define CMS_IPC_SERVER_MSG_MAX (16u << 10)
/* Bytes queued for writing, all connections of a server together: past it, an owner defers
 * what it can (the exporter's grants) until peers have read. */
#define CMS_IPC_OUT_MAX (32u << 20)
/* After accept failed for want of descriptors or memory: first and longest pause. */
#define CMS_IPC_BACKOFF_MIN_MS 100
#define CMS_IPC_BACKOFF_MAX_MS 1000

/* A message queued for a connection: its bytes, what was written, descriptors (FDS only). */
struct cms_ipc_out {
	struct cms_ipc_out *next;
	uint8_t *buf;
	size_t len, off; /* off: the server thread's only */
	uint32_t nfds;
	int fds[]; /* the queue's: closed once sent, or with the connection */
};

/* Whether c is still served (neither closing nor dead). s->lock held. */
bool cms_ipc_conn_live(const struct cms_ipc_conn *c);

#endif /* CMS_IPC_INTERNAL_H */
