/* SPDX-License-Identifier: MIT */
/*
 * freeze.c - cms_region_freeze and cms_region_thaw (since 1.3): a region's
 * memory read-only, so that a pause whose backup still holds the content
 * copies nothing (docs/internals.md, "Frozen regions").
 */
#include "api.h"

/* Freezes (freeze) or thaws r after the feature table's check (engine/feature.c). */
static cms_status set_frozen(struct cms_region *r, bool freeze)
{
	struct cms_feature_query q = { .when = CMS_FEATURE_FREEZE, .v = &r, .n = 1 };
	cms_status st;

	if (!r)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region is NULL");
	st = cms_check_fork(r->ctx);
	if (st)
		return st;
	pthread_mutex_lock(&r->lock);
	/* Under the lock: cms_region_flags_set writes the flags (other bits) under it. */
	if (freeze)
		st = cms_feature_check(&q);
	if (!st)
		st = cms_engine_freeze(r, freeze); /* access, flag, backups */
	pthread_mutex_unlock(&r->lock);
	return st;
}

CMS_API cms_status cms_region_freeze(cms_region *region)
{
	return set_frozen(region, true);
}

CMS_API cms_status cms_region_thaw(cms_region *region)
{
	return set_frozen(region, false);
}
