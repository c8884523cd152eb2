/* SPDX-License-Identifier: MIT */
/*
 * control.c - the control socket: another process (cmsctl --socket PATH)
 * asks for the status of the context's regions, or to pause / resume a tag;
 * the application's callback decides. One request at a time, on the control
 * socket's own thread, which reads every connection without waiting (a
 * client that sends nothing, or half a request, delays nobody) and closes a
 * connection whose request is not whole within CMS_IPC_IDLE_MS.
 */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapters.h"

struct cms_control {
	cms_context *ctx;
	char path[CMS_IPC_PATH_MAX + 1];
	int lfd;
	struct cms_ipc_sockfile file; /* lfd's socket file */
	struct cms_ipc_loop loop;
	pthread_mutex_t lock; /* loop.stop */
	uint64_t flags;
	cms_control_fn fn;
	void *user;
	uint32_t *uids;
	uint32_t nuids;
	struct ctl_conn *conns; /* the thread's only */
	size_t nconns;
	struct cms_ipc_accepting accepting; /* the thread's only */
};

/* A connection whose request is not whole yet. */
struct ctl_conn {
	int fd;
	pid_t pid;
	uid_t uid;
	int64_t since; /* accepted (cms_ipc_now_ms) */
	bool over;     /* served or failed: to close */
	struct cms_ipc_rx rx;
	struct ctl_conn *next;
};

