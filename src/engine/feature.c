/* SPDX-License-Identifier: MIT */
/*
 * feature.c - the region features: one row per CMS_REGION_* flag with its rules
 * (since, changeable, requires, excludes, policies, synchronous resume, freeze)
 * and its hooks, the one check of those rules (cms_region_create, the hook
 * templates, cms_region_flags_set, cms_region_freeze, a resume's options), the
 * engine's hook points, and the state changes a flag change makes.
 *
 * A feature's work in a call runs at named points (before the out side saves,
 * after the in side's restores are done, at a rollback; the counters before
 * and after the call; a region's device getting or losing the flag; an
 * allocation or flag change; the context's end), each iterating the table
 * once per call or per region: a call whose regions have no feature with a
 * hook at a point pays one pass over its regions' flags, nothing per
 * allocation. docs/architecture.md, "Adding a region feature", is the recipe.
 */
#include <stdio.h>

#include "engine_internal.h"

/* When a region keeps less because of a flag (cms_region_flags_set, an active region). */
enum drops_kept {
	KEEPS,	      /* nothing changes */
	WHILE_SET,    /* every change while it is set (in the new flags) */
	WHEN_CHANGED, /* when it changes either way */
};

#define POLICY(p) (1u << (p))

struct feature {
	uint64_t flag;
	const char *name;
	const char *since; /* the release that brought it */
	bool changeable;   /* by cms_region_flags_set */
	/* non-NULL: it cannot change while the region is paused (CMS_ERR_PAUSED), why */
	const char *paused_why;
	uint64_t requires; /* flags it needs when set (create, or a change that sets it) */
	uint64_t excludes; /* flags it cannot go with when set */
	const char *excludes_why;
	uint32_t policies;	/* POLICY() bits it allows; 0: every policy */
	const char *policy_why; /* what the other policies lack */
	/* non-NULL: a resume of a region with it must be synchronous (CMS_RESUME_ASYNC is
	 * refused), why */
	const char *async_why;
	/* non-NULL: a region with it cannot be frozen (CMS_ERR_NOT_SUPPORTED), why */
	const char *freeze_why;
	bool stales;		    /* a change makes the region's current backups stale */
	enum drops_kept drops_kept; /* a change gives back what an active region keeps */
	const struct cms_feature_ops *ops;
};

/*
 * The table. Rows run in this order at every check: the first broken rule a call meets is the
 * one it met before the table at create and at a change (the order of the checks since 1.0).
 * An asynchronous resume refused for two reasons at once (a region with both
 * CMS_REGION_HOST_PAGEABLE and CMS_REGION_VERIFY, or two regions, one with each) now names
 * the pageable backups where it named the verification before 1.4: the status is the same.
 */
static const struct feature features[] = {
	{
		.flag = CMS_REGION_RELEASE_HOST,
		.name = "CMS_REGION_RELEASE_HOST",
		.since = "1.0",
		.changeable = true,
		.async_why = "gives host memory back after each resume: CMS_RESUME_ASYNC needs "
			     "its host buffers until the copies end",
		.stales = true,
		.drops_kept = WHILE_SET,
	},
	{
		.flag = CMS_REGION_SHAREABLE,
		.name = "CMS_REGION_SHAREABLE",
		.since = "1.1",
		.freeze_why = "shareable: its importers map it read-write themselves",
	},
	{
		.flag = CMS_REGION_SHAREABLE_FABRIC,
		.name = "CMS_REGION_SHAREABLE_FABRIC",
		.since = "1.1",
		.freeze_why = "shareable: its importers map it read-write themselves",
	},
	{
		.flag = CMS_REGION_COALESCE,
		.name = "CMS_REGION_COALESCE",
		.since = "1.1",
	},
	{
		.flag = CMS_REGION_CHUNKS,
		.name = "CMS_REGION_CHUNKS",
		.since = "1.2",
		.requires = CMS_REGION_COALESCE,
	},
	{
		.flag = CMS_REGION_GUARD,
		.name = "CMS_REGION_GUARD",
		.since = "1.2",
		.ops = &cms_feature_guard,
	},
	{
		.flag = CMS_REGION_HOST_PAGEABLE,
		.name = "CMS_REGION_HOST_PAGEABLE",
		.since = "1.2",
		.changeable = true,
		.paused_why = "its backups are where they are until it is resumed",
		.policies = POLICY(CMS_POLICY_HOST),
		.policy_why = "keeps no host backup",
		.async_why = "keeps pageable host backups: CMS_RESUME_ASYNC cannot restore them "
			     "through staging after the call returns",
		.stales = true,
		.drops_kept = WHEN_CHANGED,
	},
	{
		.flag = CMS_REGION_PREPARE,
		.name = "CMS_REGION_PREPARE",
		.since = "1.3",
		.excludes = CMS_REGION_RELEASE_HOST,
		.excludes_why = "a region that gives its host backups back after each resume has "
				"none to prepare ahead",
		.policies = POLICY(CMS_POLICY_HOST),
		.policy_why = "keeps no host backup",
		.ops = &cms_feature_prepare,
	},
	{
		.flag = CMS_REGION_VERIFY,
		.name = "CMS_REGION_VERIFY",
		.since = "1.3",
		.changeable = true,
		.policies = POLICY(CMS_POLICY_HOST) | POLICY(CMS_POLICY_DISK),
		.policy_why = "keeps no backup to verify",
		.async_why = "verifies its content after the restore: CMS_RESUME_ASYNC would "
			     "return before it is checked",
		.ops = &cms_feature_verify,
	},
};
#define NFEATURES (sizeof(features) / sizeof(features[0]))

