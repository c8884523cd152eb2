/* SPDX-License-Identifier: MIT */
/*
 * test_interplay.c - the 1.3 features together (simulation): a frozen region
 * with CMS_REGION_VERIFY (the pause that copies nothing still checksums, the
 * resume still checks: a backup changed while paused is caught), the flag
 * changed on a frozen region (its backups stay current), cms_swap between a
 * frozen verified region and another verified one, a region frozen while its
 * backups are prepared ahead (CMS_REGION_PREPARE: a prepared buffer holds no
 * content, so the first pause after the freeze copies), a prepared region
 * switched to CMS_REGION_RELEASE_HOST with declared content-free tails and
 * back, verified; a context destroyed while its preparation thread works and
 * its checksum kernel is loaded (ASan: no leak; TSan: no race).
 */
#include <stdio.h>

#include "common.h"

#define NA 4
/* Not all multiples of the 64 KiB granule (CMS_SIM_GRANULARITY=64K). */
static const uint64_t sizes[NA] = { 64 * 1024, 200 * 1024, 1 * MiB + 4096, 256 * 1024 };

static uint64_t logical(void)
{
	return sizes[0] + sizes[1] + sizes[2] + sizes[3];
}

/* A HOST region with flags (device 0). */
static cms_region *region(cms_context *ctx, const char *tag, uint64_t flags)
{
	cms_region *r;

	t_region_flags = flags;
	r = t_region(ctx, tag, 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	return r;
}

static void alloc_fill(cms_region *r, uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NA; i++)
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
	t_fill_each(0, p, sizes, NA, seed);
}

/* A last pause and resume of r (the context's only region): the content of seed; then the
 * context goes, nothing left. */
static void cycle_end(cms_context *ctx, cms_region *r, const uint64_t *p, uint32_t seed)
{
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	t_check_each(0, p, sizes, NA, seed);
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}

/* n pauses and resumes of frozen r: the first copies everything, the later ones nothing;
 * each resume checks every byte (CMS_REGION_VERIFY) and the content is seed's. */
static void frozen_cycles(cms_region *r, const uint64_t *p, int n, uint32_t seed)
{
	cms_region_stats s0, s;
	int k;

	for (k = 0; k < n; k++) {
		s0 = t_stats(r);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		s = t_stats(r);
		ck_assert_uint_eq(s.bytes_to_store - s0.bytes_to_store, k ? 0 : logical());
		ck_assert_uint_eq(s.bytes_unchanged - s0.bytes_unchanged, k ? logical() : 0);
		ck_assert_uint_eq(s.bytes_verified - s0.bytes_verified, logical()); /* resumes */
		t_check_each(0, p, sizes, NA, seed);
	}
}

/* Frozen and verified: every pause checksums (also the ones that copy nothing), every resume
 * checks; a backup changed while paused fails the resume, rolled back, still frozen. */
