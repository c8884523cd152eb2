/* SPDX-License-Identifier: MIT */
/*
 * host.c - host backup buffers of HOST-policy allocations.
 *
 * Backups live in host buffers of anonymous memory (mmap, transparent huge
 * pages where the kernel allows) that are faulted in and then page-locked
 * with cuMemHostRegister, so that the copies run by DMA at PCIe speed. One
 * buffer holds the backups of up to group_max bytes (the tunable host_group,
 * 1 GiB) of consecutive allocations of one region (each copy stays inside one registration, as the
 * driver requires, and thousands of small allocations need few
 * registrations). Buffers are kept from one cycle to the next unless the
 * region gives host memory back after each resume: the steady state is then
 * a plain DMA each way. A buffer is unmapped when its last allocation lets go
 * of its slice.
 *
 * Churn stays bounded: a freed slice is a hole of its buffer, which the next
 * pause fills first (reuse_holes: no new buffer, no new registration); when a
 * free leaves more than one buffer's worth of holes in the region
 * (group_max), the buffer with the most holes is split (buffer_split: its
 * holes unmapped, the rest page-locked again by its next copy). A region then
 * holds at most its live slices plus group_max bytes (the contract of
 * cms_region_info.host_bytes). Allocations that follow each other both on
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
 * A region created with CMS_REGION_HOST_PAGEABLE keeps its buffers pageable
 * (never registered): each copy goes through two page-locked staging buffers
 * (stage.c) of the tunable host_stage bytes (16 MiB), the device copying into
 * (out of) one while the host copies the other into the backup (out of it). The staging is made
 * by a call's first such copy of the region, kept on the region (host_stage)
 * for the rest of the call (a resume restores 64 MiB at a time) and freed when
 * the call ends, committed or rolled back (call_done).
 * Each buffer knows its kind (hb->pageable): a region whose flag changed
 * between cycles lets go of the retained buffers of the other kind at its next
 * pause (or at once through cms_store_release_kept).
 *
 * A region that gives its buffers back after each resume (CMS_REGION_RELEASE_HOST) backs each
 * allocation's live extent only (slice_need: up to its last byte not declared content-free):
 * a pause faults in and page-locks what it copies; the buffer's mapping reaches past its last
 * slice (map_len), so that a backup is still read at the allocation's own offsets.
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

/* Host memory shared by the backups of several allocations of one region (host.c). Its bytes
 * are its users' slices plus free_bytes of freed slices (holes), which a later pause reuses. */
struct cms_hostbuf {
	void *base;
	size_t len;	/* bytes of its slices and holes: faulted in, page-locked, counted */
	size_t map_len; /* bytes mapped: len, plus the reach of short slices past it (slice_need) */
	unsigned users; /* allocations with a slice; under their region's lock */
	size_t free_bytes; /* bytes of no user's slice (counted in the region's host_free_bytes) */
	bool registered;   /* page-locked with cuMemHostRegister */
	bool pin_on_use;   /* not page-locked yet: the next copy into or out of it registers it */
	bool pageable; /* never page-locked: copies go through staging (CMS_REGION_HOST_PAGEABLE) */
	bool lazy; /* no user, kept MADV_FREEd for the next pause (store tunables: prep_lazyfree) */
	size_t prep_slot; /* during a pause: 1 + its index in the preparation list, or 0 */
	CUresult register_result;
	atomic_bool failed; /* no memory to fault its pages in */
	int32_t device;
	struct cms_hostbuf *next; /* the region's buffers (hostbufs) */
};

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PARALLEL_MIN (64ull << 20) /* below this many new bytes, no threads */
#define MAX_WORKERS 16

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#define HUGETLB_SIZE (2ull << 20)

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) & ~(pg - 1);
}

/*
 * One buffer's worth: the most bytes of backups one buffer holds for several
 * allocations (a single larger allocation gets a buffer of its own), and the
 * most bytes of freed slices region r keeps (region_trim). 1 GiB; on the
 * simulation 16 granules, so that small tests reach it.
 */
static uint64_t group_max(const struct cms_region *r)
{
	const cms_context *ctx = r->ctx;
	uint64_t g = ctx->devices[r->device].granularity;

	return cms_tune_bytes(&cms_ctx_store(ctx)->tune.host_group, g);
}

/*
 * The bytes of a's slice in a new buffer: its size, page-rounded; in a region that gives its
 * backups back after each resume (CMS_REGION_RELEASE_HOST), only up to its last live byte
 * (cms_range_discard: the tails of a PyTorch pool's segments), so that a pause faults in and
 * page-locks only what it copies. The slice is still read at the allocation's own offsets
 * (cms_backup_get): its buffer's mapping reaches past the end of its last slice (map_len).
 */
