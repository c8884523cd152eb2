/* SPDX-License-Identifier: MIT */
/*
 * test_preload.c - libcumemsaver-preload.so interposing cudaMalloc/cudaFree
 * of a library loaded with RTLD_LOCAL (ctest runs it with LD_PRELOAD set;
 * without the interposer the "goes to the region" checks fail). Runs against
 * the simulation or a GPU; the CUDA runtime is a counting stand-in.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct consumer {
	int (*malloc_fn)(void **ptr, size_t size);
	int (*free_fn)(void *ptr);
	int (*calls)(int frees_not_mallocs);
	void (*set_device)(int dev);
};

static struct consumer consumer(void)
{
	const char *path = getenv("CMS_TEST_CONSUMER");
	struct consumer c;
	void *h;

	ck_assert_msg(path != NULL, "CMS_TEST_CONSUMER is not set");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h != NULL, "dlopen %s: %s", path, dlerror());
	*(void **)&c.malloc_fn = dlsym(h, "consumer_malloc");
	*(void **)&c.free_fn = dlsym(h, "consumer_free");
	*(void **)&c.calls = dlsym(h, "consumer_runtime_calls");
	*(void **)&c.set_device = dlsym(h, "consumer_set_device");
	ck_assert(c.malloc_fn && c.free_fn && c.calls && c.set_device);
	return c;
}

START_TEST(outside_a_region_the_real_runtime_serves)
{
	struct consumer c = consumer();
	void *p = NULL;

	ck_assert_int_eq(c.malloc_fn(&p, 1000), 0);
	ck_assert_ptr_nonnull(p);
	memset(p, 1, 1000); /* host memory from the stand-in */
	ck_assert_int_eq(c.calls(0), 1);
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_assert_int_eq(c.calls(1), 1);
	ck_assert_int_eq(c.free_fn(NULL), 0); /* context creation idiom: real runtime */
	ck_assert_int_eq(c.calls(1), 2);
}
END_TEST

START_TEST(inside_a_region_the_library_serves)
{
	struct consumer c = consumer();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	void *p = NULL, *q = NULL;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_assert_int_eq(c.malloc_fn(&p, 5 * MiB), 0);
	ck_assert_int_eq(c.malloc_fn(&q, 0), 0);
	ck_assert_ptr_null(q);
	ck_assert_int_eq(c.malloc_fn(NULL, 10), 1);
	ck_ok(cms_hook_region_pop());
	ck_assert_int_eq(c.calls(0), 0);
	ck_ok(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &pi));
	ck_assert_ptr_eq(pi.region, r);
	ck_assert_int_eq(t_fill(0, (uint64_t)(uintptr_t)p, 5 * MiB, 11), 0);
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_ok(cms_resume(ctx, NULL, NULL, NULL));
	ck_assert_int_eq(t_check(0, (uint64_t)(uintptr_t)p, 5 * MiB, 11), -1);
	/* Interior pointer of ours: refused, not passed to the runtime. */
	ck_assert_int_eq(c.free_fn((char *)p + 4096), 1);
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_assert_int_eq(c.calls(1), 0);
	ck_status(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &pi), CMS_ERR_NOT_FOUND);
	/* A region whose allocation fails reports cudaErrorMemoryAllocation. */
	ck_ok(cms_hook_region_push(r));
	ck_ok(cms_pause(ctx, NULL, NULL, NULL));
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 2);
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* cudaFree of ours whose wait for the device fails (a fault of an earlier kernel) reports an
 * error and keeps the allocation: the pointer is never handed to the runtime. */
START_TEST(failed_free_of_ours_stays_ours)
{
	struct consumer c = consumer();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv", 0, CMS_POLICY_DISCARD);
	void *p = NULL;

	if (!t_is_sim())
		return;
	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_assert_int_eq(c.malloc_fn(&p, 2 * MiB), 0);
	ck_ok(cms_hook_region_pop());
	ck_assert_int_eq(t_sim()->fail_call("cuCtxSynchronize", 1, 700), 0);
	ck_assert_int_ne(c.free_fn(p), 0);
	t_sim()->clear_faults();
	ck_assert_int_eq(c.calls(1), 0); /* not the runtime's to free */
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_assert_int_eq(c.calls(1), 0);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* The runtime's current device decides: a region on device 0 does not serve a thread that
 * works on device 1 (the real runtime does). */
START_TEST(another_device_goes_to_the_runtime)
{
	struct consumer c = consumer();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_DISCARD);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	void *p = NULL;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	c.set_device(1);
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 0);
	ck_assert_int_eq(c.calls(0), 1);
	ck_status(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &pi), CMS_ERR_NOT_FOUND);
	ck_assert_int_eq(c.free_fn(p), 0);
	c.set_device(0);
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 0);
	ck_assert_int_eq(c.calls(0), 1);
	ck_ok(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &pi));
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Whole-process mode (since 1.2): a thread with no active region allocates in the default
 * region of the runtime's current device; another device, or no default, goes to the
 * runtime. */
