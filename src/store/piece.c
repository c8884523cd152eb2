/* SPDX-License-Identifier: MIT */
/*
 * piece.c - the live pieces of a copy: every copy list of a store (HOST saves
 * and restores, DISK staging copies) goes through cms_store_pieces, which
 * leaves out the ranges declared content-free (cms_range_discard, core/span.c).
 */
#include "store_internal.h"

cms_status cms_store_pieces(struct cms_alloc *const *v, size_t n, uint64_t off, uint64_t len,
			    cms_piece_fn fn, void *arg, uint64_t *bytes)
{
	uint64_t end = off + len, at = 0, poff = 0, plen = 0, pos, l;
	cms_status st;
	size_t i;

	for (i = 0; i < n && at < end; at += v[i]->size, i++) {
		uint64_t lo = off > at ? off - at : 0;
		uint64_t hi = end - at < v[i]->size ? end - at : v[i]->size;

		for (pos = lo; lo < hi && cms_span_next_live(v[i], &pos, hi, &l); pos += l) {
			if (plen && poff + plen == at + pos) { /* continues the piece */
				plen += l;
				continue;
			}
			if (plen) {
				st = fn(arg, poff, plen);
				if (st)
					return st;
				*bytes += plen;
			}
			poff = at + pos;
			plen = l;
		}
	}
	if (!plen)
		return CMS_OK;
	st = fn(arg, poff, plen);
	if (!st)
		*bytes += plen;
	return st;
}
