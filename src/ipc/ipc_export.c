/* SPDX-License-Identifier: MIT */
/*
 * ipc_export.c - the exporter: publishes shareable regions on a Unix socket,
 * grants their memory to importers as descriptors, and revokes it before a
 * pause (cms_ipc_revoke, called by the pause engine with the region locks
 * held) and grants it again after a resume (cms_ipc_regrant).
 *
 * Threads and locks. The exporter's server thread is the only reader of the
 * sockets; every write to a socket happens under exp->lock (so a revocation
 * sent by a pausing thread never interleaves with a grant). Lock order:
 * region lock, then exp->lock. The server thread never blocks on a region
 * lock: a grant needs the region's lock to read a consistent layout and
 * export live handles, so it uses trylock and, when a pause or resume holds
 * the lock, retries a few milliseconds later. A pausing thread waits for the
 * importers' answers on exp->cond, which the server thread signals.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc.h"

enum conn_state {
	C_HELLO,    /* connected, no request yet */
	C_GRANT,    /* a grant is due (sent by the server thread when it gets the region lock) */
	C_MAPPED,   /* granted the memory (may still be mapping it) */
	C_REVOKING, /* asked to drop it, no answer yet */
	C_REVOKED,  /* holds no mapping: waits for a grant */
	C_FAILED,   /* could not map a grant (layout changed, error): not granted again */
};

struct conn {
	int fd;
	pid_t pid;
	uid_t uid;
	char name[CMS_IPC_MAX_NAME + 1];
	enum conn_state state;
	struct cms_ipc_pub *pub;
	uint32_t access;
	uint64_t seq; /* of the revocation asked */
	bool answered;
	int32_t answer;
	bool dead; /* a write failed: the server thread closes it */
	/* the server thread's only: the message under way, when it started, when accepted */
	struct cms_ipc_rx rx;
	int64_t msg_since; /* 0: no message under way */
	int64_t since;
	struct conn *next;
};

struct cms_exporter {
	cms_context *ctx;
	char path[CMS_IPC_PATH_MAX + 1];
	int lfd;
	struct cms_ipc_sockfile file; /* lfd's socket file */
	struct cms_ipc_loop loop;     /* loop.stop under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	uint32_t *uids;
	uint32_t nuids;
	uint32_t timeout_ms;
	struct cms_ipc_pub *pubs;
	struct conn *conns;
	size_t nconns;			    /* in conns */
	struct cms_ipc_accepting accepting; /* the server thread's only */
	uint64_t seq;
};

static void conn_name(const struct conn *c, char *buf, size_t len)
{
	snprintf(buf, len, "importer pid %d (uid %u%s%s%s)", (int)c->pid, (unsigned)c->uid,
		 c->name[0] ? ", \"" : "", c->name, c->name[0] ? "\"" : "");
}

/* Sends under exp->lock; a failure marks the connection dead (the server thread drops it). */
static cms_status conn_send(struct cms_exporter *exp, struct conn *c, const struct cms_ipc_msg *m,
			    const int *fds)
{
	char why[256];
	cms_status st;

	if (c->dead)
		return CMS_ERR_DISCONNECTED;
	st = cms_ipc_send(c->fd, m, fds, cms_ipc_now_ms() + CMS_IPC_IO_MS, why, sizeof(why));
	if (st) {
		c->dead = true;
		shutdown(c->fd, SHUT_RDWR);
		cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: pid %d: %s", exp->path, (int)c->pid,
			why);
		pthread_cond_broadcast(&exp->cond);
	}
	return st;
}

static void conn_error(struct cms_exporter *exp, struct conn *c, cms_status st, const char *text)
{
	struct cms_ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_ERROR;
	m.status = st;
	snprintf(m.text, sizeof(m.text), "%s", text);
	conn_send(exp, c, &m, NULL);
	c->dead = true;
	shutdown(c->fd, SHUT_RDWR);
}

