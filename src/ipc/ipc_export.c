/* SPDX-License-Identifier: MIT */
/*
 * ipc_export.c - the exporter: publishes shareable regions on a Unix socket,
 * grants their memory to importers as descriptors, and revokes it before a
 * pause (cms_ipc_revoke, called by the pause engine with the region locks
 * held) and grants it again after a resume (cms_ipc_regrant).
 *
 * Threads and locks. The exporter is a socket server (ipc_server.c): its
 * thread is the only one that reads or writes the sockets, never under a lock;
 * grants and revocations are queued under exp->srv.lock (the server's lock)
 * and written as each importer reads, so a stalled importer costs only itself.
 * Lock order: region lock, then exp->srv.lock, then ctx->lock. The server
 * thread never blocks on a region lock: a grant needs the region's lock to
 * read a consistent layout and export live handles, so it uses trylock and,
 * when a pause or resume holds the lock, retries a few milliseconds later. A
 * grant's descriptors are exported in batches of up to CMS_IPC_MAX_FDS, the
 * next once the previous one is written (so the exporter holds at most
 * GRANT_FDS_QUEUED of them). A revocation asked during a grant is queued
 * after its last batch: while the pausing thread waits for the answers
 * (pub->waiting) it holds the region's lock and changes nothing, so the
 * server thread goes on exporting the batches without taking that lock. A
 * pausing thread waits for the importers' answers on exp->srv.cond, which the
 * server thread signals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ipc_internal.h"

/* Descriptors queued for importers at most, all of them together (a batch beyond waits). */
#define GRANT_FDS_QUEUED (2 * CMS_IPC_MAX_FDS)

enum conn_state {
	C_HELLO,    /* connected, no request yet */
	C_GRANT,    /* a grant is due (queued by the server thread when it gets the region lock) */
	C_MAPPED,   /* granted the memory (may still be receiving or mapping it) */
	C_REVOKING, /* asked to drop it, no answer yet */
	C_REVOKED,  /* holds no mapping: waits for a grant */
	C_FAILED,   /* could not map a grant (layout changed, error): not granted again */
};

struct conn {
	struct cms_ipc_conn base; /* first: the server's part; exp->srv.lock */
	char name[CMS_IPC_MAX_NAME + 1];
	enum conn_state state;
	struct cms_ipc_pub *pub;
	uint32_t access;
	uint64_t seq;	 /* of the revocation asked */
	bool revoke_due; /* asked during a grant: the revocation follows its descriptors */
	bool answered;
	int32_t answer;
	/* A grant whose descriptors are not all queued yet: the allocations' addresses in the
	 * layout's order and the next to export; exp->srv.lock (exported under the region's
	 * lock, or while a pause that holds it waits: pub->waiting). */
	CUdeviceptr *grant;
	uint32_t grant_n, grant_next;
};

struct cms_exporter {
	cms_context *ctx;
	struct cms_ipc_server srv; /* srv.lock: the connections, pubs, seq, waiting */
	uint32_t timeout_ms;
	struct cms_ipc_pub *pubs;
	uint64_t seq;
};

/* The exporter's connections, in order (exp->srv.lock held). */
static struct conn *first_conn(struct cms_exporter *exp)
{
	return (struct conn *)exp->srv.conns;
}

static struct conn *next_conn(struct conn *c)
{
	return (struct conn *)c->base.next;
}

static void conn_name(const struct conn *c, char *buf, size_t len)
{
	snprintf(buf, len, "importer pid %d (uid %u%s%s%s)", (int)c->base.pid,
		 (unsigned)c->base.uid, c->name[0] ? ", \"" : "", c->name, c->name[0] ? "\"" : "");
}

static bool conn_live(const struct conn *c)
{
	return cms_ipc_conn_live(&c->base);
}

/* Queues m (and its descriptors, which the queue takes) for c; exp->srv.lock held. */
static cms_status conn_send(struct cms_exporter *exp, struct conn *c, const struct cms_ipc_msg *m,
			    int *fds)
{
	return cms_ipc_conn_queue(&exp->srv, &c->base, m, fds);
}