START_TEST(frozen_verified)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "fv", CMS_REGION_VERIFY);
	cms_region_stats s0;
	uint64_t p[NA], at;

	alloc_fill(r, p, 40);
	ck_ok(cms_region_freeze(r));
	frozen_cycles(r, p, 3, 40);
	/* a pause that copies nothing, then its backup changed: the resume must not take it */
	ck_ok(cms_pause(ctx, "fv", NULL, NULL));
	at = p[2] + 777;
	*t_host_byte(ctx, at) ^= 0x10;
	ck_status(cms_resume(ctx, "fv", NULL, NULL), CMS_ERR_VERIFY_FAILED);
	ck_assert_uint_eq(t_info(r).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(t_info(r).frozen, 1);
	ck_assert_uint_eq(t_info(r).backed_bytes, 0);
	*t_host_byte(ctx, at) ^= 0x10;
	ck_ok(cms_resume(ctx, "fv", NULL, NULL));
	t_check_each(0, p, sizes, NA, 40);
	ck_assert_int_ne(t_write(0, p[0], &at, 4), 0); /* read-only again */
	/* restored whole after the failed one: current again, the next pause copies nothing */
	s0 = t_stats(r);
	ck_ok(cms_pause(ctx, "fv", NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_unchanged - s0.bytes_unchanged, logical());
	ck_ok(cms_resume(ctx, "fv", NULL, NULL));
	t_check_each(0, p, sizes, NA, 40);
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}
END_TEST

/* CMS_REGION_VERIFY changed on a frozen region keeps its backups current (the flag changes
 * no backup): the next pause still copies nothing, and with the flag set again the resume
 * checks the backup that pause did not copy. */
START_TEST(frozen_verify_toggled)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "ft", CMS_REGION_VERIFY);
	cms_region_stats s0;
	uint64_t p[NA];

	alloc_fill(r, p, 45);
	ck_ok(cms_region_freeze(r));
	frozen_cycles(r, p, 2, 45);
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, 0));
	s0 = t_stats(r);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_unchanged - s0.bytes_unchanged, logical());
	ck_ok(cms_region_resume(r, NULL, NULL));
	t_check_each(0, p, sizes, NA, 45);
	ck_ok(cms_region_flags_set(r, CMS_REGION_VERIFY, CMS_REGION_VERIFY));
	s0 = t_stats(r);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_stats(r).bytes_unchanged - s0.bytes_unchanged, logical());
	*t_host_byte(ctx, p[1] + 5) ^= 0x01;
	ck_status(cms_region_resume(r, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	*t_host_byte(ctx, p[1] + 5) ^= 0x01;
	ck_ok(cms_region_resume(r, NULL, NULL));
	cycle_end(ctx, r, p, 45);
}
END_TEST

/* cms_swap between a frozen verified region and a verified one that is not frozen: the frozen
 * side's pauses copy nothing after its first, each resume side checks; a backup of the frozen
 * side changed while it is out fails the swap back, both sides rolled back (the other one
 * active with its content, the frozen one paused), and the next swap restores it read-only. */
START_TEST(swap_frozen_verified)
{
	cms_context *ctx = t_ctx();
	cms_region *a = region(ctx, "a", CMS_REGION_VERIFY);
	cms_region *b = region(ctx, "b", CMS_REGION_VERIFY | CMS_REGION_COALESCE);
	uint64_t pa[NA], pb[NA];
	cms_region_stats s0;
	int k;

	alloc_fill(a, pa, 90);
	alloc_fill(b, pb, 95);
	ck_ok(cms_region_freeze(a));
	ck_ok(cms_region_pause(b, NULL, NULL));
	for (k = 0; k < 2; k++) {
		s0 = t_stats(a);
		ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL));
		ck_assert_uint_eq(t_stats(a).bytes_unchanged - s0.bytes_unchanged,
				  k ? logical() : 0);
		t_check_each(0, pb, sizes, NA, 95);
		ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
		t_check_each(0, pa, sizes, NA, 90);
		ck_assert_int_ne(t_write(0, pa[3], &k, 4), 0); /* read-only after the swap */
	}
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL)); /* a copies nothing */
	*t_host_byte(ctx, pa[1] + 4096) ^= 0x02;
	ck_status(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL), CMS_ERR_VERIFY_FAILED);
	ck_assert_uint_eq(t_info(a).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(t_info(b).state, CMS_STATE_ACTIVE);
	t_check_each(0, pb, sizes, NA, 95);
	*t_host_byte(ctx, pa[1] + 4096) ^= 0x02;
	ck_ok(cms_swap(ctx, "b", "a", NULL, NULL, NULL, NULL));
	t_check_each(0, pa, sizes, NA, 90);
	ck_assert_int_ne(t_write(0, pa[0], &k, 4), 0);
	ck_assert_uint_eq(t_info(a).frozen, 1);
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}
END_TEST

/* A freeze right after an asynchronous resume waits for its copies first: when that wait
 * fails, the freeze fails and changes nothing (not frozen, writable); then it succeeds. */
START_TEST(freeze_after_async_resume)
{
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "fa", 0);
	uint64_t p[NA];
	cms_status st;

	alloc_fill(r, p, 85);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ro.flags = CMS_RESUME_ASYNC;
	ck_ok(cms_region_resume(r, &ro, NULL));
	ck_assert_int_eq(t_sim()->fail_call("cuStreamSynchronize", 1, 999), 0);
	st = cms_region_freeze(r);
	t_sim()->clear_faults();
	ck_assert_msg(st < 0 && st != CMS_ERR_ROLLBACK_FAILED, "freeze: %s", cms_status_name(st));
	ck_assert_uint_eq(t_info(r).frozen, 0);
	ck_assert_int_eq(t_write(0, p[0], &st, 4), 0); /* still writable */
	ck_assert_int_eq(t_fill(0, p[0], sizes[0], 85), 0);
	ck_ok(cms_region_freeze(r));
	ck_assert_uint_eq(t_info(r).frozen, 1);
	t_check_each(0, p, sizes, NA, 85);
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
}
END_TEST