/* ---- grants ---- */

static int cmp_base(const void *a, const void *b)
{
	const struct cms_alloc *x = *(struct cms_alloc *const *)a,
			       *y = *(struct cms_alloc *const *)b;

	return x->base < y->base ? -1 : x->base > y->base;
}

/*
 * Sends the region's layout and, when active, its descriptors (exported now,
 * closed once sent). Region lock and exp->lock held. On a failure to export,
 * the importer gets an ERROR and is dropped.
 */
static void send_grant(struct cms_exporter *exp, struct conn *c)
{
	struct cms_region *r = c->pub->region;
	cms_context *ctx = exp->ctx;
	struct cms_alloc **v = NULL, *a;
	struct cms_ipc_msg m;
	int fds[CMS_IPC_MAX_FDS];
	size_t n = 0, i, k, nf;
	uint64_t off = 0;
	char why[CMS_IPC_MAX_TEXT];
	CUresult res;

	memset(&m, 0, sizeof(m));
	if (r->dead) {
		conn_error(exp, c, CMS_ERR_NOT_FOUND, "the region was destroyed");
		return;
	}
	if (r->nallocs) {
		v = malloc(r->nallocs * sizeof(*v));
		m.allocs = calloc(r->nallocs, sizeof(*m.allocs));
		if (!v || !m.allocs) {
			conn_error(exp, c, CMS_ERR_OUT_OF_HOST_MEMORY,
				   "exporter: out of host memory");
			goto out;
		}
		for (a = r->allocs; a; a = a->next)
			v[n++] = a;
		qsort(v, n, sizeof(*v), cmp_base);
	}
	m.type = CMS_IPC_LAYOUT;
	memcpy(m.tag, r->tag, sizeof(m.tag));
	m.device = r->device;
	m.access = c->access;
	m.state = r->state;
	m.epoch = r->epoch;
	m.granularity = ctx->devices[r->device].granularity;
	m.nallocs = (uint32_t)n;
	for (i = 0; i < n; i++) {
		m.allocs[i].offset = off;
		m.allocs[i].size = v[i]->size;
		m.allocs[i].physical = v[i]->physical;
		m.allocs[i].exporter_ptr = v[i]->base;
		off += v[i]->physical;
	}
	m.total = off;
	if (r->state == CMS_STATE_ACTIVE && cms_region_settle(r)) {
		/* an async resume's restore must be done before an importer reads */
		cms_last_error_message(why, sizeof(why));
		conn_error(exp, c, CMS_ERR_DRIVER, why);
		goto out;
	}
	if (r->state == CMS_STATE_ACTIVE)
		for (i = 0; i < n; i++)
			if (!cms_alloc_vmm(v[i])->handle || !v[i]->mapped) {
				conn_error(exp, c, CMS_ERR_INTERNAL,
					   "exporter: an allocation has no memory (an earlier "
					   "rollback failed); resume or pause the region first");
				goto out;
			}
	if (conn_send(exp, c, &m, NULL))
		goto out;
	c->state = r->state == CMS_STATE_ACTIVE ? C_MAPPED : C_REVOKED;
	if (r->state != CMS_STATE_ACTIVE || !n)
		goto out;
	if (cms_push(ctx, r->device)) {
		cms_last_error_message(why, sizeof(why));
		conn_error(exp, c, CMS_ERR_DRIVER, why);
		goto out;
	}
	for (i = 0; i < n && !c->dead; i += nf) {
		struct cms_ipc_msg f;

		nf = n - i < CMS_IPC_MAX_FDS ? n - i : CMS_IPC_MAX_FDS;
		res = CUDA_SUCCESS;
		for (k = 0; k < nf && res == CUDA_SUCCESS; k++) {
			res = ctx->drv.cuMemExportToShareableHandle(
				&fds[k], cms_alloc_vmm(v[i + k])->handle,
				CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
			if (res != CUDA_SUCCESS)
				snprintf(why, sizeof(why),
					 "exporter: cuMemExportToShareableHandle of 0x%llx: %s",
					 (unsigned long long)v[i + k]->base,
					 cms_driver_error_name(&ctx->drv, res));
		}
		if (res == CUDA_SUCCESS) {
			memset(&f, 0, sizeof(f));
			f.type = CMS_IPC_FDS;
			f.first = (uint32_t)i;
			f.nfds = (uint32_t)nf;
			conn_send(exp, c, &f, fds);
		} else {
			k--; /* the failed one holds no descriptor */
		}
		while (k-- > 0)
			close(fds[k]);
		if (res != CUDA_SUCCESS)
			conn_error(exp, c, CMS_ERR_DRIVER, why);
	}
	cms_pop(ctx);
	if (c->dead)
		c->state = C_FAILED;
out:
	free(m.allocs);
	free(v);
}

/* Grants due on the connections: tried with the region lock taken without waiting. */
static bool run_grants(struct cms_exporter *exp)
{
	bool pending = false;
	struct conn *c;

	pthread_mutex_lock(&exp->lock);
	for (c = exp->conns; c; c = c->next) {
		struct cms_region *r;

		if (c->state != C_GRANT || c->dead)
			continue;
		r = c->pub->region;
		pthread_mutex_unlock(&exp->lock); /* lock order: region, then exporter */
		if (pthread_mutex_trylock(&r->lock)) {
			pending = true;
			pthread_mutex_lock(&exp->lock);
			continue;
		}
		pthread_mutex_lock(&exp->lock);
		if (c->state == C_GRANT && !c->dead)
			send_grant(exp, c);
		pthread_mutex_unlock(&r->lock);
	}
	pthread_mutex_unlock(&exp->lock);
	return pending;
}

/* ---- messages from importers (server thread) ---- */

static struct cms_ipc_pub *find_pub(struct cms_exporter *exp, const char *tag, int32_t device)
{
	struct cms_ipc_pub *p;

	for (p = exp->pubs; p; p = p->next)
		if (!strcmp(p->region->tag, tag) && (device < 0 || device == p->region->device))
			return p;
	return NULL;
}

/* Handles one message; exp->lock held. Returns non-zero to drop the connection. */
static int handle(struct cms_exporter *exp, struct conn *c, const struct cms_ipc_msg *m)
{
	char who[160];

	conn_name(c, who, sizeof(who));
	switch (m->type) {
	case CMS_IPC_HELLO:
		if (c->state != C_HELLO)
			break;
		c->pub = find_pub(exp, m->tag, m->device);
		memcpy(c->name, m->name, sizeof(c->name));
		if (!c->pub) {
			char text[160];

			snprintf(text, sizeof(text), "no region tagged \"%s\" is published here",
				 m->tag);
			conn_error(exp, c, CMS_ERR_NOT_FOUND, text);
			return 1;
		}
		c->access = m->access & c->pub->access;
		c->state = C_GRANT;
		cms_log(exp->ctx, CMS_LOG_INFO, "exporter %s: %s imports \"%s\"", exp->path, who,
			m->tag);
		return 0;
	case CMS_IPC_MAPPED:
		if (m->status && c->state == C_MAPPED) {
			c->state = C_FAILED;
			cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: %s could not map: %s",
				exp->path, who, cms_status_name(m->status));
		}
		return 0;
	case CMS_IPC_REVOKED:
		if (c->state != C_REVOKING || m->seq != c->seq)
			return 0; /* an answer to an older request */
		c->answered = true;
		c->answer = m->status;
		if (!c->pub->waiting) /* a late answer: the pause gave up, memory still there */
			c->state = m->status ? C_MAPPED : C_GRANT;
		pthread_cond_broadcast(&exp->cond);
		return 0;
	case CMS_IPC_ERROR:
		cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: %s reports %s: %s", exp->path, who,
			cms_status_name(m->status), m->text);
		return 1;
	default:
		break;
	}
	conn_error(exp, c, CMS_ERR_PROTOCOL, "unexpected message");
	return 1;
}

