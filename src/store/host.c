/* SPDX-License-Identifier: MIT */
/*
 * host.c - host backup buffers of HOST-policy allocations.
 *
 * Backups live in host buffers of anonymous memory (mmap, transparent huge
 * pages where the kernel allows) that are faulted in and then page-locked
 * with cuMemHostRegister, so that the copies run by DMA at PCIe speed. One
 * buffer holds the backups of up to GROUP_MAX bytes of consecutive
 * allocations of one region (each copy stays inside one registration, as the
 * driver requires, and thousands of small allocations need few
 * registrations). Buffers are kept from one cycle to the next unless the
 * region gives host memory back after each resume: the steady state is then
 * a plain DMA each way. A buffer is unmapped when its last allocation lets go
 * of its slice, so freed allocations' slices stay until then (at most
 * GROUP_MAX bytes per buffer). Allocations that follow each other both on
 * the device (same reservation) and in their buffer are copied together, up
 * to CMS_COPY_MERGE_MAX bytes per copy (cms_backup_adjacent): 2048 x 8 MiB
 * move in 256 copies.
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
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define SLICE (32u << 20)	   /* bytes a worker faults at a time */
#define GROUP_MAX (1ull << 30)	   /* bytes of backups sharing one buffer */
#define PARALLEL_MIN (64ull << 20) /* below this many new bytes, no threads */
#define MAX_WORKERS 16

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) & ~(pg - 1);
}

/* Page-locks a buffer; a failure leaves it pageable (logged once per context). */
static void buffer_register(cms_context *ctx, struct cms_hostbuf *hb)
{
	CUresult res;

	res = ctx->drv.cuCtxPushCurrent(ctx->devices[hb->device].primary);
	if (res == CUDA_SUCCESS) {
		res = ctx->drv.cuMemHostRegister(hb->base, hb->len, CU_MEMHOSTREGISTER_PORTABLE);
		cms_pop(ctx);
	}
	hb->registered = res == CUDA_SUCCESS;
	hb->register_result = res; /* logged by the calling thread (see note_registered) */
}

/* Counts a buffer just registered in its region's pinned_bytes, or logs, once per context,
 * that it could not be page-locked (calling thread only). */
static void note_registered(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb)
{
	if (hb->registered)
		r->pinned_bytes += hb->len;
	/* Unregistered with CUDA_SUCCESS: never tried (a failed pause skipped it). */
	if (hb->registered || hb->register_result == CUDA_SUCCESS || atomic_load(&hb->failed) ||
	    atomic_exchange(&ctx->warned_register, 1))
		return;
	cms_log(ctx, CMS_LOG_WARN,
		"cuMemHostRegister of %zu bytes failed (%s): host backups stay pageable and "
		"copies run slower (check RLIMIT_MEMLOCK)",
		hb->len, cms_driver_error_name(&ctx->drv, hb->register_result));
}

/* A new buffer with a slice for each of the n allocations (not yet faulted in or registered). */
static cms_status buffer_map(cms_context *ctx, struct cms_alloc **v, size_t n)
{
	struct cms_hostbuf *hb;
	size_t len = 0, off = 0, i;

	for (i = 0; i < n; i++)
		len += page_round(v[i]->size);
	hb = calloc(1, sizeof(*hb));
	if (!hb)
		goto err;
	if (ctx->drv.host_alloc_hook && ctx->drv.host_alloc_hook(len))
		goto err_free;
	hb->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hb->base == MAP_FAILED) {
		if (ctx->drv.host_free_hook)
			ctx->drv.host_free_hook(len);
		goto err_free;
	}
	madvise(hb->base, len, MADV_HUGEPAGE); /* advice only: fewer faults where THP is on */
	/* A forked child cannot use it (CMS_ERR_FORKED) and must not copy page-locked memory. */
	madvise(hb->base, len, MADV_DONTFORK);
	hb->len = len;
	v[0]->region->host_bytes += len;
	hb->device = v[0]->region->device;
	hb->users = (unsigned)n;
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];

		a->hostbuf = hb;
		a->backup = (char *)hb->base + off;
		a->backup_len = page_round(a->size);
		a->fresh_buffer = true;
		off += a->backup_len;
	}
	return CMS_OK;

err_free:
	free(hb);
err:
	return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
			     "cannot allocate %zu bytes of host backup for %zu allocations", len,
			     n);
}

/* Faults the pages in; false when the kernel has no memory for them (not the OOM killer's turn). */
static bool fault_in(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), i;

	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return true;
	if (errno != EINVAL)
		return false;
	for (i = 0; i < len; i += pg) /* kernels before 5.14 */
		((volatile char *)p)[i] = 0;
	return true;
}

