# SPDX-License-Identifier: MIT
"""torch_memory_saver.utils: the helpers code written for torch_memory_saver imports from
here (the example suite's change_env and is_xpu; get_binary_path_from_package for the
LD_PRELOAD library of a child process), over cumemsaver."""

import contextlib
import os
import pathlib

__all__ = ["change_env", "get_binary_path_from_package", "is_xpu"]

# the original's name of its LD_PRELOAD library, whose counterpart is libcumemsaver-preload.so
PRELOAD_STEM = "torch_memory_saver_hook_mode_preload"


def is_xpu() -> bool:
    """False: cumemsaver pauses memory on CUDA devices only (no Intel XPU)."""
    return False


@contextlib.contextmanager
def change_env(key: str, value: str):
    """Sets the environment variable key to value for the block, then restores what was
    there before (removes it where it was not set)."""
    before = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def get_binary_path_from_package(stem: str) -> pathlib.Path:
    """The shared library a process preloads for hook_mode="preload": for
    "torch_memory_saver_hook_mode_preload", cumemsaver's interposer libcumemsaver-preload.so
    (cumemsaver.preload.library_path(); FileNotFoundError when it is not found). Any other
    stem raises RuntimeError: the original's other libraries have no file here (hook_mode
    "torch" needs none: TorchMemorySaver sets PyTorch's allocator up itself)."""
    if stem != PRELOAD_STEM:
        raise RuntimeError(
            f"torch_memory_saver (cumemsaver): no library {stem!r}; cumemsaver has only the "
            f"counterpart of {PRELOAD_STEM!r} (libcumemsaver-preload.so)"
        )
    from cumemsaver import preload

    return pathlib.Path(preload.library_path())