/* Accepts what waits, up to the connection limit. */
static void accept_all(struct cms_exporter *exp)
{
	for (;;) {
		char why[256];
		struct conn *c;
		cms_status st;
		bool full;
		pid_t pid;
		uid_t uid;
		int fd;

		pthread_mutex_lock(&exp->lock);
		full = exp->nconns >= CMS_IPC_EXPORTER_CONNS;
		pthread_mutex_unlock(&exp->lock);
		if (full)
			return;
		st = cms_ipc_accept(exp->lfd, exp->uids, exp->nuids, "to import from", exp->path,
				    &fd, &pid, &uid, why, sizeof(why));
		cms_ipc_accepted(&exp->accepting, st);
		if (st == CMS_ERR_NOT_FOUND || st == CMS_ERR_OUT_OF_HOST_MEMORY)
			return;
		if (st == CMS_ERR_PERMISSION)
			cms_log(exp->ctx, CMS_LOG_WARN, "exporter: refused pid %d: %s", (int)pid,
				why);
		if (st)
			continue;
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = pid;
		c->uid = uid;
		c->state = C_HELLO;
		c->since = cms_ipc_now_ms();
		cms_ipc_rx_init(&c->rx);
		pthread_mutex_lock(&exp->lock);
		c->next = exp->conns;
		exp->conns = c;
		exp->nconns++;
		pthread_mutex_unlock(&exp->lock);
	}
}

