/* SPDX-License-Identifier: MIT */
/*
 * host_policy.c - the HOST policy (cms_store_host): saves into host buffers, made
 * in parallel when many new bytes are needed, restores from them, and the
 * rest of its operations table.
 *
 * Making new buffers is bound by the kernel faulting and zeroing pages (~3-5
 * GB/s per thread): a pause that needs many new bytes spreads the faulting
 * over worker threads, in slices, in buffer order, registers each buffer as
 * soon as its slices are done, and meanwhile the main thread copies into the
 * buffers that are ready. If registration fails (locked-memory limits), the
 * buffer stays pageable: slower, still correct.
 *
 * A region's pinned_bytes counts its registered buffers. It changes only on the
 * thread that holds the region's lock: workers register buffers but never
 * touch it; the calling thread adds their buffers after joining them.
 */

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store_internal.h"

#define PARALLEL_MIN (64ull << 20) /* below this many new bytes, no threads */
#define MAX_WORKERS 16

/* ---- parallel preparation of new buffers ---- */

struct prep {
	cms_context *ctx;
	struct cms_hostbuf **bufs; /* new (or lazy) buffers, in the order of their allocations */
	struct cms_region **regs;  /* the region of each */
	size_t n;
	size_t slice; /* bytes per task */
	bool prefault;
	size_t *first_slice; /* n + 1 prefix sums */
	atomic_size_t next;
	atomic_uint *left; /* slices left per buffer */
	pthread_mutex_t lock;
	pthread_cond_t ready_cond;
	atomic_bool *ready; /* set (with lock held, for the wait) after the buffer's registration */
};

static void prep_slice(struct prep *w, size_t s)
{
	size_t lo = 0, hi = w->n, b, off, len;
	struct cms_hostbuf *hb;

	while (hi - lo > 1) { /* the buffer whose slices contain s */
		size_t mid = (lo + hi) / 2;

		if (w->first_slice[mid] <= s)
			lo = mid;
		else
			hi = mid;
	}
	b = lo;
	hb = w->bufs[b];
	off = (s - w->first_slice[b]) * w->slice;
	len = hb->len - off < w->slice ? hb->len - off : w->slice;
	if (w->prefault && !cms_host_fault_in((char *)hb->base + off, len))
		atomic_store(&hb->failed, true);
	if (atomic_fetch_sub(&w->left[b], 1) == 1) {
		if (!atomic_load(&hb->failed) && !hb->pageable)
			cms_host_buffer_register(w->ctx, hb);
		pthread_mutex_lock(&w->lock);
		atomic_store(&w->ready[b], true);
		pthread_cond_broadcast(&w->ready_cond);
		pthread_mutex_unlock(&w->lock);
	}
}

static void *prep_worker(void *arg)
{
	struct prep *w = arg;
	size_t s;

	while ((s = atomic_fetch_add(&w->next, 1)) < w->first_slice[w->n])
		prep_slice(w, s);
	return NULL;
}

