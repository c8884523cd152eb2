# SPDX-License-Identifier: MIT
"""cumemsaver.torch_memory_saver's get_cpu_backup and retain_cpu_backup with real PyTorch
tensors on a GPU (skips without torch, CUDA, or the 1.2 functions): the tensor built over
the library's host buffer (zero_copy), views into an allocation, dtype and shape, the same
host address across retaining cycles, None when there is no backup.

    CUMEMSAVER_LIBRARY=$BUILD/libcumemsaver.so.1 PYTHONPATH=bindings/python \\
        python3 -m unittest bindings/python/tests/test_tms_gpu.py -v
"""

import os
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


if __name__ == "__main__":
    unittest.main()