static const char *const policy_names[] = { "CMS_POLICY_DISCARD", "CMS_POLICY_ZERO",
					    "CMS_POLICY_HOST", "CMS_POLICY_DISK" };

static uint64_t all_flags(bool changeable_only)
{
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if (!changeable_only || features[i].changeable)
			m |= features[i].flag;
	return m;
}

/* The name of the lowest flag of bits that has a row. */
static const char *name_of(uint64_t bits)
{
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if (bits & features[i].flag)
			return features[i].name;
	return "?";
}

/* "CMS_POLICY_HOST or CMS_POLICY_DISK" for f's policies, into buf. */
static const char *policy_list(const struct feature *f, char *buf, size_t len)
{
	size_t i, at = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++)
		if ((f->policies & POLICY(i)) && at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? " or " : "",
					       policy_names[i]);
	return buf;
}

/* The rules a flag set now (create: every flag; a change: the bits it sets) must meet:
 * requires, policies, excludes. r: the region changed (NULL at create). */
static cms_status check_set(const struct feature *f, uint64_t flags, uint32_t policy,
			    const struct cms_region *r)
{
	char list[128];

	if (f->requires & ~flags)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s needs %s", f->name,
				     name_of(f->requires & ~flags));
	if (f->policies && !(f->policies & POLICY(policy))) {
		if (r)
			return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
					     "%s needs %s (region \"%s\" has policy %u, which %s)",
					     f->name, policy_list(f, list, sizeof(list)), r->tag,
					     policy, f->policy_why);
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s needs %s (policy %u %s)",
				     f->name, policy_list(f, list, sizeof(list)), policy,
				     f->policy_why);
	}
	if (f->excludes & flags)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "%s with %s: %s", f->name,
				     name_of(f->excludes & flags), f->excludes_why);
	return CMS_OK;
}

static cms_status check_create(uint64_t flags, uint32_t policy)
{
	cms_status st;
	size_t i;

	if (flags & ~all_flags(false))
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "unknown region flags 0x%llx",
				     (unsigned long long)flags);
	for (i = 0; i < NFEATURES; i++) {
		if (!(flags & features[i].flag))
			continue;
		st = check_set(&features[i], flags, policy, NULL);
		if (st)
			return st;
	}
	return CMS_OK;
}

/* A change's rules: the mask, then each flag it sets against r's other flags (its lock held). */
static cms_status check_change(const struct cms_region *r, uint64_t mask, uint64_t flags)
{
	uint64_t changeable = all_flags(true);
	cms_status st;
	size_t i;

	if (mask & ~changeable)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "region flags 0x%llx cannot be changed (only 0x%llx can)",
				     (unsigned long long)(mask & ~changeable),
				     (unsigned long long)changeable);
	if (flags & ~mask)
		return cms_set_error(CMS_ERR_INVALID_ARGUMENT,
				     "flags 0x%llx are outside the mask 0x%llx",
				     (unsigned long long)flags, (unsigned long long)mask);
	for (i = 0; i < NFEATURES; i++) {
		if (!(flags & features[i].flag))
			continue;
		/* exclusions are the set flag's: setting CMS_REGION_RELEASE_HOST on a
		 * CMS_REGION_PREPARE region stops its preparation */
		st = check_set(&features[i], (r->flags & ~mask) | flags, r->policy, r);
		if (st)
			return st;
	}
	return CMS_OK;
}

