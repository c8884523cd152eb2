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
 * cms_hook_context_set - makes ctx the process-wide hook context, the one
 * hooked allocations and frees use.
 * Replacing or clearing it waits until the hooked calls that began before it
 * have returned, so the previous context may then be destroyed; hooked calls
 * that begin meanwhile use the new one. Every call clears the default regions
 * and the template (cms_hook_region_default_set,
 * cms_hook_region_default_template_set). cms_context_destroy of the hook
 * context clears it.
 *   ctx: the new hook context; NULL clears it.
 * Ownership: ctx stays the caller's.
 * Threads: thread-safe; replacements are serialised.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_FORKED: ctx was created before a fork() of this process.
 */
CMS_API cms_status cms_hook_context_set(cms_context *ctx);

/*
 * cms_hook_region_push - makes region the calling thread's active region,
 * above those pushed before.
 * Hooked allocations of the thread go to the region on top. At most
 * CMS_HOOK_DEPTH_MAX regions deep.
 * Ownership: region is borrowed; if it is destroyed while on a stack, hooked
 * allocations refuse it (they never touch it).
 * Threads: affects only the calling thread.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: region is NULL; no hook context is set; the
 *     region belongs to another context; the stack is full.
 *   CMS_ERR_FORKED: the region's context was created before a fork().
 */
CMS_API cms_status cms_hook_region_push(cms_region *region);

/*
 * cms_hook_region_pop - removes the calling thread's top active region.
 * Threads: affects only the calling thread; never blocks.
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_NOT_FOUND: the stack is empty (always so in a child after fork()).
 */
CMS_API cms_status cms_hook_region_pop(void);

/*
 * cms_hook_region_current - the calling thread's top active region.
 * Ownership: borrowed (owned by its context); it may have been destroyed since
 * it was pushed.
 * Threads: reads only the calling thread's stack.
 * CUDA: none.
 * Returns: the region, or NULL when none is active; never fails.
 */
CMS_API cms_region *cms_hook_region_current(void);

/*
 * cms_hook_region_default_set (since 1.2) - makes region the default region of
 * device for hooked allocations.
 * cms_hook_alloc (so the preload's cudaMalloc and cms_torch_alloc) on a thread
 * with no active region allocates on device in it: one region for a whole
 * process's allocations on a device, without a push on each thread. The
 * default is cleared when the region is destroyed and by every
 * cms_hook_context_set.
 *   device: CUDA device ordinal, 0 <= device < 64.
 *   region: a live region of the hook context on device; NULL clears the
 *           device's default.
 * Ownership: region is borrowed.
 * Threads: thread-safe, also against a concurrent destroy of the region (it is
 * then refused, or set and cleared by the destroy).
 * CUDA: none.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: device is out of range; no hook context is set
 *     (with a non-NULL region); the region belongs to another context, is on
 *     another device or was destroyed.
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 */
CMS_API cms_status cms_hook_region_default_set(int32_t device, cms_region *region);

/*
 * cms_hook_region_default (since 1.2) - the default region of device
 * (cms_hook_region_default_set).
 * Ownership: borrowed (owned by its context); a concurrent destroy may free it
 * after the call returns: use it only where the caller orders it before such a
 * destroy.
 * Threads: thread-safe.
 * CUDA: none.
 * Returns: the region, or NULL when the device has none, device is out of
 * range, no hook context is set, or in a child after fork(); never fails.
 */
CMS_API cms_region *cms_hook_region_default(int32_t device);

/*
 * cms_hook_region_default_template_set (since 1.2) - makes default regions on
 * demand, from a template.
 * From this call on, a hooked allocation on a thread with no active region, on
 * a device without a default region, first makes the region tagged tag on that
 * device its default: the existing one (cms_region_find, taken as it is), else
 * a new one (cms_region_create with opts on the allocation's device, given
 * disk_dir before any other thread can find it). Only devices that allocate
 * get a region. A region so made is an ordinary region of the hook context;
 * destroying it clears the default, and the next such allocation makes it
 * again. A region creation that fails fails that allocation with its status.
 * Every cms_hook_context_set clears the template.
 *   tag:      CMS_TAG_MAX; copied. NULL clears the template (defaults already
 *             made stay).
 *   opts:     NULL for the defaults; copied and checked as cms_region_create
 *             checks them (its device is ignored).
 *   disk_dir: NULL, or (with CMS_POLICY_DISK only) the directory of every
 *             region the template makes, so it can pause from its first
 *             allocation: 1..4000 bytes, resolved now (realpath) and kept.
 *             Ignored when tag is NULL.
 * Threads: thread-safe.
 * CUDA: none; the allocation that makes a region calls what cms_region_create
 * calls.
 * Returns (on failure the previous template stays):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: a bad tag; an unknown policy or flag in opts (as
 *     cms_region_create); disk_dir without CMS_POLICY_DISK, empty, too long or
 *     not a directory; no hook context is set (with a non-NULL tag).
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_NOT_FOUND: disk_dir, or a component of it, does not exist.
 *   CMS_ERR_PERMISSION: a component of disk_dir cannot be searched.
 *   CMS_ERR_IO: another failure resolving disk_dir (the message names it).
 *   CMS_ERR_OUT_OF_HOST_MEMORY: no memory to resolve disk_dir.
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 */
CMS_API cms_status cms_hook_region_default_template_set(const char *tag,
							const cms_region_options *opts,
							const char *disk_dir);

