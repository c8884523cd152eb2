/* SPDX-License-Identifier: MIT */
/*
 * counters.c - the cumulative counters of a region (cms_region_stats): bumped by
 * the engine when it commits (engine/fanout.c) and by the api layer when a
 * pause, resume or swap fails; read under the region's lock.
 */
#include <string.h>

#include "engine_internal.h"

void cms_counters_commit(struct cms_region *r, bool out, bool swap, const struct cms_counted *c)
{
	struct cms_counters *k = &cms_region_engine(r)->counters;

	if (out) {
		k->pauses++;
		k->bytes_released += c->released;
		k->bytes_to_store += c->to_store;
		k->bytes_unchanged += c->unchanged;
		k->pause_ns += c->ns;
		k->verify_ns += c->verify_ns;
	} else {
		k->resumes++;
		k->bytes_backed += c->backed;
		k->bytes_from_store += c->from_store;
		k->resume_ns += c->ns;
		k->bytes_verified += c->verified;
		k->verify_ns += c->verify_ns;
	}
	k->swaps += swap;
}

void cms_counters_fail(struct cms_region **v, size_t n, cms_status st)
{
	uint64_t slot = st < 0 && st > -CMS_STATS_STATUS_SLOTS ? (uint64_t)-st : 0;
	size_t i;

	if (!st)
		return;
	for (i = 0; i < n; i++) {
		cms_region_engine(v[i])->counters.failures++;
		cms_region_engine(v[i])->counters.failures_by_status[slot]++;
	}
}

void cms_counters_read(const struct cms_region *r, cms_region_stats *o)
{
	const struct cms_counters *k = &cms_region_engine(r)->counters;

	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	memcpy(o->tag, r->tag, sizeof(o->tag));
	o->device = r->device;
	o->policy = r->policy;
	o->state = r->state;
	o->region_id = r->id;
	o->pauses = k->pauses;
	o->resumes = k->resumes;
	o->swaps = k->swaps;
	o->failures = k->failures;
	memcpy(o->failures_by_status, k->failures_by_status, sizeof(o->failures_by_status));
	o->bytes_released = k->bytes_released;
	o->bytes_backed = k->bytes_backed;
	o->bytes_to_store = k->bytes_to_store;
	o->bytes_from_store = k->bytes_from_store;
	o->pause_ns = k->pause_ns;
	o->resume_ns = k->resume_ns;
	o->bytes_prepared = cms_region_store(r)->bytes_prepared;
	o->prepare_ns = cms_region_store(r)->prepare_ns;
	o->bytes_verified = k->bytes_verified;
	o->verify_ns = k->verify_ns;
	o->bytes_unchanged = k->bytes_unchanged;
}
