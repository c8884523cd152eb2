/* SPDX-License-Identifier: MIT */
/*
 * span.c - the ranges of an allocation declared content-free (cms_range_discard):
 * a sorted array of disjoint, non-adjacent spans (offsets from the allocation's
 * base) that declarations merge into and cms_range_keep splits. The stores copy
 * only the live pieces between them (cms_span_next_live). The region lock is held.
 */
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

/* The first span that ends after off (ndiscarded when none). */
static size_t first_after(const struct cms_alloc *a, uint64_t off)
{
	size_t lo = 0, hi = a->ndiscarded;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->discarded[mid].off + a->discarded[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Room for extra more spans. */
static cms_status reserve(struct cms_alloc *a, size_t extra)
{
	struct cms_span *v;
	size_t cap;

	if (a->ndiscarded + extra <= a->discarded_cap)
		return CMS_OK;
	cap = a->discarded_cap ? 2 * a->discarded_cap : 4;
	while (cap < a->ndiscarded + extra)
		cap *= 2;
	v = realloc(a->discarded, cap * sizeof(*v));
	if (!v)
		return cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				     "cannot allocate %zu content-free ranges", cap);
	a->discarded = v;
	a->discarded_cap = cap;
	return CMS_OK;
}

cms_status cms_span_discard(struct cms_alloc *a, uint64_t off, uint64_t len)
{
	uint64_t lo = off, hi = off + len, covered = 0;
	size_t i, j;
	cms_status st;

	/* Spans that touch [lo, hi) (adjacent ones too) merge with it into one. */
	i = first_after(a, lo ? lo - 1 : 0); /* the first that ends at lo or after */
	for (j = i; j < a->ndiscarded && a->discarded[j].off <= hi; j++) {
		uint64_t s = a->discarded[j].off, e = s + a->discarded[j].len;

		covered += a->discarded[j].len;
		lo = s < lo ? s : lo;
		hi = e > hi ? e : hi;
	}
	if (j == i) { /* a new span at i */
		st = reserve(a, 1);
		if (st)
			return st;
		memmove(a->discarded + i + 1, a->discarded + i,
			(a->ndiscarded - i) * sizeof(*a->discarded));
		a->ndiscarded++;
		j = i + 1;
	}
	/* spans i..j-1 become one */
	a->discarded[i].off = lo;
	a->discarded[i].len = hi - lo;
	memmove(a->discarded + i + 1, a->discarded + j,
		(a->ndiscarded - j) * sizeof(*a->discarded));
	a->ndiscarded -= j - i - 1;
	a->discarded_bytes += (hi - lo) - covered;
	return CMS_OK;
}

cms_status cms_span_keep(struct cms_alloc *a, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	size_t i = first_after(a, off), j;
	cms_status st;

	if (i == a->ndiscarded || a->discarded[i].off >= end)
		return CMS_OK; /* nothing declared there */
	/* One span strictly around [off, end): split in two (the only case needing room). */
	if (a->discarded[i].off < off && a->discarded[i].off + a->discarded[i].len > end) {
		st = reserve(a, 1);
		if (st)
			return st;
		memmove(a->discarded + i + 1, a->discarded + i,
			(a->ndiscarded - i) * sizeof(*a->discarded));
		a->ndiscarded++;
		a->discarded[i].len = off - a->discarded[i].off;
		a->discarded[i + 1].len = a->discarded[i + 1].off + a->discarded[i + 1].len - end;
		a->discarded[i + 1].off = end;
		a->discarded_bytes -= len;
		return CMS_OK;
	}
	if (a->discarded[i].off < off) { /* keeps its head */
		a->discarded_bytes -= a->discarded[i].off + a->discarded[i].len - off;
		a->discarded[i].len = off - a->discarded[i].off;
		i++;
	}
	for (j = i; j < a->ndiscarded && a->discarded[j].off + a->discarded[j].len <= end; j++)
		a->discarded_bytes -= a->discarded[j].len;    /* covered whole: goes */
	if (j < a->ndiscarded && a->discarded[j].off < end) { /* keeps its tail */
		a->discarded_bytes -= end - a->discarded[j].off;
		a->discarded[j].len -= end - a->discarded[j].off;
		a->discarded[j].off = end;
	}
	memmove(a->discarded + i, a->discarded + j, (a->ndiscarded - j) * sizeof(*a->discarded));
	a->ndiscarded -= j - i;
	return CMS_OK;
}

void cms_span_clear(struct cms_alloc *a)
{
	free(a->discarded);
	a->discarded = NULL;
	a->ndiscarded = a->discarded_cap = 0;
	a->discarded_bytes = 0;
}

bool cms_span_next_live(const struct cms_alloc *a, uint64_t *off, uint64_t end, uint64_t *len)
{
	uint64_t pos = *off;
	size_t i;

	if (!a->ndiscarded) { /* the common case: the whole range */
		*len = end - pos;
		return pos < end;
	}
	i = first_after(a, pos);
	if (i < a->ndiscarded && a->discarded[i].off <= pos) { /* inside a span: skip it */
		pos = a->discarded[i].off + a->discarded[i].len;
		i++;
	}
	if (pos >= end)
		return false;
	*off = pos;
	*len = (i < a->ndiscarded && a->discarded[i].off < end ? a->discarded[i].off : end) - pos;
	return true;
}

uint64_t cms_span_live_bytes(const struct cms_alloc *a, uint64_t off, uint64_t end)
{
	uint64_t pos = off, len, sum = 0;

	if (!a->ndiscarded)
		return end - off;
	if (!off && end == a->size) /* the whole allocation */
		return a->size - a->discarded_bytes;
	for (; cms_span_next_live(a, &pos, end, &len); pos += len)
		sum += len;
	return sum;
}

uint64_t cms_span_live_end(const struct cms_alloc *a)
{
	const struct cms_span *last = a->ndiscarded ? &a->discarded[a->ndiscarded - 1] : NULL;

	return last && last->off + last->len == a->size ? last->off : a->size;
}
