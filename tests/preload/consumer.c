/* SPDX-License-Identifier: MIT */
/*
 * consumer.c - libpreload_consumer.so: a library that links the CUDA runtime
 * (the fake libcudart.so.99) and calls cudaMalloc/cudaFree, as a framework's
 * extension module does. The test dlopens it RTLD_LOCAL, so its runtime is
 * not in the global scope (the case dlsym(RTLD_NEXT) cannot find).
 */
#include <stddef.h>

#define CONSUMER_API __attribute__((visibility("default")))

int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);
int fake_cudart_calls(int frees_not_mallocs);
void fake_cudart_set_device(int dev);

CONSUMER_API int consumer_malloc(void **ptr, size_t size);
CONSUMER_API int consumer_free(void *ptr);
CONSUMER_API int consumer_runtime_calls(int frees_not_mallocs);
CONSUMER_API void consumer_set_device(int dev);

CONSUMER_API void consumer_set_device(int dev)
{
	fake_cudart_set_device(dev);
}

CONSUMER_API int consumer_malloc(void **ptr, size_t size)
{
	return cudaMalloc(ptr, size);
}

CONSUMER_API int consumer_free(void *ptr)
{
	return cudaFree(ptr);
}

CONSUMER_API int consumer_runtime_calls(int frees_not_mallocs)
{
	return fake_cudart_calls(frees_not_mallocs);
}
