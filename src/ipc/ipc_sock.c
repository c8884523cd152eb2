/* SPDX-License-Identifier: MIT */
/* ipc_sock.c - Unix domain socket transport of the IPC messages (see ipc_sock.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc_sock.h"

int64_t cms_ipc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fill_addr(struct sockaddr_un *a, const char *path)
{
	size_t n = path ? strlen(path) : 0;

	if (!n || n > CMS_IPC_PATH_MAX)
		return -1;
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path, path, n);
	return 0;
}

/* Waits for events on fd until deadline, or until cancel (< 0: none) is readable. CMS_OK:
 * ready; CMS_ERR_TIMEOUT; CMS_ERR_DISCONNECTED (cancelled); CMS_ERR_IO. */
static cms_status wait_fd(int fd, short events, int cancel, int64_t deadline, char *why,
			  size_t whylen)
{
	struct pollfd p[2] = { { fd, events, 0 }, { cancel, POLLIN, 0 } };
	int64_t left;
	int rc;

	for (;;) {
		left = deadline < 0 ? -1 : deadline - cms_ipc_now_ms();
		if (deadline >= 0 && left < 0)
			left = 0;
		rc = poll(p, 2, left > 600000 ? 600000 : (int)left);
		if (rc > 0 && p[1].revents)
			return cms_ipc_fail(CMS_ERR_DISCONNECTED, why, whylen,
					    "cancelled: the connection is being closed");
		if (rc > 0)
			return CMS_OK;
		if (rc == 0 && deadline >= 0 && cms_ipc_now_ms() >= deadline)
			return cms_ipc_fail(CMS_ERR_TIMEOUT, why, whylen,
					    "no answer before the deadline");
		if (rc < 0 && errno != EINTR)
			return cms_ipc_fail(CMS_ERR_IO, why, whylen, "poll: %s", strerror(errno));
	}
}

/*
 * Whether the socket file at a may be replaced: only when no socket is bound
 * to it any more. A stream connect that is refused does not tell (a socket
 * bound but not listening yet refuses too); a datagram connect does: the
 * kernel answers ECONNREFUSED only when no socket at all is bound to the
 * file's inode, and EPROTOTYPE (or success) when one of any type is.
 * Returns CMS_OK (stale, or gone), CMS_ERR_EXISTS, CMS_ERR_IO.
 */
static cms_status check_stale(const struct sockaddr_un *a, const char *path, char *why,
			      size_t whylen)
{
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int probe = socket(AF_UNIX, types[i] | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e;

		if (probe < 0)
			return cms_ipc_fail(CMS_ERR_IO, why, whylen, "socket: %s", strerror(errno));
		e = connect(probe, (const struct sockaddr *)a, sizeof(*a)) ? errno : 0;
		close(probe);
		if (e == ENOENT)
			return CMS_OK; /* gone meanwhile */
		if (e == ECONNREFUSED)
			continue;
		if (!e || e == EAGAIN || e == EINPROGRESS || e == EPROTOTYPE)
			return cms_ipc_fail(CMS_ERR_EXISTS, why, whylen,
					    "%s is in use by another process%s", path,
					    i ? " (bound, not listening yet)" : "");
		return cms_ipc_fail(CMS_ERR_EXISTS, why, whylen,
				    "%s exists and cannot be probed (connect: %s): not replaced",
				    path, strerror(e));
	}
	return CMS_OK;
}

void cms_ipc_unlink(struct cms_ipc_sockfile *sf)
{
	struct stat sb;

	if (sf->dirfd < 0)
		return;
	if (!fstatat(sf->dirfd, sf->base, &sb, AT_SYMLINK_NOFOLLOW) && sb.st_dev == sf->dev &&
	    sb.st_ino == sf->ino)
		unlinkat(sf->dirfd, sf->base, 0);
	close(sf->dirfd);
	sf->dirfd = -1;
}

