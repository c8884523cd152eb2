# SPDX-License-Identifier: MIT
"""Drop-in for torch_memory_saver's Python API: change one import.

    from torch_memory_saver import torch_memory_saver                # before
    from cumemsaver.torch_memory_saver import torch_memory_saver     # after

or keep the import: bindings/python-tms (distribution cumemsaver-torch-memory-saver) serves the
name torch_memory_saver with this module (docs/python.md).

    with torch_memory_saver.region(tag="kv_cache"):                  # DISCARD
        kv = torch.empty(...)
    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):   # HOST
        model = ...
    torch_memory_saver.pause("kv_cache"); torch_memory_saver.resume("kv_cache")

Options, as in torch_memory_saver (docs/python.md maps each onto the library):
- region(enable_cpu_backup=True): Policy.HOST; cpu_backup_backend="pinned" (default, or
  $TMS_INIT_CPU_BACKUP_BACKEND) or "mmap" (CMS_REGION_HOST_PAGEABLE: pageable host memory
  the kernel can reclaim, given back after a non-retaining resume).
- region(enable_disk_backup=True): Policy.DISK in set_disk_backup_dir()'s directory
  (default $TMS_DISK_BACKUP_DIR, else /tmp); not combinable with enable_cpu_backup.
- retain_cpu_backup (default False, or $TMS_RETAIN_CPU_BACKUP): False gives the host backup
  (and a disk backup's file space) back after each resume (CMS_REGION_RELEASE_HOST), True
  keeps it for the next cycle; changeable between cycles (cms_region_flags_set), read at
  each resume as in torch_memory_saver.
- get_cpu_backup(x, zero_copy): x's host backup while its tag is paused, or retained after
  a resume (cms_backup_get / cms_backup_read); None when there is none.
- $TMS_INIT_ENABLE=1 (with $TMS_INIT_ENABLE_CPU_BACKUP, $TMS_INIT_CPU_BACKUP_BACKEND,
  $TMS_INIT_ENABLE_DISK_BACKUP) in a process started with configure_subprocess(): set up
  when this module is imported; every cudaMalloc outside a region() goes to the tag
  "default" (a region made on demand on each device that allocates,
  cms_hook_region_default_template_set); region() blocks nest inside it; disable() sets it
  aside for its block.

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
- memory_margin_bytes: with a library that has cms_hook_memory_margin_set, an allocation
  fails (out of memory) when the driver's free memory minus its size would fall below the
  margin, as in torch_memory_saver; without it, the margin is checked before a resume
  instead (resume raises MemoryError and changes nothing).
- disable() in whole-process mode sets the default regions aside for every thread while
  the block runs (torch_memory_saver's switch is per thread).
- With a library older than 1.2: retain_cpu_backup is fixed per region at its creation (a
  change warns), "mmap" backups are page-locked like "pinned", get_cpu_backup returns None,
  and TMS_INIT_ENABLE is not available (warns).
"""

import contextlib
import ctypes
import os
import warnings
from typing import Optional

from . import _lib as L
from . import preload as _preload
from ._needs_torch import import_torch
from .api import AlreadyPaused, NotFound, NotPaused, NotSupported, Policy, _call
from .hooks import hook_memory_margin_set

__all__ = ["TorchMemorySaver", "torch_memory_saver", "configure_subprocess"]

import_torch(__name__)  # as torch_memory_saver: no use without PyTorch (NeedsPyTorch)

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


# CMS_REGION_HOST_PAGEABLE (release 1.2): None while the generated _lib lacks it
_PAGEABLE = getattr(L, "CMS_REGION_HOST_PAGEABLE", None)


