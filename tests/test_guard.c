/* SPDX-License-Identifier: MIT */
/*
 * test_guard.c - guarded paused ranges (CMS_REGION_GUARD): a paused region's
 * allocations read as zeros, a resume gives the content back per policy
 * (HOST, DISK) or fresh memory (DISCARD), swap, free and destroy of a paused
 * guarded region, and the driver objects a guard holds. On the simulation
 * (64 KiB granularity: the zero handle is 2 MiB) writes to a paused guarded
 * region fail and mappings are counted; on a GPU the reads run too (a
 * kernel's read: test_gpu.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define GUARD_GRANULES 32 /* vmm/guard.c: the largest zero handle, in granules */

static const uint32_t policies[] = { CMS_POLICY_DISCARD, CMS_POLICY_HOST, CMS_POLICY_ZERO,
				     CMS_POLICY_DISK };
static char dir[256];

static uint64_t granularity(cms_region *r)
{
	cms_region_info ri = { .struct_size = sizeof(ri) };

	ck_ok(cms_region_info_get(r, &ri));
	return ri.granularity;
}

static cms_region *guarded_region(cms_context *ctx, const char *tag, uint32_t policy)
{
	cms_region *r;

	t_region_flags = CMS_REGION_GUARD;
	r = t_region(ctx, tag, 0, policy);
	t_region_flags = 0;
	if (policy == CMS_POLICY_DISK) {
		const char *t = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/cms-guard-XXXXXX", t && *t ? t : "/tmp");
		ck_assert_ptr_nonnull(mkdtemp(dir));
		ck_ok(cms_region_disk_dir_set(r, dir));
	}
	return r;
}

static void remove_dir(uint32_t policy)
{
	if (policy == CMS_POLICY_DISK)
		ck_assert_int_eq(rmdir(dir), 0);
}

/* Sizes: two 32-granule guard pieces and the rest in smaller zero handles (4 granules: one
 * piece), and one smaller than a granule. */
static void sizes_of(cms_region *r, uint64_t sz[2])
{
	uint64_t g = granularity(r);

	sz[0] = 2 * GUARD_GRANULES * g + 3 * g + 4096;
	sz[1] = g / 2;
}

/* Paused guarded: reads give zeros; (simulation) a write fails, and each allocation holds
 * one mapping per piece of the zero handle and no memory. Resumed: content per policy. */
START_TEST(paused_reads_zeros)
{
	uint32_t policy = policies[_i];
	cms_context *ctx = t_ctx();
	cms_region *r = guarded_region(ctx, "kv", policy);
	cmssim_counters c0 = { 0 }, c1;
	uint64_t sz[2], p[2], one = 1;
	cms_region_info ri = { .struct_size = sizeof(ri) };
	int i;

	sizes_of(r, sz);
	for (i = 0; i < 2; i++) {
		ck_ok(cms_alloc(r, sz[i], &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], sz[i] & ~3ull, (uint32_t)(7 + i)), 0);
	}
	if (t_is_sim())
		c0 = t_counters();
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.backed_bytes, 0);
	for (i = 0; i < 2; i++)
		ck_assert_msg(t_is_zero(0, p[i], sz[i]), "allocation %d: not zeros while paused",
			      i);
	if (t_is_sim()) {
		c1 = t_counters();
		/* 3 pieces over the first allocation, 1 over the second, instead of 1 + 1 */
		ck_assert_uint_eq(c1.mappings, c0.mappings + 2);
		ck_assert_uint_eq(c1.handles, c0.handles - 2);
		ck_assert_int_ne(t_write(0, p[0], &one, sizeof(one)), 0);
		ck_assert_int_ne(t_write(0, p[1] + sz[1] - 8, &one, sizeof(one)), 0);
		ck_assert_int_ne(t_write(0, p[0] + sz[0] - 8, &one, sizeof(one)), 0);
	}
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 0; i < 2; i++) {
		if (policy == CMS_POLICY_HOST || policy == CMS_POLICY_DISK)
			ck_assert_int_eq(t_check(0, p[i], sz[i] & ~3ull, (uint32_t)(7 + i)), -1);
		else if (policy == CMS_POLICY_ZERO)
			ck_assert(t_is_zero(0, p[i], sz[i]));
		/* fresh memory, writable */
		ck_assert_int_eq(t_fill(0, p[i], sz[i] & ~3ull, (uint32_t)(9 + i)), 0);
		ck_assert_int_eq(t_check(0, p[i], sz[i] & ~3ull, (uint32_t)(9 + i)), -1);
	}
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.mappings, c0.mappings);
		ck_assert_uint_eq(c1.handles, c0.handles);
	}
	/* a second cycle guards again */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert(t_is_zero(0, p[0], sz[0]));
	ck_ok(cms_region_resume(r, NULL, NULL));
	if (policy == CMS_POLICY_HOST || policy == CMS_POLICY_DISK)
		ck_assert_int_eq(t_check(0, p[0], sz[0] & ~3ull, 9), -1);
	ck_ok(cms_context_destroy(ctx));
	remove_dir(policy);
}
END_TEST