/* A change's rules on r's state (its lock held). */
static cms_status check_change_locked(const struct cms_region *r, uint64_t mask, uint64_t flags)
{
	uint64_t changed = r->flags ^ ((r->flags & ~mask) | flags);
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if ((changed & features[i].flag) && features[i].paused_why &&
		    r->state != CMS_STATE_ACTIVE)
			return cms_set_error(CMS_ERR_PAUSED, "region \"%s\" is paused: %s", r->tag,
					     features[i].paused_why);
	return CMS_OK;
}

static cms_status check_freeze(const struct cms_region *r)
{
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if ((r->flags & features[i].flag) && features[i].freeze_why)
			return cms_set_error(CMS_ERR_NOT_SUPPORTED,
					     "region \"%s\" is %s, so it cannot be frozen", r->tag,
					     features[i].freeze_why);
	return CMS_OK;
}

/* A resume of v[0..n) with options flags: rows first, then regions (the first row wins). */
static cms_status check_resume(struct cms_region *const *v, size_t n, uint64_t flags)
{
	size_t i, k;

	if (!(flags & CMS_RESUME_ASYNC))
		return CMS_OK;
	for (i = 0; i < NFEATURES; i++) {
		if (!features[i].async_why)
			continue;
		for (k = 0; k < n; k++)
			if (v[k]->flags & features[i].flag)
				return cms_set_error(CMS_ERR_INVALID_ARGUMENT, "region \"%s\" %s",
						     v[k]->tag, features[i].async_why);
	}
	return CMS_OK;
}

cms_status cms_feature_check(const struct cms_feature_query *q)
{
	switch (q->when) {
	case CMS_FEATURE_CREATE:
		return check_create(q->flags, q->policy);
	case CMS_FEATURE_CHANGE:
		return check_change(q->v[0], q->mask, q->flags);
	case CMS_FEATURE_CHANGE_LOCKED:
		return check_change_locked(q->v[0], q->mask, q->flags);
	case CMS_FEATURE_FREEZE:
		return check_freeze(q->v[0]);
	case CMS_FEATURE_RESUME:
		return check_resume(q->v, q->n, q->flags);
	}
	return cms_set_error(CMS_ERR_INTERNAL, "unknown feature check %d", (int)q->when);
}

/* Flags a change of CMS_REGION_* bits changed (from old to new) makes current backups stale. */
static uint64_t cms_feature_stales(uint64_t changed)
{
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if (features[i].stales)
			m |= features[i].flag;
	return changed & m;
}

/* Flags whose setting (in next) or change (in changed) gives back what a region keeps. */
static uint64_t cms_feature_drops_kept(uint64_t next, uint64_t changed)
{
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if ((features[i].drops_kept == WHILE_SET && (next & features[i].flag)) ||
		    (features[i].drops_kept == WHEN_CHANGED && (changed & features[i].flag)))
			m |= features[i].flag;
	return m;
}

/* ---- hook points ---- */

/* The row i's hooks when flags has its flag; NULL otherwise or when it has none. */
static const struct cms_feature_ops *ops_of(size_t i, uint64_t flags)
{
	return (flags & features[i].flag) ? features[i].ops : NULL;
}

static uint64_t flags_of(struct cms_region *const *v, size_t n)
{
	uint64_t m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		m |= v[i]->flags;
	return m;
}

cms_status cms_feature_attach(cms_context *ctx, int32_t dev, uint64_t flags)
{
	const struct cms_feature_ops *o;
	cms_status st;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, flags);
		if (!o || !o->attach)
			continue;
		st = o->attach(ctx, dev);
		if (st)
			goto err_attached;
	}
	return CMS_OK;

err_attached:
	while (i-- > 0) { /* the rows before this one */
		o = ops_of(i, flags);
		if (o && o->detach)
			o->detach(ctx, dev);
	}
	return st;
}

void cms_feature_detach(cms_context *ctx, int32_t dev, uint64_t flags)
{
	const struct cms_feature_ops *o;
	size_t i;

	for (i = NFEATURES; i-- > 0;) {
		o = ops_of(i, flags);
		if (o && o->detach)
			o->detach(ctx, dev);
	}
}

