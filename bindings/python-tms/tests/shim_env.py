# SPDX-License-Identifier: MIT
"""Paths for the tests of bindings/python-tms: this tree's torch_memory_saver package and
cumemsaver first on sys.path (not whatever is installed), and the stand-in torch of
bindings/python/tests where PyTorch is not installed."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.dirname(HERE)  # bindings/python-tms
BINDINGS = os.path.join(os.path.dirname(SHIM), "python")  # bindings/python
PY_TESTS = os.path.join(BINDINGS, "tests")  # fake_torch.py
PATHS = [SHIM, BINDINGS, PY_TESTS]

for _p in reversed(PATHS):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import fake_torch  # noqa: E402

REAL_TORCH = fake_torch.real_torch()

# the first lines of a child process's script: the same paths, and the stand-in torch
# where PyTorch is not installed (CHILD_NO_TORCH: none at all)
CHILD = (
    f"import sys\nsys.path[:0] = {PATHS!r}\n"
    "import fake_torch\nfake_torch.real_torch() or fake_torch.install()\n"
)
CHILD_NO_TORCH = f"import sys\nsys.path[:0] = {PATHS!r}\n"


def stand_in_torch():
    """torch: the real one where installed, else the stand-in (installed once)."""
    if REAL_TORCH:
        import torch

        return torch
    return fake_torch.install()


def child_env(**extra):
    """os.environ without PYTHONPATH, LD_PRELOAD and CUMEMSAVER_TORCH_MEMORY_SAVER, plus
    extra."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "LD_PRELOAD", "CUMEMSAVER_TORCH_MEMORY_SAVER")
    }
    env.update(extra)
    return env
