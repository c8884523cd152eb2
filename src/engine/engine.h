/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the transactional engine: the only code that changes the state
 * of regions. One engine serves pause, resume and swap: a call is split by
 * device into work lists (struct cms_work), each run by a schedule with its
 * device's context current (fanout.c: the first device on the calling thread,
 * every other on a thread of its own); the
 * schedules are made of the same steps (out.c: wait, save, unmap, release,
 * roll back; in.c: back, restore, undo; commit.c: commit) and never branch on
 * a restore policy (store/ does, through its operations table) nor call a
 * region feature by name (feature.c: one table of CMS_REGION_* flags, their
 * rules and hooks). It validates user input only through that table's check,
 * which api/ calls; api/ locks the regions (creation order) before calling
 * in. docs/architecture.md walks through a call.
 *
 * What the layers above use; the engine's own declarations are in
 * engine_internal.h, which no file above the engine may open.
 */
#ifndef CMS_ENGINE_H
#define CMS_ENGINE_H

#include "store.h"

/* The engine's part of an allocation (core.h says how the parts compose): scratch of the
 * running call, under the region's lock. */
struct cms_engine_alloc {
	struct cms_store_alloc below;
	bool rollback_released; /* the pause rollback: its memory had been released */
	/* CMS_REGION_VERIFY (verify.c): the checksum of the content the last pause saved, set
	 * by that pause (checksummed) and checked by the resume after it. */
	bool checksummed;
	uint64_t checksum;
	uint64_t checksum_epoch; /* its region's epoch then: it counts in that epoch only */
};

static inline struct cms_engine_alloc *cms_alloc_engine(const struct cms_alloc *a)
{
	return cms_container_of(cms_alloc_store(a), struct cms_engine_alloc, below);
}

/* Cumulative counters of a region (cms_region_stats, since 1.2; counters.c). */
struct cms_counters {
	uint64_t pauses, resumes, swaps, failures;
	uint64_t failures_by_status[CMS_STATS_STATUS_SLOTS];
	uint64_t bytes_released, bytes_backed, bytes_to_store, bytes_from_store;
	uint64_t pause_ns, resume_ns;
	uint64_t bytes_verified, verify_ns, bytes_unchanged; /* 1.3 */
};

/* The engine's part of a region (core.h says how the parts compose); under its lock. */
struct cms_engine_region {
	struct cms_store_region below;
	bool frozen;		      /* cms_region_freeze: mappings read-only (frozen.c) */
	struct cms_counters counters; /* cumulative, since creation (counters.c) */
};

static inline struct cms_engine_region *cms_region_engine(const struct cms_region *r)
{
	return cms_container_of(cms_region_store(r), struct cms_engine_region, below);
}

/* The engine's tunables (tunables.c). */
struct cms_engine_tunables {
	struct cms_tune_size overlap_batch; /* overlap.c: bytes a pause batch releases */
};

struct cms_preparer;	/* private to preparer.c */
struct cms_checksummer; /* private to checksum.c */

/* The engine's part of a context (core.h says how the parts compose). */
struct cms_engine_context {
	struct cms_store_context below;
	struct cms_engine_tunables tune;
	/* The background preparation of host backups (CMS_REGION_PREPARE; preparer.c), made by
	 * the first allocation that needs it: NULL = none; set under ctx->lock. */
	struct cms_preparer *preparer;
	/* Each device's checksum kernel and scratch (checksum.c; CMS_REGION_VERIFY), loaded
	 * while a verified region of the device holds it: NULL until the first hold; the
	 * pointer under ctx->lock. */
	struct cms_checksummer *checksum[CMS_MAX_DEVICES];
};

static inline struct cms_engine_context *cms_ctx_engine(const cms_context *ctx)
{
	return cms_container_of(cms_ctx_store(ctx), struct cms_engine_context, below);
}

/* ---- counters.c: cumulative counters of regions (their locks held) ---- */
/* A pause, resume or swap over regions v[0..n) failed with st (nothing if st is CMS_OK). */
void cms_counters_fail(struct cms_region **v, size_t n, cms_status st);
/* Fills the stats of r (struct_size and every field of ours). */
void cms_counters_read(const struct cms_region *r, cms_region_stats *out);

/* ---- tunables.c: the sizes and switches of a context, every layer's part ---- */
/* Every layer's tunables of ctx (cms_ctx_vmm(ctx)->tune, ..._store, ..._engine): the defaults,
 * then the driver's (cmssim_tunables), then $CMS_TUNABLES; a token that is unknown, malformed
 * or out of range changes nothing and is logged (CMS_LOG_WARN). Called when the driver loads
 * (core's context ops). */
