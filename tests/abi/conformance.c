/* SPDX-License-Identifier: MIT */
/* conformance.c - the helpers of conformance.h, compiled against each program's release
 * header. */
#include "conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int on_sim(void)
{
	const char *d = getenv("CMS_DRIVER_LIBRARY");

	return d && strstr(d, "libcumemsaver-sim") != NULL;
}

void fill(uint64_t ptr, size_t n, unsigned char seed)
{
	unsigned char *p = (unsigned char *)(uintptr_t)ptr;
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + seed);
}

int holds(uint64_t ptr, size_t n, unsigned char seed)
{
	const unsigned char *p = (const unsigned char *)(uintptr_t)ptr;
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 7 + seed))
			return 0;
	return 1;
}

int all_zero(uint64_t ptr, size_t n)
{
	const unsigned char *p = (const unsigned char *)(uintptr_t)ptr;
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int tail_is(const void *buf, size_t from, unsigned char v)
{
	const unsigned char *b = buf;
	size_t i;

	for (i = from; i < STRUCT_MAX; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

void canary(void *buf, size_t size)
{
	memset(buf, CANARY, STRUCT_MAX);
	memset(buf, 0, size);
	memcpy(buf, &size, sizeof(size));
}

cms_context *new_ctx(void)
{
	cms_context *ctx = NULL;

	ck_ok(cms_context_create(NULL, &ctx));
	ck_assert_ptr_nonnull(ctx);
	return ctx;
}

cms_region *new_region(cms_context *ctx, const char *tag, uint32_t policy, uint64_t flags)
{
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	cms_region *r = NULL;

	o.policy = policy;
	o.flags = flags;
	ck_ok(cms_region_create(ctx, tag, &o, &r));
	ck_assert_ptr_nonnull(r);
	return r;
}

/* Whether the driver answers with a device, asked in a child: main() never touches CUDA
 * (Check forks every test). */
static int device_present(void)
{
	pid_t pid = fork();
	int wstatus = 0;

	if (pid == 0) {
		cms_context *ctx = NULL;
		uint64_t total = 0;

		if (cms_context_create(NULL, &ctx) ||
		    cms_device_memory_info(ctx, 0, NULL, &total) != CMS_OK || !total)
			_exit(1);
		_exit(0);
	}
	return pid > 0 && waitpid(pid, &wstatus, 0) == pid && WIFEXITED(wstatus) &&
	       WEXITSTATUS(wstatus) == 0;
}

int conformance_main(const char *name, Suite *(*make_suite)(void))
{
	const char *drv = getenv("CMS_DRIVER_LIBRARY");
	SRunner *sr;
	int failed;

	if (!drv || !device_present()) {
		printf("%s: no device behind CMS_DRIVER_LIBRARY (%s); skipped\n", name,
		       drv ? drv : "unset");
		return 77;
	}
	sr = srunner_create(make_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
