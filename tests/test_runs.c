/* SPDX-License-Identifier: MIT */
/*
 * test_runs.c - coalesced re-backing (run.c, arena.c) on the host simulation:
 * a region carves its allocations from arenas (one reservation each), and a
 * resume backs each run of address-adjacent allocations with ONE physical
 * handle and ONE mapping, at the same addresses. The simulation's counters
 * (handles, mappings, reservations, device bytes) show how many driver
 * objects back the memory; content checks show nothing moved.
 *
 * Covers: cycles per policy, a free inside a live run (its bytes retained
 * until the run is released), freeing a run member by member,
 * the default (no CMS_REGION_COALESCE), regions never mixing, mixed and large sizes, peer
 * access, cms_swap, async resume, fault injection (single faults and sweeps
 * over every driver call of a pause, resume and swap), destroy paths, and a
 * randomized model (fixed seeds) that predicts every address and counter.
 * Runs with CMS_SIM_DEVICES=2 CMS_SIM_GRANULARITY=64K.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define KiB 1024ull
#define GiB (1024ull * MiB)
#define ARENA (2ull * GiB) /* CMS_ARENA_BYTES (src/internal.h) */
#define MAXA 128

/* ---- helpers ------------------------------------------------------------- */

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

/* cms_region_info.retained_bytes: freed members' bytes still in a live run. */
static uint64_t retained(cms_region *r)
{
	return info(r).retained_bytes;
}

static int (*get_access_fn(void))(uint64_t, int)
{
	int (*fn)(uint64_t, int);

	t_sim();
	fn = (int (*)(uint64_t, int))dlsym(t_drv()->dl, "cmssim_get_access");
	ck_assert_ptr_nonnull(fn);
	return fn;
}

/* Whether device dev has read-write access at addr. */
static bool mapped_rw(uint64_t addr, int dev)
{
	return get_access_fn()(addr, dev) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

static void sync_device(int dev)
{
	struct cms_driver *d = t_drv();
	CUcontext c, popped;
	CUdevice cu;

	ck_assert_int_eq(d->cuDeviceGet(&cu, dev), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	ck_assert_int_eq(d->cuCtxSynchronize(), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRelease(cu), 0);
}

static char disk_dir[256];

static void disk_on(cms_region *r)
{
	const char *t = getenv("TMPDIR");

	if (!disk_dir[0]) {
		snprintf(disk_dir, sizeof(disk_dir), "%s/cms-runs-XXXXXX", t && *t ? t : "/tmp");
		ck_assert_ptr_nonnull(mkdtemp(disk_dir));
	}
	ck_ok(cms_region_disk_dir_set(r, disk_dir));
}

static void disk_off(void)
{
	if (disk_dir[0])
		ck_assert_int_eq(rmdir(disk_dir), 0); /* no name left behind */
	disk_dir[0] = 0;
}

/* Allocations of one region, with their sizes and content seeds. */
struct set {
	cms_region *r;
	int dev;
	uint32_t policy;
	size_t n;
	uint64_t p[MAXA], size[MAXA], phys[MAXA];
	uint32_t seed[MAXA];
	bool live[MAXA];
};

static void set_init(struct set *s, cms_region *r)
{
	cms_region_info i = info(r);

	memset(s, 0, sizeof(*s));
	s->r = r;
	s->dev = i.device;
	s->policy = i.policy;
}

/* Allocates granules * g - shave bytes (shave a multiple of 4, < g). */
static size_t set_alloc(struct set *s, uint64_t granules, uint64_t shave)
{
	uint64_t g = info(s->r).granularity;
	size_t k = s->n++;

	ck_assert_uint_lt(k, MAXA);
	s->size[k] = granules * g - shave;
	s->phys[k] = granules * g;
	ck_ok(cms_alloc(s->r, s->size[k], &s->p[k]));
	ck_assert_uint_eq(s->p[k] % g, 0);
	s->live[k] = true;
	return k;
}

static void set_fill(struct set *s, uint32_t seed)
{
	size_t k;

	for (k = 0; k < s->n; k++) {
		if (!s->live[k])
			continue;
		s->seed[k] = seed + (uint32_t)k;
		ck_assert_int_eq(t_fill(s->dev, s->p[k], s->size[k] & ~3ull, s->seed[k]), 0);
	}
}

/* Content per policy after a resume (HOST/DISK: kept, ZERO: zero, DISCARD: any). */
static void set_check(const struct set *s)
{
	size_t k;

	for (k = 0; k < s->n; k++) {
		long bad;

		if (!s->live[k])
			continue;
		switch (s->policy) {
		case CMS_POLICY_HOST:
		case CMS_POLICY_DISK:
			bad = t_check(s->dev, s->p[k], s->size[k] & ~3ull, s->seed[k]);
			ck_assert_msg(bad == -1, "allocation %zu at 0x%llx: word %ld differs", k,
				      (unsigned long long)s->p[k], bad);
			break;
		case CMS_POLICY_ZERO:
			ck_assert_msg(t_is_zero(s->dev, s->p[k], s->phys[k]),
				      "allocation %zu not zeroed", k);
			break;
		default:
			ck_assert(mapped_rw(s->p[k], s->dev));
		}
	}
}

/* Sums of the live allocations. */
static uint64_t set_phys(const struct set *s)
{
	uint64_t sum = 0;
	size_t k;

	for (k = 0; k < s->n; k++)
		sum += s->live[k] ? s->phys[k] : 0;
	return sum;
}

static uint64_t set_logical(const struct set *s)
{
	uint64_t sum = 0;
	size_t k;

	for (k = 0; k < s->n; k++)
		sum += s->live[k] ? s->size[k] : 0;
	return sum;
}

/* Handles a resume makes: maximal runs of address-adjacent live allocations. */
static uint64_t set_runs(const struct set *s)
{
	uint64_t runs = 0;
	size_t k, j;

	for (k = 0; k < s->n; k++) {
		bool joined = false;

		if (!s->live[k])
			continue;
		for (j = 0; j < s->n && !joined; j++) /* a live allocation ends right below */
			joined = s->live[j] && s->p[j] + s->phys[j] == s->p[k];
		runs += !joined;
	}
	return runs;
}

static void set_free(struct set *s, size_t k, cms_context *ctx)
{
	ck_assert(s->live[k]);
	ck_ok(cms_free(ctx, s->p[k]));
	s->live[k] = false;
}

/* Every live allocation is found at its address with its size, in state. */
static void set_lookup(const struct set *s, cms_context *ctx, uint32_t state)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	size_t k;

	for (k = 0; k < s->n; k++) {
		if (!s->live[k])
			continue;
		ck_ok(cms_pointer_info_get(ctx, s->p[k] + s->size[k] - 1, &pi));
		ck_assert_uint_eq(pi.base, s->p[k]);
		ck_assert_uint_eq(pi.size, s->size[k]);
		ck_assert_uint_eq(pi.physical_size, s->phys[k]);
		ck_assert_ptr_eq(pi.region, s->r);
		ck_assert_uint_eq(pi.state, state);
	}
}

/* Region accounting matches the set. */
static void set_info(const struct set *s, uint32_t state)
{
	cms_region_info i = info(s->r);
	size_t k, live = 0;

	for (k = 0; k < s->n; k++)
		live += s->live[k];
	ck_assert_uint_eq(i.state, state);
	ck_assert_uint_eq(i.allocations, live);
	ck_assert_uint_eq(i.logical_bytes, set_logical(s));
	ck_assert_uint_eq(i.physical_bytes, set_phys(s));
	ck_assert_uint_eq(i.backed_bytes, state == CMS_STATE_ACTIVE ? set_phys(s) : 0);
}

/* The simulation's live driver objects (line: the caller's, for the message). */
static void counts_at(int line, uint64_t handles, uint64_t mappings, uint64_t reservations,
		      uint64_t used0)
{
	cmssim_counters c = t_counters();

	ck_assert_msg(c.handles == handles && c.mappings == mappings &&
			      c.physical_allocations == handles && c.reservations == reservations &&
			      c.device_used_bytes[0] == used0,
		      "line %d: handles %llu (want %llu), mappings %llu (%llu), physical "
		      "allocations %llu, reservations %llu (%llu), device 0 bytes %llu (%llu)",
		      line, (unsigned long long)c.handles, (unsigned long long)handles,
		      (unsigned long long)c.mappings, (unsigned long long)mappings,
		      (unsigned long long)c.physical_allocations,
		      (unsigned long long)c.reservations, (unsigned long long)reservations,
		      (unsigned long long)c.device_used_bytes[0], (unsigned long long)used0);
}
#define counts(...) counts_at(__LINE__, __VA_ARGS__)

static void everything_freed(void)
{
	cmssim_counters c;

	t_nothing_left(2);
	c = t_counters();
	ck_assert_uint_eq(c.host_buffers, 0);
	ck_assert_uint_eq(c.host_registrations, 0);
}

static void pause_r(cms_region *r, uint64_t want_released)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };

	ck_ok(cms_region_pause(r, NULL, &pr));
	ck_assert_uint_eq(pr.bytes_released, want_released);
}

static void resume_r(cms_region *r, uint64_t want_backed)
{
	cms_resume_result rr = { .struct_size = sizeof(rr) };

	ck_ok(cms_region_resume(r, NULL, &rr));
	ck_assert_uint_eq(rr.bytes_backed, want_backed);
}

static const uint32_t policies[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_HOST,
				     CMS_POLICY_DISK };

/* ---- 1. one region of 64 small allocations: one handle after a cycle ------ */

