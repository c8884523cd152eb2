# SPDX-License-Identifier: MIT
"""Unit tests of the cumemsaver Python package against the host simulation.

Needs CUMEMSAVER_LIBRARY (path to build/libcumemsaver.so.1) and CMS_DRIVER_LIBRARY (path
to build/src/sim/libcumemsaver-sim.so); skipped otherwise. Standard library only.
On the simulation device pointers are host addresses mapped read-write while a region is
active, so ctypes.memmove reads and writes "device" memory.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER_DIR = os.environ.get(
    "CUMEMSAVER_INCLUDE", os.path.join(HERE, os.pardir, os.pardir, os.pardir, "include")
)
MiB = 1 << 20


def write(ptr, data):
    ctypes.memmove(ptr, data, len(data))


def read(ptr, n):
    return ctypes.string_at(ptr, n)


class Base(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.addCleanup(self.ctx.close)


class TestLibrary(unittest.TestCase):
    def test_loaded_from_env(self):
        self.assertEqual(os.path.realpath(L.lib()._name), os.path.realpath(LIB))

    def test_version(self):
        self.assertEqual(cms.version(), "1.3.0")
        self.assertEqual(cms.version_number(), L.CMS_VERSION_NUMBER)
        self.assertEqual(cms.version_string(), "1.3.0")
        self.assertEqual(cms.version_tuple(), (1, 3, 0))
        self.assertEqual(cms.__version__, cms.version_string())

    def test_every_exported_function_declared(self):
        lib = L.lib()
        for name, (restype, argtypes) in L.FUNCTIONS.items():
            fn = getattr(lib, name)
            self.assertIs(fn.restype, restype, name)
            self.assertEqual(list(fn.argtypes), list(argtypes), name)
        nm = shutil.which("nm")
        if nm:
            out = subprocess.run([nm, "-D", "--defined-only", LIB], capture_output=True, text=True)
            exported = {
                line.split()[2].split("@")[0]
                for line in out.stdout.splitlines()
                if len(line.split()) == 3 and line.split()[1] == "T"
            }
            self.assertEqual(exported, set(L.FUNCTIONS))

    def test_status_names(self):
        self.assertEqual(cms.status_name(0), "CMS_OK")
        for status in range(L.CMS_STATUS_MIN, 0):
            name = cms.status_name(status)
            self.assertTrue(name.startswith("CMS_ERR_"), name)
            self.assertEqual(getattr(L, name), status, name)
            self.assertIn(status, cms.ERRORS)
            self.assertTrue(cms.status_string(status))
        self.assertEqual(cms.status_name(-1000), "CMS_ERR_UNKNOWN_STATUS")

    def test_option_inits_match_python_defaults(self):
        lib = L.lib()
        for cls, fn in [
            (L.cms_context_options, "cms_context_options_init"),
            (L.cms_region_options, "cms_region_options_init"),
            (L.cms_pause_options, "cms_pause_options_init"),
            (L.cms_resume_options, "cms_resume_options_init"),
        ]:
            s = cls()
            self.assertEqual(getattr(lib, fn)(ctypes.byref(s)), 0)
            self.assertEqual(s.struct_size, ctypes.sizeof(cls), fn)
        s = L.cms_context_options()
        lib.cms_context_options_init(ctypes.byref(s))
        self.assertEqual(s.log_level, L.CMS_LOG_WARN)
        self.assertEqual(lib.cms_region_options_init(None), L.CMS_ERR_INVALID_ARGUMENT)


class TestStructLayout(unittest.TestCase):
    """Sizes and field offsets of every struct against a C probe compiled from the header."""

    def test_layout_matches_header(self):
        cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("cc")
        header = os.path.join(HEADER_DIR, "cumemsaver.h")
        if not cc or not os.path.exists(header):
            self.skipTest("no C compiler or header")
        lines = []
        for cls in L.STRUCTS:
            n = cls.__name__
            lines.append(f'printf("{n} %zu\\n", sizeof({n}));')
            for f, _ in cls._fields_:
                lines.append(f'printf("{n}.{f} %zu\\n", offsetof({n}, {f}));')
        src = (
            "#include <stddef.h>\n#include <stdio.h>\n#include <cumemsaver.h>\n"
            "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n"
        )
        with tempfile.TemporaryDirectory() as d:
            c = os.path.join(d, "probe.c")
            exe = os.path.join(d, "probe")
            with open(c, "w") as fh:
                fh.write(src)
            subprocess.run([cc, "-I", HEADER_DIR, c, "-o", exe], check=True)
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        want = dict(line.split() for line in out.splitlines())
        for cls in L.STRUCTS:
            n = cls.__name__
            self.assertEqual(ctypes.sizeof(cls), int(want[n]), n)
            self.assertEqual(cls._fields_[0][0], "struct_size", n)
            for f, _ in cls._fields_:
                self.assertEqual(getattr(cls, f).offset, int(want[f"{n}.{f}"]), f"{n}.{f}")


class TestErrors(Base):
    def test_error_carries_status_name_message(self):
        with self.assertRaises(cms.NotFound) as cm:
            self.ctx.find_region("nope")
        e = cm.exception
        self.assertIsInstance(e, cms.CumemsaverError)
        self.assertEqual(e.status, L.CMS_ERR_NOT_FOUND)
        self.assertEqual(e.name, "CMS_ERR_NOT_FOUND")
        self.assertTrue(e.message)
        self.assertEqual(e.message, L.lib().cms_last_error().decode())
        self.assertIn("CMS_ERR_NOT_FOUND", str(e))

    def test_message_is_per_thread(self):
        seen = {}

        def other():
            try:
                self.ctx.region("x" * (L.CMS_TAG_MAX + 1))  # the library's message
            except cms.InvalidArgument as e:
                seen["msg"] = e.message

        with self.assertRaises(cms.NotFound) as cm:
            self.ctx.find_region("nope")
        t = threading.Thread(target=other)
        t.start()
        t.join()
        self.assertTrue(seen["msg"])
        self.assertNotEqual(seen["msg"], cm.exception.message)
        self.assertEqual(cms.last_error_message(), cm.exception.message)

    def test_bad_inputs(self):
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.region("")
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.region("x" * (L.CMS_TAG_MAX + 1))
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.region("bad\ntag")
        with self.assertRaisesRegex(ValueError, "^policy must be a Policy"):
            self.ctx.region("p", policy=77)  # checked in Python (not InvalidArgument)
        with self.assertRaises(ValueError):
            self.ctx.region("nul\0tag")
        r = self.ctx.region("ok")
        with self.assertRaises(cms.Exists):
            self.ctx.region("ok")
        with self.assertRaises(cms.InvalidArgument):
            r.alloc(0)
        with self.assertRaises(ValueError):
            r.alloc(-1)
        with self.assertRaises(ValueError):
            r.alloc(1 << 64)
        self.assertIsNone(self.ctx.free(0))  # since 1.3, as free(NULL): nothing happens
        with self.assertRaises(cms.NotFound):
            self.ctx.free(0x1000)
        with self.assertRaises(cms.InvalidDevice):
            self.ctx.region("dev", device=1000)
        with self.assertRaises(cms.NotFound):
            self.ctx.pause("missing")
        with self.assertRaises(cms.NotFound):
            self.ctx.resume("missing")
        with self.assertRaises(cms.OutOfDeviceMemory):
            r.alloc(1 << 40)  # beyond the simulation's capacity
        p = r.alloc(MiB)
        with self.assertRaises(cms.NotBase):
            self.ctx.free(p + 1)
        self.ctx.free(p)
        with self.assertRaises(cms.NotFound):
            self.ctx.free(p)

    def test_no_driver(self):
        with cms.Context(driver_path="/nonexistent/libcuda.so.1") as ctx:
            with self.assertRaises(cms.NoDriver) as cm:
                ctx.region("r")
            self.assertTrue(cm.exception.message)
            with self.assertRaises(cms.NoDriver):
                ctx.device_memory_info(0)


class TestLifecycle(Base):
    def test_context_manager_and_close(self):
        with cms.Context(driver_path=SIM) as ctx:
            r = ctx.region("a")
            r.alloc(MiB)
        self.assertTrue(ctx.closed)
        ctx.close()  # idempotent
        with self.assertRaises(ValueError):
            ctx.region("b")
        with self.assertRaises(ValueError):
            r.alloc(MiB)

    def test_region_find_info_destroy(self):
        r = self.ctx.region("weights", policy=cms.Policy.HOST, release_host=True)
        self.assertEqual(self.ctx.find_region("weights"), r)
        self.assertEqual(self.ctx.find_region("weights", device=0), r)
        with self.assertRaisesRegex(TypeError, "tag must be a str, not bytes"):
            self.ctx.find_region(b"weights")
        info = r.info()
        self.assertEqual(info.tag, "weights")
        self.assertEqual(info.device, 0)
        self.assertIs(info.policy, cms.Policy.HOST)
        self.assertIs(info.state, cms.State.ACTIVE)
        self.assertEqual(info.flags, L.CMS_REGION_RELEASE_HOST)
        self.assertEqual(info.allocations, 0)
        self.assertEqual(info.epoch, 0)
        self.assertGreater(info.granularity, 0)
        p = r.alloc(3 * MiB + 5)
        info = r.info()
        self.assertEqual(info.allocations, 1)
        self.assertEqual(info.logical_bytes, 3 * MiB + 5)
        self.assertEqual(info.physical_bytes % info.granularity, 0)
        self.assertEqual(info.backed_bytes, info.physical_bytes)
        r.destroy()
        with self.assertRaises(cms.NotFound):
            self.ctx.find_region("weights")
        with self.assertRaises(cms.NotFound):
            self.ctx.pointer_info(p)
        with self.assertRaises(ValueError):
            r.alloc(MiB)

    def test_device_memory_info(self):
        m = self.ctx.device_memory_info(0)
        self.assertGreater(m.total, 0)
        self.assertLessEqual(m.free, m.total)

    def test_log_callback_kept_alive(self):
        lines = []
        ctx = cms.Context(driver_path=SIM, log=lambda lvl, msg: lines.append((lvl, msg)),
                          log_level=cms.LogLevel.DEBUG)
        try:
            import gc

            gc.collect()
            r = ctx.region("logged")
            r.alloc(MiB)
            ctx.pause("logged")
            ctx.resume("logged")
        finally:
            ctx.close()
        self.assertTrue(lines)
        self.assertTrue(all(isinstance(m, str) and m for _, m in lines))
        self.assertTrue(any(lvl == cms.LogLevel.INFO for lvl, _ in lines))

    def test_log_callback_exception_swallowed(self):
        def bad(level, msg):
            raise RuntimeError("boom")

        with cms.Context(driver_path=SIM, log=bad, log_level=cms.LogLevel.DEBUG) as ctx:
            ctx.region("r").alloc(MiB)


class TestPauseResume(Base):
    def test_addresses_kept(self):
        r = self.ctx.region("kv")
        ptrs = [r.alloc(s) for s in (MiB, 5 * MiB, 1)]
        before = [self.ctx.pointer_info(p) for p in ptrs]
        for _ in range(3):
            pr = self.ctx.pause("kv")
            self.assertEqual(pr.regions, 1)
            self.assertEqual(pr.allocations, 3)
            self.assertEqual(pr.bytes_released, r.info().physical_bytes)
            self.assertIs(r.info().state, cms.State.PAUSED)
            self.assertEqual(r.info().backed_bytes, 0)
            info = self.ctx.pointer_info(ptrs[1] + 7)
            self.assertIs(info.state, cms.State.PAUSED)
            rr = self.ctx.resume("kv")
            self.assertEqual(rr.regions, 1)
            self.assertEqual(rr.allocations, 3)
        after = [self.ctx.pointer_info(p) for p in ptrs]
        self.assertEqual(before, after)
        self.assertEqual(r.info().epoch, 3)
        for p, i in zip(ptrs, after):
            self.assertEqual(i.base, p)
            self.assertEqual(i.offset, 0)
            self.assertEqual(i.region, r)
            self.assertIs(i.state, cms.State.ACTIVE)

    def test_coalesce_and_retained_bytes(self):
        for coalesce in (True, False):
            r = self.ctx.region("c%d" % coalesce, coalesce=coalesce)
            self.assertEqual(bool(r.info().flags & L.CMS_REGION_COALESCE), coalesce)
            ptrs = [r.alloc(2 * MiB) for _ in range(4)]
            r.pause()
            r.resume()
            r.free(ptrs[1])  # neighbours live: with coalescing its bytes stay in their handle
            info = r.info()
            self.assertEqual(info.retained_bytes, 2 * MiB if coalesce else 0)
            self.assertEqual(info.backed_bytes, info.physical_bytes)
            pr = r.pause()  # everything goes back, retained bytes too
            self.assertEqual(pr.bytes_released, 3 * 2 * MiB + (2 * MiB if coalesce else 0))
            self.assertEqual(r.info().retained_bytes, 0)
            r.destroy()

    def test_host_content_preserved(self):
        r = self.ctx.region("weights", policy=cms.Policy.HOST)
        p = r.alloc(4 * MiB)
        data = bytes(range(256)) * (4 * MiB // 256)
        write(p, data)
        pr = self.ctx.pause("weights")
        self.assertEqual(pr.bytes_backed_up, 4 * MiB)
        self.assertEqual(r.info().backup_bytes, 4 * MiB)
        rr = self.ctx.resume("weights")
        self.assertEqual(rr.bytes_restored, 4 * MiB)
        self.assertEqual(read(p, len(data)), data)
        # second cycle through the region methods
        r.pause()
        r.resume()
        self.assertEqual(read(p, len(data)), data)
        info = r.info()
        self.assertGreater(info.host_bytes, 0)
        # the kept backup buffer stays page-locked across cycles (since 1.1)
        self.assertEqual(info.pinned_bytes, info.host_bytes)

    def test_zero_policy_zeroes(self):
        r = self.ctx.region("scratch", policy=cms.Policy.ZERO)
        p = r.alloc(2 * MiB)
        write(p, b"\xab" * (2 * MiB))
        self.ctx.pause("scratch")
        self.ctx.resume("scratch")
        self.assertEqual(read(p, 2 * MiB), bytes(2 * MiB))

    def test_double_pause_and_resume(self):
        r = self.ctx.region("a")
        r.alloc(MiB)
        self.ctx.pause("a")
        with self.assertRaises(cms.AlreadyPaused):
            self.ctx.pause("a")
        with self.assertRaises(cms.AlreadyPaused):
            r.pause()
        with self.assertRaises(cms.AlreadyPaused):
            self.ctx.pause()
        with self.assertRaises(cms.RegionPaused):
            r.alloc(MiB)
        self.ctx.resume("a")
        with self.assertRaises(cms.NotPaused):
            self.ctx.resume("a")
        with self.assertRaises(cms.NotPaused):
            r.resume()

    def test_all_tags_and_options(self):
        a = self.ctx.region("a", policy=cms.Policy.HOST)
        b = self.ctx.region("b")
        pa, pb = a.alloc(MiB), b.alloc(MiB)
        write(pa, b"A" * 100)
        pr = self.ctx.pause(no_sync=True)
        self.assertEqual(pr.regions, 2)
        self.assertGreaterEqual(pr.elapsed_ns, 0)
        self.ctx.resume()
        self.assertEqual(read(pa, 100), b"A" * 100)
        pr = self.ctx.pause(stream=0, event=0)
        self.assertEqual(pr.regions, 2)
        self.ctx.resume()
        self.assertEqual(self.ctx.pointer_info(pb).base, pb)

    def test_async_resume(self):
        r = self.ctx.region("w", policy=cms.Policy.HOST)
        p = r.alloc(MiB)
        write(p, b"xyz" * 1000)
        self.ctx.pause("w")
        rr = self.ctx.resume("w", async_stream=0)
        self.assertEqual(rr.regions, 1)
        r.pause()
        r.resume(async_stream=0)
        info = r.info()
        self.assertIs(info.state, cms.State.ACTIVE)
        self.assertIsInstance(info.restore_pending, bool)
        # no host wait was done by the library: pause (which syncs) settles the restore
        self.ctx.pause("w")
        self.ctx.resume("w")
        self.assertEqual(read(p, 3000), b"xyz" * 1000)
        # async resume is refused with RELEASE_HOST
        h = self.ctx.region("h", policy=cms.Policy.HOST, release_host=True)
        h.alloc(MiB)
        h.pause()
        with self.assertRaises(cms.InvalidArgument):
            h.resume(async_stream=0)
        h.resume()

    def test_64bit_pointers_round_trip(self):
        r = self.ctx.region("big")
        p = r.alloc(MiB)
        self.assertGreater(p, 0xFFFFFFFF)  # host addresses on 64-bit Linux
        info = self.ctx.pointer_info(p + MiB - 1)
        self.assertEqual(info.base, p)
        self.assertEqual(info.offset, MiB - 1)
        # High bits must reach C intact.
        # the same low 32 bits as p (a truncating binding would find p), bit 63 set, all ones
        for bad in (p ^ (1 << 40), p | (1 << 63), (1 << 64) - 1):
            with self.assertRaises(cms.NotFound):
                self.ctx.pointer_info(bad)
            with self.assertRaises(cms.NotFound):
                self.ctx.free(bad)
        with self.assertRaises(ValueError):
            self.ctx.pointer_info(1 << 64)
        # struct fields keep 64 bits
        o = L.cms_pause_options(ctypes.sizeof(L.cms_pause_options), (1 << 64) - 1, 1 << 63, 0)
        self.assertEqual((o.stream, o.event), ((1 << 64) - 1, 1 << 63))
        self.ctx.free(p)


if __name__ == "__main__":
    unittest.main(verbosity=2)
