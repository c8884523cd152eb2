# SPDX-License-Identifier: MIT
"""The import name torch_memory_saver, served by cumemsaver's drop-in.

    import torch_memory_saver
    from torch_memory_saver import torch_memory_saver, configure_subprocess

Every name here is cumemsaver.torch_memory_saver's (the same objects: the singleton
torch_memory_saver is cumemsaver.torch_memory_saver.torch_memory_saver); docs/python.md maps
each option onto the library and lists the differences from the original torch_memory_saver.
The submodules are those the original's public API and its example suite import:
entrypoint, utils, testing_utils, hooks.base, hooks.mode_preload. This package holds no
implementation and no code of the original.

Importing it where the original torch_memory_saver is installed too (found by its package
metadata, _peer_check) raises ImportError naming both and how to keep one; with
CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver it warns (RuntimeWarning) and goes on. Without
PyTorch it raises cumemsaver's NeedsPyTorch (an ImportError), as the drop-in does. Without
the cumemsaver package (installed with --no-deps) it raises ModuleNotFoundError (name
cumemsaver) saying so and how to install it.
"""

import importlib.util

from . import _peer_check

_peer_check.check()
if importlib.util.find_spec("cumemsaver") is None:  # Python's own error names it only
    raise ModuleNotFoundError(
        f"torch_memory_saver: {_peer_check.OURS} serves this name with the cumemsaver "
        "package's drop-in (cumemsaver.torch_memory_saver), and cumemsaver is not installed: "
        "from a cumemsaver clone, `pip install ./bindings/python` (offline: add --no-index), "
        "or put it on the path (PYTHONPATH=bindings/python, CUMEMSAVER_LIBRARY naming "
        "libcumemsaver.so.1); docs/python.md, Install",
        name="cumemsaver",
    )

# the checks come first: their errors, not the drop-in's, are the ones to see
from cumemsaver.torch_memory_saver import (  # noqa: E402
    TorchMemorySaver,
    configure_subprocess,
    torch_memory_saver,
)

__all__ = ["TorchMemorySaver", "configure_subprocess", "torch_memory_saver"]
