/* SPDX-License-Identifier: MIT */
/*
 * ipc_import.c - the importer: connects to an exporter, maps the region's
 * memory at a reservation of its own, and serves the exporter's revocations
 * (unmap before the exporter's pause releases) and grants (map again at the
 * same addresses after its resume) on a thread of its own.
 *
 * imp->lock protects the state and the driver objects (handles, mappings);
 * the thread holds it while it imports, maps or unmaps, never while it calls
 * the application's callbacks nor while it waits for a message (a grant's
 * descriptors included). Only the thread reads the socket after open, and
 * every wait of it on the socket ends when the import is closed (the loop's
 * wake pipe cancels it), so a stalled exporter never holds up
 * cms_import_close nor, for longer than a message's deadline (an answer it
 * sends), the lock. Only the thread changes the handles, the mappings and the
 * layout after open (open before the thread starts, close after it ends), so
 * it reads them without the lock.
 *
 * The exporter is not trusted further than its uid check: messages are
 * decoded strictly (ipc_proto.c), descriptors are bounded by what a message
 * announces and closed on every path (ipc_sock.c), a grant is mapped only
 * while nothing of the last one is held, never with more access than asked,
 * and its ERROR statuses are passed on only when an exporter sends them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_internal.h"

struct cms_import {
	cms_context *ctx;
	char path[CMS_IPC_PATH_MAX + 1];
	int fd;
	struct cms_ipc_loop loop;
	bool thread_started;
	pthread_mutex_t lock;
	int32_t device;
	cms_import_quiesce_fn quiesce_fn;
	cms_import_event_fn event_fn;
	void *user;
	/* the layout mapped first (the reservation is laid out after it) */
	struct cms_ipc_msg layout;
	CUdeviceptr base;
	size_t reserved;
	CUmemGenericAllocationHandle *handles; /* layout.nallocs; 0 when none */
	bool *mapped;
	uint32_t state; /* CMS_IMPORT_* */
	uint64_t epoch;
	int32_t error;
	pid_t exporter_pid;
	uid_t exporter_uid;
	uint32_t asked; /* CMS_IPC_ACCESS_* asked for: never mapped with more */
};

static cms_status ifail(cms_import *imp, cms_status st, const char *what, const char *why)
{
	return cms_set_error(st, "import from %s: %s%s%s", imp->path, what, why ? ": " : "",
			     why ? why : "");
}

/*
 * The exporter's ERROR m as this import's failure: the statuses an exporter sends (docs/ipc.md)
 * as they are, any other (CMS_ERR_FORKED, a number that is no status: a peer's bug or lie)
 * as CMS_ERR_INTERNAL, "the exporter failed", which cms_import_open lists. Sets the error.
 */
static cms_status exporter_error(cms_import *imp, const struct cms_ipc_msg *m)
{
	switch (m->status) {
	case CMS_ERR_NOT_FOUND:
	case CMS_ERR_PERMISSION:
	case CMS_ERR_TIMEOUT:
	case CMS_ERR_PROTOCOL:
	case CMS_ERR_DRIVER:
	case CMS_ERR_INTERNAL:
		return cms_set_error(m->status, "import from %s: %s", imp->path, m->text);
	default:
		return cms_set_error(CMS_ERR_INTERNAL,
				     "import from %s: the exporter failed (%s): %s", imp->path,
				     cms_status_name(m->status), m->text);
	}
}

/* Receives on the import's connection (cms_ipc_recv); closing the import cancels the wait. */
static cms_status imp_recv(cms_import *imp, struct cms_ipc_msg *m, int *fds, int64_t deadline,
			   char *why, size_t whylen)
{
	return cms_ipc_recv_cancellable(imp->fd, imp->loop.wake[0], m, fds, deadline, why, whylen);
}

/* Whether a handle or a mapping of the last grant is still held; lock held. */
static bool holds_memory(cms_import *imp)
{
	uint32_t i;

	for (i = 0; imp->handles && i < imp->layout.nallocs; i++)
		if (imp->handles[i] || imp->mapped[i])
			return true;
	return false;
}

