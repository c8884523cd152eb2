/* SPDX-License-Identifier: MIT */
/*
 * ipc_server.c - the socket server of the exporter and the control socket
 * (see ipc.h): accept with a connection limit and back-off, one poll
 * loop that reads every connection without waiting and writes their queues
 * as their peers read, deadlines, and shutdown.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ipc_internal.h"

/* ---- the outgoing queue ---- */

static void out_free(struct cms_ipc_out *o)
{
	uint32_t i;

	for (i = 0; i < o->nfds; i++)
		close(o->fds[i]);
	free(o->buf);
	free(o);
}

/* Marks c dead (s->lock held): the server thread closes it; waiters are told. */
static void conn_kill(struct cms_ipc_server *s, struct cms_ipc_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	shutdown(c->fd, SHUT_RDWR);
	pthread_cond_broadcast(&s->cond);
	cms_ipc_wake(s->loop.wake[1]);
}

bool cms_ipc_conn_live(const struct cms_ipc_conn *c)
{
	return !c->closing && !c->dead;
}

cms_status cms_ipc_conn_queue(struct cms_ipc_server *s, struct cms_ipc_conn *c,
			      const struct cms_ipc_msg *m, int *fds)
{
	uint32_t nfds = m->type == CMS_IPC_FDS ? m->nfds : 0, i;
	struct cms_ipc_out *o;
	char why[256];
	cms_status st;

	o = cms_ipc_conn_live(c) ? calloc(1, sizeof(*o) + nfds * sizeof(int)) : NULL;
	if (!o) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		if (!cms_ipc_conn_live(c))
			return CMS_ERR_DISCONNECTED;
		conn_kill(s, c);
		return CMS_ERR_OUT_OF_HOST_MEMORY;
	}
	o->nfds = nfds;
	if (nfds)
		memcpy(o->fds, fds, nfds * sizeof(int));
	st = cms_ipc_encode(m, &o->buf, &o->len, why, sizeof(why));
	if (st) {
		cms_log(s->ctx, CMS_LOG_WARN, "%s %s: pid %d: %s", s->ops->what, s->path,
			(int)c->pid, why);
		out_free(o);
		conn_kill(s, c);
		return st;
	}
	if (!c->out)
		c->out_since = cms_ipc_now_ms();
	*c->out_tail = o;
	c->out_tail = &o->next;
	s->out_bytes += o->len;
	s->out_fds += nfds;
	cms_ipc_wake(s->loop.wake[1]);
	return CMS_OK;
}

void cms_ipc_conn_fail(struct cms_ipc_server *s, struct cms_ipc_conn *c, cms_status st,
		       const char *text)
{
	struct cms_ipc_msg m;

	cms_ipc_msg_error(&m, st, text);
	cms_ipc_conn_queue(s, c, &m, NULL);
	c->closing = true;
}

/* Takes the head of c's queue off once written (s->lock held). */
static void out_pop(struct cms_ipc_server *s, struct cms_ipc_conn *c)
{
	struct cms_ipc_out *o = c->out;

	c->out = o->next;
	if (!c->out)
		c->out_tail = &c->out;
	s->out_bytes -= o->len;
	s->out_fds -= o->nfds;
	out_free(o);
}

void cms_ipc_conn_flush(struct cms_ipc_server *s, struct cms_ipc_conn *c)
{
	for (;;) {
		struct cms_ipc_out *o;
		char why[256];
		cms_status st;
		size_t off;
		bool sent;

		/* Only this thread takes entries off, so o stays valid without the lock. */
		pthread_mutex_lock(&s->lock);
		o = c->dead ? NULL : c->out;
		pthread_mutex_unlock(&s->lock);
		if (!o)
			return;
		off = o->off;
		st = cms_ipc_send_some(c->fd, o->buf, o->len, &o->off, o->fds, o->nfds, why,
				       sizeof(why));
		pthread_mutex_lock(&s->lock);
		if (st) {
			if (st != CMS_ERR_DISCONNECTED)
				cms_log(s->ctx, CMS_LOG_WARN, "%s %s: pid %d: %s", s->ops->what,
					s->path, (int)c->pid, why);
			conn_kill(s, c);
		} else if (o->off > off) {
			c->out_since = cms_ipc_now_ms();
		}
		sent = !st && o->off == o->len;
		if (sent)
			out_pop(s, c); /* frees o */
		pthread_mutex_unlock(&s->lock);
		if (!sent)
			return; /* failed, or the socket is full: POLLOUT brings the rest */
	}
}

