/* SPDX-License-Identifier: MIT */
/*
 * control.c - the control socket: another process (cmsctl --socket PATH)
 * asks for the status of the context's regions, or to pause / resume a tag;
 * the application's callback decides. One request at a time, on the thread
 * of the control socket's server (ipc_server.c), which reads every
 * connection without waiting and writes replies as each client reads (a
 * client that sends nothing, half a request, or does not read its reply
 * delays nobody), closes a connection whose request is not whole within
 * CMS_IPC_IDLE_MS, and past CMS_IPC_CONTROL_CONNS closes one that waits for
 * its request to make room for a new one (ipc.h says which).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters.h"

struct cms_control {
	cms_context *ctx;
	struct cms_ipc_server srv;
	uint64_t flags;
	cms_control_fn fn;
	void *user;
};

/* Queues m for c and writes what the socket takes now (the server thread's). */
static void reply(struct cms_ipc_server *s, struct cms_ipc_conn *c, const struct cms_ipc_msg *m)
{
	pthread_mutex_lock(&s->lock);
	cms_ipc_conn_queue(s, c, m, NULL);
	pthread_mutex_unlock(&s->lock);
	cms_ipc_conn_flush(s, c);
}

static void progress(struct cms_ipc_server *s, struct cms_ipc_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void progress(struct cms_ipc_server *s, struct cms_ipc_conn *c, const char *fmt, ...)
{
	struct cms_ipc_msg m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_CTL_PROGRESS;
	va_start(ap, fmt);
	vsnprintf(m.text, sizeof(m.text), fmt, ap);
	va_end(ap);
	reply(s, c, &m);
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
	const char *name = cms_ipc_op_name(op); /* a request decoded: a known operation */

	return name ? name : "?";
}

/* Serves the request q received on c (the server thread's); the reply is queued. Returns
 * true: c is closed once the reply is written. */
static bool serve_request(struct cms_ipc_server *s, struct cms_ipc_conn *c,
			  struct cms_ipc_msg *q_in)
{
	struct cms_control *ctl = s->owner;
	const struct cms_ipc_msg q = *q_in;
	cms_control_request req;
	struct cms_ipc_msg m;
	cms_status st;

	if (q.type != CMS_IPC_CTL_REQUEST) {
		pthread_mutex_lock(&s->lock);
		cms_ipc_conn_fail(s, c, CMS_ERR_PROTOCOL, "expected a control request");
		pthread_mutex_unlock(&s->lock);
		return true;
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
	req.peer_pid = (int32_t)c->pid;
	req.peer_uid = (uint32_t)c->uid;
	if (ctl->fn) {
		progress(s, c, "asking the application to %s \"%s\"", op_name(q.op), q.tag);
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
	progress(s, c, "%s \"%s\"...", q.op == CMS_IPC_OP_PAUSE ? "pausing" : "resuming", q.tag);
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
	reply(s, c, &m);
	cms_ipc_msg_free(&m);
	return true;
}

/* Every connection waits for its one request (it is closed once that is answered). */
static bool waits_request(const struct cms_ipc_conn *c)
{
	(void)c;
	return true;
}

static const struct cms_ipc_server_ops control_ops = {
	.what = "control socket",
	.where = "on",
	.conn_size = sizeof(struct cms_ipc_conn),
	.max_conns = CMS_IPC_CONTROL_CONNS,
	.message = serve_request,
	.idle = waits_request,
};

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
	ctl->flags = o.flags;
	ctl->fn = o.fn;
	ctl->user = o.user;
	st = cms_ipc_server_open(&ctl->srv, ctx, path, &control_ops, ctl, o.allowed_uids,
				 o.nallowed_uids);
	if (st)
		goto err_free;
	st = cms_ipc_server_start(&ctl->srv);
	if (st)
		goto err_server;
	atomic_fetch_add(&cms_ctx_ipc(ctx)->objects, 1);
	*out = ctl;
	return CMS_OK;

err_server:
	cms_ipc_server_close(&ctl->srv);
err_free:
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
	cms_ipc_server_close(&ctl->srv);
	free(ctl);
	atomic_fetch_sub(&cms_ctx_ipc(ctx)->objects, 1);
	return CMS_OK;
}
