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
 * cms_hook_context_set - makes ctx the process-wide hook context: the
 * context hooked frees go to and hooked allocations' regions must belong to.
 * Replacing or clearing it waits until the hooked calls that began before
 * it (the only ones that may use the previous context) have returned, so the
 * previous context can then be destroyed safely; hooked calls that begin
 * meanwhile use the new one, so steady hooked traffic on other threads does
 * not hold it up. cms_context_destroy clears it when it destroys the hook context
 * (after releasing its allocations).
 *   ctx: the new hook context; NULL clears it.
 * Ownership: ctx stays the caller's; it is not destroyed by this library.
 * Threads: thread-safe; replacements are serialised; waits for the hooked
 * calls that began before it (in a child after fork(), none: the parent's
 * calls in flight are not).
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
 * allocations refuse it (they never touch it); a hooked allocation in flight
 * when another thread destroys the region holds the region's memory until it
 * returns, and either completes before the destroy releases the region's
 * allocations (the destroy then releases it too) or is refused.
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
 * cms_hook_region_default_set (since 1.2) - makes region the default region
 * of device for hooked allocations: cms_hook_alloc (so the preload's
 * cudaMalloc and cms_torch_alloc) on a thread with no active region
 * (cms_hook_region_push) allocates on device in it. This puts a whole
 * process's allocations on a device into one region without a push on each
 * thread. A thread's active region, when it has one, comes first.
 *   device: CUDA device ordinal, 0 <= device < 64.
 *   region: a live region of the hook context on device; NULL clears the
 *           device's default.
 * Ownership: region is borrowed. The default is cleared when the region is
 * destroyed (cms_region_destroy, cms_context_destroy) and by every
 * cms_hook_context_set (all devices' defaults, also when the same context is
 * set again), so it never names a destroyed region.
 * Threads: thread-safe, also against a concurrent destroy of the region: the
 * region is looked up among the hook context's live regions (under its lock)
 * before it is touched, so it is either refused or set and then cleared by
 * the destroy; takes the hook context's lock briefly.
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
 * Ownership: borrowed (owned by its context); a concurrent destroy may free
 * it after the call returns: use it only where the caller orders it before
 * such a destroy.
 * Threads: thread-safe; takes the hook context's lock briefly. CUDA: none.
 * Returns: the region, or NULL when the device has none, device is out of
 * range, no hook context is set, or in a child after fork(); never fails.
 */
CMS_API cms_region *cms_hook_region_default(int32_t device);

/*
 * cms_hook_region_default_template_set (since 1.2) - default regions made on
 * demand: from this call on, a hooked allocation (cms_hook_alloc, so the
 * preload's cudaMalloc and cms_torch_alloc) on a thread with no active region,
 * on a device that has no default region (cms_hook_region_default_set), first
 * makes the region tagged tag on that device its default: the existing one
 * (cms_region_find), else a new one (cms_region_create with opts, its device
 * replaced by the allocation's, and given disk_dir, when given, before any
 * other thread can find it). An existing region is taken as it is (its
 * directory, or none, unchanged). Only devices that allocate get a region (and
 * the primary context and streams cms_region_create sets up), so a process
 * that sees many GPUs but uses one holds nothing on the others. A region so
 * made is an ordinary region of the hook context: pause, resume and destroy
 * it by its tag; destroying it clears the device's default, and the next
 * such allocation makes it again.
 *   tag:  see CMS_TAG_MAX; copied. NULL clears the template (defaults already
 *         made stay until cleared with cms_hook_region_default_set).
 *   opts: NULL for the defaults; copied and checked as cms_region_create
 *         checks them (its device is ignored).
 *   disk_dir: NULL, or (only with CMS_POLICY_DISK in opts) the directory
 *         every region the template makes keeps its content in while paused,
 *         so that it can pause from its first allocation on: 1..4000 bytes,
 *         absolute or relative to the current directory at the time of this
 *         call, checked and resolved to an absolute path now (realpath) and
 *         kept. Without it a DISK region so made refuses to pause until
 *         cms_region_disk_dir_set gives it one. Ignored when tag is NULL.
 * The template is cleared by every cms_hook_context_set.
 * Threads: thread-safe; takes the hook context's lock briefly. A region
 * creation that fails (a bad device, no memory; with disk_dir, a directory
 * that can no longer take the region's file: what cms_region_disk_dir_set
 * returns, and no region is left) fails the allocation with its status; two
 * threads making the same device's region at once both end in it.
 * CUDA: none here; the allocation that makes the region calls what
 * cms_region_create calls.
 * Returns (on failure the previous template stays):
 *   CMS_OK
 *   CMS_ERR_INVALID_ARGUMENT: a bad tag; an unknown policy or flag in opts;
 *     CMS_REGION_HOST_PAGEABLE without CMS_POLICY_HOST; disk_dir without
 *     CMS_POLICY_DISK, empty, too long or not a directory; no hook context
 *     is set (with a non-NULL tag).
 *   CMS_ERR_NOT_FOUND: disk_dir, or a component of it, does not exist.
 *   CMS_ERR_PERMISSION: a component of disk_dir cannot be searched.
 *   CMS_ERR_IO: another failure resolving disk_dir (the message names it).
 *   CMS_ERR_OUT_OF_HOST_MEMORY: no memory to resolve disk_dir.
 *   CMS_ERR_STRUCT_SIZE: opts->struct_size.
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 */
CMS_API cms_status cms_hook_region_default_template_set(const char *tag,
							const cms_region_options *opts,
							const char *disk_dir);