/* Waits for buffer b (threads), or prepares it on this thread (nthreads 0). */
static void prep_wait(struct prep *w, size_t b, int nthreads)
{
	if (!nthreads) {
		while (!atomic_load(&w->ready[b]))
			prep_slice(w, atomic_fetch_add(&w->next, 1));
		return;
	}
	pthread_mutex_lock(&w->lock);
	while (!atomic_load(&w->ready[b]))
		pthread_cond_wait(&w->ready_cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static int workers_for(uint64_t bytes, const struct cms_store_tunables *o)
{
	cpu_set_t set;
	long cpus = sched_getaffinity(0, sizeof(set), &set) ? sysconf(_SC_NPROCESSORS_ONLN) :
							      CPU_COUNT(&set);
	uint64_t by_size = bytes / o->prep_slice;

	if (o->prep_threads)
		cpus = o->prep_threads;
	if (bytes < PARALLEL_MIN || cpus < 2)
		return 0;
	if (cpus > MAX_WORKERS && !o->prep_threads)
		cpus = MAX_WORKERS;
	return (int)((uint64_t)cpus < by_size ? (uint64_t)cpus : by_size);
}

/* A mapped allocation: its content is on the device, whatever was saved before. */
static bool wants_copy(const struct cms_alloc *a)
{
	return a->mapped;
}

/*
 * Gives the allocations of v that need a slice one in a hole, else makes new
 * buffers: consecutive allocations without one, of the same region, up to
 * cms_host_group_max bytes each.
 */
/* Adds hb, of region r, to the buffers the call prepares (faults in and registers). */
static void prep_add(struct prep *w, struct cms_region *r, struct cms_hostbuf *hb)
{
	w->left[w->n] = (unsigned)((hb->len + w->slice - 1) / w->slice);
	w->first_slice[w->n + 1] = w->first_slice[w->n] + w->left[w->n];
	w->regs[w->n] = r;
	w->bufs[w->n++] = hb;
	hb->prep_slot = w->n;
}

/*
 * Lets go of the slices among v[0..n) too short for what the pause copies (up to the
 * allocation's last live byte): made short (cms_host_slice_need) and kept by a resume that did not
 * give them back (RELEASE_HOST cleared while paused, or a failed cuMemHostUnregister). plan_buffers
 * then gives them new ones. A short slice that still holds the live extent stays, so a retained
 * backup keeps its address and its page-locking while the live bytes fit it.
 */
static cms_status drop_short(cms_context *ctx, struct cms_alloc **v, size_t n)
{
	cms_status st;
	size_t j;

	for (j = 0; j < n; j++) {
		struct cms_alloc *a = v[j];

		if (!wants_copy(a) || !cms_alloc_store(a)->hostbuf ||
		    cms_alloc_store(a)->backup_len >= cms_host_live_need(a))
			continue;
		st = cms_host_backup_unpin(ctx, a);
		if (st)
			return st;
		cms_host_slice_put(ctx, a);
	}
	return CMS_OK;
}

static cms_status plan_buffers(cms_context *ctx, struct cms_alloc **v, size_t n, struct prep *w,
			       const struct cms_store_tunables *o, uint64_t *new_bytes)
{
	size_t k = 0, j, bytes;
	cms_status st;

	w->first_slice[0] = 0;
	st = drop_short(ctx, v, n);
	if (st)
		return st;
	for (j = 0; j < n; j++) /* holes of each region's buffers first */
		if (!j || v[j]->region != v[j - 1]->region)
			cms_host_reuse_holes(v[j]->region, v + j, n - j);
	while (k < n) {
		struct cms_hostbuf *hb = cms_alloc_store(v[k])->hostbuf;

		if (hb && hb->lazy) { /* kept MADV_FREE'd: faulted in and registered again */
			hb->lazy = false;
			prep_add(w, v[k]->region, hb);
			*new_bytes += hb->len;
		}
		if (!wants_copy(v[k]) || hb) {
			k++;
			continue;
		}
		bytes = cms_host_slice_need(v[k]);
		for (j = k + 1;
		     j < n && wants_copy(v[j]) && !cms_alloc_store(v[j])->hostbuf &&
		     v[j]->region == v[k]->region &&
		     bytes + cms_host_slice_need(v[j]) <= cms_host_group_max(v[k]->region);
		     j++)
			bytes += cms_host_slice_need(v[j]);
		st = cms_host_buffer_map(ctx, v + k, j - k, o);
		if (st)
			return st;
		if (bytes) /* else nothing to fault in, page-lock or copy: every byte declared */
			prep_add(w, v[k]->region, cms_alloc_store(v[k])->hostbuf);
		*new_bytes += bytes;
		k = j;
	}
	return CMS_OK;
}

/*
 * Lets go of what r keeps between cycles: the slices of its allocations whose content is not
 * in them (not saved), unpinning each buffer before its last user unmaps it; then the holes
 * over the bound (cms_host_region_trim) and the staging. A buffer whose cuMemHostUnregister fails
 * stays (usable as it is) and its status is returned; the others are gone.
 */
static cms_status host_release_retained(struct cms_region *r)
{
	cms_status st = CMS_OK, st1;
	struct cms_alloc *a;

	for (a = r->allocs; a; a = a->next) {
		if (!cms_alloc_store(a)->hostbuf || a->saved)
			continue;
		st1 = cms_host_backup_unpin(r->ctx, a);
		if (!st1)
			cms_host_slice_put(r->ctx, a);
		else if (!st)
			st = st1;
	}
	cms_host_lazy_drop(r);
	cms_host_region_trim(r);
	cms_host_region_stage_free(r);
	return st;
}

/* Whether r keeps a buffer of the other kind than its flag asks for (the flag changed). */
static bool kind_changed(const struct cms_region *r)
{
	const struct cms_hostbuf *hb;

	for (hb = cms_region_store(r)->hostbufs; hb; hb = hb->next)
		if (hb->pageable != cms_host_region_pageable(r))
			return true;
	return false;
}

/* Before a pause: retained buffers of the other kind go (best effort: one that stays is
 * used as it is, its kind kept). */
static void release_changed(struct cms_alloc **v, size_t n)
{
	size_t j;

	for (j = 0; j < n; j++)
		if ((!j || v[j]->region != v[j - 1]->region) && kind_changed(v[j]->region))
			(void)host_release_retained(v[j]->region);
}

/* The copies of a save (out) or a restore between a group's device bytes and its backups,
 * which follow each other on both sides (cms_backup_adjacent); a its first allocation. */
struct copy {
	struct cms_lanes *l;
	struct cms_alloc *a;
	bool out;
};

/* One live piece of the group (cms_store_pieces), offsets from a's base. */
static cms_status copy_piece(void *arg, uint64_t off, uint64_t len)
{
	struct copy *c = arg;
	cms_context *ctx = c->l->ctx;
	char *h = (char *)cms_alloc_store(c->a)->backup + off;
	cms_status st = CMS_OK;

	if (cms_alloc_store(c->a)->hostbuf->pageable) { /* through page-locked staging
							   (CMS_REGION_HOST_PAGEABLE) */
		struct cms_stage *sg = cms_host_region_stage(ctx, c->a->region);

		if (!sg)
			return CMS_ERR_OUT_OF_HOST_MEMORY;
		st = c->out ? cms_host_staged_out(c->l, sg, h, c->a->base + off, len) :
			      cms_host_staged_in(c->l, sg, c->a->base + off, h, len);
		if (!st)
			cms_progress_note(len);
		return st;
	}
	if (c->out)
		CU_TRY(ctx, cuMemcpyDtoHAsync(h, c->a->base + off, len, cms_lane(c->l)), st, out);
	else
		CU_TRY(ctx, cuMemcpyHtoDAsync(c->a->base + off, h, len, cms_lane(c->l)), st, out);
	cms_progress_note(len); /* issued (progress.c) */
out:
	return st;
}

static cms_status host_save(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	cms_context *ctx = l->ctx;
	struct prep w = { .ctx = ctx };
	struct copy c = { .l = l, .out = true };
	pthread_t threads[CMS_PREP_THREADS_MAX];
	const struct cms_store_tunables *opts = &cms_ctx_store(ctx)->tune;
	int nthreads = 0, i;
	uint64_t new_bytes = 0;
	size_t k, j, b;
	cms_status st = CMS_OK;

	w.slice = opts->prep_slice;
	w.prefault = !opts->prep_noprefault;
	w.bufs = malloc((n + 1) * sizeof(*w.bufs));
	w.regs = malloc((n + 1) * sizeof(*w.regs));
	w.first_slice = malloc((n + 1) * sizeof(*w.first_slice));
	w.left = malloc((n + 1) * sizeof(*w.left));
	w.ready = calloc(n + 1, sizeof(*w.ready));
	if (!w.bufs || !w.regs || !w.first_slice || !w.left || !w.ready) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
		goto out_free;
	}
	release_changed(v, n);
	st = plan_buffers(ctx, v, n, &w, opts, &new_bytes);
	if (st)
		goto out_free;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.ready_cond, NULL);
	atomic_init(&w.next, 0);
	nthreads = workers_for(new_bytes, opts);
	for (i = 0; i < nthreads; i++)
		if (cms_thread_start(&threads[i], prep_worker, &w))
			break;
	nthreads = i;

	/* Copy each allocation out as soon as its buffer is ready; allocations adjacent on
	 * both sides go in one copy of up to CMS_COPY_MERGE_MAX bytes. */
	for (k = 0; k < n; k = j) {
		struct cms_alloc *a = v[k];
		size_t len = a->size, m;

		j = k + 1;
		if (!wants_copy(a))
			continue;
		while (j < n && wants_copy(v[j]) && cms_backup_adjacent(v[j - 1], v[j]) &&
		       len + v[j]->size <= CMS_COPY_MERGE_MAX)
			len += v[j++]->size;
		if (cms_alloc_store(a)
			    ->hostbuf->prep_slot) { /* prepared by this call: wait until it is */
			prep_wait(&w, cms_alloc_store(a)->hostbuf->prep_slot - 1, nthreads);
			if (atomic_load(&cms_alloc_store(a)->hostbuf->failed)) {
				st = cms_set_error(
					CMS_ERR_OUT_OF_HOST_MEMORY,
					"no host memory to fault in a backup of %zu bytes",
					cms_alloc_store(a)->hostbuf->len);
				break;
			}
		}
		cms_host_pin_on_use(ctx, a);
		c.a = a; /* its live pieces only (cms_range_discard) */
		st = cms_store_pieces(v + k, j - k, 0, len, copy_piece, &c, bytes);
		if (st)
			break;
		for (m = k; m < j; m++) {
			cms_alloc_set_saved(v[m], true);
			cms_alloc_store(v[m])->prepared = false;
		}
	}
	/* Workers finish the slices they took; the rest is skipped after a failure. */
	if (st)
		atomic_store(&w.next, w.first_slice[w.n]);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	for (b = 0; b < w.n; b++)
		cms_host_note_registered(ctx, w.regs[b], w.bufs[b]);
	pthread_cond_destroy(&w.ready_cond);
	pthread_mutex_destroy(&w.lock);
out_free:
	for (b = 0; w.bufs && b < w.n; b++)
		w.bufs[b]->prep_slot = 0;
	free(w.bufs);
	free(w.regs);
	free(w.first_slice);
	free(w.left);
	free(w.ready);
	return st;
}