/* Opens path's directory (O_PATH) into sf and copies its last component. */
static cms_status open_dir(const char *path, struct cms_ipc_sockfile *sf, char *why, size_t whylen)
{
	const char *slash = strrchr(path, '/');
	char dir[CMS_IPC_PATH_MAX + 1];

	if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof(dir), ".");
	snprintf(sf->base, sizeof(sf->base), "%s", slash ? slash + 1 : path);
	if (!sf->base[0])
		return cms_ipc_fail(CMS_ERR_INVALID_ARGUMENT, why, whylen,
				    "socket path %s names a directory", path);
	sf->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sf->dirfd < 0) /* also a missing one: the 1.1 status lists have no NOT_FOUND */
		return cms_ipc_fail(CMS_ERR_IO, why, whylen, "directory of %s: %s", path,
				    strerror(errno));
	return CMS_OK;
}

cms_status cms_ipc_listen(const char *path, int *lfd, struct cms_ipc_sockfile *sf, char *why,
			  size_t whylen)
{
	struct sockaddr_un a;
	struct stat sb, now;
	cms_status st;
	int fd;

	*lfd = -1;
	sf->dirfd = -1;
	if (fill_addr(&a, path))
		return cms_ipc_fail(CMS_ERR_INVALID_ARGUMENT, why, whylen,
				    "socket path is empty or longer than %d bytes",
				    CMS_IPC_PATH_MAX);
	st = open_dir(path, sf, why, whylen);
	if (st)
		return st;
	if (!lstat(path, &sb)) {
		if (!S_ISSOCK(sb.st_mode))
			return cms_ipc_fail(CMS_ERR_EXISTS, why, whylen,
					    "%s exists and is not a socket", path);
		st = check_stale(&a, path, why, whylen);
		if (st)
			goto err_dir;
		/* only the stale file probed, not one another process put there meanwhile */
		if (!lstat(path, &now) && (now.st_dev != sb.st_dev || now.st_ino != sb.st_ino)) {
			st = cms_ipc_fail(CMS_ERR_EXISTS, why, whylen,
					  "%s was replaced while probed", path);
			goto err_dir;
		}
		if (unlink(path) && errno != ENOENT) {
			st = cms_ipc_fail(CMS_ERR_IO, why, whylen, "unlink %s: %s", path,
					  strerror(errno));
			goto err_dir;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		st = cms_ipc_fail(CMS_ERR_IO, why, whylen, "socket: %s", strerror(errno));
		goto err_dir;
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = errno;

		st = cms_ipc_fail(e == EADDRINUSE ? CMS_ERR_EXISTS : CMS_ERR_IO, why, whylen,
				  "bind %s: %s", path, strerror(e));
		goto err_socket;
	}
	/* the inode bound: the only file cms_ipc_unlink removes */
	if (fstatat(sf->dirfd, sf->base, &sb, AT_SYMLINK_NOFOLLOW)) {
		st = cms_ipc_fail(CMS_ERR_IO, why, whylen, "stat %s: %s", path, strerror(errno));
		goto err_socket;
	}
	sf->dev = sb.st_dev;
	sf->ino = sb.st_ino;
	/* The uid check (SO_PEERCRED) is the guard; the mode keeps others from connecting. */
	if (fchmodat(sf->dirfd, sf->base, 0600, 0) || listen(fd, 64)) {
		st = cms_ipc_fail(CMS_ERR_IO, why, whylen, "chmod/listen %s: %s", path,
				  strerror(errno));
		goto err_unlink;
	}
	*lfd = fd;
	return CMS_OK;

err_unlink:
	cms_ipc_unlink(sf);
err_socket:
	close(fd);
err_dir:
	if (sf->dirfd >= 0)
		close(sf->dirfd);
	sf->dirfd = -1;
	return st;
}

cms_status cms_ipc_connect(const char *path, int *out, char *why, size_t whylen)
{
	struct sockaddr_un a;
	int fd;

	*out = -1;
	if (fill_addr(&a, path))
		return cms_ipc_fail(CMS_ERR_INVALID_ARGUMENT, why, whylen,
				    "socket path is empty or longer than %d bytes",
				    CMS_IPC_PATH_MAX);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cms_ipc_fail(CMS_ERR_IO, why, whylen, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = errno;

		close(fd);
		return cms_ipc_fail(e == ENOENT || e == ECONNREFUSED ? CMS_ERR_NOT_FOUND :
								       CMS_ERR_IO,
				    why, whylen, "connect %s: %s", path, strerror(e));
	}
	if (fcntl(fd, F_SETFL, O_NONBLOCK)) {
		close(fd);
		return cms_ipc_fail(CMS_ERR_IO, why, whylen, "fcntl: %s", strerror(errno));
	}
	*out = fd;
	return CMS_OK;
}

cms_status cms_ipc_peer(int fd, pid_t *pid, uid_t *uid, char *why, size_t whylen)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || len != sizeof(cred))
		return cms_ipc_fail(CMS_ERR_IO, why, whylen, "SO_PEERCRED: %s", strerror(errno));
	*pid = cred.pid;
	*uid = cred.uid;
	return CMS_OK;
}

