/* SPDX-License-Identifier: MIT */
/*
 * test_faults.c - transactional pause, resume and alloc under injected
 * faults (host simulation only). For every driver call index of an
 * operation, the simulation makes exactly that call fail; afterwards the
 * operation must have either completed or left every allocation as it was,
 * with live handle/reservation/mapping/host-buffer/fd counts unchanged, and a
 * retry without the fault must succeed.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* One granule: ctest runs this test with CMS_SIM_GRANULARITY=64K (setup() checks), so that
 * each of the ~1,400 fault points maps, fills and checks 64 KiB granules, not 2 MiB ones. The
 * sizes keep their shape in granules: one, three and a bit, half of one. */
#define G (64ull * 1024ull)
#define NALLOC 3
static const uint64_t sizes[NALLOC] = { G, 3 * G + 8, G / 2 };

struct fixture {
	cms_context *ctx;
	cms_region *r[2];
	int nregions;
	uint64_t p[2][NALLOC];
	uint64_t extra; /* guarded: an allocation of two guard pieces (33 granules) */
};

/* When set, setup() runs one pause/resume cycle; 2: its regions have CMS_REGION_COALESCE, so
 * that the allocations then share physical handles (run.c) and the sweeps go through runs. */
static int coalesced;
/* When set, setup()'s regions have CMS_REGION_GUARD (vmm/guard.c; the zero handle is 32
 * granules) and region a has one more allocation, covered by two guard pieces. */
static int guarded;
/* When set, setup()'s HOST regions have CMS_REGION_HOST_PAGEABLE (copies through staging,
 * host_policy.c), and also CMS_REGION_RELEASE_HOST when 2. */
static int pageable;

/* host_pageable.c: two staging buffers of 256 KiB on the simulation */
#define PAGEABLE_STAGING (2 * 256 * 1024ull)

static uint64_t host_flags(uint32_t policy)
{
	if (policy != CMS_POLICY_HOST || !pageable)
		return 0;
	return CMS_REGION_HOST_PAGEABLE | (pageable == 2 ? CMS_REGION_RELEASE_HOST : 0);
}

/* Physical handles the guard keeps per device: zero handles of 1, 2, 4, 8, 16, 32 granules
 * (vmm/guard.c), made with the first guarded region. */
static uint64_t zero_handles(void)
{
	return guarded ? 6 : 0;
}
#define EXTRA (33 * G)
/* When set, setup() declares bytes [DECL_LO, DECL_HI) of allocation 1 (3 granules and a bit)
 * of each region content-free (cms_range_discard): saves and restores split around them, and
 * check_content skips them. */
static int declared;
/* When set, setup() freezes its regions (cms_region_freeze) last, then runs a pause/resume
 * cycle: HOST backups hold the content (current), the next pause copies nothing. */
static int frozen;
#define DECL_LO (G / 2)
#define DECL_HI (2 * G + 4)

static void declare(struct fixture *f)
{
	int k;

	for (k = 0; declared && k < f->nregions; k++)
		ck_ok(cms_range_discard(f->ctx, f->p[k][1] + DECL_LO, DECL_HI - DECL_LO));
}

static void setup(struct fixture *f, uint32_t policy_a, int two, uint32_t policy_b)
{
	int i, k;

	memset(f, 0, sizeof(*f));
	f->ctx = t_ctx();
	f->nregions = two ? 2 : 1;
	t_region_flags = (coalesced == 2 ? CMS_REGION_COALESCE : 0) |
			 (guarded ? CMS_REGION_GUARD : 0) | host_flags(policy_a);
	f->r[0] = t_region(f->ctx, "a", 0, policy_a);
	t_region_flags ^= host_flags(policy_a) ^ host_flags(policy_b);
	if (two)
		f->r[1] = t_region(f->ctx, "b", 0, policy_b);
	t_region_flags = 0;
	{
		cms_region_info ri = { .struct_size = sizeof(ri) };

		ck_ok(cms_region_info_get(f->r[0], &ri));
		ck_assert_msg(ri.granularity == G,
			      "granularity %llu: run with CMS_SIM_GRANULARITY=64K",
			      (unsigned long long)ri.granularity);
	}
	for (k = 0; k < f->nregions; k++)
		for (i = 0; i < NALLOC; i++) {
			ck_ok(cms_alloc(f->r[k], sizes[i], &f->p[k][i]));
			ck_assert_int_eq(
				t_fill(0, f->p[k][i], sizes[i] & ~3ull, (uint32_t)(k * 10 + i)), 0);
		}
	if (guarded)
		ck_ok(cms_alloc(f->r[0], EXTRA, &f->extra));
	if (coalesced) {
		ck_ok(cms_pause(f->ctx, NULL, NULL, NULL));
		ck_ok(cms_resume(f->ctx, NULL, NULL, NULL));
		for (k = 0; k < f->nregions; k++) /* DISCARD/ZERO: fill again */
			for (i = 0; i < NALLOC; i++)
				ck_assert_int_eq(t_fill(0, f->p[k][i], sizes[i] & ~3ull,
							(uint32_t)(k * 10 + i)),
						 0);
	}
	declare(f);
	if (!frozen)
		return;
	for (k = 0; k < f->nregions; k++)
		ck_ok(cms_region_freeze(f->r[k]));
	ck_ok(cms_pause(f->ctx, NULL, NULL, NULL));
	ck_ok(cms_resume(f->ctx, NULL, NULL, NULL));
}

static uint32_t state(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i.state;
}

static uint64_t backup_bytes(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i.backup_bytes;
}

static uint32_t policy(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i.policy;
}

/* Content of every allocation of region k is the pattern written by setup. */
static void check_content(struct fixture *f, int k)
{
	int i;

	for (i = 0; i < NALLOC; i++)
		ck_assert_msg(t_check_except(0, f->p[k][i], sizes[i] & ~3ull,
					     (uint32_t)(k * 10 + i),
					     declared && i == 1 ? DECL_LO : 0,
					     declared && i == 1 ? DECL_HI : 0) == -1,
			      "region %d allocation %d lost its content", k, i);
}

/* Guarded and paused: every allocation of region k reads as zeros. */
static void check_guarded(struct fixture *f, int k)
{
	int i;

	if (!guarded)
		return;
	for (i = 0; i < NALLOC; i++)
		ck_assert_msg(t_is_zero(0, f->p[k][i], sizes[i]),
			      "region %d allocation %d unguarded", k, i);
	if (k == 0)
		ck_assert_msg(t_is_zero(0, f->extra, EXTRA), "extra allocation unguarded");
}

static void same_counts(const cmssim_counters *a, const cmssim_counters *b, const char *when)
{
	ck_assert_msg(a->reservations == b->reservations, "%s: reservations %llu -> %llu", when,
		      (unsigned long long)a->reservations, (unsigned long long)b->reservations);
	ck_assert_msg(a->handles == b->handles, "%s: handles %llu -> %llu", when,
		      (unsigned long long)a->handles, (unsigned long long)b->handles);
	ck_assert_msg(a->physical_allocations == b->physical_allocations,
		      "%s: physical %llu -> %llu", when,
		      (unsigned long long)a->physical_allocations,
		      (unsigned long long)b->physical_allocations);
	ck_assert_msg(a->mappings == b->mappings, "%s: mappings %llu -> %llu", when,
		      (unsigned long long)a->mappings, (unsigned long long)b->mappings);
	ck_assert_msg(a->device_used_bytes[0] == b->device_used_bytes[0], "%s: device bytes", when);
	ck_assert_msg(a->host_buffers == b->host_buffers, "%s: host buffers %llu -> %llu", when,
		      (unsigned long long)a->host_buffers, (unsigned long long)b->host_buffers);
	ck_assert_msg(a->streams == b->streams && a->events == b->events, "%s: streams/events",
		      when);
	ck_assert_msg(a->primary_ctx_refs == b->primary_ctx_refs, "%s: primary ctx refs", when);
}

