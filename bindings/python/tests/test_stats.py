"""Observability (since 1.2): Region.stats() and Context.regions() on the host simulation.

Run like test_cumemsaver.py (CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY set); standard library only.
"""

import ctypes
import os
import threading
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402

MiB = 1 << 20
CUDA_ERROR_OUT_OF_MEMORY = 2


class TestStats(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.sim = ctypes.CDLL(SIM)
        self.sim.cmssim_fail_call.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int]

    def tearDown(self):
        self.sim.cmssim_clear_faults()
        self.ctx.close()

    def test_counters_after_cycles(self):
        h = self.ctx.region("h", policy=cms.Policy.HOST)
        d = self.ctx.region("d", policy=cms.Policy.DISCARD)
        sizes = [MiB + 4096, 3 * MiB]
        for n in sizes:
            h.alloc(n)
            d.alloc(n)
        s = h.stats()
        self.assertEqual((s.tag, s.device, s.pauses, s.resumes, s.failures), ("h", 0, 0, 0, 0))
        self.assertIs(s.policy, cms.Policy.HOST)
        released = backed = 0
        for _ in range(2):
            released += self.ctx.pause().bytes_released
            backed += self.ctx.resume().bytes_backed
        sh, sd = h.stats(), d.stats()
        self.assertEqual((sh.pauses, sh.resumes, sd.pauses, sd.resumes), (2, 2, 2, 2))
        self.assertEqual(sh.bytes_to_store, 2 * sum(sizes))
        self.assertEqual(sh.bytes_from_store, 2 * sum(sizes))
        self.assertEqual(sd.bytes_to_store, 0)
        self.assertEqual(sh.bytes_released + sd.bytes_released, released)
        self.assertEqual(sh.bytes_backed + sd.bytes_backed, backed)
        self.assertEqual(sh.bytes_released, 2 * h.info().physical_bytes)
        self.assertGreater(sh.pause_ns, 0)
        self.assertEqual(sh.failures_by_status, {})

    def test_failures_by_status(self):
        h = self.ctx.region("h", policy=cms.Policy.HOST)
        h.alloc(MiB)
        h.pause()
        self.assertEqual(self.sim.cmssim_fail_call(b"cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY), 0)
        with self.assertRaises(cms.OutOfDeviceMemory):
            h.resume()
        s = h.stats()
        self.assertEqual(s.failures, 1)
        self.assertEqual(s.failures_by_status, {"CMS_ERR_OUT_OF_DEVICE_MEMORY": 1})
        self.assertEqual((s.pauses, s.resumes), (1, 0))

    def test_regions_list(self):
        self.assertEqual(self.ctx.regions(), [])
        a = self.ctx.region("a")
        self.ctx.region("b", policy=cms.Policy.ZERO)
        a.alloc(MiB)
        a.pause()
        v = self.ctx.regions()
        self.assertEqual([r.tag for r in v], ["a", "b"])
        self.assertIs(v[0].state, cms.State.PAUSED)
        self.assertEqual(v[0].pauses, 1)
        self.assertLess(v[0].region_id, v[1].region_id)
        a.destroy()
        self.assertEqual([r.tag for r in self.ctx.regions()], ["b"])

    def test_regions_while_destroying(self):
        stop = threading.Event()
        errors = []

        def churn():
            try:
                while not stop.is_set():
                    self.ctx.region("tmp").destroy()
            except Exception as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=churn)
        t.start()
        try:
            for _ in range(200):
                tags = [r.tag for r in self.ctx.regions()]
                self.assertIn(tags, ([], ["tmp"]))
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
