# SPDX-License-Identifier: MIT
"""torch_memory_saver.testing_utils: the helpers torch_memory_saver's example suite imports
(get_device, empty_cache, get_and_print_gpu_memory, is_xpu), for CUDA devices."""

import torch

from .utils import is_xpu

__all__ = ["empty_cache", "get_and_print_gpu_memory", "get_device", "is_xpu"]


def get_device() -> str:
    """The torch device type the suite allocates on: "cuda"."""
    return "cuda"


def empty_cache() -> None:
    """torch.cuda.empty_cache(): PyTorch gives its unused cached segments back."""
    torch.cuda.empty_cache()


def device_memory_used(gpu_id: int = 0) -> int:
    """Bytes in use on device gpu_id by every process: torch.cuda.device_memory_used (NVML),
    or where that is not available (no pynvml, an older torch) total minus free from
    torch.cuda.mem_get_info (the driver)."""
    try:
        return int(torch.cuda.device_memory_used(gpu_id))
    except (AttributeError, ImportError, RuntimeError):
        free, total = torch.cuda.mem_get_info(gpu_id)
        return int(total - free)


def get_and_print_gpu_memory(message: str, gpu_id: int = 0) -> int:
    """device_memory_used(gpu_id), printed with message; returns it."""
    used = device_memory_used(gpu_id)
    print(f"device {gpu_id}: {used / (1 << 30):.2f} GiB in use ({message})", flush=True)
    return used