/* Unlinks and frees c; exp->lock held. */
static void drop(struct cms_exporter *exp, struct conn *c)
{
	struct conn **pp;

	for (pp = &exp->conns; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	exp->nconns--;
	cms_ipc_rx_free(&c->rx);
	close(c->fd);
	free(c);
	pthread_cond_broadcast(&exp->cond); /* a revocation may wait for it */
}

/* When c is closed for want of a message (0: never): a HELLO not sent, or one under way. */
static int64_t conn_expiry(const struct conn *c)
{
	if (c->state == C_HELLO)
		return c->since + CMS_IPC_IDLE_MS;
	return c->rx.have ? c->msg_since + CMS_IPC_IO_MS : 0;
}

/* Reads what c sent, without waiting, and handles a whole message (server thread). */
static void conn_read(struct cms_exporter *exp, struct conn *c)
{
	struct cms_ipc_msg m;
	char why[256];
	cms_status st;
	int bye, done;

	st = cms_ipc_rx_read(c->fd, &c->rx, &m, NULL, &done, why, sizeof(why));
	if (!st && !done) {
		if (c->rx.have && !c->msg_since)
			c->msg_since = cms_ipc_now_ms();
		return;
	}
	c->msg_since = 0;
	pthread_mutex_lock(&exp->lock);
	if (st) {
		if (st == CMS_ERR_PROTOCOL)
			conn_error(exp, c, st, why);
		if (st != CMS_ERR_DISCONNECTED)
			cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: pid %d dropped: %s",
				exp->path, (int)c->pid, why);
		bye = 1;
	} else {
		bye = handle(exp, c, &m);
	}
	if (bye)
		drop(exp, c);
	pthread_mutex_unlock(&exp->lock);
	cms_ipc_msg_free(&m);
}

/* Closes the connections past their expiry (conn_expiry); exp->lock held. */
static void expire(struct cms_exporter *exp, int64_t now)
{
	struct conn *c, *next;

	for (c = exp->conns; c; c = next) {
		int64_t at = conn_expiry(c);

		next = c->next;
		if (!at || now < at)
			continue;
		cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: pid %d dropped: %s within %d ms",
			exp->path, (int)c->pid,
			c->state == C_HELLO ? "no request" : "a message not whole",
			c->state == C_HELLO ? CMS_IPC_IDLE_MS : CMS_IPC_IO_MS);
		conn_error(exp, c, CMS_ERR_TIMEOUT, "no whole message in time");
		drop(exp, c);
	}
}

