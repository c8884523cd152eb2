# SPDX-License-Identifier: MIT
"""Content-free ranges (ABI 1.2): Context.range_discard / range_keep and
cumemsaver.torch.declare_free_blocks (over a stand-in pool, tests/fake_torch.py) on the host
simulation: a HOST pause copies only the live bytes, which survive.

Run like test_cumemsaver.py (CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY set); standard library only.
"""

import ctypes
import importlib.util
import os
import sys
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402

MiB = 1 << 20


def fill(ptr, n, byte):
    ctypes.memset(ptr, byte, n)


def same(ptr, n, byte):
    return ctypes.string_at(ptr, n) == bytes([byte]) * n


class TestRanges(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.h = self.ctx.region("h", policy=cms.Policy.HOST)

    def tearDown(self):
        self.ctx.close()

    def test_pause_copies_live_bytes(self):
        p = self.h.alloc(4 * MiB)
        fill(p, 4 * MiB, 0x11)
        self.ctx.range_discard(p + MiB, 2 * MiB)
        self.ctx.range_discard(p + 2 * MiB, MiB)  # merges: [1, 3) MiB declared
        self.ctx.range_keep(p + MiB, 4096)  # split: [1 MiB + 4096, 3 MiB)
        res = self.ctx.pause("h")
        self.assertEqual(res.bytes_backed_up, 4 * MiB - (2 * MiB - 4096))
        self.assertEqual(self.ctx.resume("h").bytes_restored, res.bytes_backed_up)
        self.assertTrue(same(p, MiB + 4096, 0x11))
        self.assertTrue(same(p + 3 * MiB, MiB, 0x11))
        # The declaration ended with the resume.
        self.assertEqual(self.ctx.pause("h").bytes_backed_up, 4 * MiB)
        self.ctx.resume("h")

    def test_errors(self):
        p = self.h.alloc(MiB)
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.range_discard(p, 0)
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.range_discard(p + 8, MiB)  # past the end
        with self.assertRaises(cms.NotFound):
            self.ctx.range_keep(p + MiB, 8)
        self.ctx.pause("h")
        with self.assertRaises(cms.RegionPaused):
            self.ctx.range_discard(p, 8)
        self.ctx.resume("h")


@unittest.skipIf(importlib.util.find_spec("torch") is not None, "real torch: GPU test covers it")
class TestDeclareFreeBlocks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fake_torch

        fake_torch.install()
        import cumemsaver.torch as cmt

        cls.cmt = cmt

    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.h = self.ctx.region("h", policy=cms.Policy.HOST)

    def tearDown(self):
        self.ctx.close()

    def test_free_blocks_of_a_snapshot(self):
        segs = [
            {
                "address": 1 << 30,
                "total_size": 8 * MiB,
                "blocks": [
                    {"size": 2 * MiB, "state": "active_allocated"},
                    {"size": 3 * MiB, "state": "inactive"},
                    {"size": 4096, "state": "inactive"},  # below min_bytes
                    {"size": 2 * MiB, "state": "active_pending_free"},
                ],
            },
            {
                "address": 2 << 30,
                "blocks": [{"address": (2 << 30) + MiB, "size": MiB, "state": "inactive"}],
            },
        ]
        self.assertEqual(
            list(self.cmt.free_blocks(segs)),
            [((1 << 30) + 2 * MiB, 3 * MiB), ((2 << 30) + MiB, MiB)],
        )

    def test_declared_blocks_are_not_copied(self):
        a = self.h.alloc(8 * MiB)
        b = self.h.alloc(2 * MiB)
        fill(a, 8 * MiB, 0x22)
        fill(b, 2 * MiB, 0x33)

        class Pool:  # torch 2.11's MemPool.snapshot, over real segments
            def snapshot(self, include_traces=True):
                return [
                    {
                        "address": a,
                        "total_size": 8 * MiB,
                        "blocks": [
                            {"address": a, "size": MiB, "state": "active_allocated"},
                            {"address": a + MiB, "size": 5 * MiB, "state": "inactive"},
                            {"address": a + 6 * MiB, "size": 2 * MiB, "state": "active_allocated"},
                        ],
                    },
                    {"address": 1, "blocks": [{"address": 1, "size": MiB, "state": "inactive"}]},
                ]

        self.assertEqual(self.cmt.declare_free_blocks(self.ctx, Pool()), 5 * MiB)
        res = self.ctx.pause("h")
        self.assertEqual(res.bytes_backed_up, 5 * MiB)
        self.ctx.resume("h")
        self.assertTrue(same(a, MiB, 0x22))
        self.assertTrue(same(a + 6 * MiB, 2 * MiB, 0x22))
        self.assertTrue(same(b, 2 * MiB, 0x33))


    def test_saver_pause_declares_its_pools_free_blocks(self):
        import fake_torch

        torch = sys.modules["torch"]
        free = set()  # segments the stand-in's snapshot reports free ("inactive")

        def snapshot(pool, include_traces=True):
            return [
                {
                    "address": ptr,
                    "total_size": n,
                    "blocks": [
                        {"address": ptr, "size": n,
                         "state": "inactive" if ptr in free else "active_allocated"}
                    ],
                }
                for ptr, n in pool.segments
            ]

        fake_torch.MemPool.snapshot = snapshot
        self.addCleanup(delattr, fake_torch.MemPool, "snapshot")
        saver = self.cmt.Saver(driver_path=SIM)
        self.addCleanup(saver.close)
        with saver.region("w", policy=cms.Policy.HOST):
            a = torch.empty(4 * MiB)
            b = torch.empty(2 * MiB)
        with saver.region("kv", policy=cms.Policy.DISCARD):
            kv = torch.empty(2 * MiB)
        fill(a, 4 * MiB, 0x44)
        free.update((b, kv))
        self.assertEqual(saver.declare_free_blocks("kv"), 0)  # DISCARD keeps nothing anyway
        res = saver.pause("w")  # live_only: b is declared first
        self.assertEqual(res.bytes_backed_up, 4 * MiB)
        saver.resume("w")
        self.assertTrue(same(a, 4 * MiB, 0x44))
        res = saver.pause("w", live_only=False)  # whole segments
        self.assertEqual(res.bytes_backed_up, 6 * MiB)
        saver.resume("w")


if __name__ == "__main__":
    unittest.main()
