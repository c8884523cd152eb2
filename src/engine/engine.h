/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the transactional engine: the only code that changes the state
 * of regions. One engine serves pause, resume and swap: a call is split by
 * device into work lists (struct cms_work), each run by a schedule with its
 * device's context current (fanout.c: the first device on the calling thread,
 * every other on a thread of its own); the
 * schedules are made of the same steps (out.c: wait, save, unmap, release,
 * roll back; in.c: back, restore, undo; commit.c: commit) and never branch on
 * a restore policy (store/ does, through its operations table). It never
 * validates user input: api/ does, and locks the regions (creation order)
 * before calling in. docs/architecture.md walks through a call.
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
};

static inline struct cms_engine_alloc *cms_alloc_engine(const struct cms_alloc *a)
{
	return cms_container_of(cms_alloc_store(a), struct cms_engine_alloc, below);
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

/* ---- verify.c: a device's hold on the checksum of verified regions ---- */
/* Holds what the checksum needs on device dev for a region that gets the flag (its create,
 * cms_region_flags_set): the device's kernel and scratch, loaded by the first hold
 * (cms_checksum_hold; CMS_ERR_OUT_OF_DEVICE_MEMORY on a full device); on failure nothing is
 * held. Pushes the device's context. */
cms_status cms_verify_hold(cms_context *ctx, int32_t dev);
/* Gives a hold back (the flag cleared, the region destroyed or its create failed): the last
 * one of the device unloads the kernel and frees the scratch. Never fails (a context that
 * cannot be pushed leaves them loaded, logged, for the context's destroy). */
void cms_verify_release(cms_context *ctx, int32_t dev);

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

/* ---- preparer.c: the background thread that makes host backups ahead (CMS_REGION_PREPARE) ---- */

/* r (its lock held) may have allocations to prepare (after a cms_alloc, a flag change): wakes
 * the context's preparation thread, starting it on first need, and emits the lines it logged
 * since the last call. Nothing for a region that wants no preparation; best effort (a thread
 * that cannot be started is logged). */
void cms_prepare_kick(struct cms_region *r);
/* Stops and joins the context's preparation thread (a buffer it is making goes back) and
 * frees its state; emits its last log lines. No lock held (cms_context_destroy). */
void cms_prepare_stop(cms_context *ctx);

#endif /* CMS_ENGINE_H */