static cms_status backup_unpin(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_hostbuf *hb = a->hostbuf;
	cms_status st = CMS_OK;

	/* Only the buffer's last user unpins it; the others leave it as it is. */
	if (!hb || !hb->registered || hb->users > 1)
		return CMS_OK;
	CU_TRY(ctx, cuCtxPushCurrent(ctx->devices[hb->device].primary), st, out);
	CU_TRY(ctx, cuMemHostUnregister(hb->base), st, out_pop);
	hb->registered = false;
	a->region->pinned_bytes -= hb->len;
out_pop:
	cms_pop(ctx);
out:
	return st;
}

static void backup_repin(cms_context *ctx, struct cms_alloc *a)
{
	if (a->hostbuf && !a->hostbuf->registered) {
		buffer_register(ctx, a->hostbuf);
		note_registered(ctx, a->region, a->hostbuf);
	}
}

static void backup_drop(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_hostbuf *hb = a->hostbuf;

	if (!hb)
		return;
	cms_alloc_set_saved(a, false);
	a->hostbuf = NULL;
	a->backup = NULL;
	a->backup_len = 0;
	if (--hb->users)
		return; /* freed slices stay until the buffer's last user goes */
	a->region->host_bytes -= hb->len;
	munmap(hb->base, hb->len);
	if (ctx->drv.host_free_hook)
		ctx->drv.host_free_hook(hb->len);
	free(hb);
}

static void host_resumed(cms_context *ctx, struct cms_alloc *a)
{
	/* The buffer is kept for the next pause unless the region gives host memory back
	 * (never after an async resume: the API refuses the combination). */
	if ((a->region->flags & CMS_REGION_RELEASE_HOST) && !backup_unpin(ctx, a))
		backup_drop(ctx, a); /* never unmap page-locked memory */
}

/* ---- parallel preparation of new buffers ---- */

struct prep {
	cms_context *ctx;
	struct cms_hostbuf **bufs; /* new buffers, in the order of their allocations */
	size_t n;
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
	off = (s - w->first_slice[b]) * SLICE;
	len = hb->len - off < SLICE ? hb->len - off : SLICE;
	if (!fault_in((char *)hb->base + off, len))
		atomic_store(&hb->failed, true);
	if (atomic_fetch_sub(&w->left[b], 1) == 1) {
		if (!atomic_load(&hb->failed))
			buffer_register(w->ctx, hb);
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

static int workers_for(uint64_t bytes)
{
	cpu_set_t set;
	long cpus = sched_getaffinity(0, sizeof(set), &set) ? sysconf(_SC_NPROCESSORS_ONLN) :
							      CPU_COUNT(&set);
	uint64_t by_size = bytes / SLICE;

	if (bytes < PARALLEL_MIN || cpus < 2)
		return 0;
	if (cpus > MAX_WORKERS)
		cpus = MAX_WORKERS;
	return (int)((uint64_t)cpus < by_size ? (uint64_t)cpus : by_size);
}

/* A mapped allocation: its content is on the device, whatever was saved before. */
static bool wants_copy(const struct cms_alloc *a)
{
	return a->mapped;
}

/*
 * Makes the new buffers: consecutive allocations of v without one, of the
 * same region, up to GROUP_MAX bytes each.
 */
static cms_status plan_buffers(cms_context *ctx, struct cms_alloc **v, size_t n, struct prep *w,
			       uint64_t *new_bytes)
{
	size_t k = 0, j, bytes;
	cms_status st;

	w->first_slice[0] = 0;
	while (k < n) {
		if (!wants_copy(v[k]) || v[k]->hostbuf) {
			k++;
			continue;
		}
		bytes = page_round(v[k]->size);
		for (j = k + 1;
		     j < n && wants_copy(v[j]) && !v[j]->hostbuf && v[j]->region == v[k]->region &&
		     bytes + page_round(v[j]->size) <= GROUP_MAX;
		     j++)
			bytes += page_round(v[j]->size);
		st = buffer_map(ctx, v + k, j - k);
		if (st)
			return st;
		w->left[w->n] = (unsigned)((bytes + SLICE - 1) / SLICE);
		w->first_slice[w->n + 1] = w->first_slice[w->n] + w->left[w->n];
		w->bufs[w->n++] = v[k]->hostbuf;
		*new_bytes += bytes;
		k = j;
	}
	return CMS_OK;
}

static cms_status host_save(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	cms_context *ctx = l->ctx;
	struct prep w = { .ctx = ctx };
	pthread_t threads[MAX_WORKERS];
	int nthreads = 0, i;
	uint64_t new_bytes = 0;
	size_t k, j, b = 0;
	cms_status st = CMS_OK;

	w.bufs = malloc((n + 1) * sizeof(*w.bufs));
	w.first_slice = malloc((n + 1) * sizeof(*w.first_slice));
	w.left = malloc((n + 1) * sizeof(*w.left));
	w.ready = calloc(n + 1, sizeof(*w.ready));
	if (!w.bufs || !w.first_slice || !w.left || !w.ready) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a work list");
		goto out_free;
	}
	st = plan_buffers(ctx, v, n, &w, &new_bytes);
	if (st)
		goto out_free;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.ready_cond, NULL);
	atomic_init(&w.next, 0);
	nthreads = workers_for(new_bytes);
	if (nthreads) {
		sigset_t all, old;

		sigfillset(&all); /* workers never take the application's signals */
		pthread_sigmask(SIG_SETMASK, &all, &old);
		for (i = 0; i < nthreads; i++)
			if (pthread_create(&threads[i], NULL, prep_worker, &w))
				break;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		nthreads = i;
	}

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
		if (b < w.n && a->hostbuf == w.bufs[b]) {
			prep_wait(&w, b, nthreads);
			if (atomic_load(&a->hostbuf->failed)) {
				st = cms_set_error(
					CMS_ERR_OUT_OF_HOST_MEMORY,
					"no host memory to fault in a backup of %zu bytes",
					a->hostbuf->len);
				break;
			}
			if (j == n || v[j]->hostbuf != a->hostbuf)
				b++; /* last allocation of this buffer */
		}
		CU_TRY(ctx, cuMemcpyDtoHAsync(a->backup, a->base, len, cms_lane(l)), st, out_join);
		for (m = k; m < j; m++) {
			cms_alloc_set_saved(v[m], true);
			*bytes += v[m]->size;
		}
		cms_progress_note(len); /* issued (progress.c) */
	}
