/* SPDX-License-Identifier: MIT */
/*
 * ipc_sock.h - Unix domain socket transport of the IPC messages: listen,
 * connect, peer credentials, and whole messages with descriptors
 * (SCM_RIGHTS) under a deadline. Every socket is non-blocking and
 * close-on-exec; waits use poll(), so no call blocks past its deadline.
 * Self-contained like ipc_proto.h (also compiled into cmsctl and tests):
 * reasons go into a caller's buffer.
 */
#ifndef CMS_IPC_SOCK_H
#define CMS_IPC_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc_proto.h"

/* Longest socket path (sun_path less its NUL). */
#define CMS_IPC_PATH_MAX 107

/* Monotonic milliseconds. */
int64_t cms_ipc_now_ms(void);

/*
 * The socket file a listener created, named from the directory the path
 * meant at the call (an open descriptor of it), so that a later chdir()
 * cannot make its removal unlink another file.
 */
struct cms_ipc_sockfile {
	int dirfd; /* O_PATH of the path's directory; -1 when none */
	char base[CMS_IPC_PATH_MAX + 1];
	dev_t dev; /* the socket file's inode, as bound */
	ino_t ino;
};

/*
 * cms_ipc_unlink - removes the socket file sf names if it is still the inode
 * the listener bound (a file put there by someone else stays), and closes
 * sf->dirfd. Idempotent.
 */
void cms_ipc_unlink(struct cms_ipc_sockfile *sf);

/*
 * cms_ipc_listen - a listening socket at path, mode 0600, and in *sf what
 * cms_ipc_unlink needs to remove its file later. A stale socket file
 * (no socket of any process bound to it: a stream and a datagram connect are
 * both refused) is replaced; a socket file bound by a live socket, listening
 * or not yet, one that cannot be probed, or any other file is
 * CMS_ERR_EXISTS. Returns CMS_OK, CMS_ERR_INVALID_ARGUMENT (path too long),
 * CMS_ERR_EXISTS, CMS_ERR_IO.
 */
cms_status cms_ipc_listen(const char *path, int *lfd, struct cms_ipc_sockfile *sf, char *why,
			  size_t whylen);

/* cms_ipc_connect - connects to path. CMS_ERR_NOT_FOUND (no socket), CMS_ERR_IO. */
cms_status cms_ipc_connect(const char *path, int *fd, char *why, size_t whylen);

/* cms_ipc_peer - the peer's pid and uid (SO_PEERCRED). CMS_ERR_IO. */
cms_status cms_ipc_peer(int fd, pid_t *pid, uid_t *uid, char *why, size_t whylen);

/* Whether uid may connect: the n uids of list, or (n == 0) this process's uid only. */
int cms_ipc_uid_allowed(uid_t uid, const uint32_t *list, size_t n);

/*
 * cms_ipc_accept - accepts one connection on the listening socket lfd
 * (non-blocking, close-on-exec) and reads its peer's pid and uid. A peer
 * whose uid cms_ipc_uid_allowed refuses gets an ERROR (CMS_ERR_PERMISSION)
 * saying "uid U is not allowed <where> <path>" and is closed. On success
 * *fd is the caller's. Returns CMS_OK; CMS_ERR_NOT_FOUND (nothing waits:
 * stop accepting for now); CMS_ERR_OUT_OF_HOST_MEMORY (no descriptor or
 * memory left: EMFILE, ENFILE, ENOBUFS, ENOMEM; the connection stays
 * queued and the listening socket readable: back off before the next try);
 * CMS_ERR_PERMISSION (refused; why holds what the peer was told); CMS_ERR_IO
 * (accept4 failed otherwise, or SO_PEERCRED failed; closed: try the next).
 */
cms_status cms_ipc_accept(int lfd, const uint32_t *list, size_t n, const char *where,
			  const char *path, int *fd, pid_t *pid, uid_t *uid, char *why,
			  size_t whylen);

/*
 * cms_ipc_send - encodes and sends m with m->nfds descriptors fds (FDS only)
 * before deadline_ms (cms_ipc_now_ms() clock; < 0: no deadline). The
 * descriptors stay the caller's. Returns CMS_OK, CMS_ERR_TIMEOUT,
 * CMS_ERR_DISCONNECTED (EPIPE, ECONNRESET), CMS_ERR_INVALID_ARGUMENT,
 * CMS_ERR_OUT_OF_HOST_MEMORY, CMS_ERR_IO.
 */
cms_status cms_ipc_send(int fd, const struct cms_ipc_msg *m, const int *fds, int64_t deadline_ms,
			char *why, size_t whylen);

/*
 * cms_ipc_send_some - writes buf[*off, len) to fd without waiting, as far as
 * the socket takes it, advancing *off; nfds descriptors fds go with the first
 * byte (*off 0). Returns CMS_OK (*off == len: all written; else the socket is
 * full), CMS_ERR_DISCONNECTED (EPIPE, ECONNRESET), CMS_ERR_IO.
 */
