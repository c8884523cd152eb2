# SPDX-License-Identifier: MIT
"""Drop-in for torch_memory_saver's Python API: change one import.

    from torch_memory_saver import torch_memory_saver                # before
    from cumemsaver.torch_memory_saver import torch_memory_saver     # after

    with torch_memory_saver.region(tag="kv_cache"):                  # DISCARD
        kv = torch.empty(...)
    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):   # HOST
        model = ...
    torch_memory_saver.pause("kv_cache"); torch_memory_saver.resume("kv_cache")

Differences from torch_memory_saver (docs/python.md has the full list):
- Errors raise cumemsaver exceptions (subclasses of CumemsaverError, with the status and the
  library's message); nothing ever exits or aborts the process, and a failed pause or resume
  leaves every allocation as it was (transactional).
- hook_mode defaults to "torch" (PyTorch's pluggable allocator, nothing to preload);
  "preload" needs the process started with cumemsaver.preload.env() / configure_subprocess().
- pause(tag)/resume(tag) of a tag with nothing to pause/resume (unknown, already paused,
  not paused) is a no-op, as in torch_memory_saver; other failures raise.
- cuda_graph(pool=...) is accepted and not used: graphs captured under one tag share that
  tag's pausable pool (the sharing a common pool gives).
- A tag used with and without enable_cpu_backup becomes two library regions ("tag" and
  "tag+cpu_backup"), paused and resumed together by pause(tag) (one after the other).
- memory_margin_bytes is checked before a resume: if the driver's free memory minus the
  bytes to back would fall below the margin, resume raises MemoryError and changes nothing.
- get_cpu_backup(x) returns a CPU copy of x while its region is active, and None while it is
  paused (the backup stays inside the library).
"""

import contextlib
from typing import Optional

from . import preload as _preload
from .api import AlreadyPaused, NotFound, NotPaused, Policy

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]

_TAG_DEFAULT = "default"
_BACKUP_SUFFIX = "+cpu_backup"


def _ctag(tag: str, enable_cpu_backup: bool) -> str:
    return tag + _BACKUP_SUFFIX if enable_cpu_backup else tag


class TorchMemorySaver:
    def __init__(self):
        self._hook_mode = "torch"
        self._margin = 0
        self._saver = None
        self._tags = {}  # user tag -> set of library tags

    # -- configuration (before first use, as in torch_memory_saver)
    @property
    def hook_mode(self):
        return self._hook_mode

    @hook_mode.setter
    def hook_mode(self, mode: str):
        if self._saver is not None:
            raise RuntimeError("hook_mode must be set before the first region()")
        if mode not in ("torch", "preload"):
            raise ValueError(f"hook_mode must be 'torch' or 'preload', not {mode!r}")
        self._hook_mode = mode

    @property
    def memory_margin_bytes(self) -> int:
        return self._margin

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value: int):
        if int(value) < 0:
            raise ValueError("memory_margin_bytes must be >= 0")
        self._margin = int(value)

    @property
    def enabled(self) -> bool:
        return True

    def _ensure(self):
        if self._saver is None:
            from .torch import Saver

            self._saver = Saver(hook_mode=self._hook_mode)
        return self._saver

    @property
    def saver(self):
        """The underlying cumemsaver.torch.Saver (for stats and the native API)."""
        return self._ensure()

    # -- regions
    @contextlib.contextmanager
    def region(self, tag: str = _TAG_DEFAULT, enable_cpu_backup: bool = False):
        saver = self._ensure()
        ctag = _ctag(tag, enable_cpu_backup)
        self._tags.setdefault(tag, set()).add(ctag)
        policy = Policy.HOST if enable_cpu_backup else Policy.DISCARD
        with saver.region(ctag, policy=policy):
            yield

    @contextlib.contextmanager
    def cuda_graph(
        self,
        cuda_graph,
        pool=None,
        stream=None,
        capture_error_mode="global",
        tag: str = _TAG_DEFAULT,
        enable_cpu_backup: bool = False,
    ):
        # pool (SGLang passes one shared graph pool for all its captures) is accepted and
        # not used: every graph captured under a tag shares that tag's one pausable pool,
        # which gives the same sharing between captures.
        del pool
        saver = self._ensure()
        ctag = _ctag(tag, enable_cpu_backup)
        self._tags.setdefault(tag, set()).add(ctag)
        policy = Policy.HOST if enable_cpu_backup else Policy.DISCARD
        with saver.cuda_graph(
            cuda_graph, tag=ctag, policy=policy, stream=stream, capture_error_mode=capture_error_mode
        ):
            yield

    @contextlib.contextmanager
    def disable(self):
        with self._ensure().disable():
            yield

    # -- pause / resume
    def _ctags(self, tag: Optional[str]):
        if tag is None:
            return [None]
        return sorted(self._tags.get(tag, ()))

    def pause(self, tag: Optional[str] = None):
        saver = self._ensure()
        for ctag in self._ctags(tag):
            try:
                saver.pause(ctag)
            except (NotFound, AlreadyPaused):
                pass

    def resume(self, tag: Optional[str] = None):
        saver = self._ensure()
        if self._margin:
            self._check_margin(saver, tag)
        for ctag in self._ctags(tag):
            try:
                saver.resume(ctag)
            except (NotFound, NotPaused):
                pass

    def _check_margin(self, saver, tag):
        ctags = set(self._ctags(tag))
        need = {}
        for info in saver.stats():
            if info.paused and (None in ctags or info.tag in ctags):
                need[info.device] = need.get(info.device, 0) + info.physical_bytes
        for dev, nbytes in need.items():
            free = saver.context.device_memory_info(dev).free
            if free - nbytes < self._margin:
                raise MemoryError(
                    f"cumemsaver: resuming {nbytes} bytes on device {dev} would leave "
                    f"{free - nbytes} bytes free, below memory_margin_bytes={self._margin}"
                )

    def get_cpu_backup(self, x):
        """A CPU copy of x while its region is active; None while paused."""
        region = self._ensure().region_of(x)
        if region is not None and region.info().paused:
            return None
        return x.detach().to("cpu", copy=True)


torch_memory_saver = TorchMemorySaver()


@contextlib.contextmanager
def configure_subprocess():
    """As torch_memory_saver.configure_subprocess: child processes started inside the block
    load libcumemsaver-preload.so (for hook_mode="preload")."""
    with _preload.configure_subprocess():
        yield
