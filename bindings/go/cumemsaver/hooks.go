// SPDX-License-Identifier: MIT

package cumemsaver

// Allocator hooks (cumemsaver_hooks.h): the process-wide hook context and the per-thread
// stack of regions where hooked allocations go.

/*
#include <cumemsaver.h>
#include <stdint.h>
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// HookContext is the process-wide hook context, set by Context.SetHookContext.
type HookContext struct {
	ctx    *Context
	mu     sync.Mutex
	closed bool
}

// SetHookContext makes c the process-wide hook context (cms_hook_context_set) until the
// returned HookContext is closed (or c is).
func (c *Context) SetHookContext() (*HookContext, error) {
	h := &HookContext{ctx: c}
	err := c.with(func(raw *C.cms_context) error {
		if err := call("cms_hook_context_set", func() C.cms_status { return c_cms_hook_context_set(raw) }); err != nil {
			return err
		}
		c.adopt(h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (h *HookContext) closeChild() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	if err := call("cms_hook_context_set", func() C.cms_status { return c_cms_hook_context_set(nil) }); err != nil {
		return err
	}
	h.closed = true
	return nil
}

// Close clears the hook context (waiting until no hooked call that may use it is in
// flight). Closing twice, or after the Context was closed, is a no-op.
func (h *HookContext) Close() error { return h.ctx.closeChild(h) }

// WithHook runs f with r as the calling goroutine's hook region: it locks the goroutine
// to its OS thread (the region stack is per thread), pushes r (cms_hook_region_push), runs
// f and pops it again (cms_hook_region_pop). Hooked allocations made by f (HookAlloc,
// TorchAlloc, an interposed allocator) go to r.
func (r *Region) WithHook(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := r.with(func(raw *C.cms_region) error {
		return call("cms_hook_region_push", func() C.cms_status { return c_cms_hook_region_push(raw) })
	}); err != nil {
		return err
	}
	defer c_cms_hook_region_pop()
	return f()
}

// IsHookRegion reports whether r is the calling OS thread's top hook region
// (cms_hook_region_current); meaningful inside WithHook.
func (r *Region) IsHookRegion() bool {
	cur := c_cms_hook_region_current()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return !r.closed && cur == r.raw
}

// HookAlloc allocates size bytes in the calling thread's hook region (cms_hook_alloc);
// device < 0: any. Call it inside Region.WithHook.
func HookAlloc(size uint64, device int32) (uint64, error) {
	var p C.uint64_t
	err := call("cms_hook_alloc", func() C.cms_status { return c_cms_hook_alloc(C.uint64_t(size), C.int32_t(device), &p) })
	return uint64(p), err
}

// HookFree frees a pointer of the hook context (cms_hook_free); ErrNotFound when it is not
// one of its allocations.
func HookFree(ptr uint64) error {
	return call("cms_hook_free", func() C.cms_status { return c_cms_hook_free(devicePointer(ptr)) })
}

// TorchAlloc is PyTorch's pluggable-allocator entry point (cms_torch_alloc, stream NULL):
// a device pointer in the calling thread's hook region, or 0 (the reason in
// LastErrorMessage on the same OS thread).
func TorchAlloc(size int64, device int32) uint64 {
	return uint64(uintptr(c_cms_torch_alloc(C.ssize_t(size), C.int(device), nil)))
}

// TorchFree is PyTorch's pluggable-allocator free entry point (cms_torch_free); it never
// fails visibly.
func TorchFree(ptr uint64, size int64, device int32) {
	c_cms_torch_free(devicePointer(ptr), C.ssize_t(size), C.int(device), nil)
}

// devicePointer passes a device address where C wants a void * (never dereferenced by
// Go; the library only looks it up).
func devicePointer(ptr uint64) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&ptr))
}
