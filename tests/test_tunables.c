/* SPDX-License-Identifier: MIT */
/*
 * test_tunables.c - CMS_TUNABLES (docs/internals.md, "Tunables"): a token that is
 * malformed, overflows, or falls outside its key's range (a staging size that is
 * not whole 4 KiB blocks, zero, negative, huge) changes nothing and is logged as a
 * warning that names it; the context then pauses and resumes DISK, pageable HOST
 * and chunked regions with content intact, as with the sizes it had. Valid tokens
 * are taken without a warning, and a size relative to the granularity is brought
 * into its key's range on the device; the chunk size into whole granules, at least
 * two (else none), with a warning when it was not.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

struct logcap {
	int warns;
	char first[512]; /* the first warning */
};

static void cap_log(void *user, int32_t level, const char *msg)
{
	struct logcap *c = user;

	if (level != CMS_LOG_WARN)
		return;
	if (!c->warns++)
		snprintf(c->first, sizeof(c->first), "%s", msg);
}

/* A context whose driver was loaded (so its tunables read) with CMS_TUNABLES=text, logging
 * its warnings into cap. */
static cms_context *ctx_with(const char *text, struct logcap *cap)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	cms_context *ctx = NULL;

	memset(cap, 0, sizeof(*cap));
	o.log_fn = cap_log;
	o.log_user = cap;
	o.log_level = CMS_LOG_WARN;
	ck_assert_int_eq(setenv("CMS_TUNABLES", text, 1), 0);
	ck_ok(cms_context_create(&o, &ctx));
	ck_ok(cms_device_memory_info(ctx, 0, NULL, NULL)); /* loads the driver */
	ck_assert_int_eq(unsetenv("CMS_TUNABLES"), 0);
	return ctx;
}

/* Odd sizes, together above the simulation's 1 MiB DISK staging buffer. */
#define NALLOC 3
static const uint64_t sizes[NALLOC] = { 3 * MiB + 8, 4100, 1 * MiB };

/* A region of policy and flags: allocations of sizes[] (or n of 64 KiB), filled, paused,
 * resumed and checked. */
static void cycle(cms_context *ctx, const char *tag, uint32_t policy, uint64_t flags,
		  const char *dir, uint32_t seed)
{
	uint64_t p[NALLOC], sz[NALLOC];
	cms_region *r;
	int i;

	t_region_flags = flags;
	r = t_region(ctx, tag, 0, policy);
	t_region_flags = 0;
	if (dir)
		ck_ok(cms_region_disk_dir_set(r, dir));
	for (i = 0; i < NALLOC; i++) {
		sz[i] = flags & CMS_REGION_CHUNKS ? 64 * 1024 : sizes[i];
		ck_ok(cms_alloc(r, sz[i], &p[i]));
	}
	t_fill_each(0, p, sz, NALLOC, seed);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	t_check_each(0, p, sz, NALLOC, seed);
	ck_ok(cms_region_destroy(r));
}

