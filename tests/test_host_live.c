/* SPDX-License-Identifier: MIT */
/*
 * test_host_live.c - non-retaining HOST backups (CMS_REGION_RELEASE_HOST)
 * make host memory for the bytes they copy, not for whole allocations: a
 * PyTorch pool declares its free blocks content-free (cms_range_discard) and
 * most of them are the tails of its segments (a smaller block carved from the
 * start of a freed one). Such a pause faults in, page-locks and counts in
 * host_bytes the allocations' live extents only (each up to its last live
 * byte, page-rounded), while a backup stays readable at info->host over the
 * allocation's whole size (cms_backup_get's contract). A slice made that
 * short and then retained (RELEASE_HOST cleared while paused) is replaced by
 * the next pause that copies past it.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define KIB 1024ull
#define NA 48

/* A model-like pool: segments of 1..40 granules; segment i keeps a live head of live[i] bytes
 * (4 KiB multiples; 0: all free) and declares the rest free; every fourth also has a free block
 * in the middle of its head. */
struct pool {
	uint64_t ptr[NA], size[NA], live[NA], hole[NA];
	uint64_t live_extent_pages; /* sum of page-rounded live extents */
	uint64_t total;
};

static void pool_make(cms_context *ctx, cms_region *r, struct pool *p)
{
	uint64_t g = t_info(r).granularity;
	int i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < NA; i++) {
		p->size[i] = g * (uint64_t)(1 + (i * 7) % 40);
		p->live[i] = i % 6 == 5 ? 0 : (p->size[i] / 2 + 4 * KIB * (uint64_t)(i % 3));
		if (p->live[i] > p->size[i])
			p->live[i] = p->size[i];
		ck_ok(cms_alloc(r, p->size[i], &p->ptr[i]));
		ck_assert_int_eq(t_fill(0, p->ptr[i], p->size[i], 100 + (uint32_t)i), 0);
		if (p->live[i] < p->size[i])
			ck_ok(cms_range_discard(ctx, p->ptr[i] + p->live[i],
						p->size[i] - p->live[i]));
		if (i % 4 == 0 && p->live[i] >= 16 * KIB) {
			p->hole[i] = 8 * KIB;
			ck_ok(cms_range_discard(ctx, p->ptr[i] + 4 * KIB, p->hole[i]));
		}
		p->live_extent_pages += p->live[i]; /* multiples of 4 KiB */
		p->total += p->size[i];
	}
}

/* The live bytes of every segment hold their pattern. */
static void pool_check(const struct pool *p)
{
	int i;

	for (i = 0; i < NA; i++) {
		if (!p->live[i])
			continue;
		ck_assert_int_eq(t_check_except(0, p->ptr[i], p->live[i], 100 + (uint32_t)i,
						4 * KIB, 4 * KIB + p->hole[i]),
				 -1);
	}
}

START_TEST(release_host_backs_live_extents)
{
	cms_context *ctx = t_ctx();
	cms_region *r;
	struct pool p;
	cms_region_info ri;
	cmssim_counters c;
	int i;

	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "pool", 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	pool_make(ctx, r, &p);
	ck_assert_uint_lt(p.live_extent_pages, p.total / 2 + p.total / 4);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ri = t_info(r);
	/* Host memory for the live extents, not the segments' 2x. */
	ck_assert_uint_eq(ri.host_bytes, p.live_extent_pages);
	ck_assert_uint_le(ri.pinned_bytes, ri.host_bytes);
	if (t_is_sim()) {
		c = t_counters();
		ck_assert_uint_eq(c.host_buffer_bytes, p.live_extent_pages);
		ck_assert_uint_eq(c.host_registered_bytes, p.live_extent_pages);
	}
	/* Each backup is readable over its whole size; its live bytes hold the content. */
	for (i = 0; i < NA; i++) {
		cms_backup_info bi = { .struct_size = sizeof(bi) };
		const volatile unsigned char *h;
		uint64_t off, sum = 0;

		ck_ok(cms_backup_get(ctx, p.ptr[i], &bi));
		ck_assert_uint_eq(bi.size, p.size[i]);
		h = bi.host;
		for (off = 0; off < p.size[i]; off += 4 * KIB)
			sum += h[off];
		(void)sum;
		ck_assert_msg(t_host_check_except(bi.host, p.live[i], 100 + (uint32_t)i, 4 * KIB,
						  4 * KIB + p.hole[i]) == -1,
			      "allocation %d: its backup differs from the content", i);
	}
	ck_ok(cms_region_resume(r, NULL, NULL));
	pool_check(&p);
	ck_assert_uint_eq(t_info(r).host_bytes, 0);
	/* The next cycle does the same (the declarations went with the resume: declared again). */
	for (i = 0; i < NA; i++) {
		if (p.live[i] < p.size[i])
			ck_ok(cms_range_discard(ctx, p.ptr[i] + p.live[i], p.size[i] - p.live[i]));
		if (p.hole[i])
			ck_ok(cms_range_discard(ctx, p.ptr[i] + 4 * KIB, p.hole[i]));
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).host_bytes, p.live_extent_pages);
	ck_ok(cms_region_resume(r, NULL, NULL));
	pool_check(&p);
	for (i = 0; i < NA; i++)
		ck_ok(cms_free(ctx, p.ptr[i]));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
}
END_TEST

