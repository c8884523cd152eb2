/* SPDX-License-Identifier: MIT */
/*
 * test_prepare.c - host backups prepared ahead (CMS_REGION_PREPARE, since
 * 1.3): the flag's rules; after the background preparation (waited for by
 * polling cms_region_info with a timeout) the first pause makes no host
 * buffer and calls cuMemHostRegister not once (an armed fault that never
 * fires), and the content round trips; hooked allocations (cms_hook_alloc)
 * prepared too; pageable backups prepared faulted in;
 * a registration refused in the background (the pause page-locks the buffer)
 * and a buffer the background cannot make (the pause makes it); the flag
 * change to CMS_REGION_RELEASE_HOST and back; no backup reported before the
 * first pause; a fork while the thread works (the child: CMS_ERR_FORKED); allocations, frees,
 * pauses, resumes, region and context destroys racing the background thread, with no host buffer or
 * registration left (ASan: no leak; TSan: no race).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "common.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

/* The simulation's controls, NULL on a GPU (t_sim() asserts the simulation). */
static const struct t_sim *sim_or_null(void)
{
	return t_is_sim() ? t_sim() : NULL;
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

static uint64_t page_round(uint64_t n)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) & ~(pg - 1);
}

static const uint64_t sizes[] = { 64 * KIB, 3 * MIB + 4096, 192 * KIB, 700 * KIB, 100, 2 * MIB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t alloc_all(cms_region *r, uint64_t *p, uint32_t seed)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < NSIZES; i++) {
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i), 0);
		total += page_round(sizes[i]);
	}
	return total;
}

static void check_all(const uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NSIZES; i++)
		ck_assert_msg(!p[i] || t_check(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i) == -1,
			      "allocation %zu lost its content", i);
}

START_TEST(flag_rules)
{
	static const uint32_t others[] = { CMS_POLICY_DISCARD, CMS_POLICY_ZERO, CMS_POLICY_DISK };
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_context *ctx = t_ctx();
	cms_region *r, *bad = NULL;
	size_t i;

	o.flags = CMS_REGION_PREPARE;
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		o.policy = others[i];
		ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
		ck_assert_ptr_null(bad);
		ck_assert_ptr_nonnull(strstr(cms_last_error(), "CMS_REGION_PREPARE"));
	}
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_PREPARE | CMS_REGION_RELEASE_HOST;
	ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cms_last_error(), "CMS_REGION_RELEASE_HOST"));
	r = region(ctx, "prepared", CMS_REGION_PREPARE);
	ck_assert_uint_eq(t_info(r).flags, CMS_REGION_PREPARE);
	/* Chosen at creation only. */
	ck_status(cms_region_flags_set(r, CMS_REGION_PREPARE, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(t_info(r).flags, CMS_REGION_PREPARE);
	ck_assert_ptr_nonnull(
		region(ctx, "pageable", CMS_REGION_PREPARE | CMS_REGION_HOST_PAGEABLE));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* After the preparation, the first pause only copies: no host buffer made, no registration. */
START_TEST(first_pause_only_copies)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "prepared", CMS_REGION_PREPARE);
	const struct t_sim *sim = sim_or_null();
	cms_backup_info bi = { .struct_size = sizeof(bi) };
	uint64_t p[NSIZES], total, buffers = 0;
	cms_region_stats s;

	total = alloc_all(r, p, 11);
	ck_assert_msg(t_wait_host_bytes(r, total, true),
		      "host_bytes %llu pinned %llu: the allocations' %llu bytes were not "
		      "prepared",
		      (unsigned long long)t_info(r).host_bytes,
		      (unsigned long long)t_info(r).pinned_bytes, (unsigned long long)total);
	s = t_stats(r);
	ck_assert_uint_ge(s.bytes_prepared, total);
	ck_assert_uint_eq(s.bytes_prepared, t_info(r).host_bytes);
	ck_assert_uint_gt(s.prepare_ns, 0);
	/* A prepared buffer holds no content yet: no backup to read before the first pause. */
	ck_status(cms_backup_get(ctx, p[1], &bi), CMS_ERR_NOT_PAUSED);
	if (sim) {
		buffers = t_counters().host_buffers;
		ck_assert_int_eq(sim->fail_call("cuMemHostRegister", 1, CUDA_ERROR_UNKNOWN), 0);
	}
	ck_ok(cms_region_pause(r, NULL, NULL));
	if (sim) {
		ck_assert_msg(sim->armed_faults() == 1, "the pause called cuMemHostRegister");
		sim->clear_faults();
		ck_assert_uint_eq(t_counters().host_buffers, buffers);
	}
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 11);
	ck_ok(cms_context_destroy(ctx));
	if (sim) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
}
END_TEST

