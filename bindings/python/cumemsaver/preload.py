# SPDX-License-Identifier: MIT
"""LD_PRELOAD mode: libcumemsaver-preload.so interposes cudaMalloc/cudaFree.

Allocations a thread makes through the CUDA runtime while one of its regions is active
(cms_hook_region_push, or cumemsaver.torch's region() in hook_mode="preload") come from
cumemsaver; all others, and frees of pointers that are not cumemsaver's, go to the real
runtime. The interposer must be loaded before the runtime, so it is set up for a child
process: ``subprocess.run(cmd, env=preload.env())`` or ``with preload.configure_subprocess():``.
"""

import contextlib
import ctypes
import os
from typing import Dict, Mapping, Optional

PRELOAD_NAME = "libcumemsaver-preload.so"


def _loaded_path(name: str) -> Optional[str]:
    """The path of a loaded shared object whose file name is name, or name plus a version
    suffix (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    base = os.path.basename(parts[5].strip())
                    # libcumemsaver.so.1 is mapped as the file the link names (.so.1.1.0)
                    if base == name or base.startswith(name + "."):
                        return parts[5].strip()
    except OSError:
        pass
    return None


def library_path() -> str:
    """libcumemsaver-preload.so: $CUMEMSAVER_PRELOAD, else beside the loaded
    libcumemsaver.so.1 (a build tree) or in cumemsaver/ next to it (installed:
    <libdir>/cumemsaver/), else in pkg-config's libdir likewise. Raises
    FileNotFoundError."""
    env = os.environ.get("CUMEMSAVER_PRELOAD")
    if env:
        if not os.path.exists(env):
            raise FileNotFoundError(f"CUMEMSAVER_PRELOAD={env} does not exist")
        return env
    candidates = []
    from . import _lib

    try:
        _lib.lib()
        main = _loaded_path(_lib.SONAME)
        if main:
            d = os.path.dirname(main)
            candidates += [os.path.join(d, PRELOAD_NAME), os.path.join(d, "cumemsaver", PRELOAD_NAME)]
    except OSError:
        pass
    libdir = _lib.pkgconfig_libdir()
    if libdir:
        candidates += [os.path.join(libdir, PRELOAD_NAME), os.path.join(libdir, "cumemsaver", PRELOAD_NAME)]
    for c in candidates:
        if os.path.exists(c):
            return c
    raise FileNotFoundError(
        f"{PRELOAD_NAME} not found (looked at: {', '.join(candidates) or 'nothing'}); "
        "set CUMEMSAVER_PRELOAD"
    )


def env(base: Optional[Mapping[str, str]] = None, path: Optional[str] = None) -> Dict[str, str]:
    """A copy of base (default os.environ) with the interposer first in LD_PRELOAD."""
    out = dict(os.environ if base is None else base)
    lib = path or library_path()
    rest = [p for p in out.get("LD_PRELOAD", "").replace(":", " ").split() if p and p != lib]
    out["LD_PRELOAD"] = " ".join([lib] + rest)
    return out


@contextlib.contextmanager
def configure_subprocess(path: Optional[str] = None):
    """Within the block, child processes started with the inherited environment load the
    interposer (os.environ["LD_PRELOAD"] is set, and restored afterwards)."""
    old = os.environ.get("LD_PRELOAD")
    os.environ["LD_PRELOAD"] = env(path=path)["LD_PRELOAD"]
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = old


def active() -> bool:
    """True when this process's global cudaMalloc is the interposer's (it was preloaded)."""
    path = _loaded_path(PRELOAD_NAME)
    if not path:
        return False
    def addr(fn):
        return ctypes.cast(fn, ctypes.c_void_p).value

    try:
        ours = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        glob = ctypes.CDLL(None)
        if addr(glob.cudaMalloc) != addr(ours.cudaMalloc):
            return False
        # The interposer and these bindings must share one libcumemsaver.so.1 (one
        # per-thread region stack): compare what each resolves.
        from . import _lib

        return addr(glob.cms_hook_region_current) == addr(_lib.lib().cms_hook_region_current)
    except (OSError, AttributeError):
        return False
