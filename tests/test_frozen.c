/* SPDX-License-Identifier: MIT */
/*
 * test_frozen.c - frozen regions (cms_region_freeze, cms_region_thaw; since
 * 1.3): content through freeze / pause / resume / thaw cycles on several
 * layouts (plain, coalesced, chunks, guarded; HOST and DISK; a peer device),
 * the pauses that copy nothing (counters, and an armed copy fault that a
 * pause must not meet), writes into frozen memory failing (the simulation
 * checks access flags), cms_alloc refused, injected faults in the freeze,
 * the thaw, the resume's read-only step and anywhere in a pause or resume of
 * a frozen region leaving access and state as they were, a free failing twice
 * changing nothing (its backup still current), bad arguments.
 * The gpu mode runs what needs no fault injection on a real GPU.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NA 5
/* Sizes in 64 KiB granules (CMS_SIM_GRANULARITY=64K in the sim mode): runs and chunks form. */
static const uint64_t sizes[NA] = { 64 * 1024, 200 * 1024, 128 * 1024, 4096, 256 * 1024 };

static uint64_t logical(void)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < NA; i++)
		n += sizes[i];
	return n;
}

static char tmpdir[64];

static cms_region *region(cms_context *ctx, const char *tag, uint32_t policy, uint64_t flags)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;

	o.policy = policy;
	o.flags = flags;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	if (policy == CMS_POLICY_DISK) {
		if (!tmpdir[0]) {
			snprintf(tmpdir, sizeof(tmpdir), "/tmp/cms-frozen-XXXXXX");
			ck_assert_ptr_nonnull(mkdtemp(tmpdir));
		}
		ck_ok(cms_region_disk_dir_set(r, tmpdir));
	}
	return r;
}

static void fill_all(const uint64_t *p, uint32_t seed)
{
	t_fill_each(0, p, sizes, NA, seed);
}

static void check_all(const uint64_t *p, uint32_t seed)
{
	t_check_each(0, p, sizes, NA, seed);
}

/* cmssim_get_access (dlsym on the driver: the simulation). */
static int access_of(uint64_t addr, int dev)
{
	static int (*get)(uint64_t, int);

	t_sim(); /* asserts that this is the simulation */
	if (!get)
		get = (int (*)(uint64_t, int))dlsym(t_drv()->dl, "cmssim_get_access");
	ck_assert_ptr_nonnull(get);
	return get(addr, dev);
}

/* Devices of the driver (CMS_SIM_DEVICES=2 in the sim mode). */
static int devices(void)
{
	int n = 0;

	ck_assert_int_eq(t_drv()->cuDeviceGetCount(&n), 0);
	return n;
}

/* Simulation only: every allocation's access for device dev is want. */
static void check_access(const uint64_t *p, int dev, int want)
{
	size_t i;

	if (!t_is_sim())
		return;
	for (i = 0; i < NA; i++)
		ck_assert_msg(access_of(p[i], dev) == want, "allocation %zu: access %d, want %d", i,
			      access_of(p[i], dev), want);
}

/* Simulation only: arms a failure of the next device-to-host copy (a pause that copies
 * nothing does not meet it). */
static void arm_copy_fault(void)
{
	if (t_is_sim())
		ck_assert_int_eq(t_sim()->fail_call("cuMemcpyDtoHAsync", 1, 999), 0);
}

/* A pause with nothing to copy has nothing to wait for: no batches of releases overlapped
 * with copies (overlap.c), one event per lane per batch (the candidate cause of a frozen
 * 16 x 1 GiB pause at 1.98x a DISCARD pause on an H100, cms-bench (o)). */
static void arm_event_fault(void)
{
	if (t_is_sim())
		ck_assert_int_eq(t_sim()->fail_call("cuEventRecord", 1, 999), 0);
}

/* The n armed faults are still armed (no copy ran, no event was recorded), then disarmed. */
static void check_faults_unmet(int n)
{
	if (!t_is_sim())
		return;
	ck_assert_int_eq(t_sim()->armed_faults(), n);
	t_sim()->clear_faults();
}

