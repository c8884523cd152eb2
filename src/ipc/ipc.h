/* SPDX-License-Identifier: MIT */
/* ipc.h - what the layers above use of ipc/ (the api's pause and resume hooks, control.c's
 * server); declarations shared only by ipc_export.c, ipc_import.c, ipc_server.c and ipc_loop.c
 * are in ipc_internal.h, which no file above ipc/ may open. */
#ifndef CMS_IPC_H
#define CMS_IPC_H

#include <poll.h>

#include "engine.h"
#include "ipc_proto.h"
#include "ipc_sock.h"

/* Connections the control socket keeps at most (ipc_internal.h: the exporter's, the rest). */
#define CMS_IPC_CONTROL_CONNS 8
#define CMS_IPC_DEFAULT_TIMEOUT_MS 10000
/* Deadline of a whole grant (layout + every descriptor) after its first message. */
#define CMS_IPC_GRANT_MS 60000

/* The ipc layer's part of a region (core.h says how the parts compose). */
struct cms_ipc_region {
	struct cms_engine_region below;
	struct cms_ipc_pub *ipc; /* exporters publishing it (ipc_export.c); under its lock */
};

/* The ipc layer's part of a context. */
struct cms_ipc_context {
	struct cms_engine_context below;
	atomic_int objects; /* exporters, importers, control sockets alive (ipc_*.c, control.c) */
};