START_TEST(coalesce_cycles)
{
	uint32_t policy = policies[_i];
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, policy);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	struct set s;
	uint64_t total;
	int k, cycle;

	if (policy == CMS_POLICY_DISK)
		disk_on(r);
	set_init(&s, r);
	for (k = 0; k < 64; k++)
		set_alloc(&s, 1 + (uint64_t)(k % 3), 4 * (uint64_t)(k % 5));
	for (k = 1; k < 64; k++) /* carved one after another */
		ck_assert_uint_eq(s.p[k], s.p[k - 1] + s.phys[k - 1]);
	total = set_phys(&s);
	counts(64, 64, 1, total);
	set_info(&s, CMS_STATE_ACTIVE);
	for (cycle = 0; cycle < 3; cycle++) {
		set_fill(&s, 1000 * (uint32_t)cycle);
		ck_ok(cms_region_pause(r, NULL, &pr));
		ck_assert_uint_eq(pr.bytes_released, total);
		ck_assert_uint_eq(pr.allocations, 64);
		counts(0, 0, 1, 0);
		set_info(&s, CMS_STATE_PAUSED);
		set_lookup(&s, ctx, CMS_STATE_PAUSED);
		ck_assert(!mapped_rw(s.p[0], 0));
		ck_ok(cms_region_resume(r, NULL, &rr));
		ck_assert_uint_eq(rr.bytes_backed, total);
		ck_assert_uint_eq(rr.allocations, 64);
		counts(1, 1, 1, total); /* one handle, one mapping */
		set_info(&s, CMS_STATE_ACTIVE);
		set_lookup(&s, ctx, CMS_STATE_ACTIVE);
		set_check(&s);
		ck_assert_uint_eq(info(r).epoch, (uint64_t)cycle + 1);
	}
	ck_ok(cms_region_destroy(r));
	everything_freed();
	ck_ok(cms_context_destroy(ctx));
	disk_off();
}
END_TEST

/* ---- 2. a free inside a live run: retained until the pause ---------------- */

START_TEST(free_retains_until_pause)
{
	uint32_t policy = _i ? CMS_POLICY_DISK : CMS_POLICY_HOST;
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, policy);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	struct set s;
	uint64_t total, freed, lo, hi;
	size_t k, q, q2;

	if (policy == CMS_POLICY_DISK)
		disk_on(r);
	set_init(&s, r);
	for (k = 0; k < 8; k++)
		set_alloc(&s, 2, 12);
	total = set_phys(&s);
	lo = s.p[0];
	hi = s.p[7] + s.phys[7];
	set_fill(&s, 1);
	pause_r(r, total);
	resume_r(r, total);
	counts(1, 1, 1, total);
	set_check(&s);

	/* Free the 4th: its bytes stay in the run's handle. */
	freed = s.phys[3];
	set_free(&s, 3, ctx);
	counts(1, 1, 1, total); /* nothing goes back to the driver */
	set_info(&s, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(info(r).physical_bytes, total - freed);
	ck_assert_uint_eq(retained(r), freed);
	ck_status(cms_pointer_info_get(ctx, s.p[3], &pi), CMS_ERR_NOT_FOUND);
	ck_status(cms_pointer_info_get(ctx, s.p[3] + s.phys[3] - 1, &pi), CMS_ERR_NOT_FOUND);
	ck_status(cms_free(ctx, s.p[3]), CMS_ERR_NOT_FOUND);
	set_check(&s); /* the neighbours did not move or change */

	/* A new allocation of that size does not get the retained addresses. */
	q = set_alloc(&s, 2, 12);
	ck_assert(s.p[q] < lo || s.p[q] >= hi);
	ck_assert_uint_eq(s.p[q], hi); /* first fit: right after the run */
	counts(2, 2, 1, total + s.phys[q]);
	set_fill(&s, 100);

	/* The pause releases the run, retained bytes included. */
	pause_r(r, total + s.phys[q]);
	counts(0, 0, 1, 0);
	ck_assert_uint_eq(retained(r), 0);
	/* The gap splits the region: [0..2] and [4..7, q] (adjacent to 7). */
	resume_r(r, set_phys(&s));
	counts(2, 2, 1, set_phys(&s));
	set_check(&s);
	set_lookup(&s, ctx, CMS_STATE_ACTIVE);

	/* Now the gap's addresses are free again: first fit hands them out. */
	q2 = set_alloc(&s, 2, 12);
	ck_assert_uint_eq(s.p[q2], s.p[3]);
	counts(3, 3, 1, set_phys(&s));
	set_fill(&s, 200);
	pause_r(r, set_phys(&s));
	resume_r(r, set_phys(&s));
	counts(1, 1, 1, set_phys(&s)); /* contiguous again: one run */
	set_check(&s);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
	disk_off();
}
END_TEST

/* ---- 3. freeing every member: memory comes back with the last ------------- */