/* r has new allocations or flags: features with work in the background are told. */
static void changed(struct cms_region *r)
{
	const struct cms_feature_ops *o;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, r->flags);
		if (o && o->changed)
			o->changed(r);
	}
}

cms_status cms_feature_before_save(struct cms_work *w, CUstream stream)
{
	uint64_t flags = flags_of(w->out, w->nout);
	const struct cms_feature_ops *o;
	cms_status st;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, flags);
		if (!o || !o->before_save)
			continue;
		st = o->before_save(w, stream);
		if (st)
			return st;
	}
	return CMS_OK;
}

cms_status cms_feature_after_restore(struct cms_work *w, CUstream stream)
{
	uint64_t flags = flags_of(w->in, w->nin);
	const struct cms_feature_ops *o;
	cms_status st;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, flags);
		if (!o || !o->after_restore)
			continue;
		st = o->after_restore(w, stream);
		if (st)
			return st;
	}
	return CMS_OK;
}

void cms_feature_rollback(struct cms_work *w)
{
	uint64_t flags = flags_of(w->out, w->nout);
	const struct cms_feature_ops *o;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, flags);
		if (o && o->rollback)
			o->rollback(w);
	}
}

void cms_feature_plan(const struct cms_region *r, bool out, struct cms_counted *c)
{
	const struct cms_feature_ops *o;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, r->flags);
		if (o && o->plan)
			o->plan(r, out, c);
	}
}

void cms_feature_count(const struct cms_work *w, const struct cms_region *r, bool out,
		       struct cms_counted *c)
{
	const struct cms_feature_ops *o;
	size_t i;

	for (i = 0; i < NFEATURES; i++) {
		o = ops_of(i, r->flags);
		if (o && o->count)
			o->count(w, r, out, c);
	}
}

/* ---- CMS_REGION_GUARD: the device's zero handles, made with the first such region ---- */

/* Made now, so that a pause (or a swap on a full device) need not find memory; kept until the
 * context goes (no detach). */
static cms_status guard_attach(cms_context *ctx, int32_t dev)
{
	cms_status st = cms_push(ctx, dev);

	if (st)
		return st;
	st = cms_vmm_guard_prepare(ctx, dev);
	cms_pop(ctx);
	return st;
}

const struct cms_feature_ops cms_feature_guard = { .attach = guard_attach };

/* ---- entry points: a flag change, an allocation's end, the context's end ---- */

cms_status cms_engine_flags_set(struct cms_region *r, uint64_t next)
{
	uint64_t changes = r->flags ^ next;
	cms_status st;

	/* held from now on, so that a pause on a full device need not find memory */
	st = cms_feature_attach(r->ctx, r->device, changes & next);
	if (st)
		return st; /* nothing changed */
	/* Active and asked to keep less: what it keeps goes now, once no copy reads it. */
	if (r->state == CMS_STATE_ACTIVE && cms_feature_drops_kept(next, changes)) {
		st = cms_region_settle(r);
		if (st)
			goto err_attached; /* nothing changed */
		cms_store_release_kept(r, next & CMS_REGION_RELEASE_HOST);
	}
	r->flags = next;
	cms_feature_detach(r->ctx, r->device, changes & ~next);
	/* What it keeps may have gone: a frozen region's next pause copies. CMS_REGION_VERIFY
	 * changes no backup (the next pause checksums the memory, copied or not). */
	if (cms_feature_stales(changes))
		cms_store_stale(r);
	changed(r); /* CMS_REGION_PREPARE without CMS_REGION_RELEASE_HOST: again */
	cms_log(r->ctx, CMS_LOG_DEBUG, "region \"%s\": flags 0x%llx", r->tag,
		(unsigned long long)next);
	return CMS_OK;

err_attached:
	cms_feature_detach(r->ctx, r->device, changes & next);
	return st;
}

void cms_engine_alloc_done(struct cms_alloc *a)
{
	changed(a->region); /* CMS_REGION_PREPARE: its host backup is made in the background */
}

void cms_engine_context_end(cms_context *ctx)
{
	size_t i;

	for (i = 0; i < NFEATURES; i++)
		if (features[i].ops && features[i].ops->context_end)
			features[i].ops->context_end(ctx);
}
