/* SPDX-License-Identifier: MIT */
/*
 * test_swap.c - cms_swap (pause one tag while another resumes) and the
 * progress callback: content and addresses across swaps, argument checks,
 * a device that fits only one tag (simulation capacity), and a fault sweep
 * over every driver call of a swap (simulation): afterwards the swap either
 * completed or left both tags exactly as they were (the paused tag active
 * with its content, the resumed tag paused with its backup), with live
 * driver-object counts unchanged, and a retry succeeds.
 *
 * Where the driver has two devices each tag has a second region on device 1 (DISCARD in "a",
 * ZERO in "b"; the swap runs one worker per device). Where it has one (a region per tag and
 * device) each tag is its HOST region on device 0 and the swap runs on the calling thread:
 * every case runs, without the second regions (the .sim1 variant: CMS_SIM_DEVICES=1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NALLOC 4
#define KiB 1024ull
/* Small (the simulation fills fresh memory, and the sweep runs hundreds of swaps); the sim
 * mode runs with a 64 KiB granularity. */
static const uint64_t sizes[NALLOC] = { 512 * KiB, 128 * KiB + 12, 512 * KiB, 256 * KiB };

/* Regions per tag: 2 (a device each), or 1 where the driver has one device (set by main() before
 * the cases are forked). */
static int per_tag;

struct fixture {
	cms_context *ctx;
	/* tag "a": HOST + DISCARD; tag "b": HOST + ZERO; a2 and b2 (device 1) NULL on one device */
	cms_region *a, *a2, *b, *b2;
	uint64_t pa[NALLOC], pb[NALLOC], pa2, pb2;
};

static void setup(struct fixture *f)
{
	int i;

	memset(f, 0, sizeof(*f));
	f->ctx = t_ctx();
	f->a = t_region(f->ctx, "a", 0, CMS_POLICY_HOST);
	f->b = t_region(f->ctx, "b", 0, CMS_POLICY_HOST);
	for (i = 0; i < NALLOC; i++) {
		ck_ok(cms_alloc(f->a, sizes[i], &f->pa[i]));
		ck_ok(cms_alloc(f->b, sizes[i], &f->pb[i]));
		ck_assert_int_eq(t_fill(0, f->pa[i], sizes[i] & ~3ull, 100 + (uint32_t)i), 0);
		ck_assert_int_eq(t_fill(0, f->pb[i], sizes[i] & ~3ull, 200 + (uint32_t)i), 0);
	}
	if (per_tag == 2) {
		f->a2 = t_region(f->ctx, "a", 1, CMS_POLICY_DISCARD);
		f->b2 = t_region(f->ctx, "b", 1, CMS_POLICY_ZERO);
		ck_ok(cms_alloc(f->a2, 2 * MiB, &f->pa2));
		ck_ok(cms_alloc(f->b2, 2 * MiB, &f->pb2));
	}
	ck_ok(cms_pause(f->ctx, "b", NULL, NULL));
}