static void conn_error(struct cms_exporter *exp, struct conn *c, cms_status st, const char *text)
{
	cms_ipc_conn_fail(&exp->srv, &c->base, st, text);
}

static void grant_end(struct conn *c)
{
	free(c->grant);
	c->grant = NULL;
	c->grant_n = c->grant_next = 0;
}

/* ---- grants ---- */

static int cmp_base(const void *a, const void *b)
{
	const struct cms_alloc *x = *(struct cms_alloc *const *)a,
			       *y = *(struct cms_alloc *const *)b;

	return x->base < y->base ? -1 : x->base > y->base;
}

/*
 * Queues the region's layout and, when active and not empty, starts the grant of its
 * descriptors (grant_batch). settled: cms_region_settle's status, taken before
 * exp->srv.lock. Region lock and exp->srv.lock held. On a failure the importer gets an
 * ERROR and is dropped.
 */
static void send_grant(struct cms_exporter *exp, struct conn *c, cms_status settled)
{
	struct cms_region *r = c->pub->region;
	cms_context *ctx = exp->ctx;
	struct cms_alloc **v = NULL, *a;
	struct cms_ipc_msg m;
	size_t n = 0, i;
	uint64_t off = 0;
	char why[CMS_IPC_MAX_TEXT];

	memset(&m, 0, sizeof(m));
	grant_end(c);
	if (r->dead) {
		conn_error(exp, c, CMS_ERR_NOT_FOUND, "the region was destroyed");
		return;
	}
	if (r->nallocs) {
		v = malloc(r->nallocs * sizeof(*v));
		m.allocs = calloc(r->nallocs, sizeof(*m.allocs));
		c->grant = r->state == CMS_STATE_ACTIVE ? malloc(r->nallocs * sizeof(*c->grant)) :
							  NULL;
		if (!v || !m.allocs || (r->state == CMS_STATE_ACTIVE && !c->grant)) {
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
	if (r->state == CMS_STATE_ACTIVE && settled) {
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
	for (i = 0; i < n; i++)
		c->grant[i] = v[i]->base;
	c->grant_n = (uint32_t)n;
out:
	if (!c->grant_n)
		grant_end(c);
	free(m.allocs);
	free(v);
}

/*
 * The handles of the next batch of c's grant: each allocation still in the region at its
 * address, with memory. Region lock held (takes ctx->lock). Returns the count, 0 when one
 * is gone (its address in why).
 */
static uint32_t batch_handles(struct conn *c, CUmemGenericAllocationHandle *h, char *why,
			      size_t whylen)
{
	struct cms_region *r = c->pub->region;
	cms_context *ctx = r->ctx;
	uint32_t nf = c->grant_n - c->grant_next, k;

	if (nf > CMS_IPC_MAX_FDS)
		nf = CMS_IPC_MAX_FDS;
	pthread_mutex_lock(&ctx->lock);
	for (k = 0; k < nf; k++) {
		CUdeviceptr base = c->grant[c->grant_next + k];
		struct cms_alloc *a = cms_index_find(ctx, base);

		if (!a || a->region != r || a->base != base || a->claimed ||
		    !cms_alloc_vmm(a)->handle || !a->mapped || r->state != CMS_STATE_ACTIVE ||
		    r->dead) {
			snprintf(why, whylen,
				 "exporter: the allocation at 0x%llx was freed during its grant",
				 (unsigned long long)base);
			nf = 0;
			break;
		}
		h[k] = cms_alloc_vmm(a)->handle;
	}
	pthread_mutex_unlock(&ctx->lock);
	return nf;
}

/*
 * Exports and queues the next batch of c's grant (FDS, up to CMS_IPC_MAX_FDS descriptors,
 * closed once written). Region lock and exp->srv.lock held. On a failure the importer gets
 * an ERROR and is dropped.
 */
static void grant_batch(struct cms_exporter *exp, struct conn *c)
{
	CUmemGenericAllocationHandle h[CMS_IPC_MAX_FDS];
	int fds[CMS_IPC_MAX_FDS];
	cms_context *ctx = exp->ctx;
	char why[CMS_IPC_MAX_TEXT];
	struct cms_ipc_msg f;
	uint32_t nf, k;
	CUresult res = CUDA_SUCCESS;

	nf = batch_handles(c, h, why, sizeof(why));
	if (!nf)
		goto err_fail;
	if (cms_push(ctx, c->pub->region->device)) {
		cms_last_error_message(why, sizeof(why));
		goto err_fail;
	}
	for (k = 0; k < nf && res == CUDA_SUCCESS; k++) {
		res = ctx->drv.cuMemExportToShareableHandle(
			&fds[k], h[k], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
		if (res != CUDA_SUCCESS)
			snprintf(why, sizeof(why),
				 "exporter: cuMemExportToShareableHandle of 0x%llx: %s",
				 (unsigned long long)c->grant[c->grant_next + k],
				 cms_driver_error_name(&ctx->drv, res));
	}
	cms_pop(ctx);
	if (res != CUDA_SUCCESS) {
		k--; /* the failed one holds no descriptor */
		while (k-- > 0)
			close(fds[k]);
		goto err_fail;
	}
	memset(&f, 0, sizeof(f));
	f.type = CMS_IPC_FDS;
	f.first = c->grant_next;
	f.nfds = nf;
	c->grant_next += nf;
	if (conn_send(exp, c, &f, fds) || c->grant_next == c->grant_n)
		grant_end(c);
	if (!c->grant_n && c->revoke_due) { /* asked during the grant: now its turn */
		memset(&f, 0, sizeof(f));
		f.type = CMS_IPC_REVOKE;
		f.seq = c->seq;
		c->revoke_due = false;
		conn_send(exp, c, &f, NULL);
	}
	return;

err_fail:
	grant_end(c);
	c->revoke_due = false;
	conn_error(exp, c, CMS_ERR_DRIVER, why);
	c->state = C_FAILED;
	pthread_cond_broadcast(&exp->srv.cond);
}

/* Whether c has grant work now (exp->srv.lock held); *deferred when it waits for room. */
static bool grant_due(struct cms_exporter *exp, struct conn *c, bool *deferred)
{
	bool due = false, room = false;

	if (!conn_live(c))
		return false;
	if (c->state == C_GRANT) {
		due = true;
		room = exp->srv.out_bytes < CMS_IPC_OUT_MAX;
	} else if (c->grant_next < c->grant_n && !c->base.out) {
		due = true; /* the previous batch is written */
		room = exp->srv.out_fds + CMS_IPC_MAX_FDS <= GRANT_FDS_QUEUED;
	}
	if (due && !room)
		*deferred = true;
	return due && room;
}

/* Grant work due on the connections: done with the region lock taken without waiting.
 * Returns true when some waits for a lock or for room (try again shortly). */
static bool run_grants(struct cms_ipc_server *s)
{
	struct conn *c;
	struct cms_exporter *exp = s->owner;
	bool pending = false;

	pthread_mutex_lock(&s->lock);
	for (c = first_conn(exp); c; c = next_conn(c)) {
		struct cms_region *r;
		cms_status settled;

		if (!grant_due(exp, c, &pending))
			continue;
		if (c->state != C_GRANT && c->pub->waiting) {
			/* the pausing thread holds the region's lock and waits */
			grant_batch(exp, c);
			continue;
		}
		r = c->pub->region;
		pthread_mutex_unlock(&s->lock); /* lock order: region, then the server's */
		if (pthread_mutex_trylock(&r->lock)) {
			pending = true;
			pthread_mutex_lock(&s->lock);
			continue;
		}
		/* an async resume's restore is waited for without the server's lock */
		settled = r->state == CMS_STATE_ACTIVE ? cms_region_settle(r) : CMS_OK;
		pthread_mutex_lock(&s->lock);
		if (conn_live(c) && c->state == C_GRANT)
			send_grant(exp, c, settled);
		else if (conn_live(c) && c->grant_next < c->grant_n && !c->base.out)
			grant_batch(exp, c);
		pthread_mutex_unlock(&r->lock);
	}
	pthread_mutex_unlock(&s->lock);
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

/* Handles one message; exp->srv.lock held. Returns true to close the connection. */
static bool handle(struct cms_exporter *exp, struct conn *c, const struct cms_ipc_msg *m)
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
			return true;
		}
		c->access = m->access & c->pub->access;
		c->state = C_GRANT;
		cms_log(exp->ctx, CMS_LOG_INFO, "exporter %s: %s imports \"%s\"", exp->srv.path,
			who, m->tag);
		return false;
	case CMS_IPC_MAPPED:
		if (m->status && c->state == C_MAPPED) {
			c->state = C_FAILED;
			cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: %s could not map: %s",
				exp->srv.path, who, cms_status_name(m->status));
		}
		return false;
	case CMS_IPC_REVOKED:
		if (c->state != C_REVOKING || m->seq != c->seq)
			return false; /* an answer to an older request */
		c->answered = true;
		c->answer = m->status;
		if (!c->pub->waiting) /* a late answer: the pause gave up, memory still there */
			c->state = m->status ? C_MAPPED : C_GRANT;
		pthread_cond_broadcast(&exp->srv.cond);
		return false;
	case CMS_IPC_ERROR:
		cms_log(exp->ctx, CMS_LOG_WARN, "exporter %s: %s reports %s: %s", exp->srv.path,
			who, cms_status_name(m->status), m->text);
		return true;
	default:
		break;
	}
	conn_error(exp, c, CMS_ERR_PROTOCOL, "unexpected message");
	return true;
}

static bool on_message(struct cms_ipc_server *s, struct cms_ipc_conn *b, struct cms_ipc_msg *m)
{
	bool bye;

	pthread_mutex_lock(&s->lock);
	bye = handle(s->owner, (struct conn *)b, m);
	pthread_mutex_unlock(&s->lock);
	return bye;
}

static bool waits_hello(const struct cms_ipc_conn *b)
{
	return ((const struct conn *)b)->state == C_HELLO;
}

static void on_closed(struct cms_ipc_server *s, struct cms_ipc_conn *b)
{
	(void)s;
	grant_end((struct conn *)b);
}

static const struct cms_ipc_server_ops export_ops = {
	.what = "exporter",
	.where = "to import from",
	.conn_size = sizeof(struct conn),
	.max_conns = CMS_IPC_EXPORTER_CONNS,
	.message = on_message,
	.idle = waits_hello,
	.round = run_grants,
	.closed = on_closed,
};

/* ---- pause/resume hooks (region locks held by the caller) ---- */

static void regrant_pub(struct cms_ipc_pub *p)
{
	struct conn *c;
	struct cms_exporter *exp = p->exp;
	bool any = false;

	pthread_mutex_lock(&exp->srv.lock);
	for (c = first_conn(exp); c; c = next_conn(c))
		if (c->pub == p && c->state == C_REVOKED) {
			c->state = C_GRANT;
			any = true;
		}
	pthread_mutex_unlock(&exp->srv.lock);
	if (any)
		cms_ipc_wake(exp->srv.loop.wake[1]);
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

/*
 * Phase 1: asks every importer holding the memory to drop it (queued: the server thread
 * writes it). During a grant the revocation is queued after its last descriptors.
 */
static void ask(struct cms_ipc_pub *p)
{
	struct conn *c;
	struct cms_exporter *exp = p->exp;
	struct cms_ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = CMS_IPC_REVOKE;
	pthread_mutex_lock(&exp->srv.lock);
	m.seq = ++exp->seq;
	p->waiting = true;
	for (c = first_conn(exp); c; c = next_conn(c)) {
		if (c->pub != p || (c->state != C_MAPPED && c->state != C_REVOKING))
			continue;
		c->state = C_REVOKING;
		c->seq = m.seq;
		c->answered = false;
		c->revoke_due = c->grant_next < c->grant_n;
		if (!c->revoke_due)
			conn_send(exp, c, &m, NULL); /* a dead importer counts as revoked */
	}
	pthread_mutex_unlock(&exp->srv.lock);
	cms_ipc_wake(exp->srv.loop.wake[1]); /* grants under way go on without the region lock */
}

/* Phase 2: waits for the answers until deadline; records the first failure. */
static cms_status collect(struct cms_ipc_pub *p, int64_t deadline, cms_status st)
{
	struct conn *c;
	struct cms_exporter *exp = p->exp;
	bool waiting;

	pthread_mutex_lock(&exp->srv.lock);
	for (;;) {
		struct timespec ts;
		int64_t ms;

		waiting = false;
		for (c = first_conn(exp); c; c = next_conn(c))
			if (c->pub == p && c->state == C_REVOKING && !c->answered && !c->base.dead)
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
		pthread_cond_timedwait(&exp->srv.cond, &exp->srv.lock, &ts);
	}
	for (c = first_conn(exp); c; c = next_conn(c)) {
		char who[160];

		if (c->pub != p || c->state != C_REVOKING || c->base.dead)
			continue;
		conn_name(c, who, sizeof(who));
		if (!c->answered) {
			if (!st)
				st = cms_set_error(CMS_ERR_TIMEOUT,
						   "%s did not drop its mappings of \"%s\" within "
						   "%u ms (socket "
						   "%s); the region stays active",
						   who, p->region->tag, exp->timeout_ms,
						   exp->srv.path);
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
	pthread_mutex_unlock(&exp->srv.lock);
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
	struct conn *c;
	struct cms_ipc_pub *p;
	uint32_t k = 0;

	for (p = cms_region_ipc(r)->ipc; p; p = p->rnext) {
		pthread_mutex_lock(&p->exp->srv.lock);
		for (c = first_conn(p->exp); c; c = next_conn(c))
			k += c->pub == p && conn_live(c);
		pthread_mutex_unlock(&p->exp->srv.lock);
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
	struct cms_exporter *exp;
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
	exp->timeout_ms = o.revoke_timeout_ms ? o.revoke_timeout_ms : CMS_IPC_DEFAULT_TIMEOUT_MS;
	st = cms_ipc_server_open(&exp->srv, ctx, path, &export_ops, exp, o.allowed_uids,
				 o.nallowed_uids);
	if (st)
		goto err_free;
	st = cms_ipc_server_start(&exp->srv);
	if (st)
		goto err_server;
	atomic_fetch_add(&cms_ctx_ipc(ctx)->objects, 1);
	cms_log(ctx, CMS_LOG_INFO, "exporter listening on %s", exp->srv.path);
	*out = exp;
	return CMS_OK;

err_server:
	cms_ipc_server_close(&exp->srv);
err_free:
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
	if (!(cms_region_vmm(r)->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
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
					     exp->srv.path);
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
	pthread_mutex_lock(&exp->srv.lock);
	p->next = exp->pubs;
	exp->pubs = p;
	pthread_mutex_unlock(&exp->srv.lock);
	pthread_mutex_unlock(&r->lock);
	cms_log(ctx, CMS_LOG_INFO, "exporter %s: publishing \"%s\" (device %d)", exp->srv.path,
		r->tag, r->device);
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
	pthread_mutex_lock(&exp->srv.lock);
	for (c = first_conn(exp); c; c = next_conn(c))
		k += c->pub && conn_live(c);
	pthread_mutex_unlock(&exp->srv.lock);
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
	cms_ipc_server_close(&exp->srv);
	while ((p = exp->pubs)) {
		exp->pubs = p->next;
		pthread_mutex_lock(&ctx->lock);
		cms_region_unref_locked(p->region);
		pthread_mutex_unlock(&ctx->lock);
		free(p);
	}
	free(exp);
	atomic_fetch_sub(&cms_ctx_ipc(ctx)->objects, 1);
	return CMS_OK;
}
