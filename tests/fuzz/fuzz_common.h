/* SPDX-License-Identifier: MIT */
/* fuzz_common.h - shared setup of the libFuzzer targets: one context on the host simulation. */
#ifndef CMS_FUZZ_COMMON_H
#define CMS_FUZZ_COMMON_H

#include <stdint.h>
#include <stdlib.h>

#include "cumemsaver.h"

/* An outcome the documentation does not allow: crash loudly so the fuzzer records it. */
#define FUZZ_REQUIRE(cond)                \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static cms_context *fuzz_ctx;

static inline cms_context *fuzz_context(void)
{
	if (!fuzz_ctx)
		FUZZ_REQUIRE(cms_context_create(NULL, &fuzz_ctx) == CMS_OK);
	return fuzz_ctx;
}

#endif
