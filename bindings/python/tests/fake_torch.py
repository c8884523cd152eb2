# SPDX-License-Identifier: MIT
"""A stand-in for the few torch.cuda pieces cumemsaver.torch uses, for tests without torch.

It does what PyTorch's caching allocator does on a miss in a pool: calls the pool's
pluggable allocator's C entry point, found by name in the library file, exactly as
torch.cuda.memory.CUDAPluggableAllocator does (dlopen + dlsym). Like PyTorch 2.11, a thread
routed to several pools (use_mem_pool, graph capture) is served by the first one, and a pool
cannot be routed twice. Tensors are just pointers.
"""

import contextlib
import ctypes
import importlib.util
import sys
import threading
import types

_tls = threading.local()


class CUDAPluggableAllocator:
    def __init__(self, path, alloc_name, free_name):
        lib = ctypes.CDLL(path)
        self.alloc_fn = getattr(lib, alloc_name)
        self.alloc_fn.restype = ctypes.c_void_p
        self.alloc_fn.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.free_fn = getattr(lib, free_name)
        self.free_fn.restype = None
        self.free_fn.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]

    def allocator(self):
        return self


_pools = {}


class MemPool:
    def __init__(self, allocator=None):
        self.allocator = allocator
        self.id = (id(self), 1)
        self.segments = []
        _pools[self.id] = self

    def malloc(self, nbytes):
        if self.allocator is None:
            self.segments.append(("native", nbytes))
            return 0
        ptr = self.allocator.alloc_fn(nbytes, current_device(), None)
        if not ptr:
            raise MemoryError("CUDA out of memory (pluggable allocator returned NULL)")
        self.segments.append((ptr, nbytes))
        return ptr

    def empty_cache(self):
        """What torch.cuda.empty_cache does to a pool's unused segments."""
        for ptr, nbytes in self.segments:
            if ptr:
                self.allocator.free_fn(ptr, nbytes, current_device(), None)
        self.segments = []


def _routes():
    routes = getattr(_tls, "routes", None)
    if routes is None:
        routes = _tls.routes = []
    return routes


def _begin(device, pool_id):
    """As PyTorch's beginAllocateCurrentThreadToPool: refuses a pool already routed."""
    if pool_id in _routes():
        raise RuntimeError("beginAllocateToPool: already recording to mempool_id")
    _routes().append(pool_id)


def _end(device, pool_id):
    _routes().remove(pool_id)


def _release(device, pool_id):
    pass


@contextlib.contextmanager
def use_mem_pool(pool, device=None):
    _begin(device, pool.id)
    try:
        yield
    finally:
        _end(device, pool.id)
        _release(device, pool.id)


@contextlib.contextmanager
def device(dev):
    yield


def current_device():
    return 0


def device_count():
    return 1


def empty_cache():
    """torch.cuda.empty_cache frees unused cached segments; the stand-in's tensors never
    die, so none is unused."""


class graph:
    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.pool_id = pool
        cuda_graph.pool_id = pool

    def __enter__(self):
        """Capture: allocations go to the graph's pool, as PyTorch's private pools do."""
        _begin(0, self.pool_id)
        return self

    def __exit__(self, *exc):
        _end(0, self.pool_id)
        return False


def empty(nbytes):
    """Allocates like a tensor of nbytes would on a pool miss; returns the pointer. As in
    PyTorch, the FIRST pool this thread was routed to serves it; none: the native
    allocator (pointer 0 in the stand-in)."""
    routes = _routes()
    if not routes:
        return 0
    return _pools[routes[0]].malloc(nbytes)


def real_torch() -> bool:
    """Whether a real torch is importable (the stand-in, once installed, does not count)."""
    mod = sys.modules.get("torch")
    if mod is not None:
        return not getattr(mod, "fake", False)
    return importlib.util.find_spec("torch") is not None


def install():
    """Puts a fake 'torch' module in sys.modules (only where torch is not installed); once
    per process: test modules share it."""
    if getattr(sys.modules.get("torch"), "fake", False):
        return sys.modules["torch"]
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    memory = types.ModuleType("torch.cuda.memory")
    memory.CUDAPluggableAllocator = CUDAPluggableAllocator
    cuda.memory = memory
    cuda.MemPool = MemPool
    cuda.use_mem_pool = use_mem_pool
    cuda.device = device
    cuda.current_device = current_device
    cuda.device_count = device_count
    cuda.empty_cache = empty_cache
    cuda.graph = graph
    torch.cuda = cuda
    c = types.ModuleType("torch._C")
    c._cuda_beginAllocateCurrentThreadToPool = _begin
    c._cuda_endAllocateToPool = _end
    c._cuda_releasePool = _release
    torch._C = c
    torch.__version__ = "0+fake"
    torch.device = lambda d: types.SimpleNamespace(type="cuda", index=0)
    torch.fake = True
    torch.empty = empty
    sys.modules["torch"] = torch
    sys.modules["torch.cuda"] = cuda
    sys.modules["torch.cuda.memory"] = memory
    sys.modules["torch._C"] = c
    return torch
