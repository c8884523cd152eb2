/* SPDX-License-Identifier: MIT */
/*
 * test_core.c - the semantics of pause and resume, run against whichever
 * driver CMS_DRIVER_LIBRARY selects: the host simulation in CI, the real
 * driver on a GPU machine. Checks that need simulation counters are guarded.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static const uint64_t sizes[] = { 1 * MiB + 4, 4 * MiB, 3 * MiB - 12 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static cms_region_info info(cms_region *r)
{
	cms_region_info i;

	memset(&i, 0, sizeof(i));
	i.struct_size = sizeof(i);
	ck_ok(cms_region_info_get(r, &i));
	return i;
}

static void alloc_all(cms_region *r, uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NSIZES; i++) {
		ck_ok(cms_alloc(r, sizes[i], &p[i]));
		ck_assert_uint_ne(p[i], 0);
		ck_assert_int_eq(t_fill(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i), 0);
	}
}

static void check_all(uint64_t *p, uint32_t seed)
{
	size_t i;

	for (i = 0; i < NSIZES; i++)
		ck_assert_int_eq(t_check(0, p[i], sizes[i] & ~3ull, seed + (uint32_t)i), -1);
}

START_TEST(host_policy_keeps_addresses_and_content)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t p[NSIZES];
	int cycle;
	size_t i;

	alloc_all(r, p, 11);
	for (cycle = 1; cycle <= 5; cycle++) {
		ck_ok(cms_pause(ctx, "weights", NULL, NULL));
		ck_assert_uint_eq(info(r).state, CMS_STATE_PAUSED);
		ck_ok(cms_resume(ctx, "weights", NULL, NULL));
		ck_assert_uint_eq(info(r).state, CMS_STATE_ACTIVE);
		ck_assert_uint_eq(info(r).epoch, (uint64_t)cycle);
		for (i = 0; i < NSIZES; i++) {
			ck_ok(cms_pointer_info_get(ctx, p[i], &pi));
			ck_assert_uint_eq(pi.base, p[i]);
			ck_assert_uint_eq(pi.size, sizes[i]);
		}
		check_all(p, 11);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(zero_policy_zeroes)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "zeroed", 0, CMS_POLICY_ZERO);
	uint64_t p[NSIZES];
	size_t i;

	alloc_all(r, p, 3);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	for (i = 0; i < NSIZES; i++)
		ck_assert_msg(t_is_zero(0, p[i], sizes[i]), "allocation %zu not zero", i);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(discard_policy_releases_and_remaps)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	uint64_t p[NSIZES];

	alloc_all(r, p, 5);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_uint_eq(info(r).backed_bytes, 0);
	ck_assert_uint_eq(info(r).backup_bytes, 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	/* Usable again at the same address. */
	ck_assert_int_eq(t_fill(0, p[1], sizes[1], 77), 0);
	ck_assert_int_eq(t_check(0, p[1], sizes[1], 77), -1);
	if (t_is_sim()) {
		/* The simulation poisons fresh memory: discarded content must not survive. */
		ck_assert_int_ne(t_check(0, p[0], sizes[0] & ~3ull, 5), -1);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(paused_memory_is_not_accessible)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	uint32_t word;
	uint64_t p;

	if (!t_is_sim()) {
		/* On a GPU an access to unmapped memory may poison the context; covered by the
		 * simulation. */
		ck_ok(cms_context_destroy(ctx));
		return;
	}
	ck_ok(cms_alloc(r, 4096, &p));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_assert_int_ne(t_read(0, &word, p, sizeof(word)), 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_read(0, &word, p, sizeof(word)), 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(tags_are_independent)
{
	cms_context *ctx = t_ctx();
	cms_region *a = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "b", 0, CMS_POLICY_HOST);
	uint64_t pa[NSIZES], pb[NSIZES], extra;

	alloc_all(a, pa, 1);
	alloc_all(b, pb, 2);
	ck_ok(cms_pause(ctx, "a", NULL, NULL));
	ck_assert_uint_eq(info(a).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(info(b).state, CMS_STATE_ACTIVE);
	check_all(pb, 2);
	ck_ok(cms_alloc(b, 8192, &extra));
	ck_status(cms_alloc(a, 8192, &extra), CMS_ERR_PAUSED);
	ck_assert_uint_eq(extra, 0);
	ck_ok(cms_resume(ctx, "a", NULL, NULL));
	check_all(pa, 1);
	check_all(pb, 2);
	ck_assert_uint_eq(info(b).epoch, 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(repeated_and_mixed_calls)
{
	cms_context *ctx = t_ctx();
	cms_region *a = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "b", 0, CMS_POLICY_ZERO);
	cms_region_info before;
	uint64_t pa[NSIZES], pb[NSIZES];

	alloc_all(a, pa, 8);
	alloc_all(b, pb, 9);
	ck_status(cms_region_resume(a, NULL, NULL), CMS_ERR_NOT_PAUSED);
	ck_status(cms_resume(ctx, NULL, NULL, NULL), CMS_ERR_NOT_PAUSED);
	ck_status(cms_pause(ctx, "missing", NULL, NULL), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_pause(a, NULL, NULL));
	before = info(a);
	ck_status(cms_region_pause(a, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_status(cms_pause(ctx, "a", NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	{
		cms_region_info after = info(a);

		ck_assert_mem_eq(&before, &after, sizeof(before));
	}
	/* NULL pauses what is still active (b) and skips a. */
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_assert_uint_eq(info(b).state, CMS_STATE_PAUSED);
	ck_status(cms_pause(ctx, NULL, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_ok(cms_region_resume(b, NULL, NULL));
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	ck_status(cms_region_resume(a, NULL, NULL), CMS_ERR_NOT_PAUSED);
	check_all(pa, 8);
	ck_assert(t_is_zero(0, pb[0], sizes[0]));
	ck_assert_uint_eq(info(a).epoch, 1);
	ck_assert_uint_eq(info(b).epoch, 1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The message of the last call holds each of the NULL-terminated words. */
static void ck_message_has(const char *call, ...)
{
	const char *msg = cms_last_error(), *w;
	va_list ap;

	va_start(ap, call);
	while ((w = va_arg(ap, const char *)) != NULL)
		ck_assert_msg(strstr(msg, w) != NULL, "%s: message '%s' lacks '%s'", call, msg, w);
	va_end(ap);
}

/* CMS_ERR_ALREADY_PAUSED / CMS_ERR_NOT_PAUSED say which regions: the tag asked for (before:
 * "already paused" / "not paused" alone for cms_pause and cms_resume by tag), the region's
 * tag and device, or every region for a NULL tag. */
START_TEST(state_errors_name_the_tag)
{
	cms_context *ctx = t_ctx();
	cms_region *a = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "kv_cache", 0, CMS_POLICY_DISCARD);
	uint64_t p;

	ck_ok(cms_alloc(a, 4096, &p));
	ck_status(cms_resume(ctx, "weights", NULL, NULL), CMS_ERR_NOT_PAUSED);
	ck_message_has("cms_resume(weights)", "no region tagged \"weights\" is paused", NULL);
	ck_status(cms_region_resume(a, NULL, NULL), CMS_ERR_NOT_PAUSED);
	ck_message_has("cms_region_resume", "\"weights\"", "device 0", "not paused", NULL);
	ck_status(cms_resume(ctx, NULL, NULL, NULL), CMS_ERR_NOT_PAUSED);
	ck_message_has("cms_resume(NULL)", "no region is paused", NULL);
	ck_ok(cms_pause(ctx, "weights", NULL, NULL));
	ck_status(cms_pause(ctx, "weights", NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_message_has("cms_pause(weights)", "every region tagged \"weights\" is already paused",
		       NULL);
	ck_status(cms_region_pause(a, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_message_has("cms_region_pause", "\"weights\"", "device 0", "already paused", NULL);
	ck_ok(cms_region_pause(b, NULL, NULL));
	ck_status(cms_pause(ctx, NULL, NULL, NULL), CMS_ERR_ALREADY_PAUSED);
	ck_message_has("cms_pause(NULL)", "every region is already paused", NULL);
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* cms_free(ctx, 0) does nothing and succeeds, as free(NULL) and cudaFree(0) (since 1.3;
 * before: CMS_ERR_INVALID_ARGUMENT), in every region state; a NULL ctx is still refused. */
START_TEST(free_of_zero_does_nothing)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_region_info i0, i1;
	cmssim_counters c0 = { 0 }, c1;
	uint64_t p;

	ck_ok(cms_alloc(r, 2 * MiB, &p));
	ck_assert_int_eq(t_fill(0, p, 2 * MiB, 5), 0);
	for (int paused = 0; paused < 2; paused++) {
		if (paused)
			ck_ok(cms_region_pause(r, NULL, NULL));
		i0 = info(r);
		if (t_is_sim())
			c0 = t_counters();
		ck_ok(cms_free(ctx, 0));
		i1 = info(r);
		ck_assert_mem_eq(&i0, &i1, sizeof(i0));
		if (t_is_sim()) {
			c1 = t_counters();
			ck_assert_uint_eq(c1.reservations, c0.reservations);
			ck_assert_uint_eq(c1.handles, c0.handles);
			ck_assert_uint_eq(c1.mappings, c0.mappings);
		}
	}
	ck_status(cms_free(NULL, 0), CMS_ERR_INVALID_ARGUMENT);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_assert_int_eq(t_check(0, p, 2 * MiB, 5), -1);
	ck_ok(cms_free(ctx, p));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static atomic_int destroys_left, destroy_failed;

/* Makes a region with allocations and destroys it, over and over while destroys_left > 0
 * (counting it down); sets destroy_failed when a create or a destroy fails. */
static void *create_destroy(void *arg)
{
	cms_context *ctx = arg;
	cms_region *r;
	uint64_t p;
	int i;

	while (atomic_load(&destroys_left) > 0) {
		if (cms_region_create(ctx, "gone", NULL, &r)) {
			atomic_store(&destroy_failed, 1);
			break;
		}
		for (i = 0; i < 8; i++)
			(void)cms_alloc(r, 2 * MiB, &p); /* refused while a pause holds it */
		if (cms_region_destroy(r)) {
			atomic_store(&destroy_failed, 1);
			break;
		}
		atomic_fetch_sub(&destroys_left, 1);
	}
	return NULL;
}

/* cms_pause / cms_resume of every tag (NULL) while the only region is destroyed: when none is
 * left they answer as for a context without regions (CMS_ERR_ALREADY_PAUSED /
 * CMS_ERR_NOT_PAUSED), also for regions a destroy took after the call selected them (before:
 * CMS_ERR_NOT_FOUND). 200 destroys or 600 calls, whichever comes first (sanitizers). */
START_TEST(all_tags_while_regions_are_destroyed)
{
	cms_context *ctx = t_ctx();
	pthread_t t;
	cms_status st;
	int i;

	atomic_store(&destroys_left, 200);
	atomic_store(&destroy_failed, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, create_destroy, ctx), 0);
	for (i = 0; i < 600 && atomic_load(&destroys_left) > 0 && !atomic_load(&destroy_failed);
	     i++) {
		bool pause = i % 2 == 0;

		st = pause ? cms_pause(ctx, NULL, NULL, NULL) : cms_resume(ctx, NULL, NULL, NULL);
		ck_assert_msg(st == CMS_OK ||
				      st == (pause ? CMS_ERR_ALREADY_PAUSED : CMS_ERR_NOT_PAUSED),
			      "call %d (%s): %s: %s", i, pause ? "pause" : "resume",
			      cms_status_name(st), cms_last_error());
		usleep(100); /* lets the destroys take the region's lock */
	}
	atomic_store(&destroys_left, 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(atomic_load(&destroy_failed), 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static void *free_in_thread(void *arg)
{
	void **a = arg;

	return (void *)(intptr_t)cms_free(a[0], (uint64_t)(uintptr_t)a[1]);
}

START_TEST(free_in_every_state_and_thread)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_region_info i0;
	uint64_t p[NSIZES];
	pthread_t t;
	void *args[2], *ret;
	cmssim_counters c0 = { 0 }, c1;

	if (t_is_sim())
		c0 = t_counters();
	alloc_all(r, p, 4);
	ck_status(cms_free(ctx, p[1] + 8), CMS_ERR_NOT_BASE);
	ck_ok(cms_free(ctx, p[0])); /* active */
	ck_status(cms_free(ctx, p[0]), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_pause(r, NULL, NULL));
	i0 = info(r);
	ck_assert_uint_eq(i0.backup_bytes, sizes[1] + sizes[2]);
	ck_ok(cms_free(ctx, p[1])); /* paused: reservation and backup only */
	ck_assert_uint_eq(info(r).backup_bytes, sizes[2]);
	ck_assert_uint_eq(info(r).allocations, 1);
	args[0] = ctx;
	args[1] = (void *)(uintptr_t)p[2];
	ck_assert_int_eq(pthread_create(&t, NULL, free_in_thread, args), 0);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_int_eq((int)(intptr_t)ret, CMS_OK);
	ck_assert_uint_eq(info(r).allocations, 0);
	ck_assert_uint_eq(info(r).logical_bytes, 0);
	ck_assert_uint_eq(info(r).backup_bytes, 0);
	ck_ok(cms_region_resume(r, NULL, NULL));
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.reservations, c0.reservations);
		ck_assert_uint_eq(c1.handles, c0.handles);
		ck_assert_uint_eq(c1.mappings, c0.mappings);
		ck_assert_uint_eq(c1.host_buffers, c0.host_buffers);
	}
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(pointer_info_answers_is_this_ours)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	uint64_t p;

	ck_ok(cms_alloc(r, 5000, &p));
	ck_ok(cms_pointer_info_get(ctx, p + 4999, &pi));
	ck_assert_ptr_eq(pi.region, r);
	ck_assert_uint_eq(pi.base, p);
	ck_assert_uint_eq(pi.offset, 4999);
	ck_assert_uint_eq(pi.size, 5000);
	ck_assert_uint_eq(pi.physical_size, info(r).granularity);
	ck_assert_int_eq(pi.device, 0);
	ck_assert_uint_eq(pi.state, CMS_STATE_ACTIVE);
	ck_status(cms_pointer_info_get(ctx, p + 5000, &pi), CMS_ERR_NOT_FOUND);
	ck_status(cms_pointer_info_get(ctx, p - 1, &pi), CMS_ERR_NOT_FOUND);
	ck_status(cms_pointer_info_get(ctx, 0, &pi), CMS_ERR_NOT_FOUND);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_pointer_info_get(ctx, p, &pi));
	ck_assert_uint_eq(pi.state, CMS_STATE_PAUSED);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(accounting_and_rounding)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	uint64_t p[NSIZES], logical = 0, physical = 0, g;
	cms_region_info ri;
	size_t i;

	alloc_all(r, p, 6);
	ri = info(r);
	g = ri.granularity;
	ck_assert_uint_gt(g, 0);
	for (i = 0; i < NSIZES; i++) {
		logical += sizes[i];
		physical += (sizes[i] + g - 1) / g * g;
	}
	ck_assert_str_eq(ri.tag, "w");
	ck_assert_uint_eq(ri.allocations, NSIZES);
	ck_assert_uint_eq(ri.logical_bytes, logical);
	ck_assert_uint_eq(ri.physical_bytes, physical);
	ck_assert_uint_eq(ri.backed_bytes, physical);
	ck_assert_uint_eq(ri.backup_bytes, 0);
	ck_ok(cms_region_pause(r, NULL, &pr));
	ck_assert_uint_eq(pr.regions, 1);
	ck_assert_uint_eq(pr.allocations, NSIZES);
	ck_assert_uint_eq(pr.bytes_released, physical);
	ck_assert_uint_eq(pr.bytes_backed_up, logical);
	ck_assert_uint_ge(pr.driver_free_after, pr.driver_free_before);
	if (t_is_sim())
		ck_assert_uint_eq(pr.driver_free_after - pr.driver_free_before, physical);
	ri = info(r);
	ck_assert_uint_eq(ri.backed_bytes, 0);
	ck_assert_uint_eq(ri.backup_bytes, logical);
	ck_assert_uint_eq(ri.physical_bytes, physical);
	ck_ok(cms_region_resume(r, NULL, &rr));
	ck_assert_uint_eq(rr.allocations, NSIZES);
	ck_assert_uint_eq(rr.bytes_backed, physical);
	ck_assert_uint_eq(rr.bytes_restored, logical);
	ck_assert_uint_eq(info(r).backed_bytes, physical);
	ck_assert_uint_eq(info(r).backup_bytes, 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(pause_waits_for_stream_or_event)
{
	struct cms_driver *d = t_drv();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_pause_options po = CMS_PAUSE_OPTIONS_INIT;
	CUcontext c, popped;
	CUstream s;
	CUevent e;
	CUdevice cu;
	uint64_t p;

	ck_ok(cms_alloc(r, 2 * MiB, &p));
	ck_assert_int_eq(t_fill(0, p, 2 * MiB, 21), 0);
	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	ck_assert_int_eq(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), 0);
	ck_assert_int_eq(d->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), 0);
	/* Work on the caller's stream that the pause must order after. */
	ck_assert_int_eq(d->cuMemsetD32Async(p, 0x01020304u, 1024, s), 0);
	ck_assert_int_eq(d->cuEventRecord(e, s), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);

	po.stream = (uint64_t)(uintptr_t)s;
	ck_ok(cms_region_pause(r, &po, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	po.stream = 0;
	po.event = (uint64_t)(uintptr_t)e;
	ck_ok(cms_region_pause(r, &po, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	po.event = 0;
	po.flags = CMS_PAUSE_NO_SYNC;
	ck_ok(cms_region_pause(r, &po, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	po.flags = 0x80;
	ck_status(cms_region_pause(r, &po, NULL), CMS_ERR_INVALID_ARGUMENT);
	{
		uint32_t w[1024];
		int i;

		ck_assert_int_eq(t_read(0, w, p, sizeof(w)), 0);
		for (i = 0; i < 1024; i++)
			ck_assert_uint_eq(w[i], 0x01020304u);
	}
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	d->cuEventDestroy(e);
	d->cuStreamDestroy(s);
	d->cuCtxPopCurrent(&popped);
	d->cuDevicePrimaryCtxRelease(cu);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(regions_find_exists_destroy)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST), *f = NULL, *dup = NULL;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cmssim_counters c0 = { 0 }, c1;
	uint64_t p[NSIZES];

	if (t_is_sim())
		c0 = t_counters();
	ck_ok(cms_region_find(ctx, "w", 0, &f));
	ck_assert_ptr_eq(f, r);
	ck_status(cms_region_find(ctx, "w", 1, &f), CMS_ERR_NOT_FOUND);
	ck_assert_ptr_null(f);
	ck_status(cms_region_find(ctx, "x", 0, &f), CMS_ERR_NOT_FOUND);
	o.policy = CMS_POLICY_HOST;
	ck_status(cms_region_create(ctx, "w", &o, &dup), CMS_ERR_EXISTS);
	o.policy = CMS_POLICY_DISK + 1;
	ck_status(cms_region_create(ctx, "w2", &o, &dup), CMS_ERR_INVALID_ARGUMENT);
	o.policy = 0;
	o.device = 4096;
	ck_status(cms_region_create(ctx, "w2", &o, &dup), CMS_ERR_INVALID_DEVICE);
	o.device = -1;
	ck_status(cms_region_create(ctx, "w2", &o, &dup), CMS_ERR_INVALID_DEVICE);
	ck_assert_ptr_null(dup);
	alloc_all(r, p, 1);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_destroy(r)); /* frees paused allocations and backups */
	ck_status(cms_region_find(ctx, "w", 0, &f), CMS_ERR_NOT_FOUND);
	ck_status(cms_free(ctx, p[0]), CMS_ERR_NOT_FOUND);
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.reservations, c0.reservations);
		ck_assert_uint_eq(c1.handles, c0.handles);
		ck_assert_uint_eq(c1.host_buffers, c0.host_buffers);
	}
	/* The tag can be used again. */
	r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	ck_ok(cms_alloc(r, 1, &p[0]));
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		c1 = t_counters();
		ck_assert_uint_eq(c1.reservations, 0);
		ck_assert_uint_eq(c1.handles, 0);
		ck_assert_uint_eq(c1.mappings, 0);
		ck_assert_uint_eq(c1.streams, 0);
		ck_assert_uint_eq(c1.primary_ctx_refs, 0);
	}
}
END_TEST

START_TEST(bad_sizes)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	uint64_t p = 1;

	ck_status(cms_alloc(r, 0, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(p, 0);
	ck_status(cms_alloc(r, UINT64_MAX, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_status(cms_alloc(r, UINT64_MAX - 4096, &p), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(info(r).allocations, 0);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(multi_device_tag)
{
	cms_context *ctx = t_ctx();
	int count = 0;
	cms_region *r0, *r1;
	uint64_t a, b;

	ck_assert_int_eq(t_drv()->cuDeviceGetCount(&count), 0);
	if (count < 2) {
		ck_ok(cms_context_destroy(ctx));
		return; /* the simulation runs this with CMS_SIM_DEVICES=2 */
	}
	r0 = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	r1 = t_region(ctx, "weights", 1, CMS_POLICY_HOST);
	ck_ok(cms_alloc(r0, 2 * MiB, &a));
	ck_ok(cms_alloc(r1, 2 * MiB, &b));
	ck_assert_int_eq(t_fill(0, a, 2 * MiB, 1), 0);
	ck_assert_int_eq(t_fill(1, b, 2 * MiB, 2), 0);
	ck_ok(cms_pause(ctx, "weights", NULL, NULL));
	ck_assert_uint_eq(info(r0).state, CMS_STATE_PAUSED);
	ck_assert_uint_eq(info(r1).state, CMS_STATE_PAUSED);
	ck_ok(cms_resume(ctx, "weights", NULL, NULL));
	ck_assert_int_eq(t_check(0, a, 2 * MiB, 1), -1);
	ck_assert_int_eq(t_check(1, b, 2 * MiB, 2), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

struct log_capture {
	int lines;
	int saw_paused;
};

static void capture_log(void *user, int32_t level, const char *msg)
{
	struct log_capture *c = user;

	(void)level;
	c->lines++;
	if (strstr(msg, "paused 1 regions"))
		c->saw_paused = 1;
}

START_TEST(log_callback_receives_lines)
{
	cms_context_options o = CMS_CONTEXT_OPTIONS_INIT;
	struct log_capture cap = { 0 };
	cms_context *ctx;
	cms_region *r;
	uint64_t p;

	o.log_fn = capture_log;
	o.log_user = &cap;
	o.log_level = CMS_LOG_INFO;
	ck_ok(cms_context_create(&o, &ctx));
	r = t_region(ctx, "w", 0, CMS_POLICY_DISCARD);
	ck_ok(cms_alloc(r, 1, &p));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_gt(cap.lines, 0);
	ck_assert_int_eq(cap.saw_paused, 1);
}
END_TEST

/* The driver's free memory grows by the allocation at a pause, shrinks at the resume, grows at
 * the free (which releases the handle while it is still mapped, then unmaps: the memory goes
 * with the unmap, engine/lifetime.c). */
START_TEST(driver_free_memory_follows_pause)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "big", 0, CMS_POLICY_DISCARD);
	uint64_t f0, f1, f2, f3, total, p;
	uint64_t size = t_is_sim() ? 64 * MiB : 2048 * MiB;

	ck_ok(cms_alloc(r, size, &p));
	ck_ok(cms_device_memory_info(ctx, 0, &f0, &total));
	ck_assert_uint_ge(total, f0);
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_device_memory_info(ctx, 0, &f1, NULL));
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_device_memory_info(ctx, 0, &f2, NULL));
	/* Exact on the simulation; within 64 MiB of driver noise on a GPU. */
	ck_assert_msg(f1 >= f0 + size - (t_is_sim() ? 0 : 64 * MiB), "free %llu -> %llu, size %llu",
		      (unsigned long long)f0, (unsigned long long)f1, (unsigned long long)size);
	ck_assert_msg(f2 + size <= f1 + (t_is_sim() ? 0 : 64 * MiB), "free after resume %llu",
		      (unsigned long long)f2);
	ck_ok(cms_free(ctx, p));
	ck_ok(cms_device_memory_info(ctx, 0, &f3, NULL));
	ck_assert_msg(f3 >= f2 + size - (t_is_sim() ? 0 : 64 * MiB), "free after cms_free %llu",
		      (unsigned long long)f3);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* What a free relies on after a failed cuMemUnmap (vmm.c, cms_vmm_unback): the driver hands
 * back the handle of memory released while still mapped (cuMemRetainAllocationHandle), the
 * content stays, and unmapping and releasing that handle frees it. The real driver too. */
START_TEST(driver_retains_a_handle_released_while_mapped)
{
	struct cms_driver *d = t_drv();
	CUmemAllocationProp prop;
	CUmemAccessDesc acc;
	CUmemGenericAllocationHandle h, back = 0;
	uint32_t v = 0xfeedu, got = 0;
	CUcontext c, popped;
	CUdeviceptr va;
	CUdevice cu;
	size_t g;

	memset(&prop, 0, sizeof(prop));
	memset(&acc, 0, sizeof(acc));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	ck_assert_int_eq(
		d->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), 0);
	ck_assert_int_eq(d->cuMemAddressReserve(&va, g, 0, 0, 0), 0);
	ck_assert_int_eq(d->cuMemCreate(&h, g, &prop, 0), 0);
	ck_assert_int_eq(d->cuMemMap(va, g, 0, h, 0), 0);
	ck_assert_int_eq(d->cuMemSetAccess(va, g, &acc, 1), 0);
	ck_assert_int_eq(d->cuMemcpyHtoD(va, &v, sizeof(v)), 0);
	ck_assert_int_eq(d->cuMemRelease(h), 0); /* while mapped: the memory stays */
	ck_assert_int_eq(d->cuMemRetainAllocationHandle(&back, (void *)(uintptr_t)va), 0);
	ck_assert_uint_ne(back, 0);
	ck_assert_int_eq(d->cuMemcpyDtoH(&got, va, sizeof(got)), 0);
	ck_assert_uint_eq(got, v);
	ck_assert_int_eq(d->cuMemUnmap(va, g), 0);
	ck_assert_int_eq(d->cuMemRelease(back), 0);
	ck_assert_int_eq(d->cuMemAddressFree(va, g), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRelease(cu), 0);
	if (t_is_sim())
		t_nothing_left(2);
}
END_TEST

START_TEST(host_buffers_kept_or_released)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *kept, *given, *bad;
	uint64_t pk[NSIZES], pg[NSIZES], held;
	cms_region_info ik, ig;
	size_t i;

	o.policy = CMS_POLICY_HOST;
	ck_ok(cms_region_create(ctx, "kept", &o, &kept));
	o.flags = CMS_REGION_RELEASE_HOST;
	ck_ok(cms_region_create(ctx, "given", &o, &given));
	o.flags = 1ull << 33;
	ck_status(cms_region_create(ctx, "bad", &o, &bad), CMS_ERR_INVALID_ARGUMENT);
	alloc_all(kept, pk, 30);
	alloc_all(given, pg, 40);
	ck_assert_uint_eq(info(kept).host_bytes, 0);
	for (i = 0; i < 3; i++) {
		ck_ok(cms_pause(ctx, NULL, NULL, NULL));
		ik = info(kept);
		ig = info(given);
		ck_assert_uint_eq(ik.backup_bytes, ik.logical_bytes);
		ck_assert_uint_ge(ik.host_bytes, ik.logical_bytes);
		ck_assert_uint_ge(ig.host_bytes, ig.logical_bytes);
		ck_ok(cms_resume(ctx, NULL, NULL, NULL));
		ik = info(kept);
		ig = info(given);
		/* Kept: host buffers stay for the next cycle; given back: none held. */
		ck_assert_uint_eq(ik.backup_bytes, 0);
		ck_assert_uint_ge(ik.host_bytes, ik.logical_bytes);
		ck_assert_uint_eq(ig.host_bytes, 0);
		check_all(pk, 30);
		check_all(pg, 40);
		/* New content must be what the next pause saves, not the kept buffer's. */
		ck_assert_int_eq(t_fill(0, pk[0], sizes[0] & ~3ull, 31 + (uint32_t)i), 0);
		ck_assert_int_eq(t_fill(0, pk[0], sizes[0] & ~3ull, 30), 0);
	}
	if (t_is_sim()) {
		cmssim_counters c = t_counters();

		/* The kept region's backups share one page-locked buffer. */
		ck_assert_uint_eq(c.host_registrations, 1);
		ck_assert_uint_eq(c.host_buffers, 1);
	}
	held = info(kept).host_bytes;
	ck_ok(cms_free(ctx, pk[1])); /* its slice stays until the shared buffer goes */
	ck_assert_uint_eq(info(kept).host_bytes, held);
	ck_ok(cms_free(ctx, pk[0]));
	ck_ok(cms_free(ctx, pk[2]));
	ck_assert_uint_eq(info(kept).host_bytes, 0);
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim()) {
		cmssim_counters c = t_counters();

		ck_assert_uint_eq(c.host_registrations, 0);
		ck_assert_uint_eq(c.host_buffers, 0);
	}
}
END_TEST

/* pinned_bytes: the registered part of host_bytes, on the simulation equal to its own count. */
static void check_pinned(cms_region *const *r, size_t n)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		cms_region_info ri = info(r[i]);

		ck_assert_uint_le(ri.pinned_bytes, ri.host_bytes);
		sum += ri.pinned_bytes;
	}
	if (t_is_sim())
		ck_assert_uint_eq(t_counters().host_registered_bytes, sum);
}

START_TEST(pinned_bytes_count_registered_buffers)
{
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r[3]; /* kept, given back after each resume, pageable (sim only) */
	uint64_t pk[NSIZES], pg[NSIZES], pp[NSIZES], held = 0;
	cms_region_info ik, ig, ip;
	int cycle;
	size_t i;

	o.policy = CMS_POLICY_HOST;
	ck_ok(cms_region_create(ctx, "kept", &o, &r[0]));
	o.flags = CMS_REGION_RELEASE_HOST;
	ck_ok(cms_region_create(ctx, "given", &o, &r[1]));
	alloc_all(r[0], pk, 60);
	alloc_all(r[1], pg, 70);
	ck_assert_uint_eq(info(r[0]).pinned_bytes, 0);
	check_pinned(r, 2);
	for (cycle = 0; cycle < 3; cycle++) {
		ck_ok(cms_pause(ctx, NULL, NULL, NULL));
		ik = info(r[0]);
		ig = info(r[1]);
		ck_assert_uint_gt(ik.host_bytes, 0);
		ck_assert_uint_eq(ik.pinned_bytes, ik.host_bytes);
		ck_assert_uint_gt(ig.host_bytes, 0);
		ck_assert_uint_eq(ig.pinned_bytes, ig.host_bytes);
		check_pinned(r, 2);
		if (!cycle)
			held = ik.pinned_bytes;
		ck_assert_uint_eq(ik.pinned_bytes, held); /* the same buffers every cycle */
		ck_ok(cms_resume(ctx, NULL, NULL, NULL));
		ik = info(r[0]);
		ig = info(r[1]);
		/* Kept: still page-locked for the next cycle; given back: nothing held. */
		ck_assert_uint_eq(ik.pinned_bytes, held);
		ck_assert_uint_eq(ik.host_bytes, held);
		ck_assert_uint_eq(ig.pinned_bytes, 0);
		ck_assert_uint_eq(ig.host_bytes, 0);
		check_pinned(r, 2);
		check_all(pk, 60);
		check_all(pg, 70);
	}
	/* The shared buffer stays page-locked until its last allocation goes. */
	ck_ok(cms_free(ctx, pk[1]));
	ck_assert_uint_eq(info(r[0]).pinned_bytes, held);
	ck_ok(cms_free(ctx, pk[0]));
	ck_ok(cms_free(ctx, pk[2]));
	ck_assert_uint_eq(info(r[0]).pinned_bytes, 0);
	check_pinned(r, 2);

	if (t_is_sim()) {
		/* A failed cuMemHostRegister leaves the buffer pageable: not counted, still used.
		 */
		const struct t_sim *sim = t_sim();

		o.flags = 0;
		ck_ok(cms_region_create(ctx, "pageable", &o, &r[2]));
		alloc_all(r[2], pp, 80);
		ck_assert_int_eq(sim->fail_call("cuMemHostRegister", 1, CUDA_ERROR_OUT_OF_MEMORY),
				 0);
		ck_ok(cms_region_pause(r[2], NULL, NULL));
		ck_assert_int_eq(sim->armed_faults(),
				 0); /* the registration was tried and failed */
		ip = info(r[2]);
		ck_assert_uint_eq(ip.state, CMS_STATE_PAUSED);
		ck_assert_uint_eq(ip.backup_bytes, ip.logical_bytes);
		ck_assert_uint_gt(ip.host_bytes, 0);
		ck_assert_uint_eq(ip.pinned_bytes, 0);
		check_pinned(r, 3);
		for (cycle = 0; cycle < 2; cycle++) { /* it stays pageable and correct */
			ck_ok(cms_region_resume(r[2], NULL, NULL));
			check_all(pp, 80);
			ck_assert_uint_eq(info(r[2]).pinned_bytes, 0);
			ck_ok(cms_region_pause(r[2], NULL, NULL));
			ck_assert_uint_eq(info(r[2]).pinned_bytes, 0);
		}
		ck_ok(cms_region_resume(r[2], NULL, NULL));
		check_all(pp, 80);
		for (i = 0; i < NSIZES; i++)
			ck_ok(cms_free(ctx, pp[i]));
		ip = info(r[2]);
		ck_assert_uint_eq(ip.host_bytes, 0);
		ck_assert_uint_eq(ip.pinned_bytes, 0);
		check_pinned(r, 3);
	}
	ck_ok(cms_context_destroy(ctx));
	if (t_is_sim())
		ck_assert_uint_eq(t_counters().host_registered_bytes, 0);
}
END_TEST

START_TEST(async_resume_orders_the_callers_stream)
{
	struct cms_driver *d = t_drv();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "w", 0, CMS_POLICY_HOST);
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_resume_options ro = CMS_RESUME_OPTIONS_INIT;
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	cms_region *given;
	uint64_t p[NSIZES], extra;
	CUcontext c, popped;
	CUdevice cu;
	CUstream s;
	int cycle;

	alloc_all(r, p, 50);
	ck_assert_int_eq(d->cuDeviceGet(&cu, 0), 0);
	ck_assert_int_eq(d->cuDevicePrimaryCtxRetain(&c, cu), 0);
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	ck_assert_int_eq(d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), 0);
	ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
	ro.flags = CMS_RESUME_ASYNC;
	ro.stream = (uint64_t)(uintptr_t)s;
	for (cycle = 1; cycle <= 3; cycle++) {
		cms_region_info ri;

		ck_ok(cms_region_pause(r, NULL, NULL));
		ck_ok(cms_region_resume(r, &ro, &rr));
		ck_assert_uint_eq(rr.bytes_restored, info(r).logical_bytes);
		/* Work ordered after the caller's stream sees the content. */
		ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
		ck_assert_int_eq(d->cuStreamSynchronize(s), 0);
		ck_assert_int_eq(d->cuCtxPopCurrent(&popped), 0);
		check_all(p, 50);
		ri = info(r);
		ck_assert_uint_eq(ri.state, CMS_STATE_ACTIVE);
		ck_assert_uint_eq(ri.epoch, (uint64_t)cycle);
		ck_assert_uint_eq(ri.restore_pending, 0); /* the stream was synchronized above */
	}
	/* Free, alloc and pause right after an async resume wait for its copies. */
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, &ro, NULL));
	ck_ok(cms_free(ctx, p[0]));
	ck_ok(cms_alloc(r, 4096, &extra));
	ck_ok(cms_region_pause(r, NULL, NULL));
	ck_ok(cms_region_resume(r, &ro, NULL));
	ck_ok(cms_region_destroy(r));
	/* Refused: a region that gives host memory back, and unknown flags. */
	o.policy = CMS_POLICY_HOST;
	o.flags = CMS_REGION_RELEASE_HOST;
	ck_ok(cms_region_create(ctx, "given", &o, &given));
	ck_ok(cms_alloc(given, 4096, &extra));
	ck_ok(cms_region_pause(given, NULL, NULL));
	ck_status(cms_region_resume(given, &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ro.flags = 0x2;
	ck_status(cms_region_resume(given, &ro, NULL), CMS_ERR_INVALID_ARGUMENT);
	ck_assert_uint_eq(info(given).state, CMS_STATE_PAUSED);
	ck_ok(cms_region_resume(given, NULL, NULL));
	ck_assert_int_eq(d->cuCtxPushCurrent(c), 0);
	d->cuStreamDestroy(s);
	d->cuCtxPopCurrent(&popped);
	d->cuDevicePrimaryCtxRelease(cu);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("core");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, host_policy_keeps_addresses_and_content);
	tcase_add_test(tc, zero_policy_zeroes);
	tcase_add_test(tc, discard_policy_releases_and_remaps);
	tcase_add_test(tc, paused_memory_is_not_accessible);
	tcase_add_test(tc, tags_are_independent);
	tcase_add_test(tc, repeated_and_mixed_calls);
	tcase_add_test(tc, state_errors_name_the_tag);
	tcase_add_test(tc, free_of_zero_does_nothing);
	tcase_add_test(tc, all_tags_while_regions_are_destroyed);
	tcase_add_test(tc, free_in_every_state_and_thread);
	tcase_add_test(tc, pointer_info_answers_is_this_ours);
	tcase_add_test(tc, accounting_and_rounding);
	tcase_add_test(tc, pause_waits_for_stream_or_event);
	tcase_add_test(tc, regions_find_exists_destroy);
	tcase_add_test(tc, bad_sizes);
	tcase_add_test(tc, multi_device_tag);
	tcase_add_test(tc, log_callback_receives_lines);
	tcase_add_test(tc, driver_free_memory_follows_pause);
	tcase_add_test(tc, driver_retains_a_handle_released_while_mapped);
	tcase_add_test(tc, host_buffers_kept_or_released);
	tcase_add_test(tc, pinned_bytes_count_registered_buffers);
	tcase_add_test(tc, async_resume_orders_the_callers_stream);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
