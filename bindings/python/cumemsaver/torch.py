# SPDX-License-Identifier: MIT
"""Pausable PyTorch tensors and CUDA-graph pools (imported only where torch is installed).

    import cumemsaver.torch as cmt
    saver = cmt.Saver()                       # one per process; hook_mode="torch" by default
    with saver.region("weights", policy=cmt.Policy.HOST):
        model = build_model().cuda()          # these tensors' memory is cumemsaver's
    with saver.region("kv_cache"):
        kv = torch.empty(..., device="cuda")
    saver.pause("kv_cache"); saver.pause("weights")   # memory goes back to the driver
    saver.resume("weights"); saver.resume("kv_cache") # same addresses; weights restored

How it works. hook_mode="torch": one torch.cuda.MemPool per (tag, policy, device) whose
allocator is torch.cuda.memory.CUDAPluggableAllocator over the library's exported
cms_torch_alloc / cms_torch_free. Inside region(), that pool is the thread's current pool
and the region is pushed on the library's per-thread hook stack, so every new segment the
pool needs is a cms_alloc in that region; no other tag's pool can ever receive it. Frees
(garbage collector, empty_cache, any thread) go to cms_free through the process-wide hook
context. hook_mode="preload": the process was started with libcumemsaver-preload.so in
LD_PRELOAD (see cumemsaver.preload); each (tag, policy, device) still gets its own MemPool,
with PyTorch's native allocator, whose cudaMalloc calls the interposer serves.

Rules: do not allocate in a paused tag's region (region() refuses); pause/resume wait for
the device (cuCtxSynchronize by default); a tag has one policy per device.
"""

import atexit
import contextlib
import os
import threading
import weakref
from typing import Dict, List, Optional, Tuple, Union

from ._needs_torch import import_torch

torch = import_torch(__name__)

from . import _lib as L  # noqa: E402
from . import preload as _preload  # noqa: E402
from .api import (  # noqa: E402
    Context,
    InvalidArgument,
    NotFound,
    Policy,
    Region,
    RegionInfo,
    RegionPaused,
    _bool,
    _call,
    _policy,
    _u64,
)

__all__ = [
    "Saver",
    "Policy",
    "check_allocator_config",
    "declare_free_blocks",
    "free_blocks",
    "library_path",
]


_MAX_DEVICES = 64  # device ordinals the hook API takes (cumemsaver_hooks.h)


def check_allocator_config() -> None:
    """Raises RuntimeError when PyTorch's allocator is configured with expandable segments:
    PyTorch then maps its own segments with the driver's VMM calls instead of calling
    cudaMalloc (so the preload interposer sees nothing) and refuses or bypasses custom
    allocators in pools; a pause would free nothing."""
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        for item in os.environ.get(var, "").split(","):
            key, _, value = item.partition(":")
            if key.strip() == "expandable_segments" and value.strip().lower() in ("true", "1"):
                raise RuntimeError(
                    f"cumemsaver: {var} has expandable_segments:True; PyTorch then maps its "
                    "own segments instead of asking cumemsaver's allocator, so nothing could "
                    "be paused. Remove expandable_segments (or set it to False) for this "
                    "process."
                )


def library_path() -> str:
    """Path of the loaded libcumemsaver.so.1 (PyTorch dlopens it by path to find the
    allocator's entry points; the same file resolves to the same loaded library)."""
    L.lib()
    path = _preload._loaded_path(L.SONAME)
    if not path:
        raise OSError("libcumemsaver.so.1 is loaded but not found in /proc/self/maps")
    return path


def _device_index(device) -> int:
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        raise ValueError(f"cumemsaver regions are on CUDA devices, not {d}")
    return d.index if d.index is not None else torch.cuda.current_device()


_live_lock = threading.Lock()
_live = None  # weakref to the live Saver (the one whose context is the hook context)


def _set_live(saver) -> None:
    global _live
    with _live_lock:
        _live = weakref.ref(saver) if saver is not None else None


def _check_preload_backend() -> None:
    for var in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        for item in os.environ.get(var, "").split(","):
            key, _, value = item.partition(":")
            if key.strip() == "backend" and value.strip() == "cudaMallocAsync":
                raise RuntimeError(
                    f"cumemsaver: {var} selects backend:cudaMallocAsync, which never calls "
                    "cudaMalloc: the preload interposer would see nothing to pause"
                )