/* check_all, but with p[1]'s first 4 KiB (declared content-free: mixed) left out. */
static void check_but_first_page(const uint64_t *p, uint32_t seed, bool mixed)
{
	size_t i;

	if (!mixed) {
		check_all(p, seed);
		return;
	}
	for (i = 0; i < NA; i++)
		ck_assert_msg(t_check_except(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i, 0,
					     i == 1 ? 4096 : 0) == -1,
			      "allocation %zu lost its content", i);
}

/*
 * One layout: freeze the active region, pause (copies everything), resume, pause twice more
 * (copy nothing), thaw, write, pause (copies everything), resume: content each time.
 */
static void cycles(uint32_t policy, uint64_t flags)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "w", policy, flags);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region_stats s0, s;
	uint64_t p[NA];
	size_t i;
	int k;

	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 10);
	ck_ok(cms_region_freeze(r));
	ck_assert_uint_eq(t_info(r).frozen, 1);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);

	/* the first pause after freezing an active region copies everything */
	s0 = t_stats(r);
	ck_ok(cms_pause(ctx, "w", NULL, &pr));
	s = t_stats(r);
	ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, logical());
	ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, 0);
	ck_assert_uint_eq(pr.bytes_backed_up, logical());
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_all(p, 10);

	for (k = 0; k < 2; k++) { /* the later ones copy nothing */
		s0 = t_stats(r);
		arm_copy_fault();
		arm_event_fault();
		ck_ok(cms_pause(ctx, "w", NULL, &pr));
		check_faults_unmet(2);
		s = t_stats(r);
		ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, 0);
		ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, logical());
		ck_assert_uint_eq(pr.bytes_backed_up, 0);
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
		ck_ok(cms_resume(ctx, "w", NULL, NULL));
		check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
		check_all(p, 10);
	}

	/* thawed: writable, and the next pause copies the new content */
	ck_ok(cms_region_thaw(r));
	ck_assert_uint_eq(t_info(r).frozen, 0);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	fill_all(p, 20);
	s0 = t_stats(r);
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	s = t_stats(r);
	ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, logical());
	ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, 0);
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	check_all(p, 20);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	ck_ok(cms_region_destroy(r));
	cms_context_destroy(ctx);
}

START_TEST(cycles_host)
{
	static const uint64_t layouts[] = { 0, CMS_REGION_COALESCE,
					    CMS_REGION_COALESCE | CMS_REGION_CHUNKS,
					    CMS_REGION_GUARD };

	cycles(CMS_POLICY_HOST, layouts[_i]);
}
END_TEST

START_TEST(cycles_disk)
{
	cycles(CMS_POLICY_DISK, _i ? CMS_REGION_COALESCE | CMS_REGION_CHUNKS : 0);
}
END_TEST

/* Writes into frozen memory fail, from the device and a peer; the content stays. */
START_TEST(writes_fail)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "w", CMS_POLICY_HOST, CMS_REGION_COALESCE);
	uint32_t buf[1024];
	uint64_t p[NA];
	size_t i;

	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 1);
	memset(buf, 0x5a, sizeof(buf));
	ck_ok(cms_region_freeze(r));
	for (i = 0; i < NA; i++)
		ck_assert_int_ne(
			t_write(0, p[i], buf, sizes[i] < sizeof(buf) ? sizes[i] : sizeof(buf)), 0);
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_ok(cms_resume(ctx, "w", NULL, NULL)); /* read-only again after the resume */
	for (i = 0; i < NA; i++)
		ck_assert_int_ne(t_write(0, p[i], buf, 4), 0);
	check_all(p, 1);
	if (devices() >= 2) { /* a peer added while frozen gets read-only access */
		ck_ok(cms_region_peer_devices_set(r, 0x2));
		check_access(p, 1, CU_MEM_ACCESS_FLAGS_PROT_READ);
		ck_assert_int_ne(t_write(1, p[0], buf, 4), 0);
		ck_ok(cms_region_thaw(r));
		check_access(p, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
		ck_ok(cms_region_freeze(r));
		check_access(p, 1, CU_MEM_ACCESS_FLAGS_PROT_READ);
		ck_ok(cms_pause(ctx, "w", NULL, NULL));
		ck_ok(cms_resume(ctx, "w", NULL, NULL));
		check_access(p, 1, CU_MEM_ACCESS_FLAGS_PROT_READ);
		check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
		ck_ok(cms_region_peer_devices_set(r, 0));
		check_access(p, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE);
		check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	}
	check_all(p, 1);
	ck_ok(cms_region_thaw(r));
	ck_assert_int_eq(t_write(0, p[0], buf, 4), 0);
	cms_context_destroy(ctx);
}
END_TEST