START_TEST(default_region_serves_threads_without_one)
{
	struct consumer c = consumer();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "all", 0, CMS_POLICY_HOST);
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	void *p = NULL;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_default_set(0, r));
	ck_assert_int_eq(c.malloc_fn(&p, 3 * MiB), 0);
	ck_assert_int_eq(c.calls(0), 0);
	ck_ok(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &pi));
	ck_assert_ptr_eq(pi.region, r);
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_assert_int_eq(c.calls(1), 0);
	c.set_device(1); /* no default there: the runtime's */
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 0);
	ck_assert_int_eq(c.calls(0), 1);
	ck_assert_int_eq(c.free_fn(p), 0);
	c.set_device(0);
	ck_ok(cms_hook_region_default_set(0, NULL));
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 0);
	ck_assert_int_eq(c.calls(0), 2);
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* A default region made from the hook context's template (since 1.2) serves the preload's
 * cudaMalloc too: the first call on a device makes the region. */
START_TEST(default_template_serves_the_interposer)
{
	struct consumer c = consumer();
	cms_context *ctx = t_ctx();
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_pointer_info pi = { .struct_size = sizeof(pi) };
	cms_region *r = NULL;
	void *p = NULL;

	o.policy = CMS_POLICY_HOST;
	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_default_template_set("tpl", &o, NULL));
	ck_status(cms_region_find(ctx, "tpl", 0, &r), CMS_ERR_NOT_FOUND);
	ck_assert_int_eq(c.malloc_fn(&p, 3 * MiB), 0);
	ck_assert_int_eq(c.calls(0), 0); /* not the runtime's */
	ck_ok(cms_region_find(ctx, "tpl", 0, &r));
	ck_ok(cms_pointer_info_get(ctx, (uint64_t)(uintptr_t)p, &pi));
	ck_assert_ptr_eq(pi.region, r);
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_assert_int_eq(c.calls(1), 0);
	ck_ok(cms_hook_region_default_template_set(NULL, NULL, NULL));
	ck_ok(cms_hook_region_default_set(0, NULL));
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 0);
	ck_assert_int_eq(c.calls(0), 1); /* neither a default nor a template: the runtime's */
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_ok(cms_hook_context_set(NULL));
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* PyTorch frees a pool's segments after the context is gone (interpreter exit, close()
 * with live tensors): the interposer must answer success, never hand our addresses to the
 * runtime (which refuses them; PyTorch then terminates the process). */
START_TEST(free_after_context_destroy_stays_ours)
{
	struct consumer c = consumer();
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_DISCARD);
	void *p = NULL, *q = NULL;

	ck_ok(cms_hook_context_set(ctx));
	ck_ok(cms_hook_region_push(r));
	ck_assert_int_eq(c.malloc_fn(&p, MiB), 0);
	ck_assert_int_eq(c.malloc_fn(&q, MiB), 0);
	ck_ok(cms_hook_region_pop());
	ck_ok(cms_region_destroy(r));
	ck_assert_int_eq(c.free_fn(p), 0);
	ck_ok(cms_context_destroy(ctx));
	ck_assert_int_eq(c.free_fn(q), 0);
	ck_assert_int_eq(c.calls(1), 0); /* the runtime saw neither */
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("preload");
	TCase *tc = tcase_create("preload");

	tcase_add_test(tc, outside_a_region_the_real_runtime_serves);
	tcase_add_test(tc, inside_a_region_the_library_serves);
	tcase_add_test(tc, failed_free_of_ours_stays_ours);
	tcase_add_test(tc, another_device_goes_to_the_runtime);
	tcase_add_test(tc, default_region_serves_threads_without_one);
	tcase_add_test(tc, default_template_serves_the_interposer);
	tcase_add_test(tc, free_after_context_destroy_stays_ours);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_DEVICE);
}