int cms_ipc_uid_allowed(uid_t uid, const uint32_t *list, size_t n)
{
	size_t i;

	if (!n)
		return uid == getuid();
	for (i = 0; i < n; i++)
		if (list[i] == (uint32_t)uid)
			return 1;
	return 0;
}

cms_status cms_ipc_accept(int lfd, const uint32_t *list, size_t n, const char *where,
			  const char *path, int *fd, pid_t *pid, uid_t *uid, char *why,
			  size_t whylen)
{
	char text[256];
	cms_status st;
	int c;

	*fd = -1;
	c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (c < 0) {
		int e = errno;

		return cms_ipc_fail(e == EAGAIN || e == EWOULDBLOCK ? CMS_ERR_NOT_FOUND :
				    e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM ?
								      CMS_ERR_OUT_OF_HOST_MEMORY :
								      CMS_ERR_IO,
				    why, whylen, "accept: %s", strerror(e));
	}
	st = cms_ipc_peer(c, pid, uid, why, whylen);
	if (st)
		goto err_close;
	if (!cms_ipc_uid_allowed(*uid, list, n)) {
		snprintf(text, sizeof(text), "uid %u is not allowed %s %s", (unsigned)*uid, where,
			 path);
		cms_ipc_send_error(c, CMS_ERR_PERMISSION, text);
		st = cms_ipc_fail(CMS_ERR_PERMISSION, why, whylen, "%s", text);
		goto err_close;
	}
	*fd = c;
	return CMS_OK;

err_close:
	close(c);
	return st;
}

cms_status cms_ipc_send_some(int fd, const uint8_t *buf, size_t len, size_t *off, const int *fds,
			     uint32_t nfds, char *why, size_t whylen)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * CMS_IPC_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh;
	struct iovec iov;
	ssize_t n;

	while (*off < len) {
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = (uint8_t *)buf + *off;
		iov.iov_len = len - *off;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (!*off && nfds) { /* the descriptors go with the first byte */
			struct cmsghdr *c;

			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return CMS_OK;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno != EPIPE && errno != ECONNRESET ?
			       cms_ipc_fail(CMS_ERR_IO, why, whylen, "sendmsg: %s",
					    strerror(errno)) :
			       cms_ipc_fail(CMS_ERR_DISCONNECTED, why, whylen,
					    "the peer closed the socket");
	}
	return CMS_OK;
}

cms_status cms_ipc_send_cancellable(int fd, int cancel, const struct cms_ipc_msg *m, const int *fds,
				    int64_t deadline, char *why, size_t whylen)
{
	uint32_t nfds = m->type == CMS_IPC_FDS ? m->nfds : 0;
	uint8_t *buf;
	size_t len, off = 0;
	cms_status st;

	st = cms_ipc_encode(m, &buf, &len, why, whylen);
	if (st)
		return st;
	for (;;) {
		st = cms_ipc_send_some(fd, buf, len, &off, fds, nfds, why, whylen);
		if (st || off == len)
			break;
		st = wait_fd(fd, POLLOUT, cancel, deadline, why, whylen);
		if (st)
			break;
	}
	free(buf);
	return st;
}

