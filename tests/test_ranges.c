/* SPDX-License-Identifier: MIT */
/*
 * test_ranges.c - content-free ranges (cms_range_discard, cms_range_keep,
 * since 1.2): a HOST or DISK pause copies only the live pieces and the resume
 * restores only those (bytes counted by the results and the region's stats,
 * live content intact; on the simulation, whose fresh memory holds a poison
 * byte, the declared bytes are seen not restored); declarations merge and
 * split; they end at the resume, at cms_range_keep and at the free; a paused
 * region refuses them; bad input.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

#include "common.h"

#define NA 3

struct fx {
	cms_context *ctx;
	cms_region *r;
	uint64_t g;	   /* granularity */
	uint64_t size[NA]; /* bytes; multiples of 4 */
	uint64_t p[NA];
	char dir[256]; /* DISK */
};

static void setup(struct fx *f, uint32_t policy)
{
	cms_region_info ri = { .struct_size = sizeof(ri) };
	int i;

	memset(f, 0, sizeof(*f));
	f->ctx = t_ctx();
	f->r = t_region(f->ctx, "r", 0, policy);
	ck_ok(cms_region_info_get(f->r, &ri));
	f->g = ri.granularity;
	f->size[0] = 3 * f->g + 8; /* adjacent allocations: their backups share copies */
	f->size[1] = 2 * f->g;
	f->size[2] = f->g / 2;
	if (policy == CMS_POLICY_DISK) {
		const char *t = getenv("TMPDIR");

		snprintf(f->dir, sizeof(f->dir), "%s/cms-ranges-XXXXXX", t && *t ? t : "/tmp");
		ck_assert_ptr_nonnull(mkdtemp(f->dir));
		ck_ok(cms_region_disk_dir_set(f->r, f->dir));
	}
	for (i = 0; i < NA; i++) {
		ck_ok(cms_alloc(f->r, f->size[i], &f->p[i]));
		ck_assert_int_eq(t_fill(0, f->p[i], f->size[i], 100u + (uint32_t)i), 0);
	}
}

static void teardown(struct fx *f)
{
	ck_ok(cms_context_destroy(f->ctx));
	if (f->dir[0])
		rmdir(f->dir);
}

static uint64_t total(const struct fx *f)
{
	return f->size[0] + f->size[1] + f->size[2];
}

static cms_region_stats stats(cms_region *r)
{
	cms_region_stats s = { .struct_size = sizeof(s) };

	ck_ok(cms_region_stats_get(r, &s));
	return s;
}

/* One pause/resume cycle: bytes copied each way (results), checked against the stats. */
static void cycle(struct fx *f, uint64_t *out, uint64_t *in)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_region_stats s0 = stats(f->r), s1;

	ck_ok(cms_region_pause(f->r, NULL, &pr));
	ck_ok(cms_region_resume(f->r, NULL, &rr));
	s1 = stats(f->r);
	*out = pr.bytes_backed_up;
	*in = rr.bytes_restored;
	ck_assert_uint_eq(s1.bytes_to_store - s0.bytes_to_store, *out);
	ck_assert_uint_eq(s1.bytes_from_store - s0.bytes_from_store, *in);
}

static void live_pieces(uint32_t policy)
{
	uint64_t out, in, lo0, lo1, hi1;
	struct fx f;

	setup(&f, policy);
	/* The tail of allocation 0 (the next one's backup follows it: a merged copy splits)
	 * and the middle of allocation 1. */
	lo0 = f.g + 4;
	lo1 = f.g / 2;
	hi1 = f.g + f.g / 4;
	ck_ok(cms_range_discard(f.ctx, f.p[0] + lo0, f.size[0] - lo0));
	ck_ok(cms_range_discard(f.ctx, f.p[1] + lo1, hi1 - lo1));
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, total(&f) - (f.size[0] - lo0) - (hi1 - lo1));
	ck_assert_uint_eq(in, out);
	ck_assert_int_eq(t_check_except(0, f.p[0], f.size[0], 100, lo0, f.size[0]), -1);
	ck_assert_int_eq(t_check_except(0, f.p[1], f.size[1], 101, lo1, hi1), -1);
	ck_assert_int_eq(t_check(0, f.p[2], f.size[2], 102), -1);
	if (t_is_sim()) {
		ck_assert_int_ne(t_check_except(0, f.p[1], f.size[1], 101, 0, lo1), -1);
		ck_assert_int_ne(t_check_except(0, f.p[0], f.size[0], 100, 0, lo0), -1);
	}
	/* The declaration ended with the resume: everything is copied again. */
	ck_assert_int_eq(t_fill(0, f.p[1], f.size[1], 7), 0);
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, total(&f));
	ck_assert_uint_eq(in, total(&f));
	ck_assert_int_eq(t_check(0, f.p[1], f.size[1], 7), -1);
	teardown(&f);
}

