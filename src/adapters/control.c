/* SPDX-License-Identifier: MIT */
/*
 * control.c - the control socket: another process (cmsctl --socket PATH)
 * asks for the status of the context's regions, or to pause / resume a tag;
 * the application's callback decides. One request at a time, on the control
 * socket's own thread.
 */
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
	struct cms_ipc_loop loop;
	pthread_mutex_t lock; /* loop.stop */
	uint64_t flags;
	cms_control_fn fn;
	void *user;
	uint32_t *uids;
	uint32_t nuids;
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

static const char *op_name(uint32_t op)
{
	return op == CMS_IPC_OP_PAUSE ? "pause" : op == CMS_IPC_OP_RESUME ? "resume" : "status";
}

/* Serves one request on fd from pid/uid. */
static void serve_request(struct cms_control *ctl, int fd, pid_t pid, uid_t uid)
{
	cms_control_request req;
	struct cms_ipc_msg q, m;
	int fds[CMS_IPC_MAX_FDS];
	char why[256];
	cms_status st;

	st = cms_ipc_recv(fd, &q, fds, cms_ipc_now_ms() + CMS_IPC_IO_MS, why, sizeof(why));
	if (st) {
		if (st == CMS_ERR_PROTOCOL)
			cms_ipc_send_error(fd, st, why);
		cms_log(ctl->ctx, CMS_LOG_WARN, "control %s: pid %d: %s", ctl->path, (int)pid, why);
		return;
	}
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

static void *control_thread(void *arg)
{
	struct cms_control *ctl = arg;

	for (;;) {
		char why[256];
		pid_t pid;
		uid_t uid;
		int fd, rc;

		rc = cms_ipc_loop_wait(&ctl->loop, &ctl->lock, ctl->lfd);
		if (rc < 0)
			break;
		if (!rc || cms_ipc_accept(ctl->lfd, ctl->uids, ctl->nuids, "on", ctl->path, &fd,
					  &pid, &uid, why, sizeof(why)))
			continue;
		serve_request(ctl, fd, pid, uid);
		close(fd);
	}
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
		st = cms_copy_in(&o, sizeof(o), CMS_CONTROL_OPTIONS_SIZE_VER0, opts,
				 "cms_control_options");
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
	st = cms_ipc_listen(path, &ctl->lfd, why, sizeof(why));
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
	unlink(ctl->path);
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
	unlink(ctl->path);
	cms_ipc_loop_fini(&ctl->loop);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl->uids);
	free(ctl);
	atomic_fetch_sub(&ctx->ipc_objects, 1);
	return CMS_OK;
}