/*
 * cms_hook_memory_margin_set (since 1.2) - device memory every hooked
 * allocation must leave free.
 * From this call on, cms_hook_alloc (so the preload's cudaMalloc and
 * cms_torch_alloc) of size bytes fails with CMS_ERR_OUT_OF_DEVICE_MEMORY,
 * creating nothing, when the device has less than bytes + size free, so that
 * an allocator such as PyTorch's frees its cache and retries. Process-wide;
 * kept across cms_hook_context_set.
 *   bytes: the margin in bytes; 0 (the default) turns the check off.
 * Threads: thread-safe; allocations in flight may still use the previous
 * margin.
 * CUDA: none here; each checked allocation calls cuMemGetInfo.
 * Returns:
 *   CMS_OK
 */
CMS_API cms_status cms_hook_memory_margin_set(uint64_t bytes);

/*
 * cms_hook_alloc - allocates size bytes with cms_alloc in the calling thread's
 * active region, else (since 1.2) in device's default region.
 *   size:   bytes, > 0.
 *   device: the CUDA device ordinal the memory must be on; negative: any (then
 *           only an active region serves).
 *   ptr:    receives the device pointer; 0 on failure.
 * Ownership: the allocation belongs to its region until cms_hook_free or
 * cms_free (or the region's or context's destroy).
 * Threads: thread-safe.
 * CUDA: as cms_alloc; cuMemGetInfo when a margin is set
 * (cms_hook_memory_margin_set); as cms_region_create when the template makes
 * the default region.
 * Returns:
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: ptr is NULL; size is 0; the thread's active
 *     region was destroyed or is not in the hook context (or no hook context
 *     is set).
 *   CMS_ERR_NOT_FOUND: no active region on this thread and no default region
 *     for device (none set, no template, device negative, no hook context):
 *     not ours to serve.
 *   CMS_ERR_FORKED: in a child after fork() (its stack is empty and the hook
 *     context is the parent's): not ours to serve either.
 *   CMS_ERR_INVALID_DEVICE: the active region is on another device.
 *   CMS_ERR_PAUSED: the region is paused.
 *   CMS_ERR_OUT_OF_DEVICE_MEMORY: no device memory, or less free than the
 *     margin plus size.
 *   driver statuses; what cms_alloc returns; when the template makes the
 *     default region, what cms_region_create and cms_region_disk_dir_set
 *     return (CMS_ERR_PERMISSION, CMS_ERR_IO, ...).
 */
CMS_API cms_status cms_hook_alloc(uint64_t size, int32_t device, uint64_t *ptr);

/*
 * cms_hook_free - frees ptr into the hook context with cms_free, for
 * interposers that must tell their pointers from others'.
 * Since 1.2 it first waits until the allocation's device is idle, as cudaFree
 * does (allocators written for cudaFree free memory that kernels launched just
 * before may still write). A pointer of an allocation a region's or context's
 * destroy already released is accepted once, as a no-op, unless the driver
 * knows memory at that address again (another allocator was handed it): then
 * it is treated as not ours, so the interposer frees the other allocator's
 * memory. The thread's last-error message may change even on success.
 *   ptr: the device pointer cms_hook_alloc returned.
 * Threads: thread-safe; blocks until the device is idle (a
 * cms_hook_context_set or the hook context's destroy waits for it), so not
 * from a stream callback or host function.
 * CUDA: cuCtxSynchronize (since 1.2), then as cms_free; cuPointerGetAttribute
 * for a released pointer.
 * Returns:
 *   CMS_OK: freed, or released already by a destroy (and no memory is at ptr).
 *   CMS_ERR_NOT_FOUND: in no allocation of the hook context (not ours: free it
 *     elsewhere).
 *   CMS_ERR_NOT_BASE: inside one of ours, not at its base.
 *   CMS_ERR_INVALID_ARGUMENT: ptr is NULL; no hook context is set (and ptr is
 *     not a released pointer).
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 *   driver statuses: waiting for the device failed (a fault of an earlier
 *     kernel, say), nothing freed; or cms_free failed.
 */
CMS_API cms_status cms_hook_free(void *ptr);

/*
 * cms_torch_alloc - PyTorch CUDAPluggableAllocator allocation entry point:
 * cms_hook_alloc of size bytes on device.
 * The signature is PyTorch's.
 *   size:   bytes, > 0.
 *   device: CUDA device ordinal, >= 0; the active region's when the thread has
 *           one.
 *   stream: ignored (the memory is usable from any stream).
 * Ownership: the memory belongs to its region until cms_torch_free.
 * Threads: thread-safe.
 * CUDA: as cms_hook_alloc.
 * Returns: the device pointer, or NULL (PyTorch then reports out-of-memory)
 * when cms_hook_alloc fails, size <= 0 or device < 0; the reason is in
 * cms_last_error().
 */
CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream);

/*
 * cms_torch_free - PyTorch CUDAPluggableAllocator free entry point:
 * cms_hook_free(ptr).
 * The signature is PyTorch's; size, device and stream are ignored. Since 1.2
 * it waits until the allocation's device is idle first, as cms_hook_free.
 * Threads: thread-safe, from any thread, whether or not a region is active.
 * CUDA: as cms_hook_free.
 * Returns: nothing. It cannot fail visibly: NULL, unknown pointers and
 * failures are recorded in cms_last_error() only.
 */
CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_HOOKS_H */
