/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the transactional engine: the only code that changes the state
 * of regions; never validates user input (api/ does).
 */
#ifndef CMS_ENGINE_H
#define CMS_ENGINE_H

#include "store.h"

/* ---- pause.c / resume.c: transactional engine over regions (their locks held) ---- */
/* Across devices: multidev.c runs the *_dev engines below, one worker thread per device. */
cms_status cms_engine_pause(cms_context *ctx, struct cms_region **regions, size_t n,
			    const cms_pause_options *opts, cms_pause_result *res);
/* The allocations of the regions for which want() is true, in address order (NULL when none). */
cms_status cms_collect_allocs(struct cms_region **regions, size_t n,
			      bool (*want)(struct cms_alloc *), struct cms_alloc ***out,
			      size_t *count);
/* The distinct devices of the regions, into devs (room for CMS_MAX_DEVICES). */
size_t cms_region_devices(struct cms_region **regions, size_t n, int32_t *devs);
/* Waits for an async resume's restore copies of the region (region lock held). */
cms_status cms_region_settle(struct cms_region *r);
/* Enqueues the content restore of a freshly backed allocation per its policy. */
cms_status cms_restore_content(cms_context *ctx, struct cms_alloc *a, CUstream s, uint64_t *bytes);
cms_status cms_engine_resume(cms_context *ctx, struct cms_region **regions, size_t n,
			     const cms_resume_options *opts, cms_resume_result *res);

/* ---- multidev.c: pause/resume across devices, one worker thread per device ---- */
/* A device worker's part in the agreement of the devices of one call; NULL: one device. */
struct cms_xvote;
/* Status of a device that failed only because another one did: never returned to callers. */
#define CMS_XDEV_ABORTED 1
/*
 * An agreement point: waits until every device of the call got here (or failed before);
 * CMS_OK when none failed, else CMS_XDEV_ABORTED (with a message): roll back. CMS_OK at once
 * for xv NULL. A device's engine votes at the same points every call, and nothing may fail
 * after its last vote (the other devices commit then).
 */
cms_status cms_xdev_vote(struct cms_xvote *xv);
/* The engines of one device (regions all on one device when xv is not NULL). */
cms_status cms_engine_pause_dev(cms_context *ctx, struct cms_region **regions, size_t n,
				const cms_pause_options *opts, cms_pause_result *res,
				struct cms_xvote *xv);
cms_status cms_engine_resume_dev(cms_context *ctx, struct cms_region **regions, size_t n,
				 const cms_resume_options *opts, cms_resume_result *res,
				 struct cms_xvote *xv);
/*
 * Writes a pause/resume result to the caller: on success; on failure only when the engine
 * ran (devices != 0) and the caller's struct_size covers the 1.1 fields (ver0 is the 1.0
 * size), so that a 1.0 caller sees no change.
 */
void cms_result_out(void *theirs, const void *ours, size_t ours_size, size_t ver0, uint32_t devices,
		    cms_status st);

/* ---- pause_pipe.c: steady-state HOST pause, release overlapped with the copies ---- */
/* Whether v (one device, no other device in the call, no DISK allocation to write) has HOST
 * allocations with buffers to copy, enough for it. */
bool cms_pause_can_pipeline(struct cms_alloc **v, size_t n, size_t ndevices, bool other_devices);
/* Copies the mapped HOST allocations of v out in batches and unmaps and releases each batch
 * once its copies are done; v in address order. On failure copies may still run (synchronize
 * the device's library streams) and released ones hold their content in their backups. */
cms_status cms_pause_pipelined(cms_context *ctx, struct cms_alloc **v, size_t n, int32_t dev,
			       uint64_t *backed_up, uint64_t *released);

/* ---- pause.c helpers shared with swap.c ---- */
cms_status cms_pause_wait(cms_context *ctx, const int32_t *devs, size_t nd,
			  const cms_pause_options *o);
cms_status cms_pause_rollback(cms_context *ctx, struct cms_alloc **v, size_t n, const int32_t *devs,
			      size_t nd);
void cms_pause_drop_fresh(cms_context *ctx, struct cms_alloc **v, size_t n);

/* ---- swap.c ---- */
/* Pauses the regions out[0..nout) while it resumes in[0..nin) (all locked). */
cms_status cms_engine_swap(cms_context *ctx, struct cms_region **out, size_t nout,
			   struct cms_region **in, size_t nin, const cms_pause_options *po,
			   cms_pause_result *presult, cms_resume_result *rresult);

/* ---- lifetime.c ---- */
/* Frees what an allocation holds (region lock held); on failure it is kept as it was. */
cms_status cms_alloc_release(struct cms_alloc *a);
void cms_region_unref_locked(struct cms_region *r); /* ctx->lock held */

#endif /* CMS_ENGINE_H */