def _pool_routing(entry, on: bool) -> None:
    """Stops (on=False) or restarts PyTorch's routing of this thread's allocations to a pool
    that torch.cuda.use_mem_pool started: PyTorch serves a thread from the first pool it
    was routed to, so an inner block must stop the outer routing while it runs. Pairs like
    use_mem_pool's own end/release and begin."""
    dev, pool = entry
    c = torch._C
    begin = getattr(c, "_cuda_beginAllocateCurrentThreadToPool", None)
    end = getattr(c, "_cuda_endAllocateToPool", None)
    release = getattr(c, "_cuda_releasePool", None)
    if not (begin and end and release):
        raise RuntimeError(
            "cumemsaver: nested region() or disable() needs PyTorch's pool routing "
            f"functions (torch {torch.__version__} lacks them)"
        )
    if on:
        begin(dev, pool.id)
    else:
        end(dev, pool.id)
        release(dev, pool.id)


# Blocks smaller than this are not worth a declaration: each splits a copy in two.
FREE_BLOCK_MIN = 1 << 20


def _pool_segments(pool) -> list:
    """The segments of a torch.cuda.MemPool as memory_snapshot() describes them (dicts with
    "address", "total_size", "blocks": [{"address", "size", "state"}, ...]). torch 2.11:
    MemPool.snapshot(include_traces=False); older ones: without the argument, or the
    process-wide torch.cuda.memory_snapshot() filtered by the pool's id; none without
    either."""
    snap = getattr(pool, "snapshot", None)
    if snap is not None:
        try:
            return list(snap(include_traces=False))
        except TypeError:
            return list(snap())
    if not hasattr(torch.cuda, "memory_snapshot"):
        return []  # no way to see the pool's blocks: nothing is declared
    pool_id = tuple(pool.id)
    return [
        s
        for s in torch.cuda.memory_snapshot()
        if tuple(s.get("segment_pool_id", ())) == pool_id
    ]


def free_blocks(segments, min_bytes: int = FREE_BLOCK_MIN):
    """(address, size) of each block of segments (memory_snapshot's format) that the caching
    allocator holds free ("inactive": no tensor, no stream use pending), at least min_bytes.
    A block without an "address" (older snapshots) starts where the previous one ended."""
    for seg in segments:
        addr = seg.get("address")
        for b in seg.get("blocks", ()):
            size = int(b["size"])
            at = int(b["address"]) if b.get("address") is not None else addr
            if at is not None and b.get("state") == "inactive" and size >= min_bytes and size:
                yield at, size
            addr = None if at is None else at + size


def declare_free_blocks(context, pools, min_bytes: int = FREE_BLOCK_MIN) -> int:
    """Declares the free blocks of pools (a torch.cuda.MemPool or several, made over
    cumemsaver's allocator) content-free (cms_range_discard, ABI 1.2), so that the next
    pause of their regions copies only the blocks tensors use and the resume restores only
    those; a freed block's bytes read undefined after that resume (PyTorch writes a block
    before it reads it). Call it right before the pause, with no thread allocating from
    those pools in between: a block handed to a tensor after the declaration loses what is
    written into it before the pause. context: the cumemsaver.Context the segments belong
    to (anything with range_discard(ptr, size)). Blocks of segments not in context, or of a
    region paused already, are skipped. Returns the bytes declared."""
    if not hasattr(pools, "__iter__"):
        pools = (pools,)
    declared = 0
    for pool in pools:
        for at, size in free_blocks(_pool_segments(pool), min_bytes):
            try:
                context.range_discard(at, size)
            except (NotFound, RegionPaused):
                continue
            declared += size
    return declared