/* Unmaps and releases whatever is mapped or held; lock held. Returns the first failure. */
static cms_status unmap_all(cms_import *imp)
{
	cms_context *ctx = imp->ctx;
	cms_status first = CMS_OK, st;
	uint32_t i;

	for (i = 0; i < imp->layout.nallocs; i++) {
		const struct cms_ipc_alloc_desc *d = &imp->layout.allocs[i];

		st = CMS_OK;
		if (imp->mapped[i]) {
			CU_TRY(ctx, cuMemUnmap(imp->base + d->offset, d->physical), st, next);
			imp->mapped[i] = false;
		}
		if (imp->handles[i]) {
			CU_TRY(ctx, cuMemRelease(imp->handles[i]), st, next);
			imp->handles[i] = 0;
		}
	next:
		if (st && !first)
			first = st;
	}
	return first;
}

static bool same_layout(const struct cms_ipc_msg *a, const struct cms_ipc_msg *b)
{
	return a->nallocs == b->nallocs && a->total == b->total &&
	       a->granularity == b->granularity && !strcmp(a->tag, b->tag) &&
	       a->device == b->device &&
	       (!a->nallocs || !memcmp(a->allocs, b->allocs, a->nallocs * sizeof(*a->allocs)));
}

/* Reserves the range for the first layout; lock held. */
static cms_status reserve(cms_import *imp, struct cms_ipc_msg *m)
{
	cms_context *ctx = imp->ctx;
	struct cms_device *dev;
	size_t align;
	cms_status st;

	st = cms_ctx_device(ctx, imp->device, &dev);
	if (st)
		return st;
	align = m->granularity > dev->granularity ? m->granularity : dev->granularity;
	if (m->total % align)
		return ifail(imp, CMS_ERR_NOT_SUPPORTED,
			     "the exporter's granularity does not fit this device", NULL);
	imp->handles = calloc(m->nallocs ? m->nallocs : 1, sizeof(*imp->handles));
	imp->mapped = calloc(m->nallocs ? m->nallocs : 1, sizeof(*imp->mapped));
	if (!imp->handles || !imp->mapped)
		return ifail(imp, CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate the import's table",
			     NULL);
	if (m->total)
		CU_TRY(ctx, cuMemAddressReserve(&imp->base, m->total, align, 0, 0), st, out);
	imp->reserved = m->total;
	imp->layout = *m; /* takes the allocation table */
	m->allocs = NULL;
	m->nallocs = 0;
out:
	return st;
}

/* Imports the nfds descriptors fds of allocations first.. as handles (takes the lock) and
 * closes them all. */