/* Room for n entries in the poll set and the connection table beside it. */
static bool grow(struct pollfd **pf, struct conn ***cs, size_t *cap, size_t n)
{
	struct pollfd *npf;
	struct conn **ncs;

	if (n <= *cap)
		return true;
	npf = realloc(*pf, n * 2 * sizeof(**pf));
	if (npf)
		*pf = npf;
	ncs = npf ? realloc(*cs, n * 2 * sizeof(**cs)) : NULL;
	if (ncs)
		*cs = ncs;
	if (!npf || !ncs)
		return *cap >= 2; /* the fixed entries at least: serve who fits */
	*cap = n * 2;
	return true;
}

static void *server(void *arg)
{
	struct cms_exporter *exp = arg;
	struct pollfd *pf = NULL;
	struct conn **cs = NULL;
	size_t cap = 0;

	for (;;) {
		struct conn *c, *next;
		size_t n = 2, i;
		int64_t now;
		int timeout;
		bool pending;

		pending = run_grants(exp);
		pthread_mutex_lock(&exp->lock);
		if (exp->loop.stop) {
			pthread_mutex_unlock(&exp->lock);
			break;
		}
		for (c = exp->conns; c; c = next) { /* connections a writer found dead */
			next = c->next;
			if (c->dead)
				drop(exp, c);
		}
		for (c = exp->conns; c; c = c->next)
			n++;
		if (!grow(&pf, &cs, &cap, n)) {
			pthread_mutex_unlock(&exp->lock);
			poll(NULL, 0, 100); /* no memory for even the two fixed entries */
			continue;
		}
		now = cms_ipc_now_ms();
		timeout = pending ? 5 : 1000;
		/* at the limit or backing off: the listening socket waits (poll skips fd -1) */
		pf[0] = (struct pollfd){ cms_ipc_accepting_now(&exp->accepting, exp->nconns,
							       CMS_IPC_EXPORTER_CONNS, now,
							       &timeout) ?
						 exp->lfd :
						 -1,
					 POLLIN, 0 };
		pf[1] = (struct pollfd){ exp->loop.wake[0], POLLIN, 0 };
		n = 2;
		/* Only this thread frees connections: cs stays valid without the lock. */
		for (c = exp->conns; c && n < cap; c = c->next) {
			if (conn_expiry(c))
				cms_ipc_timeout_until(&timeout, now, conn_expiry(c));
			cs[n] = c;
			pf[n++] = (struct pollfd){ c->fd, POLLIN, 0 };
		}
		pthread_mutex_unlock(&exp->lock);

		if (poll(pf, n, timeout) < 0)
			continue;
		/* Deadlines are judged at the poll's return: time spent serving others below
		 * (a blocked reply, a grant) does not expire a connection whose bytes arrived
		 * meanwhile; the next poll reads them. */
		now = cms_ipc_now_ms();
		if (pf[1].revents)
			cms_ipc_loop_drain(&exp->loop);
		for (i = 2; i < n; i++)
			if (pf[i].revents)
				conn_read(exp, cs[i]);
		pthread_mutex_lock(&exp->lock);
		expire(exp, now);
		pthread_mutex_unlock(&exp->lock);
		if (pf[0].revents)
			accept_all(exp);
	}
	free(pf);
	free(cs);
	return NULL;
}

/* ---- pause/resume hooks (region locks held by the caller) ---- */