class Saver:
    """Pausable PyTorch memory for one process.

    hook_mode: "torch" (CUDAPluggableAllocator, the default) or "preload" (the process runs
    with libcumemsaver-preload.so in LD_PRELOAD). context: an existing cumemsaver Context
    (else one is created, with driver_path). The Saver makes its context the library's hook
    context; only one Saver should be live in a process. By default (coalesce=True) its
    regions have CMS_REGION_COALESCE: after a resume adjacent segments share physical handles
    (much faster pause/resume of many tensors); a segment PyTorch frees while its neighbours
    live (torch.cuda.empty_cache(), its out-of-memory retry) gives its device memory back
    only at the next pause; coalesce=False keeps one handle per segment. (Chunks from the
    first allocation on, CMS_REGION_CHUNKS, are not used: a region would hold up to 64 MiB
    ahead of need.)
    """

    def __init__(
        self,
        hook_mode: str = "torch",
        context: Optional[Context] = None,
        driver_path: Optional[str] = None,
        coalesce: bool = True,
    ):
        check_allocator_config()
        if hook_mode not in ("torch", "preload"):
            raise ValueError(f"hook_mode must be 'torch' or 'preload', not {hook_mode!r}")
        if hook_mode == "preload" and not _preload.active():
            raise RuntimeError(
                "cumemsaver: hook_mode='preload' but libcumemsaver-preload.so does not "
                "interpose cudaMalloc in this process: start it with "
                "cumemsaver.preload.env() (LD_PRELOAD) or use hook_mode='torch'"
            )
        if not L.available("cms_hook_region_push"):
            raise RuntimeError(
                "cumemsaver: the loaded libcumemsaver.so.1 is older than 1.1 (no allocator "
                "hooks); PyTorch integration needs 1.1"
            )
        if hook_mode == "preload":
            _check_preload_backend()
        with _live_lock:
            other = _live() if _live is not None else None
            if other is not None and not other.context.closed:
                raise RuntimeError(
                    "cumemsaver: another Saver is live in this process (one hook context per "
                    "process); use it, or close() it first"
                )
        self.hook_mode = hook_mode
        self._coalesce = _bool(coalesce, "coalesce")
        self._own_ctx = context is None
        self.context = context if context is not None else Context(driver_path=driver_path)
        self._lock = threading.Lock()
        self._adopt_lock = threading.Lock()  # _adopt: outside _lock, never inside
        self._regions: Dict[Tuple[str, int], Tuple[Region, Policy]] = {}
        self._pools: Dict[Tuple[str, Policy, int], object] = {}
        self._allocator = None
        if hook_mode == "torch":
            self._allocator = torch.cuda.memory.CUDAPluggableAllocator(
                library_path(), "cms_torch_alloc", "cms_torch_free"
            )
        self._tls = threading.local()
        self._defaults: Dict[int, Region] = {}  # device -> default region
        self._template: Optional[tuple] = None  # (tag, policy, flags, disk_dir) of defaults
        self._disabled = 0  # disable() blocks running (defaults set aside)
        self._aside: Dict[int, int] = {}  # device -> handle of a template's default set aside
        _call("cms_hook_context_set", self.context._h())
        _set_live(self)
        atexit.register(_at_exit, weakref.ref(self))

    # -- regions and pools
    def _region(
        self,
        tag: str,
        policy: Policy,
        device: int,
        release_host: bool = False,
        disk_dir=None,
        flags: int = 0,
    ) -> Region:
        _bool(release_host, "release_host")
        key = (tag, device)
        if self._template is not None and self._template[0] == tag:
            self._adopt()  # the template may have made it
        with self._lock:
            if key in self._regions:
                region, have = self._regions[key]
                if have != policy:
                    raise ValueError(
                        f"tag {tag!r} on device {device} already has policy {have.name}; "
                        f"a tag has one policy per device (asked for {_policy(policy).name})"
                    )
                return region
            region = self.context.region(
                tag,
                device=device,
                policy=policy,
                coalesce=self._coalesce,
                release_host=release_host,
                disk_dir=disk_dir,
                flags=flags,
            )
            self._regions[key] = (region, _policy(policy))
            return region

    def _pool(self, tag: str, policy: Policy, device: int):
        key = (tag, _policy(policy), device)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                if self._allocator is not None:
                    pool = torch.cuda.MemPool(self._allocator.allocator())
                else:
                    pool = torch.cuda.MemPool()
                self._pools[key] = pool
            return pool

    @contextlib.contextmanager
    def _pushed(self, region: Region):
        if region.info().paused:
            raise RuntimeError(
                f"cumemsaver: region {region.info().tag!r} is paused: resume it before "
                "allocating in it"
            )
        with region._use() as handle:
            _call("cms_hook_region_push", handle)
        try:
            yield region
        finally:
            L.lib().cms_hook_region_pop()

    def _pool_stack(self) -> list:
        """(device, pool) of this thread's region() blocks, innermost last."""
        stack = getattr(self._tls, "pools", None)
        if stack is None:
            stack = self._tls.pools = []
        return stack

    @contextlib.contextmanager
    def region(
        self,
        tag: str = "default",
        policy: Union[Policy, int, str] = Policy.DISCARD,
        device=None,
        release_host: bool = False,
        disk_dir=None,
        flags: int = 0,
    ):
        """Tensors allocated by this thread inside the block come from region (tag, device)
        with the given restore policy. Yields the cumemsaver Region. Blocks nest: an inner
        region() of another tag routes the block's allocations to the inner tag only (PyTorch
        would otherwise keep serving them from the outer pool). release_host
        (CMS_REGION_RELEASE_HOST: host backups freed after each resume; default False keeps
        them, the fast choice for repeated cycles), disk_dir (Policy.DISK) and flags (further
        CMS_REGION_* bits, e.g. cumemsaver.REGION_HOST_PAGEABLE) apply when the block
        creates the region; a region that exists keeps its own."""
        dev = _device_index(device)
        region = self._region(tag, _policy(policy), dev, release_host, disk_dir, flags)
        pool = self._pool(tag, _policy(policy), dev)
        stack = self._pool_stack()
        if stack and stack[-1] == (dev, pool):  # the same region again: nothing to switch
            with self._pushed(region):
                yield region
            return
        outer = stack[-1] if stack else None
        if outer:
            _pool_routing(outer, False)
        try:
            with torch.cuda.device(dev), torch.cuda.use_mem_pool(pool):
                stack.append((dev, pool))
                try:
                    with self._pushed(region):
                        yield region
                finally:
                    stack.pop()
        finally:
            if outer:
                _pool_routing(outer, True)

    @contextlib.contextmanager
    def cuda_graph(
        self,
        cuda_graph,
        tag: str = "cuda_graph",
        policy: Union[Policy, int, str] = Policy.DISCARD,
        stream=None,
        capture_error_mode: str = "global",
        device=None,
        release_host: bool = False,
        disk_dir=None,
        flags: int = 0,
    ):
        """torch.cuda.graph(...) whose private memory pool is this tag's pausable pool: the
        memory the captured graph allocates is paused and resumed with tag. Replaying a graph
        while its tag is paused is an illegal access: resume first. release_host, disk_dir
        and flags: as in region()."""
        dev = _device_index(device)
        region = self._region(tag, _policy(policy), dev, release_host, disk_dir, flags)
        pool = self._pool(tag, _policy(policy), dev)
        with torch.cuda.device(dev):
            with torch.cuda.graph(
                cuda_graph, pool=pool.id, stream=stream, capture_error_mode=capture_error_mode
            ):
                with self._pushed(region):
                    yield region

    # -- default regions (whole-process mode)
    def set_default_region(self, device: int, region: Optional[Region]) -> None:
        """Makes region (one of this Saver's, on device) the default region of device: in
        hook_mode="preload", every cudaMalloc of the process made on a thread with no
        active region() is allocated there (cms_hook_region_default_set, release 1.2). None
        clears it. disable() sets the defaults aside for its block."""
        from .hooks import hook_region_default_set

        with self._lock:
            if self._disabled == 0:
                hook_region_default_set(device, region)
            if region is None:
                self._defaults.pop(device, None)
            else:
                self._defaults[device] = region

    def default_regions(self) -> Dict[int, Region]:
        """device -> default region set with set_default_region."""
        with self._lock:
            return dict(self._defaults)

    def set_default_template(
        self,
        tag: Optional[str],
        policy: Union[Policy, int, str] = Policy.DISCARD,
        release_host: bool = False,
        disk_dir=None,
        flags: int = 0,
    ) -> None:
        """Default regions made on demand (hook_mode="preload"; release 1.2,
        cms_hook_region_default_template_set): a cudaMalloc on a thread with no active
        region(), on a device without a default region (set_default_region), first makes the
        region tag on that device (with policy, release_host, flags and this Saver's
        coalescing) its default. Only devices that allocate get a region, and so a primary
        context. Such regions are this Saver's like the others (regions(), stats(), pause,
        resume); a Policy.DISK one gets disk_dir when it is made. None clears the
        template (regions already made stay). disable() sets it aside for its block."""
        from .hooks import hook_region_default_template_set

        template = None
        if tag is not None:
            policy = _policy(policy)
            if policy == Policy.DISK and disk_dir is None:
                raise ValueError("a Policy.DISK template needs disk_dir")
            bits = _u64(flags, "flags")
            if _bool(release_host, "release_host"):
                bits |= L.CMS_REGION_RELEASE_HOST
            if self._coalesce:
                bits |= L.CMS_REGION_COALESCE
            template = (tag, _policy(policy), bits, disk_dir)
        with self._lock:
            old, self._template = self._template, template
            if self._disabled == 0:
                if template is None:
                    hook_region_default_template_set(None)
                else:
                    hook_region_default_template_set(tag, int(policy), bits, disk_dir)
        # the regions the previous template made until now (it makes no more) stay this
        # Saver's, a DISK one with its directory
        self._adopt(old)

    def _adopt(self, template: Optional[tuple] = None) -> bool:
        """Takes the regions the default template (template, else the current one) made
        (found by its tag among the context's regions) into this Saver's, giving a DISK one
        its directory. Returns whether it took any."""
        if template is None:
            template = self._template
        if template is None:
            return False
        took = False
        tag, policy, _, disk_dir = template
        with self._adopt_lock:  # a region is adopted once: its directory set before a pause
            for stats in self.context.regions():
                if stats.tag != tag or (tag, stats.device) in self._regions:
                    continue
                try:
                    region = self.context.find_region(tag, stats.device)
                except NotFound:  # destroyed meanwhile
                    continue
                if policy == Policy.DISK and not region.info().paused:
                    region.set_disk_dir(disk_dir)
                with self._lock:
                    self._regions.setdefault(
                        (tag, stats.device), (region, Policy(stats.policy))
                    )
                took = True
        return took

    def _defaults_aside(self, aside: bool) -> bool:
        """Clears (aside=True) or sets again the default regions, counting nested
        disable() blocks; returns whether defaults are set (so the block needs a pool of its
        own)."""
        from .hooks import (
            hook_region_default,
            hook_region_default_set,
            hook_region_default_template_set,
        )

        with self._lock:
            if aside:
                self._disabled += 1
                if self._disabled == 1:
                    if self._template is not None:
                        hook_region_default_template_set(None)
                    # also those a template made (still set once it is cleared): their
                    # handles, to be set again after the block
                    self._aside = {}
                    for dev in range(_MAX_DEVICES):
                        handle = hook_region_default(dev)
                        if handle and dev not in self._defaults:
                            self._aside[dev] = handle
                        if handle:
                            hook_region_default_set(dev, None)
            else:
                self._disabled -= 1
                if self._disabled == 0:
                    for dev, region in self._defaults.items():
                        hook_region_default_set(dev, region)
                    for dev, handle in self._aside.items():
                        try:  # refused when the region was destroyed meanwhile
                            _call("cms_hook_region_default_set", dev, handle)
                        except InvalidArgument:
                            pass
                    self._aside = {}
                    if self._template is not None:  # finds the regions it made again
                        tag, policy, bits, disk_dir = self._template
                        hook_region_default_template_set(tag, int(policy), bits, disk_dir)
            return bool(self._defaults) or self._template is not None

    @contextlib.contextmanager
    def disable(self):
        """Allocations of this thread in the block go to PyTorch's own allocator instead of
        cumemsaver: the thread's active regions are set aside, and so are the default
        regions (set_default_region; process-wide while any disable() block runs: other
        threads' allocations outside regions are not cumemsaver's meanwhile either). With
        default regions the block allocates from a fresh PyTorch pool (never from cached
        segments of a paused default region), dropped with its cached memory at the end."""
        lib = L.lib()
        stack = self._pool_stack()
        outer = stack[-1] if stack else None
        regions = []  # the thread's active regions, top first: all set aside for the block
        while lib.cms_hook_region_current():
            regions.append(lib.cms_hook_region_current())
            lib.cms_hook_region_pop()
        try:
            fresh = self._defaults_aside(True)
            try:
                if outer:
                    _pool_routing(outer, False)
                try:
                    if fresh:
                        # dropping the pool frees its cached segments (MemPool's destructor
                        # empties that pool only: the default pool's cached segments of a
                        # paused default region stay, to be restored by the resume)
                        pool = torch.cuda.MemPool()
                        with torch.cuda.use_mem_pool(pool):
                            yield
                        del pool
                    else:
                        yield
                finally:
                    if outer:
                        _pool_routing(outer, True)
            finally:
                self._defaults_aside(False)
        finally:
            for handle in reversed(regions):
                _call("cms_hook_region_push", handle)

    # -- pause / resume / stats
    def pause(self, tag: Optional[str] = None, live_only: bool = True):
        """Pauses tag's regions on every device (every tag when None); see Context.pause.
        live_only (the default, with a 1.2 library): first declares the free blocks of
        tag's pools content-free (declare_free_blocks), so that HOST and DISK tags copy and
        restore only the blocks tensors use; do not allocate from those pools on another
        thread meanwhile."""
        self._adopt()  # a DISK region the template made needs its directory first
        if _bool(live_only, "live_only") and L.available("cms_range_discard"):
            self.declare_free_blocks(tag)
        try:
            return self.context.pause(tag)
        except InvalidArgument:
            # The template made a DISK region since (another thread's first allocation on a
            # device): without its directory the pause failed and changed nothing. Once.
            template = self._template
            if template is None or template[1] != Policy.DISK or not self._adopt(template):
                raise
            return self.context.pause(tag)

    def declare_free_blocks(self, tag: Optional[str] = None) -> int:
        """declare_free_blocks over the pools of tag (every tag when None) of this Saver's
        HOST and DISK regions; returns the bytes declared."""
        with self._lock:
            pools = [
                pool
                for (t, policy, _), pool in self._pools.items()
                if (tag is None or t == tag) and policy in (Policy.HOST, Policy.DISK)
            ]
        return declare_free_blocks(self.context, pools) if pools else 0

    def resume(self, tag: Optional[str] = None):
        """Resumes tag's regions at the same addresses; see Context.resume."""
        return self.context.resume(tag)

    def regions(self, tag: Optional[str] = None) -> List[Region]:
        """The regions this Saver made (of tag on every device; every tag when None)."""
        self._adopt()
        with self._lock:
            return [r for (t, _), (r, _) in self._regions.items() if tag is None or t == tag]

    def stats(self) -> List[RegionInfo]:
        """Region info (bytes, state, epoch) of every region this Saver made."""
        self._adopt()
        with self._lock:
            regions = [r for r, _ in self._regions.values()]
        return [r.info() for r in regions]

    def region_of(self, tensor) -> Optional[Region]:
        """The cumemsaver region holding tensor's memory, or None."""
        try:
            return self.context.pointer_info(tensor.data_ptr()).region
        except Exception:
            return None

    def close(self) -> None:
        """Drops the pools (PyTorch frees their cached segments through the hook), clears
        the hook context and, if it made it, closes the context. Tensors still holding
        cumemsaver memory must be gone first."""
        with self._lock:
            self._pools.clear()
            self._defaults.clear()
        if hasattr(torch.cuda, "empty_cache"):
            torch.cuda.empty_cache()
        L.lib().cms_hook_context_set(None)
        _set_live(None)
        with self._lock:
            self._regions.clear()
        if self._own_ctx:
            self.context.close()

def _at_exit(ref):
    """At interpreter exit PyTorch frees its pools' segments late (MemPool destructors run
    during teardown, after atexit). The Saver's context stays the hook context until the
    process ends, so those frees still succeed; the driver releases everything at exit."""
    saver = ref()
    if saver is not None and not saver.context.closed:
        saver.context.keep_at_exit = True
