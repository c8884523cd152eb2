/* SPDX-License-Identifier: MIT */
/*
 * test_pageable.c - pageable host backups (CMS_REGION_HOST_PAGEABLE): the
 * flag's rules (HOST only, no CMS_RESUME_ASYNC), content through the staging
 * buffers over cycles with every combination of CMS_REGION_COALESCE,
 * CMS_REGION_GUARD and CMS_REGION_RELEASE_HOST, nothing page-locked but the
 * staging during a call, and the process's anonymous RSS (RssAnon in
 * /proc/self/status) rising by the backup at a pause and falling back after
 * a resume that gives host memory back. On the simulation, device memory is
 * shared memory (memfd: RssShmem), so RssAnon counts the host backups; on a
 * GPU it is not in RSS at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MIB (1024ull * 1024ull)

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static cms_region *region(cms_context *ctx, const char *tag, uint64_t flags)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;

	o.policy = CMS_POLICY_HOST;
	o.flags = flags;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	return r;
}

/* A field of /proc/self/status in bytes (its kB figure times 1024); 0 if absent. */
static uint64_t status_bytes(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	uint64_t kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			kb = strtoull(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb * 1024;
}

START_TEST(flag_rules)
{
	static const uint32_t others[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_DISK };
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r, *bad = NULL;
	uint64_t p;
	size_t i;

	o.flags = CMS_REGION_HOST_PAGEABLE;
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		o.policy = others[i];
		ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
		ck_assert_ptr_null(bad);
		ck_assert_ptr_nonnull(strstr(cms_last_error(), "CMS_REGION_HOST_PAGEABLE"));
	}
	r = region(ctx, "pageable", CMS_REGION_HOST_PAGEABLE);
	ck_assert_uint_eq(info(r).flags, CMS_REGION_HOST_PAGEABLE);
	ck_ok(cms_alloc(r, 3 * MIB + 4096, &p));
	ck_assert_int_eq(t_fill(0, p, 3 * MIB, 5), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	/* An async resume cannot restore through staging after it returns: refused, still
	 * paused with its backup. */
	ro.flags = CMS_RESUME_ASYNC;
	ck_status(cms_region_resume(r, &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "pageable"));
	ck_assert_uint_eq(info(r).state, CMS_STATE_PAUSED);
	ck_status(cms_resume(ctx, "pageable", &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, 3 * MIB, 5), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Sizes: several staging chunks and a tail, less than a chunk, less than a page, a large one. */
static const uint64_t sizes[] = { 5 * MIB + 12345, 100 * 1024, 1000, 17 * MIB };
#define NALLOC (sizeof(sizes) / sizeof(sizes[0]))

/* Content of every combination of the flags that combine with it, over three cycles, with
 * new content written between them; pinned (registered) bytes stay 0 throughout, host_bytes
 * follows RELEASE_HOST. _i: the bits COALESCE, GUARD, RELEASE_HOST. */
START_TEST(content_survives_cycles)
{
	uint64_t flags = CMS_REGION_HOST_PAGEABLE | ((_i & 1) ? CMS_REGION_COALESCE : 0) |
			 ((_i & 2) ? CMS_REGION_GUARD : 0) |
			 ((_i & 4) ? CMS_REGION_RELEASE_HOST : 0);
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "weights", flags);
	uint64_t p[NALLOC], logical = 0;
	cms_region_info ri;
	uint32_t cycle;
	size_t i;

	for (i = 0; i < NALLOC; i++) {
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], sizes[i] & ~3ull, (uint32_t)i), 0);
		logical += sizes[i];
	}
	for (cycle = 0; cycle < 3; cycle++) {
		ck_ok(cms_region_pause(r, NULL, NULL));
		ri = info(r);
		ck_assert_uint_eq(ri.backup_bytes, logical);
		ck_assert_uint_ge(ri.host_bytes, logical);
		ck_assert_uint_eq(ri.pinned_bytes, 0);
		if (t_is_sim()) /* the staging went with the call */
			ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
		if (flags & CMS_REGION_GUARD)
			ck_assert(t_is_zero(0, p[0], sizes[0]));
		ck_ok(cms_region_resume(r, NULL, NULL));
		ri = info(r);
		ck_assert_uint_eq(ri.pinned_bytes, 0);
		if (flags & CMS_REGION_RELEASE_HOST)
			ck_assert_uint_eq(ri.host_bytes, 0);
		else
			ck_assert_uint_ge(ri.host_bytes, logical);
		if (t_is_sim())
			ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
		for (i = 0; i < NALLOC; i++) {
			uint32_t seed = cycle ? (uint32_t)(100 * cycle + i) : (uint32_t)i;

			ck_assert_msg(t_check(0, p[i], sizes[i] & ~3ull, seed) == -1,
				      "flags 0x%llx cycle %u allocation %zu lost its content",
				      (unsigned long long)flags, cycle, i);
			/* the next pause must save this, not what a kept buffer holds */
			ck_assert_int_eq(t_fill(0, p[i], sizes[i] & ~3ull,
						(uint32_t)(100 * (cycle + 1) + i)),
					 0);
		}
	}
	/* A free of a paused pageable allocation gives its slice back. */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_free(ctx, p[3]));
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 0; i < NALLOC - 1; i++)
		ck_assert_int_eq(t_check(0, p[i], sizes[i] & ~3ull, (uint32_t)(300 + i)), -1);
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
}
END_TEST