/* cms_alloc and hooked allocations fail with CMS_ERR_FROZEN; cms_free works. */
START_TEST(alloc_refused)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "w", CMS_POLICY_HOST, CMS_REGION_COALESCE | CMS_REGION_CHUNKS);
	uint64_t p, q, h;

	ck_ok(cms_alloc(r, 4096, &p));
	ck_ok(cms_alloc(r, 4096, &q));
	ck_ok(cms_region_freeze(r));
	ck_status(cms_alloc(r, 4096, &h), CMS_ERR_FROZEN);
	ck_assert_uint_eq(h, 0);
	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_status(cms_hook_alloc(4096, 0, &h), CMS_ERR_FROZEN);
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_context_set(NULL));
	ck_assert_str_eq(cms_status_name(CMS_ERR_FROZEN), "CMS_ERR_FROZEN");
	ck_ok(cms_free(ctx, q)); /* a chunk member: the chunk stays mapped, read-only */
	ck_assert_uint_eq(t_info(r).allocations, 1);
	if (t_is_sim())
		ck_assert_int_eq(access_of(p, 0), CU_MEM_ACCESS_FLAGS_PROT_READ);
	ck_ok(cms_region_thaw(r));
	ck_ok(cms_alloc(r, 4096, &h));
	ck_ok(cms_free(ctx, h));
	ck_ok(cms_free(ctx, p));
	cms_context_destroy(ctx);
}
END_TEST

/* Frozen while paused: only the flag; the resume maps read-only and its restore makes the
 * backups current (the next pause copies nothing). An async resume is synchronous. */
START_TEST(freeze_paused)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "w", CMS_POLICY_HOST, 0);
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_region_stats s0, s;
	uint64_t p[NA];
	size_t i;

	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 3);
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_ok(cms_region_freeze(r));
	ck_ok(cms_region_freeze(r)); /* frozen already: nothing */
	ck_assert_uint_eq(t_info(r).frozen, 1);
	ro.flags = CMS_RESUME_ASYNC;
	ck_ok(cms_resume(ctx, "w", &ro, NULL));
	ck_assert_uint_eq(t_info(r).restore_pending, 0);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_all(p, 3);
	s0 = t_stats(r);
	arm_copy_fault();
	arm_event_fault();
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	check_faults_unmet(2);
	s = t_stats(r);
	ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, 0);
	ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, logical());
	ck_ok(cms_region_thaw(r)); /* paused: only the flag */
	ck_ok(cms_region_thaw(r));
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	check_all(p, 3);
	cms_context_destroy(ctx);
}
END_TEST

/* cms_swap: the out side of a frozen region copies nothing once current, the in side makes
 * it read-only; content kept. Also a retention flag change and a declared range make the next
 * pause copy. */
START_TEST(swap_and_stale)
{
	cms_context *ctx = t_ctx();
	cms_region *a = region(ctx, "a", CMS_POLICY_HOST, CMS_REGION_COALESCE);
	cms_region *b = region(ctx, "b", CMS_POLICY_HOST, 0);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region_stats s0, s;
	uint64_t p[NA], q, backed;
	size_t i;

	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(a, sizes[i], &p[i]));
	ck_ok(cms_alloc(b, 1 * MiB, &q));
	fill_all(p, 7);
	ck_ok(cms_region_freeze(a));
	ck_ok(cms_pause(ctx, "b", NULL, NULL));
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL)); /* copies a: first after freeze */
	ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_all(p, 7);
	s0 = t_stats(a);
	arm_copy_fault();
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL)); /* b was paused: nothing copied */
	check_faults_unmet(1);
	s = t_stats(a);
	ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, 0);
	ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, logical());
	ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	check_all(p, 7);

	/* a flag change: the backups go or may go, the next pause copies */
	ck_ok(cms_region_flags_set(a, CMS_REGION_HOST_PAGEABLE, CMS_REGION_HOST_PAGEABLE));
	s0 = t_stats(a);
	ck_ok(cms_pause(ctx, "a", NULL, NULL));
	s = t_stats(a);
	ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, logical());
	ck_ok(cms_resume(ctx, "a", NULL, NULL));
	check_all(p, 7);
	/* a range declared content-free is not restored: that backup is not current after */
	ck_ok(cms_range_discard(ctx, p[1], 4096));
	ck_ok(cms_pause(ctx, "a", NULL, NULL));
	ck_ok(cms_resume(ctx, "a", NULL, NULL));
	/* a mixed pause: p[1] copies, its run-mates (COALESCE: one handle) are current; the run is
	 * released whole and every member's content comes back */
	backed = t_info(a).backed_bytes;
	s0 = t_stats(a);
	ck_ok(cms_pause(ctx, "a", NULL, &pr));
	s = t_stats(a);
	ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, sizes[1]);
	ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, logical() - sizes[1]);
	ck_assert_uint_eq(pr.bytes_released, backed);
	ck_ok(cms_resume(ctx, "a", NULL, NULL));
	check_but_first_page(p, 7, true);
	cms_context_destroy(ctx);
}
END_TEST