/* Without the flag a paused range is not readable: what the guard changes (simulation). */
START_TEST(unguarded_read_fails)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_HOST);
	uint64_t p, v;

	if (!t_is_sim()) { /* on a GPU the read would be an illegal address */
		ck_ok(cms_context_destroy(ctx));
		return;
	}
	ck_ok(cms_alloc(r, 4096, &p));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_int_ne(t_read(0, &v, p, sizeof(v)), 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* cms_swap: the paused side reads zeros, the resumed one its content; and back. a is HOST,
 * b DISCARD or HOST. */
START_TEST(swap_guarded)
{
	uint32_t policy = policies[_i];
	cms_context *ctx = t_ctx();
	cms_region *a = guarded_region(ctx, "a", CMS_POLICY_HOST);
	cms_region *b = guarded_region(ctx, "b", policy);
	uint64_t sz[2], pa, pb;

	sizes_of(a, sz);
	ck_ok(cms_alloc(a, sz[0], &pa));
	ck_ok(cms_alloc(b, sz[0], &pb));
	ck_assert_int_eq(t_fill(0, pa, sz[0] & ~3ull, 1), 0);
	ck_assert_int_eq(t_fill(0, pb, sz[0] & ~3ull, 2), 0);
	ck_ok(cms_region_pause(b, NULL, NULL));
	ck_assert(t_is_zero(0, pb, sz[0]));
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL));
	ck_assert(t_is_zero(0, pa, sz[0]));
	if (policy == CMS_POLICY_HOST)
		ck_assert_int_eq(t_check(0, pb, sz[0] & ~3ull, 2), -1);
	ck_assert_int_eq(t_fill(0, pb, sz[0] & ~3ull, 3), 0);
	ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	ck_assert(t_is_zero(0, pb, sz[0]));
	ck_assert_int_eq(t_check(0, pa, sz[0] & ~3ull, 1), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A free and a destroy of a paused guarded region unmap the guard; the addresses serve a
 * new allocation, and a context destroy leaves no driver object (simulation counters). */
START_TEST(free_and_destroy_paused)
{
	cms_context *ctx = t_ctx();
	cms_region *r = guarded_region(ctx, "kv", CMS_POLICY_DISCARD);
	cms_region *r2;
	uint64_t sz[2], p[2], q;
	cmssim_counters c0 = { 0 }, c1;

	sizes_of(r, sz);
	if (t_is_sim())
		c0 = t_counters();
	ck_ok(cms_alloc(r, sz[0], &p[0]));
	ck_ok(cms_alloc(r, sz[1], &p[1]));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_free(ctx, p[0]));
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.mappings, c0.mappings + 1); /* p[1]'s piece */
	}
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_alloc(r, sz[0], &q)); /* first fit: p[0]'s addresses, no guard left there */
	ck_assert_uint_eq(q, p[0]);
	ck_assert_int_eq(t_fill(0, q, sz[0] & ~3ull, 5), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_destroy(r));
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.mappings, c0.mappings);
		ck_assert_uint_eq(c1.reservations, c0.reservations);
		ck_assert_uint_eq(c1.handles, c0.handles); /* the zero handle stays... */
	}
	r2 = guarded_region(ctx, "kv2", CMS_POLICY_DISCARD);
	if (t_is_sim())
		ck_assert_uint_eq(t_counters().handles, c0.handles); /* ...and serves again */
	(void)r2;
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.handles, 0);
		ck_assert_uint_eq(c1.mappings, 0);
		ck_assert_uint_eq(c1.reservations, 0);
		ck_assert_uint_eq(c1.device_used_bytes[0], 0);
	}
}
END_TEST