/* Allocations through the allocator hooks are prepared as cms_alloc's are. */
START_TEST(hooked_allocations)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "hooked", CMS_REGION_PREPARE);
	uint64_t a = 0, b = 0;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_hook_alloc(3 * MIB, 0, &a));
	ck_ok(cms_hook_alloc(100 * KIB, 0, &b));
	ck_ok(cms_hook_region_pop());
	ck_assert_int_eq(t_fill(0, a, 3 * MIB, 3), 0);
	ck_assert(t_wait_host_bytes(r, 3 * MIB + page_round(100 * KIB), true));
	ck_assert_uint_eq(t_stats(r).bytes_prepared, t_info(r).host_bytes);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, a, 3 * MIB, 3), -1);
	ck_ok(cms_hook_free((void *)(uintptr_t)a));
	ck_ok(cms_hook_free((void *)(uintptr_t)b));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Pageable backups are prepared faulted in, never page-locked. */
START_TEST(pageable_prepared)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "pageable", CMS_REGION_PREPARE | CMS_REGION_HOST_PAGEABLE);
	uint64_t p[NSIZES], total, buffers = 0;

	total = alloc_all(r, p, 21);
	ck_assert(t_wait_host_bytes(r, total, false));
	ck_assert_uint_eq(t_info(r).pinned_bytes, 0);
	if (t_is_sim())
		buffers = t_counters().host_buffers;
	ck_ok(cms_region_pause(r, NULL, NULL));
	if (t_is_sim()) /* the staging only, freed when the pause ends */
		ck_assert_uint_eq(t_counters().host_buffers, buffers);
	ck_assert_uint_eq(t_info(r).pinned_bytes, 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 21);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Registration refused in the background: the buffer is kept pageable, the pause page-locks
 * it; content round trips. */
START_TEST(register_refused)
{
	const struct t_sim *sim = sim_or_null();
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NSIZES], total;

	if (!sim)
		return;
	ctx = t_ctx();
	r = region(ctx, "refused", CMS_REGION_PREPARE);
	ck_assert_int_eq(sim->fail_call("cuMemHostRegister", 1, CUDA_ERROR_OUT_OF_MEMORY), 0);
	total = alloc_all(r, p, 31);
	ck_assert(t_wait_host_bytes(r, total, false));
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_assert_uint_lt(t_info(r).pinned_bytes, t_info(r).host_bytes);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(t_info(r).pinned_bytes, t_info(r).host_bytes); /* by the pause */
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 31);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(t_counters().host_buffers, 0);
	ck_assert_uint_eq(t_counters().host_registrations, 0);
}
END_TEST

/* No host memory for a buffer in the background: the pause makes it; the next allocation
 * prepares again. */
START_TEST(no_host_memory)
{
	const struct t_sim *sim = sim_or_null();
	struct timespec ts = { 0, 2000000 };
	cms_context *ctx;
	cms_region *r;
	uint64_t p[NSIZES], q, total;
	int i;

	if (!sim)
		return;
	ctx = t_ctx();
	r = region(ctx, "oom", CMS_REGION_PREPARE);
	ck_assert_int_eq(sim->fail_host_alloc(1), 0);
	total = alloc_all(r, p, 41);
	for (i = 0; i < 30000 && sim->armed_faults(); i++)
		nanosleep(&ts, NULL);
	ck_assert_int_eq(sim->armed_faults(), 0);
	ck_ok(cms_region_pause(r, NULL, NULL)); /* whatever the background left */
	ck_assert_uint_ge(t_info(r).host_bytes, total);
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 41);
	ck_ok(cms_alloc(r, MIB, &q));
	ck_assert(t_wait_host_bytes(r, total + MIB, true));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_uint_eq(t_counters().host_buffers, 0);
	ck_assert_uint_eq(t_counters().host_registrations, 0);
}
END_TEST

/* CMS_REGION_RELEASE_HOST set later: the prepared buffers go and nothing is prepared; cleared:
 * prepared again. */
START_TEST(release_host_later)
{
	struct timespec ts = { 0, 50000000 };
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "later", CMS_REGION_PREPARE);
	uint64_t p[NSIZES], q, total;

	total = alloc_all(r, p, 51);
	ck_assert(t_wait_host_bytes(r, total, true));
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, CMS_REGION_RELEASE_HOST));
	ck_assert_uint_eq(t_info(r).host_bytes, 0);
	ck_assert_uint_eq(t_info(r).pinned_bytes, 0);
	ck_ok(cms_alloc(r, MIB, &q));
	nanosleep(&ts, NULL);
	ck_assert_uint_eq(t_info(r).host_bytes, 0);
	ck_ok(cms_region_flags_set(r, CMS_REGION_RELEASE_HOST, 0));
	ck_assert(t_wait_host_bytes(r, total + MIB, true));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 51);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A fork while the thread prepares: the child has no such thread and gets CMS_ERR_FORKED;
 * the parent's preparation and pause go on. */