/* HOST allocations whose backups are restored together (cms_backup_adjacent). */
struct restore_group {
	struct cms_alloc **v; /* its first member, in the caller's list; n consecutive ones */
	size_t n;
	uint64_t len;
};

/* Enqueues the copies of the group's live pieces, if any, and empties it. */
static cms_status group_flush(struct cms_lanes *l, struct restore_group *g, uint64_t *restored)
{
	struct copy c = { .l = l, .out = false };
	cms_status st;

	if (!g->n)
		return CMS_OK;
	c.a = g->v[0];
	st = cms_store_pieces(g->v, g->n, 0, g->len, copy_piece, &c, restored);
	g->n = 0;
	g->len = 0;
	return st;
}

/* Copies the saved backups back; allocations adjacent on both sides share one copy of up to
 * CMS_COPY_MERGE_MAX bytes (their ranges declared content-free left out). One never saved (see
 * cms_alloc_release) keeps undefined content. */
static cms_status host_restore(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	struct restore_group g = { 0 };
	cms_status st = CMS_OK;
	size_t i;

	for (i = 0; i < n && !st; i++) {
		struct cms_alloc *a = v[i];

		if (!a->saved)
			continue;
		if (!g.n || !cms_backup_adjacent(g.v[g.n - 1], a) ||
		    g.len + a->size > CMS_COPY_MERGE_MAX)
			st = group_flush(l, &g, bytes);
		if (st)
			break;
		if (!g.n) {
			cms_host_pin_on_use(l->ctx, a);
			g.v = v + i;
		}
		g.n++;
		g.len += a->size;
	}
	if (!st)
		st = group_flush(l, &g, bytes);
	return st;
}