/* Retaining regions keep whole slices: the next pause may copy any byte. */
START_TEST(retaining_backs_whole_allocations)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "pool", 0, CMS_POLICY_HOST);
	struct pool p;
	int i;

	pool_make(ctx, r, &p);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).host_bytes, p.total);
	ck_ok(cms_region_resume(r, NULL, NULL));
	pool_check(&p);
	for (i = 0; i < NA; i++)
		ck_ok(cms_free(ctx, p.ptr[i]));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/*
 * Two allocations of 4 granules in one non-retaining region's buffer, a's last 3 declared: a
 * pause makes a's slice short (1 granule); RELEASE_HOST cleared while paused, so the resume
 * retains it. Returns the region; *host is a's backup while paused.
 */
static cms_region *pair_short_retained(cms_context *ctx, uint64_t *a, uint64_t *b,
				       unsigned char **host)
{
	cms_region *r;
	uint64_t g;

	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "pair", 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	g = t_info(r).granularity;
	ck_ok(cms_alloc(r, 4 * g, a));
	ck_ok(cms_alloc(r, 4 * g, b));
	ck_assert_int_eq(t_fill(0, *a, 4 * g, 1), 0);
	ck_assert_int_eq(t_fill(0, *b, 4 * g, 2), 0);
	ck_ok(cms_range_discard(ctx, *a + g, 3 * g));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).host_bytes, 5 * g);
	*host = t_host_byte(ctx, *a);
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).host_bytes, 5 * g); /* retained, a's slice short */
	return r;
}

/*
 * A short slice kept: RELEASE_HOST cleared while paused, so the resume retains it. The next
 * pause copies the allocation whole (no declaration): its slice is replaced, not overrun into
 * its neighbour's (both in one buffer).
 */
START_TEST(retained_short_slice_replaced)
{
	cms_context *ctx = t_ctx();
	unsigned char *host;
	uint64_t g, a, b;
	cms_region *r;

	r = pair_short_retained(ctx, &a, &b, &host);
	g = t_info(r).granularity;
	ck_assert_int_eq(t_fill(0, a, 4 * g, 3), 0);
	ck_assert_int_eq(t_fill(0, b, 4 * g, 4), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, a, 4 * g, 3), -1);
	ck_assert_int_eq(t_check(0, b, 4 * g, 4), -1);
	ck_ok(cms_free(ctx, a));
	ck_ok(cms_free(ctx, b));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
}
END_TEST

/*
 * A short slice kept while the live extent still fits it: the next pause declares the same tail
 * (as the drop-in does at each pause), copies into the same slice and neither makes nor
 * page-locks host memory; the backup keeps its address (torch_memory_saver's
 * get_cpu_backup(zero_copy=True) with retention on).
 */
START_TEST(retained_short_slice_kept_while_live_fits)
{
	cms_context *ctx = t_ctx();
	unsigned char *host;
	uint64_t g, a, b;
	cms_region *r;

	r = pair_short_retained(ctx, &a, &b, &host);
	g = t_info(r).granularity;
	ck_assert_int_eq(t_fill(0, a, g, 3), 0);
	ck_assert_int_eq(t_fill(0, b, 4 * g, 4), 0);
	ck_ok(cms_range_discard(ctx, a + g, 3 * g));
	if (t_is_sim()) { /* a new buffer or page-locking would fail the pause */
		ck_assert_int_eq(t_sim()->fail_host_alloc(1), 0);
		ck_assert_int_eq(t_sim()->fail_call("cuMemHostRegister", 1, CUDA_ERROR_UNKNOWN), 0);
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	if (t_is_sim()) {
		ck_assert_int_eq(t_sim()->armed_faults(), 2);
		t_sim()->clear_faults();
	}
	ck_assert_ptr_eq(t_host_byte(ctx, a), host);
	ck_assert_uint_eq(t_info(r).host_bytes, 5 * g);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, a, g, 3), -1);
	ck_assert_int_eq(t_check(0, b, 4 * g, 4), -1);
	ck_ok(cms_free(ctx, a));
	ck_ok(cms_free(ctx, b));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The same alone in its buffer: letting go of it unregisters the buffer. When the driver
 * refuses, the pause fails and changes nothing; the next one replaces the slice. */