/* Injected cuMemSetAccess failures: the freeze, the thaw, the peer change are all or nothing;
 * a failing rollback is CMS_ERR_ROLLBACK_FAILED. */
START_TEST(faults_access)
{
	cms_context *ctx;
	cms_region *r;
	cms_region_stats s0;
	uint64_t p[NA];
	size_t i, n;

	if (!t_is_sim())
		return; /* fault injection */
	ctx = t_ctx();
	r = region(ctx, "w", CMS_POLICY_HOST, 0);
	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 5);
	for (i = 1; i <= NA; i++) { /* the i-th mapping fails */
		ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", i, 999), 0);
		ck_assert_int_ne(cms_region_freeze(r), CMS_OK);
		t_sim()->clear_faults();
		ck_assert_uint_eq(t_info(r).frozen, 0);
		check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	}
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 3, 999), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 4, 999), 0); /* the undo fails too */
	ck_status(cms_region_freeze(r), CMS_ERR_ROLLBACK_FAILED);
	t_sim()->clear_faults();
	ck_assert_uint_eq(t_info(r).frozen, 0);
	ck_ok(cms_region_thaw(r));	/* not frozen: nothing */
	for (i = 0, n = 0; i < NA; i++) /* mixed: the one whose undo failed is read-only */
		n += access_of(p[i], 0) == CU_MEM_ACCESS_FLAGS_PROT_READ;
	ck_assert_uint_eq(n, 1);
	ck_ok(cms_region_freeze(r));
	for (i = 1; i <= NA; i++) {
		ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", i, 999), 0);
		ck_assert_int_ne(cms_region_thaw(r), CMS_OK);
		t_sim()->clear_faults();
		ck_assert_uint_eq(t_info(r).frozen, 1);
		check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	}
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 2, 999), 0);
	ck_assert_int_ne(cms_region_peer_devices_set(r, 0x2), CMS_OK);
	t_sim()->clear_faults();
	ck_assert_uint_eq(t_info(r).peer_device_mask, 0);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_access(p, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE);
	check_all(p, 5);

	/* a thaw whose undo fails leaves some mappings writable while frozen: its backups,
	 * current after a cycle, count no more, the next pause copies everything */
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 3, 999), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemSetAccess", 4, 999), 0);
	ck_status(cms_region_thaw(r), CMS_ERR_ROLLBACK_FAILED);
	t_sim()->clear_faults();
	ck_assert_uint_eq(t_info(r).frozen, 1);
	s0 = t_stats(r);
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_to_store - s0.bytes_to_store, logical());
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_all(p, 5);
	cms_context_destroy(ctx);
}
END_TEST

/*
 * Every driver call of a pause and of a resume of a frozen region fails in turn: a failed
 * pause leaves it active, frozen, read-only with its content; a failed resume leaves it paused
 * with nothing mapped; then both succeed and the content is there. The resume's read-only step
 * is among them (its cuMemSetAccess calls follow the mappings').
 */
/* Makes every backup of the frozen region "w" current (a pause and a resume: a failed pause
 * left them stale); mixed: then p[1] not (a range declared content-free before a resume). */
static void prime(cms_context *ctx, const uint64_t *p, bool mixed)
{
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	if (!mixed)
		return;
	ck_ok(cms_range_discard(ctx, p[1], 4096));
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
}

