/* SPDX-License-Identifier: MIT */
/*
 * preload.c - libcumemsaver-preload.so: an LD_PRELOAD interposer of the CUDA
 * runtime's cudaMalloc and cudaFree for programs that do not use PyTorch's
 * allocator hooks.
 *
 * cudaMalloc on a thread with an active region (cms_hook_region_push) is
 * served by cms_alloc in that region; every other call goes to the real
 * function. cudaFree of a pointer of the hook context goes to cms_free; any
 * other pointer (and NULL, which programs use to create the runtime's
 * context) goes to the real function.
 *
 * The real functions are found without a link-time dependency on any
 * libcudart: first dlsym(RTLD_NEXT) (libcudart linked by the program), then
 * among the loaded objects whose name contains "libcudart.so" (a runtime
 * loaded with RTLD_LOCAL, as Python extension modules load theirs), looked
 * up again on every miss until found. cudaError_t values used here are the
 * CUDA runtime's stable numbers.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cumemsaver.h"

#define CMS_API_PRELOAD __attribute__((visibility("default")))

enum {
	RT_SUCCESS = 0,		     /* cudaSuccess */
	RT_INVALID_VALUE = 1,	     /* cudaErrorInvalidValue */
	RT_MEMORY_ALLOCATION = 2,    /* cudaErrorMemoryAllocation */
	RT_INITIALIZATION_ERROR = 3, /* cudaErrorInitializationError */
};

typedef int (*rt_malloc_fn)(void **ptr, size_t size);
typedef int (*rt_free_fn)(void *ptr);

static _Atomic(rt_malloc_fn) real_malloc;
static _Atomic(rt_free_fn) real_free;

struct rt_search {
	const char *name;
	void *fn;
};

static int rt_visit(struct dl_phdr_info *info, size_t size, void *data)
{
	struct rt_search *s = data;
	void *h;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libcudart.so"))
		return 0;
	h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	s->fn = dlsym(h, s->name);
	dlclose(h); /* RTLD_NOLOAD took a reference: the object stays loaded */
	return s->fn != NULL;
}

static void *rt_lookup(const char *name)
{
	struct rt_search s = { name, NULL };

	s.fn = dlsym(RTLD_NEXT, name);
	if (!s.fn)
		dl_iterate_phdr(rt_visit, &s);
	return s.fn;
}

static rt_malloc_fn rt_malloc(void)
{
	rt_malloc_fn fn = atomic_load(&real_malloc);

	if (!fn) {
		fn = (rt_malloc_fn)(uintptr_t)rt_lookup("cudaMalloc");
		atomic_store(&real_malloc, fn);
	}
	return fn;
}

static rt_free_fn rt_free(void)
{
	rt_free_fn fn = atomic_load(&real_free);

	if (!fn) {
		fn = (rt_free_fn)(uintptr_t)rt_lookup("cudaFree");
		atomic_store(&real_free, fn);
	}
	return fn;
}

CMS_API_PRELOAD int cudaMalloc(void **ptr, size_t size);
CMS_API_PRELOAD int cudaFree(void *ptr);

CMS_API_PRELOAD int cudaMalloc(void **ptr, size_t size)
{
	cms_region *region = cms_hook_region_current();
	uint64_t dptr = 0;
	rt_malloc_fn fn;

	if (!region) {
		fn = rt_malloc();
		return fn ? fn(ptr, size) : RT_INITIALIZATION_ERROR;
	}
	if (!ptr)
		return RT_INVALID_VALUE;
	*ptr = NULL;
	if (!size)
		return RT_SUCCESS; /* the runtime's answer to a 0-byte request */
	if (cms_alloc(region, size, &dptr) != CMS_OK)
		return RT_MEMORY_ALLOCATION;
	*ptr = (void *)(uintptr_t)dptr;
	return RT_SUCCESS;
}

CMS_API_PRELOAD int cudaFree(void *ptr)
{
	rt_free_fn fn;

	if (ptr) {
		cms_status st = cms_hook_free(ptr);

		if (st == CMS_OK)
			return RT_SUCCESS;
		if (st != CMS_ERR_NOT_FOUND && st != CMS_ERR_INVALID_ARGUMENT)
			return RT_INVALID_VALUE; /* ours, but not freeable as asked */
	}
	fn = rt_free();
	return fn ? fn(ptr) : RT_INITIALIZATION_ERROR;
}