/* The bytes a pause copies into a's backup at most: up to its last live byte, page-rounded. */
static size_t live_need(const struct cms_alloc *a)
{
	return page_round(cms_span_live_end(a));
}

static size_t slice_need(const struct cms_alloc *a)
{
	if (a->region->flags & CMS_REGION_RELEASE_HOST)
		return live_need(a);
	return page_round(a->size);
}

static void buffer_unlink(struct cms_region *r, struct cms_hostbuf *hb)
{
	struct cms_hostbuf **pp;

	for (pp = &cms_region_store(r)->hostbufs; *pp; pp = &(*pp)->next)
		if (*pp == hb) {
			*pp = hb->next;
			return;
		}
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
		cms_region_store(r)->pinned_bytes += hb->len;
	/* Unregistered with CUDA_SUCCESS: never tried (a failed pause skipped it). */
	if (hb->registered || hb->register_result == CUDA_SUCCESS || atomic_load(&hb->failed) ||
	    atomic_exchange(&cms_ctx_store(ctx)->warned_register, 1))
		return;
	cms_log(ctx, CMS_LOG_WARN,
		"cuMemHostRegister of %zu bytes failed (%s): host backups stay pageable and "
		"copies run slower (check RLIMIT_MEMLOCK)",
		hb->len, cms_driver_error_name(&ctx->drv, hb->register_result));
}

/* A buffer of len bytes in no region yet, mapped with reach bytes more (short slices: map_len),
 * not yet faulted in or registered; NULL when out of memory (or the simulation refuses it). */
static struct cms_hostbuf *buffer_new(cms_context *ctx, size_t len, size_t reach,
				      const struct cms_store_tunables *o, bool pageable,
				      int32_t device)
{
	struct cms_hostbuf *hb = calloc(1, sizeof(*hb));

	if (!hb)
		return NULL;
	if (ctx->drv.host_alloc_hook && ctx->drv.host_alloc_hook(len))
		goto err_free;
	hb->map_len = len + reach;
	hb->base = MAP_FAILED;
	if (o->prep_hugetlb && !(hb->map_len % HUGETLB_SIZE))
		hb->base = mmap(NULL, hb->map_len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (hb->base == MAP_FAILED)
		hb->base = mmap(NULL, hb->map_len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hb->base == MAP_FAILED) {
		if (ctx->drv.host_free_hook)
			ctx->drv.host_free_hook(len);
		goto err_free;
	}
	if (!o->prep_nothp) /* advice only: fewer faults where THP is on */
		madvise(hb->base, hb->map_len, MADV_HUGEPAGE);
	/* A forked child cannot use it (CMS_ERR_FORKED) and must not copy page-locked memory. */
	madvise(hb->base, hb->map_len, MADV_DONTFORK);
	hb->len = len;
	hb->pageable = pageable;
	hb->device = device;
	return hb;

err_free:
	free(hb);
	return NULL;
}

/* Makes hb one of r's buffers (counted in its host_bytes). */
static void buffer_link(struct cms_region *r, struct cms_hostbuf *hb)
{
	r->host_bytes += hb->len;
	hb->next = cms_region_store(r)->hostbufs;
	cms_region_store(r)->hostbufs = hb;
}

/* Gives a the slice of hb at off, of len bytes (one more user). */
static void slice_take(struct cms_alloc *a, struct cms_hostbuf *hb, size_t off, size_t len)
{
	cms_alloc_store(a)->hostbuf = hb;
	cms_alloc_store(a)->backup = (char *)hb->base + off;
	cms_alloc_store(a)->backup_len = len;
	hb->users++;
}

/* A new buffer with a slice for each of the n allocations (not yet faulted in or registered). */
static cms_status buffer_map(cms_context *ctx, struct cms_alloc **v, size_t n,
			     const struct cms_store_tunables *o)
{
	struct cms_hostbuf *hb;
	size_t len = 0, reach = 0, off = 0, i;

	for (i = 0; i < n; i++) { /* a short slice's tail reaches past the slices after it */
		size_t need = slice_need(v[i]), full = page_round(v[i]->size);

		len += need;
		reach = full - need > reach ? full - need : reach;
	}
	hb = buffer_new(ctx, len, reach, o, (v[0]->region->flags & CMS_REGION_HOST_PAGEABLE) != 0,
			v[0]->region->device);
	if (!hb)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate %zu bytes of host backup for %zu allocations",
				     len, n);
	buffer_link(v[0]->region, hb);
	for (i = 0; i < n; i++) {
		slice_take(v[i], hb, off, slice_need(v[i]));
		cms_alloc_store(v[i])->fresh_buffer = true;
		off += cms_alloc_store(v[i])->backup_len;
	}
	return CMS_OK;
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
	struct cms_hostbuf *hb = cms_alloc_store(a)->hostbuf;
	cms_status st = CMS_OK;

	/* Only the buffer's last user unpins it; the others leave it as it is. */
	if (!hb || !hb->registered || hb->users > 1)
		return CMS_OK;
	CU_TRY(ctx, cuCtxPushCurrent(ctx->devices[hb->device].primary), st, out);
	CU_TRY(ctx, cuMemHostUnregister(hb->base), st, out_pop);
	hb->registered = false;
	cms_region_store(a->region)->pinned_bytes -= hb->len;
out_pop:
	cms_pop(ctx);
out:
	return st;
}