/*
 * cms_hook_memory_margin_set (since 1.2) - device memory every hooked
 * allocation must leave free: from this call on, cms_hook_alloc (so the
 * preload's cudaMalloc and cms_torch_alloc) of size bytes fails with
 * CMS_ERR_OUT_OF_DEVICE_MEMORY, before creating anything, when the device's
 * free memory (cuMemGetInfo) is less than bytes + size, so that an allocator
 * such as PyTorch's frees its cache and retries (torch_memory_saver's
 * memory_margin_bytes). Process-wide; kept across cms_hook_context_set.
 *   bytes: the margin in bytes; 0 (the default) turns the check off.
 * Threads: thread-safe (an atomic store); allocations in flight may still use
 * the previous margin. CUDA: none here; each checked allocation calls
 * cuMemGetInfo in the device's primary context.
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
 * cms_hook_free - frees ptr into the hook context with cms_free: for
 * interposers that must tell their own pointers from others'. Since 1.2 it
 * first waits until the allocation's device is idle (cuCtxSynchronize in its
 * primary context), as the CUDA runtime's cudaFree does: allocators written
 * for cudaFree free memory that kernels launched just before may still be
 * writing (PyTorch's out-of-memory retry frees its cached segments so). A
 * pointer of an
 * allocation that a region's or context's destroy already released is
 * accepted once, as a no-op; the thread's last-error message may then be one
 * this call recorded while looking the pointer up. Once such a destroy freed
 * the address, another allocator (the CUDA runtime) may be handed it again:
 * if the driver that allocation came from knows memory at ptr, the pointer is
 * forgotten and the call answers as for a pointer that is not ours, so that
 * an interposer frees the other allocator's memory instead of leaking it.
 *   ptr: the device pointer cms_hook_alloc returned.
 * Threads: thread-safe; blocks until the device is idle (no lock held
 * meanwhile, but a cms_hook_context_set or the hook context's destroy waits
 * for it), so not from a stream callback or host function. In a child after
 * fork() it makes no driver call.
 * CUDA: cuCtxPushCurrent, cuCtxSynchronize, cuCtxPopCurrent (since 1.2), then
 * as cms_free (cuMemUnmap, cuMemRelease, cuMemAddressFree, ...); for a
 * released pointer, cuPointerGetAttribute (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
 * if that driver is still loaded in the process.
 * Returns:
 *   CMS_OK: freed, or already released by a destroy (and no memory is at ptr).
 *   CMS_ERR_NOT_FOUND: in no allocation of the hook context (not ours: free
 *     it elsewhere), including a released pointer whose address the driver
 *     knows memory at again.
 *   CMS_ERR_NOT_BASE: inside one of ours but not at its base.
 *   CMS_ERR_INVALID_ARGUMENT: ptr is NULL; no hook context is set (and ptr
 *     is not a released pointer without memory at it).
 *   CMS_ERR_FORKED: the hook context was created before a fork().
 *   driver statuses of the wait (a fault of an earlier kernel, say): nothing
 *     is freed.
 *   what cms_free returns (driver statuses).
 */
CMS_API cms_status cms_hook_free(void *ptr);

/*
 * cms_torch_alloc - PyTorch CUDAPluggableAllocator allocation entry point
 * (signature fixed by PyTorch): cms_hook_alloc of size bytes on device
 * ordinal device (in the thread's active region, else in the device's default
 * region).
 *   size:   bytes, > 0.
 *   device: CUDA device ordinal, >= 0; must be the active region's.
 *   stream: ignored (the memory is usable from any stream).
 * Ownership: the memory belongs to the region until cms_torch_free.
 * Threads: thread-safe.
 * CUDA: as cms_alloc.
 * Returns: the device pointer, or NULL (PyTorch then reports out-of-memory)
 * when no region is active and the device has no default region, size <= 0, device < 0 or differs
 * from the region's, the region is paused or destroyed, or the allocation fails; the reason is in
 * cms_last_error().
 */
CMS_API void *cms_torch_alloc(ssize_t size, int device, void *stream);

/*
 * cms_torch_free - PyTorch CUDAPluggableAllocator free entry point (signature
 * fixed by PyTorch): cms_hook_free(ptr), whether or not a region is active;
 * so since 1.2 it waits until the allocation's device is idle first (PyTorch
 * orders its streams' uses of a block but, written for cudaFree, not the
 * kernels still writing a segment it frees).
 * size, device and stream are ignored.
 * Threads: thread-safe, from any thread.
 * CUDA: as cms_hook_free (cuCtxPushCurrent, cuCtxSynchronize, cuCtxPopCurrent,
 * then as cms_free).
 * Returns: nothing. It cannot fail visibly: NULL, unknown pointers and
 * failures are recorded in cms_last_error() only.
 */
CMS_API void cms_torch_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUMEMSAVER_HOOKS_H */