/* pinned_bytes of the regions is exactly what the simulation has registered (no DISK staging
 * is held between calls), and part of host_bytes. */
static void pinned_matches(struct fixture *f, const char *when)
{
	uint64_t sum = 0, registered;
	int k;

	for (k = 0; k < f->nregions; k++) {
		cms_region_info i = { .struct_size = sizeof(i) };

		ck_ok(cms_region_info_get(f->r[k], &i));
		ck_assert_msg(i.pinned_bytes <= i.host_bytes,
			      "%s: region %d pinned %llu > host %llu", when, k,
			      (unsigned long long)i.pinned_bytes, (unsigned long long)i.host_bytes);
		sum += i.pinned_bytes;
	}
	registered = t_counters().host_registered_bytes;
	/* Pageable: a staging area whose cuMemHostUnregister failed (an absorbed fault) stays
	 * registered until the next call retries it (cleanup.c). */
	if (pageable && registered == sum + PAGEABLE_STAGING)
		registered = sum;
	ck_assert_msg(sum == registered, "%s: pinned_bytes %llu, registered %llu", when,
		      (unsigned long long)sum, (unsigned long long)registered);
}

enum op { OP_PAUSE, OP_RESUME };

/* Resumes run with CMS_RESUME_ASYNC (on the NULL stream) when set. */
static int async_resume;

static cms_status run(struct fixture *f, enum op op, int by_tag)
{
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;

	ro.flags = async_resume ? CMS_RESUME_ASYNC : 0;
	if (by_tag)
		return op == OP_PAUSE ? cms_pause(f->ctx, NULL, NULL, NULL) :
					cms_resume(f->ctx, NULL, &ro, NULL);
	return op == OP_PAUSE ? cms_region_pause(f->r[0], NULL, NULL) :
				cms_region_resume(f->r[0], &ro, NULL);
}

/* Whether the failure of a pause came after memory was released: the release itself, or
 * the guard mapped over released memory (guarded). */
static int released_then_failed(void)
{
	const char *e = cms_last_error();

	return strstr(e, "cuMemRelease") ||
	       (guarded && (strstr(e, "cuMemMap") || strstr(e, "cuMemSetAccess")));
}

/*
 * Sweeps the driver calls of one pause or resume. Returns the number of
 * fault points exercised.
 */
static unsigned sweep(uint32_t pa, int two, uint32_t pb, enum op op, int result)
{
	const struct t_sim *sim = t_sim();
	unsigned points = 0;
	uint64_t calls, i;
	struct fixture f;
	cmssim_counters c0, c1;
	int fds0, k, absorbed = 0;

	/* Dry run: how many driver calls does the operation make? */
	setup(&f, pa, two, pb);
	if (op == OP_RESUME)
		ck_ok(run(&f, OP_PAUSE, two));
	calls = sim->call_count();
	ck_ok(run(&f, op, two));
	calls = sim->call_count() - calls;
	ck_assert_uint_gt(calls, 0);
	ck_ok(cms_context_destroy(f.ctx));

	for (i = 1; i <= calls + 1; i++) {
		uint32_t want = op == OP_PAUSE ? CMS_STATE_ACTIVE : CMS_STATE_PAUSED;
		cms_status st;

		setup(&f, pa, two, pb);
		if (op == OP_RESUME)
			ck_ok(run(&f, OP_PAUSE, two));
		c0 = t_counters();
		fds0 = t_open_fds();
		ck_assert_int_eq(sim->fail_call(NULL, i, result), 0);
		st = run(&f, op, two);
		if (i == calls + 1) {
			/* Past the last call: the fault must not have been reached. */
			ck_assert_int_eq(sim->armed_faults(), 1);
			ck_assert_int_eq(st, CMS_OK);
			sim->clear_faults();
			ck_ok(cms_context_destroy(f.ctx));
			break;
		}
		ck_assert_msg(sim->armed_faults() == 0, "fault %llu not reached",
			      (unsigned long long)i);
		points++;
		pinned_matches(&f, st ? cms_last_error() : "absorbed fault");
		if (st == CMS_OK) {
			/* The failing call was one the library may absorb (e.g. a pop). */
			absorbed++;
			for (k = 0; k < f.nregions; k++)
				ck_assert_uint_eq(state(f.r[k]), op == OP_PAUSE ? CMS_STATE_PAUSED :
										  CMS_STATE_ACTIVE);
		} else {
			ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED && st != CMS_ERR_INTERNAL,
				      "fault %llu: %s %s", (unsigned long long)i,
				      cms_status_name(st), cms_last_error());
			if (result == CUDA_ERROR_OUT_OF_MEMORY)
				ck_assert_msg(st == CMS_ERR_OUT_OF_DEVICE_MEMORY, "fault %llu: %s",
					      (unsigned long long)i, cms_status_name(st));
			ck_assert_str_ne(cms_last_error(), "");
			c1 = t_counters();
			same_counts(&c0, &c1, cms_last_error());
			ck_assert_int_eq(t_open_fds(), fds0);
			for (k = 0; k < f.nregions; k++) {
				ck_assert_uint_eq(state(f.r[k]), want);
				if (op == OP_RESUME && policy(f.r[k]) == CMS_POLICY_HOST)
					ck_assert_uint_gt(backup_bytes(f.r[k]), 0);
				if (op == OP_RESUME)
					check_guarded(&f, k);
				/* Content survives a failed pause, except DISCARD/ZERO memory
				 * already released (and guarded after its release). */
				if (op == OP_PAUSE &&
				    (policy(f.r[k]) == CMS_POLICY_HOST || !released_then_failed()))
					check_content(&f, k);
			}
			/* A retry without the fault succeeds. */
			ck_ok(run(&f, op, two));
			pinned_matches(&f, "retry");
		}
		/* Finish the cycle and check the content where the policy keeps it. */
		if (op == OP_PAUSE) {
			for (k = 0; k < f.nregions; k++)
				check_guarded(&f, k);
			ck_ok(run(&f, OP_RESUME, two));
		}
		pinned_matches(&f, "cycle done");
		for (k = 0; k < f.nregions; k++)
			if (policy(f.r[k]) == CMS_POLICY_HOST)
				check_content(&f, k);
		ck_ok(cms_context_destroy(f.ctx));
		c1 = t_counters();
		ck_assert_uint_eq(c1.handles, 0);
		ck_assert_uint_eq(c1.reservations, 0);
		ck_assert_uint_eq(c1.host_buffers, 0);
	}
	printf("fault sweep: %s policy %u%s, result %d: %u points (%d absorbed)\n",
	       op == OP_PAUSE ? "pause" :
	       async_resume   ? "async resume" :
				"resume",
	       pa, two ? " + second region" : "", result, points, absorbed);
	return points;
}

static unsigned total_points;

START_TEST(pause_sweep)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST };
	int p = _i % 3;

	total_points += sweep(pol[p], 0, 0, OP_PAUSE, CUDA_ERROR_UNKNOWN);
	total_points += sweep(pol[p], 0, 0, OP_PAUSE, CUDA_ERROR_OUT_OF_MEMORY);
	total_points += sweep(pol[p], 1, CMS_POLICY_HOST, OP_PAUSE, CUDA_ERROR_INVALID_VALUE);
	printf("fault points exercised so far in this test: %u\n", total_points);
}
END_TEST

START_TEST(resume_sweep)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST };
	int p = _i % 3;

	total_points += sweep(pol[p], 0, 0, OP_RESUME, CUDA_ERROR_UNKNOWN);
	total_points += sweep(pol[p], 0, 0, OP_RESUME, CUDA_ERROR_OUT_OF_MEMORY);
	total_points += sweep(pol[p], 1, CMS_POLICY_ZERO, OP_RESUME, CUDA_ERROR_INVALID_VALUE);
	printf("fault points exercised so far in this test: %u\n", total_points);
}
END_TEST