static void backup_repin(cms_context *ctx, struct cms_alloc *a)
{
	/* A buffer waiting for its next copy to page-lock it (pin_on_use) stays waiting; a
	 * pageable one is never page-locked. */
	if (cms_alloc_store(a)->hostbuf && !cms_alloc_store(a)->hostbuf->registered &&
	    !cms_alloc_store(a)->hostbuf->pin_on_use && !cms_alloc_store(a)->hostbuf->pageable) {
		buffer_register(ctx, cms_alloc_store(a)->hostbuf);
		note_registered(ctx, a->region, cms_alloc_store(a)->hostbuf);
	}
}

/* Page-locks a's buffer if it waits for its next copy to do so (a piece of a split buffer). */
static void pin_on_use(cms_context *ctx, struct cms_alloc *a)
{
	struct cms_hostbuf *hb = cms_alloc_store(a)->hostbuf;

	if (!hb || !hb->pin_on_use)
		return;
	hb->pin_on_use = false;
	buffer_register(ctx, hb);
	note_registered(ctx, a->region, hb);
}

/* Unmaps hb, one of r's buffers without users, and forgets it. */
static void buffer_drop(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb)
{
	buffer_unlink(r, hb);
	r->host_bytes -= hb->len;
	cms_region_store(r)->host_free_bytes -= hb->free_bytes;
	munmap(hb->base, hb->map_len);
	if (ctx->drv.host_free_hook)
		ctx->drv.host_free_hook(hb->len);
	free(hb);
}

/* Unmaps r's buffers kept without users (lazy: the store's tunable prep_lazyfree). */
static void lazy_drop(struct cms_region *r)
{
	struct cms_hostbuf *hb, *next;

	for (hb = cms_region_store(r)->hostbufs; hb; hb = next) {
		next = hb->next;
		if (!hb->users)
			buffer_drop(r->ctx, r, hb);
	}
}

/* a lets go of its slice: a hole that a later pause reuses (plan_buffers), or, from the last
 * user, the whole buffer (unmapped; kept MADV_FREE'd instead when keep). Page-locked memory
 * is never unmapped (backup_unpin first). */
static void slice_put_keep(cms_context *ctx, struct cms_alloc *a, bool keep)
{
	struct cms_hostbuf *hb = cms_alloc_store(a)->hostbuf;
	struct cms_region *r = a->region;

	if (!hb)
		return;
	cms_alloc_set_saved(a, false);
	hb->free_bytes += cms_alloc_store(a)->backup_len;
	cms_region_store(r)->host_free_bytes += cms_alloc_store(a)->backup_len;
	cms_alloc_store(a)->hostbuf = NULL;
	cms_alloc_store(a)->backup = NULL;
	cms_alloc_store(a)->backup_len = 0;
	cms_alloc_store(a)->prepared = false;
	if (--hb->users)
		return;
	if (keep && !hb->registered) {
		(void)madvise(hb->base, hb->len, MADV_FREE); /* advice: stays mapped, reclaimable */
		hb->lazy = true;
		hb->pin_on_use = false; /* registered again by the pause that reuses it */
		return;
	}
	buffer_drop(ctx, r, hb);
}

static void slice_put(cms_context *ctx, struct cms_alloc *a)
{
	slice_put_keep(ctx, a, false);
}

static void host_resumed(cms_context *ctx, struct cms_alloc *a)
{
	/* The buffer is kept for the next pause unless the region gives host memory back
	 * (never after an async resume: the API refuses the combination). */
	if ((a->region->flags & CMS_REGION_RELEASE_HOST) && !backup_unpin(ctx, a))
		slice_put_keep(ctx, a,
			       cms_ctx_store(ctx)
				       ->tune.prep_lazyfree); /* never unmap page-locked memory */
}

/* ---- holes: reuse and trim ---- */

