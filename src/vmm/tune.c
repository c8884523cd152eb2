/* SPDX-License-Identifier: MIT */
/*
 * tune.c - the bytes of a tunable size on a device: a size given in bytes, or
 * relative to the device's VMM granularity ("Ng", "g/N"), known in bytes only
 * there, is kept in its range and alignment; a size taken in whole granules
 * (the chunk size) is rounded down to them, at least two, else 0. The sizes
 * themselves, their limits and CMS_TUNABLES are engine/tunables.c's.
 */
#include "vmm_internal.h"

/* granules * granularity / div, saturated at UINT64_MAX. */
static uint64_t granule_bytes(const struct cms_tune_size *s, size_t granularity)
{
	uint64_t g = s->granules;

	if (g && granularity > UINT64_MAX / g)
		return UINT64_MAX;
	return g * granularity / s->div;
}

uint64_t cms_tune_given(const struct cms_tune_size *s, size_t granularity)
{
	uint64_t v;

	if (!s->div || !s->lim) /* bytes: checked when read; no limits: not loaded (0) */
		return s->bytes;
	v = granule_bytes(s, granularity);
	v -= v % s->lim->align;
	if (v < s->lim->min)
		v = s->lim->min;
	if (v > s->lim->max)
		v = s->lim->max; /* a multiple of align, as min */
	return v;
}

uint64_t cms_tune_bytes(const struct cms_tune_size *s, size_t granularity)
{
	uint64_t v = cms_tune_given(s, granularity);

	if (!s->lim || !s->lim->granules || !granularity)
		return v;
	v -= v % granularity; /* not above the maximum, nor below the minimum of 0 */
	return v / granularity < 2 ? 0 : v;
}
