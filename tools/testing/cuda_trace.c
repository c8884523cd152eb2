/* SPDX-License-Identifier: MIT */
/*
 * cuda_trace.c - a CUDA driver shim that counts the driver calls of the library (test builds
 * only, never installed).
 *
 * Load it as the driver (CMS_DRIVER_LIBRARY=libcms-cuda-trace.so); it loads the real one,
 * CMS_TRACE_TARGET (default libcuda.so.1; the host simulation works too), on the first
 * cuGetProcAddress. For every function of CMS_CUDA_FUNCTIONS (src/driver/cuda_api.h) it hands
 * back a wrapper that counts the call, then forwards it to the target's entry point; anything
 * else it passes through uncounted. The counters are per function name, atomic, over every
 * thread of the process; cmstrace_* below read them (tests/test_cuda_calls.c). No call of the
 * target is changed, delayed or added.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"

#define TRACE_API __attribute__((visibility("default")))
#define TRACE_NOT_FOUND 500 /* CUDA_ERROR_NOT_FOUND: no target, or it has no such entry */

struct trace_entry {
	const char *name;
	void **real;
	void *wrapper;
};

static uint64_t hits[128];

static void trace_hit(size_t i)
{
	__atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

#include "cuda_trace_wrappers.inc"

#define TRACE_N (sizeof(TRACE_TABLE) / sizeof(TRACE_TABLE[0]))
_Static_assert(TRACE_N <= sizeof(hits) / sizeof(hits[0]), "hits[] too small for the list");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *target;
static cms_cuGetProcAddress_v2_fn target_gpa2;
static cms_cuGetProcAddress_v1_fn target_gpa1;
static uint64_t passed; /* entries handed back unwrapped */

static void load_target(void)
{
	const char *path = getenv("CMS_TRACE_TARGET");

	target = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!target)
		return;
	target_gpa2 = (cms_cuGetProcAddress_v2_fn)dlsym(target, "cuGetProcAddress_v2");
	if (!target_gpa2)
		target_gpa1 = (cms_cuGetProcAddress_v1_fn)dlsym(target, "cuGetProcAddress");
}

/* The target's entry point, or a wrapper around it for the functions of the list. */
static CUresult wrap(const char *symbol, void **pfn, CUresult res)
{
	size_t i;

	if (res != 0 || !*pfn)
		return res;
	for (i = 0; i < TRACE_N; i++) {
		if (!strcmp(TRACE_TABLE[i].name, symbol)) {
			__atomic_store_n(TRACE_TABLE[i].real, *pfn, __ATOMIC_RELEASE);
			*pfn = TRACE_TABLE[i].wrapper;
			return res;
		}
	}
	__atomic_fetch_add(&passed, 1, __ATOMIC_RELAXED);
	return res;
}

TRACE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				       unsigned long long flags, int *status);
TRACE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				       unsigned long long flags, int *status)
{
	pthread_once(&once, load_target);
	if (target_gpa2)
		return wrap(symbol, pfn, target_gpa2(symbol, pfn, version, flags, status));
	if (target_gpa1) {
		if (status)
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
		return wrap(symbol, pfn, target_gpa1(symbol, pfn, version, flags));
	}
	return TRACE_NOT_FOUND;
}

TRACE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				    unsigned long long flags);
TRACE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				    unsigned long long flags)
{
	int status;

	return cuGetProcAddress_v2(symbol, pfn, version, flags, &status);
}

/* The functions counted: names 0 .. cmstrace_functions() - 1. */
TRACE_API size_t cmstrace_functions(void);
TRACE_API size_t cmstrace_functions(void)
{
	return TRACE_N;
}

/* The name of function i, NULL past the end. */
TRACE_API const char *cmstrace_name(size_t i);
TRACE_API const char *cmstrace_name(size_t i)
{
	return i < TRACE_N ? TRACE_TABLE[i].name : NULL;
}

/* Calls of function i so far, on every thread. */
TRACE_API uint64_t cmstrace_calls(size_t i);
TRACE_API uint64_t cmstrace_calls(size_t i)
{
	return i < TRACE_N ? __atomic_load_n(&hits[i], __ATOMIC_RELAXED) : 0;
}

/* 1 once the target is loaded, 0 before or when it could not be (then every lookup fails). */
TRACE_API int cmstrace_target_loaded(void);
TRACE_API int cmstrace_target_loaded(void)
{
	pthread_once(&once, load_target);
	return target_gpa2 || target_gpa1;
}

/* Entry points handed back without a wrapper (not in CMS_CUDA_FUNCTIONS). */
TRACE_API uint64_t cmstrace_passed(void);
TRACE_API uint64_t cmstrace_passed(void)
{
	return __atomic_load_n(&passed, __ATOMIC_RELAXED);
}
