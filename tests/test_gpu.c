/* SPDX-License-Identifier: MIT */
/*
 * test_gpu.c - checks that only a real GPU can answer (skips with 77
 * elsewhere): a CUDA graph captured before a pause, with a kernel reading one
 * region and writing another, replays correctly after resume; the driver's
 * free memory drops by the paused bytes and comes back; a large HOST region
 * keeps its content; a kernel reading a paused CMS_REGION_GUARD region reads
 * zeros and the context stays usable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels.h"

struct gpu {
	struct cms_driver *d;
	CUdevice cu;
	CUcontext c;
};

static void gpu_push(struct gpu *g)
{
	g->d = t_drv();
	ck_assert_int_eq(g->d->cuDeviceGet(&g->cu, 0), 0);
	ck_assert_int_eq(g->d->cuDevicePrimaryCtxRetain(&g->c, g->cu), 0);
	ck_assert_int_eq(g->d->cuCtxPushCurrent(g->c), 0);
}

static void gpu_pop(struct gpu *g)
{
	CUcontext popped;

	ck_assert_int_eq(g->d->cuCtxPopCurrent(&popped), 0);
	g->d->cuDevicePrimaryCtxRelease(g->cu);
}

static void check_affine(uint64_t out, uint64_t in_seed, size_t words)
{
	uint32_t *buf = malloc(words * 4);
	size_t i;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(t_read(0, buf, out, words * 4), 0);
	for (i = 0; i < words; i++)
		if (buf[i] != t_pattern((uint32_t)in_seed, i) * 2u + 1u)
			ck_abort_msg("word %zu: %u != f(%u)", i, buf[i],
				     t_pattern((uint32_t)in_seed, i));
	free(buf);
}

START_TEST(graph_replays_after_resume)
{
	const size_t bytes = 256 * MiB, words = bytes / 4;
	cms_context *ctx = t_ctx();
	cms_region *w = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_region *kv = t_region(ctx, "kv_cache", 0, CMS_POLICY_DISCARD);
	uint64_t in, out, n = words;
	void *params[3] = { &in, &out, &n };
	unsigned blocks = (unsigned)((words + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK);
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	CUgraph graph;
	CUgraphExec exec;
	struct gpu g;
	int cycle;

	ck_ok(cms_alloc(w, bytes, &in));
	ck_ok(cms_alloc(kv, bytes, &out));
	ck_assert_int_eq(t_fill(0, in, bytes, 42), 0);
	gpu_push(&g);
	ck_assert_int_eq(g.d->cuModuleLoadData(&mod, cms_kernels_ptx), 0);
	ck_assert_int_eq(g.d->cuModuleGetFunction(&fn, mod, CMS_KERNEL_AFFINE_NAME), 0);
	ck_assert_int_eq(g.d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), 0);
	ck_assert_int_eq(g.d->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), 0);
	ck_assert_int_eq(
		g.d->cuLaunchKernel(fn, blocks, 1, 1, CMS_KERNEL_BLOCK, 1, 1, 0, s, params, NULL),
		0);
	ck_assert_int_eq(g.d->cuStreamEndCapture(s, &graph), 0);
	ck_assert_int_eq(g.d->cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
	ck_assert_int_eq(g.d->cuGraphLaunch(exec, s), 0);
	ck_assert_int_eq(g.d->cuStreamSynchronize(s), 0);
	gpu_pop(&g);
	check_affine(out, 42, words);

	for (cycle = 0; cycle < 3; cycle++) {
		cms_pause_result pr = { .struct_size = sizeof(pr) };

		ck_ok(cms_pause(ctx, NULL, NULL, &pr));
		ck_assert_uint_eq(pr.bytes_released, 2 * bytes);
		ck_ok(cms_resume(ctx, NULL, NULL, NULL));
		gpu_push(&g);
		ck_assert_int_eq(g.d->cuMemsetD32Async(out, 0xdeadbeefu, words, s), 0);
		ck_assert_int_eq(g.d->cuGraphLaunch(exec, s), 0);
		ck_assert_int_eq(g.d->cuStreamSynchronize(s), 0);
		gpu_pop(&g);
		check_affine(out, 42, words);
		ck_assert_int_eq(t_check(0, in, bytes, 42), -1);
	}
	gpu_push(&g);
	g.d->cuGraphExecDestroy(exec);
	g.d->cuGraphDestroy(graph);
	g.d->cuStreamDestroy(s);
	g.d->cuModuleUnload(mod);
	gpu_pop(&g);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

/* Every word of out is in * 2 + 1 for in zero: 1. */
static void check_ones(uint64_t out, size_t words)
{
	uint32_t *buf = malloc(words * 4);
	size_t i;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(t_read(0, buf, out, words * 4), 0);
	for (i = 0; i < words; i++)
		if (buf[i] != 1u)
			ck_abort_msg("word %zu: %u != 1 (the kernel did not read zeros)", i,
				     buf[i]);
	free(buf);
}

/*
 * A kernel reads a paused guarded region (the KV cache paused while the weights are
 * resumed): it reads zeros, the launch and the synchronize succeed, and the context stays
 * usable: after a resume the same kernel reads the new content. 262 MiB: four whole pieces
 * of the 64 MiB zero handle and a part of one.
 */