/* A pageable region and a page-locked one paused and resumed together: each keeps its kind. */
START_TEST(pageable_next_to_pinned)
{
	cms_context *ctx = t_ctx();
	cms_region *pg = region(ctx, "pageable", CMS_REGION_HOST_PAGEABLE);
	cms_region *pin = region(ctx, "pinned", 0);
	uint64_t a, b;
	int cycle;

	ck_ok(cms_alloc(pg, 4 * MIB, &a));
	ck_ok(cms_alloc(pin, 4 * MIB, &b));
	for (cycle = 0; cycle < 2; cycle++) {
		ck_assert_int_eq(t_fill(0, a, 4 * MIB, 40 + (uint32_t)cycle), 0);
		ck_assert_int_eq(t_fill(0, b, 4 * MIB, 50 + (uint32_t)cycle), 0);
		ck_ok(cms_pause(ctx, NULL, NULL, NULL));
		ck_assert_uint_eq(info(pg).pinned_bytes, 0);
		ck_assert_uint_eq(info(pin).pinned_bytes, info(pin).host_bytes);
		if (t_is_sim())
			ck_assert_uint_eq(t_counters().host_registered_bytes,
					  info(pin).pinned_bytes);
		ck_ok(cms_resume(ctx, NULL, NULL, NULL));
		ck_assert_int_eq(t_check(0, a, 4 * MIB, 40 + (uint32_t)cycle), -1);
		ck_assert_int_eq(t_check(0, b, 4 * MIB, 50 + (uint32_t)cycle), -1);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* 64 MiB on the simulation; 512 MiB on a GPU, so that the driver's own host allocations stay
 * well inside the 5% slack. */
/* cms_swap between a pageable region and a page-locked one, both ways, several times (the swap
 * saves in batches while it releases, engine/overlap.c): content and kinds kept. */
START_TEST(swap_with_pageable)
{
	cms_context *ctx = t_ctx();
	cms_region *pg =
		region(ctx, "a", CMS_REGION_HOST_PAGEABLE | (_i ? CMS_REGION_COALESCE : 0));
	cms_region *pin = region(ctx, "b", _i ? CMS_REGION_RELEASE_HOST : 0);
	uint64_t a[2], b[2];
	int i, round;

	for (i = 0; i < 2; i++) {
		ck_ok(cms_alloc(pg, sizes[i], &a[i]));
		ck_ok(cms_alloc(pin, sizes[i + 2], &b[i]));
		ck_assert_int_eq(t_fill(0, a[i], sizes[i] & ~3ull, 60 + (uint32_t)i), 0);
		ck_assert_int_eq(t_fill(0, b[i], sizes[i + 2] & ~3ull, 70 + (uint32_t)i), 0);
	}
	ck_ok(cms_region_pause(pin, NULL, NULL));
	for (round = 0; round < 4; round++) {
		int out_pg = round % 2 == 0;

		ck_ok(cms_swap(ctx, out_pg ? "a" : "b", out_pg ? "b" : "a", NULL, NULL, NULL,
			       NULL));
		ck_assert_uint_eq(info(pg).state, out_pg ? CMS_STATE_PAUSED : CMS_STATE_ACTIVE);
		ck_assert_uint_eq(info(pg).pinned_bytes, 0);
		for (i = 0; i < 2; i++) {
			if (out_pg)
				ck_assert_int_eq(
					t_check(0, b[i], sizes[i + 2] & ~3ull, 70 + (uint32_t)i),
					-1);
			else
				ck_assert_int_eq(
					t_check(0, a[i], sizes[i] & ~3ull, 60 + (uint32_t)i), -1);
		}
	}
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
}
END_TEST

#define RSS_BYTES (t_is_sim() ? 64 * MIB : 512 * MIB)
/* Slack: 5%; a quarter under AddressSanitizer, whose shadow of the buffers (an eighth of them,
 * touched by its checks of each memcpy) and quarantine of the test's own buffers stay in RSS,
 * and under ThreadSanitizer, whose shadow pages of the first and last bytes of each simulated
 * copy (sim_device_move: one per granule restored) stay too. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_SLACK_DIV 4
#else
#define RSS_SLACK_DIV 20
#endif

/* RssAnon rises by the backup at a pause; with RELEASE_HOST (_i 1) it falls back after the
 * resume, to within 5% of the backup over its level before the pause; without (_i 0) the
 * buffer stays for the next cycle. */
START_TEST(rss_follows_backups)
{
	uint64_t flags = CMS_REGION_HOST_PAGEABLE | (_i ? CMS_REGION_RELEASE_HOST : 0);
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "rss", flags);
	uint64_t p, before, paused, after, slack = RSS_BYTES / RSS_SLACK_DIV;
	int cycle;

	ck_ok(cms_alloc(r, RSS_BYTES, &p));
	ck_assert_int_eq(t_fill(0, p, RSS_BYTES, 9), 0);
	for (cycle = 0; cycle < 2; cycle++) {
		before = status_bytes("RssAnon");
		ck_ok(cms_region_pause(r, NULL, NULL));
		paused = status_bytes("RssAnon");
		ck_ok(cms_region_resume(r, NULL, NULL));
		after = status_bytes("RssAnon");
		printf("flags 0x%llx cycle %d: RssAnon %llu -> %llu (paused) -> %llu kB\n",
		       (unsigned long long)flags, cycle, (unsigned long long)(before >> 10),
		       (unsigned long long)(paused >> 10), (unsigned long long)(after >> 10));
		ck_assert_int_eq(t_check(0, p, RSS_BYTES, 9), -1);
		if (_i) {
			ck_assert_uint_ge(paused, before + RSS_BYTES - slack);
			ck_assert_uint_le(after + RSS_BYTES - slack, paused);
#if !defined(__SANITIZE_ADDRESS__) /* its shadow and quarantine grow RSS by more */
			ck_assert_uint_le(after, before + slack);
#endif
		} else if (!cycle) {
			ck_assert_uint_ge(paused, before + RSS_BYTES - slack);
			ck_assert_uint_ge(after, before + RSS_BYTES - slack); /* kept */
		} else {
			/* the kept buffer is reused: no new memory */
			ck_assert_uint_le(paused, before + slack);
		}
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The host-buffer switches of the tunables (CMS_TUNABLES) keep every cycle correct,
 * page-locked and non-retaining cycles included: each mode, two cycles of a HOST region with
 * RELEASE_HOST big enough for worker threads (64 MiB and more) and of a small pageable one.
 * lazyfree keeps the buffers without users (host_bytes) until the region goes; the others give them
 * back. */
START_TEST(lab_prep_modes)
{
	static const char *const modes[] = { "",	  "hugetlb",
					     "nothp",	  "noprefault",
					     "threads:3", "slice:5",
					     "lazyfree",  "lazyfree,threads:2,slice:7" };
	const char *mode = modes[_i];
	cms_context *ctx;
	cms_region *r[2];
	uint64_t p[2][3], sz[3] = { 40 * MIB, 24 * MIB + 4096, 3 * MIB };
	int cycle, k, i;

	ck_assert_int_eq(setenv("CMS_TUNABLES", mode, 1), 0);
	ctx = t_ctx();
	r[0] = region(ctx, "pinned", CMS_REGION_RELEASE_HOST);
	r[1] = region(ctx, "pageable", CMS_REGION_RELEASE_HOST | CMS_REGION_HOST_PAGEABLE);
	for (k = 0; k < 2; k++)
		for (i = 0; i < 3; i++)
			ck_ok(cms_alloc(r[k], sz[i] >> (4 * k), &p[k][i]));
	for (cycle = 0; cycle < 2; cycle++) /* the second reuses lazy buffers */ {
		for (k = 0; k < 2; k++)
			for (i = 0; i < 3; i++)
				ck_assert_int_eq(t_fill(0, p[k][i], sz[i] >> (4 * k),
							(uint32_t)(cycle * 10 + k * 3 + i)),
						 0);
		ck_ok(cms_pause(ctx, NULL, NULL, NULL));
		ck_assert_uint_eq(info(r[0]).pinned_bytes, info(r[0]).host_bytes);
		ck_ok(cms_resume(ctx, NULL, NULL, NULL));
		for (k = 0; k < 2; k++) {
			for (i = 0; i < 3; i++)
				ck_assert_msg(t_check(0, p[k][i], sz[i] >> (4 * k),
						      (uint32_t)(cycle * 10 + k * 3 + i)) == -1,
					      "CMS_TUNABLES=%s cycle %d region %d allocation %d "
					      "lost its content",
					      mode, cycle, k, i);
			ck_assert_uint_eq(info(r[k]).pinned_bytes, 0);
			if (strstr(mode, "lazyfree"))
				ck_assert_uint_ge(info(r[k]).host_bytes,
						  (sz[0] + sz[1] + sz[2]) >> (4 * k));
			else
				ck_assert_uint_eq(info(r[k]).host_bytes, 0);
		}
	}
	ck_ok(cms_region_destroy(r[0])); /* its kept buffers go with it */
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
	unsetenv("CMS_TUNABLES");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("pageable");
	TCase *tc = tcase_create("pageable");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, flag_rules);
	tcase_add_loop_test(tc, content_survives_cycles, 0, 8);
	tcase_add_test(tc, pageable_next_to_pinned);
	tcase_add_loop_test(tc, swap_with_pageable, 0, 2);
	tcase_add_loop_test(tc, rss_follows_backups, 0, 2);
	tcase_add_loop_test(tc, lab_prep_modes, 0, 8);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