START_TEST(retained_short_slice_unregister_fails)
{
	cms_context *ctx = t_ctx();
	uint64_t g, a;
	cms_region *r;

	if (!t_is_sim())
		return;
	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "one", 0, CMS_POLICY_HOST);
	t_region_flags = 0;
	g = t_info(r).granularity;
	ck_ok(cms_alloc(r, 4 * g, &a));
	ck_assert_int_eq(t_fill(0, a, 4 * g, 1), 0);
	ck_ok(cms_range_discard(ctx, a + g, 3 * g));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).pinned_bytes, g);
	ck_assert_int_eq(t_fill(0, a, 4 * g, 2), 0);
	ck_assert_int_eq(t_sim()->fail_call("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_status(cms_region_pause(r, NULL, NULL), CMS_ERR_DRIVER);
	ck_assert_int_eq(t_info(r).state, CMS_STATE_ACTIVE);
	ck_assert_uint_eq(t_info(r).pinned_bytes, g); /* the short slice kept */
	ck_assert_int_eq(t_check(0, a, 4 * g, 2), -1);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).host_bytes, 4 * g);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, a, 4 * g, 2), -1);
	ck_ok(cms_free(ctx, a));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(t_counters().host_buffers, 0);
	ck_assert_uint_eq(t_counters().host_registrations, 0);
}
END_TEST

/*
 * A short slice kept in a buffer that holds its whole allocation (a buffer kept without users,
 * CMS_TUNABLES=lazyfree, reused by the next pause) stays readable over the allocation's size
 * (cms_backup_get's contract) when the region trims its holes: a free with more than one
 * buffer's worth of holes (group_max, 16 granules on the simulation) must not unmap the bytes
 * past the slice, neither while the retained backup is read nor after the next pause kept the
 * slice (the live extent fits it).
 */
START_TEST(short_slice_reach_survives_trim)
{
	cms_context *ctx;
	unsigned char buf[8];
	uint64_t g, a, d;
	cms_region *r;

	if (!t_is_sim()) /* group_max is 1 GiB on a GPU */
		return;
	ck_assert_int_eq(setenv("CMS_TUNABLES", "lazyfree", 1), 0);
	ctx = t_ctx();
	t_region_flags = CMS_REGION_RELEASE_HOST;
	r = t_region(ctx, "reach", 0, CMS_POLICY_HOST); /* loads the driver and the tunables */
	t_region_flags = 0;
	unsetenv("CMS_TUNABLES");
	g = t_info(r).granularity;
	ck_ok(cms_alloc(r, 20 * g, &a));
	ck_assert_int_eq(t_fill(0, a, 20 * g, 1), 0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).host_bytes, 20 * g); /* kept without users (lazyfree) */
	ck_assert_int_eq(t_fill(0, a, g, 2), 0);
	ck_ok(cms_range_discard(ctx, a + g, 19 * g));
	ck_ok(cms_region_pause(r, NULL, NULL)); /* a's short slice at the start of that buffer */
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
	ck_ok(cms_region_resume(r, NULL, NULL)); /* retained: 19 granules of holes after it */
	ck_ok(cms_alloc(r, g, &d));
	ck_ok(cms_free(ctx, d)); /* trims the holes */
	ck_ok(cms_backup_read(ctx, a + 19 * g, buf, sizeof(buf)));
	ck_assert_int_eq(t_fill(0, a, g, 3), 0);
	ck_ok(cms_range_discard(ctx, a + g, 19 * g));
	ck_ok(cms_region_pause(r, NULL, NULL)); /* the short slice kept: the live extent fits */
	ck_ok(cms_backup_read(ctx, a + 10 * g, buf, sizeof(buf)));
	buf[0] = *t_host_byte(ctx, a + 20 * g - 1);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, a, g, 3), -1);
	ck_ok(cms_free(ctx, a));
	ck_ok(cms_region_destroy(r));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(t_counters().host_buffers, 0);
	ck_assert_uint_eq(t_counters().host_registrations, 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("host_live");
	TCase *tc = tcase_create("host_live");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, release_host_backs_live_extents);
	tcase_add_test(tc, retaining_backs_whole_allocations);
	tcase_add_test(tc, retained_short_slice_replaced);
	tcase_add_test(tc, retained_short_slice_kept_while_live_fits);
	tcase_add_test(tc, retained_short_slice_unregister_fails);
	tcase_add_test(tc, short_slice_reach_survives_trim);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