static void regrant_pub(struct cms_ipc_pub *p)
{
	struct cms_exporter *exp = p->exp;
	struct conn *c;
	bool any = false;

	pthread_mutex_lock(&exp->lock);
	for (c = exp->conns; c; c = c->next)
		if (c->pub == p && c->state == C_REVOKED) {
			c->state = C_GRANT;
			any = true;
		}
	pthread_mutex_unlock(&exp->lock);
	if (any)
		cms_ipc_wake(exp->loop.wake[1]);
}

void cms_ipc_regrant(cms_context *ctx, struct cms_region **regions, size_t n)
{
	struct cms_ipc_pub *p;
	size_t i;

	(void)ctx;
	for (i = 0; i < n; i++)
		for (p = cms_region_ipc(regions[i])->ipc; p; p = p->rnext)
			regrant_pub(p);
}

/* Phase 1: asks every importer holding the memory to drop it. */
static void ask(struct cms_ipc_pub *p)
{
	struct cms_exporter *exp = p->exp;
	struct cms_ipc_msg m;
	struct conn *c;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	pthread_mutex_lock(&exp->lock);
	m.seq = ++exp->seq;
	p->waiting = true;
	for (c = exp->conns; c; c = c->next) {
		if (c->pub != p || (c->state != C_MAPPED && c->state != C_REVOKING))
			continue;
		c->state = C_REVOKING;
		c->seq = m.seq;
		c->answered = false;
		conn_send(exp, c, &m, NULL); /* a dead importer counts as revoked */
	}
	pthread_mutex_unlock(&exp->lock);
}

/* Phase 2: waits for the answers until deadline; records the first failure. */
static cms_status collect(struct cms_ipc_pub *p, int64_t deadline, cms_status st)
{
	struct cms_exporter *exp = p->exp;
	struct conn *c;
	bool waiting;

	pthread_mutex_lock(&exp->lock);
	for (;;) {
		struct timespec ts;
		int64_t ms;

		waiting = false;
		for (c = exp->conns; c; c = c->next)
			if (c->pub == p && c->state == C_REVOKING && !c->answered && !c->dead)
				waiting = true;
		ms = deadline - cms_ipc_now_ms();
		if (!waiting || ms <= 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&exp->cond, &exp->lock, &ts);
	}
	for (c = exp->conns; c; c = c->next) {
		char who[160];

		if (c->pub != p || c->state != C_REVOKING || c->dead)
			continue;
		conn_name(c, who, sizeof(who));
		if (!c->answered) {
			if (!st)
				st = cms_set_error(CMS_ERR_TIMEOUT,
						   "%s did not drop its mappings of \"%s\" within "
						   "%u ms (socket "
						   "%s); the region stays active",
						   who, p->region->tag, exp->timeout_ms, exp->path);
			continue; /* stays REVOKING: a late answer is granted again */
		}
		if (c->answer) {
			c->state = C_MAPPED;
			if (!st)
				st = cms_set_error(
					CMS_ERR_REFUSED,
					"%s refused to drop its mappings of \"%s\" (%s); "
					"the region stays active",
					who, p->region->tag, cms_status_name(c->answer));
			continue;
		}
		c->state = C_REVOKED;
	}
	p->waiting = false;
	pthread_mutex_unlock(&exp->lock);
	return st;
}

cms_status cms_ipc_revoke(cms_context *ctx, struct cms_region **regions, size_t n)
{
	struct cms_ipc_pub *p;
	cms_status st = CMS_OK;
	uint32_t timeout = 0;
	int64_t deadline;
	size_t i;
	bool any = false;

	for (i = 0; i < n; i++)
		for (p = cms_region_ipc(regions[i])->ipc; p; p = p->rnext) {
			ask(p);
			any = true;
			if (p->exp->timeout_ms > timeout)
				timeout = p->exp->timeout_ms;
		}
	if (!any)
		return CMS_OK;
	deadline = cms_ipc_now_ms() + timeout;
	for (i = 0; i < n; i++)
		for (p = cms_region_ipc(regions[i])->ipc; p; p = p->rnext)
			st = collect(p, deadline, st);
	if (st)
		cms_ipc_regrant(ctx, regions, n);
	return st;
}