/* Every driver call of a pause that copies nothing (mixed: that copies p[1] only, its
 * run-mates current) failed in turn, the state primed again before each; then of a resume. */
static void sweep(uint64_t flags, bool mixed)
{
	cms_region_stats s0, s;
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NA], nth;
	cms_status st;
	size_t i;

	if (!t_is_sim())
		return; /* fault injection */
	ctx = t_ctx();
	r = region(ctx, "w", CMS_POLICY_HOST, flags);
	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 9);
	ck_ok(cms_region_freeze(r));
	for (nth = 1;; nth++) {
		prime(ctx, p, mixed);
		s0 = t_stats(r);
		ck_assert_int_eq(t_sim()->fail_call("any", nth, 999), 0);
		st = cms_pause(ctx, "w", NULL, NULL);
		t_sim()->clear_faults();
		if (!st) { /* the primed pause, copying what it should */
			s = t_stats(r);
			ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store,
					  mixed ? sizes[1] : 0);
			break;
		}
		ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED, "pause call %llu: %s",
			      (unsigned long long)nth, cms_last_error());
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_ACTIVE);
		ck_assert_uint_eq(t_info(r).frozen, 1);
		check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
		check_but_first_page(p, 9, mixed);
		ck_assert_int_ne(t_write(0, p[0], &nth, 4), 0);
	}
	for (nth = 1;; nth++) {
		ck_assert_int_eq(t_sim()->fail_call("any", nth, 999), 0);
		st = cms_resume(ctx, "w", NULL, NULL);
		t_sim()->clear_faults();
		if (!st)
			break;
		ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED, "resume call %llu: %s",
			      (unsigned long long)nth, cms_last_error());
		ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
		ck_assert_uint_eq(t_info(r).backed_bytes, 0);
	}
	ck_assert_uint_eq(t_info(r).frozen, 1);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_but_first_page(p, 9, mixed);
	ck_ok(cms_region_thaw(r));
	ck_ok(cms_region_destroy(r));
	cms_context_destroy(ctx);
	t_nothing_left(1);
}

START_TEST(faults_sweep)
{
	static const uint64_t flags[] = { 0, CMS_REGION_COALESCE | CMS_REGION_CHUNKS,
					  CMS_REGION_VERIFY, /* checksum kernel calls too */
					  CMS_REGION_COALESCE };

	sweep(flags[_i], _i == 3); /* the last: a mixed pause of one run */
}
END_TEST

/* Simulation only: a cms_free of a frozen, active region that fails at its cuMemUnmap, after
 * it released the handle while mapped (cms_alloc_release's order since issue 34, item 8).
 * _i 0: the handle is retained back (cuMemRetainAllocationHandle): the simulation holds the
 * same handles as before. _i 1, a double fault: the retain fails too, and the allocation stays
 * mapped without a handle. Either way a failed free changes nothing the user can see: the
 * allocation stays mapped read-only with its content, its backup current (the next pause
 * copies nothing), the next pause counts its bytes released (before: 0 without a handle),
 * through a cycle; a retry frees it and nothing is left. */