/* What every staging size and the chunk size reach: DISK, pageable HOST, chunks. */
static void exercise(cms_context *ctx)
{
	const char *t = getenv("TMPDIR");
	char dir[256];

	snprintf(dir, sizeof(dir), "%s/cms-tune-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	cycle(ctx, "disk", CMS_POLICY_DISK, 0, dir, 1);
	cycle(ctx, "pageable", CMS_POLICY_HOST, CMS_REGION_HOST_PAGEABLE, NULL, 2);
	cycle(ctx, "chunks", CMS_POLICY_HOST, CMS_REGION_COALESCE | CMS_REGION_CHUNKS, NULL, 3);
	ck_assert_int_eq(rmdir(dir), 0); /* nothing left in it */
}

#define LONG_TOKEN                                                                                \
	"disk_stage=1000000000000000000000000000000000000000000000000000000000000000000000000000" \
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000000"

static const struct bad {
	const char *what; /* the class */
	const char *text; /* CMS_TUNABLES */
	const char *says; /* in the warning (NULL: the text) */
} bad[] = {
	{ "misaligned", "disk_stage=4097", NULL },
	{ "misaligned", "disk_stage=1000", NULL },
	{ "misaligned", "disk_stage=1", NULL },
	{ "misaligned", "host_stage=4097", NULL },
	{ "misaligned", "run_chunk=65537", NULL },
	{ "overflow", "disk_stage=17179869184G", NULL }, /* 2^64: was 0 */
	{ "overflow", "host_stage=18446744073709551616", NULL },
	{ "overflow", "run_chunk=99999999999999999999999g", NULL },
	{ "overflow", "disk_stage=g/4294967296", NULL },
	{ "negative", "disk_stage=-1", NULL }, /* was 2^64 - 1 */
	{ "negative", "host_stage=-4096", NULL },
	{ "negative", "overlap_batch=-1", NULL },
	{ "negative", "run_chunk=-1g", NULL },
	{ "negative", "threads:-1", NULL },
	{ "negative", "disk_threads:-1", NULL },
	{ "zero", "disk_stage=0", NULL }, /* every DISK pause failed */
	{ "zero", "host_stage=0", NULL }, /* every pageable HOST pause failed */
	{ "zero", "disk_stage=0g", NULL },
	{ "zero", "disk_stage=g/0", NULL },
	{ "zero", "overlap_batch=0", NULL },
	{ "zero", "host_group=0", NULL },
	{ "zero", "threads:0", NULL },
	{ "zero", "slice:0", NULL },
	{ "zero", "disk_threads:0", NULL },
	{ "huge", "run_chunk=4294967295g", NULL }, /* a 96 GiB calloc */
	{ "huge", "run_chunk=32G", NULL },
	{ "huge", "disk_stage=2G", NULL },
	{ "huge", "host_stage=4096G", NULL },
	{ "huge", "host_group=2048G", NULL },
	{ "huge", "threads:65", NULL },
	{ "huge", "slice:1025", NULL },
	{ "huge", "disk_threads:17", "outside 1..16" },
	{ "malformed", "disk_stage=", NULL },
	{ "malformed", "disk_stage=1MB", NULL },
	{ "malformed", "disk_stage=abc", NULL },
	{ "malformed", "disk_stage= 4096", NULL },
	{ "malformed", "disk_stage=+4096", NULL },
	{ "malformed", "disk_stage=4096 ", NULL },
	{ "malformed", "disk_stage=0x1000", NULL },
	{ "malformed", "run_chunk=g/", NULL },
	{ "malformed", "threads:2x", NULL },
	{ "malformed", "disk_threads:4x", NULL },
	{ "malformed", "disk_threads", NULL },
	{ "malformed", "disk_stgae=1M", NULL },
	{ "malformed", "hugetlb=1", NULL },
	{ "malformed", LONG_TOKEN, "a token of" },
};

/* One refused token: one warning naming it; the sizes the context had work on. */
START_TEST(refused_with_a_warning)
{
	const struct bad *b = &bad[_i];
	struct logcap cap;
	cms_context *ctx = ctx_with(b->text, &cap);

	ck_assert_msg(cap.warns == 1, "%s CMS_TUNABLES=%s: %d warnings", b->what, b->text,
		      cap.warns);
	ck_assert_msg(strstr(cap.first, "CMS_TUNABLES") &&
			      strstr(cap.first, b->says ? b->says : b->text),
		      "%s CMS_TUNABLES=%s: warning \"%s\"", b->what, b->text, cap.first);
	exercise(ctx);
	ck_assert_int_eq(cap.warns, 1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Tokens in range, smallest and largest, with and without suffixes and granules: no warning. */
START_TEST(valid_tokens_are_taken)
{
	static const char *const good[] = {
		"overlap_batch=1,host_group=4K,host_stage=4K,disk_stage=4K,run_chunk=0,threads:1,"
		"slice:1,nothp,noprefault,lazyfree,disk_threads:1",
		"overlap_batch=1024G,host_group=1024G,host_stage=1G,disk_stage=1G,run_chunk=8M,"
		"threads:64,slice:1024,disk_threads:16",
		"overlap_batch=g/2,host_group=2g,host_stage=8K,disk_stage=12K,run_chunk=4M",
		",disk_stage=64K,,run_chunk=4g,",
	};
	struct logcap cap;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		cms_context *ctx = ctx_with(good[i], &cap);

		ck_assert_msg(cap.warns == 0, "CMS_TUNABLES=%s: \"%s\"", good[i], cap.first);
		exercise(ctx);
		ck_assert_int_eq(cap.warns, 0);
		ck_ok(cms_context_destroy(ctx));
	}
}
END_TEST

/* Staging sizes relative to the granularity whose bytes are not whole 4 KiB blocks (a third of
 * 64 KiB) or less than one (a 1024th): each device gets them in range (DISK I/O was in whole
 * blocks into buffers sized as given, past their end). */
START_TEST(granule_sizes_kept_in_range)
{
	struct logcap cap;
	cms_context *ctx = ctx_with("disk_stage=g/3,host_stage=g/3", &cap);

	ck_assert_int_eq(cap.warns, 0);
	exercise(ctx);
	ck_ok(cms_context_destroy(ctx));
	ctx = ctx_with("disk_stage=g/1024,host_stage=g/1024,overlap_batch=g/4294967295", &cap);
	ck_assert_int_eq(cap.warns, 0);
	exercise(ctx);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The granularity of device 0. */
static uint64_t granularity(void)
{
	struct logcap cap;
	cms_context *ctx = ctx_with("", &cap);
	cms_region *r = t_region(ctx, "g", 0, CMS_POLICY_HOST);
	uint64_t g = t_info(r).granularity;

	ck_ok(cms_context_destroy(ctx));
	return g;
}

/* The chunk size is whole granules on a device, at least two: one that is not (a granule and
 * a half, 16 and a page, a half, one) is rounded down (under two granules: 0, no chunks) with
 * one warning naming it; whole granules take none. Three allocations of a granule in a
 * chunked region hold the tail of their chunk (retained_bytes) only when chunks are on: 13
 * granules of a chunk of 16, one of the second chunk of 2. (A chunk size that
 * was not whole granules turned chunks off without a word.) */
START_TEST(chunk_size_in_whole_granules)
{
	const uint64_t g = granularity();
	const struct {
		uint64_t bytes, tail; /* given; granules of tail held after three allocations */
		bool warns;
	} c[] = {
		{ 16 * g + 4096, 13, true }, { g + g / 2, 0, true },
		{ g / 2, 0, true },	     { g, 0, true },
		{ 2 * g, 1, false },	     { 16 * g, 13, false },
	};
	char text[64];
	struct logcap cap;
	uint64_t p[3];
	cms_context *ctx;
	cms_region *r;
	size_t i, j;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		snprintf(text, sizeof(text), "run_chunk=%lluK",
			 (unsigned long long)(c[i].bytes >> 10));
		ctx = ctx_with(text, &cap);
		ck_assert_msg(cap.warns == c[i].warns, "CMS_TUNABLES=%s: %d warnings (\"%s\")",
			      text, cap.warns, cap.first);
		ck_assert_msg(!c[i].warns || strstr(cap.first, "run_chunk"),
			      "CMS_TUNABLES=%s: warning \"%s\"", text, cap.first);
		t_region_flags = CMS_REGION_COALESCE | CMS_REGION_CHUNKS;
		r = t_region(ctx, "chunks", 0, CMS_POLICY_HOST);
		t_region_flags = 0;
		for (j = 0; j < 3; j++)
			ck_ok(cms_alloc(r, g, &p[j]));
		ck_assert_msg(t_info(r).retained_bytes == c[i].tail * g,
			      "CMS_TUNABLES=%s: %llu bytes retained", text,
			      (unsigned long long)t_info(r).retained_bytes);
		ck_ok(cms_context_destroy(ctx));
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tunables");
	TCase *tc = tcase_create("tunables");

	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, refused_with_a_warning, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, valid_tokens_are_taken);
	tcase_add_test(tc, granule_sizes_kept_in_range);
	tcase_add_test(tc, chunk_size_in_whole_granules);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
