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

struct cms_work;

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
/* Flags a change of CMS_REGION_* bits changed (from old to new) makes current backups stale. */
uint64_t cms_feature_stales(uint64_t changed);
/* Flags whose setting (in next) or change (in changed) gives back what a region keeps. */
uint64_t cms_feature_drops_kept(uint64_t next, uint64_t changed);
/* Device dev gets (attach) or loses (detach) a region with the features of flags: what they hold
 * per device (CMS_REGION_GUARD's zeros, CMS_REGION_VERIFY's kernel). attach is all or nothing. */
cms_status cms_feature_attach(cms_context *ctx, int32_t dev, uint64_t flags);
void cms_feature_detach(cms_context *ctx, int32_t dev, uint64_t flags);
/* The engine's points: each runs the hooks of the features of w's out (before_save, rollback)
 * or in (after_restore) regions; nothing when none has a feature with that hook. */
cms_status cms_feature_before_save(struct cms_work *w, CUstream stream);
cms_status cms_feature_after_restore(struct cms_work *w, CUstream stream);
void cms_feature_rollback(struct cms_work *w);
/* Counters (fanout.c) of region r: before the call runs (plan) and after it committed (count). */
void cms_feature_plan(const struct cms_region *r, bool out, struct cms_counted *c);
void cms_feature_count(const struct cms_work *w, const struct cms_region *r, bool out,
		       struct cms_counted *c);

/* One feature's hooks (NULL: none); each called only for regions with its flag. */
struct cms_feature_ops {
	cms_status (*attach)(cms_context *ctx, int32_t dev);
	void (*detach)(cms_context *ctx, int32_t dev);
	void (*changed)(struct cms_region *r); /* after a cms_alloc in r or a flag change */
	void (*context_end)(cms_context *ctx); /* cms_context_destroy (every feature with it) */
	cms_status (*before_save)(struct cms_work *w, CUstream stream);
	cms_status (*after_restore)(struct cms_work *w, CUstream stream);
	void (*rollback)(struct cms_work *w);
	void (*plan)(const struct cms_region *r, bool out, struct cms_counted *c);
	void (*count)(const struct cms_work *w, const struct cms_region *r, bool out,
		      struct cms_counted *c);
};
extern const struct cms_feature_ops cms_feature_guard, cms_feature_verify, cms_feature_prepare;

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

/* ---- the engine's own ---- */

struct cms_call;
struct cms_work;

/* A schedule: what one device does for one kind of call (pause.c, resume.c, swap_schedule.c). */
struct cms_schedule {
	const char *name; /* "pause", "resume", "swap": progress reports and logs */
	cms_status (*run)(struct cms_work *w);
};
extern const struct cms_schedule cms_sched_pause, cms_sched_resume, cms_sched_swap;

/* One engine call over locked regions: those to pause (out) and to resume (in). */
struct cms_call {
	cms_context *ctx;
	const struct cms_schedule *sched;
	struct cms_region **out, **in;
	size_t nout, nin;
	const cms_pause_options *po;  /* out side */
	const cms_resume_options *ro; /* in side */
	bool measure; /* read the driver's free memory around the out side (a pause result) */
};

/* The agreement of the devices of one call (vote.c). */
#define CMS_XDEV_POINTS 2 /* agreement points of a pause; resume and swap use 1 */
struct cms_xdev {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t n;			 /* devices */
	size_t arrived[CMS_XDEV_POINTS]; /* devices that voted at (or left before) each point */
	bool failed;			 /* a device failed on its own */
};
/* A device's part in it; NULL: the only device of the call. */
struct cms_xvote {
	struct cms_xdev *x;
	unsigned voted;	    /* points this device passed */
	bool aborted;	    /* a vote told it to roll back */
	uint64_t waited_ns; /* time spent waiting at the points */
};
cms_status cms_xdev_init(struct cms_xdev *x, size_t n);
void cms_xdev_fini(struct cms_xdev *x);
/* The device is done: counts it at every point it did not vote at (as failed if it failed). */
void cms_xdev_leave(struct cms_xvote *xv, bool failed);
/* CMS_XDEV_ABORTED (and aborted set) when a device of the call failed already, so that this
 * one stops early and rolls back; CMS_OK otherwise and for xv NULL. */
cms_status cms_xdev_check(struct cms_xvote *xv);
/* Status of a device that failed only because another one did: never returned to callers. */
#define CMS_XDEV_ABORTED 1
/*
 * An agreement point: waits until every device of the call got here (or failed before);
 * CMS_OK when none failed, else CMS_XDEV_ABORTED (with a message): roll back. CMS_OK at once
 * for xv NULL. A device's schedule votes at the same points every call, and nothing may fail
 * after its last vote (the other devices commit then).
 */
cms_status cms_xdev_vote(struct cms_xvote *xv);

/*
 * One device's share of a call: its regions, the work lists of allocations
 * (address order), and what it did. Made by fanout.c, run by a schedule on a
 * thread that has the device's context current.
 */
