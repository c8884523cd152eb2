/* SPDX-License-Identifier: MIT */
/*
 * preload.c - libcumemsaver-preload.so: an LD_PRELOAD interposer of the CUDA
 * runtime's cudaMalloc and cudaFree for programs that do not use PyTorch's
 * allocator hooks.
 *
 * cudaMalloc on a thread with an active region (cms_hook_region_push) is
 * served by cms_alloc in that region, on a thread without one by the default
 * region of the runtime's current device if it has one
 * (cms_hook_region_default_set, since 1.2); every other call goes to the real
 * function. cudaFree of a pointer of the hook context goes to cms_hook_free
 * (cudaErrorUnknown when that fails: the allocation stays ours); any other
 * pointer (and NULL, which programs use to create the runtime's context)
 * goes to the real function.
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
	RT_UNKNOWN = 999,	     /* cudaErrorUnknown */
};

typedef int (*rt_malloc_fn)(void **ptr, size_t size);
typedef int (*rt_free_fn)(void *ptr);
typedef int (*rt_get_device_fn)(int *device);

#define RT_NAME_MAX 512

struct rt_search {
	char path[RT_NAME_MAX];
};

/* Records the first loaded libcudart; dlopen happens after the walk (dl_iterate_phdr holds a
 * loader lock that a concurrent dlopen takes in the other order). */
static int rt_visit(struct dl_phdr_info *info, size_t size, void *data)
{
	struct rt_search *s = data;
	size_t n;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libcudart.so"))
		return 0;
	n = strlen(info->dlpi_name);
	if (n >= sizeof(s->path))
		return 0;
	memcpy(s->path, info->dlpi_name, n + 1);
	return 1;
}

static void *rt_lookup(const char *name)
{
	struct rt_search s = { { 0 } };
	void *fn = dlsym(RTLD_NEXT, name), *h;

	if (fn || !dl_iterate_phdr(rt_visit, &s))
		return fn;
	h = dlopen(s.path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	fn = dlsym(h, name);
	dlclose(h); /* RTLD_NOLOAD took a reference: the object stays loaded */
	return fn;
}

/* The real runtime function `name`, cached in *slot once found (until then looked up on each call).
 */
static void *rt_fn(_Atomic(void *) *slot, const char *name)
{
	void *fn = atomic_load(slot);

	if (!fn) {
		fn = rt_lookup(name);
		atomic_store(slot, fn);
	}
	return fn;
}

static _Atomic(void *) real_malloc, real_free, real_get_device;

/* The runtime's current device of the calling thread, or -1 when it cannot be asked. */
static int rt_device(void)
{
	rt_get_device_fn fn = (rt_get_device_fn)(uintptr_t)rt_fn(&real_get_device, "cudaGetDevice");
	int dev = -1;

	if (!fn) /* no runtime loaded (yet): a thread's device is 0 until cudaSetDevice */
		return 0;
	if (fn(&dev) != RT_SUCCESS)
		return -1;
	return dev;
}

static int real_cuda_malloc(void **ptr, size_t size)
{
	rt_malloc_fn fn = (rt_malloc_fn)(uintptr_t)rt_fn(&real_malloc, "cudaMalloc");

	return fn ? fn(ptr, size) : RT_INITIALIZATION_ERROR;
}

static int real_cuda_free(void *ptr)
{
	rt_free_fn fn = (rt_free_fn)(uintptr_t)rt_fn(&real_free, "cudaFree");

	return fn ? fn(ptr) : RT_INITIALIZATION_ERROR;
}

CMS_API_PRELOAD int cudaMalloc(void **ptr, size_t size);
CMS_API_PRELOAD int cudaFree(void *ptr);

CMS_API_PRELOAD int cudaMalloc(void **ptr, size_t size)
{
	uint64_t dptr = 0;
	cms_status st;
	int dev = -1;

	/* Ours with an active region, else with a default region for the thread's device (set,
	 * or made from the hook context's template by cms_hook_alloc: CMS_ERR_NOT_FOUND when
	 * there is neither, and the call goes to the runtime). */
	if (!cms_hook_region_current() && (dev = rt_device()) < 0)
		return real_cuda_malloc(ptr, size);
	if (!ptr)
		return RT_INVALID_VALUE;
	*ptr = NULL;
	if (!size)
		return RT_SUCCESS; /* the runtime's answer to a 0-byte request */
	st = cms_hook_alloc(size, dev >= 0 ? dev : rt_device(), &dptr);
	switch (st) {
	case CMS_OK:
		*ptr = (void *)(uintptr_t)dptr;
		return RT_SUCCESS;
	case CMS_ERR_NOT_FOUND:	     /* no region (after fork, say) */
	case CMS_ERR_INVALID_DEVICE: /* the thread works on another device now */
	case CMS_ERR_FORKED:
		return real_cuda_malloc(ptr, size);
	default:
		return RT_MEMORY_ALLOCATION;
	}
}

CMS_API_PRELOAD int cudaFree(void *ptr)
{
	if (ptr) {
		switch (cms_hook_free(ptr)) {
		case CMS_OK:
			return RT_SUCCESS;
		case CMS_ERR_NOT_BASE:
			return RT_INVALID_VALUE; /* inside one of ours, not its base */
		case CMS_ERR_NOT_FOUND:		 /* not ours (any more) */
		case CMS_ERR_INVALID_ARGUMENT:	 /* no hook context */
		case CMS_ERR_FORKED:
			break;
		default: /* ours, and the wait or the free failed: kept, never the runtime's */
			return RT_UNKNOWN;
		}
	}
	return real_cuda_free(ptr);
}