cms_status cms_ipc_send_some(int fd, const uint8_t *buf, size_t len, size_t *off, const int *fds,
			     uint32_t nfds, char *why, size_t whylen);

/*
 * cms_ipc_recv - receives one whole message before deadline_ms and decodes
 * it into *m. Descriptors must arrive with the read that takes the message's
 * first byte (cms_ipc_send attaches them to it), as many as its header
 * announces: any others (more or fewer, with a later read, or truncated by
 * the kernel) fail the call at once, so a peer makes it hold at most the
 * announced number (CMS_IPC_MAX_FDS), and only until the message is whole or
 * refused. With fds (room for CMS_IPC_MAX_FDS) they
 * go there on success, their number in m->nfds, and belong to the caller;
 * with fds NULL (a receiver that takes none) each is closed as it arrives,
 * and m->nfds still tells how many came. On any failure every received
 * descriptor is closed. Returns CMS_OK, CMS_ERR_DISCONNECTED (orderly close
 * before a message), CMS_ERR_TIMEOUT (nothing or only part of a message
 * arrived), CMS_ERR_PROTOCOL (malformed; close the connection),
 * CMS_ERR_OUT_OF_HOST_MEMORY, CMS_ERR_IO.
 */
cms_status cms_ipc_recv(int fd, struct cms_ipc_msg *m, int *fds, int64_t deadline_ms, char *why,
			size_t whylen);

/*
 * cms_ipc_send_cancellable, cms_ipc_recv_cancellable - cms_ipc_send and
 * cms_ipc_recv that also stop waiting as soon as cancel is readable (the wake
 * pipe of a thread whose owner is closing; nothing is read from it; < 0:
 * none): CMS_ERR_DISCONNECTED ("cancelled"), what was received closed as on
 * any failure. They still send and receive what needs no wait.
 */
cms_status cms_ipc_send_cancellable(int fd, int cancel, const struct cms_ipc_msg *m, const int *fds,
				    int64_t deadline_ms, char *why, size_t whylen);
cms_status cms_ipc_recv_cancellable(int fd, int cancel, struct cms_ipc_msg *m, int *fds,
				    int64_t deadline_ms, char *why, size_t whylen);

/* What a receive state does with the descriptors that come with a message. */
enum cms_ipc_rx_fds {
	CMS_IPC_RX_FDS_KEEP,  /* held (at most the header's count) until handed out */
	CMS_IPC_RX_FDS_CLOSE, /* counted and closed as they arrive (a receiver that takes none) */
	/* read without a control buffer, so the kernel discards any; one that came fails the
	 * message at once (a server: no message to it carries descriptors) */
	CMS_IPC_RX_FDS_NONE,
};

/*
 * A message being received by a server without waiting: the bytes and the
 * descriptors of it gathered so far. The descriptors are the rx's until
 * handed out (as cms_ipc_recv's).
 */
struct cms_ipc_rx {
	uint8_t hdr[CMS_IPC_HEADER_SIZE];
	uint8_t *buf;		  /* header + payload received, once the header is in */
	size_t cap;		  /* of buf: grows with what arrives, up to need */
	size_t have;		  /* bytes of the message received (0: none started) */
	size_t need;		  /* CMS_IPC_HEADER_SIZE, then the whole message */
	uint32_t max_payload;	  /* larger messages are refused at the header; 0: the protocol's */
	enum cms_ipc_rx_fds take; /* kept by cms_ipc_rx_free, as max_payload */
	int fds[CMS_IPC_MAX_FDS]; /* CMS_IPC_RX_FDS_KEEP: those held */
	size_t nfds;		  /* held */
	size_t came;		  /* received with the message, held or not */
};

/* A message's buffer starts at this and grows with what arrives. */
#define CMS_IPC_RX_CHUNK (64u << 10)

/* An empty rx (max_payload 0, CMS_IPC_RX_FDS_KEEP). */
void cms_ipc_rx_init(struct cms_ipc_rx *rx);

/* Closes the descriptors rx holds and frees its buffer (empty after; max_payload and take
 * kept). */
void cms_ipc_rx_free(struct cms_ipc_rx *rx);

/*
 * cms_ipc_rx_read - reads what fd has now into rx, never waiting and never
 * past the end of the message, taking descriptors as rx->take says and as
 * cms_ipc_recv checks them. When the message is whole: decodes it into *m,
 * hands the descriptors held out (to fds, or closed when NULL), empties rx
 * for the next one and sets *done to 1; else *done is 0 and rx keeps what
 * came (rx->have > 0: a message is under way). Returns CMS_OK, or as
 * cms_ipc_recv (never CMS_ERR_TIMEOUT); after a failure rx is empty and
 * holds nothing.
 */
cms_status cms_ipc_rx_read(int fd, struct cms_ipc_rx *rx, struct cms_ipc_msg *m, int *fds,
			   int *done, char *why, size_t whylen);

/* Sends an ERROR message (best effort, short deadline). */
void cms_ipc_send_error(int fd, cms_status st, const char *text);

#endif /* CMS_IPC_SOCK_H */
