# SPDX-License-Identifier: MIT
"""Drop-in for torch_memory_saver's Python API: change one import.

    from torch_memory_saver import torch_memory_saver                # before
    from cumemsaver.torch_memory_saver import torch_memory_saver     # after

    with torch_memory_saver.region(tag="kv_cache"):                  # DISCARD
        kv = torch.empty(...)
    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):   # HOST
        model = ...
    torch_memory_saver.pause("kv_cache"); torch_memory_saver.resume("kv_cache")

Options, as in torch_memory_saver (docs/python.md maps each onto the library):
- region(enable_cpu_backup=True): Policy.HOST; cpu_backup_backend="pinned" (default, or
  $TMS_INIT_CPU_BACKUP_BACKEND) or "mmap" (accepted; see the differences below).
- region(enable_disk_backup=True): Policy.DISK in set_disk_backup_dir()'s directory
  (default $TMS_DISK_BACKUP_DIR, else /tmp); not combinable with enable_cpu_backup.
- retain_cpu_backup (default False, or $TMS_RETAIN_CPU_BACKUP): False gives the host backup
  (and a disk backup's file space) back after each resume (CMS_REGION_RELEASE_HOST), True
  keeps it for the next cycle.

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
- A tag used with several kinds of backup becomes one library region per kind ("tag",
  "tag+cpu_backup", "tag+cpu_backup_mmap", "tag+disk_backup"), paused and resumed together
  by pause(tag) (one after the other).
- retain_cpu_backup is fixed per library region when the region is created (the C API has
  no way yet to change CMS_REGION_RELEASE_HOST later): changing it while backup regions with
  the other setting exist warns (RuntimeWarning) and applies to regions created afterwards.
- cpu_backup_backend="mmap" uses the same page-locked host backups as "pinned" (the C API
  has no pageable, reclaimable host backup yet); it is kept apart in its own region.
- memory_margin_bytes is checked before a resume: if the driver's free memory minus the
  bytes to back would fall below the margin, resume raises MemoryError and changes nothing.
  (torch_memory_saver checks it at each allocation inside a region instead: that needs a
  margin in the C allocation path, which the C API lacks.)
- get_cpu_backup(x) returns a CPU copy of x while its region is active, and None while it is
  paused: the C API has no way to read a paused allocation's host backup yet (zero_copy is
  accepted; the result is always a copy).
"""

import contextlib
import os
import warnings
from typing import Optional

from . import _lib as L
from . import preload as _preload
from .api import AlreadyPaused, NotFound, NotPaused, Policy

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]

_TAG_DEFAULT = "default"
_BACKENDS = ("pinned", "mmap")
# (enable_cpu_backup, backend, enable_disk_backup) -> suffix of the library region's tag
_SUFFIX = {
    (False, None, False): "",
    (True, "pinned", False): "+cpu_backup",
    (True, "mmap", False): "+cpu_backup_mmap",
    (False, None, True): "+disk_backup",
}


def _env_bool(name: str) -> bool:
    """torch_memory_saver's reading of a boolean variable: 1, true, TRUE, yes, YES."""
    return os.environ.get(name, "") in ("1", "true", "TRUE", "yes", "YES")


def _default_backend() -> str:
    backend = os.environ.get("TMS_INIT_CPU_BACKUP_BACKEND") or "pinned"
    if backend not in _BACKENDS:
        raise ValueError(
            f"TMS_INIT_CPU_BACKUP_BACKEND={backend!r}: must be one of {', '.join(_BACKENDS)}"
        )
    return backend