def _have(name: str) -> bool:
    """Whether the loaded library has function name (a release 1.2 addition)."""
    try:
        return L.available(name)
    except OSError:
        return False


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
        self._whole_process = False
        self._template = None  # (tag, Saver.region keyword arguments) of whole-process mode

    # -- configuration (before first use, as in torch_memory_saver)
    @property
    def hook_mode(self):
        return self._hook_mode

    @hook_mode.setter
    def hook_mode(self, mode: str):
        if mode not in ("torch", "preload"):
            raise ValueError(f"hook_mode must be 'torch' or 'preload', not {mode!r}")
        if self._saver is not None and mode != self._hook_mode:
            raise RuntimeError(
                f"hook_mode must be set before the first region() (it is {self._hook_mode!r}"
                + (", set by TMS_INIT_ENABLE" if self._whole_process else "")
                + ")"
            )
        self._hook_mode = mode

    @property
    def memory_margin_bytes(self) -> int:
        return self._margin

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value: int):
        if int(value) < 0:
            raise ValueError("memory_margin_bytes must be >= 0")
        self._margin = int(value)
        if _have("cms_hook_memory_margin_set"):
            self._ensure()  # the hook context the margin belongs to
            hook_memory_margin_set(self._margin)

    @property
    def retain_cpu_backup(self) -> bool:
        """Whether backup regions keep their host buffers (disk file space) after a resume."""
        return self._retain

    @retain_cpu_backup.setter
    def retain_cpu_backup(self, value: bool):
        value = bool(value)
        if value != self._retain and self._saver is not None and not _have("cms_region_flags_set"):
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
                    "with (this libcumemsaver has no cms_region_flags_set)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._retain = value
        self._sync_retention(lambda info: info.paused or value)

    def _sync_retention(self, now) -> None:
        """Sets CMS_REGION_RELEASE_HOST = not retain_cpu_backup on the backup regions for
        which now(info) holds, as torch_memory_saver reads the setting at each resume: a
        paused region takes it at its resume; retention turned on applies at once; turned
        off on an active region it waits until that region is paused (so its retained
        backup stays readable and is reused by the next pause), then applies at the resume.
        """
        if self._saver is None or not _have("cms_region_flags_set"):
            return
        release = L.CMS_REGION_RELEASE_HOST
        want = 0 if self._retain else release
        for region in self._saver.regions():
            info = region.info()
            if info.policy in (Policy.HOST, Policy.DISK) and (info.flags & release) != want:
                if now(info):
                    region.set_flags(release, want)

    def set_disk_backup_dir(self, path: str):
        """The directory of disk backups (created if needed): every enable_disk_backup region,
        those that exist included (a paused one takes it at its next resume)."""
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        self._disk_dir = path
        if self._saver is not None:
            if self._template and self._template[1].get("policy") == Policy.DISK:
                ctag, kwargs = self._template  # regions made on demand from now on
                self._template = (ctag, dict(kwargs, disk_dir=path))
                self._saver.set_default_template(ctag, **self._template[1])
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
            if backend == "mmap" and _PAGEABLE is not None:
                kwargs["flags"] = _PAGEABLE
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
        if self._margin and not _have("cms_hook_memory_margin_set"):
            self._check_margin(saver, tag)
        self._sync_retention(lambda info: info.paused)
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

    def _backup_buffer(self, ptr: int, nbytes: int, zero_copy: bool):
        """The host backup of the nbytes at device address ptr: a ctypes array over the
        library's host buffer (zero_copy, HOST regions) or a bytearray copy; None when there
        is no backup (not cumemsaver's memory, region active without a retained backup,
        a policy that keeps no content, or a library without cms_backup_get)."""
        if not _have("cms_backup_get"):
            return None
        ctx = self._ensure().context
        try:
            info = ctx.backup(ptr)
        except (NotFound, NotPaused, NotSupported):
            return None
        if ptr + nbytes > info.base + info.size:
            raise ValueError(
                f"cumemsaver: [{ptr:#x}, +{nbytes}) runs past the end of its allocation "
                f"[{info.base:#x}, +{info.size})"
            )
        if info.host and zero_copy:
            return (ctypes.c_uint8 * nbytes).from_address(info.host + (ptr - info.base))
        # writable, for torch.frombuffer (backup_read alone returns immutable bytes)
        return ctx.backup_read(ptr, nbytes, out=bytearray(nbytes))

    def get_cpu_backup(self, x, zero_copy: bool = False):
        """The host backup of tensor x (contiguous, CUDA; it may be a view into a larger
        allocation) as a CPU tensor of x's dtype and shape: while its tag is paused, and
        after a resume that retained the backup (retain_cpu_backup). None when there is
        none, as in torch_memory_saver. zero_copy=True: a tensor over the library's own
        host buffer (valid until the tag's next pause, a resume without retention, or the
        allocation's free; a DISK backup is read into a new buffer); False: a copy."""
        import torch

        if not x.is_contiguous():
            raise ValueError("get_cpu_backup needs a contiguous tensor")
        nbytes = x.numel() * x.element_size()
        buf = self._backup_buffer(x.data_ptr(), nbytes, zero_copy)
        if buf is None:
            return None
        if nbytes == 0:
            return torch.empty(x.shape, dtype=x.dtype)
        out = torch.frombuffer(buf, dtype=torch.uint8).view(x.dtype).view(x.shape)
        if not zero_copy and isinstance(buf, ctypes.Array):
            out = out.clone()
        return out

    # -- whole-process mode (TMS_INIT_ENABLE)
    def _init_whole_process(self) -> bool:
        """TMS_INIT_ENABLE=1 in a process started with the interposer (configure_subprocess):
        every cudaMalloc outside a region() goes to the tag "default", with a CPU backup
        (TMS_INIT_ENABLE_CPU_BACKUP, backend TMS_INIT_CPU_BACKUP_BACKEND) or a disk backup
        (TMS_INIT_ENABLE_DISK_BACKUP), through default regions made on demand
        (Saver.set_default_template): only a device that allocates gets its region (and its
        primary context), at its first such allocation. Returns whether it was set up (not
        in a process without the interposer)."""
        if not _env_bool("TMS_INIT_ENABLE") or not _preload.active():
            return False
        if not _have("cms_hook_region_default_template_set"):
            warnings.warn(
                "cumemsaver: TMS_INIT_ENABLE needs cms_hook_region_default_template_set "
                "(libcumemsaver 1.2); allocations outside region() are not pausable in this "
                "process",
                RuntimeWarning,
                stacklevel=3,
            )
            return False
        cpu = _env_bool("TMS_INIT_ENABLE_CPU_BACKUP")
        disk = _env_bool("TMS_INIT_ENABLE_DISK_BACKUP") and not cpu
        self._hook_mode = "preload"
        self._whole_process = True
        saver = self._ensure()
        ctag, kwargs = self._options(_TAG_DEFAULT, cpu, disk, None)
        self._template = (ctag, kwargs)
        saver.set_default_template(ctag, **kwargs)
        return True


torch_memory_saver = TorchMemorySaver()
torch_memory_saver._init_whole_process()


@contextlib.contextmanager
def configure_subprocess():
    """As torch_memory_saver.configure_subprocess: child processes started inside the block
    load libcumemsaver-preload.so first (LD_PRELOAD, restored afterwards; for
    hook_mode="preload")."""
    with _preload.configure_subprocess():
        yield