START_TEST(free_double_fault)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_region_stats s0;
	cms_region_info ri;
	cmssim_counters c0;
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NA];
	size_t i;

	if (!t_is_sim())
		return; /* fault injection */
	ctx = t_ctx();
	r = region(ctx, "w", CMS_POLICY_HOST, 0);
	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	fill_all(p, 3);
	ck_ok(cms_region_freeze(r));
	ck_ok(cms_pause(ctx, "w", NULL, NULL));
	ck_ok(cms_resume(ctx, "w", NULL, NULL)); /* the backups hold the content (current) */
	c0 = t_counters();
	ck_assert_int_eq(t_sim()->fail_call("cuMemUnmap", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	if (_i)
		ck_assert_int_eq(t_sim()->fail_call("cuMemRetainAllocationHandle", 1, 999), 0);
	ck_status(cms_free(ctx, p[1]), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_int_eq(t_sim()->armed_faults(), 0); /* each fault fired */
	ck_assert_uint_eq(t_counters().mappings, c0.mappings);
	ck_assert_uint_eq(t_counters().handles, c0.handles - (uint64_t)_i);
	ck_assert_uint_eq(t_counters().device_used_bytes[0], c0.device_used_bytes[0]);
	ri = t_info(r);
	ck_assert_uint_eq(ri.state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(ri.allocations, NA);
	ck_assert_uint_eq(ri.backed_bytes, ri.physical_bytes);
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_all(p, 3);
	s0 = t_stats(r);
	ck_ok(cms_pause(ctx, "w", NULL, &pr));
	ck_assert_uint_eq(t_stats(r).bytes_to_store - s0.bytes_to_store, 0);
	ck_assert_uint_eq(pr.bytes_released, ri.physical_bytes);
	ck_assert_uint_eq(t_stats(r).bytes_released - s0.bytes_released, ri.physical_bytes);
	ck_assert_uint_eq(t_counters().device_used_bytes[0], 0);
	ck_ok(cms_resume(ctx, "w", NULL, NULL));
	check_access(p, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
	check_all(p, 3);
	ck_ok(cms_free(ctx, p[1]));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}
END_TEST

/* A real GPU only (the driver enforces read-only mappings): a frozen 1 GiB allocation refuses
 * cuMemcpyHtoD, keeps its content through cycles whose pauses copy 0 bytes. */
START_TEST(gpu_gib)
{
	const uint64_t n = 1ull << 30;
	cms_context *ctx;
	cms_region *r;
	cms_region_stats s0, s;
	uint32_t word = 7;
	uint64_t p;
	int k;

	if (t_is_sim())
		return; /* the simulation: the same at small sizes (cycles_host, writes_fail) */
	ctx = t_ctx();
	r = region(ctx, "g", CMS_POLICY_HOST, 0);
	ck_ok(cms_alloc(r, n, &p));
	ck_assert_int_eq(t_fill(0, p, n, 42), 0);
	ck_ok(cms_region_freeze(r));
	ck_ok(cms_pause(ctx, "g", NULL, NULL)); /* copies: the first after the freeze */
	ck_ok(cms_resume(ctx, "g", NULL, NULL));
	for (k = 0; k < 2; k++) {
		s0 = t_stats(r);
		ck_ok(cms_pause(ctx, "g", NULL, NULL));
		s = t_stats(r);
		ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, 0);
		ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, n);
		ck_ok(cms_resume(ctx, "g", NULL, NULL));
		ck_assert_uint_eq(t_info(r).frozen, 1);
	}
	ck_assert_int_eq(t_check(0, p, n, 42), -1);
	/* last: a copy into read-only memory fails and changes nothing */
	ck_assert_int_ne(t_write(0, p + n / 2, &word, sizeof(word)), 0);
	ck_assert_int_eq(t_check(0, p, n, 42), -1);
	ck_ok(cms_region_thaw(r));
	ck_assert_int_eq(t_write(0, p, &word, sizeof(word)), 0);
	cms_context_destroy(ctx);
}
END_TEST

START_TEST(bad_arguments)
{
	cms_context *ctx = t_ctx();
	cms_region *r;

	ck_status(cms_region_freeze(NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_region_thaw(NULL), CMS_ERR_INVALID_ARGUMENT);
	r = region(ctx, "s", CMS_POLICY_HOST, CMS_REGION_SHAREABLE);
	ck_status(cms_region_freeze(r), CMS_ERR_NOT_SUPPORTED);
	ck_assert_uint_eq(t_info(r).frozen, 0);
	ck_ok(cms_region_thaw(r)); /* not frozen: nothing */
	ck_assert_int_lt(CMS_STATUS_MIN, CMS_ERR_IO);
	ck_assert_str_eq(cms_status_name(CMS_ERR_FROZEN), "CMS_ERR_FROZEN");
	cms_context_destroy(ctx);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("frozen");
	TCase *tc = tcase_create("frozen");
	TCase *tf = tcase_create("faults");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, cycles_host, 0, 4);
	tcase_add_loop_test(tc, cycles_disk, 0, 2);
	tcase_add_test(tc, writes_fail);
	tcase_add_test(tc, alloc_refused);
	tcase_add_test(tc, freeze_paused);
	tcase_add_test(tc, swap_and_stale);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, gpu_gib);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tf, 600); /* simulation only: fault injection */
	tcase_add_test(tf, faults_access);
	tcase_add_loop_test(tf, faults_sweep, 0, 4);
	tcase_add_loop_test(tf, free_double_fault, 0, 2);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_DEVICE);
}