void cms_ipc_region_gone(struct cms_region *r)
{
	char saved[512];

	if (!cms_region_ipc(r)->ipc)
		return;
	cms_last_error_message(saved, sizeof(saved));
	if (cms_ipc_revoke(r->ctx, &r, 1))
		cms_log(r->ctx, CMS_LOG_WARN, "destroying region \"%s\": %s", r->tag,
			cms_last_error());
	cms_set_error(CMS_OK, "%s", saved);
}

uint32_t cms_ipc_importers(struct cms_region *r)
{
	struct cms_ipc_pub *p;
	struct conn *c;
	uint32_t k = 0;

	for (p = cms_region_ipc(r)->ipc; p; p = p->rnext) {
		pthread_mutex_lock(&p->exp->lock);
		for (c = p->exp->conns; c; c = c->next)
			k += c->pub == p && !c->dead;
		pthread_mutex_unlock(&p->exp->lock);
	}
	return k;
}

/* ---- public API ---- */

CMS_API cms_status cms_exporter_options_init(cms_exporter_options *opts)
{
	static const cms_exporter_options init = CMS_EXPORTER_OPTIONS_INIT;

	return cms_ipc_options_init(opts, &init, sizeof(init));
}

CMS_API cms_status cms_exporter_create(cms_context *ctx, const char *path,
				       const cms_exporter_options *opts, cms_exporter **out)
{
	cms_exporter_options o = CMS_EXPORTER_OPTIONS_INIT;
	pthread_condattr_t ca;
	struct cms_exporter *exp;
	char why[256];
	cms_status st;

	if (out)
		*out = NULL;
	st = cms_ipc_check_args(ctx, path, out);
	if (st)
		return st;
	if (opts) {
		st = CMS_COPY_IN(&o, opts, cms_exporter_options);
		if (st)
			return st;
	}
	if (o.flags)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown exporter flags 0x%llx",
				     (unsigned long long)o.flags);
	st = cms_ipc_check_path(path);
	if (st)
		return st;
	exp = calloc(1, sizeof(*exp));
	if (!exp)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate an exporter");
	exp->ctx = ctx;
	snprintf(exp->path, sizeof(exp->path), "%s", path);
	exp->timeout_ms = o.revoke_timeout_ms ? o.revoke_timeout_ms : CMS_IPC_DEFAULT_TIMEOUT_MS;
	exp->lfd = exp->loop.wake[0] = exp->loop.wake[1] = -1;
	st = cms_ipc_copy_uids(o.allowed_uids, o.nallowed_uids, &exp->uids);
	if (st)
		goto err_free;
	exp->nuids = o.nallowed_uids;
	st = cms_ipc_loop_init(&exp->loop);
	if (st)
		goto err_free;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&exp->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&exp->lock, NULL);
	st = cms_ipc_listen(path, &exp->lfd, &exp->file, why, sizeof(why));
	if (st) {
		cms_set_error(st, "exporter: %s", why);
		goto err_sync;
	}
	st = cms_ipc_loop_start(&exp->loop, server, exp, "exporter");
	if (st)
		goto err_listen;
	atomic_fetch_add(&ctx->ipc_objects, 1);
	cms_log(ctx, CMS_LOG_INFO, "exporter listening on %s", exp->path);
	*out = exp;
	return CMS_OK;

err_listen:
	close(exp->lfd);
	cms_ipc_unlink(&exp->file);
err_sync:
	pthread_mutex_destroy(&exp->lock);
	pthread_cond_destroy(&exp->cond);
err_free:
	cms_ipc_loop_fini(&exp->loop);
	free(exp->uids);
	free(exp);
	return st;
}