START_TEST(fork_while_preparing)
{
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "forked", CMS_REGION_PREPARE);
	uint64_t p[NSIZES], q, total;
	int status = -1;
	pid_t pid;

	total = alloc_all(r, p, 95);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid)
		_exit(cms_alloc(r, MIB, &q) == CMS_ERR_FORKED &&
				      cms_context_destroy(ctx) == CMS_ERR_FORKED ?
			      0 :
			      1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
	ck_assert(t_wait_host_bytes(r, total, true));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	check_all(p, 95);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* ---- races with the background thread ---- */

struct churn {
	cms_context *ctx;
	cms_region *r;
	unsigned seed;
	int rounds;
};

/* Allocates, fills, frees and reads back, while the background prepares. */
static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	uint64_t p[8] = { 0 };
	int k, i;

	for (k = 0; k < c->rounds; k++) {
		for (i = 0; i < 8; i++) {
			uint64_t sz =
				(uint64_t)((c->seed + (unsigned)(k * 8 + i)) % 5 + 1) * 96 * KIB;

			if (cms_alloc(c->r, sz, &p[i]) != CMS_OK) {
				p[i] = 0;
				continue;
			}
			if (t_fill(0, p[i], 4096, c->seed + (unsigned)i))
				return "fill failed";
		}
		for (i = 0; i < 8; i++) {
			if (!p[i])
				continue;
			if (t_check(0, p[i], 4096, c->seed + (unsigned)i) != -1)
				return "content lost";
			if (cms_free(c->ctx, p[i]))
				return "free failed";
		}
	}
	return NULL;
}

START_TEST(races)
{
	const int mode = _i; /* 0: pauses only; 1: and region destroys; 2: and a context destroy */
	cms_context *ctx = t_ctx();
	cms_region *r = region(ctx, "race", CMS_REGION_PREPARE), *churn, *r2;
	uint64_t p[4][NSIZES], q[NSIZES];
	struct churn c[2];
	pthread_t th[2];
	void *ret;
	int i, k;

	churn = region(ctx, "churn",
		       CMS_REGION_PREPARE | (mode == 1 ? CMS_REGION_HOST_PAGEABLE : 0));
	(void)t_drv(); /* loaded once, before the threads use it */
	for (i = 0; i < 2; i++) {
		c[i] = (struct churn){ ctx, churn, (unsigned)(i * 7 + 1), 4 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, churn_thread, &c[i]), 0);
	}
	/* Pauses that come while buffers are being made for their allocations take them over. */
	for (k = 0; k < 4; k++) {
		alloc_all(r, p[k], 61 + (uint32_t)k * 10);
		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, NULL, NULL));
		for (i = 0; i <= k; i++)
			check_all(p[i], 61 + (uint32_t)i * 10);
		ck_ok(cms_free(ctx, p[k][k]));
		p[k][k] = 0;
		if (mode == 1) { /* a region destroyed while the background works on it */
			r2 = region(ctx, "short", CMS_REGION_PREPARE);
			alloc_all(r2, q, 91);
			ck_ok(cms_region_destroy(r2));
		}
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], &ret);
		ck_assert_msg(ret == NULL, "%s", (const char *)ret);
	}
	if (mode == 2) /* the context destroyed while the background works */
		alloc_all(churn, p[0], 99);
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		ck_assert_uint_eq(t_counters().host_buffers, 0);
		ck_assert_uint_eq(t_counters().host_registrations, 0);
	}
}
END_TEST

/* On a GPU: a prepared 1 GiB region's first pause (page-locked buffers made by the background
 * thread with the primary context pushed there) keeps the content. */
START_TEST(gpu_one_gib)
{
	const uint64_t size = 1024 * MIB;
	cms_context *ctx;
	cms_region *r;
	cms_region_stats s;
	uint64_t p;

	if (t_is_sim())
		return; /* the simulation proves the rest at small sizes */
	ctx = t_ctx();
	r = region(ctx, "gib", CMS_REGION_PREPARE);
	ck_ok(cms_alloc(r, size, &p));
	ck_assert_int_eq(t_fill(0, p, size, 7), 0);
	ck_assert(t_wait_host_bytes(r, size, true));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, size, 7), -1);
	s = t_stats(r);
	ck_assert_uint_eq(s.bytes_prepared, size);
	printf("gpu_one_gib: prepared 1 GiB in %.1f ms, first pause %.1f ms\n", s.prepare_ns / 1e6,
	       s.pause_ns / 1e6);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("prepare");
	TCase *tc = tcase_create("prepare");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, flag_rules);
	tcase_add_test(tc, first_pause_only_copies);
	tcase_add_test(tc, hooked_allocations);
	tcase_add_test(tc, pageable_prepared);
	tcase_add_test(tc, register_refused);
	tcase_add_test(tc, no_host_memory);
	tcase_add_test(tc, release_host_later);
	tcase_add_test(tc, fork_while_preparing);
	tcase_add_loop_test(tc, races, 0, 3);
	tcase_add_test(tc, gpu_one_gib);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
