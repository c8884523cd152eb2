/* SPDX-License-Identifier: MIT */
/*
 * fanout.c - runs a call's schedule on every device of its regions, one
 * thread per device, and makes the call's one result and progress report.
 *
 * The regions of a call (locked by the calling thread) are grouped by device,
 * in ascending device order, each device getting the regions it pauses (out)
 * and resumes (in). With one device its schedule runs on the calling thread.
 * With several, every device but the first gets a worker thread and the
 * calling thread takes the first. Each makes its device's primary context
 * current once and runs the schedule on its share; the schedules meet at
 * agreement points (vote.c), so a call is all or nothing across devices.
 *
 * Workers touch only their own regions (whose locks the calling thread holds;
 * thread creation and join order their accesses) and take no library lock, so
 * the lock order (regions in creation order, context lock innermost) is
 * unchanged. Their error messages and log lines go back to the calling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* One device's share of a call and the thread that runs it. */
struct worker {
	struct cms_work w;
	struct cms_xvote xv;
	bool alone; /* the only device: calling thread, no agreement */
	pthread_t thread;
	bool started;
	char msg[512];
	struct cms_logq logq;
	struct cms_progress_sink *progress; /* the call's progress reports (progress_report.c) */
	struct start *start;
};

/* Workers wait here until every one of them could be started. */
struct start {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int go; /* 0: wait, 1: run, -1: stop (a worker could not start) */
};

static void worker_run(struct worker *k)
{
	struct cms_work *w = &k->w;
	uint64_t t0 = cms_now_ns();
	struct cms_progress_sink *prev = cms_progress_enter(k->progress);
	cms_status st;

	if (!k->alone)
		cms_log_defer(&k->logq);
	cms_trace_push("cumemsaver %s device %d", w->call->sched->name, w->dev);
	st = cms_push(w->ctx, w->dev); /* the device's context, once for the whole schedule */
	if (!st) {
		st = w->call->sched->run(w);
		cms_pop(w->ctx);
	}
	cms_trace_pop();
	if (!k->alone) {
		cms_xdev_leave(&k->xv, st && !k->xv.aborted);
		cms_log_defer(NULL);
	}
	if (st)
		cms_last_error_message(k->msg, sizeof(k->msg));
	w->st = st;
	w->elapsed_ns = cms_now_ns() - t0 - k->xv.waited_ns;
	cms_progress_enter(prev);
}

static void *worker_main(void *arg)
{
	struct worker *k = arg;
	int go;

	pthread_mutex_lock(&k->start->lock);
	while (!k->start->go)
		pthread_cond_wait(&k->start->cond, &k->start->lock);
	go = k->start->go;
	pthread_mutex_unlock(&k->start->lock);
	if (go > 0)
		worker_run(k);
	return NULL;
}

static void release_workers(struct start *s, int go)
{
	pthread_mutex_lock(&s->lock);
	s->go = go;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Runs k[0..nd) (nd > 1), one thread each; the calling thread takes k[0]. */
static cms_status run_workers(struct worker *k, size_t nd)
{
	struct start s = { .go = 0 };
	struct cms_xdev x;
	cms_status st;
	size_t i, started = 1;

	st = cms_xdev_init(&x, nd);
	if (st)
		return st;
	if (pthread_mutex_init(&s.lock, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a mutex");
		goto out_xdev;
	}
	if (pthread_cond_init(&s.cond, NULL)) {
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY, "cannot initialise a condition");
		goto out_lock;
	}
	for (i = 0; i < nd; i++) {
		k[i].xv.x = &x;
		k[i].w.xv = &k[i].xv;
		k[i].start = &s;
	}
	for (i = 1; i < nd; i++, started++) {
		k[i].started = !cms_thread_start(&k[i].thread, worker_main, &k[i]);
		if (!k[i].started)
			break;
	}
	release_workers(&s, started == nd ? 1 : -1);
	if (started == nd)
		worker_run(&k[0]);
	else
		st = cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
				   "cannot start a worker thread for device %d", k[started].w.dev);
	for (i = 1; i < started; i++)
		pthread_join(k[i].thread, NULL);
	for (i = 0; i < nd; i++) /* their lines, in device order, on the calling thread */
		cms_log_flush(k[0].w.ctx, &k[i].logq);
	pthread_cond_destroy(&s.cond);
out_lock:
	pthread_mutex_destroy(&s.lock);
out_xdev:
	cms_xdev_fini(&x);
	return st;
}

