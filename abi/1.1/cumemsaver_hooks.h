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
 * rather than an unknown pointer. After fork() the child's stacks are empty
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
 * cms_hook_context_set - makes ctx the process-wide hook context: the
 * context hooked frees go to and hooked allocations' regions must belong to.
 * Replacing or clearing it waits until no hooked call that may use the
 * previous one is in flight, so the previous context can then be destroyed
 * safely. cms_context_destroy clears it when it destroys the hook context
 * (after releasing its allocations).
 *   ctx: the new hook context; NULL clears it.
 * Ownership: ctx stays the caller's; it is not destroyed by this library.
 * Threads: thread-safe; waits until no hooked call that may use the previous
 * hook context is in flight.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_FORKED: ctx was created before a fork() of this process.
 */
CMS_API cms_status cms_hook_context_set(cms_context *ctx);

/*
 * cms_hook_region_push - makes region the calling thread's active region,
 * above the ones pushed before (at most CMS_HOOK_DEPTH_MAX deep). Hooked
 * allocations of this thread go to the region on top.
 * Ownership: region is borrowed: if it is destroyed while on a stack, hooked
 * allocations refuse it (they never touch it).
 * Threads: affects only the calling thread.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; no hook context is set; the
 *     region belongs to another context than the hook context; the stack is
 *     full.
 *   CMS_ERR_FORKED: the region's context was created before a fork().
 */
CMS_API cms_status cms_hook_region_push(cms_region *region);

/*
 * cms_hook_region_pop - removes the calling thread's top active region.
 * Threads: affects only the calling thread; never blocks.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_NOT_FOUND: the stack is empty (which it always is in a child
 *     after fork()).
 */
CMS_API cms_status cms_hook_region_pop(void);

/*
 * cms_hook_region_current - the calling thread's top active region.
 * Ownership: borrowed (owned by its context); it may have been destroyed
 * since it was pushed.
 * Threads: reads only the calling thread's stack. CUDA: none.
 * Returns: the region, or NULL when none is active; never fails.
 */
CMS_API cms_region *cms_hook_region_current(void);

/*
 * cms_hook_alloc - allocates size bytes with cms_alloc in the calling
 * thread's active region.
 *   size:   bytes, > 0.
 *   device: the CUDA device ordinal the memory must be on (the active region's
 *           device); negative: any.
 *   ptr:    receives the device pointer; 0 on failure.
 * Ownership: the allocation belongs to the region until cms_hook_free /
 * cms_free (or the region's or context's destroy).
 * Threads: thread-safe.
 * CUDA: as cms_alloc (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess).
 * Returns:
 *   CMS_OK
 *   CMS_ERR_NOT_FOUND: no region is active on this thread (not ours to serve).
 *   CMS_ERR_INVALID_DEVICE: the active region is on another device.
 *   CMS_ERR_INVALID_ARGUMENT: ptr is NULL; size is 0; no hook context is set;
 *     the active region was destroyed or is not in the hook context.
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 *   what cms_alloc returns (CMS_ERR_PAUSED, CMS_ERR_OUT_OF_DEVICE_MEMORY, ...,
 *     driver statuses).
 */
CMS_API cms_status cms_hook_alloc(uint64_t size, int32_t device, uint64_t *ptr);

/*
 * cms_hook_free - frees ptr into the hook context with cms_free: for
 * interposers that must tell their own pointers from others'. Does not
 * synchronize the application's streams (as cms_free). A pointer of an
 * allocation that a region's or context's destroy already released is
 * accepted once, as a no-op; the thread's last-error message may then be one
 * this call recorded while looking the pointer up.
 *   ptr: the device pointer cms_hook_alloc returned.
 * Threads: thread-safe.
 * CUDA: as cms_free (cuMemUnmap, cuMemRelease, cuMemAddressFree, ...).
 * Returns:
 *   CMS_OK: freed, or already released by a destroy.
 *   CMS_ERR_NOT_FOUND: in no allocation of the hook context (not ours: free
 *     it elsewhere).
 *   CMS_ERR_NOT_BASE: inside one of ours but not at its base.
 *   CMS_ERR_INVALID_ARGUMENT: ptr is NULL; no hook context is set.
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 *   what cms_free returns (driver statuses).
 */
CMS_API cms_status cms_hook_free(void *ptr);

/*
 * cms_torch_alloc - PyTorch CUDAPluggableAllocator allocation entry point
 * (signature fixed by PyTorch): cms_hook_alloc of size bytes on device
 * ordinal device.
 *   size:   bytes, > 0.
 *   device: CUDA device ordinal, >= 0; must be the active region's.
 *   stream: ignored (the memory is usable from any stream).
 * Ownership: the memory belongs to the region until cms_torch_free.
 * Threads: thread-safe.
 * CUDA: as cms_alloc.
 * Returns: the device pointer, or NULL (PyTorch then reports out-of-memory)
 * when no region is active, size <= 0, device < 0 or differs from the
 * region's, the region is paused or destroyed, or the allocation fails; the
 * reason is in cms_last_error().
 */
CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream);

/*
 * cms_torch_free - PyTorch CUDAPluggableAllocator free entry point (signature
 * fixed by PyTorch): cms_hook_free(ptr), whether or not a region is active;
 * does not synchronize the application's streams (PyTorch has already
 * ordered its streams' uses).
 * size, device and stream are ignored.
 * Threads: thread-safe, from any thread.
 * CUDA: as cms_free.
 * Returns: nothing. It cannot fail visibly: NULL, unknown pointers and
 * failures are recorded in cms_last_error() only.
 */
CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_HOOKS_H */
