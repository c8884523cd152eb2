# SPDX-License-Identifier: MIT
"""`import torch_memory_saver` served by cumemsaver (bindings/python-tms): the package and the
submodules the original's public API and example suite import, each name there and each
cumemsaver's own object; utils, testing_utils and hooks.mode_preload over cumemsaver; a
pause and resume through the name on the host simulation (stand-in torch)."""

import contextlib
import ctypes
import importlib
import io
import os
import typing
import unittest
from unittest import mock

import shim_env

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
torch = shim_env.stand_in_torch()


def setUpModule():
    from torch_memory_saver import _peer_check  # noqa: F401 (raises where the original is)


# module -> the names code written for the original imports from it: its package's
# public names, and every `from torch_memory_saver... import` of its example suite (test/)
MODULES = {
    "torch_memory_saver": ["TorchMemorySaver", "configure_subprocess", "torch_memory_saver"],
    "torch_memory_saver.entrypoint": ["TorchMemorySaver", "CpuBackupBackend"],
    "torch_memory_saver.utils": ["change_env", "is_xpu", "get_binary_path_from_package"],
    "torch_memory_saver.testing_utils": [
        "empty_cache",
        "get_and_print_gpu_memory",
        "get_device",
        "is_xpu",
    ],
    "torch_memory_saver.hooks": [],
    "torch_memory_saver.hooks.base": ["HookMode"],
    "torch_memory_saver.hooks.mode_preload": ["configure_subprocess"],
}


class TestNames(unittest.TestCase):
    def test_every_module_and_name(self):
        pkg = os.path.join(shim_env.SHIM, "torch_memory_saver") + os.sep
        for name, names in MODULES.items():
            mod = importlib.import_module(name)
            self.assertTrue(os.path.realpath(mod.__file__).startswith(pkg), mod.__file__)
            for attr in names:
                self.assertTrue(hasattr(mod, attr), f"{name}.{attr}")

    def test_the_names_are_cumemsaver_drop_in_objects(self):
        import cumemsaver.torch_memory_saver as dropin
        import torch_memory_saver as tms
        from torch_memory_saver import entrypoint
        from torch_memory_saver.hooks import mode_preload

        self.assertIs(tms.torch_memory_saver, dropin.torch_memory_saver)
        self.assertIs(tms.TorchMemorySaver, dropin.TorchMemorySaver)
        self.assertIs(entrypoint.TorchMemorySaver, dropin.TorchMemorySaver)
        self.assertIs(tms.configure_subprocess, dropin.configure_subprocess)
        self.assertIs(mode_preload.configure_subprocess, dropin.configure_subprocess)
        self.assertEqual(sorted(tms.__all__), sorted(MODULES["torch_memory_saver"]))

    def test_the_types_name_what_the_drop_in_takes(self):
        import cumemsaver.torch_memory_saver as dropin
        from torch_memory_saver.entrypoint import CpuBackupBackend
        from torch_memory_saver.hooks.base import HookMode

        self.assertEqual(set(typing.get_args(CpuBackupBackend)), set(dropin._BACKENDS))
        saver = dropin.TorchMemorySaver()
        for mode in typing.get_args(HookMode):
            saver.hook_mode = mode
            self.assertEqual(saver.hook_mode, mode)
        with self.assertRaises(ValueError):
            saver.hook_mode = "cuda"


class TestUtils(unittest.TestCase):
    def test_change_env_sets_then_restores(self):
        from torch_memory_saver.utils import change_env

        key = "CMS_TMS_TEST_CHANGE_ENV"
        os.environ.pop(key, None)
        with change_env(key, "1"):
            self.assertEqual(os.environ[key], "1")
        self.assertNotIn(key, os.environ)
        os.environ[key] = "before"
        self.addCleanup(os.environ.pop, key, None)
        with self.assertRaises(KeyError):
            with change_env(key, "inside"):
                self.assertEqual(os.environ[key], "inside")
                raise KeyError("leaves the block")
        self.assertEqual(os.environ[key], "before")

    def test_is_xpu_is_false(self):
        from torch_memory_saver import testing_utils, utils

        self.assertIs(utils.is_xpu(), False)
        self.assertIs(testing_utils.is_xpu, utils.is_xpu)

    def test_other_libraries_have_no_counterpart(self):
        from torch_memory_saver.utils import get_binary_path_from_package

        with self.assertRaises(RuntimeError) as cm:
            get_binary_path_from_package("torch_memory_saver_hook_mode_torch")
        self.assertIn("'torch_memory_saver_hook_mode_torch'", str(cm.exception))