out_join:
	/* Workers finish the slices they took; the rest is skipped after a failure. */
	if (st)
		atomic_store(&w.next, w.first_slice[w.n]);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	/* The new buffers appear in v in the order of w.bufs, each first at its first user. */
	for (k = 0, b = 0; k < n && b < w.n; k++)
		if (v[k]->hostbuf == w.bufs[b])
			note_registered(ctx, v[k]->region, w.bufs[b++]);
	pthread_cond_destroy(&w.ready_cond);
	pthread_mutex_destroy(&w.lock);
out_free:
	free(w.bufs);
	free(w.first_slice);
	free(w.left);
	free(w.ready);
	return st;
}

/* HOST allocations whose backups are restored by one copy (cms_backup_adjacent). */
struct restore_group {
	struct cms_alloc *first, *last;
	uint64_t len;
};

/* Enqueues the copy of the group, if any, and empties it. */
static cms_status group_flush(struct cms_lanes *l, struct restore_group *g, uint64_t *restored)
{
	cms_context *ctx = l->ctx;
	struct cms_alloc *a = g->first;
	cms_status st = CMS_OK;

	if (!a)
		return CMS_OK;
	CU_TRY(ctx, cuMemcpyHtoDAsync(a->base, a->backup, g->len, cms_lane(l)), st, out);
	*restored += g->len;
	cms_progress_note(g->len); /* issued (progress.c) */
	g->first = g->last = NULL;
	g->len = 0;
out:
	return st;
}

/* Copies the saved backups back; allocations adjacent on both sides share one copy of up to
 * CMS_COPY_MERGE_MAX bytes. One never saved (see cms_alloc_release) keeps undefined content. */
static cms_status host_restore(struct cms_lanes *l, struct cms_alloc **v, size_t n, uint64_t *bytes)
{
	struct restore_group g = { 0 };
	cms_status st = CMS_OK;
	size_t i;

	for (i = 0; i < n && !st; i++) {
		struct cms_alloc *a = v[i];

		if (!a->saved)
			continue;
		if (!g.first || !cms_backup_adjacent(g.last, a) ||
		    g.len + a->size > CMS_COPY_MERGE_MAX)
			st = group_flush(l, &g, bytes);
		if (st)
			break;
		if (!g.first)
			g.first = a;
		g.last = a;
		g.len += a->size;
	}
	if (!st)
		st = group_flush(l, &g, bytes);
	return st;
}

static bool host_save_ready(const struct cms_alloc *a)
{
	return a->hostbuf != NULL;
}

static uint64_t host_progress_bytes(const struct cms_alloc *a, bool out)
{
	return (out ? a->mapped : a->saved) ? a->size : 0;
}

const struct cms_store_ops cms_store_host = {
	.name = "host",
	.save = host_save,
	.save_ready = host_save_ready,
	.restore = host_restore,
	.resumed = host_resumed,
	.forget_begin = backup_unpin,
	.forget = backup_drop,
	.forget_cancel = backup_repin,
	.progress_bytes = host_progress_bytes,
};