START_TEST(resume_async_sweep)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST };

	async_resume = 1;
	total_points += sweep(pol[_i % 3], 0, 0, OP_RESUME, CUDA_ERROR_UNKNOWN);
	total_points += sweep(pol[_i % 3], 1, CMS_POLICY_HOST, OP_RESUME, CUDA_ERROR_OUT_OF_MEMORY);
	async_resume = 0;
}
END_TEST

START_TEST(alloc_sweep)
{
	const struct t_sim *sim = t_sim();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cmssim_counters c0, c1;
	uint64_t calls, i, p;
	unsigned points = 0;
	cms_status st;

	calls = sim->call_count();
	ck_ok(cms_alloc(r, 3 * G / 2, &p));
	calls = sim->call_count() - calls;
	ck_ok(cms_free(ctx, p));
	for (i = 1; i <= calls; i++) {
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_OUT_OF_MEMORY), 0);
		st = cms_alloc(r, 3 * G / 2, &p);
		ck_assert_int_eq(sim->armed_faults(), 0);
		ck_assert_int_eq(st, CMS_ERR_OUT_OF_DEVICE_MEMORY);
		ck_assert_uint_eq(p, 0);
		c1 = t_counters();
		same_counts(&c0, &c1, "alloc");
		ck_ok(cms_alloc(r, 3 * G / 2, &p));
		ck_ok(cms_free(ctx, p));
		points++;
	}
	/* A failing free keeps the allocation. */
	ck_ok(cms_alloc(r, 3 * G / 2, &p));
	c0 = t_counters();
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_free(ctx, p), CMS_ERR_DRIVER);
	c1 = t_counters();
	same_counts(&c0, &c1, "free"); /* the handle released before it is retained back */
	ck_assert_int_eq(t_fill(0, p, 3 * G / 2, 1), 0);
	ck_ok(cms_free(ctx, p));
	printf("fault sweep: alloc: %u points\n", points + 1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(host_allocation_failure)
{
	const struct t_sim *sim = t_sim();
	struct fixture f;
	cmssim_counters c0, c1;
	int nth;

	for (nth = 1; nth <= 2; nth++) { /* one host buffer per region */
		setup(&f, CMS_POLICY_HOST, 1, CMS_POLICY_HOST);
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_host_alloc((uint64_t)nth), 0);
		ck_status(cms_pause(f.ctx, NULL, NULL, NULL), CMS_ERR_OUT_OF_HOST_MEMORY);
		c1 = t_counters();
		same_counts(&c0, &c1, "host alloc");
		ck_assert_uint_eq(state(f.r[0]), CMS_STATE_ACTIVE);
		ck_assert_uint_eq(state(f.r[1]), CMS_STATE_ACTIVE);
		ck_ok(cms_pause(f.ctx, NULL, NULL, NULL));
		ck_ok(cms_resume(f.ctx, NULL, NULL, NULL));
		check_content(&f, 0);
		check_content(&f, 1);
		ck_ok(cms_context_destroy(f.ctx));
	}
}
END_TEST

/* Pageable HOST backups: each host allocation of a pause (the buffers, the staging) and of a
 * resume (its staging) that fails fails the call, with nothing left behind and the content
 * kept; a retry succeeds. */
START_TEST(host_allocation_failure_pageable)
{
	const struct t_sim *sim = t_sim();
	struct fixture f;
	cmssim_counters c0, c1;
	int nth, reached, failed;
	enum op op;

	pageable = 1;
	for (op = OP_PAUSE; op <= OP_RESUME; op++) {
		for (nth = 1, reached = 1, failed = 0; reached; nth++) {
			setup(&f, CMS_POLICY_HOST, 1, CMS_POLICY_HOST);
			if (op == OP_RESUME)
				ck_ok(run(&f, OP_PAUSE, 1));
			c0 = t_counters();
			ck_assert_int_eq(sim->fail_host_alloc((uint64_t)nth), 0);
			if (run(&f, op, 1) == CMS_OK) {
				reached = 0; /* past the call's last host allocation */
				ck_assert_int_eq(sim->armed_faults(), 1);
				sim->clear_faults();
			} else {
				failed++;
				ck_assert_str_ne(cms_last_error(), "");
				c1 = t_counters();
				same_counts(&c0, &c1, "host alloc");
				pinned_matches(&f, "host alloc");
				ck_assert_uint_eq(state(f.r[0]), op == OP_PAUSE ? CMS_STATE_ACTIVE :
										  CMS_STATE_PAUSED);
				ck_ok(run(&f, op, 1));
			}
			if (op == OP_PAUSE)
				ck_ok(run(&f, OP_RESUME, 1));
			check_content(&f, 0);
			check_content(&f, 1);
			ck_ok(cms_context_destroy(f.ctx));
			ck_assert_uint_eq(t_counters().host_buffers, 0);
		}
		ck_assert_int_ge(failed, op == OP_PAUSE ? 3 : 2); /* buffers, staging */
	}
	pageable = 0;
}
END_TEST

