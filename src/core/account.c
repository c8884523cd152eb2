/* SPDX-License-Identifier: MIT */
/*
 * account.c - a region's list of allocations and its byte counters: they
 * follow each allocation's state (mapped, saved) through these functions only.
 * The region lock is held.
 */
#include "core_internal.h"

void cms_region_link_alloc(struct cms_region *r, struct cms_alloc *a)
{
	a->prev = NULL;
	a->next = r->allocs;
	if (r->allocs)
		r->allocs->prev = a;
	r->allocs = a;
	r->nallocs++;
	r->logical_bytes += a->size;
	r->physical_bytes += a->physical;
	if (a->mapped)
		r->backed_bytes += a->physical;
	if (a->saved)
		r->backup_bytes += a->size;
}

void cms_region_unlink_alloc(struct cms_region *r, struct cms_alloc *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		r->allocs = a->next;
	if (a->next)
		a->next->prev = a->prev;
	a->prev = a->next = NULL;
	r->nallocs--;
	r->logical_bytes -= a->size;
	r->physical_bytes -= a->physical;
	if (a->mapped)
		r->backed_bytes -= a->physical;
	if (a->saved)
		r->backup_bytes -= a->size;
}

void cms_alloc_set_mapped(struct cms_alloc *a, bool mapped)
{
	if (a->mapped == mapped)
		return;
	a->mapped = mapped;
	if (mapped)
		a->region->backed_bytes += a->physical;
	else
		a->region->backed_bytes -= a->physical;
}

void cms_alloc_set_saved(struct cms_alloc *a, bool saved)
{
	if (a->saved == saved)
		return;
	a->saved = saved;
	if (saved)
		a->region->backup_bytes += a->size;
	else
		a->region->backup_bytes -= a->size;
}