/* A slice of one of a region's buffers, or a hole. */
struct slice {
	struct cms_hostbuf *hb;
	char *p;
	size_t len;
	struct cms_alloc *a;
};

static int slice_cmp(const void *x, const void *y)
{
	const struct slice *s = x, *t = y;

	if (s->hb != t->hb)
		return (uintptr_t)s->hb < (uintptr_t)t->hb ? -1 : 1;
	return s->p < t->p ? -1 : s->p > t->p;
}

static bool slice_wanted(const struct cms_alloc *a, const struct cms_hostbuf *only)
{
	return cms_alloc_store(a)->hostbuf && (only ? cms_alloc_store(a)->hostbuf == only :
						      cms_alloc_store(a)->hostbuf->free_bytes > 0);
}

/* The slices of only's users, or of the users of every buffer of r with holes (only NULL),
 * by buffer and address; NULL (*n 0) when out of memory. */
static struct slice *slices_of(struct cms_region *r, const struct cms_hostbuf *only, size_t *n)
{
	struct cms_alloc *a;
	struct slice *s;
	size_t k = 0;

	for (a = r->allocs; a; a = a->next)
		k += slice_wanted(a, only);
	*n = 0;
	s = malloc((k + 1) * sizeof(*s));
	if (!s)
		return NULL;
	for (a = r->allocs; a; a = a->next)
		if (slice_wanted(a, only))
			s[(*n)++] = (struct slice){ cms_alloc_store(a)->hostbuf,
						    cms_alloc_store(a)->backup,
						    cms_alloc_store(a)->backup_len, a };
	qsort(s, *n, sizeof(*s), slice_cmp);
	return s;
}

/* The holes of r's buffers (gaps between the sorted slices s[0..ns)), into g; their count. */
static size_t holes_of(struct cms_region *r, const struct slice *s, size_t ns, struct slice *g)
{
	struct cms_hostbuf *hb;
	size_t ng = 0, i = 0;

	for (hb = cms_region_store(r)->hostbufs; hb; hb = hb->next) {
		char *pos = hb->base, *end = (char *)hb->base + hb->len;

		if (!hb->free_bytes || atomic_load(&hb->failed))
			continue;
		while (i < ns && (uintptr_t)s[i].hb < (uintptr_t)hb)
			i++;
		for (; i < ns && s[i].hb == hb; pos = s[i].p + s[i].len, i++)
			if (s[i].p > pos)
				g[ng++] = (struct slice){ hb, pos, (size_t)(s[i].p - pos), NULL };
		if (end > pos)
			g[ng++] = (struct slice){ hb, pos, (size_t)(end - pos), NULL };
		i = 0; /* buffers are listed in any order */
	}
	return ng;
}

/*
 * Gives each allocation of r among v[0..n) that needs a slice one in a hole of r's buffers,
 * first fit, so that churn (a free, an alloc of a similar size) reuses the host memory it
 * already has, page-locked, without a new buffer. Best effort: out of memory, it gives none.
 */
static void reuse_holes(struct cms_region *r, struct cms_alloc **v, size_t n)
{
	struct cms_hostbuf *hb;
	struct slice *s, *g;
	size_t ns, ng, nb = 0, i, k;

	if (!cms_region_store(r)->host_free_bytes)
		return;
	for (hb = cms_region_store(r)->hostbufs; hb; hb = hb->next)
		nb++;
	s = slices_of(r, NULL, &ns);
	g = s ? malloc((ns + nb) * sizeof(*g)) : NULL;
	if (!g)
		goto out;
	ng = holes_of(r, s, ns, g);
	for (i = 0; i < n; i++) {
		struct cms_alloc *a = v[i];
		size_t need = slice_need(a), full = page_round(a->size);

		if (a->region != r || !a->mapped || cms_alloc_store(a)->hostbuf)
			continue;
		for (k = 0; k < ng && (g[k].len < need ||
				       g[k].p + full > (char *)g[k].hb->base + g[k].hb->map_len);
		     k++)
			;
		if (k == ng)
			continue;
		hb = g[k].hb;
		cms_alloc_store(a)->hostbuf = hb;
		cms_alloc_store(a)->backup = g[k].p;
		cms_alloc_store(a)->backup_len = need;
		cms_alloc_store(a)->fresh_buffer = true;
		hb->users++;
		hb->free_bytes -= need;
		cms_region_store(r)->host_free_bytes -= need;
		g[k].p += need;
		g[k].len -= need;
	}
out:
	free(g);
	free(s);
}