void cms_tunables_load(cms_context *ctx);
/* Logs (CMS_LOG_WARN) each size that device dev of that granularity takes otherwise than
 * given (cms_tune_bytes rounded it): called once per device, when it is set up. */
void cms_tunables_check_device(cms_context *ctx, int32_t dev, size_t granularity);

/* ---- checksum.c: the checksum kernel of verified regions, for the context destroy ---- */
/* Unloads device dev's kernel and frees its scratch whatever the holds (cms_context_destroy,
 * its primary context current); what the driver refuses is logged or kept as a cleanup. */
void cms_checksum_drop(cms_context *ctx, int32_t dev);

/* ---- entry points (engine.c); the regions' locks are held, options checked ---- */

/* Pauses regions[0..n) (all active); res (library size) is filled when not NULL. */
cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t n,
			    const cms_pause_options *opts, cms_pause_result *res);
/* Resumes regions[0..n) (all paused). */
cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t n,
			     const cms_resume_options *opts, cms_resume_result *res);
/* Pauses out[0..nout) while it resumes in[0..nin), transactional over both: the memory each
 * release gives back can serve the resume at once. ropts must not ask for an async resume. */
cms_status cms_engine_swap(cms_context *ctx, struct cms_region **out, size_t nout,
			   struct cms_region **in, size_t nin, const cms_pause_options *popts,
			   const cms_resume_options *ropts, cms_pause_result *pres,
			   cms_resume_result *rres);

/* ---- lifetime.c: the end of allocations and regions (region lock held) ---- */

/* Waits for an async resume's restore copies into r (pushes r's device). */
cms_status cms_region_settle(struct cms_region *r);
/* Frees what an allocation holds; on failure it is kept as it was. */
cms_status cms_alloc_release(struct cms_alloc *a);
/* Drops a reference to r; the last one frees it (ctx->lock held). */
void cms_region_unref_locked(struct cms_region *r);

/* ---- feature.c: the region features (CMS_REGION_*), their rules and hook points ---- */

/* What a feature check is for (cms_feature_check). */
enum cms_feature_when {
	CMS_FEATURE_CREATE,	   /* flags, policy: cms_region_create, hook templates */
	CMS_FEATURE_CHANGE,	   /* v[0] (its lock held), mask, flags (their new values) */
	CMS_FEATURE_CHANGE_LOCKED, /* the same: what depends on its state (paused or not) */
	CMS_FEATURE_FREEZE,	   /* v[0] (locked): cms_region_freeze */
	CMS_FEATURE_RESUME,	   /* v[0..n) (locked), flags (CMS_RESUME_*): a resume of them */
};
struct cms_feature_query {
	enum cms_feature_when when;
	uint64_t flags;
	uint64_t mask;
	uint32_t policy;
	struct cms_region *const *v;
	size_t n;
};
/* The rules of the feature table for q (unknown bits, changeable, requires, excludes, policies,
 * CMS_RESUME_ASYNC, freeze): CMS_OK or the first broken rule's status, with its message. */
cms_status cms_feature_check(const struct cms_feature_query *q);
/* Device dev gets (attach) or loses (detach) a region with the features of flags: what they hold
 * per device (CMS_REGION_GUARD's zeros, CMS_REGION_VERIFY's kernel). attach is all or nothing. */
cms_status cms_feature_attach(cms_context *ctx, int32_t dev, uint64_t flags);
void cms_feature_detach(cms_context *ctx, int32_t dev, uint64_t flags);
/* ---- entry points of region and allocation state (feature.c, lifetime.c); locks held ---- */

/* cms_region_flags_set after its checks: r's flags become next, with what each change does. */
cms_status cms_engine_flags_set(struct cms_region *r, uint64_t next);
/* cms_region_freeze / cms_region_thaw after their checks: access, flag, backups. */
cms_status cms_engine_freeze(struct cms_region *r, bool freeze);
/* A new allocation a of its (active) region: addresses reserved, linked, memory backed. On
 * failure *keep says whether a could not be undone (linked, holding driver objects, logged)
 * or is in no list and holds nothing (the caller frees it). */
cms_status cms_engine_alloc(struct cms_alloc *a, bool *keep);
/* Undoes cms_engine_alloc (a later step of cms_alloc failed); whether a must be kept. */
bool cms_engine_alloc_undo(struct cms_alloc *a);
/* a is complete (indexed): the features of its region are told (CMS_REGION_PREPARE). */
void cms_engine_alloc_done(struct cms_alloc *a);
/* Frees a's memory and storage (cms_alloc_release) and unlinks it; on failure kept as it was. */
cms_status cms_engine_free(struct cms_alloc *a);
/* The context goes: features with per-context state stop (CMS_REGION_PREPARE's thread). */
void cms_engine_context_end(cms_context *ctx);

#endif /* CMS_ENGINE_H */