static inline struct cms_ipc_context *cms_ctx_ipc(const cms_context *ctx)
{
	return cms_container_of(cms_ctx_engine(ctx), struct cms_ipc_context, below);
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

/* Importers connected to the region through any exporter (region lock held). */
uint32_t cms_ipc_importers(struct cms_region *r);

/*
 * The thread of an IPC object (exporter, import, control socket) and the pipe
 * that wakes its poll loop. stop is set once, by cms_ipc_loop_stop, before it
 * writes the pipe (so a thread that finds the pipe readable and then reads
 * stop sees it); thread is used only by its starter and stopper.
 */
struct cms_ipc_loop {
	int wake[2]; /* -1 when not open */
	pthread_t thread;
	atomic_bool stop;
};

/*
 * ---- ipc_server.c: the socket server of the exporter and the control socket ----
 * A listening socket, its thread, a poll loop over the connections,
 * per-connection receive state and an outgoing queue, deadlines, connection
 * limits and shutdown. See docs/ipc.md.
 *
 * Threads and locks. Only the server thread reads or writes a connection's
 * socket, and it never does so under s->lock: other threads queue messages
 * (cms_ipc_conn_queue, s->lock held) and the thread writes them as the peer
 * reads. A peer that stops reading costs only itself (it is closed when its
 * queue makes no progress within CMS_IPC_IO_MS).
 */

/* When a server polls its listening socket (server thread's only). */
struct cms_ipc_accepting {
	int64_t until; /* backing off until then (cms_ipc_now_ms clock) */
	int ms;	       /* the last pause; 0: none */
};

/* One connection: the server's part, first member of the owner's connection struct. */
struct cms_ipc_conn {
	int fd;
	pid_t pid;
	uid_t uid;
	int64_t since;	/* accepted (cms_ipc_now_ms) */
	uint64_t order; /* of its accept: smaller is older (the server thread's) */
	/* the server thread's only: the message under way and when its first byte came */
	struct cms_ipc_rx rx;
	int64_t msg_since; /* 0: none under way */
	/* s->lock: */
	struct cms_ipc_out *out, **out_tail;
	int64_t out_since; /* queue became non-empty, or last progress */
	bool closing;	   /* close once the queue is written (read no more) */
	bool dead;	   /* close at the next round (a write failed, a deadline passed) */
	struct cms_ipc_conn *next;
};

struct cms_ipc_server;

/* What an owner (exporter, control socket) plugs into the server. */
struct cms_ipc_server_ops {
	const char *what;  /* "exporter", "control socket": logs, the thread's name */
	const char *where; /* a refused uid "is not allowed <where> <path>" */
	size_t conn_size;  /* of the owner's connection struct (struct cms_ipc_conn first) */
	size_t max_conns;  /* kept at most; past it one still waiting for its request makes room */
	/*
	 * A whole message from c (server thread, s->lock not held; m freed by the server
	 * after). Returns true when c is to be closed once its queue is written.
	 */
	bool (*message)(struct cms_ipc_server *s, struct cms_ipc_conn *c, struct cms_ipc_msg *m);
	/* Whether c still waits for its first request (s->lock held): the idle deadline. */
	bool (*idle)(const struct cms_ipc_conn *c);
	/* Before each wait (server thread, no lock): work due. Returns true when some waits
	 * for a lock or for room and must be tried again shortly. NULL: none. */
	bool (*round)(struct cms_ipc_server *s);
	/* c is about to be freed (s->lock held): release the owner's part. NULL: nothing. */
	void (*closed)(struct cms_ipc_server *s, struct cms_ipc_conn *c);
};

struct cms_ipc_server {
	cms_context *ctx;
	const struct cms_ipc_server_ops *ops;
	void *owner;
	char path[CMS_IPC_PATH_MAX + 1];
	int lfd;
	struct cms_ipc_sockfile file; /* lfd's socket file */
	struct cms_ipc_loop loop;
	bool started;
	pthread_mutex_t lock; /* connections, their queues and flags; owners' state beside */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC; broadcast when a connection dies */
	uint32_t *uids;
	uint32_t nuids;
	struct cms_ipc_conn *conns;
	size_t nconns;
	size_t out_bytes; /* queued, all connections; lock */
	size_t out_fds;	  /* descriptors queued, all connections; lock */
	/* the server thread's only */
	uint64_t accepts; /* connections accepted so far: the next one's order */
	struct cms_ipc_accepting accepting;
	struct pollfd *pf;
	struct cms_ipc_conn **cs;
	size_t cap;
};

/*
 * cms_ipc_server_open - listens on path (cms_ipc_listen) with the uid
 * allow-list uids[0..n) (copied) for ops; the thread is not started yet.
 * Sets the error ("<what>: <why>"). Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT,
 * CMS_ERR_EXISTS, CMS_ERR_NOT_FOUND, CMS_ERR_IO, CMS_ERR_OUT_OF_HOST_MEMORY.
 */
cms_status cms_ipc_server_open(struct cms_ipc_server *s, cms_context *ctx, const char *path,
			       const struct cms_ipc_server_ops *ops, void *owner,
			       const uint32_t *uids, uint32_t n);

/* Starts the server thread. CMS_OK, CMS_ERR_IO. */
cms_status cms_ipc_server_start(struct cms_ipc_server *s);

/* Stops the thread (if started), closes every connection, the listening socket and its
 * file. After a successful cms_ipc_server_open, idempotent. */
void cms_ipc_server_close(struct cms_ipc_server *s);

/*
 * cms_ipc_conn_queue - queues m for c, written by the server thread as the
 * peer reads (never waits). fds (m->nfds of them, FDS only) become the
 * queue's in every case. s->lock held. Returns CMS_OK; CMS_ERR_DISCONNECTED
 * (c is closing or dead: nothing queued); or the encoder's failure (c is then
 * closed).
 */
cms_status cms_ipc_conn_queue(struct cms_ipc_server *s, struct cms_ipc_conn *c,
			      const struct cms_ipc_msg *m, int *fds);

/* Queues an ERROR (st, text) and closes c once it is written. s->lock held. */
void cms_ipc_conn_fail(struct cms_ipc_server *s, struct cms_ipc_conn *c, cms_status st,
		       const char *text);

/* Server thread: writes what c's queue has, as far as the socket takes it now. */
void cms_ipc_conn_flush(struct cms_ipc_server *s, struct cms_ipc_conn *c);

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