/* Runs of adjacent slices among s[0..ns) (one buffer's, sorted): first_of[j] starts run j. */
static size_t runs_of(const struct slice *s, size_t ns, size_t *first_of)
{
	size_t nr = 0, i;

	for (i = 0; i < ns; i++)
		if (!i || s[i - 1].p + s[i - 1].len != s[i].p)
			first_of[nr++] = i;
	first_of[nr] = ns;
	return nr;
}

static char *run_start(const struct slice *s, const size_t *first_of, size_t j)
{
	return s[first_of[j]].p;
}

static char *run_end(const struct slice *s, const size_t *first_of, size_t j)
{
	const struct slice *last = &s[first_of[j + 1] - 1];

	return last->p + last->len;
}

/* Frees pieces [from, to) of a split (piece 0 is the buffer itself) and their host counts. */
static void pieces_drop(cms_context *ctx, const struct slice *s, const size_t *first_of,
			struct cms_hostbuf **piece, size_t from, size_t to)
{
	size_t j;

	for (j = from; j < to; j++) {
		if (ctx->drv.host_free_hook)
			ctx->drv.host_free_hook(
				(size_t)(run_end(s, first_of, j) - run_start(s, first_of, j)));
		if (j)
			free(piece[j]);
	}
}

/* A buffer for each run (the first keeps hb), counted as a host buffer of the run's bytes;
 * false when out of memory or when the simulation refuses one (nothing changed). */
static bool pieces_make(cms_context *ctx, struct cms_hostbuf *hb, const struct slice *s,
			const size_t *first_of, size_t nr, struct cms_hostbuf **piece)
{
	size_t j;

	for (j = 0; j < nr; j++) {
		size_t len = (size_t)(run_end(s, first_of, j) - run_start(s, first_of, j));

		piece[j] = j ? calloc(1, sizeof(**piece)) : hb;
		if (!piece[j] || (ctx->drv.host_alloc_hook && ctx->drv.host_alloc_hook(len))) {
			if (j)
				free(piece[j]);
			pieces_drop(ctx, s, first_of, piece, 0, j);
			return false;
		}
	}
	return true;
}

/* Unregisters hb (page-locked); false, with a log line, when the driver refuses. */
static bool buffer_unpin_now(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb)
{
	CUresult res;

	if (!hb->registered)
		return true;
	res = ctx->drv.cuCtxPushCurrent(ctx->devices[hb->device].primary);
	if (res == CUDA_SUCCESS) {
		res = ctx->drv.cuMemHostUnregister(hb->base);
		cms_pop(ctx); /* retried: never leaves the context on the caller's thread */
	}
	if (res != CUDA_SUCCESS) {
		cms_log(ctx, CMS_LOG_WARN,
			"cuMemHostUnregister of %zu bytes failed (%s): %zu bytes of freed backups "
			"stay until a later free",
			hb->len, cms_driver_error_name(&ctx->drv, res), hb->free_bytes);
		return false;
	}
	hb->registered = false;
	hb->pin_on_use = true;
	cms_region_store(r)->pinned_bytes -= hb->len;
	return true;
}

/* Starts piece p at start (its fields but the list link). */
static struct cms_hostbuf *piece_start(struct cms_hostbuf *p, char *start, bool pin, bool pageable,
				       int32_t device)
{
	p->base = start;
	p->len = 0;
	p->free_bytes = 0;
	p->users = 0;
	p->registered = false;
	p->pin_on_use = pin;
	p->pageable = pageable;
	p->register_result = CUDA_SUCCESS;
	atomic_store(&p->failed, false);
	p->device = device;
	return p;
}

/*
 * Gives back the holes of hb, one of r's buffers: unregisters it, unmaps its holes and makes
 * a buffer of each run of slices left, page-locked again by its next copy (pin_on_use: a
 * region destroy or the free of the rest never registers what it lets go of). The slices'
 * content stays where it is. Returns the bytes given back: 0 when out of memory or when
 * cuMemHostUnregister fails (nothing changed). A hole the kernel cannot unmap (the map count
 * limit) stays, in the piece before it (the simulation's counts then see the runs only).
 */