/* Frozen while (or after) its backups are prepared ahead: a prepared buffer holds no content,
 * so the first pause after the freeze copies everything; the later ones nothing. */
START_TEST(frozen_prepared)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "fp", CMS_REGION_PREPARE | CMS_REGION_VERIFY);
	uint64_t p[NA];

	alloc_fill(r, p, 50);
	if (_i == 0) /* frozen while the thread may be making the buffers */
		ck_ok(cms_region_freeze(r));
	ck_assert(t_wait_host_bytes(r, logical(), 0));
	if (_i == 1) /* frozen once they are made */
		ck_ok(cms_region_freeze(r));
	frozen_cycles(r, p, 2, 50);
	ck_ok(cms_region_thaw(r));
	t_fill_each(0, p, sizes, NA, 51);
	cycle_end(ctx, r, p, 51);
}
END_TEST

/* A prepared, verified region switched to CMS_REGION_RELEASE_HOST with content-free tails
 * (short slices), paused and resumed, switched back (prepared again, full slices): the live
 * content each time, only live bytes checked. */
START_TEST(prepared_release_host)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "pr", CMS_REGION_PREPARE | CMS_REGION_VERIFY);
	const uint64_t cut = 128 * 1024; /* the tail of p[2] declared content-free */
	uint64_t p[NA], live = logical() - cut;
	cms_region_stats s0;
	int k;

	alloc_fill(r, p, 60);
	ck_assert(t_wait_host_bytes(r, logical(), 0));
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	ck_assert_uint_eq(t_info(r).host_bytes, 0);
	for (k = 0; k < 2; k++) { /* a declaration lasts one cycle */
		ck_ok(cms_range_discard(ctx, p[2] + sizes[2] - cut, cut));
		s0 = t_stats(r);
		ck_ok(cms_pause(ctx, "pr", NULL, NULL));
		ck_assert_uint_lt(t_info(r).host_bytes, logical()); /* short slice */
		ck_ok(cms_resume(ctx, "pr", NULL, NULL));
		ck_assert_uint_eq(t_stats(r).bytes_verified - s0.bytes_verified, live);
		ck_assert_uint_eq(t_info(r).host_bytes, 0);
		ck_assert_int_eq(t_check_except(0, p[2], sizes[2], 62, sizes[2] - cut, sizes[2]),
				 -1);
	}
	/* back: prepared again (full slices), the tail live again and written */
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
	t_fill_each(0, p, sizes, NA, 70);
	ck_assert(t_wait_host_bytes(r, logical(), 0));
	cycle_end(ctx, r, p, 70);
}
END_TEST

/* A context destroyed while its thread prepares new buffers and the checksum kernel of its
 * device is loaded: nothing left (buffers, registrations, modules). */
START_TEST(destroy_while_preparing)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "dp", CMS_REGION_PREPARE | CMS_REGION_VERIFY);
	uint64_t p[NA], q;
	int k;

	alloc_fill(r, p, 80);
	ck_ok(cms_pause(ctx, "dp", NULL, NULL)); /* loads the kernel */
	ck_ok(cms_resume(ctx, "dp", NULL, NULL));
	for (k = 0; k < 8; k++) /* kicks: the thread has work when the destroy comes */
		ck_ok(cms_alloc(r, 4 * MiB, &q));
	ck_ok(cms_context_destroy(ctx));
	t_nothing_left(1);
	ck_assert_uint_eq(t_counters().modules, 0);
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("interplay");
	TCase *tc = tcase_create("interplay");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, frozen_verified);
	tcase_add_test(tc, frozen_verify_toggled);
	tcase_add_test(tc, swap_frozen_verified);
	tcase_add_test(tc, freeze_after_async_resume);
	tcase_add_loop_test(tc, frozen_prepared, 0, 2);
	tcase_add_test(tc, prepared_release_host);
	tcase_add_test(tc, destroy_while_preparing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(make, T_NEEDS_SIM);
}