class TorchMemorySaver:
    def __init__(self):
        self._hook_mode = "torch"
        self._margin = 0
        self._saver = None
        self._tags = {}  # user tag -> set of library tags
        self._retain = _env_bool("TMS_RETAIN_CPU_BACKUP")
        self._disk_dir = os.environ.get("TMS_DISK_BACKUP_DIR") or "/tmp"

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
    def retain_cpu_backup(self) -> bool:
        """Whether backup regions keep their host buffers (disk file space) after a resume."""
        return self._retain

    @retain_cpu_backup.setter
    def retain_cpu_backup(self, value: bool):
        value = bool(value)
        if value != self._retain and self._saver is not None:
            fixed = [
                r.info().tag
                for r in self._saver.regions()
                if r.info().policy in (Policy.HOST, Policy.DISK)
                and bool(r.info().flags & L.CMS_REGION_RELEASE_HOST) == value
            ]
            if fixed:
                warnings.warn(
                    f"cumemsaver: retain_cpu_backup={value} applies to regions created from "
                    f"now on; {', '.join(sorted(fixed))} keep(s) the setting they were created "
                    "with (the C API cannot change CMS_REGION_RELEASE_HOST yet)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._retain = value

    def set_disk_backup_dir(self, path: str):
        """The directory of disk backups (created if needed): every enable_disk_backup region,
        those that exist included (a paused one takes it at its next resume)."""
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        self._disk_dir = path
        if self._saver is not None:
            self._apply_disk_dir()

    def _apply_disk_dir(self):
        for region in self._saver.regions():
            info = region.info()
            if info.policy == Policy.DISK and not info.paused:
                region.set_disk_dir(self._disk_dir)

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
    def _options(self, tag, enable_cpu_backup, enable_disk_backup, cpu_backup_backend):
        """(library tag, keyword arguments of Saver.region) for the peer's region options."""
        if cpu_backup_backend is not None:
            if not enable_cpu_backup:
                raise ValueError("cpu_backup_backend requires enable_cpu_backup=True")
            if cpu_backup_backend not in _BACKENDS:
                raise ValueError(
                    f"cpu_backup_backend must be one of {', '.join(_BACKENDS)}, "
                    f"not {cpu_backup_backend!r}"
                )
        if enable_cpu_backup and enable_disk_backup:
            raise ValueError("enable_cpu_backup and enable_disk_backup are mutually exclusive")
        backend = (cpu_backup_backend or _default_backend()) if enable_cpu_backup else None
        ctag = tag + _SUFFIX[(bool(enable_cpu_backup), backend, bool(enable_disk_backup))]
        kwargs = {"policy": Policy.DISCARD}
        if enable_cpu_backup:
            kwargs = {"policy": Policy.HOST, "release_host": not self._retain}
        elif enable_disk_backup:
            os.makedirs(self._disk_dir, exist_ok=True)
            kwargs = {
                "policy": Policy.DISK,
                "release_host": not self._retain,
                "disk_dir": self._disk_dir,
            }
        self._tags.setdefault(tag, set()).add(ctag)
        return ctag, kwargs

    @contextlib.contextmanager
    def region(
        self,
        tag: str = _TAG_DEFAULT,
        enable_cpu_backup: bool = False,
        enable_disk_backup: bool = False,
        cpu_backup_backend: Optional[str] = None,
    ):
        saver = self._ensure()
        ctag, kwargs = self._options(tag, enable_cpu_backup, enable_disk_backup, cpu_backup_backend)
        with saver.region(ctag, **kwargs):
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
        cpu_backup_backend: Optional[str] = None,
    ):
        # pool (SGLang passes one shared graph pool for all its captures) is accepted and
        # not used: every graph captured under a tag shares that tag's one pausable pool,
        # which gives the same sharing between captures.
        del pool
        saver = self._ensure()
        ctag, kwargs = self._options(tag, enable_cpu_backup, False, cpu_backup_backend)
        with saver.cuda_graph(
            cuda_graph, tag=ctag, stream=stream, capture_error_mode=capture_error_mode, **kwargs
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
        self._apply_disk_dir()  # a directory chosen while paused

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

    def get_cpu_backup(self, x, zero_copy: bool = False):
        """A CPU copy of x while its region is active; None while paused (the C API cannot
        read a paused allocation's host backup yet). zero_copy is accepted and ignored."""
        del zero_copy
        region = self._ensure().region_of(x)
        if region is not None and region.info().paused:
            return None
        return x.detach().to("cpu", copy=True)


torch_memory_saver = TorchMemorySaver()


@contextlib.contextmanager
def configure_subprocess():
    """As torch_memory_saver.configure_subprocess: child processes started inside the block
    load libcumemsaver-preload.so first (LD_PRELOAD, restored afterwards; for
    hook_mode="preload")."""
    with _preload.configure_subprocess():
        yield