/* The call's status and message from the workers' (the calling thread's error). */
static cms_status combine(const struct worker *k, size_t nd, size_t *first_failed)
{
	char msg[512];
	size_t i, len = 0, first = nd;
	bool rb_failed = false;

	for (i = 0; i < nd; i++) {
		if (k[i].w.st && !k[i].xv.aborted && first == nd)
			first = i;
		rb_failed |= k[i].w.st == CMS_ERR_ROLLBACK_FAILED;
	}
	*first_failed = first;
	if (first == nd) { /* cannot be: an abort needs a failure */
		for (i = 0; i < nd && !k[i].w.st; i++)
			;
		if (i == nd)
			return CMS_OK;
		*first_failed = i;
		return cms_set_error(CMS_ERR_INTERNAL, "device %d: %s", k[i].w.dev, k[i].msg);
	}
	if (nd == 1)
		return cms_set_error(k[0].w.st, "%s", k[0].msg);
	len = (size_t)snprintf(msg, sizeof(msg), "device %d: %s", k[first].w.dev, k[first].msg);
	for (i = 0; i < nd && len < sizeof(msg); i++)
		if (i != first && k[i].w.st == CMS_ERR_ROLLBACK_FAILED)
			len += (size_t)snprintf(msg + len, sizeof(msg) - len, "; device %d: %s",
						k[i].w.dev, k[i].msg);
	return cms_set_error(rb_failed ? CMS_ERR_ROLLBACK_FAILED : k[first].w.st, "%s", msg);
}

/* What a device reports in a result: its share of one side (out or in). */
struct part {
	uint64_t regions, allocations, bytes, copied;
};

static struct part part_of(const struct cms_work *w, bool out)
{
	struct part p;

	p.regions = out ? w->nout : w->nin;
	p.allocations = out ? w->no : w->ni;
	p.bytes = out ? w->released : w->backed;
	p.copied = out ? w->saved : w->restored;
	return p;
}

/*
 * One side's result (out: pause, in: resume): sums over the devices of that side, their
 * per-device entries, the failed device (-1 unless the first failure was on this side);
 * all sums zero on failure.
 */
static void side_result(const struct worker *k, size_t nd, bool out, cms_status st,
			size_t first_failed, struct part *sum, uint32_t *devices,
			int32_t *failed_device, cms_device_result *dr)
{
	size_t i, e = 0;

	memset(sum, 0, sizeof(*sum));
	memset(dr, 0, CMS_DEVICE_RESULTS_MAX * sizeof(*dr));
	*devices = 0;
	*failed_device = -1;
	if (st && first_failed < nd && k[first_failed].w.failed_in != out)
		*failed_device = k[first_failed].w.dev;
	for (i = 0; i < nd; i++) {
		const struct cms_work *w = &k[i].w;
		struct part p = part_of(w, out);
		bool mine = w->failed_in != out; /* its failure (if any) is on this side */

		if (!(out ? w->nout : w->nin))
			continue;
		(*devices)++;
		if (st)
			memset(&p, 0, sizeof(p));
		sum->regions += p.regions;
		sum->allocations += p.allocations;
		sum->bytes += p.bytes;
		sum->copied += p.copied;
		if (e >= CMS_DEVICE_RESULTS_MAX)
			continue;
		dr[e].device = w->dev;
		dr[e].status = !mine || (k[i].xv.aborted && w->st != CMS_ERR_ROLLBACK_FAILED) ?
				       CMS_OK :
				       w->st;
		dr[e].regions = out ? w->nout : w->nin;
		dr[e].allocations = p.allocations;
		dr[e].bytes = p.bytes;
		dr[e].bytes_copied = p.copied;
		dr[e].elapsed_ns = w->elapsed_ns;
		e++;
	}
}

