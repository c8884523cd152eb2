/* SPDX-License-Identifier: MIT */
/*
 * fuzz_options.c - libFuzzer target for option and info struct handling: any
 * struct_size and any content gives a documented status, and output structs
 * are never written past the caller's struct_size.
 */
#include <string.h>

#include "fuzz_common.h"

#define BUF 4200 /* past the library's 4096-byte guard */
#define CANARY 0x5c

static int allowed(cms_status st, const cms_status *ok, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (st == ok[i])
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const cms_status in_ok[] = { CMS_OK, CMS_ERR_STRUCT_SIZE, CMS_ERR_INVALID_ARGUMENT,
					    CMS_ERR_INVALID_DEVICE, CMS_ERR_EXISTS,
					    /* a region flag the device lacks (fabric handles) */
					    CMS_ERR_NOT_SUPPORTED, CMS_ERR_ALREADY_PAUSED,
					    CMS_ERR_NOT_PAUSED };
	static const cms_status out_ok[] = { CMS_OK, CMS_ERR_STRUCT_SIZE };
	_Alignas(16) unsigned char buf[BUF];
	cms_context *ctx = fuzz_context();
	cms_region *r = NULL;
	size_t struct_size, n, i;
	uint8_t which;
	cms_status st;

	if (size < 1 + sizeof(size_t))
		return 0;
	which = data[0] % 7;
	memcpy(&struct_size, data + 1, sizeof(size_t));
	struct_size %= 2 * BUF; /* also sizes past the buffer: refused before any access */
	data += 1 + sizeof(size_t);
	size -= 1 + sizeof(size_t);
	memset(buf, CANARY, sizeof(buf));
	n = size < sizeof(buf) ? size : sizeof(buf);
	memset(buf, 0, struct_size < sizeof(buf) ? struct_size : sizeof(buf));
	memcpy(buf, data, n < struct_size ? n : struct_size);
	if (struct_size > sizeof(buf))
		struct_size = sizeof(buf) + 1; /* the library must refuse it without reading it */
	memcpy(buf, &struct_size, sizeof(struct_size));

	switch (which) {
	case 0: { /* context options: pointers are the caller's, never fuzzed */
		cms_context *c = NULL;
		cms_context_options *o = (cms_context_options *)buf;

		if (struct_size > sizeof(buf))
			return 0;
		o->driver_path = NULL;
		o->log_fn = NULL;
		o->log_user = NULL;
		st = cms_context_create(o, &c);
		FUZZ_REQUIRE(allowed(st, in_ok, 3));
		FUZZ_REQUIRE((st == CMS_OK) == (c != NULL));
		FUZZ_REQUIRE(cms_context_destroy(c) == CMS_OK);
		break;
	}
	case 1: /* region options */
		if (struct_size > sizeof(buf))
			return 0;
		st = cms_region_create(ctx, "fuzz", (cms_region_options *)buf, &r);
		FUZZ_REQUIRE(allowed(st, in_ok, 6));
		if (st == CMS_OK)
			FUZZ_REQUIRE(cms_region_destroy(r) == CMS_OK);
		break;
	case 2: /* pause options */
	case 3: /* resume options */
		if (struct_size > sizeof(buf))
			return 0;
		if (cms_region_find(ctx, "fz", 0, &r) != CMS_OK)
			FUZZ_REQUIRE(cms_region_create(ctx, "fz", NULL, &r) == CMS_OK);
		if (which == 2) {
			cms_pause_options *o = (cms_pause_options *)buf;

			o->stream = 0; /* handles are the caller's, never fuzzed */
			o->event = 0;
			st = cms_region_pause(r, o, NULL);
		} else {
			cms_resume_options *o = (cms_resume_options *)buf;

			o->stream = 0; /* a handle of the caller's, never fuzzed */
			st = cms_region_resume(r, o, NULL);
		}
		FUZZ_REQUIRE(allowed(st, in_ok, sizeof(in_ok) / sizeof(in_ok[0])));
		break;
	default: { /* output structs: region info, pointer info, pause/resume results */
		uint64_t p;

		if (cms_region_find(ctx, "out", 0, &r) != CMS_OK) {
			FUZZ_REQUIRE(cms_region_create(ctx, "out", NULL, &r) == CMS_OK);
			FUZZ_REQUIRE(cms_alloc(r, 4096, &p) == CMS_OK);
		}
		if (which == 4) {
			st = cms_region_info_get(r, (cms_region_info *)buf);
		} else if (which == 5) {
			st = cms_pointer_info_get(ctx, 0, (cms_pointer_info *)buf);
			FUZZ_REQUIRE(st == CMS_ERR_STRUCT_SIZE || st == CMS_ERR_NOT_FOUND);
			st = CMS_OK;
		} else {
			st = cms_region_pause(r, NULL, (cms_pause_result *)buf);
			if (st == CMS_OK)
				st = cms_region_resume(r, NULL, (cms_resume_result *)buf);
		}
		FUZZ_REQUIRE(allowed(st, out_ok, 2));
		/* Nothing written past struct_size, and struct_size itself untouched. */
		for (i = struct_size < sizeof(size_t) ? sizeof(size_t) : struct_size;
		     i < sizeof(buf); i++)
			FUZZ_REQUIRE(buf[i] == CANARY);
		memcpy(&n, buf, sizeof(n));
		FUZZ_REQUIRE(n == struct_size);
		break;
	}
	}
	return 0;
}