static uint64_t buffer_split(cms_context *ctx, struct cms_region *r, struct cms_hostbuf *hb)
{
	char *pos = hb->base, *end = (char *)hb->base + hb->len;
	size_t ns, nr, j, i, *first_of = NULL, old_len = hb->len;
	struct cms_hostbuf **piece = NULL, *cur = NULL;
	bool pin = hb->registered || hb->pin_on_use, pageable = hb->pageable;
	uint64_t given = 0;
	struct slice *s;

	s = slices_of(r, hb, &ns);
	if (s && ns) {
		first_of = malloc((ns + 1) * sizeof(*first_of));
		piece = malloc(ns * sizeof(*piece));
	}
	if (!first_of || !piece)
		goto out;
	nr = runs_of(s, ns, first_of);
	if (!pieces_make(ctx, hb, s, first_of, nr, piece))
		goto out;
	if (!buffer_unpin_now(ctx, r, hb)) {
		pieces_drop(ctx, s, first_of, piece, 0, nr);
		goto out;
	}
	buffer_unlink(r, hb);
	for (j = 0; j <= nr; j++) {
		char *start = j < nr ? run_start(s, first_of, j) : end;
		size_t gap = (size_t)(start - pos);

		if (gap && !munmap(pos, gap)) {
			given += gap;
			cur = NULL;
		} else if (gap) { /* stays mapped: a hole of the piece it joins */
			if (!cur)
				cur = piece_start(piece[0], pos, pin, pageable, r->device);
			cur->len += gap;
			cur->free_bytes += gap;
		}
		if (j == nr)
			break;
		if (!cur) {
			cur = piece_start(piece[j], start, pin, pageable, r->device);
		} else if (piece[j] != cur) { /* joined to the piece before it */
			pieces_drop(ctx, s, first_of, piece, j, j + 1);
			piece[j] = NULL;
		}
		for (i = first_of[j]; i < first_of[j + 1]; i++) {
			cms_alloc_store(s[i].a)->hostbuf = cur;
			cur->users++;
			cur->len += s[i].len;
		}
		pos = run_end(s, first_of, j);
	}
	for (j = 0; j < nr; j++)
		if (piece[j]) {
			piece[j]->map_len = piece[j]->len;
			piece[j]->next = cms_region_store(r)->hostbufs;
			cms_region_store(r)->hostbufs = piece[j];
		}
	r->host_bytes -= given;
	cms_region_store(r)->host_free_bytes -= given;
	if (ctx->drv.host_free_hook)
		ctx->drv.host_free_hook(old_len);
out:
	free(piece);
	free(first_of);
	free(s);
	return given;
}

/* Whether a user of hb, one of r's buffers, has a short slice (slice_need): its backup is read
 * past the slice, at the allocation's own offsets (cms_backup_get), so none of hb may go. */
static bool holds_short(const struct cms_region *r, const struct cms_hostbuf *hb)
{
	const struct cms_alloc *a;

	for (a = r->allocs; a; a = a->next)
		if (cms_alloc_store(a)->hostbuf == hb &&
		    cms_alloc_store(a)->backup_len < page_round(a->size))
			return true;
	return false;
}

/*
 * Keeps the holes of r's buffers at most one buffer's worth (group_max): splits the buffers
 * with the most holes until they are. Best effort, after a free or a resume: a failure leaves
 * the holes for the next call. Never while an async resume's copies may still run.
 */
