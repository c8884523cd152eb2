# SPDX-License-Identifier: MIT
"""The import of PyTorch by the modules that need it (cumemsaver.torch and the
torch_memory_saver drop-in); `import cumemsaver` itself never imports torch."""


class NeedsPyTorch(ModuleNotFoundError):
    """A PyTorch integration was imported where `import torch` fails (an ImportError:
    `except ImportError` catches it)."""


NeedsPyTorch.__module__ = "cumemsaver"  # printed as cumemsaver.NeedsPyTorch, its public name


def import_torch(module: str):
    """torch, or NeedsPyTorch naming module and why `import torch` failed."""
    try:
        import torch
    except ImportError as exc:
        raise NeedsPyTorch(
            f"{module} needs PyTorch: `import torch` failed ({exc}). Install torch for this "
            "interpreter; the rest of cumemsaver works without it",
            name="torch",
        ) from exc
    return torch