static cms_status import_fds(cms_import *imp, uint32_t first, const int *fds, uint32_t nfds)
{
	cms_context *ctx = imp->ctx;
	cms_status st = CMS_OK;
	uint32_t k;

	pthread_mutex_lock(&imp->lock);
	for (k = 0; k < nfds && !st; k++) {
		CUresult res = ctx->drv.cuMemImportFromShareableHandle(
			&imp->handles[first + k], (void *)(intptr_t)fds[k],
			CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

		if (res != CUDA_SUCCESS) {
			imp->handles[first + k] = 0;
			st = cms_cu_error(&ctx->drv, res, "cuMemImportFromShareableHandle");
		}
	}
	pthread_mutex_unlock(&imp->lock);
	for (k = 0; k < nfds; k++)
		close(fds[k]);
	return st;
}

/* Receives the FDS messages of a grant (lock not held: the exporter may stall) and imports
 * every handle. */
static cms_status import_handles(cms_import *imp, int64_t deadline)
{
	uint32_t next = 0, n = imp->layout.nallocs, k;
	cms_status st = CMS_OK;
	char why[256];

	while (next < n) {
		struct cms_ipc_msg f;
		int fds[CMS_IPC_MAX_FDS];

		st = imp_recv(imp, &f, fds, deadline, why, sizeof(why));
		if (st)
			return ifail(imp, st, "receiving descriptors", why);
		if (f.type == CMS_IPC_ERROR) {
			st = exporter_error(imp, &f);
			cms_ipc_msg_free(&f);
			return st;
		}
		if (f.type != CMS_IPC_FDS || f.first != next || f.nfds > n - next) {
			for (k = 0; k < f.nfds; k++)
				close(fds[k]);
			cms_ipc_msg_free(&f);
			return ifail(imp, CMS_ERR_PROTOCOL, "descriptors out of order", NULL);
		}
		st = import_fds(imp, next, fds, f.nfds);
		next += f.nfds;
		cms_ipc_msg_free(&f);
		if (st)
			return st;
	}
	return CMS_OK;
}

/* Maps every imported handle at its offset with the granted access; lock held. */
static cms_status map_all(cms_import *imp)
{
	cms_context *ctx = imp->ctx;
	CUmemAccessDesc acc;
	cms_status st = CMS_OK;
	uint32_t i;

	memset(&acc, 0, sizeof(acc));
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = imp->device;
	acc.flags = imp->layout.access == CMS_IPC_ACCESS_READWRITE ?
			    CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
			    CU_MEM_ACCESS_FLAGS_PROT_READ;
	for (i = 0; i < imp->layout.nallocs; i++) {
		const struct cms_ipc_alloc_desc *d = &imp->layout.allocs[i];
		CUdeviceptr at = imp->base + d->offset;

		CU_TRY(ctx, cuMemMap(at, d->physical, 0, imp->handles[i], 0), st, out);
		imp->mapped[i] = true;
		CU_TRY(ctx, cuMemSetAccess(at, d->physical, &acc, 1), st, out);
	}
out:
	return st;
}

static void reply(cms_import *imp, uint16_t type, uint64_t seq, cms_status status)
{
	struct cms_ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.seq = seq;
	m.status = status;
	cms_ipc_send_cancellable(imp->fd, imp->loop.wake[0], &m, NULL,
				 cms_ipc_now_ms() + CMS_IPC_IO_MS, NULL, 0);
}

/* A grant of another layout than the one mapped: its descriptors are received (lock not
 * held) and closed, never mapped; the import is LAYOUT_CHANGED. */
static cms_status layout_changed(cms_import *imp, struct cms_ipc_msg *m, int64_t deadline,
				 uint32_t *event)
{
	uint32_t n = m->state == CMS_STATE_ACTIVE ? m->nallocs : 0, got = 0;

	while (got < n) {
		struct cms_ipc_msg f;

		if (imp_recv(imp, &f, NULL, deadline, NULL, 0))
			break;
		got += f.type == CMS_IPC_FDS ? f.nfds : n;
		cms_ipc_msg_free(&f);
	}
	pthread_mutex_lock(&imp->lock);
	imp->state = CMS_IMPORT_LAYOUT_CHANGED;
	imp->error = CMS_ERR_LAYOUT_CHANGED;
	imp->epoch = m->epoch;
	pthread_mutex_unlock(&imp->lock);
	*event = CMS_IMPORT_EVENT_LAYOUT_CHANGED;
	reply(imp, CMS_IPC_MAPPED, m->epoch, CMS_ERR_LAYOUT_CHANGED);
	return cms_set_error(CMS_ERR_LAYOUT_CHANGED,
			     "import from %s: the exporter's region \"%s\" has another "
			     "layout (%u allocations, %llu bytes) than the one mapped (%u, "
			     "%llu): not mapped",
			     imp->path, m->tag, m->nallocs, (unsigned long long)m->total,
			     imp->layout.nallocs, (unsigned long long)imp->layout.total);
}

/* Maps the handles imported and sets the state the grant of epoch ends in (takes the lock);
 * st: how the import of its handles went. */
static cms_status map_grant(cms_import *imp, cms_status st, uint64_t epoch, bool first,
			    uint32_t *event)
{
	char why[512] = "";

	pthread_mutex_lock(&imp->lock);
	if (!st)
		st = map_all(imp);
	if (st) {
		cms_last_error_message(why, sizeof(why));
		if (unmap_all(imp))
			cms_log(imp->ctx, CMS_LOG_ERROR, "import from %s: cleanup failed",
				imp->path);
		imp->state = CMS_IMPORT_FAILED;
		imp->error = st;
		*event = CMS_IMPORT_EVENT_FAILED;
	} else {
		imp->state = CMS_IMPORT_MAPPED;
		imp->error = 0;
		*event = first ? 0 : CMS_IMPORT_EVENT_REMAPPED;
		imp->epoch = epoch;
	}
	pthread_mutex_unlock(&imp->lock);
	reply(imp, CMS_IPC_MAPPED, epoch, st);
	return st ? cms_set_error(st, "%s", why) : CMS_OK;
}

/*
 * Applies a LAYOUT (and receives its descriptors): maps the memory at the
 * import's addresses. Takes the lock to change the state and the driver
 * objects, never while it waits for the exporter. *event: what to tell the
 * application. Returns CMS_OK, or the failure (the state says which: FAILED,
 * LAYOUT_CHANGED, or a broken connection).
 */
static cms_status apply_grant(cms_import *imp, struct cms_ipc_msg *m, int64_t deadline,
			      uint32_t *event)
{
	bool first = !imp->handles;
	cms_status st = CMS_OK;

	*event = 0;
	if (!first && holds_memory(imp))
		/* never sent by an exporter: it grants only after the memory was dropped */
		return ifail(imp, CMS_ERR_PROTOCOL, "a grant while the last one is still mapped",
			     NULL);
	if (!first && !same_layout(&imp->layout, m))
		return layout_changed(imp, m, deadline, event);
	pthread_mutex_lock(&imp->lock);
	if (first)
		st = reserve(imp, m);
	if (!st) {
		imp->layout.access =
			imp->asked == CMS_IPC_ACCESS_READ ? CMS_IPC_ACCESS_READ : m->access;
		imp->layout.state = m->state;
		if (m->state != CMS_STATE_ACTIVE) {
			imp->state = CMS_IMPORT_REVOKED;
			imp->epoch = m->epoch;
		}
	}
	pthread_mutex_unlock(&imp->lock);
	if (st || m->state != CMS_STATE_ACTIVE)
		return st;
	return map_grant(imp, import_handles(imp, deadline), m->epoch, first, event);
}

/* The exporter pauses: consent, wait for our GPU work, unmap, release, acknowledge. */
static void drop_mappings(cms_import *imp, uint64_t seq)
{
	cms_context *ctx = imp->ctx;
	cms_status st = CMS_OK;
	uint64_t epoch;
	bool had;

	pthread_mutex_lock(&imp->lock);
	had = imp->state == CMS_IMPORT_MAPPED;
	epoch = imp->epoch;
	pthread_mutex_unlock(&imp->lock);
	if (had) {
		if (imp->quiesce_fn) {
			st = imp->quiesce_fn(imp->user, imp, epoch);
			if (st >= 0)
				st = CMS_OK;
		} else {
			st = cms_push(ctx, imp->device);
			if (!st) {
				CUresult res = ctx->drv.cuCtxSynchronize();

				if (res != CUDA_SUCCESS)
					st = cms_cu_error(&ctx->drv, res, "cuCtxSynchronize");
				cms_pop(ctx);
			}
		}
	}
	pthread_mutex_lock(&imp->lock);
	if (!st && imp->state == CMS_IMPORT_MAPPED) {
		st = unmap_all(imp);
		imp->state = st ? CMS_IMPORT_FAILED : CMS_IMPORT_REVOKED;
		imp->error = st;
	}
	reply(imp, CMS_IPC_REVOKED, seq, st);
	pthread_mutex_unlock(&imp->lock);
	if (had && !st && imp->event_fn)
		imp->event_fn(imp->user, imp, CMS_IMPORT_EVENT_REVOKED, epoch);
}

static void disconnected(cms_import *imp, cms_status why)
{
	uint64_t epoch;

	pthread_mutex_lock(&imp->lock);
	imp->state = CMS_IMPORT_DISCONNECTED;
	imp->error = why;
	epoch = imp->epoch;
	pthread_mutex_unlock(&imp->lock);
	if (imp->event_fn)
		imp->event_fn(imp->user, imp, CMS_IMPORT_EVENT_DISCONNECTED, epoch);
}

static void *serve(void *arg)
{
	cms_import *imp = arg;

	for (;;) {
		struct cms_ipc_msg m;
		uint32_t event = 0;
		char why[256];
		cms_status st;
		int rc;

		rc = cms_ipc_loop_wait(&imp->loop, imp->fd);
		if (rc < 0)
			break;
		if (!rc)
			continue;
		st = imp_recv(imp, &m, NULL, cms_ipc_now_ms() + CMS_IPC_IO_MS, why, sizeof(why));
		if (st && cms_ipc_loop_stopping(&imp->loop))
			break; /* cancelled: the import is closing */
		if (st) {
			cms_log(imp->ctx, st == CMS_ERR_DISCONNECTED ? CMS_LOG_INFO : CMS_LOG_WARN,
				"import from %s: %s", imp->path, why);
			disconnected(imp, st == CMS_ERR_TIMEOUT	 ? CMS_ERR_PROTOCOL :
					  st == CMS_ERR_PROTOCOL ? st :
								   CMS_ERR_DISCONNECTED);
			break;
		}
		switch (m.type) {
		case CMS_IPC_REVOKE:
			drop_mappings(imp, m.seq);
			break;
		case CMS_IPC_LAYOUT:
			st = apply_grant(imp, &m, cms_ipc_now_ms() + CMS_IPC_GRANT_MS, &event);
			if (st && cms_ipc_loop_stopping(&imp->loop)) {
				cms_ipc_msg_free(&m);
				return NULL; /* cancelled: the import is closing */
			}
			if (st)
				cms_log(imp->ctx, CMS_LOG_WARN, "%s", cms_last_error());
			if (event && imp->event_fn)
				imp->event_fn(imp->user, imp, event, m.epoch);
			if (st == CMS_ERR_PROTOCOL || st == CMS_ERR_TIMEOUT || st == CMS_ERR_IO ||
			    st == CMS_ERR_DISCONNECTED) {
				/* the stream is out of step: the connection is over */
				cms_ipc_msg_free(&m);
				disconnected(imp,
					     st == CMS_ERR_DISCONNECTED ? st : CMS_ERR_PROTOCOL);
				return NULL;
			}
			break;
		case CMS_IPC_ERROR:
			cms_log(imp->ctx, CMS_LOG_WARN, "import from %s: the exporter says %s: %s",
				imp->path, cms_status_name(m.status), m.text);
			break;
		default:
			cms_log(imp->ctx, CMS_LOG_WARN, "import from %s: unexpected message %u",
				imp->path, m.type);
			break;
		}
		cms_ipc_msg_free(&m);
	}
	return NULL;
}

/* ---- public API ---- */

CMS_API cms_status cms_import_options_init(cms_import_options *opts)
{
	static const cms_import_options init = CMS_IMPORT_OPTIONS_INIT;

	return cms_ipc_options_init(opts, &init, sizeof(init));
}

/* Connects, checks the exporter's uid and sends HELLO. */
static cms_status hello(cms_import *imp, const char *tag, const cms_import_options *o)
{
	struct cms_ipc_msg m;
	char why[256];
	cms_status st;

	st = cms_ipc_connect(imp->path, &imp->fd, why, sizeof(why));
	if (st)
		return ifail(imp, st, "connect", why);
	st = cms_ipc_peer(imp->fd, &imp->exporter_pid, &imp->exporter_uid, why, sizeof(why));
	if (st)
		return ifail(imp, st, "peer credentials", why);
	if (!cms_ipc_uid_allowed(imp->exporter_uid, o->allowed_uids, o->nallowed_uids))
		return cms_set_error(CMS_ERR_PERMISSION,
				     "import from %s: the exporter runs as uid %u, not allowed",
				     imp->path, (unsigned)imp->exporter_uid);
	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_HELLO;
	snprintf(m.tag, sizeof(m.tag), "%s", tag);
	m.device = o->exporter_device;
	m.access =
		(o->flags & CMS_IMPORT_READ_ONLY) ? CMS_IPC_ACCESS_READ : CMS_IPC_ACCESS_READWRITE;
	imp->asked = m.access;
	if (o->name)
		snprintf(m.name, sizeof(m.name), "%s", o->name);
	st = cms_ipc_send(imp->fd, &m, NULL, cms_ipc_now_ms() + CMS_IPC_IO_MS, why, sizeof(why));
	if (st) {
		/* The exporter may have refused us at once: its ERROR says why. */
		struct cms_ipc_msg e;

		if (!cms_ipc_recv(imp->fd, &e, NULL, cms_ipc_now_ms() + 1000, NULL, 0)) {
			if (e.type == CMS_IPC_ERROR)
				st = exporter_error(imp, &e);
			cms_ipc_msg_free(&e);
			if (st != CMS_ERR_DISCONNECTED)
				return st;
		}
		return ifail(imp, st, "sending the request", why);
	}
	return CMS_OK;
}

static void import_free(cms_import *imp)
{
	if (imp->fd >= 0)
		close(imp->fd);
	cms_ipc_loop_fini(&imp->loop);
	pthread_mutex_destroy(&imp->lock);
	cms_ipc_msg_free(&imp->layout);
	free(imp->handles);
	free(imp->mapped);
	free(imp);
}

/* Unmaps, releases and frees the reservation; returns the first failure. */
static cms_status teardown(cms_import *imp)
{
	cms_status st, rs = CMS_OK;

	st = unmap_all(imp);
	if (imp->reserved) {
		CU_TRY(imp->ctx, cuMemAddressFree(imp->base, imp->reserved), rs, out);
		imp->reserved = 0;
	}
out:
	return st ? st : rs;
}

static bool valid_name(const char *s)
{
	size_t n;

	if (!s)
		return true;
	n = strnlen(s, CMS_IPC_MAX_NAME + 1);
	if (n > CMS_IPC_MAX_NAME)
		return false;
	while (n--)
		if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f)
			return false;
	return true;
}

