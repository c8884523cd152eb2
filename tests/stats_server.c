/* SPDX-License-Identifier: MIT */
/*
 * stats_server.c - a process for tests/cmsctl_stats.py: on the host simulation
 * it runs a known sequence over two regions (one with a tag that needs
 * escaping), with one injected fault, then serves a control socket at argv[1]
 * and prints "ready <kv physical> <kv logical> <other physical>" until its
 * stdin closes. The script checks cmsctl's stats against those figures.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cumemsaver.h"
#include "cumemsaver_sim.h"

#define MiB (1024ull * 1024ull)
#define WEIRD "a\"b\\c d"

static int fail(const char *what, cms_status st)
{
	fprintf(stderr, "stats_server: %s: %s: %s\n", what, cms_status_name(st), cms_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_control_options co = CMS_CONTROL_OPTIONS_INIT;
	cms_region_info ik = { .struct_size = sizeof(ik) }, iw = { .struct_size = sizeof(iw) };
	const char *sim_path = getenv("CMS_DRIVER_LIBRARY");
	int (*fail_call)(const char *, uint64_t, int);
	cms_context *ctx;
	cms_region *kv, *w;
	cms_control *ctl;
	uint64_t p;
	void *sim;
	int i;

	if (argc != 2 || !sim_path)
		return 2;
	sim = dlopen(sim_path, RTLD_NOW);
	fail_call =
		sim ? (int (*)(const char *, uint64_t, int))dlsym(sim, "cmssim_fail_call") : NULL;
	if (!fail_call)
		return 2;
	if (cms_context_create(NULL, &ctx))
		return fail("context", -1);
	o.policy = CMS_POLICY_HOST;
	if (cms_region_create(ctx, "kv", &o, &kv) || cms_alloc(kv, MiB + 4096, &p) ||
	    cms_alloc(kv, 3 * MiB, &p))
		return fail("kv", -1);
	o.policy = CMS_POLICY_DISCARD;
	if (cms_region_create(ctx, WEIRD, &o, &w) || cms_alloc(w, 2 * MiB, &p))
		return fail("weird", -1);
	for (i = 0; i < 2; i++)
		if (cms_pause(ctx, NULL, NULL, NULL) || cms_resume(ctx, NULL, NULL, NULL))
			return fail("cycle", -1);
	if (cms_pause(ctx, "kv", NULL, NULL))
		return fail("pause kv", -1);
	fail_call("cuMemCreate", 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
	if (cms_resume(ctx, "kv", NULL, NULL) != CMS_ERR_OUT_OF_DEVICE_MEMORY)
		return fail("injected fault", -1);
	if (cms_region_info_get(kv, &ik) || cms_region_info_get(w, &iw))
		return fail("info", -1);
	if (cms_control_create(ctx, argv[1], &co, &ctl))
		return fail("control", -1);
	printf("ready %llu %llu %llu\n", (unsigned long long)ik.physical_bytes,
	       (unsigned long long)ik.logical_bytes, (unsigned long long)iw.physical_bytes);
	fflush(stdout);
	while (getchar() != EOF)
		;
	cms_control_destroy(ctl);
	cms_context_destroy(ctx);
	return 0;
}
