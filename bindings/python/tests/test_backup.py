"""Host backups, retention flags and default hook regions (since 1.2) on the host simulation:
Context.backup / backup_read, Region.set_flags, HookContext.set_default_region.

Run like test_cumemsaver.py (CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY set); standard library only.
"""

import ctypes
import os
import tempfile
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402

MiB = 1 << 20


class TestBackup(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)

    def tearDown(self):
        self.ctx.close()

    def test_host_current_and_retained(self):
        r = self.ctx.region("h", policy=cms.Policy.HOST)
        p = r.alloc(MiB)
        data = bytes(range(256)) * (MiB // 256)
        ctypes.memmove(p, data, MiB)  # the simulation's device memory is host memory
        with self.assertRaises(cms.NotPaused):
            self.ctx.backup(p)
        r.pause()
        b = self.ctx.backup(p + 100)
        self.assertEqual((b.base, b.size, b.policy, b.current), (p, MiB, cms.Policy.HOST, True))
        self.assertEqual(ctypes.string_at(b.host, 16), data[:16])
        self.assertEqual(self.ctx.backup_read(p + 100, 50), data[100:150])
        r.resume()
        self.assertFalse(self.ctx.backup(p).current)
        r.set_flags(L.CMS_REGION_RELEASE_HOST, L.CMS_REGION_RELEASE_HOST)
        self.assertEqual(r.info().host_bytes, 0)
        with self.assertRaises(cms.NotPaused):
            self.ctx.backup_read(p, 1)
        with self.assertRaises(cms.InvalidArgument):
            r.set_flags(L.CMS_REGION_GUARD, 0)

    def test_backup_read_returns_bytes_or_fills_out(self):
        # issue 35 item 5: the docs say bytes (as a file's read()); it returned a bytearray.
        # With out=, the bytes are read into the caller's buffer, which is returned (readinto).
        r = self.ctx.region("h", policy=cms.Policy.HOST)
        p = r.alloc(MiB)
        data = bytes(range(256)) * (MiB // 256)
        ctypes.memmove(p, data, MiB)
        r.pause()
        got = self.ctx.backup_read(p + 1, 300)
        self.assertIs(type(got), bytes)
        self.assertEqual(got, data[1:301])
        self.assertEqual(self.ctx.backup_read(p, 0), b"")
        self.assertIs(type(self.ctx.backup_read(p, 0)), bytes)
        out = bytearray(b"x" * 12)
        self.assertIs(self.ctx.backup_read(p + 2, 10, out=out), out)
        self.assertEqual(out, data[2:12] + b"xx")
        view = memoryview(bytearray(8))
        self.assertIs(self.ctx.backup_read(p, 8, out=view), view)
        self.assertEqual(view.tobytes(), data[:8])
        with self.assertRaisesRegex(ValueError, "^out must be a writable buffer of at least 8 bytes"):
            self.ctx.backup_read(p, 8, out=b"12345678")
        with self.assertRaisesRegex(ValueError, "^out must be a writable buffer of at least 8 bytes"):
            self.ctx.backup_read(p, 8, out=bytearray(7))
        # not a buffer, or not a contiguous one: a TypeError naming out (it named memoryview)
        for bad, kind in ((memoryview(bytearray(16))[::2], "memoryview"), (7, "int"), ("abcdefgh", "str")):
            with self.subTest(out=kind):
                with self.assertRaisesRegex(TypeError, f"^out must be a writable contiguous buffer .* {kind}"):
                    self.ctx.backup_read(p, 8, out=bad)

    def test_disk_and_discard(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.ctx.region("d", policy=cms.Policy.DISK, disk_dir=d)
            p = r.alloc(MiB)
            ctypes.memmove(p + 4096, b"cumemsaver", 10)
            r.pause()
            b = self.ctx.backup(p)
            self.assertIsNone(b.host)
            self.assertIs(b.policy, cms.Policy.DISK)
            self.assertEqual(self.ctx.backup_read(p + 4096, 10), b"cumemsaver")
            r.resume()
            r.destroy()
        q = self.ctx.region("x", policy=cms.Policy.DISCARD).alloc(MiB)
        with self.assertRaises(cms.NotSupported):
            self.ctx.backup(q)

    def test_default_region(self):
        r = self.ctx.region("all", policy=cms.Policy.DISCARD)
        with self.ctx.hook_context() as hooks:
            self.assertIsNone(hooks.default_region(0))
            with self.assertRaises(cms.NotFound):
                hooks.alloc(MiB, 0)
            hooks.set_default_region(0, r)
            self.assertEqual(hooks.default_region(0), r)
            p = hooks.alloc(MiB, 0)
            self.assertEqual(self.ctx.pointer_info(p).region, r)
            hooks.free(p)
            hooks.set_default_region(0, None)
            self.assertIsNone(hooks.default_region(0))

    def test_disk_template_gives_its_regions_a_directory(self):
        with tempfile.TemporaryDirectory() as d, self.ctx.hook_context() as hooks:
            with self.assertRaises(cms.InvalidArgument):  # a directory needs Policy.DISK
                cms.hook_region_default_template_set("t", int(cms.Policy.HOST), 0, d)
            with self.assertRaises(cms.NotFound):
                cms.hook_region_default_template_set(
                    "t", int(cms.Policy.DISK), 0, os.path.join(d, "missing")
                )
            cms.hook_region_default_template_set("t", int(cms.Policy.DISK), 0, d)
            p = hooks.alloc(MiB, 0)  # makes region "t" with the directory: it can pause
            ctypes.memmove(p, b"cumemsaver", 10)
            self.assertEqual(self.ctx.pause("t").bytes_backed_up, MiB)
            self.ctx.resume("t")
            self.assertEqual(ctypes.string_at(p, 10), b"cumemsaver")
            hooks.free(p)
            cms.hook_region_default_template_set(None)
            hooks.set_default_region(0, None)


if __name__ == "__main__":
    unittest.main()
