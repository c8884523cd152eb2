# SPDX-License-Identifier: MIT
"""Allocation hooks (include/cumemsaver_hooks.h): a process-wide hook context and a
per-thread stack of active regions, for allocators that cannot pass a region themselves
(cumemsaver.torch builds on the same C functions).

    with ctx.hook_context() as hooks:      # cms_hook_context_set(ctx) ... (NULL)
        with hooks.push(region):           # cms_hook_region_push ... cms_hook_region_pop
            p = hooks.alloc(1 << 20)       # cms_hook_alloc: into the thread's top region
        hooks.free(p)                      # cms_hook_free
"""

import contextlib
import ctypes
import threading
from typing import Iterator, Optional, Union

from . import _lib as L
from .api import (
    Context,
    PathLike,
    Policy,
    Region,
    _call,
    _check,
    _enum_arg,
    _i32,
    _i64,
    _path,
    _tag,
    _u64,
)


# The HookContext set last (cms_hook_context_set keeps one process-wide context): closing an
# older one must not clear a newer one's.
_lock = threading.Lock()
_current: Optional["HookContext"] = None


def hook_region_current() -> Optional[int]:
    """The raw handle of the calling thread's top active region (cms_hook_region_current),
    or None. HookContext.current_region gives it as a Region."""
    return L.lib().cms_hook_region_current() or None


def hook_region_push(region: Region) -> None:
    """Makes region the calling thread's active region (cms_hook_region_push); prefer the
    context manager HookContext.push. Raises InvalidArgument (no hook context, another
    context, stack full)."""
    with region._use() as handle:
        _call("cms_hook_region_push", handle)


def hook_region_default_template_set(
    tag: Optional[str],
    policy: Union[Policy, int, str] = 0,
    flags: int = 0,
    disk_dir: Optional[PathLike] = None,
) -> None:
    """Default regions made on demand (cms_hook_region_default_template_set, since 1.2): a
    hooked allocation of a thread with no active region, on a device with no default region,
    first makes the region tagged tag on that device (found, or created with policy and the
    CMS_REGION_* flags, and given disk_dir with Policy.DISK) its default. Only devices that
    allocate get one. disk_dir is resolved to an absolute path now. None clears the template;
    cms_hook_context_set clears it too. Raises InvalidArgument (bad tag, policy or flags;
    disk_dir without Policy.DISK or not a directory; no hook context), NotFound (disk_dir does
    not exist), PermissionDenied, IOFailure."""
    if tag is None:
        _call("cms_hook_region_default_template_set", None, None, None)
        return
    opts = L.init_struct(L.cms_region_options)
    opts.policy = _enum_arg(Policy, policy, "policy")
    opts.flags = _u64(flags, "flags")
    arg = None if disk_dir is None else _path(disk_dir, "disk_dir")
    _call("cms_hook_region_default_template_set", _tag(tag), ctypes.byref(opts), arg)


def hook_memory_margin_set(nbytes: int) -> None:
    """Device bytes every hooked allocation must leave free (cms_hook_memory_margin_set,
    since 1.2): an allocation that would leave less fails (PyTorch then frees its cache and
    retries); 0 turns the check off. Process-wide."""
    _call("cms_hook_memory_margin_set", _u64(nbytes, "nbytes"))


def hook_region_pop() -> None:
    """Removes the calling thread's top active region; raises NotFound when none."""
    _call("cms_hook_region_pop")


def hook_region_default_set(device: int, region: Optional[Region]) -> None:
    """Makes region the default region of device in the hook context
    (cms_hook_region_default_set, since 1.2): cms_hook_alloc (the preload interposer's
    cudaMalloc, cms_torch_alloc) on a thread with no active region allocates there. None
    clears it. Destroying the region or changing the hook context clears it too. Raises
    InvalidArgument (region not of the hook context, or on another device), NotFound (no
    hook context)."""
    device = _i32(device, "device")
    if region is None:
        _call("cms_hook_region_default_set", device, None)
        return
    with region._use() as handle:
        _call("cms_hook_region_default_set", device, handle)


def hook_region_default(device: int) -> Optional[int]:
    """The raw handle of device's default region (cms_hook_region_default, since 1.2), or
    None."""
    return L.lib().cms_hook_region_default(_i32(device, "device")) or None


