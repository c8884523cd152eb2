/* SPDX-License-Identifier: MIT */
/*
 * fake_cudart.c - libcudart.so.99: a stand-in CUDA runtime for the preload
 * tests. cudaMalloc/cudaFree are served from malloc and counted, so a test
 * can tell which allocations reached "the real runtime".
 */
#include <stdlib.h>

#define FAKE_API __attribute__((visibility("default")))

static int mallocs, frees, device;

FAKE_API int cudaMalloc(void **ptr, size_t size);
FAKE_API int cudaFree(void *ptr);
FAKE_API int fake_cudart_calls(int frees_not_mallocs);
FAKE_API int cudaGetDevice(int *dev);
FAKE_API void fake_cudart_set_device(int dev);

FAKE_API int cudaGetDevice(int *dev)
{
	if (!dev)
		return 1;
	*dev = __atomic_load_n(&device, __ATOMIC_RELAXED);
	return 0;
}

FAKE_API void fake_cudart_set_device(int dev)
{
	__atomic_store_n(&device, dev, __ATOMIC_RELAXED);
}

FAKE_API int cudaMalloc(void **ptr, size_t size)
{
	if (!ptr)
		return 1;
	*ptr = malloc(size ? size : 1);
	if (!*ptr)
		return 2;
	__atomic_add_fetch(&mallocs, 1, __ATOMIC_RELAXED);
	return 0;
}

FAKE_API int cudaFree(void *ptr)
{
	/* A real runtime refuses pointers it did not allocate (cudaErrorInvalidValue); the
	 * stand-in would crash in free(): the tests make sure ours never reach it. */
	free(ptr);
	__atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
	return 0;
}

FAKE_API int fake_cudart_calls(int frees_not_mallocs)
{
	return __atomic_load_n(frees_not_mallocs ? &frees : &mallocs, __ATOMIC_RELAXED);
}