/* A failed resume (out of device memory) leaves the region paused and guarded; a failed guard
 * in a pause leaves it active with its content (simulation). */
START_TEST(failed_calls_keep_the_guard)
{
	const struct t_sim *sim;
	cms_context *ctx;
	cms_region *r;
	uint64_t sz[2], p;
	cmssim_counters c0;

	if (!t_is_sim()) /* a GPU: nothing to inject faults with */
		return;
	sim = t_sim();
	ctx = t_ctx();
	r = guarded_region(ctx, "kv", CMS_POLICY_HOST);
	sizes_of(r, sz);
	ck_ok(cms_alloc(r, sz[0], &p));
	ck_assert_int_eq(t_fill(0, p, sz[0] & ~3ull, 4), 0);
	/* the third guard piece fails: two are mapped then, and unmapped again */
	c0 = t_counters();
	ck_assert_int_eq(sim->fail_call("cuMemMap", 3, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_uint_eq(t_counters().mappings, c0.mappings);
	ck_assert_int_eq(t_check(0, p, sz[0] & ~3ull, 4), -1);
	ck_ok(cms_region_pause(r, NULL, NULL));
	c0 = t_counters();
	ck_assert_int_eq(sim->fail_call("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	ck_assert_uint_eq(t_counters().mappings, c0.mappings);
	ck_assert(t_is_zero(0, p, sz[0]));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, sz[0] & ~3ull, 4), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A pause whose guard step fails and whose rollback fails too (CMS_ERR_ROLLBACK_FAILED)
 * leaves the region PAUSED with its allocations guarded: they read as zeros, and the next
 * resume restores the content. */
START_TEST(failed_rollback_leaves_it_guarded)
{
	const struct t_sim *sim;
	cms_context *ctx;
	cms_region *r;
	cms_region_info ri = { .struct_size = sizeof(ri) };
	uint64_t sz[2], p[2];
	int i;

	if (!t_is_sim()) /* a GPU: nothing to inject faults with */
		return;
	sim = t_sim();
	ctx = t_ctx();
	r = guarded_region(ctx, "kv", CMS_POLICY_HOST);
	sizes_of(r, sz);
	for (i = 0; i < 2; i++) {
		ck_ok(cms_alloc(r, sz[i], &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], sz[i] & ~3ull, (uint32_t)(20 + i)), 0);
	}
	/* the first guard piece fails, then the rollback's first cuMemCreate */
	ck_assert_int_eq(sim->fail_call("cuMemMap", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_assert_int_eq(sim->fail_call("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_ROLLBACK_FAILED);
	sim->clear_faults();
	ck_ok(cms_region_info_get(r, &ri));
	ck_assert_uint_eq(ri.state, CMS_STATE_PAUSED);
	for (i = 0; i < 2; i++) { /* mapped again, or guarded: readable either way */
		void *buf = malloc(sz[i]);

		ck_assert_ptr_nonnull(buf);
		ck_assert_msg(t_read(0, buf, p[i], sz[i]) == 0,
			      "allocation %d unreadable after a failed rollback", i);
		free(buf);
	}
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(t_check(0, p[i], sz[i] & ~3ull, (uint32_t)(20 + i)), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A free of a paused guarded allocation (three guard pieces: 32 + 32 + 4 granules) whose one
 * cuMemUnmap over its pieces fails unmaps them piece by piece, the last first (review item 1:
 * the driver does not say what a failed unmap over several mappings leaves). One fault: the
 * free succeeds. A fault in the fallback too: the free fails with the guard whole again (the
 * piece unmapped is mapped again). A third fault, in that map: the pieces still mapped are
 * counted exactly (they read as zeros), and a retry unmaps them in one call (with the old count
 * it would unmap over the hole, which the simulation refuses). Before: the first failure failed
 * the free, and the later faults never came. */
START_TEST(failed_unguard_counts_down)
{
	const struct t_sim *sim;
	cms_context *ctx;
	cms_region *r;
	uint64_t sz[2], p[3], g;
	cmssim_counters c0;
	int i;

	if (!t_is_sim()) /* a GPU: nothing to inject faults with */
		return;
	sim = t_sim();
	ctx = t_ctx();
	r = guarded_region(ctx, "kv", CMS_POLICY_DISCARD);
	sizes_of(r, sz);
	g = granularity(r);
	for (i = 0; i < 3; i++)
		ck_ok(cms_alloc(r, i == 1 ? sz[1] : sz[0], &p[i]));
	ck_ok(cms_region_pause(r, NULL, NULL));
	c0 = t_counters();
	/* one fault: the pieces go one by one */
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(cms_free(ctx, p[0]));
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().mappings, c0.mappings - 3);
	/* the one call fails, the last piece goes, the middle one fails: the last comes back */
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 3, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_free(ctx, p[2]), CMS_ERR_DRIVER);
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().mappings, c0.mappings - 3);
	ck_assert(t_is_zero(0, p[2], sz[0]));
	/* and mapping it again fails too: two pieces left, counted */
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 3, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuMemMap", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	ck_status(cms_free(ctx, p[2]), CMS_ERR_DRIVER);
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_eq(t_counters().mappings, c0.mappings - 4);
	ck_assert(t_is_zero(0, p[2], 2 * GUARD_GRANULES * g)); /* the two pieces kept */
	ck_ok(cms_free(ctx, p[2]));			       /* exactly those two, in one call */
	ck_assert_uint_eq(t_counters().mappings, c0.mappings - 6);
	ck_assert(t_is_zero(0, p[1], sz[1]));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}
END_TEST

enum guard_op { OP_FREE, OP_DESTROY, OP_CREATE };

struct guard_fixture {
	cms_context *ctx;
	cms_region *r;
	uint64_t sz[2], p[2];
};

/* A context with a paused guarded DISCARD region of two allocations (OP_FREE, OP_DESTROY), or
 * with a plain region only (OP_CREATE: its device is set up, its zero handles are not). */
static void guard_setup(struct guard_fixture *f, enum guard_op op)
{
	int i;

	f->ctx = t_ctx();
	if (op == OP_CREATE) {
		f->r = t_region(f->ctx, "plain", 0, CMS_POLICY_DISCARD);
		return;
	}
	f->r = guarded_region(f->ctx, "kv", CMS_POLICY_DISCARD);
	sizes_of(f->r, f->sz);
	for (i = 0; i < 2; i++)
		ck_ok(cms_alloc(f->r, f->sz[i], &f->p[i]));
	ck_ok(cms_region_pause(f->r, NULL, NULL));
}

static cms_status guard_run(struct guard_fixture *f, enum guard_op op)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r;

	if (op == OP_FREE)
		return cms_free(f->ctx, f->p[0]);
	if (op == OP_DESTROY)
		return cms_region_destroy(f->r);
	o.flags = CMS_REGION_GUARD;
	return cms_region_create(f->ctx, "kv", &o, &r);
}

/* Each allocation of f still there reads as zeros (no piece of its guard missing). */
static void guard_intact(struct guard_fixture *f, uint64_t fault)
{
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	int i;

	for (i = 0; i < 2; i++)
		if (cms_pointer_info_get(f->ctx, f->p[i], &pi) == CMS_OK)
			ck_assert_msg(t_is_zero(0, f->p[i], f->sz[i]),
				      "fault %llu: allocation %d not guarded whole after a failure",
				      (unsigned long long)fault, i);
}

/* Every driver call of a free or a destroy of a paused guarded region, and of a guarded region's
 * create, fails in turn (simulation): a failed free or destroy leaves every allocation still
 * there guarded whole (before: the pieces unmapped before the failure stayed unmapped, and
 * stray reads faulted until a resume), a retry succeeds, and a context destroy leaves no driver
 * object (before: a failed create's temporary reservation and zero mapping stayed). */
START_TEST(failed_free_destroy_create_sweep)
{
	enum guard_op op = (enum guard_op)_i;
	const struct t_sim *sim;
	struct guard_fixture f;
	cmssim_counters c0, c1;
	uint64_t calls, i;
	cms_status st;

	if (!t_is_sim()) /* a GPU: nothing to inject faults with */
		return;
	sim = t_sim();
	guard_setup(&f, op); /* dry run: how many driver calls does it make? */
	calls = sim->call_count();
	ck_ok(guard_run(&f, op));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	t_nothing_left(1);
	for (i = 1; i <= calls; i++) {
		guard_setup(&f, op);
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, i, CUDA_ERROR_UNKNOWN), 0);
		st = guard_run(&f, op);
		sim->clear_faults();
		if (st) {
			ck_assert_str_ne(cms_last_error(), "");
			if (op == OP_FREE) { /* nothing changed */
				c1 = t_counters();
				ck_assert_uint_eq(c1.mappings, c0.mappings);
				ck_assert_uint_eq(c1.reservations, c0.reservations);
			}
			if (op != OP_CREATE)
				guard_intact(&f, i);
			ck_ok(guard_run(&f, op)); /* a retry without the fault */
		}
		ck_ok(cms_context_destroy(f.ctx));
		c1 = t_counters();
		ck_assert_msg(
			!c1.handles && !c1.mappings && !c1.reservations,
			"fault %llu (%s): %llu handles, %llu mappings, %llu reservations left",
			(unsigned long long)i, cms_status_name(st), (unsigned long long)c1.handles,
			(unsigned long long)c1.mappings, (unsigned long long)c1.reservations);
	}
	if (op != OP_CREATE)
		return;
	/* the temporary mapping's unmap fails, and again at once: kept, removed at the destroy */
	guard_setup(&f, op);
	c0 = t_counters();
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN), 0);
	ck_ok(guard_run(&f, op)); /* the zero handle is filled: the create succeeds */
	c1 = t_counters();
	ck_assert_uint_eq(c1.reservations, c0.reservations + 1);
	ck_ok(cms_context_destroy(f.ctx));
	t_nothing_left(1);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("guard");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, paused_reads_zeros, 0, 4);
	tcase_add_test(tc, unguarded_read_fails);
	tcase_add_loop_test(tc, swap_guarded, 0, 2); /* DISCARD, HOST */
	tcase_add_test(tc, free_and_destroy_paused);
	tcase_add_test(tc, failed_calls_keep_the_guard);
	tcase_add_test(tc, failed_rollback_leaves_it_guarded);
	tcase_add_test(tc, failed_unguard_counts_down);
	tcase_add_loop_test(tc, failed_free_destroy_create_sweep, 0, 3); /* enum guard_op */
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_DEVICE);
}