@unittest.skipUnless(LIB, "set CUMEMSAVER_LIBRARY to run these tests")
class TestPreloadLibrary(unittest.TestCase):
    def setUp(self):
        from cumemsaver import preload

        self.preload = os.path.realpath(preload.library_path())
        self.assertEqual(os.path.basename(self.preload), "libcumemsaver-preload.so")

    def test_the_preload_library_is_cumemsaver_interposer(self):
        from torch_memory_saver.utils import get_binary_path_from_package

        path = get_binary_path_from_package("torch_memory_saver_hook_mode_preload")
        self.assertTrue(path.is_file(), path)
        self.assertEqual(os.path.realpath(path), self.preload)

    def test_configure_subprocess_puts_it_first_and_restores(self):
        from torch_memory_saver.hooks.mode_preload import configure_subprocess

        with mock.patch.dict(os.environ, {"LD_PRELOAD": "/other/lib.so"}):
            with configure_subprocess():
                entries = os.environ["LD_PRELOAD"].replace(":", " ").split()
                self.assertEqual([os.path.realpath(entries[0]), entries[1:]],
                                 [self.preload, ["/other/lib.so"]])
            self.assertEqual(os.environ["LD_PRELOAD"], "/other/lib.so")


class TestTestingUtils(unittest.TestCase):
    def test_device_and_empty_cache(self):
        from torch_memory_saver import testing_utils

        self.assertEqual(testing_utils.get_device(), "cuda")
        calls = []
        with mock.patch.object(torch.cuda, "empty_cache", lambda: calls.append(1)):
            testing_utils.empty_cache()
        self.assertEqual(calls, [1])

    def memory(self, **cuda):
        from torch_memory_saver import testing_utils

        out = io.StringIO()
        with contextlib.ExitStack() as stack:
            for name, fn in cuda.items():
                stack.enter_context(mock.patch.object(torch.cuda, name, fn, create=True))
            with contextlib.redirect_stdout(out):
                used = testing_utils.get_and_print_gpu_memory("after pause", gpu_id=1)
        return used, out.getvalue()

    def test_memory_in_use_from_nvml(self):
        used, text = self.memory(
            device_memory_used=lambda i: (3 << 30) + i, mem_get_info=lambda i: (0, 0)
        )
        self.assertEqual(used, (3 << 30) + 1)
        self.assertIn("device 1: 3.00 GiB in use (after pause)", text)

    def test_memory_in_use_from_the_driver_without_nvml(self):
        def no_nvml(i):
            raise ModuleNotFoundError("pynvml does not seem to be installed")

        used, text = self.memory(
            device_memory_used=no_nvml, mem_get_info=lambda i: (1 << 30, (5 << 30) + i)
        )
        self.assertEqual(used, (4 << 30) + 1)
        self.assertIn("device 1: 4.00 GiB in use (after pause)", text)


@unittest.skipUnless(LIB and SIM, "set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")
@unittest.skipIf(shim_env.REAL_TORCH, "real torch installed: the GPU suite covers it")
class TestThroughTheName(unittest.TestCase):
    def test_pause_resume_keeps_content_and_address(self):
        from torch_memory_saver import torch_memory_saver as tms

        pattern = bytes(range(256)) * 64
        with tms.region(tag="by-name", enable_cpu_backup=True):
            ptr = torch.empty(1 << 20)
        ctypes.memmove(ptr, pattern, len(pattern))
        (region,) = tms.saver.regions("by-name+cpu_backup")
        tms.pause("by-name")
        self.assertTrue(region.info().paused)
        tms.resume("by-name")
        self.assertFalse(region.info().paused)
        self.assertEqual(ctypes.string_at(ptr, len(pattern)), pattern)
        self.assertEqual(tms.saver.context.pointer_info(ptr).base, ptr)


if __name__ == "__main__":
    unittest.main()
