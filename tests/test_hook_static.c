/* SPDX-License-Identifier: MIT */
/*
 * test_hook_static.c - the library linked into the program as objects (as from
 * libcumemsaver.a), with a constructor of priority 101, which runs before the library's own. It
 * sets a hook context and destroys that context; the destroy must clear it, so that main's hook
 * call finds no hook context (the hook table was registered only by the library's
 * constructor, after this one: the destroy did not reach the hook state, and the call read
 * the freed context). Plain C, no Check: 0 passes, 1 fails, 77 skips (no driver).
 */
#include <stdio.h>
#include <string.h>

#include "cumemsaver.h"
#include "cumemsaver_hooks.h"

static cms_status early_st = -1000;

__attribute__((constructor(101))) static void early_user(void)
{
	cms_context *ctx;

	early_st = cms_context_create(NULL, &ctx);
	if (early_st)
		return;
	early_st = cms_hook_context_set(ctx);
	if (!early_st)
		early_st = cms_context_destroy(ctx);
}

int main(void)
{
	cms_context *ctx;
	cms_region *r;
	cms_status st;

	if (early_st == CMS_ERR_NO_DRIVER || early_st == CMS_ERR_NO_DEVICE) {
		printf("SKIP: no driver (%d)\n", early_st);
		return 77;
	}
	if (early_st) {
		printf("FAIL: the constructor's create, hook context or destroy: %d\n", early_st);
		return 1;
	}
	/* a region of another context: refused for want of a hook context, not looked up in the
	 * freed one */
	st = cms_context_create(NULL, &ctx);
	if (!st)
		st = cms_region_create(ctx, "other", NULL, &r);
	if (st == CMS_ERR_NO_DRIVER || st == CMS_ERR_NO_DEVICE) {
		printf("SKIP: no driver (%d)\n", st);
		return 77;
	}
	if (st) {
		printf("FAIL: a second context and region: %d '%s'\n", st, cms_last_error());
		return 1;
	}
	st = cms_hook_region_default_set(0, r);
	if (st == CMS_OK || !strstr(cms_last_error(), "no hook context")) {
		printf("FAIL: cms_hook_region_default_set after the hook context's destroy: %d "
		       "'%s', "
		       "want 'no hook context'\n",
		       st, st ? cms_last_error() : "");
		return 1;
	}
	if (cms_context_destroy(ctx)) {
		printf("FAIL: destroy: %s\n", cms_last_error());
		return 1;
	}
	printf("ok: %d %s\n", st, cms_last_error());
	return 0;
}
