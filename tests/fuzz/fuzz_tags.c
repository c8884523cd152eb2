/* SPDX-License-Identifier: MIT */
/*
 * fuzz_tags.c - libFuzzer target for tag handling: any NUL-terminated string
 * is accepted as a tag exactly when it has 1..CMS_TAG_MAX bytes and no control
 * characters, and every tag function agrees.
 */
#include <string.h>

#include "fuzz_common.h"

static int valid_tag(const char *t)
{
	size_t n = strlen(t), i;

	if (n < 1 || n > CMS_TAG_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cms_context *ctx = fuzz_context();
	cms_region_info ri = { .struct_size = sizeof(ri) };
	cms_region *r = NULL, *f = NULL;
	char *tag = malloc(size + 1);
	int valid;
	cms_status st;

	FUZZ_REQUIRE(tag);
	memcpy(tag, data, size);
	tag[size] = '\0';
	valid = valid_tag(tag);
	st = cms_region_create(ctx, tag, NULL, &r);
	FUZZ_REQUIRE(valid ? st == CMS_OK : st == CMS_ERR_INVALID_ARGUMENT);
	st = cms_region_find(ctx, tag, 0, &f);
	FUZZ_REQUIRE(valid ? (st == CMS_OK && f == r) : st == CMS_ERR_INVALID_ARGUMENT);
	st = cms_pause(ctx, tag, NULL, NULL);
	FUZZ_REQUIRE(valid ? st == CMS_OK : st == CMS_ERR_INVALID_ARGUMENT);
	st = cms_resume(ctx, tag, NULL, NULL);
	FUZZ_REQUIRE(valid ? st == CMS_OK : st == CMS_ERR_INVALID_ARGUMENT);
	if (valid) {
		FUZZ_REQUIRE(cms_region_info_get(r, &ri) == CMS_OK);
		FUZZ_REQUIRE(strcmp(ri.tag, tag) == 0 && ri.epoch == 1);
		FUZZ_REQUIRE(cms_region_destroy(r) == CMS_OK);
		FUZZ_REQUIRE(cms_region_find(ctx, tag, 0, &f) == CMS_ERR_NOT_FOUND);
	}
	free(tag);
	return 0;
}