static cms_region_info info(cms_region *r)
{
	cms_region_info i = { .struct_size = sizeof(i) };

	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static void check_tag(struct fixture *f, int b, int active)
{
	uint64_t *p = b ? f->pb : f->pa;
	cms_region *r = b ? f->b : f->a, *r2 = b ? f->b2 : f->a2;
	uint32_t want = active ? CMS_STATE_ACTIVE : CMS_STATE_PAUSED;
	int i;

	ck_assert_uint_eq(info(r).state, want);
	if (r2)
		ck_assert_uint_eq(info(r2).state, want);
	for (i = 0; i < NALLOC; i++) {
		cms_pointer_info pi = { .struct_size = sizeof(pi) };

		ck_ok(cms_pointer_info_get(f->ctx, p[i], &pi));
		ck_assert_uint_eq(pi.base, p[i]);
		ck_assert_ptr_eq(pi.region, r);
		ck_assert_uint_eq(pi.state, want);
		if (active)
			ck_assert_msg(t_check(0, p[i], sizes[i] & ~3ull,
					      (b ? 200 : 100) + (uint32_t)i) == -1,
				      "tag %s allocation %d lost its content", b ? "b" : "a", i);
	}
	if (active)
		ck_assert_uint_eq(info(r).backed_bytes, info(r).physical_bytes);
	else
		ck_assert_uint_eq(info(r).backup_bytes, info(r).logical_bytes);
	if (active && b && r2)
		ck_assert_int_eq(t_is_zero(1, f->pb2, 2 * MiB), 1);
}

static uint64_t logical(cms_region *r)
{
	return info(r).logical_bytes;
}

static uint64_t physical(cms_region *r)
{
	return r ? info(r).physical_bytes : 0;
}

START_TEST(swap_content)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	struct fixture f;
	uint64_t epoch;
	int round;

	setup(&f);
	epoch = info(f.b).epoch;
	for (round = 0; round < 4; round++) {
		int from_a = round % 2 == 0;

		ck_ok(cms_swap(f.ctx, from_a ? "a" : "b", from_a ? "b" : "a", NULL, NULL, &pr,
			       &rr));
		check_tag(&f, from_a, 1);
		check_tag(&f, !from_a, 0);
		ck_assert_uint_eq(pr.regions, per_tag);
		ck_assert_uint_eq(pr.allocations, NALLOC + per_tag - 1);
		ck_assert_uint_eq(pr.bytes_backed_up, logical(from_a ? f.a : f.b));
		ck_assert_uint_eq(pr.bytes_released,
				  physical(f.a) + physical(from_a ? f.a2 : f.b2));
		ck_assert_uint_eq(rr.regions, per_tag);
		ck_assert_uint_eq(rr.allocations, NALLOC + per_tag - 1);
		ck_assert_uint_eq(rr.bytes_restored, logical(from_a ? f.b : f.a));
		ck_assert_uint_eq(pr.devices, per_tag);
		ck_assert_uint_eq(rr.devices, per_tag);
		ck_assert_int_eq(pr.failed_device, -1);
		ck_assert_int_eq(rr.failed_device, -1);
		ck_assert_uint_gt(pr.elapsed_ns, 0);
		if (!from_a)
			ck_assert_uint_eq(info(f.a).epoch, (uint64_t)(round / 2 + 1));
	}
	ck_assert_uint_eq(info(f.b).epoch, epoch + 2);
	/* The ordinary calls still work on swapped regions. */
	ck_ok(cms_resume(f.ctx, "b", NULL, NULL));
	check_tag(&f, 1, 1);
	check_tag(&f, 0, 1);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

START_TEST(swap_arguments)
{
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_pause_options po = CMS_PAUSE_OPTIONS_INIT;
	cms_pause_result pr = { .struct_size = 3 };
	struct fixture f;

	setup(&f);
	ck_status(cms_swap(NULL, "a", "b", NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_swap(f.ctx, NULL, "b", NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_swap(f.ctx, "a", NULL, NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_swap(f.ctx, "a", "a", NULL, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_swap(f.ctx, "a", "zz", NULL, NULL, NULL, NULL), CMS_ERR_NOT_FOUND);
	ck_status(cms_swap(f.ctx, "zz", "b", NULL, NULL, NULL, NULL), CMS_ERR_NOT_FOUND);
	ck_status(cms_swap(f.ctx, "b", "a", NULL, NULL, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_status(cms_swap(f.ctx, "a", "b", NULL, NULL, &pr, NULL), CMS_ERR_STRUCT_SIZE);
	ro.flags = CMS_RESUME_ASYNC;
	ck_status(cms_swap(f.ctx, "a", "b", NULL, &ro, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	ro.flags = 0x100;
	ck_status(cms_swap(f.ctx, "a", "b", NULL, &ro, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	po.flags = 0x100;
	ck_status(cms_swap(f.ctx, "a", "b", &po, NULL, NULL, NULL), CMS_ERR_INVALID_ARGUMENT);
	/* Nothing changed. */
	check_tag(&f, 0, 1);
	check_tag(&f, 1, 0);
	ck_ok(cms_resume(f.ctx, "b", NULL, NULL));
	ck_status(cms_swap(f.ctx, "a", "b", NULL, NULL, NULL, NULL), CMS_ERR_NOT_PAUSED);
	po.flags = CMS_PAUSE_NO_SYNC;
	ck_ok(cms_pause(f.ctx, "a", NULL, NULL));
	ck_ok(cms_swap(f.ctx, "b", "a", &po, NULL, NULL, NULL));
	check_tag(&f, 0, 1);
	check_tag(&f, 1, 0);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

/* The device fits one tag and one allocation: a plain resume fails, a swap does not. */
START_TEST(swap_capacity)
{
	const struct t_sim *sim;
	cmssim_counters c;
	struct fixture f;
	uint64_t cap;

	T_NEED_SIM(); /* its capacity control */
	sim = t_sim();
	setup(&f);
	cap = sim->get_capacity(0);
	c = t_counters();
	/* In use on device 0: tag "a" (HOST, mapped); "b" is released. */
	ck_assert_int_eq(sim->set_capacity(0, c.device_used_bytes[0] + sizes[0]), 0);
	ck_status(cms_resume(f.ctx, "b", NULL, NULL), CMS_ERR_OUT_OF_DEVICE_MEMORY);
	check_tag(&f, 1, 0);
	ck_ok(cms_swap(f.ctx, "a", "b", NULL, NULL, NULL, NULL));
	check_tag(&f, 1, 1);
	check_tag(&f, 0, 0);
	ck_ok(cms_swap(f.ctx, "b", "a", NULL, NULL, NULL, NULL));
	check_tag(&f, 0, 1);
	check_tag(&f, 1, 0);
	ck_assert_int_eq(sim->set_capacity(0, cap), 0);
	check_tag(&f, 0, 1);
	check_tag(&f, 1, 0);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

static void same_counts(const cmssim_counters *a, const cmssim_counters *b, const char *when)
{
	ck_assert_msg(a->handles == b->handles && a->mappings == b->mappings &&
			      a->reservations == b->reservations &&
			      a->physical_allocations == b->physical_allocations,
		      "%s: handles %llu -> %llu, mappings %llu -> %llu", when,
		      (unsigned long long)a->handles, (unsigned long long)b->handles,
		      (unsigned long long)a->mappings, (unsigned long long)b->mappings);
	ck_assert_msg(a->device_used_bytes[0] == b->device_used_bytes[0], "%s: device bytes", when);
	ck_assert_msg(a->host_buffers == b->host_buffers, "%s: host buffers %llu -> %llu", when,
		      (unsigned long long)a->host_buffers, (unsigned long long)b->host_buffers);
	ck_assert_msg(a->streams == b->streams && a->events == b->events,
		      "%s: streams/events %llu/%llu -> %llu/%llu", when,
		      (unsigned long long)a->streams, (unsigned long long)a->events,
		      (unsigned long long)b->streams, (unsigned long long)b->events);
}

static unsigned sweep(int result)
{
	const struct t_sim *sim = t_sim();
	unsigned points = 0, absorbed = 0;
	cmssim_counters c0, c1;
	uint64_t calls, i;
	struct fixture f;
	cms_status st;

	setup(&f);
	calls = sim->call_count();
	ck_ok(cms_swap(f.ctx, "a", "b", NULL, NULL, NULL, NULL));
	calls = sim->call_count() - calls;
	ck_ok(cms_context_destroy(f.ctx));
	ck_assert_uint_gt(calls, 10);

	for (i = 1; i <= calls + 1; i++) {
		setup(&f);
		c0 = t_counters();
		ck_assert_int_eq(sim->fail_call(NULL, i, result), 0);
		st = cms_swap(f.ctx, "a", "b", NULL, NULL, NULL, NULL);
		if (i == calls + 1) {
			ck_assert_int_eq(sim->armed_faults(), 1);
			ck_ok(st);
			sim->clear_faults();
			ck_ok(cms_context_destroy(f.ctx));
			break;
		}
		ck_assert_msg(sim->armed_faults() == 0, "fault %llu not reached",
			      (unsigned long long)i);
		points++;
		if (st == CMS_OK) {
			absorbed++; /* a call the library may absorb (a pop, a retried create) */
			check_tag(&f, 1, 1);
			check_tag(&f, 0, 0);
			ck_ok(cms_swap(f.ctx, "b", "a", NULL, NULL, NULL, NULL));
		} else {
			ck_assert_msg(st != CMS_ERR_ROLLBACK_FAILED && st != CMS_ERR_INTERNAL,
				      "fault %llu: %s %s", (unsigned long long)i,
				      cms_status_name(st), cms_last_error());
			if (result == CUDA_ERROR_OUT_OF_MEMORY)
				ck_assert_msg(st == CMS_ERR_OUT_OF_DEVICE_MEMORY, "fault %llu: %s",
					      (unsigned long long)i, cms_status_name(st));
			ck_assert_str_ne(cms_last_error(), "");
			/* The side's name once, then the failure's own message. */
			ck_assert_msg(!strstr(cms_last_error(), "side: pause side") &&
					      !strstr(cms_last_error(), "side: resume side"),
				      "fault %llu: message \"%s\"", (unsigned long long)i,
				      cms_last_error());
			c1 = t_counters();
			same_counts(&c0, &c1, cms_last_error());
			check_tag(&f, 0, 1);
			check_tag(&f, 1, 0);
			/* A retry without the fault succeeds. */
			ck_ok(cms_swap(f.ctx, "a", "b", NULL, NULL, NULL, NULL));
			check_tag(&f, 1, 1);
			check_tag(&f, 0, 0);
			ck_ok(cms_swap(f.ctx, "b", "a", NULL, NULL, NULL, NULL));
		}
		check_tag(&f, 0, 1);
		check_tag(&f, 1, 0);
		ck_ok(cms_context_destroy(f.ctx));
		c1 = t_counters();
		ck_assert_uint_eq(c1.handles, 0);
		ck_assert_uint_eq(c1.reservations, 0);
		ck_assert_uint_eq(c1.host_buffers, 0);
	}
	printf("swap fault sweep, result %d: %llu calls, %u points (%u absorbed)\n", result,
	       (unsigned long long)calls, points, absorbed);
	return points;
}

START_TEST(swap_fault_sweep)
{
	static const int results[] = { CUDA_ERROR_UNKNOWN, CUDA_ERROR_OUT_OF_MEMORY,
				       CUDA_ERROR_INVALID_VALUE };

	T_NEED_SIM_LOOP(); /* its fault injection */
	ck_assert_uint_gt(sweep(results[_i]), 10);
}
END_TEST

/* A resume whose stream synchronization fails, and fails again while it is undone: the undo
 * itself worked, so the status is the driver's, not CMS_ERR_ROLLBACK_FAILED. */
START_TEST(failed_sync_is_not_a_failed_rollback)
{
	const struct t_sim *sim;
	struct fixture f;
	cms_status st;

	T_NEED_SIM();
	sim = t_sim();
	setup(&f);
	ck_assert_int_eq(sim->fail_call("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN), 0);
	ck_assert_int_eq(sim->fail_call("cuStreamSynchronize", 2, CUDA_ERROR_UNKNOWN), 0);
	st = cms_resume(f.ctx, "b", NULL, NULL);
	sim->clear_faults();
	ck_assert_msg(st == CMS_ERR_DRIVER, "%s: %s", cms_status_name(st), cms_last_error());
	check_tag(&f, 1, 0);
	ck_ok(cms_resume(f.ctx, "b", NULL, NULL));
	check_tag(&f, 1, 1);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

/* ---- progress ---- */

#define MAX_CALLS 256
struct calls {
	unsigned n;
	char op[MAX_CALLS][16];
	uint64_t done[MAX_CALLS], total[MAX_CALLS];
	cms_context *ctx;
	uint64_t probe; /* a pointer the callback looks up (cms_pointer_info_get is allowed) */
	int probe_ok;
};

static void on_progress(void *user, const char *op, uint64_t done, uint64_t total)
{
	struct calls *c = user;
	cms_pointer_info pi = { .struct_size = sizeof(pi) };

	if (c->n < MAX_CALLS) {
		snprintf(c->op[c->n], sizeof(c->op[0]), "%s", op);
		c->done[c->n] = done;
		c->total[c->n] = total;
		c->n++;
	}
	c->probe_ok += cms_pointer_info_get(c->ctx, c->probe, &pi) == CMS_OK;
}

/* The calls of one operation: op, monotonic, a last call done == total == want. */
static void check_calls(struct calls *c, const char *op, uint64_t want, unsigned min_calls)
{
	unsigned i;

	ck_assert_uint_ge(c->n, min_calls);
	for (i = 0; i < c->n; i++) {
		ck_assert_str_eq(c->op[i], op);
		ck_assert_uint_eq(c->total[i], want);
		ck_assert_uint_le(c->done[i], c->total[i]);
		if (i)
			ck_assert_uint_ge(c->done[i], c->done[i - 1]);
		if (i + 1 < c->n)
			ck_assert_uint_lt(c->done[i], c->total[i]);
	}
	ck_assert_uint_eq(c->done[c->n - 1], want);
	ck_assert_int_eq(c->probe_ok, (int)c->n);
	memset(c->op, 0, sizeof(c->op));
	c->n = 0;
	c->probe_ok = 0;
}

START_TEST(progress_callback)
{
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	static struct calls c;
	cms_region *discard;
	struct fixture f;
	uint64_t p;

	setup(&f);
	discard = f.a2;
	if (!discard) { /* one device: a DISCARD region of its own tag */
		discard = t_region(f.ctx, "d", 0, CMS_POLICY_DISCARD);
		ck_ok(cms_alloc(discard, 2 * MiB, &p));
	}
	memset(&c, 0, sizeof(c));
	c.ctx = f.ctx;
	c.probe = f.pa[0];
	ck_status(cms_context_progress_set(NULL, on_progress, &c), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_context_progress_set(f.ctx, on_progress, &c));

	ck_ok(cms_pause(f.ctx, "a", NULL, &pr)); /* per_tag devices */
	ck_assert_uint_eq(pr.bytes_backed_up, logical(f.a));
	/* One call per copy at least: allocations adjacent on both sides share one (0-1 and
	 * 2-3 at this granularity; 1 ends short of 2's start). */
	check_calls(&c, "pause", pr.bytes_backed_up, NALLOC / 2);
	ck_ok(cms_resume(f.ctx, "a", NULL, &rr));
	ck_assert_uint_eq(rr.bytes_restored, logical(f.a));
	check_calls(&c, "resume", rr.bytes_restored, NALLOC / 2);

	ck_ok(cms_swap(f.ctx, "a", "b", NULL, NULL, &pr, &rr));
	ck_assert_uint_gt(pr.bytes_backed_up, 0);
	/* Both directions use the merged copies of pause and resume: one call per copy. */
	check_calls(&c, "swap", pr.bytes_backed_up + rr.bytes_restored, NALLOC);
	check_tag(&f, 1, 1);

	/* Nothing to copy (DISCARD only): one call, 0 of 0. */
	if (f.a2) {
		ck_status(cms_region_pause(f.a2, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
		ck_assert_uint_eq(c.n, 0); /* paused by the swap: nothing ran */
	}
	ck_ok(cms_resume(f.ctx, "a", NULL, NULL));
	check_calls(&c, "resume", logical(f.a), NALLOC / 2);
	ck_ok(cms_region_pause(discard, NULL, NULL));
	check_calls(&c, "pause", 0, 1);

	/* A failed operation makes no last call; cleared: no calls. */
	ck_status(cms_pause(f.ctx, "zz", NULL, NULL), CMS_ERR_NOT_FOUND);
	ck_assert_uint_eq(c.n, 0);
	ck_ok(cms_context_progress_set(f.ctx, NULL, NULL));
	ck_ok(cms_pause(f.ctx, "b", NULL, NULL));
	ck_assert_uint_eq(c.n, 0);
	ck_ok(cms_context_destroy(f.ctx));
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("swap");
	TCase *tc = tcase_create("swap"), *sweep = tcase_create("sweep"),
	      *more = tcase_create("sweep_more_results");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, swap_content);
	tcase_add_test(tc, swap_arguments);
	tcase_add_test(tc, progress_callback);
	tcase_add_test(tc, swap_capacity);			  /* simulation only */
	tcase_add_test(tc, failed_sync_is_not_a_failed_rollback); /* simulation only */
	suite_add_tcase(s, tc);
	/* The sweep (simulation only), tagged so that the one-device variant test_swap.sim1 stays
	 * short: it leaves out the other two driver results (statuses mapped as on any device
	 * count: CK_EXCLUDE_TAGS=more_results), and under ThreadSanitizer the sweep (a swap on
	 * the calling thread, each call failed in turn: CK_EXCLUDE_TAGS=sweep). */
	tcase_set_timeout(sweep, 600);
	tcase_set_tags(sweep, "sweep");
	tcase_add_loop_test(sweep, swap_fault_sweep, 0, 1);
	suite_add_tcase(s, sweep);
	tcase_set_timeout(more, 600);
	tcase_set_tags(more, "sweep more_results");
	tcase_add_loop_test(more, swap_fault_sweep, 1, 3);
	suite_add_tcase(s, more);
	return s;
}

int main(void)
{
	int sim = 0, n = t_probe_devices(&sim);

	/* Without a device t_main skips (77); with one, every case runs on it. */
	per_tag = n >= 2 ? 2 : 1;
	if (n == 1)
		printf("test_swap: 1 device: each tag is one HOST region on device 0 (no DISCARD "
		       "or ZERO region on device 1)\n");
	fflush(stdout); /* before the cases are forked */
	return t_main(make, T_NEEDS_DEVICE);
}