cms_status cms_ipc_send(int fd, const struct cms_ipc_msg *m, const int *fds, int64_t deadline,
			char *why, size_t whylen)
{
	return cms_ipc_send_cancellable(fd, -1, m, fds, deadline, why, whylen);
}

void cms_ipc_rx_init(struct cms_ipc_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->need = CMS_IPC_HEADER_SIZE;
}

void cms_ipc_rx_free(struct cms_ipc_rx *rx)
{
	enum cms_ipc_rx_fds take = rx->take;
	uint32_t max = rx->max_payload;
	size_t i;

	for (i = 0; i < rx->nfds; i++)
		close(rx->fds[i]);
	free(rx->buf);
	cms_ipc_rx_init(rx);
	rx->max_payload = max;
	rx->take = take;
}

/*
 * Takes the descriptors of one recvmsg as rx->take says. They must come with the read of the
 * message's first byte (first: this recvmsg took it), at most CMS_IPC_MAX_FDS; any other, one
 * of a control message the kernel truncated (MSG_CTRUNC: also every one sent where rx takes
 * none), or another kind of control message fails the message. What is not kept is closed at
 * once. Returns CMS_OK or CMS_ERR_PROTOCOL.
 */
static cms_status take_fds(struct cms_ipc_rx *rx, struct msghdr *mh, bool first, char *why,
			   size_t whylen)
{
	bool bad = mh->msg_flags & MSG_CTRUNC;
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t k, cnt;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = true;
			continue;
		}
		cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int v;

			memcpy(&v, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (!first || ++rx->came > CMS_IPC_MAX_FDS)
				bad = true;
			if (bad || rx->take != CMS_IPC_RX_FDS_KEEP)
				close(v);
			else
				rx->fds[rx->nfds++] = v;
		}
	}
	if (!bad)
		return CMS_OK;
	if (rx->take == CMS_IPC_RX_FDS_NONE)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "descriptors were sent with a message; none are taken here");
	return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
			    "descriptors came after a message's first read, or more than %u",
			    CMS_IPC_MAX_FDS);
}

/* Room for the next bytes of the message: the buffer grows with what arrives (at most
 * doubling, from CMS_IPC_RX_CHUNK), never to more than the message. */
static cms_status rx_grow(struct cms_ipc_rx *rx, char *why, size_t whylen)
{
	size_t cap = rx->cap ? rx->cap * 2 : CMS_IPC_RX_CHUNK;
	uint8_t *nb;

	if (cap > rx->need)
		cap = rx->need;
	nb = realloc(rx->buf, cap);
	if (!nb)
		return cms_ipc_fail(CMS_ERR_OUT_OF_HOST_MEMORY, why, whylen,
				    "cannot allocate %zu bytes", cap);
	if (!rx->buf)
		memcpy(nb, rx->hdr, CMS_IPC_HEADER_SIZE);
	rx->buf = nb;
	rx->cap = cap;
	return CMS_OK;
}

/* The header is in: checks it and makes room for the first bytes of the payload. */
static cms_status rx_header(struct cms_ipc_rx *rx, char *why, size_t whylen)
{
	uint32_t payload, announced;
	uint16_t type;
	cms_status st;

	st = cms_ipc_decode_header(rx->hdr, &type, &payload, &announced, why, whylen);
	if (st)
		return st;
	if (rx->max_payload && payload > rx->max_payload)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "a message of %u bytes (type %u); at most %u are taken here",
				    payload, type, rx->max_payload);
	/* every descriptor came with the first byte: none more can come */
	if (announced != rx->came)
		return cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
				    "header announces %u descriptors, %zu came with it", announced,
				    rx->came);
	rx->need = CMS_IPC_HEADER_SIZE + (size_t)payload;
	return rx_grow(rx, why, whylen);
}