START_TEST(host_copies_live_pieces_only)
{
	live_pieces(CMS_POLICY_HOST);
}
END_TEST

START_TEST(disk_copies_live_pieces_only)
{
	live_pieces(CMS_POLICY_DISK);
}
END_TEST

/* A whole allocation declared: nothing of it is copied; the others are. */
START_TEST(whole_allocation)
{
	uint64_t out, in;
	struct fx f;

	setup(&f, CMS_POLICY_HOST);
	ck_ok(cms_range_discard(f.ctx, f.p[1], f.size[1]));
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, f.size[0] + f.size[2]);
	ck_assert_uint_eq(in, out);
	ck_assert_int_eq(t_check(0, f.p[0], f.size[0], 100), -1);
	ck_assert_int_eq(t_check(0, f.p[2], f.size[2], 102), -1);
	teardown(&f);
}
END_TEST

/* Overlapping and touching declarations count once; keep splits one and leaves the rest. */
START_TEST(merge_and_split)
{
	uint64_t out, in, a = 4096;
	struct fx f;

	setup(&f, CMS_POLICY_HOST);
	ck_ok(cms_range_discard(f.ctx, f.p[1] + 0, 4 * a));	  /* [0, 4a) */
	ck_ok(cms_range_discard(f.ctx, f.p[1] + 2 * a, 4 * a));	  /* overlaps: [0, 6a) */
	ck_ok(cms_range_discard(f.ctx, f.p[1] + 6 * a, a));	  /* touches: [0, 7a) */
	ck_ok(cms_range_discard(f.ctx, f.p[1] + 10 * a, a));	  /* apart: + [10a, 11a) */
	ck_ok(cms_range_discard(f.ctx, f.p[1] + 8 * a, a));	  /* apart: + [8a, 9a) */
	ck_ok(cms_range_discard(f.ctx, f.p[1] + 7 * a, 3 * a));	  /* bridges: [0, 11a) */
	ck_ok(cms_range_keep(f.ctx, f.p[1] + 3 * a, a));	  /* split: [0, 3a) [4a, 11a) */
	ck_ok(cms_range_keep(f.ctx, f.p[1] + 10 * a + 4, 2 * a)); /* tail: [4a, 10a + 4) */
	ck_ok(cms_range_keep(f.ctx, f.p[1] + 20 * a, a));	  /* nothing declared: no-op */
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, total(&f) - 3 * a - (6 * a + 4));
	ck_assert_uint_eq(in, out);
	/* Kept bytes survive: [3a, 4a) and from 10a + 4 on. */
	ck_assert_int_eq(t_check_except(0, f.p[1], 4 * a, 101, 0, 3 * a), -1);
	ck_assert_int_eq(t_check_except(0, f.p[1], f.size[1], 101, 0, 10 * a + 4), -1);
	if (t_is_sim()) { /* declared ones were not restored: fresh memory's poison */
		ck_assert_int_ne(t_check(0, f.p[1], 3 * a, 101), -1);
		ck_assert_int_ne(t_check_except(0, f.p[1], 10 * a + 4, 101, 0, 4 * a), -1);
	}
	teardown(&f);
}
END_TEST

/* cms_range_keep over every declaration: everything is copied. */
START_TEST(keep_all)
{
	uint64_t out, in;
	struct fx f;

	setup(&f, CMS_POLICY_HOST);
	ck_ok(cms_range_discard(f.ctx, f.p[0] + 8, f.g));
	ck_ok(cms_range_discard(f.ctx, f.p[0] + 2 * f.g, f.g));
	ck_ok(cms_range_keep(f.ctx, f.p[0], f.size[0]));
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, total(&f));
	ck_assert_uint_eq(in, total(&f));
	ck_assert_int_eq(t_check(0, f.p[0], f.size[0], 100), -1);
	teardown(&f);
}
END_TEST

