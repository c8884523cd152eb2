/* SPDX-License-Identifier: MIT */
/*
 * engine_internal.h - the engine's own declarations, for the files of
 * src/engine/ only (tests/check_layers.py fails any file above the engine that
 * opens it): calls, schedules, work lists and their steps, the agreement
 * between devices, verified backups, counting a committed call. engine.h
 * declares what the layers above use.
 */
#ifndef CMS_ENGINE_INTERNAL_H
#define CMS_ENGINE_INTERNAL_H

#include "engine.h"

/* ---- counters.c: counting a committed call (region locks held) ---- */
/* What one committed side of an engine call did to one region. */
struct cms_counted {
	uint64_t released, backed, to_store, from_store; /* bytes */
	uint64_t verified;				 /* bytes its resume checked */
	uint64_t unchanged; /* out: bytes of current backups, not copied (cms_region_freeze) */
	uint64_t ns;	    /* its device's work */
	uint64_t verify_ns; /* of it checksumming */
};
/* r was paused (out) or resumed (!out) by a committed call; swap: by cms_swap. */
void cms_counters_commit(struct cms_region *r, bool out, bool swap, const struct cms_counted *c);

/* ---- progress_report.c: the progress callback of one pause / resume / swap ---- */
struct cms_progress {
	struct cms_progress_sink sink; /* what the operation's threads enter (core/progress.c) */
	cms_progress_fn fn;	       /* snapshot of the context's; NULL: no reports */
	void *user;
	const char *operation;
	uint64_t total, done;
	bool final_sent;
	pthread_mutex_t lock; /* serialises reports of the operation's threads */
};
/* Snapshot of ctx's callback (takes ctx->lock briefly: region locks may be held). */
void cms_progress_begin(struct cms_progress *p, cms_context *ctx, const char *operation,
			uint64_t total);
/* The final call (done == total) when ok; frees what begin set up. */
void cms_progress_end(struct cms_progress *p, bool ok);

/* ---- checksum.c: checksums of device memory (CMS_REGION_VERIFY) ---- */
/* len bytes of device memory at ptr, bytes [off, off + len) of an allocation, whose checksum
 * (kernels/checksum.h) goes to slot. */
struct cms_checksum_span {
	CUdeviceptr ptr;
	uint64_t len, off;
	size_t slot;
};
/*
 * Takes a hold on device dev's checksum kernel for a CMS_REGION_VERIFY region (device context
 * current): the first hold loads the kernel (cuModuleLoadData, cuModuleGetFunction) and maps
 * one granule of scratch (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess),
 * counted in the device's own_bytes; a failure leaves nothing held or loaded (the driver's
 * status: CMS_ERR_OUT_OF_DEVICE_MEMORY on a full device). May wait for a checksum in
 * progress on the device.
 */
cms_status cms_checksum_hold(cms_context *ctx, int32_t dev);
/* Drops a hold; the last one unloads the kernel and gives the scratch back when current (the
 * device context is current), else they stay for the next hold or cms_checksum_drop. */
void cms_checksum_release(cms_context *ctx, int32_t dev, bool current);
/*
 * sums[0..nslots) = the checksums of spans v[0..n) (slots nondecreasing along v, each below
 * nslots) computed on device dev by the library's kernel on stream, device context current;
 * returns once they are read back. Needs a hold on the device (CMS_ERR_INTERNAL without one):
 * takes no device memory. Calls on one device are serialized (a leaf lock).
 */
cms_status cms_checksum_device(cms_context *ctx, int32_t dev, CUstream stream,
			       const struct cms_checksum_span *v, size_t n, uint64_t *sums,
			       size_t nslots);

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

/* ---- feature.c: what the engine's steps call of the region features ---- */
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

/* ---- commit.c ---- */
/* Commits w's out side (regions paused) and in side (regions active, epoch + 1). */
void cms_commit(struct cms_work *w, bool async);
/* After a failure: undoes the in side, then rolls the out side back (the in side's memory
 * goes first: the out side may need it); st and its message become the call's status. */
cms_status cms_abort(struct cms_work *w, cms_status st);

/* ---- fanout.c: one thread per device ---- */
/* Runs call's schedule on each device of its regions; fills the results (when not NULL). */
cms_status cms_fanout(const struct cms_call *call, cms_pause_result *pres, cms_resume_result *rres);

#endif /* CMS_ENGINE_INTERNAL_H */
