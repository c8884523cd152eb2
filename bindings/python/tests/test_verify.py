"""Verified backups (since 1.3) on the host simulation: Context.region(verify=True), a
changed host backup raising VerifyFailed with the region left paused, Region.set_flags
clearing REGION_VERIFY to take the backup back, RegionStats.bytes_verified / verify_ns.

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
from cumemsaver import _lib as L  # noqa: E402

MiB = 1 << 20


class TestVerify(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)

    def tearDown(self):
        self.ctx.close()

    def test_flag_constant_and_rules(self):
        self.assertEqual(cms.REGION_VERIFY, L.CMS_REGION_VERIFY)
        self.assertEqual(L.CMS_REGION_VERIFY, 0x80)
        self.assertIs(cms.ERRORS[L.CMS_ERR_VERIFY_FAILED], cms.VerifyFailed)
        r = self.ctx.region("v", policy="host", verify=True)
        self.assertTrue(r.info().flags & cms.REGION_VERIFY)
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.region("d", policy=cms.Policy.DISCARD, verify=True)

    def test_changed_backup_is_caught(self):
        r = self.ctx.region("v", policy=cms.Policy.HOST, verify=True)
        p = r.alloc(MiB)
        data = bytes(range(256)) * (MiB // 256)
        ctypes.memmove(p, data, MiB)  # the simulation's device memory is host memory
        r.pause()
        r.resume()
        self.assertEqual(ctypes.string_at(p, MiB), data)
        self.assertEqual(r.stats().bytes_verified, MiB)
        self.assertGreater(r.stats().verify_ns, 0)
        r.pause()
        b = self.ctx.backup(p)
        flipped = ctypes.c_ubyte.from_address(b.host + 4096)
        flipped.value ^= 0xFF
        with self.assertRaises(cms.VerifyFailed) as e:
            r.resume()
        self.assertIn('region "v"', str(e.exception))
        self.assertTrue(r.info().paused)
        self.assertEqual(self.ctx.backup_read(p + 4096, 1), bytes([data[4096] ^ 0xFF]))
        r.set_flags(cms.REGION_VERIFY, 0)
        r.resume()
        self.assertEqual(ctypes.string_at(p + 4096, 1), bytes([data[4096] ^ 0xFF]))
        self.assertEqual(r.stats().failures_by_status, {"CMS_ERR_VERIFY_FAILED": 1})


if __name__ == "__main__":
    unittest.main()
