/* SPDX-License-Identifier: MIT */
/*
 * test_nvtx.c - NVTX ranges (built only when CMake found the NVTX header):
 * with tests/nvtx_inject.c attached as the NVTX tool, a pause, a resume and a
 * swap each push one range for the call and one per device, named after the
 * operation, and pop every range they push.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char *events(void)
{
	void *h = dlopen(CMS_NVTX_INJECT, RTLD_NOW | RTLD_NOLOAD);
	const char *(*fn)(void) = h ? (const char *(*)(void))dlsym(h, "cms_nvtx_events") : NULL;

	ck_assert_msg(fn, "the NVTX tool was not loaded");
	return fn();
}

START_TEST(ranges_around_operations)
{
	cms_context *ctx = t_ctx();
	cms_region *a = t_region(ctx, "a", 0, CMS_POLICY_HOST);
	cms_region *b = t_region(ctx, "b", 0, CMS_POLICY_DISCARD);
	uint64_t p;

	ck_ok(cms_alloc(a, MiB, &p));
	ck_ok(cms_alloc(b, MiB, &p));
	ck_ok(cms_pause(ctx, "a", NULL, NULL));
	ck_ok(cms_resume(ctx, "a", NULL, NULL));
	ck_ok(cms_pause(ctx, "b", NULL, NULL));
	ck_ok(cms_swap(ctx, "a", "b", NULL, NULL, NULL, NULL));
	ck_assert_str_eq(events(), "+cumemsaver pause\n+cumemsaver pause device 0\n-\n-\n"
				   "+cumemsaver resume\n+cumemsaver resume device 0\n-\n-\n"
				   "+cumemsaver pause\n+cumemsaver pause device 0\n-\n-\n"
				   "+cumemsaver swap\n+cumemsaver swap device 0\n-\n-\n");
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

#define FIRST_THREADS 8

struct first {
	cms_region *r;
	pthread_barrier_t *go;
};

static void *first_pause(void *arg)
{
	struct first *f = arg;

	pthread_barrier_wait(f->go);
	return (void *)(uintptr_t)(cms_region_pause(f->r, NULL, NULL) != CMS_OK);
}

/* The process's first NVTX calls made by several threads at once (each test runs in a
 * process of its own): NVTX initializes itself lazily with plain stores to its function
 * pointers, which ThreadSanitizer caught racing before the library initialized it once. */
START_TEST(first_calls_on_threads_at_once)
{
	cms_context *ctx = t_ctx();
	struct first f[FIRST_THREADS];
	pthread_t th[FIRST_THREADS];
	pthread_barrier_t go;
	char tag[8];
	uint64_t p;
	void *ret;
	int k;

	ck_assert_int_eq(pthread_barrier_init(&go, NULL, FIRST_THREADS), 0);
	for (k = 0; k < FIRST_THREADS; k++) {
		snprintf(tag, sizeof(tag), "t%d", k);
		f[k] = (struct first){ t_region(ctx, tag, 0, CMS_POLICY_DISCARD), &go };
		ck_ok(cms_alloc(f[k].r, MiB, &p));
	}
	for (k = 0; k < FIRST_THREADS; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, first_pause, &f[k]), 0);
	for (k = 0; k < FIRST_THREADS; k++) {
		ck_assert_int_eq(pthread_join(th[k], &ret), 0);
		ck_assert_ptr_null(ret);
	}
	pthread_barrier_destroy(&go);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *make(void)
{
	Suite *s = suite_create("nvtx");
	TCase *tc = tcase_create("nvtx");

	tcase_add_test(tc, ranges_around_operations);
	tcase_add_test(tc, first_calls_on_threads_at_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	setenv("NVTX_INJECTION64_PATH", CMS_NVTX_INJECT, 1); /* read at the first NVTX call */
	return t_main(make, T_NEEDS_DEVICE);
}