START_TEST(kernel_reads_paused_guarded_region)
{
	const size_t bytes = 262 * MiB, words = bytes / 4;
	cms_context *ctx = t_ctx();
	cms_region *w = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_region *kv;
	uint64_t in, out, n = words;
	void *params[3] = { &in, &out, &n };
	unsigned blocks = (unsigned)((words + CMS_KERNEL_BLOCK - 1) / CMS_KERNEL_BLOCK);
	CUmodule mod;
	CUfunction fn;
	CUstream s;
	struct gpu g;
	int cycle;

	t_region_flags = CMS_REGION_GUARD;
	kv = t_region(ctx, "kv_cache", 0, CMS_POLICY_DISCARD);
	t_region_flags = 0;
	ck_ok(cms_alloc(kv, bytes, &in));
	ck_ok(cms_alloc(w, bytes, &out));
	gpu_push(&g);
	ck_assert_int_eq(g.d->cuModuleLoadData(&mod, cms_kernels_ptx), 0);
	ck_assert_int_eq(g.d->cuModuleGetFunction(&fn, mod, CMS_KERNEL_AFFINE_NAME), 0);
	ck_assert_int_eq(g.d->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), 0);
	gpu_pop(&g);
	for (cycle = 0; cycle < 2; cycle++) {
		ck_assert_int_eq(t_fill(0, in, bytes, 42 + (uint32_t)cycle), 0);
		ck_ok(cms_pause(ctx, NULL, NULL, NULL));
		ck_ok(cms_resume(ctx, "weights", NULL, NULL)); /* only the weights */
		gpu_push(&g);
		ck_assert_int_eq(g.d->cuMemsetD32Async(out, 0xdeadbeefu, words, s), 0);
		ck_assert_int_eq(g.d->cuLaunchKernel(fn, blocks, 1, 1, CMS_KERNEL_BLOCK, 1, 1, 0, s,
						     params, NULL),
				 0);
		ck_assert_int_eq(g.d->cuStreamSynchronize(s), 0); /* no illegal address */
		gpu_pop(&g);
		check_ones(out, words);
		ck_assert(t_is_zero(0, in, bytes)); /* a copy reads zeros too */
		/* the context is usable: resume the KV cache, fill it, the kernel reads it */
		ck_ok(cms_resume(ctx, "kv_cache", NULL, NULL));
		ck_assert_int_eq(t_fill(0, in, bytes, 7), 0);
		gpu_push(&g);
		ck_assert_int_eq(g.d->cuLaunchKernel(fn, blocks, 1, 1, CMS_KERNEL_BLOCK, 1, 1, 0, s,
						     params, NULL),
				 0);
		ck_assert_int_eq(g.d->cuStreamSynchronize(s), 0);
		gpu_pop(&g);
		check_affine(out, 7, words);
	}
	gpu_push(&g);
	g.d->cuStreamDestroy(s);
	g.d->cuModuleUnload(mod);
	gpu_pop(&g);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(free_memory_drops_by_paused_bytes)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "kv_cache", 0, CMS_POLICY_DISCARD);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	uint64_t p[8], f_resumed;
	int i;

	for (i = 0; i < 8; i++)
		ck_ok(cms_alloc(r, 1024 * MiB, &p[i]));
	ck_ok(cms_region_pause(r, NULL, &pr));
	ck_assert_uint_eq(pr.bytes_released, 8192 * MiB);
	printf("gpu: pause of 8 GiB: driver free %llu -> %llu MiB (delta %lld MiB), %.2f ms\n",
	       (unsigned long long)(pr.driver_free_before / MiB),
	       (unsigned long long)(pr.driver_free_after / MiB),
	       (long long)((pr.driver_free_after - pr.driver_free_before) / MiB),
	       pr.elapsed_ns / 1e6);
	ck_assert_uint_ge(pr.driver_free_after - pr.driver_free_before,
			  pr.bytes_released - 64 * MiB);
	ck_assert_uint_le(pr.driver_free_after - pr.driver_free_before,
			  pr.bytes_released + 64 * MiB);
	ck_ok(cms_region_resume(r, NULL, NULL));
	ck_ok(cms_device_memory_info(ctx, 0, &f_resumed, NULL));
	ck_assert_uint_le(f_resumed, pr.driver_free_before + 64 * MiB);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

START_TEST(large_host_region_keeps_content)
{
	cms_context *ctx = t_ctx();
	cms_region *r = t_region(ctx, "weights", 0, CMS_POLICY_HOST);
	cms_pause_result pr = { .struct_size = sizeof(pr) };
	cms_resume_result rr = { .struct_size = sizeof(rr) };
	uint64_t p[4];
	int i;

	for (i = 0; i < 4; i++) {
		ck_ok(cms_alloc(r, 512 * MiB + 4096 * (uint64_t)i, &p[i]));
		ck_assert_int_eq(t_fill(0, p[i], 512 * MiB, (uint32_t)i), 0);
	}
	ck_ok(cms_region_pause(r, NULL, &pr));
	ck_ok(cms_region_resume(r, NULL, &rr));
	printf("gpu: HOST 2 GiB (pageable v1 path): pause %.1f ms, resume %.1f ms\n",
	       pr.elapsed_ns / 1e6, rr.elapsed_ns / 1e6);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(t_check(0, p[i], 512 * MiB, (uint32_t)i), -1);
	ck_ok(cms_context_destroy(ctx));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc = tcase_create("gpu");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, graph_replays_after_resume);
	tcase_add_test(tc, free_memory_drops_by_paused_bytes);
	tcase_add_test(tc, large_host_region_keeps_content);
	tcase_add_test(tc, kernel_reads_paused_guarded_region);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return t_main(suite, T_NEEDS_GPU);
}
