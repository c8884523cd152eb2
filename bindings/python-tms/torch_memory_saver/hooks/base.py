# SPDX-License-Identifier: MIT
"""torch_memory_saver.hooks.base: HookMode, the values of TorchMemorySaver.hook_mode."""

from typing import Literal

# "torch": PyTorch's pluggable allocator (cumemsaver's default); "preload": the process
# was started with the LD_PRELOAD interposer (configure_subprocess)
HookMode = Literal["preload", "torch"]

__all__ = ["HookMode"]
