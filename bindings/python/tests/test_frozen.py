"""Frozen regions (since 1.3) on the host simulation: Region.freeze / thaw / frozen, RegionFrozen,
RegionStats.bytes_unchanged.

Run like test_cumemsaver.py (CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY set); standard library only.
"""

import ctypes
import os
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402

MiB = 1 << 20


class TestFrozen(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)

    def tearDown(self):
        self.ctx.close()

    def test_cycles(self):
        r = self.ctx.region("w", policy=cms.Policy.HOST)
        p = r.alloc(MiB)
        data = bytes(range(256)) * (MiB // 256)
        ctypes.memmove(p, data, MiB)  # the simulation's device memory is host memory
        self.assertFalse(r.frozen)
        r.freeze()
        r.freeze()  # frozen already: nothing
        self.assertTrue(r.frozen)
        self.assertTrue(r.info().frozen)
        with self.assertRaises(cms.RegionFrozen) as e:
            r.alloc(MiB)
        self.assertEqual(e.exception.status, -26)
        r.pause()  # the first pause after the freeze copies
        self.assertEqual(r.stats().bytes_to_store, MiB)
        r.resume()
        for _ in range(2):  # the later ones do not
            res = r.pause()
            self.assertEqual(res.bytes_backed_up, 0)
            r.resume()
        s = r.stats()
        self.assertEqual((s.bytes_to_store, s.bytes_unchanged), (MiB, 2 * MiB))
        self.assertEqual(ctypes.string_at(p, MiB), data)  # reads work
        r.thaw()
        r.thaw()
        self.assertFalse(r.frozen)
        ctypes.memmove(p, b"x" * 16, 16)  # writable again
        r.pause()
        r.resume()
        self.assertEqual(r.stats().bytes_to_store, 2 * MiB)
        self.assertEqual(ctypes.string_at(p, 16), b"x" * 16)

    def test_shareable_refused(self):
        r = self.ctx.region("s", policy=cms.Policy.HOST, shareable=True)
        with self.assertRaises(cms.NotSupported):
            r.freeze()
        self.assertFalse(r.frozen)


if __name__ == "__main__":
    unittest.main()