CMS_API cms_status cms_import_open(cms_context *ctx, const char *path, const char *tag,
				   const cms_import_options *opts, cms_import **out)
{
	cms_import_options o = CMS_IMPORT_OPTIONS_INIT;
	struct cms_ipc_msg m;
	uint32_t event;
	int64_t deadline;
	cms_import *imp;
	char why[256];
	cms_status st;

	if (out)
		*out = NULL;
	st = cms_ipc_check_args(ctx, path, out);
	if (st)
		return st;
	st = cms_check_tag(tag);
	if (st)
		return st;
	if (opts) {
		st = CMS_COPY_IN(&o, opts, cms_import_options);
		if (st)
			return st;
	}
	if (o.flags & ~(uint64_t)CMS_IMPORT_READ_ONLY)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown import flags 0x%llx",
				     (unsigned long long)o.flags);
	if (o.exporter_device < -1 || o.exporter_device >= CMS_MAX_DEVICES || !valid_name(o.name) ||
	    (o.nallowed_uids && !o.allowed_uids))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "exporter_device %d, name or allowed_uids is invalid",
				     o.exporter_device);
	st = cms_ipc_check_path(path);
	if (st)
		return st;
	st = cms_ctx_device(ctx, o.device, NULL);
	if (st)
		return st;
	deadline = cms_ipc_now_ms() + (o.timeout_ms ? o.timeout_ms : CMS_IPC_DEFAULT_TIMEOUT_MS);
	imp = calloc(1, sizeof(*imp));
	if (!imp)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate an import");
	imp->ctx = ctx;
	imp->fd = imp->loop.wake[0] = imp->loop.wake[1] = -1;
	imp->device = o.device;
	imp->quiesce_fn = o.quiesce_fn;
	imp->event_fn = o.event_fn;
	imp->user = o.user;
	snprintf(imp->path, sizeof(imp->path), "%s", path);
	pthread_mutex_init(&imp->lock, NULL);
	st = cms_ipc_loop_init(&imp->loop);
	if (st)
		goto err_free;
	st = hello(imp, tag, &o);
	if (st)
		goto err_free;
	st = cms_ipc_recv(imp->fd, &m, NULL, deadline, why, sizeof(why));
	if (st) {
		ifail(imp, st, "waiting for the grant", why);
		goto err_free;
	}
	if (m.type != CMS_IPC_LAYOUT) {
		st = m.type == CMS_IPC_ERROR ?
			     exporter_error(imp, &m) :
			     ifail(imp, CMS_ERR_PROTOCOL, "unexpected first message", NULL);
		cms_ipc_msg_free(&m);
		goto err_free;
	}
	st = apply_grant(imp, &m, deadline, &event);
	cms_ipc_msg_free(&m);
	if (st)
		goto err_teardown;
	st = cms_ipc_loop_start(&imp->loop, serve, imp, "import");
	if (st)
		goto err_teardown;
	imp->thread_started = true;
	atomic_fetch_add(&cms_ctx_ipc(ctx)->objects, 1);
	*out = imp;
	return CMS_OK;