static bool host_save_ready(const struct cms_alloc *a)
{
	/* a buffer of the other kind is let go of first (release_changed) */
	return cms_alloc_store(a)->hostbuf != NULL && !kind_changed(a->region);
}

static uint64_t host_progress_bytes(const struct cms_alloc *a, bool out)
{
	return (out ? a->mapped : a->saved) ? cms_span_live_bytes(a, 0, a->size) : 0;
}

/* After a resume that gave the buffers back (CMS_REGION_RELEASE_HOST, never async): the
 * slices of the allocations whose buffers were kept for a failed cuMemHostUnregister. */
static void host_region_resumed(struct cms_region *r)
{
	if (r->flags & CMS_REGION_RELEASE_HOST)
		cms_host_region_trim(r);
}

/* Paused: the saved slice; active: a slice kept by retention (content of the last pause). */
static bool host_backup_held(const struct cms_alloc *a, void **host)
{
	bool held = cms_alloc_store(a)->backup &&
		    (a->saved ||
		     (a->region->state == CMS_STATE_ACTIVE && !cms_alloc_store(a)->prepared));

	*host = held ? cms_alloc_store(a)->backup : NULL;
	return held;
}

static cms_status host_backup_read(struct cms_alloc *a, uint64_t off, void *buf, uint64_t len)
{
	memcpy(buf, (const char *)cms_alloc_store(a)->backup + off, len);
	return CMS_OK;
}

/* Gives back what active region r keeps between cycles (cms_region_flags_set): as a resume
 * with CMS_REGION_RELEASE_HOST does, and the staging; a buffer whose cuMemHostUnregister fails
 * stays (logged) until a later releasing resume or free. */
static void host_release_kept(struct cms_region *r, bool files)
{
	(void)files;
	if (host_release_retained(r))
		cms_log(r->ctx, CMS_LOG_WARN,
			"region \"%s\": host backups stay until a later resume or free: %s", r->tag,
			cms_last_error());
}

static void host_region_close(struct cms_region *r)
{
	cms_host_region_stage_free(r);
	cms_host_lazy_drop(r);
}

const struct cms_store_ops cms_store_host = {
	.name = "host",
	.save = host_save,
	.save_ready = host_save_ready,
	.restore = host_restore,
	.resumed = cms_host_resumed,
	.region_resumed = host_region_resumed,
	.region_close = host_region_close,
	.call_done = cms_host_region_stage_free,
	.trim = cms_host_region_trim,
	.forget_begin = cms_host_backup_unpin,
	.forget = cms_host_slice_put,
	.forget_cancel = cms_host_backup_repin,
	.progress_bytes = host_progress_bytes,
	.backup_held = host_backup_held,
	.backup_read = host_backup_read,
	.release_kept = host_release_kept,
};