static void region_trim(struct cms_region *r)
{
	uint64_t bound = group_max(r);

	while (cms_region_store(r)->host_free_bytes > bound && !r->restore_pending) {
		struct cms_hostbuf *hb, *most = NULL;

		/* Not one kept without users (lazy), nor one with a short slice, whose bytes past
		 * it a split would unmap (placed in a hole of a whole buffer, reuse_holes, or
		 * reaching past its end: it goes whole at the resume that gives it back). */
		for (hb = cms_region_store(r)->hostbufs; hb; hb = hb->next)
			if (hb->users && hb->map_len == hb->len &&
			    (!most || hb->free_bytes > most->free_bytes) && !holds_short(r, hb))
				most = hb;
		if (!most || !most->free_bytes || !buffer_split(r->ctx, r, most))
			return;
	}
}

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
	if (w->prefault && !fault_in((char *)hb->base + off, len))
		atomic_store(&hb->failed, true);
	if (atomic_fetch_sub(&w->left[b], 1) == 1) {
		if (!atomic_load(&hb->failed) && !hb->pageable)
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
 * group_max bytes each.
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
 * allocation's last live byte): made short (slice_need) and kept by a resume that did not give
 * them back (RELEASE_HOST cleared while paused, or a failed cuMemHostUnregister).
 * plan_buffers then gives them new ones. A short slice that still holds the live extent stays,
 * so a retained backup keeps its address and its page-locking while the live bytes fit it.
 */
static cms_status drop_short(cms_context *ctx, struct cms_alloc **v, size_t n)
{
	cms_status st;
	size_t j;

	for (j = 0; j < n; j++) {
		struct cms_alloc *a = v[j];

		if (!wants_copy(a) || !cms_alloc_store(a)->hostbuf ||
		    cms_alloc_store(a)->backup_len >= live_need(a))
			continue;
		st = backup_unpin(ctx, a);
		if (st)
			return st;
		slice_put(ctx, a);
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
			reuse_holes(v[j]->region, v + j, n - j);
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
		bytes = slice_need(v[k]);
		for (j = k + 1; j < n && wants_copy(v[j]) && !cms_alloc_store(v[j])->hostbuf &&
				v[j]->region == v[k]->region &&
				bytes + slice_need(v[j]) <= group_max(v[k]->region);
		     j++)
			bytes += slice_need(v[j]);
		st = buffer_map(ctx, v + k, j - k, o);
		if (st)
			return st;
		if (bytes) /* else nothing to fault in, page-lock or copy: every byte declared */
			prep_add(w, v[k]->region, cms_alloc_store(v[k])->hostbuf);
		*new_bytes += bytes;
		k = j;
	}
	return CMS_OK;
}

/* ---- pageable buffers: copies through page-locked staging ---- */

static uint64_t stage_chunk(const struct cms_region *r)
{
	const cms_context *ctx = r->ctx;

	return cms_tune_bytes(&cms_ctx_store(ctx)->tune.host_stage,
			      ctx->devices[r->device].granularity);
}

/* Bytes of chunk k of a copy of len bytes in chunks of c bytes. */
static size_t chunk_len(size_t len, size_t c, size_t k)
{
	return len - k * c < c ? len - k * c : c;
}

/*
 * Copies len bytes of device memory at src into pageable host memory at dst through the
 * staging sg: the device fills one of its buffers while this thread empties the other.
 * Returns with no copy running into the staging (every lane synchronized on failure).
 */
static cms_status staged_out(struct cms_lanes *l, const struct cms_stage *sg, char *dst,
			     CUdeviceptr src, size_t len)
{
	cms_context *ctx = l->ctx;
	size_t c = sg->chunk, n = (len + c - 1) / c, k;
	cms_status st = CMS_OK;

	for (k = 0; k <= n; k++) {
		if (k < n)
			CU_TRY(ctx,
			       cuMemcpyDtoHAsync(sg->base + (k % 2) * c, src + k * c,
						 chunk_len(len, c, k), cms_lane_at(l, k % 2)),
			       st, err);
		if (!k)
			continue;
		CU_TRY(ctx, cuStreamSynchronize(cms_lane_at(l, (k - 1) % 2)), st, err);
		memcpy(dst + (k - 1) * c, sg->base + ((k - 1) % 2) * c, chunk_len(len, c, k - 1));
	}
	return CMS_OK;
err:
	(void)cms_lanes_sync(l);
	return st;
}

/* Copies len bytes of pageable host memory at src to device memory at dst through the
 * staging sg; returns with every lane synchronized (the staging may be reused at once). */
static cms_status staged_in(struct cms_lanes *l, const struct cms_stage *sg, CUdeviceptr dst,
			    const char *src, size_t len)
{
	cms_context *ctx = l->ctx;
	size_t c = sg->chunk, n = (len + c - 1) / c, k;
	cms_status st = CMS_OK, st2;

	for (k = 0; k < n; k++) {
		CUstream s = cms_lane_at(l, k % 2);
		char *buf = sg->base + (k % 2) * c;

		if (k >= 2) /* the buffer's previous copy (chunk k - 2) must be done */
			CU_TRY(ctx, cuStreamSynchronize(s), st, out);
		memcpy(buf, src + k * c, chunk_len(len, c, k));
		CU_TRY(ctx, cuMemcpyHtoDAsync(dst + k * c, buf, chunk_len(len, c, k), s), st, out);
	}
out:
	st2 = cms_lanes_sync(l);
	return st ? st : st2;
}

/* r's staging kept between restores, made on first use; NULL with the error set. */
static struct cms_stage *region_stage(cms_context *ctx, struct cms_region *r)
{
	struct cms_stage *sg = cms_region_store(r)->host_stage;

	if (sg)
		return sg;
	sg = malloc(sizeof(*sg));
	if (!sg) {
		cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot allocate a staging descriptor");
		return NULL;
	}
	if (cms_stage_make(ctx, r->device, stage_chunk(r), stage_chunk(r), "host backup", sg)) {
		free(sg);
		return NULL;
	}
	cms_region_store(r)->host_stage = sg;
	return sg;
}

static void region_stage_free(struct cms_region *r)
{
	if (!cms_region_store(r)->host_stage)
		return;
	cms_stage_free(r->ctx, cms_region_store(r)->host_stage);
	free(cms_region_store(r)->host_stage);
	cms_region_store(r)->host_stage = NULL;
}

/* Whether r's new buffers are pageable (CMS_REGION_HOST_PAGEABLE). */
static bool region_pageable(const struct cms_region *r)
{
	return (r->flags & CMS_REGION_HOST_PAGEABLE) != 0;
}

/*
 * Lets go of what r keeps between cycles: the slices of its allocations whose content is not
 * in them (not saved), unpinning each buffer before its last user unmaps it; then the holes
 * over the bound (region_trim) and the staging. A buffer whose cuMemHostUnregister fails stays
 * (usable as it is) and its status is returned; the others are gone.
 */
static cms_status host_release_retained(struct cms_region *r)
{
	cms_status st = CMS_OK, st1;
	struct cms_alloc *a;

	for (a = r->allocs; a; a = a->next) {
		if (!cms_alloc_store(a)->hostbuf || a->saved)
			continue;
		st1 = backup_unpin(r->ctx, a);
		if (!st1)
			slice_put(r->ctx, a);
		else if (!st)
			st = st1;
	}
	lazy_drop(r);
	region_trim(r);
	region_stage_free(r);
	return st;
}

/* Whether r keeps a buffer of the other kind than its flag asks for (the flag changed). */
static bool kind_changed(const struct cms_region *r)
{
	const struct cms_hostbuf *hb;

	for (hb = cms_region_store(r)->hostbufs; hb; hb = hb->next)
		if (hb->pageable != region_pageable(r))
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
		struct cms_stage *sg = region_stage(ctx, c->a->region);

		if (!sg)
			return CMS_ERR_OUT_OF_HOST_MEMORY;
		st = c->out ? staged_out(c->l, sg, h, c->a->base + off, len) :
			      staged_in(c->l, sg, c->a->base + off, h, len);
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
		pin_on_use(ctx, a);
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
		note_registered(ctx, w.regs[b], w.bufs[b]);
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
			pin_on_use(l->ctx, a);
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
		region_trim(r);
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
	region_stage_free(r);
	lazy_drop(r);
}

/* ---- buffers made ahead (host_ahead.c, CMS_REGION_PREPARE) ---- */

struct cms_hostbuf *cms_hostbuf_new(cms_context *ctx, int32_t device, size_t len, bool pageable)
{
	return buffer_new(ctx, len, 0, &cms_ctx_store(ctx)->tune, pageable, device);
}

size_t cms_hostbuf_len(const struct cms_hostbuf *hb)
{
	return hb->len;
}

bool cms_hostbuf_fault(struct cms_hostbuf *hb, size_t off, size_t len)
{
	return fault_in((char *)hb->base + off, len);
}

bool cms_hostbuf_pin(cms_context *ctx, struct cms_hostbuf *hb)
{
	buffer_register(ctx, hb);
	return hb->registered;
}

void cms_hostbuf_free(cms_context *ctx, struct cms_hostbuf *hb)
{
	if (hb->registered) /* never unmapped while page-locked (kept if the driver refuses) */
		cms_stage_cleanup(ctx, hb->device, hb->base, hb->len,
				  ctx->drv.host_alloc_hook != NULL);
	else {
		munmap(hb->base, hb->map_len);
		if (ctx->drv.host_free_hook)
			ctx->drv.host_free_hook(hb->len);
	}
	free(hb);
}

void cms_hostbuf_attach(struct cms_region *r, struct cms_hostbuf *hb, struct cms_alloc **v,
			const size_t *off, size_t n)
{
	size_t used = 0, i;

	buffer_link(r, hb);
	for (i = 0; i < n; i++) {
		slice_take(v[i], hb, off[i], page_round(v[i]->size));
		cms_alloc_store(v[i])->prepared = true;
		used += cms_alloc_store(v[i])->backup_len;
	}
	hb->free_bytes = hb->len - used; /* slices of allocations freed meanwhile: holes */
	cms_region_store(r)->host_free_bytes += hb->free_bytes;
	if (hb->registered)
		cms_region_store(r)->pinned_bytes += hb->len;
	else if (!hb->pageable)
		hb->pin_on_use = true; /* page-locking was refused: the first copy tries again */
}

uint64_t cms_hostbuf_group_max(const struct cms_region *r)
{
	return group_max(r);
}

const struct cms_store_ops cms_store_host = {
	.name = "host",
	.save = host_save,
	.save_ready = host_save_ready,
	.restore = host_restore,
	.resumed = host_resumed,
	.region_resumed = host_region_resumed,
	.region_close = host_region_close,
	.call_done = region_stage_free,
	.trim = region_trim,
	.forget_begin = backup_unpin,
	.forget = slice_put,
	.forget_cancel = backup_repin,
	.progress_bytes = host_progress_bytes,
	.backup_held = host_backup_held,
	.backup_read = host_backup_read,
	.release_kept = host_release_kept,
};