START_TEST(out_of_memory_on_resume)
{
	const struct t_sim *sim = t_sim();
	struct fixture f;
	cms_region *filler;
	uint64_t big, freeb;
	cmssim_counters c0, c1;

	sim->set_capacity(0, 32 * G);
	setup(&f, CMS_POLICY_HOST, 0, 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	/* Someone else takes the memory while we are paused. */
	filler = t_region(f.ctx, "other", 0, CMS_POLICY_DISCARD);
	ck_ok(cms_device_memory_info(f.ctx, 0, &freeb, NULL));
	ck_ok(cms_alloc(filler, freeb - G, &big));
	c0 = t_counters();
	ck_status(cms_region_resume(f.r[0], NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	c1 = t_counters();
	same_counts(&c0, &c1, "resume OOM");
	ck_assert_uint_eq(state(f.r[0]), CMS_STATE_PAUSED);
	ck_assert_uint_gt(backup_bytes(f.r[0]), 0);
	/* Memory comes back: the retry succeeds with content. */
	ck_ok(cms_free(f.ctx, big));
	ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	check_content(&f, 0);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

START_TEST(region_create_sweep)
{
	const struct t_sim *sim = t_sim();
	cmssim_counters c0, c1;
	uint64_t calls, i;
	cms_context *ctx;
	cms_region *r;
	unsigned points = 0, absorbed = 0;
	cms_status st;

	ctx = t_ctx();
	calls = sim->call_count();
	r = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(ctx));
	for (i = 1; i <= calls; i++) {
		ctx = t_ctx();
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		r = NULL;
		st = cms_region_create(ctx, "a", NULL, &r);
		ck_assert_int_eq(sim->armed_faults(), 0);
		points++;
		if (st == CMS_OK) { /* absorbed (a failed context pop is only logged) */
			absorbed++;
			ck_ok(cms_context_destroy(ctx));
			continue;
		}
		ck_assert_ptr_null(r);
		ck_assert_str_ne(cms_last_error(), "");
		c1 = t_counters();
		same_counts(&c0, &c1, "region create");
		ck_status(cms_region_find(ctx, "a", 0, &r), CMS_ERR_NOT_FOUND);
		r = t_region(ctx, "a", 0, CMS_POLICY_HOST);
		ck_ok(cms_context_destroy(ctx));
	}
	printf("fault sweep: region create: %u points (%u absorbed)\n", points, absorbed);
}
END_TEST

/* Frees one allocation (_i: policy x state) with each of its driver calls failed in turn. */
START_TEST(free_sweep)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST };
	const struct t_sim *sim = t_sim();
	int paused = _i / 3;
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t calls, i;
	unsigned points = 0, absorbed = 0;
	cms_status st;
	struct fixture f;
	cmssim_counters c0, c1;

	setup(&f, pol[_i % 3], 0, 0);
	if (paused)
		ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	calls = sim->call_count();
	ck_ok(cms_free(f.ctx, f.p[0][0]));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	for (i = 1; i <= calls; i++) {
		setup(&f, pol[_i % 3], 0, 0);
		if (paused)
			ck_ok(cms_region_pause(f.r[0], NULL, NULL));
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_free(f.ctx, f.p[0][1]);
		ck_assert_int_eq(sim->armed_faults(), 0);
		points++;
		if (st == CMS_OK) { /* absorbed: unregistering a host buffer only logs */
			absorbed++;
			ck_status(cms_pointer_info_get(f.ctx, f.p[0][1], &pi), CMS_ERR_NOT_FOUND);
			ck_ok(cms_context_destroy(f.ctx));
			continue;
		}
		c1 = t_counters();
		same_counts(&c0, &c1, cms_last_error());
		pinned_matches(&f, "failed free");
		ck_ok(cms_pointer_info_get(f.ctx, f.p[0][1], &pi));
		ck_assert_uint_eq(pi.base, f.p[0][1]);
		/* A failed free keeps the allocation valid, backed and with its content (a paused
		 * one: in its HOST backup); DISCARD and ZERO lose it in the resume. */
		if (!paused)
			check_content(&f, 0);
		if (paused)
			ck_ok(cms_region_resume(f.r[0], NULL, NULL));
		if (paused && pol[_i % 3] == CMS_POLICY_HOST)
			check_content(&f, 0);
		ck_assert_int_eq(t_fill(0, f.p[0][1], sizes[1] & ~3ull, 1), 0);
		ck_ok(cms_free(f.ctx, f.p[0][1]));
		ck_ok(cms_context_destroy(f.ctx));
	}
	printf("fault sweep: free, policy %u, %s: %u points (%u absorbed)\n", pol[_i % 3],
	       paused ? "paused" : "active", points, absorbed);
}
END_TEST

/*
 * cms_region_flags_set giving a retaining HOST region's buffers back (since 1.2), after a
 * plain (_i 0) or an asynchronous (_i 1: its copies are waited for first) resume, with each
 * driver call failed in turn: a failed wait changes nothing (flags, buffers); a failed
 * cuMemHostUnregister keeps that buffer, page-locked and counted, with the flag set; either
 * way the content survives and the next releasing resume gives everything back.
 */
START_TEST(flags_set_sweep)
{
	const struct t_sim *sim = t_sim();
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	unsigned points = 0, absorbed = 0, kept = 0;
	uint64_t calls, i;
	cms_region_info ri;
	cms_status st;
	struct fixture f;
	cmssim_counters c0;

	ro.flags = _i ? CMS_RESUME_ASYNC : 0;
	setup(&f, CMS_POLICY_HOST, 0, 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	ck_ok(cms_region_resume(f.r[0], &ro, NULL));
	calls = sim->call_count();
	ck_ok(cms_region_flags_set(f.r[0], CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	calls = sim->call_count() - calls;
	ck_assert_uint_gt(calls, 0);
	ck_ok(cms_context_destroy(f.ctx));
	for (i = 1; i <= calls; i++) {
		setup(&f, CMS_POLICY_HOST, 0, 0);
		ck_ok(cms_region_pause(f.r[0], NULL, NULL));
		/* Read before the resume: an info call may find the async copies done. */
		ri = (cms_region_info){ .struct_size = sizeof(ri) };
		ck_ok(cms_region_info_get(f.r[0], &ri));
		ck_ok(cms_region_resume(f.r[0], &ro, NULL));
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_region_flags_set(f.r[0], CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST);
		ck_assert_int_eq(sim->armed_faults(), 0);
		points++;
		pinned_matches(&f, "flags_set");
		{
			cms_region_info now = { .struct_size = sizeof(now) };
			cmssim_counters c1 = t_counters();

			ck_ok(cms_region_info_get(f.r[0], &now));
			if (st == CMS_OK) { /* a buffer that could not be unregistered stays */
				absorbed++;
				ck_assert_uint_le(c1.host_buffers, c0.host_buffers);
				ck_assert_uint_eq(now.flags, CMS_REGION_RELEASE_HOST);
				ck_assert_uint_le(now.host_bytes, ri.host_bytes);
				/* kept: page-locked still (never unmapped so), freed by the resume
				 */
				kept += now.host_bytes > 0;
				ck_assert_uint_eq(now.pinned_bytes, now.host_bytes);
			} else { /* nothing changed */
				same_counts(&c0, &c1, "failed flags_set");
				ck_assert_uint_eq(now.flags, 0);
				ck_assert_uint_eq(now.host_bytes, ri.host_bytes);
				ck_assert_uint_eq(now.pinned_bytes, ri.pinned_bytes);
				ck_ok(cms_region_flags_set(f.r[0], CMS_REGION_RELEASE_HOST,
							   CMS_REGION_RELEASE_HOST));
			}
		}
		check_content(&f, 0);
		ck_ok(cms_region_pause(f.r[0], NULL, NULL));
		ck_ok(cms_region_resume(f.r[0], NULL, NULL));
		check_content(&f, 0);
		ri = (cms_region_info){ .struct_size = sizeof(ri) };
		ck_ok(cms_region_info_get(f.r[0], &ri));
		ck_assert_uint_eq(ri.host_bytes, 0);
		ck_ok(cms_context_destroy(f.ctx));
		ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
	}
	ck_assert_uint_gt(kept, 0); /* the sweep reached cuMemHostUnregister */
	printf("fault sweep: flags_set after a%s resume: %u points (%u absorbed, %u kept)\n",
	       _i ? "n async" : "", points, absorbed, kept);
}
END_TEST

/* Destroys a region (policy x state) with each driver call failed in turn; a retry finishes. */
START_TEST(destroy_sweep)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST };
	const struct t_sim *sim = t_sim();
	int paused = _i / 3;
	uint64_t calls, i;
	unsigned points = 0, absorbed = 0;
	cms_status st;
	struct fixture f;
	cms_region *found;
	cmssim_counters c;

	setup(&f, pol[_i % 3], 0, 0);
	if (paused)
		ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	calls = sim->call_count();
	ck_ok(cms_region_destroy(f.r[0]));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	for (i = 1; i <= calls; i++) {
		cms_region_info ri = { .struct_size = sizeof(ri) };

		setup(&f, pol[_i % 3], 0, 0);
		if (paused)
			ck_ok(cms_region_pause(f.r[0], NULL, NULL));
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = cms_region_destroy(f.r[0]);
		ck_assert_int_eq(sim->armed_faults(), 0);
		points++;
		if (st == CMS_OK) { /* absorbed: unregistering a host buffer only logs */
			absorbed++;
			ck_status(cms_region_find(f.ctx, "a", 0, &found), CMS_ERR_NOT_FOUND);
			ck_ok(cms_context_destroy(f.ctx));
			continue;
		}
		/* The region stays, with the allocations not yet freed, each as it was. */
		ck_ok(cms_region_find(f.ctx, "a", 0, &found));
		ck_assert_ptr_eq(found, f.r[0]);
		ck_ok(cms_region_info_get(f.r[0], &ri));
		ck_assert_uint_ge(ri.allocations, 1);
		ck_assert_uint_eq(ri.backed_bytes, paused ? 0 : ri.physical_bytes);
		c = t_counters();
		ck_assert_uint_eq(c.reservations, 1); /* the region's arena (arena.c) */
		if (paused) /* and the device's zero handles when guarded */
			ck_assert_uint_eq(c.handles, zero_handles());
		else if (coalesced == 2) /* the run keeps its handle until its last member goes */
			ck_assert_uint_eq(c.handles, 1 + zero_handles());
		else
			ck_assert_uint_eq(c.handles, ri.allocations + zero_handles());
		/* a buffer whose cuMemHostUnregister failed stays registered and counted */
		ck_assert_uint_eq(ri.pinned_bytes, c.host_registered_bytes);
		ck_assert_uint_le(ri.pinned_bytes, ri.host_bytes);
		/* one buffer holds a region's backups; when guarded the extra allocation (33
		 * granules, above the simulation's 16-granule share of a buffer:
		 * store/host_buffer.c) has its own */
		{
			uint64_t want = (paused || coalesced) && pol[_i % 3] == CMS_POLICY_HOST &&
					ri.allocations;

			ck_assert_uint_ge(c.host_buffers, want);
			ck_assert_uint_le(c.host_buffers, want ? want + (uint64_t)guarded : 0);
		}
		/* Context destroy retries the region destroy. */
		ck_ok(cms_context_destroy(f.ctx));
		c = t_counters();
		ck_assert_uint_eq(c.reservations, 0);
		ck_assert_uint_eq(c.handles, 0);
		ck_assert_uint_eq(c.host_buffers, 0);
		ck_assert_uint_eq(c.primary_ctx_refs, 0);
	}
	printf("fault sweep: region destroy, policy %u, %s: %u points (%u absorbed)\n", pol[_i % 3],
	       paused ? "paused" : "active", points, absorbed);
}
END_TEST

/* A pause unmaps one allocation at a time, also adjacent ones of one reservation (one
 * cuMemUnmap over their span made the first pause of 2048 x 8 MiB slower on an H200 and gained
 * nothing in the steady state: docs/architecture.md, step 3): a fault armed on the second
 * cuMemUnmap fires, and the pause rolls back with the content kept. Cases: a DISCARD and a
 * HOST first pause (the unmap step: these fail with span unmaps), a HOST steady pause (the
 * second batch's unmap in overlap.c's release_batch fails after the first batch's release, and
 * the rollback restores that one from its host buffer; on the simulation a batch holds one
 * allocation, BATCH_SIM_GRANULES, so this case cannot tell spans from single unmaps). */
START_TEST(pause_unmaps_one_allocation_at_a_time)
{
	const struct t_sim *sim = t_sim();
	struct fixture f;

	setup(&f, _i ? CMS_POLICY_HOST : CMS_POLICY_DISCARD, 0, 0);
	if (_i == 2) { /* host buffers made: the steady state */
		ck_ok(cms_region_pause(f.r[0], NULL, NULL));
		ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	}
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 2, CUDA_ERROR_INVALID_VALUE), 0);
	ck_assert_int_ne(cms_region_pause(f.r[0], NULL, NULL), CMS_OK);
	ck_assert_int_eq(sim->armed_faults(), 0);
	sim->clear_faults();
	ck_assert_uint_eq(state(f.r[0]), CMS_STATE_ACTIVE);
	if (_i)
		check_content(&f, 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	if (_i)
		check_content(&f, 0);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

/* A rollback that fails must not leave a saved copy that a later cycle restores over new data. */
START_TEST(no_stale_backup_after_double_faults)
{
	const struct t_sim *sim = t_sim();
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	struct fixture f;
	cms_status st;

	/* Pause: unmap fails, then the rollback's map fails too: the region is left paused; a
	 * resume that fails and rolls back leaves it paused, the next one completes it. */
	setup(&f, CMS_POLICY_HOST, 0, 0);
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuMemMap", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_region_pause(f.r[0], NULL, NULL), CMS_ERR_ROLLBACK_FAILED);
	sim->clear_faults();
	ck_assert_uint_eq(state(f.r[0]), CMS_STATE_PAUSED);
	ck_assert_int_eq(sim->fail_call("cuMemMap", 1, CUDA_ERROR_UNKNOWN), 0);
	st = cms_region_resume(f.r[0], NULL, NULL);
	sim->clear_faults();
	ck_assert_int_ne(st, CMS_OK);
	ck_assert_uint_eq(state(f.r[0]), CMS_STATE_PAUSED);
	ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	check_content(&f, 0);
	ck_assert_int_eq(t_fill(0, f.p[0][0], sizes[0] & ~3ull, 77), 0); /* new data */
	ck_assert_int_eq(t_fill(0, f.p[0][1], sizes[1] & ~3ull, 78), 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	ck_assert_int_eq(t_check(0, f.p[0][0], sizes[0] & ~3ull, 77), -1);
	ck_assert_int_eq(t_check(0, f.p[0][1], sizes[1] & ~3ull, 78), -1);
	ck_ok(cms_context_destroy(f.ctx));

	/* Resume: create fails and the undo's unmap fails; a later resume and cycle keep new data.
	 * One handle per allocation (no CMS_REGION_COALESCE), so that the second cuMemCreate
	 * exists. */
	setup(&f, CMS_POLICY_HOST, 0, 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	ck_assert_int_eq(sim->fail_call("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_ne(cms_region_resume(f.r[0], &ro, NULL), CMS_OK);
	sim->clear_faults();
	ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	ck_assert_int_eq(t_fill(0, f.p[0][0], sizes[0] & ~3ull, 88), 0);
	ck_assert_int_eq(t_fill(0, f.p[0][1], sizes[1] & ~3ull, 89), 0);
	ck_assert_int_eq(t_fill(0, f.p[0][2], sizes[2] & ~3ull, 90), 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	ck_ok(cms_region_resume(f.r[0], NULL, NULL));
	ck_assert_int_eq(t_check(0, f.p[0][0], sizes[0] & ~3ull, 88), -1);
	ck_assert_int_eq(t_check(0, f.p[0][1], sizes[1] & ~3ull, 89), -1);
	ck_assert_int_eq(t_check(0, f.p[0][2], sizes[2] & ~3ull, 90), -1);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

/* Bytes of region r mapped (cms_region_info.backed_bytes). */
static uint64_t backed(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i.backed_bytes;
}

/* Second faults: calls a pause makes only to roll back (nth of each from the first fault). */
static const struct {
	const char *fn;
	uint64_t nth;
} rollback_faults[] = { { "cuMemCreate", 1 },	    { "cuMemMap", 1 },
			{ "cuMemMap", 2 },	    { "cuMemSetAccess", 1 },
			{ "cuMemcpyHtoDAsync", 1 }, { "cuMemcpyHtoDAsync", 2 } };

/*
 * Double faults in a pause: driver call i fails, then a call of its rollback does
 * (rollback_faults). After CMS_ERR_ROLLBACK_FAILED the region must be left so that the next resume
 * completes it: either ACTIVE with every allocation mapped, or PAUSED and a resume succeeds;
 * then every allocation is mapped with its content (HOST), and a full cycle works.
 */
START_TEST(pause_double_fault_sweep)
{
	const struct t_sim *sim = t_sim();
	unsigned failed = 0, cases = 0;
	uint64_t calls, i, j, all = 0;
	struct fixture f;
	cmssim_counters c;
	int n;

	coalesced = _i;
	for (n = 0; n < NALLOC; n++)
		all += (sizes[n] + G - 1) / G * G;
	setup(&f, CMS_POLICY_HOST, 0, 0);
	calls = sim->call_count();
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	for (i = 1; i <= calls; i++)
		for (j = 0; j < sizeof(rollback_faults) / sizeof(rollback_faults[0]); j++) {
			cms_status st;

			setup(&f, CMS_POLICY_HOST, 0, 0);
			ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
			ck_assert_int_eq(sim->fail_call(rollback_faults[j].fn,
							rollback_faults[j].nth, CUDA_ERROR_UNKNOWN),
					 0);
			st = cms_region_pause(f.r[0], NULL, NULL);
			sim->clear_faults();
			cases++;
			if (st == CMS_ERR_ROLLBACK_FAILED) {
				failed++;
				if (state(f.r[0]) == CMS_STATE_PAUSED)
					ck_assert_msg(cms_region_resume(f.r[0], NULL, NULL) ==
							      CMS_OK,
						      "fault %llu+%s: resume after %s: %s",
						      (unsigned long long)i, rollback_faults[j].fn,
						      "ROLLBACK_FAILED", cms_last_error());
				ck_assert_msg(backed(f.r[0]) == all,
					      "fault %llu+%s: %llu of %llu bytes mapped",
					      (unsigned long long)i, rollback_faults[j].fn,
					      (unsigned long long)backed(f.r[0]),
					      (unsigned long long)all);
				ck_assert_uint_eq(state(f.r[0]), CMS_STATE_ACTIVE);
				check_content(&f, 0);
			} else if (st == CMS_OK) {
				ck_ok(cms_region_resume(f.r[0], NULL, NULL));
			} else {
				ck_assert_uint_eq(state(f.r[0]), CMS_STATE_ACTIVE);
			}
			check_content(&f, 0);
			ck_ok(cms_region_pause(f.r[0], NULL, NULL));
			ck_ok(cms_region_resume(f.r[0], NULL, NULL));
			check_content(&f, 0);
			ck_ok(cms_context_destroy(f.ctx));
			c = t_counters();
			ck_assert_uint_eq(c.handles, 0);
			ck_assert_uint_eq(c.mappings, 0);
			ck_assert_uint_eq(c.host_buffers, 0);
		}
	coalesced = 0;
	ck_assert_uint_gt(failed, 0);
	printf("double-fault sweep: pause (coalesced %d), %u cases, %u rollbacks failed\n", _i,
	       cases, failed);
}
END_TEST

/* Access of device 0 at addr (cmssim_get_access: 1 read, 3 read-write, -1 unmapped). */
static int access_of(uint64_t addr)
{
	static int (*get)(uint64_t, int);

	if (!get)
		get = (int (*)(uint64_t, int))dlsym(t_drv()->dl, "cmssim_get_access");
	ck_assert_ptr_nonnull(get);
	return get(addr, 0);
}

/*
 * After a failed cms_free or cms_region_destroy of region 0 (paused or not): every allocation
 * still there is as it was. Active: mapped with its content (setup's pattern; the extra
 * allocation of a guarded region holds none), read-only when frozen (a write fails); paused:
 * unmapped, reading as zeros when guarded. Returns how many are left.
 */
static int check_left(struct fixture *f, int paused, const char *when)
{
	int i, left = 0;

	for (i = 0; i <= NALLOC; i++) {
		cms_pointer_info pi = { .struct_size = sizeof(pi) };
		uint64_t p = i < NALLOC ? f->p[0][i] : f->extra,
			 size = i < NALLOC ? sizes[i] : EXTRA;
		uint32_t word = 0x5a5a5a5a;

		if (!p || cms_pointer_info_get(f->ctx, p, &pi) == CMS_ERR_NOT_FOUND)
			continue; /* freed before the failure, or no extra allocation */
		left++;
		ck_assert_msg(pi.base == p && pi.state == (uint32_t)(paused ? CMS_STATE_PAUSED :
									      CMS_STATE_ACTIVE),
			      "%s: allocation %d: base 0x%llx, state %u", when, i,
			      (unsigned long long)pi.base, pi.state);
		if (paused) {
			ck_assert_msg(access_of(p) ==
					      (guarded ? CU_MEM_ACCESS_FLAGS_PROT_READ : -1),
				      "%s: paused allocation %d: access %d", when, i, access_of(p));
			if (guarded)
				ck_assert_msg(t_is_zero(0, p, size), "%s: allocation %d unguarded",
					      when, i);
			continue;
		}
		ck_assert_msg(access_of(p) == (frozen ? CU_MEM_ACCESS_FLAGS_PROT_READ :
							CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
			      "%s: allocation %d: access %d", when, i, access_of(p));
		ck_assert_msg(i == NALLOC || t_check(0, p, size & ~3ull, (uint32_t)i) == -1,
			      "%s: allocation %d lost its content", when, i);
		if (frozen)
			ck_assert_msg(t_write(0, p, &word, sizeof(word)) != 0,
				      "%s: allocation %d writable while frozen", when, i);
	}
	return left;
}

/* The calls of the double-fault sweep: a free of one allocation of three, a free of the last
 * allocation of its region (its host buffer's last user, its run's last member, its arena's
 * last extent: the others freed first), a region destroy. */
enum release_op { FREE_ONE, FREE_LAST, DESTROY };

static void release_setup(struct fixture *f, uint32_t policy, int paused, enum release_op op)
{
	setup(f, policy, 0, 0);
	if (paused)
		ck_ok(cms_region_pause(f->r[0], NULL, NULL));
	if (op != FREE_LAST)
		return;
	ck_ok(cms_free(f->ctx, f->p[0][0]));
	ck_ok(cms_free(f->ctx, f->p[0][2]));
	if (f->extra)
		ck_ok(cms_free(f->ctx, f->extra));
}

static cms_status release_run(struct fixture *f, enum release_op op)
{
	return op == DESTROY ? cms_region_destroy(f->r[0]) : cms_free(f->ctx, f->p[0][1]);
}

/*
 * Double faults in a free and a region destroy (issue 34, item 8): driver call i of the call
 * fails, then each later call j in turn (those the call makes after its failure: its undo).
 * _i: policy (DISCARD, ZERO, HOST, HOST frozen) x state (active, paused) x call (release_op)
 * x layout (one handle each, coalesced runs, guarded). A failed call changes nothing the user
 * can see (check_left); the region goes on as it was: its next pause copies nothing when
 * frozen (the backups still hold the content), a pause/resume cycle keeps the content of a
 * HOST region, and a retry of the call succeeds with nothing left behind.
 */
START_TEST(free_double_fault_sweep)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST,
					CMS_POLICY_HOST };
	static const char *const names[] = { "free one", "free last", "destroy" };
	const struct t_sim *sim = t_sim();
	int paused = _i / 4 % 2, layout = _i / 24;
	enum release_op op = (enum release_op)(_i / 8 % 3);
	unsigned cases = 0, failed = 0;
	uint64_t i, j, calls;
	struct fixture f;
	cmssim_counters c;

	frozen = _i % 4 == 3;
	coalesced = layout == 1 ? 2 : 0;
	guarded = layout == 2;
	/* How many calls the call makes without a fault. */
	release_setup(&f, pol[_i % 4], paused, op);
	calls = sim->call_count();
	ck_ok(release_run(&f, op));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	for (i = 1; i <= calls; i++)
		for (j = i + 1;; j++) {
			cms_pause_result pr = { .struct_size = sizeof(pr) };
			cms_region_stats s0, s1;
			cms_region_info ri;
			cms_region *found;
			cms_status st;
			char when[600];
			int reached;

			release_setup(&f, pol[_i % 4], paused, op);
			ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
			ck_assert_int_eq(sim->fail_call(NULL, j, CUDA_ERROR_OUT_OF_MEMORY), 0);
			st = release_run(&f, op);
			reached = sim->armed_faults() == 0;
			sim->clear_faults();
			cases++;
			snprintf(when, sizeof(when), "%s %llu+%llu: %s: %s", names[op],
				 (unsigned long long)i, (unsigned long long)j, cms_status_name(st),
				 st ? cms_last_error() : "");
			if (st == CMS_OK) { /* absorbed (a cleanup kept for later) */
				ck_assert_msg(op != DESTROY ||
						      cms_region_find(f.ctx, "a", 0, &found) ==
							      CMS_ERR_NOT_FOUND,
					      "%s: the region stays", when);
				goto next;
			}
			failed++;
			ck_assert_msg(st != CMS_ERR_INTERNAL, "%s", when);
			ck_assert_msg(state(f.r[0]) ==
					      (paused ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE),
				      "%s: state %u", when, state(f.r[0]));
			ck_assert_msg(t_info(f.r[0]).frozen == (uint32_t)frozen, "%s", when);
			ck_assert_msg(check_left(&f, paused, when) > 0, "%s: none left", when);
			if (!paused)
				ck_assert_msg(t_info(f.r[0]).backed_bytes ==
						      t_info(f.r[0]).physical_bytes,
					      "%s: %llu of %llu bytes mapped", when,
					      (unsigned long long)t_info(f.r[0]).backed_bytes,
					      (unsigned long long)t_info(f.r[0]).physical_bytes);
			/* The region goes on as it was: a cycle (frozen: copying nothing), then the
			 * call again. */
			s0 = t_stats(f.r[0]);
			ri = t_info(f.r[0]);
			if (!paused)
				ck_assert_msg(cms_region_pause(f.r[0], NULL, &pr) == CMS_OK,
					      "%s: pause: %s", when, cms_last_error());
			s1 = t_stats(f.r[0]);
			/* every byte counted (before: none of an allocation mapped without a
			 * handle) */
			ck_assert_msg(paused || (pr.bytes_released ==
							 ri.backed_bytes + ri.retained_bytes &&
						 s1.bytes_released - s0.bytes_released ==
							 pr.bytes_released),
				      "%s: the pause released %llu bytes (counted %llu), held %llu",
				      when, (unsigned long long)pr.bytes_released,
				      (unsigned long long)(s1.bytes_released - s0.bytes_released),
				      (unsigned long long)(ri.backed_bytes + ri.retained_bytes));
			ck_assert_msg(!frozen || paused || s1.bytes_to_store == s0.bytes_to_store,
				      "%s: the pause copied %llu bytes", when,
				      (unsigned long long)(s1.bytes_to_store - s0.bytes_to_store));
			ck_assert_msg(cms_region_resume(f.r[0], NULL, NULL) == CMS_OK,
				      "%s: resume: %s", when, cms_last_error());
			if (pol[_i % 4] == CMS_POLICY_HOST)
				check_left(&f, 0, when);
			st = release_run(&f, op);
			ck_assert_msg(st == CMS_OK, "%s: retry: %s", when, cms_last_error());
		next:
			ck_ok(cms_context_destroy(f.ctx));
			c = t_counters();
			ck_assert_msg(c.handles == 0 && c.reservations == 0 && c.mappings == 0 &&
					      c.host_buffers == 0,
				      "%s: left %llu handles, %llu reservations, %llu mappings, "
				      "%llu host buffers",
				      when, (unsigned long long)c.handles,
				      (unsigned long long)c.reservations,
				      (unsigned long long)c.mappings,
				      (unsigned long long)c.host_buffers);
			if (!reached) /* no call after j: the next i */
				break;
		}
	frozen = 0;
	coalesced = 0;
	guarded = 0;
	printf("double-fault sweep: %s, policy %u%s, %s, layout %d: %u cases, %u failed\n",
	       names[op], pol[_i % 4], _i % 4 == 3 ? " frozen" : "", paused ? "paused" : "active",
	       layout, cases, failed);
}
END_TEST

/* A failed cuCtxPopCurrent must not leave the primary context pushed on the thread: after more
 * failed pops than the simulation's context stack holds (64), calls on the thread still work. */
START_TEST(failed_pops_leave_no_context)
{
	const struct t_sim *sim = t_sim();
	struct fixture f;
	int n;

	setup(&f, CMS_POLICY_HOST, 0, 0);
	for (n = 0; n < 100; n++) {
		ck_assert_int_eq(sim->fail_call("cuCtxPopCurrent", 1, CUDA_ERROR_UNKNOWN), 0);
		ck_assert_msg(cms_region_pause(f.r[0], NULL, NULL) == CMS_OK, "pause %d: %s", n,
			      cms_last_error());
		sim->clear_faults();
		ck_assert_int_eq(sim->fail_call("cuCtxPopCurrent", 1, CUDA_ERROR_UNKNOWN), 0);
		ck_assert_msg(cms_region_resume(f.r[0], NULL, NULL) == CMS_OK, "resume %d: %s", n,
			      cms_last_error());
		sim->clear_faults();
	}
	check_content(&f, 0);
	ck_ok(cms_context_destroy(f.ctx));
	ck_assert_uint_eq(t_counters().primary_ctx_refs, 0);
}
END_TEST

/* A failed cuEventDestroy of a pause's batch events is retried at the next call: the
 * simulation's live events come back to what they were. */
START_TEST(failed_event_destroy_is_retried)
{
	const struct t_sim *sim = t_sim();
	cmssim_counters c0, c;
	struct fixture f;

	coalesced = 1; /* one handle per allocation after a cycle: the pause releases in batches */
	setup(&f, CMS_POLICY_HOST, 0, 0);
	coalesced = 0;
	c0 = t_counters();
	ck_assert_int_eq(sim->fail_call("cuEventDestroy", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(cms_region_pause(f.r[0], NULL, NULL));
	ck_assert_int_eq(sim->armed_faults(), 0); /* the batch events were destroyed */
	ck_assert_uint_eq(t_counters().events, c0.events + 1);
	ck_ok(cms_region_resume(f.r[0], NULL, NULL)); /* retries it */
	c = t_counters();
	ck_assert_uint_eq(c.events, c0.events);
	check_content(&f, 0);
	ck_ok(cms_context_destroy(f.ctx));
	ck_assert_uint_eq(t_counters().events, 0);
}
END_TEST

/* A cleanup that fails again at context destroy is leaked (logged), and the context goes
 * anyway: a destroy that could only fail again would leak the whole context instead. */
START_TEST(destroy_goes_when_a_cleanup_fails_again)
{
	const struct t_sim *sim = t_sim();
	char dir[256];
	const char *t = getenv("TMPDIR");
	cms_context *ctx = t_ctx();
	cms_region *r;
	uint64_t p;

	snprintf(dir, sizeof(dir), "%s/cms-faults-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	ck_ok(cms_region_disk_dir_set(r, dir));
	ck_ok(cms_alloc(r, 4 * G, &p));
	ck_assert_int_eq(sim->fail_call("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_counters().host_registrations, 1); /* kept for a retry */
	ck_ok(cms_region_destroy(r));
	ck_assert_int_eq(sim->fail_call("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(cms_context_destroy(ctx)); /* the handle is gone */
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().host_registrations, 1); /* leaked, logged */
	ck_assert_uint_eq(t_counters().primary_ctx_refs, 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The DISK staging pool's cuMemHostUnregister (or the push before it) that fails is retried at
 * the next call and at context destroy: no registration is left. */
START_TEST(failed_staging_unregister_is_retried)
{
	const struct t_sim *sim = t_sim();
	char dir[256];
	const char *t = getenv("TMPDIR");
	cms_context *ctx = t_ctx();
	cms_region *r;
	uint64_t p;

	snprintf(dir, sizeof(dir), "%s/cms-faults-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	r = t_region(ctx, "d", 0, CMS_POLICY_DISK);
	ck_ok(cms_region_disk_dir_set(r, dir));
	ck_ok(cms_alloc(r, 4 * G, &p));
	ck_assert_int_eq(t_fill(0, p, 4 * G, 5), 0);
	ck_assert_int_eq(sim->fail_call("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().host_registrations, 1); /* kept for a retry */
	/* The retry at the resume fails too (its push): still kept. */
	ck_assert_int_eq(sim->fail_call("cuCtxPushCurrent", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().host_registrations, 1);
	ck_assert_int_eq(t_check(0, p, 4 * G, 5), -1);
	/* Context destroy retries it a last time: done. */
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(t_counters().host_registrations, 0);
	ck_assert_uint_eq(t_counters().primary_ctx_refs, 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* The sweeps with CMS_REGION_GUARD: a guard is mapped after the release and unmapped before
 * the re-backing, a free and a destroy unmap it; every step is undone on a failure. Kept
 * cheap: one result per policy with one handle per allocation (loop 0-2), then HOST with runs
 * (coalesced: every member unguarded before the run maps) and a second region of policy
 * second (loop 3); run_result is the injected result of that HOST sweep. */
static void guarded_sweep(int i, enum op op, int run_result, uint32_t second)
{
	static const uint32_t pol[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST };

	guarded = 1;
	if (i < 3) {
		total_points += sweep(pol[i], 0, 0, op, CUDA_ERROR_UNKNOWN);
	} else {
		coalesced = 2;
		total_points += sweep(CMS_POLICY_HOST, 0, 0, op, run_result);
		total_points += sweep(CMS_POLICY_HOST, 1, second, op, CUDA_ERROR_INVALID_VALUE);
		coalesced = 0;
	}
	guarded = 0;
}

START_TEST(pause_sweep_guarded)
{
	guarded_sweep(_i, OP_PAUSE, CUDA_ERROR_UNKNOWN, CMS_POLICY_DISCARD);
}
END_TEST

START_TEST(resume_sweep_guarded)
{
	guarded_sweep(_i, OP_RESUME, CUDA_ERROR_OUT_OF_MEMORY, CMS_POLICY_ZERO);
}
END_TEST

START_TEST(free_sweep_guarded)
{
	guarded = 1;
	free_sweep_fn(_i);
	guarded = 0;
}
END_TEST

START_TEST(destroy_sweep_guarded)
{
	guarded = 1;
	destroy_sweep_fn(_i);
	guarded = 0;
}
END_TEST

START_TEST(pause_sweep_coalesced)
{
	coalesced = 2;
	pause_sweep_fn(_i);
	coalesced = 0;
}
END_TEST

/* After a first cycle with one handle per allocation: a HOST pause releases batch by batch
 * while it copies (pause_pipe.c). */
START_TEST(pause_sweep_cycled_separate)
{
	coalesced = 1;
	pause_sweep_fn(_i);
	coalesced = 0;
}
END_TEST

START_TEST(resume_sweep_coalesced)
{
	coalesced = 2;
	resume_sweep_fn(_i);
	coalesced = 0;
}
END_TEST

START_TEST(free_sweep_coalesced)
{
	coalesced = 2;
	free_sweep_fn(_i);
	coalesced = 0;
}
END_TEST

START_TEST(destroy_sweep_coalesced)
{
	coalesced = 2;
	destroy_sweep_fn(_i);
	coalesced = 0;
}
END_TEST

/* The HOST sweeps with declared content-free ranges (cms_range_discard): the pieces around
 * them, in copies that also span allocations, saved and restored under every fault. */
START_TEST(pause_sweep_declared)
{
	declared = 1;
	coalesced = _i;
	total_points += sweep(CMS_POLICY_HOST, 0, 0, OP_PAUSE, CUDA_ERROR_UNKNOWN);
	total_points +=
		sweep(CMS_POLICY_HOST, 1, CMS_POLICY_HOST, OP_PAUSE, CUDA_ERROR_INVALID_VALUE);
	coalesced = 0;
	declared = 0;
}
END_TEST

START_TEST(resume_sweep_declared)
{
	declared = 1;
	coalesced = _i;
	total_points += sweep(CMS_POLICY_HOST, 0, 0, OP_RESUME, CUDA_ERROR_UNKNOWN);
	total_points +=
		sweep(CMS_POLICY_HOST, 1, CMS_POLICY_ZERO, OP_RESUME, CUDA_ERROR_OUT_OF_MEMORY);
	coalesced = 0;
	declared = 0;
}
END_TEST

/* The sweeps with pageable HOST backups (staging: its registration, the copies into and out
 * of it, their synchronization): pause and resume (loop 0, 1), then with RELEASE_HOST (2, 3),
 * then after a first cycle with runs, next to a DISCARD region (4, 5). */
START_TEST(sweep_pageable)
{
	enum op op = _i % 2 ? OP_RESUME : OP_PAUSE;

	pageable = _i < 2 ? 1 : 2;
	if (_i < 4) {
		total_points += sweep(CMS_POLICY_HOST, 0, 0, op, CUDA_ERROR_UNKNOWN);
		total_points += sweep(CMS_POLICY_HOST, 0, 0, op, CUDA_ERROR_OUT_OF_MEMORY);
	} else {
		coalesced = 2;
		total_points +=
			sweep(CMS_POLICY_HOST, 1, CMS_POLICY_DISCARD, op, CUDA_ERROR_INVALID_VALUE);
		coalesced = 0;
	}
	pageable = 0;
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("faults");

	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, pause_sweep, 0, 3);
	tcase_add_loop_test(tc, resume_sweep, 0, 3);
	tcase_add_loop_test(tc, resume_async_sweep, 0, 3);
	tcase_add_test(tc, alloc_sweep);
	tcase_add_test(tc, no_stale_backup_after_double_faults);
	tcase_add_loop_test(tc, pause_unmaps_one_allocation_at_a_time, 0, 3);
	tcase_add_loop_test(tc, pause_double_fault_sweep, 0, 3); /* coalesced 0, 1, 2 */
	tcase_add_test(tc, region_create_sweep);
	tcase_add_loop_test(tc, free_sweep, 0, 6);
	tcase_add_loop_test(tc, destroy_sweep, 0, 6);
	tcase_add_loop_test(tc, pause_sweep_coalesced, 2, 3);	    /* HOST: runs with backups */
	tcase_add_loop_test(tc, pause_sweep_cycled_separate, 2, 3); /* HOST */
	tcase_add_loop_test(tc, resume_sweep_coalesced, 2, 3);
	tcase_add_loop_test(tc, free_sweep_coalesced, 0, 6);
	tcase_add_loop_test(tc, destroy_sweep_coalesced, 0, 6);
	tcase_add_loop_test(tc, pause_sweep_guarded, 0, 4); /* 3 policies, then coalesced */
	tcase_add_loop_test(tc, resume_sweep_guarded, 0, 4);
	tcase_add_loop_test(tc, free_sweep_guarded, 0, 6);
	tcase_add_loop_test(tc, destroy_sweep_guarded, 0, 6);
	tcase_add_loop_test(tc, pause_sweep_declared, 0, 3); /* separate, cycled, coalesced */
	tcase_add_loop_test(tc, resume_sweep_declared, 0, 3);
	tcase_add_loop_test(tc, flags_set_sweep, 0, 2); /* after a plain, an async resume */
	tcase_add_loop_test(tc, sweep_pageable, 0, 6);
	tcase_add_test(tc, host_allocation_failure);
	tcase_add_test(tc, host_allocation_failure_pageable);
	tcase_add_test(tc, out_of_memory_on_resume);
	suite_add_tcase(s, tc);
	tc = tcase_create("double"); /* double faults in frees and destroys */
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, free_double_fault_sweep, 0, 72);
	suite_add_tcase(s, tc);
	tc = tcase_create("contexts"); /* context stack, cleanups */
	tcase_add_test(tc, failed_pops_leave_no_context);
	tcase_add_test(tc, failed_event_destroy_is_retried);
	tcase_add_test(tc, failed_staging_unregister_is_retried);
	tcase_add_test(tc, destroy_goes_when_a_cleanup_fails_again);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_SIM);
}
