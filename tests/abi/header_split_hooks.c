/* SPDX-License-Identifier: MIT */
/*
 * header_split_hooks.c - with header_split_ipc.c, the test header_split: each
 * subsystem header compiles when a file includes it alone, before
 * <cumemsaver.h> (it includes the main header first, which includes both
 * subsystem headers), and what it declares links and runs.
 */
#include <cumemsaver_hooks.h>
#include <stdio.h>

int header_split_ipc(void);

int main(void)
{
	cms_status (*push)(cms_region *) = cms_hook_region_push;
	void *(*torch_alloc)(ssize_t, int, void *) = cms_torch_alloc;
	cms_context *ctx = NULL;
	int rc;

	/* The core's declarations came with the hooks header. */
	if (cms_version() != CMS_VERSION_NUMBER || cms_context_create(NULL, &ctx))
		return 1;
	if (!push || !torch_alloc || cms_hook_region_current() != NULL)
		return 2;
	if (cms_hook_region_pop() != CMS_ERR_NOT_FOUND || CMS_HOOK_DEPTH_MAX < 1)
		return 3;
	if (cms_hook_region_push(NULL) != CMS_ERR_INVALID_ARGUMENT)
		return 4;
	rc = header_split_ipc();
	if (cms_context_destroy(ctx))
		return 5;
	if (!rc)
		printf("header_split: cumemsaver_hooks.h and cumemsaver_ipc.h stand alone\n");
	return rc;
}
