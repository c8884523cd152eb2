/* SPDX-License-Identifier: MIT */
/*
 * cumemsaver_hooks.h - allocator hooks of libcumemsaver (since 1.1).
 *
 * Part of the public C ABI: include <cumemsaver.h>, which includes this file;
 * its conventions (units, statuses, fork, threads) hold here too.
 *
 * Entry points for allocators that cannot pass a region: PyTorch's
 * CUDAPluggableAllocator (cms_torch_alloc / cms_torch_free, loaded by name
 * from this library) and the LD_PRELOAD interposer libcumemsaver-preload.so
 * (cms_hook_alloc / cms_hook_free). A process-wide hook context receives
 * frees from any thread; a per-thread stack of regions says where the
 * calling thread's allocations go. Allocations of the hook context that a
 * region or context destroy released are remembered, so that a free of one
 * arriving later (PyTorch frees its pools' segments late) is a no-op success
 * rather than an unknown pointer - unless the driver knows memory at that
 * address again (another allocator was handed it). After fork() the child's
 * stacks are empty
 * and the parent's hook context answers CMS_ERR_FORKED.
 */
#ifndef CUMEMSAVER_HOOKS_H
#define CUMEMSAVER_HOOKS_H

#include "cumemsaver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deepest per-thread stack of active regions (cms_hook_region_push). */
#define CMS_HOOK_DEPTH_MAX 16

/*
 * Makes ctx (NULL: none) the process-wide hook context that hooked allocations and frees use;
 * ctx stays the caller's. Thread-safe. See cms_hook_context_set(3).
 */
CMS_API cms_status cms_hook_context_set(cms_context *ctx);

/*
 * Makes region (borrowed) the calling thread's active region for hooked allocations, above
 * those pushed before. Per thread. See cms_hook_region_push(3).
 */
CMS_API cms_status cms_hook_region_push(cms_region *region);

/*
 * Removes the calling thread's top active region. Per thread; never blocks. See
 * cms_hook_region_pop(3).
 */
CMS_API cms_status cms_hook_region_pop(void);

/*
 * The calling thread's top active region, or NULL; borrowed (it may have been destroyed since
 * it was pushed). Per thread; never fails. See cms_hook_region_current(3).
 */
CMS_API cms_region *cms_hook_region_current(void);

/*
 * Makes region (borrowed; NULL: none) the default region of device for hooked allocations.
 * Thread-safe. See cms_hook_region_default_set(3).
 */
CMS_API cms_status cms_hook_region_default_set(int32_t device, cms_region *region);

/*
 * The default region of device, or NULL; borrowed (a concurrent destroy may free it).
 * Thread-safe; never fails. See cms_hook_region_default(3).
 */
CMS_API cms_region *cms_hook_region_default(int32_t device);

/*
 * Makes default regions on demand from a template (tag NULL: none): a hooked allocation with no
 * active region nor default region on its device first finds or creates the region tagged tag
 * there. Thread-safe. See cms_hook_region_default_template_set(3).
 */
CMS_API cms_status cms_hook_region_default_template_set(const char *tag,
							const cms_region_options *opts,
							const char *disk_dir);

/*
 * Device memory (bytes) that every hooked allocation must leave free on the device (0: none).
 * Thread-safe. See cms_hook_memory_margin_set(3).
 */
CMS_API cms_status cms_hook_memory_margin_set(uint64_t bytes);

/*
 * Allocates size bytes with cms_alloc in the calling thread's active region, else in device's
 * default region; the allocation belongs to that region. Thread-safe. See cms_hook_alloc(3).
 */
CMS_API cms_status cms_hook_alloc(uint64_t size, int32_t device, uint64_t *ptr);

/*
 * Frees ptr into the hook context with cms_free, for interposers that must tell their pointers
 * from others'. Thread-safe; blocks until the device is idle. See cms_hook_free(3).
 */
CMS_API cms_status cms_hook_free(void *ptr);

/*
 * PyTorch CUDAPluggableAllocator allocation entry point (cms_hook_alloc); returns the pointer,
 * NULL on failure. Thread-safe. See cms_torch_alloc(3).
 */
CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream);

/*
 * PyTorch CUDAPluggableAllocator free entry point (cms_hook_free). Thread-safe; never fails.
 * See cms_torch_free(3).
 */
CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_HOOKS_H */