START_TEST(free_members_one_by_one)
{
	static const int orders[4][6] = {
		{ 0, 1, 2, 3, 4, 5 }, /* lowest first */
		{ 5, 4, 3, 2, 1, 0 }, /* highest (the run's last) first */
		{ 2, 3, 1, 4, 0, 5 }, /* middle out */
		{ 5, 0, 3, 1, 4, 2 },
	};
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	struct set s;
	uint64_t total;
	int k;

	set_init(&s, r);
	for (k = 0; k < 6; k++)
		set_alloc(&s, 1 + (uint64_t)(k & 1), 8);
	total = set_phys(&s);
	set_fill(&s, 7);
	pause_r(r, total);
	resume_r(r, total);
	counts(1, 1, 1, total);
	for (k = 0; k < 5; k++) {
		set_free(&s, (size_t)orders[_i][k], ctx);
		counts(1, 1, 1, total);
		ck_assert_uint_eq(retained(r), total - set_phys(&s));
		set_info(&s, CMS_STATE_ACTIVE);
		set_check(&s);
	}
	set_free(&s, (size_t)orders[_i][5], ctx);
	counts(0, 0, 0, 0); /* run released, arena freed */
	set_info(&s, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(retained(r), 0);
	ck_assert_uint_eq(t_counters().host_buffers, 0);
	/* The region still works: a new arena. */
	k = (int)set_alloc(&s, 1, 0);
	counts(1, 1, 1, s.phys[k]);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 4. the default (no CMS_REGION_COALESCE): one handle per allocation ---------------- */

START_TEST(no_coalesce_flag)
{
	cms_context *ctx = t_ctx();
	cms_region *r;
	struct set s;
	uint64_t used;
	int k;

	t_region_flags = 0;
	r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	t_region_flags = CMS_REGION_COALESCE;
	ck_assert_uint_eq(info(r).flags, 0);
	set_init(&s, r);
	for (k = 0; k < 16; k++)
		set_alloc(&s, 1 + (uint64_t)(k % 2), 0);
	set_fill(&s, 3);
	used = set_phys(&s);
	pause_r(r, used);
	resume_r(r, used);
	counts(16, 16, 1, used);
	set_check(&s);
	for (k = 0; k < 16; k += 3) { /* each free gives its memory back at once */
		used -= s.phys[k];
		set_free(&s, (size_t)k, ctx);
		counts(16 - (uint64_t)(k / 3 + 1), 16 - (uint64_t)(k / 3 + 1), 1, used);
	}
	set_check(&s);
	pause_r(r, used);
	resume_r(r, used);
	counts(10, 10, 1, used);
	set_check(&s);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 4b. backup copies cover allocations adjacent on both sides ----------- */

/* Pauses (or resumes) r with the nth call of fn failing: whether it worked. */
static bool cycle_with_fault(cms_region *r, bool pause, const char *fn, uint64_t nth)
{
	cms_status st;

	ck_assert_int_eq(t_sim()->fail_call(fn, nth, CUDA_ERROR_UNKNOWN), 0);
	st = pause ? cms_region_pause(r, NULL, NULL) : cms_region_resume(r, NULL, NULL);
	t_sim()->clear_faults();
	ck_assert(st == CMS_OK || st == CMS_ERR_DRIVER);
	return st == CMS_OK;
}

START_TEST(copies_merge)
{
	cms_context *ctx = t_ctx();
	cms_region *r;
	struct set s;
	int k;

	t_region_flags = _i ? CMS_REGION_COALESCE : 0;
	r = t_region(ctx, "m", 0, CMS_POLICY_HOST);
	t_region_flags = CMS_REGION_COALESCE;
	set_init(&s, r);
	/* 0-6 adjacent (6 ends 4 KiB short of 7's start), 7-9 adjacent: two copies each way. */
	for (k = 0; k < 10; k++)
		set_alloc(&s, 1, k == 6 ? 4096 : 0);
	set_fill(&s, 11);
	ck_assert(!cycle_with_fault(r, true, "cuMemcpyDtoHAsync", 2));
	ck_assert_uint_eq(info(r).state, CMS_STATE_ACTIVE);
	set_check(&s);
	ck_assert(cycle_with_fault(r, true, "cuMemcpyDtoHAsync", 3));
	ck_assert(!cycle_with_fault(r, false, "cuMemcpyHtoDAsync", 2));
	ck_assert_uint_eq(info(r).state, CMS_STATE_PAUSED);
	ck_assert(cycle_with_fault(r, false, "cuMemcpyHtoDAsync", 3));
	set_check(&s);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* Two host buffers that happen to lie end to end (mmap places a new mapping below the last
 * one) with their allocations adjacent on the device: a copy must not span both
 * registrations (the driver, and the simulation, refuse it). */
START_TEST(copies_never_cross_buffers)
{
	cms_context *ctx = t_ctx();
	cms_region *r;
	struct set s;
	int k;

	t_region_flags = 0;
	r = t_region(ctx, "x", 0, CMS_POLICY_HOST);
	t_region_flags = CMS_REGION_COALESCE;
	set_init(&s, r);
	for (k = 0; k < 4; k++)
		set_alloc(&s, 1, 0);
	set_free(&s, 0, ctx);
	set_free(&s, 1, ctx);
	set_fill(&s, 5);
	ck_ok(cms_region_pause(r, NULL, NULL)); /* 2, 3: buffer X */
	ck_ok(cms_region_resume(r, NULL, NULL));
	set_alloc(&s, 1, 0); /* first fit: slots 0 and 1 again, below 2 */
	set_alloc(&s, 1, 0);
	set_fill(&s, 6);
	for (k = 0; k < 3; k++) {
		ck_ok(cms_region_pause(r, NULL, NULL)); /* 4, 5: buffer Y, mapped below X */
		ck_ok(cms_region_resume(r, NULL, NULL));
		set_check(&s);
	}
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 5. two regions allocated in turns: runs never mix -------------------- */

START_TEST(regions_never_mix)
{
	cms_context *ctx = t_ctx();
	cms_region *ra = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region *rb = t_region(ctx, "b", 0, CMS_POLICY_HOST);
	struct set a, b;
	uint64_t pa, pb;
	uint32_t word;
	int k;

	set_init(&a, ra);
	set_init(&b, rb);
	for (k = 0; k < 12; k++) {
		set_alloc(&a, 1, 4);
		set_alloc(&b, 2, 4);
	}
	for (k = 1; k < 12; k++) { /* each region's own arena: adjacent within it */
		ck_assert_uint_eq(a.p[k], a.p[k - 1] + a.phys[k - 1]);
		ck_assert_uint_eq(b.p[k], b.p[k - 1] + b.phys[k - 1]);
	}
	pa = set_phys(&a);
	pb = set_phys(&b);
	counts(24, 24, 2, pa + pb);
	set_fill(&a, 10);
	set_fill(&b, 20);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	counts(0, 0, 2, 0);
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	counts(2, 2, 2, pa + pb); /* one run per region */
	set_check(&a);
	set_check(&b);
	/* Pausing one leaves the other mapped with its content. */
	pause_r(ra, pa);
	counts(1, 1, 2, pb);
	ck_assert(!mapped_rw(a.p[5], 0));
	ck_assert_int_eq(t_read(0, &word, a.p[5], sizeof(word)), CUDA_ERROR_INVALID_VALUE);
	set_check(&b);
	set_lookup(&b, ctx, CMS_STATE_ACTIVE);
	/* Free the whole of b member by member while a is paused. */
	for (k = 0; k < 11; k++) {
		set_free(&b, (size_t)k, ctx);
		counts(1, 1, 2, pb);
		ck_assert_uint_eq(retained(rb), pb - set_phys(&b));
		ck_assert_uint_eq(retained(ra), 0);
	}
	set_free(&b, 11, ctx);
	counts(0, 0, 1, 0); /* b's arena is gone, a's stays */
	ck_assert_uint_eq(retained(rb), 0);
	resume_r(ra, pa);
	counts(1, 1, 1, pa);
	set_check(&a);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 6. mixed sizes; an allocation larger than an arena ------------------- */

START_TEST(mixed_sizes)
{
	static const uint64_t granules[] = { 1, 3, 17 };
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	struct set s;
	int k, cycle;

	set_init(&s, r);
	for (k = 0; k < 15; k++)
		set_alloc(&s, granules[k % 3], (uint64_t)(k * 4 % 4096));
	for (cycle = 0; cycle < 3; cycle++) {
		set_fill(&s, 50 + 100 * (uint32_t)cycle);
		pause_r(r, set_phys(&s));
		resume_r(r, set_phys(&s));
		counts(1, 1, 1, set_phys(&s));
		set_check(&s);
		set_lookup(&s, ctx, CMS_STATE_ACTIVE);
	}
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* Large allocations: an arena of its own beyond CMS_ARENA_BYTES, two halves of one arena
 * coalesced into one 2 GiB handle. Fresh memory unfilled (nothing touched but a few pages). */
START_TEST(large_allocations)
{
	cms_context *ctx;
	cms_region *r;
	uint64_t g, big, h1, h2, h3, s1;

	ck_assert_int_eq(setenv("CMS_SIM_POISON", "0", 1), 0); /* before the driver loads */
	ctx = t_ctx();
	r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	g = info(r).granularity;
	ck_ok(cms_alloc(r, ARENA + g, &big));
	counts(1, 1, 1, ARENA + g); /* a reservation of its own size */
	ck_ok(cms_alloc(r, 4096, &s1));
	counts(2, 2, 2, ARENA + 2 * g); /* the big one's arena is full: a new one */
	ck_assert(s1 < big || s1 >= big + ARENA + g);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	counts(2, 2, 2, ARENA + 2 * g); /* different arenas never share a handle */
	ck_assert_int_eq(t_fill(0, big + ARENA + g - 4096, 4096, 1), 0);
	ck_assert_int_eq(t_check(0, big + ARENA + g - 4096, 4096, 1), -1);
	ck_ok(cms_free(ctx, big));
	counts(1, 1, 1, g);
	ck_ok(cms_free(ctx, s1));
	counts(0, 0, 0, 0);
	/* Two halves of an arena, then a third that needs a new arena. */
	ck_ok(cms_alloc(r, GiB, &h1));
	ck_ok(cms_alloc(r, GiB, &h2));
	ck_assert_uint_eq(h2, h1 + GiB);
	counts(2, 2, 1, 2 * GiB);
	ck_ok(cms_alloc(r, g, &h3));
	counts(3, 3, 2, 2 * GiB + g);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	counts(2, 2, 2, 2 * GiB + g); /* h1 + h2 in one handle of 2 GiB */
	ck_assert_int_eq(t_fill(0, h1 + GiB - 4096, 8192, 9), 0); /* across the halves */
	ck_assert_int_eq(t_check(0, h1 + GiB - 4096, 8192, 9), -1);
	ck_ok(cms_free(ctx, h1));
	counts(2, 2, 2, 2 * GiB + g); /* retained in the run */
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 7. peer access on a coalesced region --------------------------------- */

START_TEST(peer_access_coalesced)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	struct set s;
	size_t k;
	int cycle;

	ck_ok(cms_region_peer_devices_set(r, 0x2));
	set_init(&s, r);
	for (k = 0; k < 10; k++)
		set_alloc(&s, 1 + k % 2, 4);
	for (k = 0; k < s.n; k++)
		ck_assert(mapped_rw(s.p[k], 1));
	ck_assert_int_eq(t_fill(1, s.p[4], s.size[4] & ~3ull, 44), 0); /* the peer writes */
	s.seed[4] = 44;
	for (k = 0; k < s.n; k++)
		if (k != 4) {
			s.seed[k] = 300 + (uint32_t)k;
			ck_assert_int_eq(t_fill(0, s.p[k], s.size[k] & ~3ull, s.seed[k]), 0);
		}
	for (cycle = 0; cycle < 3; cycle++) {
		pause_r(r, set_phys(&s));
		ck_assert_int_eq(get_access_fn()(s.p[0], 1), -1);
		resume_r(r, set_phys(&s));
		counts(1, 1, 1, set_phys(&s));
		for (k = 0; k < s.n; k++) {
			ck_assert(mapped_rw(s.p[k], 0));
			ck_assert(mapped_rw(s.p[k], 1));
			ck_assert_int_eq(t_check(1, s.p[k], s.size[k] & ~3ull, s.seed[k]), -1);
		}
	}
	/* Changed on the live run: every member, the retained one too. */
	set_free(&s, 3, ctx);
	ck_ok(cms_region_peer_devices_set(r, 0));
	for (k = 0; k < s.n; k++) {
		ck_assert_int_eq(get_access_fn()(s.p[k], 1), 0);
		ck_assert(mapped_rw(s.p[k], 0));
	}
	ck_assert_int_eq(get_access_fn()(s.p[3], 1), 0);
	ck_ok(cms_region_peer_devices_set(r, 0x2));
	for (k = 0; k < s.n; k++)
		ck_assert(mapped_rw(s.p[k], 1));
	set_check(&s);
	/* A failed cuMemSetAccess on a second run rolls every run back. */
	pause_r(r, set_phys(&s) + s.phys[3]);
	resume_r(r, set_phys(&s));
	counts(2, 2, 1, set_phys(&s));
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 2, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_region_peer_devices_set(r, 0), CMS_ERR_DRIVER);
	t_sim()->clear_faults();
	ck_assert_uint_eq(info(r).peer_device_mask, 0x2);
	for (k = 0; k < s.n; k++)
		if (s.live[k])
			ck_assert(mapped_rw(s.p[k], 1));
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 8. cms_swap between two coalesced tags ------------------------------- */

START_TEST(swap_coalesced)
{
	cms_context *ctx = t_ctx();
	cms_region *rx = t_region(ctx, "x", 0, CMS_POLICY_HOST);
	cms_region *ry = t_region(ctx, "y", 0, CMS_POLICY_HOST);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	struct set x, y, *on, *off;
	uint64_t retained = 0;
	int k, round;

	set_init(&x, rx);
	set_init(&y, ry);
	for (k = 0; k < 16; k++) {
		set_alloc(&x, 1 + (uint64_t)(k % 2), 4);
		set_alloc(&y, 2, 8);
	}
	set_fill(&x, 1);
	set_fill(&y, 2);
	ck_ok(cms_pause(ctx, "y", NULL, NULL));
	counts(16, 16, 2, set_phys(&x));
	on = &x;
	off = &y;
	if (_i) /* capacity: one tag and a granule */
		ck_assert_int_eq(t_sim()->set_capacity(0, set_phys(&y) + 64 * KiB), 0);
	for (round = 0; round < 6; round++) {
		struct set *t;

		ck_ok(cms_swap(ctx, on == &x ? "x" : "y", on == &x ? "y" : "x", NULL, NULL, &pr,
			       &rr));
		ck_assert_uint_eq(pr.bytes_released, set_phys(on) + retained);
		ck_assert_uint_eq(rr.bytes_backed, set_phys(off));
		ck_assert_uint_eq(rr.bytes_restored, set_logical(off));
		t = on;
		on = off;
		off = t;
		retained = 0;
		/* Round 0: the first swap coalesces y; a gap splits a run. */
		counts(set_runs(on), set_runs(on), 2, set_phys(on));
		set_check(on);
		set_info(on, CMS_STATE_ACTIVE);
		set_info(off, CMS_STATE_PAUSED);
		ck_assert_uint_eq(info(off->r).retained_bytes, 0);
		if (round == 2) { /* a retained member on the pause side */
			set_free(on, 5, ctx);
			retained = on->phys[5];
			counts(1, 1, 2, set_phys(on) + retained);
			ck_assert_uint_eq(info(on->r).retained_bytes, retained);
		}
	}
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 9. async resume of a coalesced region -------------------------------- */

START_TEST(async_resume_coalesced)
{
	struct cms_driver *d = t_drv();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	CUcontext c, popped;
	CUdevice cu;
	CUstream st;
	struct set s;
	uint64_t retained = 0;
	int k, cycle;

	set_init(&s, r);
	for (k = 0; k < 32; k++)
		set_alloc(&s, 1 + (uint64_t)(k % 4), 4 * (uint64_t)k);
	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	ck_assert_int_eq(d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
	ro.flags = CMS_RESUME_ASYNC;
	ro.stream = (uint64_t)(uintptr_t)st;
	for (cycle = 0; cycle < 3; cycle++) {
		set_fill(&s, 70 + (uint32_t)cycle);
		pause_r(r, set_phys(&s) + retained);
		retained = 0;
		ck_ok(cms_region_resume(r, &ro, &rr));
		ck_assert_uint_eq(rr.bytes_restored, set_logical(&s));
		ck_assert_uint_eq(rr.bytes_backed, set_phys(&s));
		ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
		ck_assert_int_eq(d->cuStreamSynchronize(st), 0);
		ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
		counts(set_runs(&s), set_runs(&s), 1, set_phys(&s)); /* cycle 2: two runs */
		set_check(&s);
		ck_assert_uint_eq(info(r).restore_pending, 0);
		/* A free right after an async resume retains (after waiting for the copies). */
		if (cycle == 1) {
			uint64_t before = set_phys(&s);

			pause_r(r, before);
			ck_ok(cms_region_resume(r, &ro, NULL));
			set_free(&s, 10, ctx);
			retained = s.phys[10];
			counts(1, 1, 1, before);
			ck_assert_uint_eq(info(r).retained_bytes, retained);
			set_check(&s);
		}
	}
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	ck_assert_int_eq(d->cuStreamDestroy(st), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRelease(cu), 0);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- 10. faults ------------------------------------------------------------ */

/*
 * A HOST region with two runs and a retained member: 8 allocations, the 4th
 * freed while paused (a gap: runs [0..2] and [4..7]), then the 6th freed
 * while active (retained in the second run). paused: left paused.
 */
struct fx {
	cms_context *ctx;
	cms_region *r;
	struct set s;
	uint64_t retained;
};

static void fx_make(struct fx *f, bool paused)
{
	int k;

	memset(f, 0, sizeof(*f));
	f->ctx = t_ctx();
	f->r = t_region(f->ctx, "w", 0, CMS_POLICY_HOST);
	set_init(&f->s, f->r);
	for (k = 0; k < 8; k++)
		set_alloc(&f->s, 1 + (uint64_t)(k % 2), 4);
	ck_ok(cms_region_pause(f->r, NULL, NULL));
	set_free(&f->s, 3, f->ctx);
	ck_ok(cms_region_resume(f->r, NULL, NULL));
	set_free(&f->s, 5, f->ctx);
	f->retained = f->s.phys[5];
	set_fill(&f->s, 500);
	counts(2, 2, 1, set_phys(&f->s) + f->retained);
	ck_assert_uint_eq(retained(f->r), f->retained);
	if (paused) {
		ck_ok(cms_region_pause(f->r, NULL, NULL));
		f->retained = 0;
	}
}

START_TEST(resume_create_fails)
{
	struct fx f;
	cms_region_info i;

	fx_make(&f, true);
	ck_assert_int_eq(
		t_sim()->fail_call("cuMemCreate", (uint64_t)_i + 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_region_resume(f.r, NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	counts(0, 0, 1, 0);
	i = info(f.r);
	ck_assert_uint_eq(i.state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(i.backup_bytes, set_logical(&f.s));
	set_lookup(&f.s, f.ctx, CMS_STATE_PAUSED);
	ck_ok(cms_region_resume(f.r, NULL, NULL));
	counts(3, 3, 1, set_phys(&f.s)); /* [0..2], [4], [6..7] */
	set_check(&f.s);
	ck_ok(cms_context_destroy(f.ctx));
	everything_freed();
}
END_TEST

START_TEST(pause_release_fails)
{
	struct fx f;
	uint64_t used;

	fx_make(&f, false);
	used = set_phys(&f.s) + f.retained;
	ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", (uint64_t)_i + 1, CUDA_ERROR_UNKNOWN),
			 0);
	ck_status(cms_region_pause(f.r, NULL, NULL), CMS_ERR_DRIVER);
	counts(2, 2, 1, used); /* the released run is back, retained bytes included */
	ck_assert_uint_eq(retained(f.r), f.retained);
	set_info(&f.s, CMS_STATE_ACTIVE);
	set_check(&f.s);
	pause_r(f.r, used);
	resume_r(f.r, set_phys(&f.s));
	counts(3, 3, 1, set_phys(&f.s)); /* [0..2], [4], [6..7] */
	set_check(&f.s);
	ck_ok(cms_context_destroy(f.ctx));
	everything_freed();
}
END_TEST

/* Sweeps every driver call of a pause (0), resume (1) of the fixture. */
START_TEST(fault_sweep)
{
	const struct t_sim *sim = t_sim();
	bool resume = _i == 1;
	cmssim_counters c0, c1;
	uint64_t calls, k;
	unsigned points = 0, absorbed = 0;
	struct fx f;
	cms_status st;

	fx_make(&f, resume);
	calls = sim->call_count();
	ck_ok(resume ? cms_region_resume(f.r, NULL, NULL) : cms_region_pause(f.r, NULL, NULL));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	for (k = 1; k <= calls + 1; k++) {
		fx_make(&f, resume);
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, k, CUDA_ERROR_UNKNOWN), 0);
		st = resume ? cms_region_resume(f.r, NULL, NULL) :
			      cms_region_pause(f.r, NULL, NULL);
		if (k == calls + 1) {
			ck_assert_int_eq(sim->armed_faults(), 1);
			ck_ok(st);
			sim->clear_faults();
			ck_ok(cms_context_destroy(f.ctx));
			break;
		}
		ck_assert_int_eq(sim->armed_faults(), 0);
		points++;
		if (st == CMS_OK) {
			absorbed++;
			set_info(&f.s, resume ? CMS_STATE_ACTIVE : CMS_STATE_PAUSED);
		} else {
			ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED && st != CMS_ERR_INTERNAL,
				      "call %llu: %s", (unsigned long long)k, cms_last_error());
			c1 = t_counters();
			ck_assert_msg(
				c1.handles == c0.handles && c1.mappings == c0.mappings &&
					c1.reservations == c0.reservations &&
					c1.device_used_bytes[0] == c0.device_used_bytes[0] &&
					c1.host_buffers == c0.host_buffers,
				"call %llu (%s): handles %llu/%llu mappings %llu/%llu used "
				"%llu/%llu",
				(unsigned long long)k, cms_last_error(),
				(unsigned long long)c1.handles, (unsigned long long)c0.handles,
				(unsigned long long)c1.mappings, (unsigned long long)c0.mappings,
				(unsigned long long)c1.device_used_bytes[0],
				(unsigned long long)c0.device_used_bytes[0]);
			set_info(&f.s, resume ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE);
			if (resume)
				ck_assert_uint_eq(info(f.r).backup_bytes, set_logical(&f.s));
			else
				set_check(&f.s);
			ck_assert_uint_eq(retained(f.r), f.retained); /* still in its run */
			ck_ok(resume ? cms_region_resume(f.r, NULL, NULL) :
				       cms_region_pause(f.r, NULL, NULL));
		}
		if (!resume)
			ck_ok(cms_region_resume(f.r, NULL, NULL));
		counts(3, 3, 1, set_phys(&f.s)); /* [0..2], [4], [6..7] */
		set_check(&f.s);
		ck_ok(cms_context_destroy(f.ctx));
		everything_freed();
	}
	printf("runs fault sweep (%s): %u points, %u absorbed\n", resume ? "resume" : "pause",
	       points, absorbed);
	ck_assert_uint_gt(points, 8);
}
END_TEST

/* Every driver call of a swap between two fixtures' tags. */
START_TEST(swap_fault_sweep)
{
	const struct t_sim *sim = t_sim();
	cmssim_counters c0, c1;
	uint64_t calls = 0, k;
	unsigned points = 0;
	struct set x, y;
	cms_context *ctx;
	cms_status st;
	int j;

	for (k = 0;; k++) {
		ctx = t_ctx();
		set_init(&x, t_region(ctx, "x", 0, CMS_POLICY_HOST));
		set_init(&y, t_region(ctx, "y", 0, CMS_POLICY_HOST));
		for (j = 0; j < 6; j++) {
			set_alloc(&x, 1 + (uint64_t)(j % 2), 4);
			set_alloc(&y, 2, 4);
		}
		ck_ok(cms_pause(ctx, NULL, NULL, NULL));
		set_free(&x, 2, ctx); /* gaps: two runs each */
		set_free(&y, 3, ctx);
		ck_ok(cms_resume(ctx, "x", NULL, NULL));
		set_free(&x, 4, ctx); /* retained */
		set_fill(&x, 11);
		c0 = t_counters();
		if (k == 0) {
			calls = sim->call_count();
			ck_ok(cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL));
			calls = sim->call_count() - calls;
			ck_ok(cms_context_destroy(ctx));
			continue;
		}
		ck_assert_int_eq(sim->fail_call(NULL, k, CUDA_ERROR_UNKNOWN), 0);
		st = cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL);
		if (k == calls + 1) {
			ck_assert_int_eq(sim->armed_faults(), 1);
			ck_ok(st);
			sim->clear_faults();
			ck_ok(cms_context_destroy(ctx));
			break;
		}
		if (st) {
			points++;
			ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED && st != CMS_ERR_INTERNAL,
				      "call %llu: %s", (unsigned long long)k, cms_last_error());
			c1 = t_counters();
			ck_assert_msg(c1.handles == c0.handles && c1.mappings == c0.mappings &&
					      c1.device_used_bytes[0] == c0.device_used_bytes[0],
				      "call %llu (%s): handles %llu/%llu used %llu/%llu",
				      (unsigned long long)k, cms_last_error(),
				      (unsigned long long)c1.handles,
				      (unsigned long long)c0.handles,
				      (unsigned long long)c1.device_used_bytes[0],
				      (unsigned long long)c0.device_used_bytes[0]);
			set_info(&x, CMS_STATE_ACTIVE);
			set_info(&y, CMS_STATE_PAUSED);
			set_check(&x);
			ck_ok(cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL));
		}
		/* y: [0..2], [4..5] */
		counts(2, 2, 2, set_phys(&y));
		ck_ok(cms_swap(ctx, "y", "x", NULL, NULL, NULL, NULL));
		counts(3, 3, 2, set_phys(&x)); /* x: [0..1], [3], [5] */
		set_check(&x);
		ck_ok(cms_context_destroy(ctx));
		everything_freed();
	}
	printf("runs swap fault sweep: %u failing points of %llu calls\n", points,
	       (unsigned long long)calls);
	ck_assert_uint_gt(points, 8);
}
END_TEST

/* ---- attacks: orders of operations ----------------------------------------- */

/* A pause that fails after a member was retired keeps the retained bytes in the run. */
START_TEST(pause_failure_after_retire)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	struct set s;
	uint64_t used;
	int k;

	set_init(&s, r);
	for (k = 0; k < 6; k++)
		set_alloc(&s, 1, 0);
	set_fill(&s, 5);
	pause_r(r, set_phys(&s));
	resume_r(r, set_phys(&s));
	used = set_phys(&s);
	set_free(&s, 2, ctx);
	set_free(&s, 0, ctx);
	ck_assert_int_eq(t_sim()->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_DRIVER);
	counts(1, 1, 1, used);
	ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_DRIVER);
	counts(1, 1, 1, used); /* re-created whole: retained bytes too */
	ck_assert_uint_eq(retained(r), s.phys[0] + s.phys[2]);
	set_check(&s);
	/* The retained addresses are still not handed out. */
	k = (int)set_alloc(&s, 1, 0);
	ck_assert_uint_eq(s.p[k], s.p[5] + s.phys[5]);
	set_free(&s, (size_t)k, ctx);
	/* Freeing the rest still works, the last frees everything. */
	set_free(&s, 1, ctx);
	set_free(&s, 5, ctx);
	set_free(&s, 3, ctx);
	counts(1, 1, 1, used);
	set_free(&s, 4, ctx);
	counts(0, 0, 0, 0);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* Destroying a region / context with live runs, retained bytes and paused regions. */
START_TEST(destroy_with_runs)
{
	cms_context *ctx = t_ctx();
	cms_region *a = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "b", 0, CMS_POLICY_ZERO);
	cms_region *c = t_region(ctx, "c", 1, CMS_POLICY_HOST);
	struct set sa, sb, sc;
	int k;

	set_init(&sa, a);
	set_init(&sb, b);
	set_init(&sc, c);
	for (k = 0; k < 8; k++) {
		set_alloc(&sa, 1, 0);
		set_alloc(&sb, 2, 0);
		set_alloc(&sc, 1, 0);
	}
	set_fill(&sa, 1);
	set_fill(&sc, 3);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	counts(3, 3, 3, set_phys(&sa) + set_phys(&sb));
	set_free(&sa, 4, ctx);
	set_free(&sb, 1, ctx);
	set_free(&sc, 7, ctx);
	ck_assert_uint_eq(retained(c), sc.phys[7]);
	ck_ok(cms_region_pause(c, NULL, NULL));
	ck_assert_uint_eq(retained(c), 0);
	ck_assert_uint_eq(retained(b), sb.phys[1]);
	if (_i == 0) { /* region by region */
		ck_ok(cms_region_destroy(a));
		counts(1, 1, 2, set_phys(&sb) + sb.phys[1]);
		ck_ok(cms_region_destroy(b));
		ck_ok(cms_region_destroy(c));
		everything_freed();
	}
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* Freeing a run's last member while another region is paused, then everything in one. */
START_TEST(last_member_other_region_paused)
{
	cms_context *ctx = t_ctx();
	cms_region *a = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "b", 0, CMS_POLICY_HOST);
	struct set sa, sb;
	int k;

	set_init(&sa, a);
	set_init(&sb, b);
	for (k = 0; k < 4; k++) {
		set_alloc(&sa, 1, 0);
		set_alloc(&sb, 1, 0);
	}
	set_fill(&sa, 1);
	set_fill(&sb, 2);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	pause_r(b, set_phys(&sb));
	for (k = 0; k < 4; k++)
		set_free(&sa, (size_t)k, ctx);
	counts(0, 0, 1, 0);
	resume_r(b, set_phys(&sb));
	set_check(&sb);
	/* Free b's members while paused: addresses only. */
	pause_r(b, set_phys(&sb));
	set_free(&sb, 1, ctx);
	set_free(&sb, 2, ctx);
	resume_r(b, set_phys(&sb));
	counts(2, 2, 1, set_phys(&sb)); /* [0], [3] */
	set_check(&sb);
	set_free(&sb, 0, ctx);
	set_free(&sb, 3, ctx);
	counts(0, 0, 0, 0);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/*
 * Frees that fail on the way: a retired member (its host buffer's cuMemHostUnregister), the
 * last member of a run with retained bytes (its host buffer, cuMemRelease of the run, then
 * cuMemUnmap, then cuMemAddressFree of the arena). A failed free keeps the allocation, valid
 * and findable, with the same memory and content (after a failed cuMemUnmap the run's handle
 * is retained back from the mapping); a retry completes it. A failed cuMemAddressFree is
 * absorbed: the reservation is a cleanup kept, not tried again at once (two faults armed: a
 * retry at once would fail too), and freed at the next pause.
 */
START_TEST(failing_frees)
{
	static const char *fns[] = { "cuMemHostUnregister", "cuMemUnmap", "cuMemRelease",
				     "cuMemAddressFree" };
	const char *fn = fns[_i];
	int twice = !strcmp(fn, "cuMemAddressFree");
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	cmssim_counters c0, c1;
	struct set s;
	cms_status st;
	uint64_t used;
	int k;

	set_init(&s, r);
	for (k = 0; k < 4; k++)
		set_alloc(&s, 1 + (uint64_t)(k & 1), 4);
	set_fill(&s, 9);
	pause_r(r, set_phys(&s));
	resume_r(r, set_phys(&s));
	used = set_phys(&s);
	for (k = 0; k < 4; k++) {
		c0 = t_counters();
		ck_assert_int_eq(t_sim()->fail_call(fn, 1, CUDA_ERROR_UNKNOWN), 0);
		if (twice) /* a retry at once would fail too */
			ck_assert_int_eq(t_sim()->fail_call(fn, 2, CUDA_ERROR_UNKNOWN), 0);
		st = cms_free(ctx, s.p[k]);
		if (t_sim()->armed_faults() == 1 + twice) { /* the call did not come */
			t_sim()->clear_faults();
			ck_ok(st);
			s.live[k] = false;
		} else if (st == CMS_OK) { /* absorbed: an address free kept for later */
			ck_assert_str_eq(fn, "cuMemAddressFree");
			/* tried once (before: at once again, so the kept path was never taken) */
			ck_assert_int_eq(t_sim()->armed_faults(), 1);
			t_sim()->clear_faults();
			ck_assert_uint_eq(t_counters().reservations, 1);
			s.live[k] = false;
			pause_r(r, 0); /* the kept cleanup runs first */
			ck_assert_uint_eq(t_counters().reservations, 0);
			resume_r(r, 0);
		} else {
			ck_ok(cms_pointer_info_get(ctx, s.p[k], &pi));
			ck_assert_uint_eq(pi.base, s.p[k]);
			c1 = t_counters();
			/* the same handles: one released before a failed cuMemUnmap is retained
			 * back */
			ck_assert_uint_eq(c1.handles, c0.handles);
			ck_assert_uint_eq(c1.mappings, c0.mappings);
			ck_assert_uint_eq(c1.device_used_bytes[0], c0.device_used_bytes[0]);
			ck_assert(mapped_rw(s.p[k], 0));
			set_check(&s); /* the same memory, content too */
			ck_assert_uint_eq(c1.reservations, 1);
			set_info(&s, CMS_STATE_ACTIVE);
			set_free(&s, (size_t)k, ctx);
		}
		if (k < 3) {
			counts(1, 1, 1, used);
			set_check(&s);
		}
	}
	counts(0, 0, 0, 0);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* Threads freeing and allocating in a coalesced region while another pauses and resumes it. */
#define CT 4	/* threads */
#define CPER 16 /* allocations each */

struct cthread {
	cms_context *ctx;
	cms_region *r;
	uint64_t p[2 * CPER], size[2 * CPER];
	int n;
	int paused_refusals;
};

static void *churn(void *arg)
{
	struct cthread *t = arg;
	int i, round;

	for (round = 0; round < 3; round++) {
		for (i = round % 2; i < t->n; i += 2) { /* every other one, alternating */
			if (!t->p[i])
				continue;
			if (cms_free(t->ctx, t->p[i]) != CMS_OK)
				return "free failed";
			t->p[i] = 0;
		}
		for (i = 0; i < t->n; i++) {
			cms_status st;

			if (t->p[i])
				continue;
			st = cms_alloc(t->r, t->size[i], &t->p[i]);
			while (st == CMS_ERR_PAUSED && round == 2) { /* keep some at the end */
				sched_yield();
				st = cms_alloc(t->r, t->size[i], &t->p[i]);
			}
			if (st == CMS_ERR_PAUSED) {
				t->p[i] = 0;
				t->paused_refusals++;
				continue;
			}
			if (st != CMS_OK)
				return "alloc failed";
		}
	}
	return NULL;
}

START_TEST(concurrent_free_and_cycles)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_region *o = t_region(ctx, "o", 0, CMS_POLICY_HOST);
	struct cthread th[CT];
	pthread_t tid[CT];
	struct set s, so;
	uint64_t g = info(r).granularity;
	int t, i, cycle;
	void *ret;

	set_init(&so, o);
	for (i = 0; i < 8; i++)
		set_alloc(&so, 1, 0);
	set_fill(&so, 77);
	memset(th, 0, sizeof(th));
	for (i = 0; i < CT * CPER; i++) { /* interleaved: every thread's members in each run */
		struct cthread *c = &th[i % CT];

		c->ctx = ctx;
		c->r = r;
		c->size[c->n] = (1 + (uint64_t)(i % 3)) * g - 8;
		ck_ok(cms_alloc(r, c->size[c->n], &c->p[c->n]));
		c->n++;
	}
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	counts(2, 2, 2, info(r).physical_bytes + info(o).physical_bytes);
	for (t = 0; t < CT; t++)
		ck_assert_int_eq(pthread_create(&tid[t], NULL, churn, &th[t]), 0);
	for (cycle = 0; cycle < 20; cycle++) {
		cms_status st = cms_region_pause(r, NULL, NULL);

		ck_assert_msg(st == CMS_OK || st == CMS_ERR_ALREADY_PAUSED, "%s", cms_last_error());
		ck_ok(cms_region_resume(r, NULL, NULL));
		if (cycle % 5 == 0) {
			ck_ok(cms_pause(ctx, "o", NULL, NULL));
			ck_ok(cms_resume(ctx, "o", NULL, NULL));
		}
	}
	for (t = 0; t < CT; t++) {
		ck_assert_int_eq(pthread_join(tid[t], &ret), 0);
		ck_assert_msg(ret == NULL, "thread %d: %s", t, (const char *)ret);
	}
	/* Collect the survivors; a cycle coalesces them as the addresses say. */
	set_init(&s, r);
	for (t = 0; t < CT; t++)
		for (i = 0; i < th[t].n; i++)
			if (th[t].p[i]) {
				ck_assert_uint_lt(s.n, MAXA);
				s.p[s.n] = th[t].p[i];
				s.size[s.n] = th[t].size[i];
				s.phys[s.n] = (th[t].size[i] + g - 1) / g * g;
				s.live[s.n++] = true;
			}
	set_info(&s, CMS_STATE_ACTIVE);
	set_lookup(&s, ctx, CMS_STATE_ACTIVE);
	set_fill(&s, 123);
	ck_assert_uint_gt(s.n, 0);
	/* All its handle bytes go, retained ones included. */
	pause_r(r, t_counters().device_used_bytes[0] - set_phys(&so));
	resume_r(r, set_phys(&s));
	counts(set_runs(&s) + 1, set_runs(&s) + 1, 2, set_phys(&s) + set_phys(&so));
	set_check(&s);
	set_check(&so);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- undo and rollback with runs: earlier state, double faults --------------- */

/*
 * A resume that fails must release exactly the handles it created. The
 * allocations before a failed resume can hold a handle (an earlier undo whose
 * cuMemRelease failed: CMS_ERR_ROLLBACK_FAILED, exact state kept). Loop 0:
 * region without CMS_REGION_COALESCE, loop 1: with it (runs).
 *   A (1 granule) keeps its handle from resume 1; resume 2 fails mapping
 *   the last one: its new handle must go, A's may stay.
 */
START_TEST(resume_undo_releases_what_it_made)
{
	bool runs = _i == 1;
	cms_context *ctx = t_ctx();
	cms_region *r;
	cms_status st;
	struct set s;
	uint64_t held;

	t_region_flags = runs ? CMS_REGION_COALESCE : 0;
	r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	t_region_flags = CMS_REGION_COALESCE;
	set_init(&s, r);
	/* runs: A,B 1 granule each, X (freed while paused), C,D 3 granules each. */
	set_alloc(&s, 1, 0);
	set_alloc(&s, 1, 0);
	if (runs)
		set_alloc(&s, 1, 0);
	set_alloc(&s, 3, 0);
	set_alloc(&s, 3, 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	if (runs)
		set_free(&s, 2, ctx);
	/* Resume 1 fails; its undo cannot release A's (runs: A+B's) handle. */
	if (runs) {
		ck_assert_int_eq(t_sim()->fail_call("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY), 0);
		ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 1, CUDA_ERROR_UNKNOWN), 0);
		ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 2, CUDA_ERROR_UNKNOWN), 0);
	} else {
		ck_assert_int_eq(t_sim()->fail_call("cuMemCreate", 3, CUDA_ERROR_OUT_OF_MEMORY), 0);
		ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 1, CUDA_ERROR_UNKNOWN), 0);
	}
	st = cms_region_resume(r, NULL, NULL);
	t_sim()->clear_faults();
	ck_assert_int_eq(st, CMS_ERR_ROLLBACK_FAILED);
	held = runs ? s.phys[0] + s.phys[1] : s.phys[0];
	counts(1, 0, 1, held);
	/* Resume 2 fails at the last cuMemMap (runs: C+D's; else D's). */
	ck_assert_int_eq(t_sim()->fail_call("cuMemMap", runs ? 2 : 4, CUDA_ERROR_UNKNOWN), 0);
	st = cms_region_resume(r, NULL, NULL);
	t_sim()->clear_faults();
	ck_assert_int_eq(st, CMS_ERR_DRIVER);
	ck_assert_msg(t_counters().device_used_bytes[0] <= held,
		      "a failed resume kept %llu bytes of handles (held %llu before it)",
		      (unsigned long long)t_counters().device_used_bytes[0],
		      (unsigned long long)held);
	ck_ok(cms_region_resume(r, NULL, NULL));
	counts(runs ? 2 : 4, runs ? 2 : 4, 1, set_phys(&s));
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* The same through cms_swap's resume side. */
START_TEST(swap_undo_releases_what_it_made)
{
	cms_context *ctx = t_ctx();
	cms_region *ry = t_region(ctx, "y", 0, CMS_POLICY_DISCARD);
	cms_region *rx = t_region(ctx, "x", 0, CMS_POLICY_HOST);
	struct set x, y;
	cms_status st;
	uint64_t held;

	set_init(&x, rx);
	set_init(&y, ry);
	set_alloc(&x, 1, 0);
	set_alloc(&y, 1, 0);
	set_alloc(&y, 1, 0);
	set_alloc(&y, 1, 0);
	set_alloc(&y, 3, 0);
	set_alloc(&y, 3, 0);
	set_fill(&x, 1);
	ck_ok(cms_region_pause(ry, NULL, NULL));
	set_free(&y, 2, ctx);
	ck_assert_int_eq(t_sim()->fail_call("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 2, CUDA_ERROR_UNKNOWN), 0);
	st = cms_region_resume(ry, NULL, NULL);
	t_sim()->clear_faults();
	ck_assert_int_eq(st, CMS_ERR_ROLLBACK_FAILED);
	held = y.phys[0] + y.phys[1];
	counts(2, 1, 2, x.phys[0] + held);
	/* The swap's resume side fails mapping C+D (x's map comes in the rollback). */
	ck_assert_int_eq(t_sim()->fail_call("cuMemMap", 2, CUDA_ERROR_UNKNOWN), 0);
	st = cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL);
	t_sim()->clear_faults();
	ck_assert_int_eq(st, CMS_ERR_DRIVER);
	set_check(&x);
	ck_assert_msg(t_counters().device_used_bytes[0] <= x.phys[0] + held,
		      "a failed swap kept %llu bytes of handles (held %llu before it)",
		      (unsigned long long)t_counters().device_used_bytes[0],
		      (unsigned long long)(x.phys[0] + held));
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/*
 * A pause whose release fails and whose rollback then fails to re-create one
 * run (two faults): a member mapped again must have its content, else it must
 * keep its backup. The runs' members appear in the work list in list order
 * (highest address first), so the member whose cuMemCreate fails is not the
 * one that finally re-creates the run.
 */
START_TEST(pause_rollback_restores_every_member)
{
	struct fx f;
	cms_status st;
	size_t k;

	fx_make(&f, false);
	ck_assert_int_eq(t_sim()->fail_call("cuMemRelease", 2, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	st = cms_region_pause(f.r, NULL, NULL);
	t_sim()->clear_faults();
	ck_assert_int_eq(st, CMS_ERR_ROLLBACK_FAILED);
	for (k = 0; k < f.s.n; k++) {
		long bad;

		if (!f.s.live[k] || !mapped_rw(f.s.p[k], 0))
			continue;
		bad = t_check(0, f.s.p[k], f.s.size[k] & ~3ull, f.s.seed[k]);
		ck_assert_msg(bad == -1,
			      "allocation %zu mapped again after the failed pause without its "
			      "content (word %ld)",
			      k, bad);
	}
	/* Whatever was left unmapped comes back from its backup with the next cycle. */
	ck_ok(cms_region_pause(f.r, NULL, NULL));
	ck_ok(cms_region_resume(f.r, NULL, NULL));
	set_check(&f.s);
	ck_ok(cms_context_destroy(f.ctx));
	everything_freed();
}
END_TEST

/*
 * A swap that fails before copying anything (here: its wait for GPU work)
 * must leave the resume side as it was: no run planned on its allocations. A
 * later free while paused then gives its addresses back at once, and the
 * next resume backs only live allocations.
 */
START_TEST(swap_early_failure_leaves_no_plan)
{
	cms_context *ctx = t_ctx();
	cms_region *rx = t_region(ctx, "x", 0, CMS_POLICY_HOST);
	cms_region *ry = t_region(ctx, "y", 0, CMS_POLICY_HOST);
	struct set x, y;
	int k;

	set_init(&x, rx);
	set_init(&y, ry);
	set_alloc(&x, 1, 0);
	for (k = 0; k < 4; k++)
		set_alloc(&y, 2, 0);
	set_fill(&x, 1);
	set_fill(&y, 2);
	ck_ok(cms_region_pause(ry, NULL, NULL));
	ck_assert_int_eq(t_sim()->fail_call(_i ? "cuEventCreate" : "cuCtxSynchronize", 1,
					    CUDA_ERROR_UNKNOWN),
			 0);
	ck_status(cms_swap(ctx, "x", "y", NULL, NULL, NULL, NULL), CMS_ERR_DRIVER);
	t_sim()->clear_faults();
	counts(1, 1, 2, x.phys[0]);
	set_free(&y, 1, ctx);
	ck_assert_msg(retained(ry) == 0, "a paused region retains %llu bytes of a freed member",
		      (unsigned long long)retained(ry));
	resume_r(ry, set_phys(&y));
	counts(3, 3, 2, x.phys[0] + set_phys(&y)); /* x; y: [0], [2..3] */
	set_check(&y);
	ck_ok(cms_context_destroy(ctx));
	everything_freed();
}
END_TEST

/* ---- randomized model ------------------------------------------------------ */

#define MR 4	/* regions: h HOST, z ZERO, d DISCARD, n HOST + no-COALESCE */
#define MA 160	/* allocation slots */
#define MEXT 64 /* free extents of an arena */

struct mext {
	uint64_t base, len;
};

struct mgroup { /* a physical handle: a run or one allocation */
	uint64_t len;
	int live;
	uint64_t retained[MA]; /* bases of retained members (len in retained_len) */
	uint64_t retained_len[MA];
	int nretained;
};

struct mreg {
	cms_region *r;
	const char *tag;
	uint32_t policy;
	bool nocoalesce, paused;
	bool arena;
	uint64_t arena_used;
	struct mext free[MEXT];
	int nfree;
	struct mgroup g[MA];
	bool gused[MA];
};

struct malloc_ {
	bool live;
	int reg, group;
	uint64_t p, size, phys;
	uint32_t seed;
};

struct model {
	cms_context *ctx;
	uint64_t g;
	uint64_t rng;
	struct mreg reg[MR];
	struct malloc_ a[MA];
	uint32_t next_seed;
	unsigned ops[8];
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static void ext_give(struct mreg *mr, uint64_t base, uint64_t len)
{
	int i, j;

	mr->arena_used -= len;
	for (i = 0; i < mr->nfree && mr->free[i].base < base; i++)
		;
	if (i > 0 && mr->free[i - 1].base + mr->free[i - 1].len == base) {
		mr->free[i - 1].len += len;
		if (i < mr->nfree && base + len == mr->free[i].base) {
			mr->free[i - 1].len += mr->free[i].len;
			for (j = i; j + 1 < mr->nfree; j++)
				mr->free[j] = mr->free[j + 1];
			mr->nfree--;
		}
	} else if (i < mr->nfree && base + len == mr->free[i].base) {
		mr->free[i].base = base;
		mr->free[i].len += len;
	} else {
		ck_assert_int_lt(mr->nfree, MEXT);
		for (j = mr->nfree; j > i; j--)
			mr->free[j] = mr->free[j - 1];
		mr->free[i].base = base;
		mr->free[i].len = len;
		mr->nfree++;
	}
	if (!mr->arena_used) { /* the library frees the reservation */
		mr->arena = false;
		mr->nfree = 0;
	}
}

/* First fit; 0 when a new arena must be reserved. */
static uint64_t ext_take(struct mreg *mr, uint64_t len)
{
	int i, j;

	for (i = 0; i < mr->nfree; i++) {
		uint64_t b = mr->free[i].base;

		if (mr->free[i].len < len)
			continue;
		mr->free[i].base += len;
		mr->free[i].len -= len;
		if (!mr->free[i].len) {
			for (j = i; j + 1 < mr->nfree; j++)
				mr->free[j] = mr->free[j + 1];
			mr->nfree--;
		}
		mr->arena_used += len;
		return b;
	}
	return 0;
}

static int group_new(struct mreg *mr)
{
	int i;

	for (i = 0; i < MA; i++)
		if (!mr->gused[i]) {
			mr->gused[i] = true;
			memset(&mr->g[i], 0, sizeof(mr->g[i]));
			return i;
		}
	ck_abort_msg("model: no group slot");
	return -1;
}

/* A group's handle goes: its retained members' addresses go back to the arena. */
static void group_release(struct mreg *mr, int gi)
{
	int i;

	for (i = 0; i < mr->g[gi].nretained; i++)
		ext_give(mr, mr->g[gi].retained[i], mr->g[gi].retained_len[i]);
	mr->gused[gi] = false;
}

static int by_addr_model(const void *x, const void *y)
{
	const struct malloc_ *a = *(struct malloc_ *const *)x, *b = *(struct malloc_ *const *)y;

	return (a->p > b->p) - (a->p < b->p);
}

/* A resume of region ri: live allocations grouped by adjacency (one group each if no coalesce). */
static uint64_t model_resume(struct model *m, int ri)
{
	struct mreg *mr = &m->reg[ri];
	struct malloc_ *v[MA];
	uint64_t backed = 0;
	int n = 0, i, gi = -1;

	for (i = 0; i < MA; i++)
		if (m->a[i].live && m->a[i].reg == ri)
			v[n++] = &m->a[i];
	qsort(v, (size_t)n, sizeof(v[0]), by_addr_model);
	for (i = 0; i < n; i++) {
		if (mr->nocoalesce || i == 0 || v[i - 1]->p + v[i - 1]->phys != v[i]->p)
			gi = group_new(mr);
		v[i]->group = gi;
		mr->g[gi].len += v[i]->phys;
		mr->g[gi].live++;
		backed += v[i]->phys;
	}
	mr->paused = false;
	return backed;
}

static uint64_t model_pause(struct model *m, int ri)
{
	struct mreg *mr = &m->reg[ri];
	uint64_t released = 0;
	int i;

	for (i = 0; i < MA; i++)
		if (mr->gused[i]) {
			released += mr->g[i].len;
			group_release(mr, i);
		}
	for (i = 0; i < MA; i++)
		if (m->a[i].live && m->a[i].reg == ri)
			m->a[i].group = -1;
	mr->paused = true;
	return released;
}

/* Compares the simulation and the regions' accounting with the model. */
static void model_check(struct model *m, const char *what)
{
	cmssim_counters c = t_counters();
	uint64_t handles = 0, used = 0, res = 0;
	int ri, i;

	for (ri = 0; ri < MR; ri++) {
		struct mreg *mr = &m->reg[ri];
		cms_region_info in = info(mr->r);
		uint64_t phys = 0, logical = 0, n = 0, retained_sum = 0;

		res += mr->arena;
		for (i = 0; i < MA; i++)
			if (mr->gused[i]) {
				handles++;
				used += mr->g[i].len;
			}
		for (i = 0; i < MA; i++)
			if (m->a[i].live && m->a[i].reg == ri) {
				phys += m->a[i].phys;
				logical += m->a[i].size;
				n++;
			}
		ck_assert_msg(in.state == (mr->paused ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE),
			      "%s: region %s state", what, mr->tag);
		for (i = 0; i < MA; i++) {
			int j;

			for (j = 0; mr->gused[i] && j < mr->g[i].nretained; j++)
				retained_sum += mr->g[i].retained_len[j];
		}
		ck_assert_msg(in.retained_bytes == retained_sum,
			      "%s: region %s retained %llu, model %llu", what, mr->tag,
			      (unsigned long long)in.retained_bytes,
			      (unsigned long long)retained_sum);
		ck_assert_msg(in.allocations == n && in.physical_bytes == phys &&
				      in.logical_bytes == logical &&
				      in.backed_bytes == (mr->paused ? 0 : phys),
			      "%s: region %s accounting", what, mr->tag);
	}
	ck_assert_msg(
		c.handles == handles && c.mappings == handles && c.physical_allocations == handles,
		"%s: handles %llu mappings %llu, model %llu", what, (unsigned long long)c.handles,
		(unsigned long long)c.mappings, (unsigned long long)handles);
	ck_assert_msg(c.device_used_bytes[0] == used, "%s: used %llu, model %llu", what,
		      (unsigned long long)c.device_used_bytes[0], (unsigned long long)used);
	ck_assert_msg(c.reservations == res, "%s: reservations %llu, model %llu", what,
		      (unsigned long long)c.reservations, (unsigned long long)res);
}

static void model_content(struct model *m, int ri, bool after_resume)
{
	struct mreg *mr = &m->reg[ri];
	int i;

	for (i = 0; i < MA; i++) {
		struct malloc_ *a = &m->a[i];

		if (!a->live || a->reg != ri)
			continue;
		if (mr->policy == CMS_POLICY_HOST) {
			ck_assert_msg(t_check(0, a->p, a->size & ~3ull, a->seed) == -1,
				      "region %s: 0x%llx content", mr->tag,
				      (unsigned long long)a->p);
		} else if (mr->policy == CMS_POLICY_ZERO && after_resume) {
			ck_assert_msg(t_is_zero(0, a->p, a->phys), "region %s: 0x%llx not zero",
				      mr->tag, (unsigned long long)a->p);
			ck_assert_int_eq(t_fill(0, a->p, a->size & ~3ull, a->seed), 0);
		}
	}
}

static void model_alloc(struct model *m, int ri)
{
	struct mreg *mr = &m->reg[ri];
	struct malloc_ *a = NULL;
	uint64_t want;
	int i;

	for (i = 0; i < MA && !a; i++)
		if (!m->a[i].live)
			a = &m->a[i];
	if (!a)
		return;
	memset(a, 0, sizeof(*a));
	a->reg = ri;
	a->phys = (1 + rnd(m) % 5) * m->g;
	a->size = a->phys - 4 * (rnd(m) % 1024);
	if (mr->paused) {
		ck_status(cms_alloc(mr->r, a->size, &a->p), CMS_ERR_PAUSED);
		return;
	}
	want = mr->arena ? ext_take(mr, a->phys) : 0;
	ck_ok(cms_alloc(mr->r, a->size, &a->p));
	if (want) {
		ck_assert_msg(a->p == want, "alloc in %s: 0x%llx, first fit says 0x%llx", mr->tag,
			      (unsigned long long)a->p, (unsigned long long)want);
	} else { /* a new arena: the allocation is at its base */
		ck_assert_msg(!mr->arena, "model: the arena of %s is full", mr->tag);
		mr->arena = true;
		mr->arena_used = a->phys;
		mr->nfree = 1;
		mr->free[0].base = a->p + a->phys;
		mr->free[0].len = ARENA - a->phys;
	}
	a->live = true;
	a->seed = m->next_seed++;
	a->group = group_new(mr);
	mr->g[a->group].len = a->phys;
	mr->g[a->group].live = 1;
	ck_assert_int_eq(t_fill(0, a->p, a->size & ~3ull, a->seed), 0);
}

static void model_free(struct model *m, int ai)
{
	struct malloc_ *a = &m->a[ai];
	struct mreg *mr = &m->reg[a->reg];
	cms_pointer_info pi = { .struct_size = sizeof(pi) };

	ck_ok(cms_free(m->ctx, a->p));
	a->live = false;
	ck_status(cms_pointer_info_get(m->ctx, a->p, &pi), CMS_ERR_NOT_FOUND);
	if (mr->paused) {
		ext_give(mr, a->p, a->phys);
		return;
	}
	if (mr->g[a->group].live > 1) { /* retained */
		struct mgroup *g = &mr->g[a->group];

		g->live--;
		g->retained[g->nretained] = a->p;
		g->retained_len[g->nretained++] = a->phys;
		return;
	}
	group_release(mr, a->group);
	ext_give(mr, a->p, a->phys);
}

static int pick_region(struct model *m, int paused)
{
	int i, c = 0, pick[MR];

	for (i = 0; i < MR; i++)
		if (paused < 0 || m->reg[i].paused == (paused != 0))
			pick[c++] = i;
	return c ? pick[rnd(m) % (uint64_t)c] : -1;
}

static void model_step(struct model *m, int step)
{
	unsigned op = (unsigned)(rnd(m) % 100);
	char what[64];
	int ri, i, live[MA], n = 0;

	if (op < 38) { /* alloc */
		ri = pick_region(m, -1);
		model_alloc(m, ri);
		m->ops[0]++;
		snprintf(what, sizeof(what), "step %d alloc %s", step, m->reg[ri].tag);
	} else if (op < 70) { /* free */
		for (i = 0; i < MA; i++)
			if (m->a[i].live)
				live[n++] = i;
		if (!n)
			return;
		i = live[rnd(m) % (uint64_t)n];
		ri = m->a[i].reg;
		model_free(m, i);
		m->ops[1 + m->reg[ri].paused]++;
		snprintf(what, sizeof(what), "step %d free in %s", step, m->reg[ri].tag);
		if (!m->reg[ri].paused)
			model_content(m, ri, false);
	} else if (op < 82) { /* pause */
		cms_pause_result pr = { .struct_size = sizeof(pr) };

		ri = pick_region(m, 0);
		if (ri < 0)
			return;
		ck_ok(cms_region_pause(m->reg[ri].r, NULL, &pr));
		ck_assert_uint_eq(pr.bytes_released, model_pause(m, ri));
		m->ops[3]++;
		snprintf(what, sizeof(what), "step %d pause %s", step, m->reg[ri].tag);
	} else if (op < 94) { /* resume, async one time in two */
		cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
		cms_resume_result rr = { .struct_size = sizeof(rr) };

		ri = pick_region(m, 1);
		if (ri < 0)
			return;
		if (rnd(m) & 1)
			ro.flags = CMS_RESUME_ASYNC;
		ck_ok(cms_region_resume(m->reg[ri].r, &ro, &rr));
		if (ro.flags)
			sync_device(0);
		ck_assert_uint_eq(rr.bytes_backed, model_resume(m, ri));
		model_content(m, ri, true);
		m->ops[4 + (ro.flags != 0)]++;
		snprintf(what, sizeof(what), "step %d resume %s", step, m->reg[ri].tag);
	} else { /* swap the two HOST tags h and n when one is active and the other paused */
		cms_pause_result pr = { .struct_size = sizeof(pr) };
		cms_resume_result rr = { .struct_size = sizeof(rr) };
		int p = 0, r = 3;

		if (m->reg[0].paused == m->reg[3].paused)
			return;
		if (m->reg[0].paused) {
			p = 3;
			r = 0;
		}
		ck_ok(cms_swap(m->ctx, m->reg[p].tag, m->reg[r].tag, NULL, NULL, &pr, &rr));
		ck_assert_uint_eq(pr.bytes_released, model_pause(m, p));
		ck_assert_uint_eq(rr.bytes_backed, model_resume(m, r));
		model_content(m, r, true);
		m->ops[6]++;
		snprintf(what, sizeof(what), "step %d swap %s -> %s", step, m->reg[p].tag,
			 m->reg[r].tag);
	}
	model_check(m, what);
}

START_TEST(random_model)
{
	static const char *tags[MR] = { "h", "z", "d", "n" };
	static const uint32_t pol[MR] = { CMS_POLICY_HOST, CMS_POLICY_ZERO, CMS_POLICY_DISCARD,
					  CMS_POLICY_HOST };
	struct model *m = calloc(1, sizeof(*m));
	int ri, step;

	ck_assert_ptr_nonnull(m);
	m->ctx = t_ctx();
	m->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(_i + 1);
	m->next_seed = 1;
	for (ri = 0; ri < MR; ri++) {
		m->reg[ri].tag = tags[ri];
		m->reg[ri].policy = pol[ri];
		m->reg[ri].nocoalesce = ri == 3;
		t_region_flags = ri == 3 ? 0 : CMS_REGION_COALESCE;
		m->reg[ri].r = t_region(m->ctx, tags[ri], 0, pol[ri]);
		t_region_flags = CMS_REGION_COALESCE;
	}
	m->g = info(m->reg[0].r).granularity;
	for (step = 0; step < 400; step++)
		model_step(m, step);
	for (ri = 0; ri < MR; ri++) /* a last cycle of everything */
		if (!m->reg[ri].paused) {
			ck_ok(cms_region_pause(m->reg[ri].r, NULL, NULL));
			model_pause(m, ri);
		}
	ck_ok(cms_resume(m->ctx, NULL, NULL, NULL));
	for (ri = 0; ri < MR; ri++) {
		model_resume(m, ri);
		model_content(m, ri, true);
	}
	model_check(m, "final cycle");
	printf("runs model seed %d: %u allocs, %u frees active, %u frees paused, %u pauses, "
	       "%u resumes, %u async, %u swaps\n",
	       _i, m->ops[0], m->ops[1], m->ops[2], m->ops[3], m->ops[4], m->ops[5], m->ops[6]);
	ck_ok(cms_context_destroy(m->ctx));
	everything_freed();
	free(m);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("runs");
	TCase *tc = tcase_create("runs");
	TCase *bugs = tcase_create("undo");

	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, coalesce_cycles, 0, 4);
	tcase_add_loop_test(tc, free_retains_until_pause, 0, 2);
	tcase_add_loop_test(tc, free_members_one_by_one, 0, 4);
	tcase_add_test(tc, no_coalesce_flag);
	tcase_add_loop_test(tc, copies_merge, 0, 2);
	tcase_add_test(tc, copies_never_cross_buffers);
	tcase_add_test(tc, regions_never_mix);
	tcase_add_test(tc, mixed_sizes);
	tcase_add_test(tc, large_allocations);
	tcase_add_test(tc, peer_access_coalesced);
	tcase_add_loop_test(tc, swap_coalesced, 0, 2);
	tcase_add_test(tc, async_resume_coalesced);
	tcase_add_loop_test(tc, resume_create_fails, 0, 2);
	tcase_add_loop_test(tc, pause_release_fails, 0, 2);
	tcase_add_loop_test(tc, fault_sweep, 0, 2);
	tcase_add_test(tc, swap_fault_sweep);
	tcase_add_test(tc, pause_failure_after_retire);
	tcase_add_loop_test(tc, destroy_with_runs, 0, 2);
	tcase_add_test(tc, last_member_other_region_paused);
	tcase_add_loop_test(tc, failing_frees, 0, 4);
	tcase_add_test(tc, concurrent_free_and_cycles);
	tcase_add_loop_test(tc, random_model, 0, 3);
	suite_add_tcase(s, tc);
	tcase_set_timeout(bugs, 600);
	tcase_add_loop_test(bugs, resume_undo_releases_what_it_made, 0, 2);
	tcase_add_test(bugs, swap_undo_releases_what_it_made);
	tcase_add_test(bugs, pause_rollback_restores_every_member);
	tcase_add_loop_test(bugs, swap_early_failure_leaves_no_plan, 0, 2);
	suite_add_tcase(s, bugs);
	return s;
}

int main(void)
{
	int sim = 0;

	if (t_probe_devices(&sim) < 2 || !sim) {
		printf("SKIP: needs the host simulation with 2 devices\n");
		return 77;
	}
	t_region_flags = CMS_REGION_COALESCE; /* regions of these tests coalesce unless told */
	return t_main(make, T_NEEDS_SIM);
}