static void progress(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void progress(int fd, const char *fmt, ...)
{
	struct cms_ipc_msg m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_PROGRESS;
	va_start(ap, fmt);
	vsnprintf(m.text, sizeof(m.text), fmt, ap);
	va_end(ap);
	cms_ipc_send(fd, &m, NULL, cms_ipc_now_ms() + CMS_IPC_IO_MS, NULL, 0);
}

/* The region table of a status reply. */
static cms_status fill_status(cms_context *ctx, struct cms_ipc_msg *m)
{
	struct cms_region **v = NULL, *r;
	size_t n = 0, i;

	pthread_mutex_lock(&ctx->lock);
	for (r = ctx->regions; r; r = r->next)
		n++;
	if (n > CMS_IPC_MAX_REGIONS)
		n = CMS_IPC_MAX_REGIONS;
	if (n) {
		v = malloc(n * sizeof(*v));
		m->regions = calloc(n, sizeof(*m->regions));
		if (!v || !m->regions) {
			pthread_mutex_unlock(&ctx->lock);
			free(v);
			return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot build a status");
		}
		for (i = 0, r = ctx->regions; r && i < n; r = r->next, i++) {
			r->refs++;
			v[i] = r;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	for (i = 0; i < n; i++) {
		struct cms_ipc_region_status *s = &m->regions[i];
		cms_region_info info = { .struct_size = sizeof(info) };

		r = v[i];
		if (cms_region_info_get(r, &info))
			continue;
		memcpy(s->tag, info.tag, sizeof(s->tag));
		s->device = info.device;
		s->policy = info.policy;
		s->state = info.state;
		s->allocations = info.allocations;
		s->logical_bytes = info.logical_bytes;
		s->physical_bytes = info.physical_bytes;
		s->backed_bytes = info.backed_bytes;
		s->epoch = info.epoch;
		pthread_mutex_lock(&r->lock);
		s->importers = cms_ipc_importers(r);
		pthread_mutex_unlock(&r->lock);
		m->nregions++;
	}
	pthread_mutex_lock(&ctx->lock);
	for (i = 0; i < n; i++)
		cms_region_unref_locked(v[i]);
	pthread_mutex_unlock(&ctx->lock);
	free(v);
	return CMS_OK;
}

_Static_assert(CMS_IPC_STATS_SLOTS == CMS_STATS_STATUS_SLOTS, "stats reply slots");

/* The counters of a stats reply (since 1.2): cms_region_list, at most CMS_IPC_MAX_REGIONS. */
static cms_status fill_stats(cms_context *ctx, struct cms_ipc_msg *m)
{
	cms_region_stats *v;
	size_t i, n = 0, total = 0;
	cms_status st;

	st = cms_region_list(ctx, NULL, 0, NULL, &total);
	if (st || !total)
		return st;
	if (total > CMS_IPC_MAX_REGIONS)
		total = CMS_IPC_MAX_REGIONS;
	v = calloc(total, sizeof(*v));
	m->stats = calloc(total, sizeof(*m->stats));
	if (!v || !m->stats) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot build the stats");
		goto out_v;
	}
	for (i = 0; i < total; i++)
		v[i].struct_size = sizeof(v[i]);
	st = cms_region_list(ctx, v, total, &n, NULL);
	for (i = 0; i < n && !st; i++) {
		struct cms_ipc_region_stats *s = &m->stats[i];

		memcpy(s->tag, v[i].tag, sizeof(s->tag));
		s->device = v[i].device;
		s->policy = v[i].policy;
		s->state = v[i].state;
		s->region_id = v[i].region_id;
		s->pauses = v[i].pauses;
		s->resumes = v[i].resumes;
		s->swaps = v[i].swaps;
		s->failures = v[i].failures;
		memcpy(s->failures_by_status, v[i].failures_by_status,
		       sizeof(s->failures_by_status));
		s->bytes_released = v[i].bytes_released;
		s->bytes_backed = v[i].bytes_backed;
		s->bytes_to_store = v[i].bytes_to_store;
		s->bytes_from_store = v[i].bytes_from_store;
		s->pause_ns = v[i].pause_ns;
		s->resume_ns = v[i].resume_ns;
		m->nstats++;
	}
out_v:
	free(v);
	return st;
}

static const char *op_name(uint32_t op)
{
	return op == CMS_IPC_OP_PAUSE ? "pause" : op == CMS_IPC_OP_RESUME ? "resume" : "status";
}

/* Serves the request q received on fd from pid/uid. */
static void serve_request(struct cms_control *ctl, int fd, pid_t pid, uid_t uid,
			  struct cms_ipc_msg *q_in)
{
	cms_control_request req;
	struct cms_ipc_msg q = *q_in, m;
	char why[256];
	cms_status st;

	if (q.type != CMS_IPC_CTL_REQUEST) {
		cms_ipc_send_error(fd, CMS_ERR_PROTOCOL, "expected a control request");
		cms_ipc_msg_free(&q);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_REPLY;
	if (q.op == CMS_IPC_OP_STATUS) {
		st = fill_status(ctl->ctx, &m);
		goto reply;
	}
	if (q.op == CMS_IPC_OP_STATS) {
		m.type = CMS_IPC_CTL_STATS;
		st = fill_stats(ctl->ctx, &m);
		if (st)
			cms_last_error_message(m.text, sizeof(m.text));
		goto reply;
	}
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.op = q.op;
	req.phase = CMS_CONTROL_BEFORE;
	req.tag = q.tag;
	req.peer_pid = (int32_t)pid;
	req.peer_uid = (uint32_t)uid;
	if (ctl->fn) {
		progress(fd, "asking the application to %s \"%s\"", op_name(q.op), q.tag);
		st = ctl->fn(ctl->user, &req);
		if (st > 0)
			st = CMS_OK;
		if (st) {
			snprintf(m.text, sizeof(m.text),
				 "the application refused to %s \"%s\" (%s)", op_name(q.op), q.tag,
				 cms_status_name(st));
			goto reply;
		}
	} else if (!(ctl->flags & CMS_CONTROL_ALLOW_ALL)) {
		st = CMS_ERR_REFUSED;
		snprintf(m.text, sizeof(m.text),
			 "this process accepts no pause/resume requests (no control callback)");
		goto reply;
	}
	progress(fd, "%s \"%s\"...", q.op == CMS_IPC_OP_PAUSE ? "pausing" : "resuming", q.tag);
	if (q.op == CMS_IPC_OP_PAUSE) {
		cms_pause_result pr = { .struct_size = sizeof(pr) };

		st = cms_pause(ctl->ctx, q.tag, NULL, &pr);
		m.bytes = pr.bytes_released;
		m.elapsed_ns = pr.elapsed_ns;
		m.driver_free_before = pr.driver_free_before;
		m.driver_free_after = pr.driver_free_after;
	} else {
		cms_resume_result rr = { .struct_size = sizeof(rr) };

		st = cms_resume(ctl->ctx, q.tag, NULL, &rr);
		m.bytes = rr.bytes_backed;
		m.elapsed_ns = rr.elapsed_ns;
	}
	if (st)
		cms_last_error_message(m.text, sizeof(m.text));
	if (ctl->fn) {
		char saved[CMS_IPC_MAX_TEXT + 1];

		memcpy(saved, m.text, sizeof(saved));
		req.phase = CMS_CONTROL_AFTER;
		req.result = st;
		ctl->fn(ctl->user, &req);
		memcpy(m.text, saved, sizeof(saved));
	}
reply:
	m.status = st;
	{ /* the message may quote anything (the callback may have written it) */
		char raw[sizeof(m.text)];

		memcpy(raw, m.text, sizeof(raw));
		raw[sizeof(raw) - 1] = '\0';
		cms_text_escape(m.text, sizeof(m.text), raw);
	}
	if (cms_ipc_send(fd, &m, NULL, cms_ipc_now_ms() + CMS_IPC_IO_MS, why, sizeof(why)))
		cms_log(ctl->ctx, CMS_LOG_WARN, "control %s: reply to pid %d: %s", ctl->path,
			(int)pid, why);
	cms_ipc_msg_free(&m);
	cms_ipc_msg_free(&q);
}

/* Closes and frees c (unlinked by the caller). */
static void conn_close(struct ctl_conn *c)
{
	cms_ipc_rx_free(&c->rx);
	close(c->fd);
	free(c);
}

/* Accepts what waits, up to the connection limit. */
static void accept_all(struct cms_control *ctl)
{
	while (ctl->nconns < CMS_IPC_CONTROL_CONNS) {
		struct ctl_conn *c;
		char why[256];
		cms_status st;
		pid_t pid;
		uid_t uid;
		int fd;

		st = cms_ipc_accept(ctl->lfd, ctl->uids, ctl->nuids, "on", ctl->path, &fd, &pid,
				    &uid, why, sizeof(why));
		cms_ipc_accepted(&ctl->accepting, st);
		if (st == CMS_ERR_NOT_FOUND || st == CMS_ERR_OUT_OF_HOST_MEMORY)
			return;
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
		c->since = cms_ipc_now_ms();
		cms_ipc_rx_init(&c->rx);
		c->next = ctl->conns;
		ctl->conns = c;
		ctl->nconns++;
	}
}

/* Reads what c sent; a whole request is served. Returns non-zero when c is done with. */
static int conn_read(struct cms_control *ctl, struct ctl_conn *c)
{
	struct cms_ipc_msg q;
	char why[256];
	cms_status st;
	int done;

	st = cms_ipc_rx_read(c->fd, &c->rx, &q, NULL, &done, why, sizeof(why));
	if (st) {
		if (st == CMS_ERR_PROTOCOL)
			cms_ipc_send_error(c->fd, st, why);
		if (st != CMS_ERR_DISCONNECTED)
			cms_log(ctl->ctx, CMS_LOG_WARN, "control %s: pid %d: %s", ctl->path,
				(int)c->pid, why);
		return 1;
	}
	if (!done)
		return 0;
	serve_request(ctl, c->fd, c->pid, c->uid, &q);
	return 1;
}

/* One wait of the thread: the listening socket, the wake pipe and every connection. */
static void serve_once(struct cms_control *ctl, struct pollfd *pf, struct ctl_conn **cs, size_t cap)
{
	struct ctl_conn *c, **pp;
	int64_t now = cms_ipc_now_ms();
	int timeout = 1000;
	size_t n = 2, i;

	/* at the limit or backing off: the listening socket waits (poll skips fd -1) */
	pf[0] = (struct pollfd){ cms_ipc_accepting_now(&ctl->accepting, ctl->nconns,
						       CMS_IPC_CONTROL_CONNS, now, &timeout) ?
					 ctl->lfd :
					 -1,
				 POLLIN, 0 };
	pf[1] = (struct pollfd){ ctl->loop.wake[0], POLLIN, 0 };
	for (c = ctl->conns; c && n < cap; c = c->next) {
		cs[n] = c;
		pf[n++] = (struct pollfd){ c->fd, POLLIN, 0 };
		cms_ipc_timeout_until(&timeout, now, c->since + CMS_IPC_IDLE_MS);
	}
	if (poll(pf, n, timeout) < 0)
		return;
	/* Deadlines are judged at the poll's return: time spent serving a request below (a
	 * pause's callback and copies) does not expire a connection whose request arrived
	 * meanwhile; the next poll reads it. */
	now = cms_ipc_now_ms();
	if (pf[1].revents)
		cms_ipc_loop_drain(&ctl->loop);
	for (i = 2; i < n; i++)
		if (pf[i].revents && conn_read(ctl, cs[i]))
			cs[i]->over = true;
	for (pp = &ctl->conns; (c = *pp);) {
		if (!c->over && now < c->since + CMS_IPC_IDLE_MS) {
			pp = &c->next;
			continue;
		}
		if (!c->over) {
			cms_ipc_send_error(c->fd, CMS_ERR_TIMEOUT, "no whole request in time");
			cms_log(ctl->ctx, CMS_LOG_WARN,
				"control %s: pid %d sent no whole request within %d ms", ctl->path,
				(int)c->pid, CMS_IPC_IDLE_MS);
		}
		*pp = c->next;
		ctl->nconns--;
		conn_close(c);
	}
	if (pf[0].revents)
		accept_all(ctl);
}

static void *control_thread(void *arg)
{
	struct cms_control *ctl = arg;
	struct pollfd *pf = NULL;
	struct ctl_conn **cs = NULL, *c;
	size_t cap = 0;

	for (;;) {
		size_t n = 2;
		bool stop;

		pthread_mutex_lock(&ctl->lock);
		stop = ctl->loop.stop;
		pthread_mutex_unlock(&ctl->lock);
		if (stop)
			break;
		for (c = ctl->conns; c; c = c->next)
			n++;
		if (n > cap) {
			struct pollfd *npf = realloc(pf, n * 2 * sizeof(*pf));
			struct ctl_conn **ncs = npf ? realloc(cs, n * 2 * sizeof(*cs)) : NULL;

			pf = npf ? npf : pf;
			cs = ncs ? ncs : cs;
			if (npf && ncs)
				cap = n * 2;
		}
		if (cap < 2) { /* no memory for even the two fixed entries: try again shortly */
			poll(NULL, 0, 100);
			continue;
		}
		serve_once(ctl, pf, cs, cap);
	}
	while ((c = ctl->conns)) {
		ctl->conns = c->next;
		conn_close(c);
	}
	free(pf);
	free(cs);
	return NULL;
}

CMS_API cms_status cms_control_options_init(cms_control_options *opts)
{
	static const cms_control_options init = CMS_CONTROL_OPTIONS_INIT;

	return cms_ipc_options_init(opts, &init, sizeof(init));
}

CMS_API cms_status cms_control_create(cms_context *ctx, const char *path,
				      const cms_control_options *opts, cms_control **out)
{
	cms_control_options o = CMS_CONTROL_OPTIONS_INIT;
	struct cms_control *ctl;
	char why[256];
	cms_status st;

	if (out)
		*out = NULL;
	st = cms_ipc_check_args(ctx, path, out);
	if (st)
		return st;
	if (opts) {
		st = CMS_COPY_IN(&o, opts, cms_control_options);
		if (st)
			return st;
	}
	if (o.flags & ~(uint64_t)CMS_CONTROL_ALLOW_ALL || o.reserved)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown control flags 0x%llx",
				     (unsigned long long)o.flags);
	st = cms_ipc_check_path(path);
	if (st)
		return st;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate a control socket");
	ctl->ctx = ctx;
	ctl->lfd = ctl->loop.wake[0] = ctl->loop.wake[1] = -1;
	ctl->flags = o.flags;
	ctl->fn = o.fn;
	ctl->user = o.user;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	pthread_mutex_init(&ctl->lock, NULL);
	st = cms_ipc_copy_uids(o.allowed_uids, o.nallowed_uids, &ctl->uids);
	if (st)
		goto err_free;
	ctl->nuids = o.nallowed_uids;
	st = cms_ipc_loop_init(&ctl->loop);
	if (st)
		goto err_free;
	st = cms_ipc_listen(path, &ctl->lfd, &ctl->file, why, sizeof(why));
	if (st) {
		cms_set_error(st, "control socket: %s", why);
		goto err_free;
	}
	st = cms_ipc_loop_start(&ctl->loop, control_thread, ctl, "control socket");
	if (st)
		goto err_listen;
	atomic_fetch_add(&ctx->ipc_objects, 1);
	*out = ctl;
	return CMS_OK;

err_listen:
	close(ctl->lfd);
	cms_ipc_unlink(&ctl->file);
err_free:
	cms_ipc_loop_fini(&ctl->loop);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl->uids);
	free(ctl);
	return st;
}

CMS_API cms_status cms_control_destroy(cms_control *ctl)
{
	cms_context *ctx;
	cms_status st;

	if (!ctl)
		return CMS_OK;
	ctx = ctl->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	cms_ipc_loop_stop(&ctl->loop, &ctl->lock);
	close(ctl->lfd);
	cms_ipc_unlink(&ctl->file);
	cms_ipc_loop_fini(&ctl->loop);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl->uids);
	free(ctl);
	atomic_fetch_sub(&ctx->ipc_objects, 1);
	return CMS_OK;
}