err_teardown : {
	char saved[512];

	cms_last_error_message(saved, sizeof(saved));
	if (teardown(imp))
		cms_log(ctx, CMS_LOG_ERROR, "import from %s: cleanup failed", path);
	cms_set_error(st, "%s", saved);
}
err_free:
	import_free(imp);
	return st;
}

CMS_API cms_status cms_import_close(cms_import *imp)
{
	cms_context *ctx;
	cms_status st;

	if (!imp)
		return CMS_OK;
	ctx = imp->ctx;
	st = cms_check_fork(ctx);
	if (st)
		return st;
	cms_ipc_loop_stop(&imp->loop);
	st = teardown(imp);
	import_free(imp);
	atomic_fetch_sub(&cms_ctx_ipc(ctx)->objects, 1);
	return st;
}

CMS_API cms_status cms_import_info_get(cms_import *imp, cms_import_info *info)
{
	cms_import_info o;
	cms_status st;

	if (!imp || !info)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", imp ? "info" : "imp");
	st = cms_check_fork(imp->ctx);
	if (st)
		return st;
	st = CMS_CHECK_OUT(info, cms_import_info);
	if (st)
		return st;
	memset(&o, 0, sizeof(o));
	o.struct_size = sizeof(o);
	pthread_mutex_lock(&imp->lock);
	memcpy(o.tag, imp->layout.tag, sizeof(o.tag));
	o.exporter_device = imp->layout.device;
	o.device = imp->device;
	o.state = imp->state;
	o.access = imp->layout.access;
	o.epoch = imp->epoch;
	o.allocations = imp->layout.nallocs;
	o.base = imp->base;
	o.bytes = imp->reserved;
	o.exporter_pid = imp->exporter_pid;
	o.exporter_uid = imp->exporter_uid;
	o.error = imp->error;
	pthread_mutex_unlock(&imp->lock);
	cms_copy_out(info, &o, sizeof(o));
	return CMS_OK;
}