/* The whole message is in: decodes it and hands its descriptors out (to out, or closed). */
static cms_status rx_done(struct cms_ipc_rx *rx, struct cms_ipc_msg *m, int *out, char *why,
			  size_t whylen)
{
	cms_status st;

	st = cms_ipc_decode(rx->buf, rx->need, rx->came, m, why, whylen);
	if (st)
		return st;
	if (out) {
		memcpy(out, rx->fds, rx->nfds * sizeof(*out));
		rx->nfds = 0;
	}
	cms_ipc_rx_free(rx); /* closes what was not handed out */
	return CMS_OK;
}

cms_status cms_ipc_rx_read(int fd, struct cms_ipc_rx *rx, struct cms_ipc_msg *m, int *out,
			   int *done, char *why, size_t whylen)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * CMS_IPC_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	cms_status st;

	*done = 0;
	memset(m, 0, sizeof(*m));
	for (;;) {
		uint8_t *dst = rx->buf ? rx->buf : rx->hdr;
		struct iovec iov = { dst + rx->have, (rx->buf ? rx->cap : rx->need) - rx->have };
		bool first = !rx->have;
		struct msghdr mh;
		ssize_t got;

		if (rx->buf && rx->have == rx->cap && rx->cap < rx->need) {
			st = rx_grow(rx, why, whylen);
			if (st)
				goto err_free;
			continue;
		}
		if (rx->have == rx->need) {
			if (!rx->buf && rx->need == CMS_IPC_HEADER_SIZE) {
				st = rx_header(rx, why, whylen);
				if (st)
					goto err_free;
				continue;
			}
			st = rx_done(rx, m, out, why, whylen);
			if (st)
				goto err_free;
			*done = 1;
			return CMS_OK;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (rx->take != CMS_IPC_RX_FDS_NONE) {
			mh.msg_control = ctl.buf;
			mh.msg_controllen = sizeof(ctl.buf);
		}
		got = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return CMS_OK; /* the rest later */
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			st = errno == ECONNRESET ? cms_ipc_fail(CMS_ERR_DISCONNECTED, why, whylen,
								"the peer reset the connection") :
						   cms_ipc_fail(CMS_ERR_IO, why, whylen,
								"recvmsg: %s", strerror(errno));
			goto err_free;
		}
		st = take_fds(rx, &mh, first, why, whylen);
		if (st)
			goto err_free;
		if (got == 0) {
			st = !rx->have ? cms_ipc_fail(CMS_ERR_DISCONNECTED, why, whylen,
						      "the peer closed the connection") :
					 cms_ipc_fail(CMS_ERR_PROTOCOL, why, whylen,
						      "the peer closed inside a message");
			goto err_free;
		}
		rx->have += (size_t)got;
	}

err_free:
	cms_ipc_rx_free(rx);
	return st;
}

cms_status cms_ipc_recv_cancellable(int fd, int cancel, struct cms_ipc_msg *m, int *out,
				    int64_t deadline, char *why, size_t whylen)
{
	struct cms_ipc_rx rx;
	cms_status st;
	int done;

	cms_ipc_rx_init(&rx);
	rx.take = out ? CMS_IPC_RX_FDS_KEEP : CMS_IPC_RX_FDS_CLOSE;
	for (;;) {
		st = cms_ipc_rx_read(fd, &rx, m, out, &done, why, whylen);
		if (st || done)
			return st;
		st = wait_fd(fd, POLLIN, cancel, deadline, why, whylen);
		if (st) {
			cms_ipc_rx_free(&rx);
			return st;
		}
	}
}

cms_status cms_ipc_recv(int fd, struct cms_ipc_msg *m, int *out, int64_t deadline, char *why,
			size_t whylen)
{
	return cms_ipc_recv_cancellable(fd, -1, m, out, deadline, why, whylen);
}

void cms_ipc_send_error(int fd, cms_status st, const char *text)
{
	struct cms_ipc_msg m;

	cms_ipc_msg_error(&m, st, text);
	cms_ipc_send(fd, &m, NULL, cms_ipc_now_ms() + 200, NULL, 0);
}
