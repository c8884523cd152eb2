/* SPDX-License-Identifier: MIT */
/* quickstart.c - the README's example: weights survive a pause at the same address. */
#include <cumemsaver.h>
#include <stdio.h>

#define CHECK(call)                                                                  \
	do {                                                                         \
		cms_status st_ = (call);                                             \
		if (st_ != CMS_OK) {                                                 \
			fprintf(stderr, "%s: %s: %s\n", #call, cms_status_name(st_), \
				cms_last_error());                                   \
			return 1;                                                    \
		}                                                                    \
	} while (0)

int main(void)
{
	cms_region_options opts = CMS_REGION_OPTIONS_INIT;
	cms_pause_result paused = { .struct_size = sizeof(paused) };
	cms_region *weights, *kv;
	cms_context *ctx;
	uint64_t w, k;

	CHECK(cms_context_create(NULL, &ctx));
	opts.device = 0;
	opts.policy = CMS_POLICY_HOST; /* content copied to host memory while paused */
	CHECK(cms_region_create(ctx, "weights", &opts, &weights));
	opts.policy = CMS_POLICY_DISCARD; /* content not needed after resume */
	CHECK(cms_region_create(ctx, "kv_cache", &opts, &kv));

	CHECK(cms_alloc(weights, 256u << 20, &w)); /* device pointers, as CUdeviceptr */
	CHECK(cms_alloc(kv, 512u << 20, &k));
	/* ... fill weights, launch kernels, capture CUDA graphs using w and k ... */

	CHECK(cms_pause(ctx, NULL, NULL, &paused)); /* every tag: physical memory goes back */
	printf("released %llu MiB; driver free memory +%lld MiB\n",
	       (unsigned long long)(paused.bytes_released >> 20),
	       (long long)(paused.driver_free_after - paused.driver_free_before) / (1 << 20));

	CHECK(cms_resume(ctx, "weights", NULL, NULL)); /* tags are independent */
	CHECK(cms_resume(ctx, "kv_cache", NULL, NULL));
	/* w and k are the same pointers; weights hold their old content. */

	CHECK(cms_free(ctx, k));
	CHECK(cms_context_destroy(ctx)); /* frees the rest */
	return 0;
}