/* The status a lookup returns in the import's state; lock held. */
static cms_status usable(cms_import *imp)
{
	switch (imp->state) {
	case CMS_IMPORT_DISCONNECTED:
		return cms_set_error(imp->error ? imp->error : CMS_ERR_DISCONNECTED,
				     "import from %s: the exporter (pid %d) is gone", imp->path,
				     (int)imp->exporter_pid);
	case CMS_IMPORT_LAYOUT_CHANGED:
		return cms_set_error(CMS_ERR_LAYOUT_CHANGED,
				     "import from %s: the exporter's layout changed; close and "
				     "import again",
				     imp->path);
	case CMS_IMPORT_FAILED:
		return cms_set_error(imp->error, "import from %s: the last grant failed (%s)",
				     imp->path, cms_status_name(imp->error));
	default:
		return CMS_OK;
	}
}

CMS_API cms_status cms_import_alloc_get(cms_import *imp, uint64_t index, uint64_t *ptr,
					uint64_t *size)
{
	cms_status st;

	if (!imp)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "imp is NULL");
	st = cms_check_fork(imp->ctx);
	if (st)
		return st;
	pthread_mutex_lock(&imp->lock);
	st = usable(imp);
	if (!st && index >= imp->layout.nallocs)
		st = cms_set_error(CMS_ERR_INVALID_ARGUMENT, "index %llu of %u allocations",
				   (unsigned long long)index, imp->layout.nallocs);
	if (!st) {
		if (ptr)
			*ptr = imp->base + imp->layout.allocs[index].offset;
		if (size)
			*size = imp->layout.allocs[index].size;
	}
	pthread_mutex_unlock(&imp->lock);
	return st;
}

CMS_API cms_status cms_import_translate(cms_import *imp, uint64_t exporter_ptr, uint64_t *ptr)
{
	uint32_t lo = 0, hi;
	cms_status st;

	if (!imp || !ptr)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s is NULL", imp ? "ptr" : "imp");
	st = cms_check_fork(imp->ctx);
	if (st)
		return st;
	pthread_mutex_lock(&imp->lock);
	st = usable(imp);
	hi = imp->layout.nallocs;
	while (!st && lo < hi) { /* allocations are in the exporter's address order */
		uint32_t mid = lo + (hi - lo) / 2;
		const struct cms_ipc_alloc_desc *d = &imp->layout.allocs[mid];

		if (exporter_ptr < d->exporter_ptr)
			hi = mid;
		else if (exporter_ptr - d->exporter_ptr >= d->size)
			lo = mid + 1;
		else {
			*ptr = imp->base + d->offset + (exporter_ptr - d->exporter_ptr);
			break;
		}
	}
	if (!st && lo >= hi)
		st = cms_set_error(CMS_ERR_NOT_FOUND,
				   "0x%llx is in no allocation of the imported region",
				   (unsigned long long)exporter_ptr);
	pthread_mutex_unlock(&imp->lock);
	return st;
}