static void write_results(const struct worker *k, size_t nd, cms_status st, size_t first_failed,
			  uint64_t elapsed_ns, cms_pause_result *pres, cms_resume_result *rres)
{
	struct part sum;
	size_t i;

	if (pres) {
		side_result(k, nd, true, st, first_failed, &sum, &pres->devices,
			    &pres->failed_device, pres->device_results);
		pres->regions = sum.regions;
		pres->allocations = sum.allocations;
		pres->bytes_released = sum.bytes;
		pres->bytes_backed_up = sum.copied;
		pres->driver_free_before = pres->driver_free_after = 0;
		for (i = 0; i < nd && !st; i++) {
			pres->driver_free_before += k[i].w.free_before;
			pres->driver_free_after += k[i].w.free_after;
		}
		pres->elapsed_ns = st ? 0 : elapsed_ns;
	}
	if (rres) {
		side_result(k, nd, false, st, first_failed, &sum, &rres->devices,
			    &rres->failed_device, rres->device_results);
		rres->regions = sum.regions;
		rres->allocations = sum.allocations;
		rres->bytes_backed = sum.bytes;
		rres->bytes_restored = sum.copied;
		rres->elapsed_ns = st ? 0 : elapsed_ns;
	}
}

/* The log line of a successful call: what each side did. */
static void log_done(const struct worker *k, size_t nd, uint64_t ns)
{
	struct part o = { 0 }, n = { 0 };
	size_t i;

	for (i = 0; i < nd; i++) {
		struct part po = part_of(&k[i].w, true), pi = part_of(&k[i].w, false);

		o.regions += po.regions;
		o.allocations += po.allocations;
		o.bytes += po.bytes;
		n.regions += pi.regions;
		n.allocations += pi.allocations;
		n.bytes += pi.bytes;
	}
	if (o.regions)
		cms_log(k[0].w.ctx, CMS_LOG_INFO,
			"paused %llu regions, %llu allocations, %llu bytes in %.3f ms",
			(unsigned long long)o.regions, (unsigned long long)o.allocations,
			(unsigned long long)o.bytes, (double)ns / 1e6);
	if (n.regions)
		cms_log(k[0].w.ctx, CMS_LOG_INFO,
			"resumed %llu regions, %llu allocations, %llu bytes in %.3f ms",
			(unsigned long long)n.regions, (unsigned long long)n.allocations,
			(unsigned long long)n.bytes, (double)ns / 1e6);
}

/* Bytes the progress callback will count: each policy's progress_bytes over the allocations
 * of regions[0..n) that a pause (out: those holding memory) or resume (the others) moves. */
static uint64_t progress_total(struct cms_region **regions, size_t n, bool out)
{
	struct cms_alloc *a;
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++)
		for (a = regions[i]->allocs; a; a = a->next)
			if (out ? cms_work_holds_memory(a) : cms_work_lacks_memory(a))
				sum += cms_store_progress_bytes(a, out);
	return sum;
}

/*
 * What the call will do to region r if it commits (counters, counters.c), from the state
 * before it runs: the same filters as the work lists (work.c) and the stores' copy sizes.
 */
static void plan_region(const struct cms_region *r, bool out, struct cms_counted *c)
{
	const struct cms_alloc *a;

	memset(c, 0, sizeof(*c));
	for (a = r->allocs; a; a = a->next) {
		if (out && cms_work_holds_memory(a)) {
			c->released += a->physical; /* a handle's, or a mapping's alone */
			c->to_store += cms_store_copy_bytes(a, true);
			c->unchanged += cms_store_unchanged_bytes(a);
		} else if (!out && cms_work_lacks_memory(a)) {
			c->backed += a->physical;
			c->from_store += cms_store_copy_bytes(a, false);
		}
	}
	cms_feature_plan(r, out, c); /* CMS_REGION_VERIFY: the bytes it will check */
	if (out)		     /* bytes of freed members go with their run's handle */
		c->released += cms_region_vmm(r)->retained_bytes;
}

/* After a commit: each region of the call counts what it did (plan: one entry per g slot). */
static void count_committed(const struct worker *k, size_t nd, struct cms_region **g,
			    struct cms_counted *plan, bool swap)
{
	size_t i, j;

