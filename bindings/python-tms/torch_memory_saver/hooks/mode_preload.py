# SPDX-License-Identifier: MIT
"""torch_memory_saver.hooks.mode_preload: configure_subprocess, cumemsaver's (child processes
started inside the block load libcumemsaver-preload.so first; LD_PRELOAD restored after)."""

from cumemsaver.torch_memory_saver import configure_subprocess

__all__ = ["configure_subprocess"]
