# SPDX-License-Identifier: MIT
"""cumemsaver.torch_memory_saver's get_cpu_backup and retain_cpu_backup with real PyTorch
tensors on a GPU (skips without torch, CUDA, or the 1.2 functions): the tensor built over
the library's host buffer (zero_copy), views into an allocation, dtype and shape, the same
host address across retaining cycles, None when there is no backup; whole-process mode
(TMS_INIT_ENABLE in a child started under configure_subprocess) with its default regions
made on demand.

    CUMEMSAVER_LIBRARY=$BUILD/libcumemsaver.so.1 PYTHONPATH=bindings/python \\
        python3 -m unittest bindings/python/tests/test_tms_gpu.py -v
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch  # noqa: E402

if not fake_torch.real_torch() or os.environ.get("CMS_DRIVER_LIBRARY"):
    raise unittest.SkipTest("needs PyTorch and the real driver (a GPU machine)")
import torch  # noqa: E402

if not torch.cuda.is_available():
    raise unittest.SkipTest("no CUDA device")

from cumemsaver import _lib as L  # noqa: E402

NEED = ("cms_backup_get", "cms_backup_read", "cms_region_flags_set")
if not all(L.available(n) for n in NEED):
    raise unittest.SkipTest("libcumemsaver lacks the 1.2 backup functions")


class TestGetCpuBackup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from cumemsaver.torch_memory_saver import TorchMemorySaver

        cls.tms = TorchMemorySaver()
        cls.tms.hook_mode = "torch"

    @classmethod
    def tearDownClass(cls):
        torch.cuda.synchronize()
        cls.tms.saver.close()

    def test_view_dtype_shape_and_none_after_resume(self):
        tms = self.tms
        with tms.region(tag="w", enable_cpu_backup=True):
            big = torch.randn((64, 1000), dtype=torch.float32, device="cuda")
        view = big[10:20]  # contiguous rows at an offset into the allocation
        expected = view.cpu()
        tms.pause("w")
        for zero_copy in (False, True):
            got = tms.get_cpu_backup(view, zero_copy=zero_copy)
            self.assertIsNotNone(got)
            got_kind = (got.device.type, got.dtype, got.shape)
            self.assertEqual(got_kind, ("cpu", view.dtype, view.shape))
            self.assertTrue(torch.equal(got, expected))
            del got
        with tms.region(tag="kv"):
            kv = torch.ones(1024, device="cuda")
        tms.pause("kv")
        self.assertIsNone(tms.get_cpu_backup(kv))  # no backup kept
        tms.resume()
        self.assertIsNone(tms.get_cpu_backup(view))  # not retained: given back
        self.assertTrue(torch.equal(view.cpu(), expected))
        with self.assertRaises(ValueError):
            tms.get_cpu_backup(big.t())  # not contiguous
        del big, view, kv

    def test_retained_backup_keeps_its_address(self):
        tms = self.tms
        pattern = torch.arange(4096, dtype=torch.int64).remainder(251).to(torch.uint8)
        with tms.region(tag="r", enable_cpu_backup=True, cpu_backup_backend="mmap"):
            x = pattern.to("cuda")
        tms.pause("r")
        first = tms.get_cpu_backup(x, zero_copy=True)
        address = first.data_ptr()
        self.assertTrue(torch.equal(first, pattern))
        del first
        tms.retain_cpu_backup = True
        try:
            tms.resume("r")
            kept = tms.get_cpu_backup(x, zero_copy=True)
            self.assertEqual(kept.data_ptr(), address)
            self.assertTrue(torch.equal(kept, pattern))
            del kept
            x.add_(1)
            tms.pause("r")
            again = tms.get_cpu_backup(x, zero_copy=True)
            self.assertEqual(again.data_ptr(), address)
            self.assertTrue(torch.equal(again, pattern + 1))
            del again
        finally:
            tms.retain_cpu_backup = False
        tms.resume("r")
        self.assertIsNone(tms.get_cpu_backup(x))
        self.assertTrue(torch.equal(x.cpu(), pattern + 1))
        del x


CHILD = """
import torch
from cumemsaver.torch_memory_saver import torch_memory_saver as t
print(len(t.saver.stats()))  # nothing made at import
x = torch.arange(1 << 22, dtype=torch.int64, device="cuda")  # outside any region
with t.region(tag="kv"):
    kv = torch.ones(1 << 20, device="cuda")
with t.disable():
    keep = torch.full((1024,), 7, device="cuda")
print(sorted((i.tag, i.device) for i in t.saver.stats()))
free0 = torch.cuda.mem_get_info()[0]
t.pause("default")
torch.cuda.synchronize()
with t.disable():  # allocations outside regions go to the paused "default": refused
    print(torch.cuda.mem_get_info()[0] - free0 >= x.numel() * 8, int(keep.sum()))
t.resume("default")
print(torch.equal(x, torch.arange(1 << 22, dtype=torch.int64, device="cuda")))
"""


@unittest.skipUnless(L.available("cms_hook_region_default_template_set"), "needs 1.2")
class TestWholeProcess(unittest.TestCase):
    def test_default_regions_made_on_demand_pause_and_restore(self):
        from cumemsaver.torch_memory_saver import configure_subprocess

        for disk in ("0", "1"):
            cpu = "0" if disk == "1" else "1"
            env = dict(os.environ, TMS_INIT_ENABLE="1", TMS_INIT_ENABLE_CPU_BACKUP=cpu,
                       TMS_INIT_ENABLE_DISK_BACKUP=disk, TMS_DISK_BACKUP_DIR="/tmp")
            with configure_subprocess():
                env["LD_PRELOAD"] = os.environ["LD_PRELOAD"]
                out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                                     text=True, timeout=240)
            self.assertEqual(out.returncode, 0, out.stderr[-3000:])
            tag = "default+disk_backup" if disk == "1" else "default+cpu_backup"
            self.assertEqual(out.stdout.split("\n")[:4],
                             ["0", f"[('{tag}', 0), ('kv', 0)]", "True 7168", "True"])


if __name__ == "__main__":
    unittest.main()