def hook_alloc(size: int, device: int = -1) -> int:
    """cms_hook_alloc: size bytes in the thread's top region (device: the region's device,
    or -1 for any); returns the device pointer. Raises NotFound when no region is active."""
    ptr = ctypes.c_uint64()
    _call("cms_hook_alloc", _u64(size, "size"), _i32(device, "device"), ctypes.byref(ptr))
    return ptr.value


def hook_free(ptr: int) -> None:
    """cms_hook_free: frees ptr into the hook context. Raises NotFound when it is not ours."""
    _call("cms_hook_free", ctypes.c_void_p(_u64(ptr, "ptr")))


def torch_alloc(size: int, device: int, stream: int = 0) -> int:
    """cms_torch_alloc (PyTorch's pluggable allocator entry point): the device pointer, or
    0 on failure (then last_error_message() says why)."""
    size = _i64(size, "size")  # ssize_t
    return L.lib().cms_torch_alloc(size, _i32(device, "device"), _u64(stream, "stream")) or 0


def torch_free(ptr: int, size: int = 0, device: int = 0, stream: int = 0) -> None:
    """cms_torch_free: frees ptr into the hook context; failures go to last_error_message()
    only (size, device and stream are ignored)."""
    L.lib().cms_torch_free(
        _u64(ptr, "ptr"), _i64(size, "size"), _i32(device, "device"), _u64(stream, "stream")
    )


class HookContext:
    """The process-wide hook context (cms_hook_context_set), set to context while this
    object is open; close() (or leaving `with`) clears it. Destroying the context clears it
    too. Made by Context.hook_context(). Making another HookContext replaces this one
    (closing this one then leaves the newer one set)."""

    def __init__(self, context: Context):
        global _current
        self._ctx: Optional[Context] = context
        with _lock:
            _call("cms_hook_context_set", context._h())
            _current = self

    @property
    def context(self) -> Context:
        if self._ctx is None:
            raise ValueError("cumemsaver hook context is closed")
        return self._ctx

    @property
    def closed(self) -> bool:
        return self._ctx is None

    def close(self) -> None:
        """Clears the process-wide hook context (waits for hooked calls in flight)."""
        global _current
        with _lock:
            if self._ctx is None:
                return
            ctx, self._ctx = self._ctx, None
            if _current is not self:
                return  # replaced by a newer HookContext
            _current = None
            if not ctx.closed:  # cms_context_destroy has cleared it already otherwise
                _call("cms_hook_context_set", None)

    def __enter__(self) -> "HookContext":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextlib.contextmanager
    def push(self, region: Region) -> Iterator[Region]:
        """Makes region the calling thread's active region for the `with` block."""
        if region.context is not self.context:
            raise ValueError("the region belongs to another context than the hook context")
        hook_region_push(region)
        try:
            yield region
        finally:
            _check(L.lib().cms_hook_region_pop(), "cms_hook_region_pop")

    def current_region(self) -> Optional[Region]:
        """The calling thread's top active region, or None."""
        ctx = self.context
        with ctx._regions_lock:  # the handle and its Region object together
            handle = hook_region_current()
            return None if handle is None else ctx._region_of(handle)

    def set_default_region(self, device: int, region: Optional[Region]) -> None:
        """Makes region (of this context, on device) the device's default for threads with
        no active region; None clears it (cms_hook_region_default_set, since 1.2)."""
        if region is not None and region.context is not self.context:
            raise ValueError("the region belongs to another context than the hook context")
        hook_region_default_set(device, region)

    def default_region(self, device: int) -> Optional[Region]:
        """The device's default region, or None (cms_hook_region_default)."""
        ctx = self.context  # raises ValueError once closed
        with ctx._regions_lock:  # the handle and its Region object together
            handle = hook_region_default(device)
            return None if handle is None else ctx._region_of(handle)

    def alloc(self, size: int, device: int = -1) -> int:
        """hook_alloc (cms_hook_alloc) while this hook context is set."""
        self.context  # raises ValueError once closed
        return hook_alloc(size, device)

    def free(self, ptr: int) -> None:
        """hook_free (cms_hook_free) while this hook context is set."""
        self.context  # raises ValueError once closed
        hook_free(ptr)


__all__ = [
    "HookContext",
    "hook_alloc",
    "hook_free",
    "hook_region_current",
    "hook_memory_margin_set",
    "hook_region_default",
    "hook_region_default_set",
    "hook_region_default_template_set",
    "hook_region_pop",
    "hook_region_push",
    "torch_alloc",
    "torch_free",
]