struct cms_work {
	cms_context *ctx;
	const struct cms_call *call;
	int32_t dev;
	struct cms_region **out, **in; /* this device's regions, creation order */
	size_t nout, nin;
	struct cms_alloc **vo; /* out: allocations holding memory, to release */
	struct cms_alloc **vi; /* in: allocations missing memory, to back */
	size_t no, ni;
	bool *had_handle; /* vi[i] held its physical handle before the call */
	struct cms_xvote *xv;
	/* The in side of a swap waits here for the out side's releases on the device. */
	bool sides; /* lock and cond are initialised: a swap */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t releases; /* batches released so far */
	bool out_done;	   /* the out side released all it will */
	bool stop;	   /* a side failed: the other stops early */
	/* What it did (results), valid when st is CMS_OK. */
	uint64_t released, saved;	  /* out: device bytes released, bytes copied to stores */
	uint64_t backed, restored;	  /* in: device bytes backed, bytes copied from stores */
	uint64_t free_before, free_after; /* cuMemGetInfo around the out side (pause result) */
	uint64_t elapsed_ns;
	uint64_t verify_ns; /* time spent checksumming (verify.c) */
	cms_status st;
	bool failed_in; /* st comes from the in side */
};

/* ---- work.c: work lists and device-level steps ---- */
/* Collects w's work lists and plans runs for the in side (vmm/run.c). */
cms_status cms_work_collect(struct cms_work *w);
void cms_work_release(struct cms_work *w);
/* Waits for an async resume's copies into w's out regions (device context current). */
cms_status cms_work_settle(struct cms_work *w);
/* cuMemGetInfo free bytes of w's device (0: not measured; only a measurement). */
uint64_t cms_work_free_bytes(struct cms_work *w);
/* The work lists' filters: the out side takes allocations holding memory, the in side those
 * missing some (also the progress totals, fanout.c). */
bool cms_work_holds_memory(const struct cms_alloc *a);
bool cms_work_lacks_memory(const struct cms_alloc *a);
/* CMS_OK, or CMS_XDEV_ABORTED when w should stop early: the other side of its swap failed
 * (w->stop), or another device of the call did (cms_xdev_check). */
cms_status cms_work_stop_check(struct cms_work *w);
/*
 * The frozen regions of v[0..n) read-only again after the call mapped them read-write to
 * restore (a resume: before its last vote, so that a failure is undone; a pause's rollback).
 * All or nothing per region (vmm/access.c); tries all, returns the first failure. thaw: a
 * region left all read-write by a failure is thawed (logged), so that the flag never claims
 * read-only memory that is writable.
 */
cms_status cms_work_refreeze(struct cms_region **v, size_t n, bool thaw);
/* The lanes of w's device: copy streams [first, first + count). */
struct cms_lanes cms_work_lanes(struct cms_work *w, unsigned first, unsigned count);

/* ---- out.c: the steps that release memory ---- */
/* Waits for GPU work that may use the memory (pause options: stream, event or device). */
cms_status cms_out_wait(struct cms_work *w);
/* Whether a pause of w may release memory while its copies run (one device, saves into
 * storage that exists, enough bytes to gain). */
bool cms_out_can_overlap(const struct cms_work *w);
/* Saves and releases w->vo in batches, each released once its copies are done (overlap.c):
 * every allocation (all) or those saved asynchronously. Signals the in side per batch. */
cms_status cms_out_overlapped(struct cms_work *w, struct cms_lanes *l, bool all);
/* Saves what is still mapped (asynchronous saves, lanes synchronized, synchronous saves). */
cms_status cms_out_save(struct cms_work *w, struct cms_lanes *l);
/* Bytes giving a's memory back frees: its own, and a run's retained bytes with its last
 * member (a run's handle and mapping go with its first member, run.c). */
uint64_t cms_out_bytes(const struct cms_alloc *a);
/* Unmaps every allocation of w->vo still mapped; counts in w->released those mapped without a
 * handle (their memory goes with the mapping). */
cms_status cms_out_unmap(struct cms_work *w);
/* Releases every handle of w->vo still held; counts w->released. */
cms_status cms_out_release(struct cms_work *w);
/* CMS_REGION_GUARD: maps the zero handle read-only over every released allocation of
 * w->vo (vmm/guard.c). Before the last vote: it can fail. */
cms_status cms_out_guard(struct cms_work *w);
/* Rollback: unmaps guards, maps w->vo again, restoring released content per policy; tries
 * all. */
cms_status cms_out_rollback(struct cms_work *w, struct cms_lanes *l);
/* After a rollback: forgets saves and storage this call made for allocations mapped again. */
void cms_out_drop_fresh(struct cms_work *w);

/* ---- in.c: the steps that back memory ---- */
/* Unmaps the guards of w->vi, then backs every allocation (one handle per run) and restores its
 * content per policy, the copies overlapping the backing of the next ones; waits for the out side's
 * releases on out-of-memory when it still has some to give (a swap). */
cms_status cms_in_back(struct cms_work *w, struct cms_lanes *l);
/* Async resume: makes the caller's stream wait for the copies on the device's streams. */
cms_status cms_in_order_after(struct cms_work *w, CUstream stream);
/* Undo: unmaps and releases what the call made for w->vi, guards CMS_REGION_GUARD
 * allocations again; tries all. */
cms_status cms_in_undo(struct cms_work *w);
/* Whether a region w resumes is frozen (its resume then restores synchronously). */
bool cms_in_frozen(const struct cms_work *w);

/* ---- commit.c ---- */
/* Commits w's out side (regions paused) and in side (regions active, epoch + 1). */
void cms_commit(struct cms_work *w, bool async);
/* After a failure: undoes the in side, then rolls the out side back (the in side's memory
 * goes first: the out side may need it); st and its message become the call's status. */
cms_status cms_abort(struct cms_work *w, cms_status st);

/* ---- fanout.c: one thread per device ---- */
/* Runs call's schedule on each device of its regions; fills the results (when not NULL). */
cms_status cms_fanout(const struct cms_call *call, cms_pause_result *pres, cms_resume_result *rres);

#endif /* CMS_ENGINE_H */