	for (i = 0; i < nd; i++) {
		const struct cms_work *w = &k[i].w;

		for (j = 0; j < w->nout; j++) {
			struct cms_counted *c = &plan[(size_t)(w->out - g) + j];

			c->ns = w->elapsed_ns;
			cms_feature_count(w, w->out[j], true, c); /* CMS_REGION_VERIFY: its time */
			cms_counters_commit(w->out[j], true, swap, c);
		}
		for (j = 0; j < w->nin; j++) {
			struct cms_counted *c = &plan[(size_t)(w->in - g) + j];

			c->ns = w->elapsed_ns;
			cms_feature_count(w, w->in[j], false, c);
			cms_counters_commit(w->in[j], false, swap, c);
		}
	}
}

static int cmp_device(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* The distinct devices of regions[0..n) added to devs[0..*nd) (room for CMS_MAX_DEVICES). */
static void add_devices(struct cms_region **regions, size_t n, int32_t *devs, size_t *nd,
			uint64_t *seen)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t bit = 1ull << regions[i]->device; /* device < CMS_MAX_DEVICES = 64 */

		if (!(*seen & bit))
			devs[(*nd)++] = regions[i]->device;
		*seen |= bit;
	}
}

/* The regions of list[0..n) on device dev, into g (creation order kept); returns how many. */
static size_t pick(struct cms_region **list, size_t n, int32_t dev, struct cms_region **g)
{
	size_t i, m = 0;

	for (i = 0; i < n; i++)
		if (list[i]->device == dev)
			g[m++] = list[i];
	return m;
}

cms_status cms_fanout(const struct cms_call *call, cms_pause_result *pres, cms_resume_result *rres)
{
	struct cms_progress prog;
	struct cms_counted *plan;
	uint64_t t0 = cms_now_ns(), seen = 0;
	int32_t devs[CMS_MAX_DEVICES];
	struct cms_region **g;
	struct worker *k;
	size_t nd = 0, i, j, off = 0, first_failed = 0;
	cms_status st;

	cms_trace_push("cumemsaver %s", call->sched->name); /* the whole call (NVTX) */
	add_devices(call->out, call->nout, devs, &nd, &seen);
	add_devices(call->in, call->nin, devs, &nd, &seen);
	qsort(devs, nd, sizeof(devs[0]), cmp_device);
	k = calloc(nd ? nd : 1, sizeof(*k));
	g = malloc((call->nout + call->nin + 1) * sizeof(*g));
	plan = malloc((call->nout + call->nin + 1) * sizeof(*plan));
	if (!k || !g || !plan || !nd) {
		st = !nd ? cms_set_error(CMS_ERR_INTERNAL, "no regions") :
			   cms_set_error(CMS_ERR_OUT_OF_HOST_MEMORY,
					 "cannot allocate a device list");
		goto out;
	}
	for (i = 0; i < nd; i++) {
		struct cms_work *w = &k[i].w;

		w->ctx = call->ctx;
		w->call = call;
		w->dev = devs[i];
		w->out = g + off;
		w->nout = pick(call->out, call->nout, devs[i], w->out);
		off += w->nout;
		w->in = g + off;
		w->nin = pick(call->in, call->nin, devs[i], w->in);
		off += w->nin;
		for (j = 0; j < w->nout + w->nin; j++) /* g[off - nout - nin ..): out, then in */
			plan_region(g[off - w->nout - w->nin + j], j < w->nout,
				    &plan[off - w->nout - w->nin + j]);
		k[i].alone = nd == 1;
		k[i].progress = &prog.sink;
	}

	cms_progress_begin(&prog, call->ctx, call->sched->name,
			   progress_total(call->out, call->nout, true) +
				   progress_total(call->in, call->nin, false));
	if (nd == 1) {
		worker_run(&k[0]); /* one device: the calling thread, as it is */
		st = k[0].w.st ? cms_set_error(k[0].w.st, "%s", k[0].msg) : CMS_OK;
	} else {
		st = run_workers(k, nd);
		if (st) {
			cms_progress_end(&prog, false);
			goto out; /* nothing was done */
		}
		st = combine(k, nd, &first_failed);
	}
	cms_progress_end(&prog, st == CMS_OK);
	write_results(k, nd, st, first_failed, cms_now_ns() - t0, pres, rres);
	if (!st) {
		count_committed(k, nd, g, plan, call->sched == &cms_sched_swap);
		log_done(k, nd, cms_now_ns() - t0);
	}
out:
	free(plan);
	free(g);
	free(k);
	cms_trace_pop();
	return st;
}