CMS_API cms_status cms_exporter_publish(cms_exporter *exp, cms_region *region, uint32_t access)
{
	struct cms_region *r = region;
	struct cms_ipc_pub *p, *q;
	cms_context *ctx;
	cms_status st;

	if (!exp || !r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL",
				     exp ? "region" : "exp");
	ctx = exp->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	if (r->ctx != ctx)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "region \"%s\" belongs to another context", r->tag);
	if (access != CMS_ACCESS_READ && access != CMS_ACCESS_READWRITE)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown access %u", access);
	if (!(r->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "region \"%s\" was not created with CMS_REGION_SHAREABLE",
				     r->tag);
	p = calloc(1, sizeof(*p));
	if (!p)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a publication");
	p->exp = exp;
	p->region = r;
	p->access = access;

	pthread_mutex_lock(&r->lock);
	for (q = cms_region_ipc(r)->ipc; q; q = q->rnext)
		if (q->exp == exp) {
			pthread_mutex_unlock(&r->lock);
			free(p);
			return cms_set_error(CMS_ERR_EXISTS,
					     "region \"%s\" is already published on %s", r->tag,
					     exp->path);
		}
	pthread_mutex_lock(&ctx->lock);
	if (r->dead) {
		pthread_mutex_unlock(&ctx->lock);
		pthread_mutex_unlock(&r->lock);
		free(p);
		return cms_set_error(CMS_ERR_NOT_FOUND, "the region was destroyed");
	}
	r->refs++;
	pthread_mutex_unlock(&ctx->lock);
	p->rnext = cms_region_ipc(r)->ipc;
	cms_region_ipc(r)->ipc = p;
	pthread_mutex_lock(&exp->lock);
	p->next = exp->pubs;
	exp->pubs = p;
	pthread_mutex_unlock(&exp->lock);
	pthread_mutex_unlock(&r->lock);
	cms_log(ctx, CMS_LOG_INFO, "exporter %s: publishing \"%s\" (device %d)", exp->path, r->tag,
		r->device);
	return CMS_OK;
}

CMS_API cms_status cms_exporter_importers(cms_exporter *exp, uint64_t *count)
{
	struct conn *c;
	uint64_t k = 0;

	cms_status st;

	if (!exp || !count)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", exp ? "count" : "exp");
	st = cms_check_fork(exp->ctx);
	if (st)
		return st;
	pthread_mutex_lock(&exp->lock);
	for (c = exp->conns; c; c = c->next)
		k += c->pub && !c->dead;
	pthread_mutex_unlock(&exp->lock);
	*count = k;
	return CMS_OK;
}

CMS_API cms_status cms_exporter_destroy(cms_exporter *exp)
{
	cms_context *ctx;
	struct cms_ipc_pub *p, **pp;
	cms_status st;

	if (!exp)
		return CMS_OK;
	ctx = exp->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	/* Unlink from the regions first: a pause in progress finishes with us. */
	for (p = exp->pubs; p; p = p->next) {
		pthread_mutex_lock(&p->region->lock);
		for (pp = &cms_region_ipc(p->region)->ipc; *pp && *pp != p; pp = &(*pp)->rnext)
			;
		if (*pp)
			*pp = p->rnext;
		pthread_mutex_unlock(&p->region->lock);
	}
	cms_ipc_loop_stop(&exp->loop, &exp->lock);
	while (exp->conns)
		drop(exp, exp->conns);
	close(exp->lfd);
	cms_ipc_unlink(&exp->file);
	cms_ipc_loop_fini(&exp->loop);
	while ((p = exp->pubs)) {
		exp->pubs = p->next;
		pthread_mutex_lock(&ctx->lock);
		cms_region_unref_locked(p->region);
		pthread_mutex_unlock(&ctx->lock);
		free(p);
	}
	pthread_mutex_destroy(&exp->lock);
	pthread_cond_destroy(&exp->cond);
	free(exp->uids);
	free(exp);
	atomic_fetch_sub(&ctx->ipc_objects, 1);
	return CMS_OK;
}