/* ---- connections ---- */

/* Unlinks, closes and frees c; s->lock held. */
static void conn_drop(struct cms_ipc_server *s, struct cms_ipc_conn *c)
{
	struct cms_ipc_conn **pp;

	for (pp = &s->conns; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	s->nconns--;
	if (s->ops->closed)
		s->ops->closed(s, c);
	while (c->out)
		out_pop(s, c);
	cms_ipc_rx_free(&c->rx);
	close(c->fd);
	free(c);
	pthread_cond_broadcast(&s->cond); /* a revocation may wait for it */
}

/* When c is closed for want of progress (0: never); s->lock held. */
static int64_t conn_expiry(const struct cms_ipc_server *s, const struct cms_ipc_conn *c)
{
	int64_t at = 0;

	if (c->out)
		at = c->out_since + CMS_IPC_IO_MS;
	if (c->closing)
		return at ? at : 1; /* nothing left to write: now */
	if (s->ops->idle(c) && (!at || c->since + CMS_IPC_IDLE_MS < at))
		at = c->since + CMS_IPC_IDLE_MS;
	if (c->rx.have && (!at || c->msg_since + CMS_IPC_IO_MS < at))
		at = c->msg_since + CMS_IPC_IO_MS;
	return at;
}

/* Closes the connections past their expiry, and the dead; s->lock held. */
static void expire(struct cms_ipc_server *s, int64_t now)
{
	struct cms_ipc_conn *c, *next;

	for (c = s->conns; c; c = next) {
		int64_t at = conn_expiry(s, c);

		next = c->next;
		if (!c->dead && (!at || now < at))
			continue;
		if (!c->dead && !c->closing)
			cms_log(s->ctx, CMS_LOG_WARN, "%s %s: pid %d dropped: %s within %d ms",
				s->ops->what, s->path, (int)c->pid,
				c->out		? "its messages not read" :
				s->ops->idle(c) ? "no request" :
						  "a message not whole",
				c->out || !s->ops->idle(c) ? CMS_IPC_IO_MS : CMS_IPC_IDLE_MS);
		if (!c->dead && !c->out && !c->closing) {
			/* best effort, without waiting: the peer may want to know why */
			cms_ipc_conn_fail(s, c, CMS_ERR_TIMEOUT, "no whole message in time");
			continue; /* written by the next round, then closed */
		}
		conn_drop(s, c);
	}
}

/* Reads what c sent, without waiting, and hands a whole message to the owner. */
static void conn_read(struct cms_ipc_server *s, struct cms_ipc_conn *c)
{
	struct cms_ipc_msg m;
	char why[256];
	cms_status st;
	bool bye;
	int done;

	st = cms_ipc_rx_read(c->fd, &c->rx, &m, NULL, &done, why, sizeof(why));
	if (!st && !done) {
		if (c->rx.have && !c->msg_since)
			c->msg_since = cms_ipc_now_ms();
		return;
	}
	c->msg_since = 0;
	if (!st) {
		bye = s->ops->message(s, c, &m);
		cms_ipc_msg_free(&m);
		if (!bye)
			return;
	}
	pthread_mutex_lock(&s->lock);
	if (st == CMS_ERR_PROTOCOL)
		cms_ipc_conn_fail(s, c, st, why);
	else if (st)
		conn_kill(s, c);
	if (st && st != CMS_ERR_DISCONNECTED)
		cms_log(s->ctx, CMS_LOG_WARN, "%s %s: pid %d dropped: %s", s->ops->what, s->path,
			(int)c->pid, why);
	c->closing = true;
	pthread_mutex_unlock(&s->lock);
}

/* Whether c is still served and waits for its first request (s->lock held): it may be closed
 * to make room at the limit. */
static bool waits_first(struct cms_ipc_server *s, const struct cms_ipc_conn *c)
{
	return cms_ipc_conn_live(c) && s->ops->idle(c);
}

/*
 * Who is closed to make room (s->lock held; server thread: rx is its own): of the connections
 * that wait for their first request, other than spare, one that has sent nothing yet, the
 * oldest; else the one whose request has made the least progress (the oldest of equals).
 * A connection whose request is whole no longer waits (it is served). NULL when none.
 */
static struct cms_ipc_conn *victim(struct cms_ipc_server *s, const struct cms_ipc_conn *spare)
{
	struct cms_ipc_conn *c, *best = NULL;

	for (c = s->conns; c; c = c->next) {
		if (c == spare || !waits_first(s, c))
			continue;
		if (!best || c->rx.have < best->rx.have ||
		    (c->rx.have == best->rx.have && c->order < best->order))
			best = c;
	}
	return best;
}

/* Live connections (those closing or dead are on their way out); s->lock held. */
static size_t live_conns(struct cms_ipc_server *s)
{
	struct cms_ipc_conn *c;
	size_t n = 0;

	for (c = s->conns; c; c = c->next)
		n += cms_ipc_conn_live(c);
	return n;
}

/* Whether one more connection may come in: under the limit, or one can make room (victim);
 * and, counting those closing that still hold their descriptor, under twice the limit (else
 * a connect flood makes room without end); s->lock held. */
static bool has_room(struct cms_ipc_server *s)
{
	if (s->nconns >= 2 * s->ops->max_conns)
		return false;
	return live_conns(s) < s->ops->max_conns || victim(s, NULL);
}

static bool over_limit(struct cms_ipc_server *s)
{
	bool over;

	pthread_mutex_lock(&s->lock);
	over = live_conns(s) > s->ops->max_conns;
	pthread_mutex_unlock(&s->lock);
	return over;
}

/*
 * After accepting c past the limit: reads, without waiting, what c and every connection that
 * waits for its first request have sent (a request already whole is served, not judged idle),
 * then closes the one victim() names, if still past the limit. Server thread, s->lock not
 * held; only this thread adds or frees connections, so the list is walked without the lock.
 */
static void make_room(struct cms_ipc_server *s, struct cms_ipc_conn *c)
{
	struct cms_ipc_conn *o, *old = NULL;
	bool waits;

	if (!over_limit(s))
		return;
	conn_read(s, c);
	for (o = s->conns; o && over_limit(s); o = o->next) {
		if (o == c)
			continue;
		pthread_mutex_lock(&s->lock);
		waits = waits_first(s, o);
		pthread_mutex_unlock(&s->lock);
		if (waits)
			conn_read(s, o);
	}
	pthread_mutex_lock(&s->lock);
	if (live_conns(s) > s->ops->max_conns)
		old = victim(s, c);
	if (old) {
		cms_log(s->ctx, CMS_LOG_WARN, "%s %s: pid %d closed to make room (%s)",
			s->ops->what, s->path, (int)old->pid,
			old->rx.have ? "its request not whole" : "no request yet");
		cms_ipc_conn_fail(s, old, CMS_ERR_TIMEOUT,
				  old->rx.have ? "closed to make room for a newer connection "
						 "(its request not whole)" :
						 "closed to make room for a newer connection "
						 "(no request yet)");
	}
	pthread_mutex_unlock(&s->lock);
}

/* Records an accept's outcome: CMS_ERR_OUT_OF_HOST_MEMORY starts or doubles a pause. */
static void accepted(struct cms_ipc_accepting *a, cms_status st)
{
	if (st == CMS_OK) {
		a->ms = 0;
		return;
	}
	if (st != CMS_ERR_OUT_OF_HOST_MEMORY)
		return;
	a->ms = a->ms ? a->ms * 2 : CMS_IPC_BACKOFF_MIN_MS;
	if (a->ms > CMS_IPC_BACKOFF_MAX_MS)
		a->ms = CMS_IPC_BACKOFF_MAX_MS;
	a->until = cms_ipc_now_ms() + a->ms;
}

/* Accepts what waits, making room while it can. */
static void accept_all(struct cms_ipc_server *s)
{
	for (;;) {
		struct cms_ipc_conn *c;
		char why[256];
		cms_status st;
		bool ok;
		pid_t pid;
		uid_t uid;
		int fd;

		pthread_mutex_lock(&s->lock);
		ok = has_room(s);
		pthread_mutex_unlock(&s->lock);
		if (!ok)
			return;
		st = cms_ipc_accept(s->lfd, s->uids, s->nuids, s->ops->where, s->path, &fd, &pid,
				    &uid, why, sizeof(why));
		accepted(&s->accepting, st);
		if (st == CMS_ERR_NOT_FOUND || st == CMS_ERR_OUT_OF_HOST_MEMORY)
			return;
		if (st == CMS_ERR_PERMISSION)
			cms_log(s->ctx, CMS_LOG_WARN, "%s: refused pid %d: %s", s->ops->what,
				(int)pid, why);
		if (st)
			continue;
		c = calloc(1, s->ops->conn_size);
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = pid;
		c->uid = uid;
		c->since = cms_ipc_now_ms();
		c->order = s->accepts++;
		c->out_tail = &c->out;
		cms_ipc_rx_init(&c->rx);
		c->rx.max_payload = CMS_IPC_SERVER_MSG_MAX;
		c->rx.take = CMS_IPC_RX_FDS_NONE; /* no message to a server carries descriptors */
		pthread_mutex_lock(&s->lock);
		c->next = s->conns;
		s->conns = c;
		s->nconns++;
		pthread_mutex_unlock(&s->lock);
		make_room(s, c);
	}
}

/* Room for n entries in the poll set and the connection table beside it. */
static bool grow(struct cms_ipc_server *s, size_t n)
{
	struct pollfd *npf;
	struct cms_ipc_conn **ncs;

	if (n <= s->cap)
		return true;
	npf = realloc(s->pf, n * 2 * sizeof(*npf));
	if (npf)
		s->pf = npf;
	ncs = npf ? realloc(s->cs, n * 2 * sizeof(*ncs)) : NULL;
	if (ncs)
		s->cs = ncs;
	if (!npf || !ncs)
		return s->cap >= 2; /* the fixed entries at least: serve who fits */
	s->cap = n * 2;
	return true;
}

/*
 * The poll set of one round (s->lock held): the listening socket (unless full or backing
 * off), the wake pipe, then every connection: read unless closing, written while its queue
 * holds something. Returns the entries, or 0 when there is no room for even two.
 */
static size_t poll_set(struct cms_ipc_server *s, int64_t now, int *timeout)
{
	struct cms_ipc_conn *c, *next;
	size_t n = 2;
	bool full;

	for (c = s->conns; c; c = next) {
		next = c->next;
		if (c->dead)
			conn_drop(s, c);
		else if (c->closing && !c->out)
			conn_drop(s, c);
	}
	if (!grow(s, s->nconns + 2))
		return 0;
	full = !has_room(s);
	s->pf[0] = (struct pollfd){ s->lfd, POLLIN, 0 };
	if (full) {
		s->pf[0].fd = -1; /* a connection closing wakes the loop's next round */
	} else if (now < s->accepting.until) {
		s->pf[0].fd = -1;
		cms_ipc_timeout_until(timeout, now, s->accepting.until);
	}
	s->pf[1] = (struct pollfd){ s->loop.wake[0], POLLIN, 0 };
	/* Only this thread frees connections: cs stays valid without the lock. */
	for (c = s->conns; c && n < s->cap; c = c->next) {
		int64_t at = conn_expiry(s, c);

		if (at)
			cms_ipc_timeout_until(timeout, now, at);
		s->cs[n] = c;
		s->pf[n++] = (struct pollfd){
			c->fd, (short)((c->closing ? 0 : POLLIN) | (c->out ? POLLOUT : 0)), 0
		};
	}
	return n;
}

static void *server_main(void *arg)
{
	struct cms_ipc_server *s = arg;

	for (;;) {
		size_t n, i;
		int64_t now;
		int timeout;
		bool pending;

		pending = s->ops->round ? s->ops->round(s) : false;
		pthread_mutex_lock(&s->lock);
		if (cms_ipc_loop_stopping(&s->loop)) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		now = cms_ipc_now_ms();
		timeout = pending ? 5 : 1000;
		n = poll_set(s, now, &timeout);
		pthread_mutex_unlock(&s->lock);
		if (!n) {
			poll(NULL, 0, 100); /* no memory for even the two fixed entries */
			continue;
		}
		if (poll(s->pf, n, timeout) < 0)
			continue;
		/* Deadlines are judged at the poll's return: time spent serving others below
		 * (a control request) does not expire a connection whose bytes arrived
		 * meanwhile; the next poll reads them. */
		now = cms_ipc_now_ms();
		if (s->pf[1].revents)
			cms_ipc_loop_drain(&s->loop);
		for (i = 2; i < n; i++) {
			struct cms_ipc_conn *c = s->cs[i];
			short ev = s->pf[i].revents;

			if (ev & (POLLOUT | POLLERR | POLLHUP))
				cms_ipc_conn_flush(s, c);
			if ((ev & (POLLIN | POLLERR | POLLHUP)) && s->pf[i].events & POLLIN)
				conn_read(s, c);
		}
		pthread_mutex_lock(&s->lock);
		expire(s, now);
		pthread_mutex_unlock(&s->lock);
		if (s->pf[0].revents)
			accept_all(s);
	}
	return NULL;
}

/* ---- lifecycle ---- */

cms_status cms_ipc_server_open(struct cms_ipc_server *s, cms_context *ctx, const char *path,
			       const struct cms_ipc_server_ops *ops, void *owner,
			       const uint32_t *uids, uint32_t n)
{
	pthread_condattr_t ca;
	char why[256];
	cms_status st;

	memset(s, 0, sizeof(*s));
	s->ctx = ctx;
	s->ops = ops;
	s->owner = owner;
	s->lfd = s->loop.wake[0] = s->loop.wake[1] = -1;
	snprintf(s->path, sizeof(s->path), "%s", path);
	st = cms_ipc_copy_uids(uids, n, &s->uids);
	if (st)
		return st;
	s->nuids = n;
	st = cms_ipc_loop_init(&s->loop);
	if (st)
		goto err_uids;
	st = cms_ipc_listen(path, &s->lfd, &s->file, why, sizeof(why));
	if (st) {
		cms_set_error(st, "%s: %s", ops->what, why);
		goto err_loop;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&s->lock, NULL);
	return CMS_OK;

err_loop:
	cms_ipc_loop_fini(&s->loop);
err_uids:
	free(s->uids);
	s->uids = NULL;
	return st;
}

cms_status cms_ipc_server_start(struct cms_ipc_server *s)
{
	cms_status st = cms_ipc_loop_start(&s->loop, server_main, s, s->ops->what);

	s->started = !st;
	return st;
}

void cms_ipc_server_close(struct cms_ipc_server *s)
{
	if (s->lfd < 0)
		return;
	if (s->started)
		cms_ipc_loop_stop(&s->loop);
	s->started = false;
	pthread_mutex_lock(&s->lock);
	while (s->conns)
		conn_drop(s, s->conns);
	pthread_mutex_unlock(&s->lock);
	close(s->lfd);
	s->lfd = -1;
	cms_ipc_unlink(&s->file);
	cms_ipc_loop_fini(&s->loop);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s->pf);
	free(s->cs);
	free(s->uids);
	s->pf = NULL;
	s->cs = NULL;
	s->uids = NULL;
}