/* A freed allocation's declarations go with it: a new allocation is copied whole. */
START_TEST(free_ends_declaration)
{
	uint64_t out, in, p;
	struct fx f;

	setup(&f, CMS_POLICY_HOST);
	ck_ok(cms_range_discard(f.ctx, f.p[2], f.size[2]));
	ck_ok(cms_free(f.ctx, f.p[2]));
	ck_status(cms_range_discard(f.ctx, f.p[2], 4), CMS_ERR_NOT_FOUND);
	ck_ok(cms_alloc(f.r, f.size[2], &p));
	f.p[2] = p;
	ck_assert_int_eq(t_fill(0, p, f.size[2], 102), 0);
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, total(&f));
	ck_assert_int_eq(t_check(0, p, f.size[2], 102), -1);
	teardown(&f);
}
END_TEST

/* Policies that keep nothing accept declarations and copy nothing either way. */
START_TEST(discard_region_unchanged)
{
	uint64_t out, in;
	struct fx f;

	setup(&f, CMS_POLICY_ZERO);
	ck_ok(cms_range_discard(f.ctx, f.p[0], f.g));
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out + in, 0);
	ck_assert(t_is_zero(0, f.p[0], f.size[0]));
	teardown(&f);
}
END_TEST

/*
 * Random declarations and keeps over one allocation against a model (one flag per 4-byte
 * word): the bytes a pause copies are the model's live bytes, live words keep their content,
 * and (simulation) declared words were not restored. Several rounds, a cycle each.
 */
START_TEST(random_against_a_model)
{
	struct fx f;
	unsigned seed = 12345;
	uint64_t out, in, words, live, i, k;
	unsigned char *dead;
	uint32_t *buf;
	int round, op;

	setup(&f, CMS_POLICY_HOST);
	words = f.size[1] / 4;
	dead = calloc(words, 1);
	buf = malloc(f.size[1]);
	ck_assert_ptr_nonnull(dead);
	ck_assert_ptr_nonnull(buf);
	for (round = 0; round < 12; round++) {
		uint32_t pat = 1000u + (uint32_t)round;

		memset(dead, 0, words);
		ck_assert_int_eq(t_fill(0, f.p[1], f.size[1], pat), 0);
		for (op = 0; op < 40; op++) {
			uint64_t lo = (uint64_t)rand_r(&seed) % words;
			uint64_t n = 1 + (uint64_t)rand_r(&seed) % (op % 4 ? 64 : words / 4);
			int keep = rand_r(&seed) % 3 == 0;

			if (lo + n > words)
				n = words - lo;
			if (keep)
				ck_ok(cms_range_keep(f.ctx, f.p[1] + 4 * lo, 4 * n));
			else
				ck_ok(cms_range_discard(f.ctx, f.p[1] + 4 * lo, 4 * n));
			memset(dead + lo, !keep, n);
		}
		for (live = i = 0; i < words; i++)
			live += dead[i] ? 0 : 4;
		cycle(&f, &out, &in);
		ck_assert_uint_eq(out, f.size[0] + live + f.size[2]);
		ck_assert_uint_eq(in, out);
		ck_assert_int_eq(t_read(0, buf, f.p[1], f.size[1]), 0);
		for (k = 0, i = 0; i < words; i++) { /* one assertion per round, not per word */
			if (!dead[i] && buf[i] != t_pattern(pat, i))
				break;
			k += dead[i] && buf[i] == t_pattern(pat, i);
		}
		ck_assert_msg(i == words, "round %d: live word %llu lost", round,
			      (unsigned long long)i);
		if (t_is_sim()) /* declared words hold the fresh memory's poison */
			ck_assert_uint_eq(k, 0);
	}
	free(buf);
	free(dead);
	teardown(&f);
}
END_TEST

/* Threads declaring ranges while others pause/resume the region and free/allocate in it. */
struct race {
	struct fx *f;
	uint64_t p3; /* the allocation freed and made again (atomic) */
	int stop;    /* atomic */
	unsigned bad;
	cms_status bad_status;
};

static void *race_declare(void *arg)
{
	struct race *rc = arg;
	unsigned seed = (unsigned)(uintptr_t)&seed;
	int i;

	for (i = 0; i < 4000 && !__atomic_load_n(&rc->stop, __ATOMIC_ACQUIRE); i++) {
		int which = rand_r(&seed) % 3;
		uint64_t p =
			which == 2 ? __atomic_load_n(&rc->p3, __ATOMIC_ACQUIRE) : rc->f->p[which];
		uint64_t off = (uint64_t)(rand_r(&seed) % 64) * 1024,
			 len = 1 + rand_r(&seed) % 8192;
		cms_status st = rand_r(&seed) % 2 ? cms_range_discard(rc->f->ctx, p + off, len) :
						    cms_range_keep(rc->f->ctx, p + off, len);

		/* the allocation may be gone, paused, or made again smaller at the address */
		if (st && st != CMS_ERR_NOT_FOUND && st != CMS_ERR_PAUSED &&
		    st != CMS_ERR_INVALID_ARGUMENT) {
			__atomic_fetch_add(&rc->bad, 1, __ATOMIC_RELAXED);
			rc->bad_status = st;
		}
	}
	return NULL;
}

