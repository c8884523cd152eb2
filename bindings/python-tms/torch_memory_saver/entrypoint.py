# SPDX-License-Identifier: MIT
"""torch_memory_saver.entrypoint: the TorchMemorySaver class (cumemsaver's drop-in) and the
type of region()'s cpu_backup_backend argument."""

from typing import Literal

from cumemsaver.torch_memory_saver import TorchMemorySaver

# region(cpu_backup_backend=...): page-locked host memory, or pageable memory the kernel
# can reclaim (docs/python.md)
CpuBackupBackend = Literal["mmap", "pinned"]

__all__ = ["CpuBackupBackend", "TorchMemorySaver"]
