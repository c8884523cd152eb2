/* SPDX-License-Identifier: MIT */
/*
 * host_holes.c - holes of the HOST policy's buffers: freed slices reused by the
 * next pause, a buffer split when a region holds too many.
 *
 * Churn stays bounded: a freed slice is a hole of its buffer, which the next
 * pause fills first (cms_host_reuse_holes: no new buffer, no new registration); when a
 * free leaves more than one buffer's worth of holes in the region
 * (cms_host_group_max), the buffer with the most holes is split (buffer_split: its
 * holes unmapped, the rest page-locked again by its next copy). A region then
 * holds at most its live slices plus cms_host_group_max bytes (the contract of
 * cms_region_info.host_bytes). Allocations that follow each other both on
 * the device (same reservation) and in their buffer are copied together, up
 * to CMS_COPY_MERGE_MAX bytes per copy (cms_backup_adjacent): 2048 x 8 MiB
 * move in 256 copies.
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
void cms_host_reuse_holes(struct cms_region *r, struct cms_alloc **v, size_t n)
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
		size_t need = cms_host_slice_need(a), full = cms_host_page_round(a->size);

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
 * a buffer of each run of slices left, page-locked again by its next copy (cms_host_pin_on_use: a
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
	cms_host_buffer_unlink(r, hb);
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

/* Whether a user of hb, one of r's buffers, has a short slice (cms_host_slice_need): its backup is
 * read past the slice, at the allocation's own offsets (cms_backup_get), so none of hb may go. */
static bool holds_short(const struct cms_region *r, const struct cms_hostbuf *hb)
{
	const struct cms_alloc *a;

	for (a = r->allocs; a; a = a->next)
		if (cms_alloc_store(a)->hostbuf == hb &&
		    cms_alloc_store(a)->backup_len < cms_host_page_round(a->size))
			return true;
	return false;
}

/*
 * Keeps the holes of r's buffers at most one buffer's worth (cms_host_group_max): splits the
 * buffers with the most holes until they are. Best effort, after a free or a resume: a failure
 * leaves the holes for the next call. Never while an async resume's copies may still run.
 */
void cms_host_region_trim(struct cms_region *r)
{
	uint64_t bound = cms_host_group_max(r);

	while (cms_region_store(r)->host_free_bytes > bound && !r->restore_pending) {
		struct cms_hostbuf *hb, *most = NULL;

		/* Not one kept without users (lazy), nor one with a short slice, whose bytes past
		 * it a split would unmap (placed in a hole of a whole buffer, cms_host_reuse_holes,
		 * or reaching past its end: it goes whole at the resume that gives it back). */
		for (hb = cms_region_store(r)->hostbufs; hb; hb = hb->next)
			if (hb->users && hb->map_len == hb->len &&
			    (!most || hb->free_bytes > most->free_bytes) && !holds_short(r, hb))
				most = hb;
		if (!most || !most->free_bytes || !buffer_split(r->ctx, r, most))
			return;
	}
}