static void *race_cycle(void *arg)
{
	struct race *rc = arg;
	int i;

	for (i = 0; i < 20; i++) {
		if (cms_region_pause(rc->f->r, NULL, NULL) ||
		    cms_region_resume(rc->f->r, NULL, NULL))
			__atomic_fetch_add(&rc->bad, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

START_TEST(concurrent_declarations)
{
	pthread_t t[4];
	struct race rc = { 0 };
	uint64_t out, in, p;
	struct fx f;
	int i, k;

	setup(&f, CMS_POLICY_HOST);
	rc.f = &f;
	rc.p3 = f.p[2];
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, race_declare, &rc), 0);
	ck_assert_int_eq(pthread_create(&t[2], NULL, race_cycle, &rc), 0);
	for (k = 0; k < 30; k++) { /* free and make again allocation 2, of changing sizes */
		p = __atomic_exchange_n(&rc.p3, 0, __ATOMIC_ACQ_REL);
		if (p && cms_free(f.ctx, p))
			rc.bad++;
		f.size[2] = f.g / 2 + (uint64_t)(k % 3) * f.g;
		/* refused while the cycler holds the region paused: try again */
		while (cms_alloc(f.r, f.size[2], &p) == CMS_ERR_PAUSED)
			sched_yield();
		__atomic_store_n(&rc.p3, p, __ATOMIC_RELEASE);
	}
	pthread_join(t[2], NULL);
	__atomic_store_n(&rc.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ck_assert_msg(!rc.bad, "%u unexpected statuses (last %s)", rc.bad,
		      cms_status_name(rc.bad_status));
	f.p[2] = rc.p3;
	for (i = 0; i < NA; i++) /* every declaration ended: everything is copied */
		ck_ok(cms_range_keep(f.ctx, f.p[i], f.size[i]));
	cycle(&f, &out, &in);
	ck_assert_uint_eq(out, total(&f));
	teardown(&f);
}
END_TEST

START_TEST(paused_and_bad_input)
{
	struct fx f;

	setup(&f, CMS_POLICY_HOST);
	ck_status(cms_range_discard(NULL, f.p[0], 4), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_keep(NULL, f.p[0], 4), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(f.ctx, f.p[0], 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_keep(f.ctx, f.p[0], 0), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(f.ctx, f.p[0], UINT64_MAX), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(f.ctx, f.p[0] + 8, f.size[0] - 7), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_keep(f.ctx, f.p[0], f.size[0] + 1), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_range_discard(f.ctx, 0, 4), CMS_ERR_NOT_FOUND);
	ck_status(cms_range_discard(f.ctx, f.p[2] + f.size[2], 4), CMS_ERR_NOT_FOUND);
	ck_ok(cms_range_discard(f.ctx, f.p[0] + 8, f.size[0] - 8)); /* to the last byte */
	ck_ok(cms_region_pause(f.r, NULL, NULL));
	ck_status(cms_range_discard(f.ctx, f.p[1], 4), CMS_ERR_PAUSED);
	ck_status(cms_range_keep(f.ctx, f.p[0] + 8, 4), CMS_ERR_PAUSED);
	ck_ok(cms_region_resume(f.r, NULL, NULL));
	ck_assert_int_eq(t_check(0, f.p[0], 8, 100), -1);
	teardown(&f);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ranges");
	TCase *tc = tcase_create("ranges");

	tcase_add_test(tc, host_copies_live_pieces_only);
	tcase_add_test(tc, disk_copies_live_pieces_only);
	tcase_add_test(tc, whole_allocation);
	tcase_add_test(tc, merge_and_split);
	tcase_add_test(tc, keep_all);
	tcase_add_test(tc, free_ends_declaration);
	tcase_add_test(tc, discard_region_unchanged);
	tcase_add_test(tc, random_against_a_model);
	tcase_add_test(tc, concurrent_declarations);
	tcase_add_test(tc, paused_and_bad_input);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
