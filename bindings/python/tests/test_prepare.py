"""Host backups prepared ahead (since 1.3): Context.region(prepare=True) on the host simulation.

Run like test_cumemsaver.py (CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY set); standard library only.
"""

import ctypes
import os
import time
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import api  # noqa: E402

MiB = 1 << 20


class TestPrepare(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)

    def tearDown(self):
        self.ctx.close()

    def wait_prepared(self, r, nbytes, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            i = r.info()
            if i.host_bytes >= nbytes and i.pinned_bytes == i.host_bytes:
                return i
            time.sleep(0.005)
        self.fail(f"not prepared: {r.info()}")

    def test_prepared_before_the_first_pause(self):
        r = self.ctx.region("p", policy=cms.Policy.HOST, prepare=True)
        self.assertEqual(r.info().flags, api.REGION_PREPARE)
        sizes = [MiB, 3 * MiB + 4096]
        ptrs = [r.alloc(n) for n in sizes]
        data = [bytes([k + 1]) * n for k, n in enumerate(sizes)]
        for p, d in zip(ptrs, data):
            ctypes.memmove(p, d, len(d))  # the simulation's device memory is host memory
        self.wait_prepared(r, sum(sizes))
        s = r.stats()
        self.assertGreaterEqual(s.bytes_prepared, sum(sizes))
        self.assertGreater(s.prepare_ns, 0)
        with self.assertRaises(cms.NotPaused):  # prepared, but no content yet
            self.ctx.backup(ptrs[0])
        host = r.info().host_bytes
        r.pause()
        self.assertEqual(r.info().host_bytes, host)  # the pause made no buffer
        r.resume()
        for p, d in zip(ptrs, data):
            self.assertEqual(ctypes.string_at(p, len(d)), d)

    def test_flag_rules(self):
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.region("d", policy=cms.Policy.DISCARD, prepare=True)
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.region("h", policy=cms.Policy.HOST, prepare=True, release_host=True)
        r = self.ctx.region("h", policy=cms.Policy.HOST)
        self.assertEqual(r.stats().bytes_prepared, 0)


if __name__ == "__main__":
    unittest.main()
