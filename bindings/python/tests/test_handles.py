# SPDX-License-Identifier: MIT
"""Region objects and the life of their native region (issue 34 item 4): one Region object per
native region (find_region, pointer_info, the hooks and Region(ctx, handle) return the one
region() made), and once the region is destroyed, through any of them or by Context.close,
every method raises ValueError without calling the library. A call on a freed cms_region *
is a use-after-free in C (SIGSEGV, or silent corruption), so each such sequence runs in a child
process: a crash fails the test instead of killing the runner.

Needs CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY (the simulation), as test_cumemsaver.py.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402

MiB = 1 << 20
PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(cms.__file__)))

# Every method of a Region that names its handle, as (label, code on r); each must raise
# ValueError on a destroyed region. Run in the child, one after the other, each printing its
# outcome first, so that a crash shows which call reached the library.
CALLS = [
    ("alloc", "r.alloc(4096)"),
    ("free", "r.free(p)"),
    ("pause", "r.pause()"),
    ("resume", "r.resume()"),
    ("set_peer_devices", "r.set_peer_devices([])"),
    ("set_flags", "r.set_flags(cms.REGION_VERIFY, 0)"),
    ("freeze", "r.freeze()"),
    ("thaw", "r.thaw()"),
    ("frozen", "r.frozen"),
    ("set_disk_dir", "r.set_disk_dir(None)"),
    ("info", "r.info()"),
    ("stats", "r.stats()"),
    ("destroy", "r.destroy()"),
    ("hook push", "hooks.hook_region_push(r)"),
    ("hook default", "hooks.hook_region_default_set(0, r)"),
    ("publish", "exp.publish(r)"),
]

CHILD = """
import ctypes, os, sys
import cumemsaver as cms
from cumemsaver import hooks

def try_all(r, p):
    for label, code in CALLS:
        print(label, end=": ", flush=True)
        try:
            eval(code)
            print("no exception")
        except ValueError as e:
            print("ValueError", e)
        except Exception as e:
            print(type(e).__name__, e)
        sys.stdout.flush()

ctx = cms.Context(driver_path=cms.SIMULATION)
hook = ctx.hook_context()
exp = ctx.exporter(os.path.join(TMP, "exporter.sock"))
"""


class ChildCase(unittest.TestCase):
    def run_child(self, body):
        with tempfile.TemporaryDirectory() as tmp:
            code = f"CALLS = {CALLS!r}\nTMP = {tmp!r}\n" + CHILD + textwrap.dedent(body)
            env = dict(os.environ, PYTHONPATH=PKG_DIR, CMS_DRIVER_LIBRARY=SIM)
            out = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
            )
        self.assertEqual(out.returncode, 0, f"the child died (a call reached the library?):\n"
                         f"{out.stdout}\n{out.stderr}")
        return out.stdout.splitlines()

    @staticmethod
    def outcomes(lines):
        """The lines try_all printed, one per call of CALLS."""
        start = next(i for i, line in enumerate(lines) if line.startswith(CALLS[0][0] + ": "))
        return lines[start : start + len(CALLS)]

    def assert_all_refused(self, lines, name):
        got = self.outcomes(lines)
        want = [f"{label}: ValueError cumemsaver region {name} is destroyed" for label, _ in CALLS]
        self.assertEqual(got, want)


class TestDestroyedRegion(ChildCase):
    def test_second_name_destroys_then_first_is_refused(self):
        # ctx.find_region('a').destroy(), then the first object's calls (the attack)
        lines = self.run_child("""
            r = ctx.region("a", policy="host", shareable=True)
            p = r.alloc(1 << 20)
            ctx.find_region("a").destroy()
            print("destroyed:", r.destroyed, repr(r))
            try_all(r, p)
            b = ctx.region("a", policy="host")  # a new region with the tag: a new object
            print("new:", b is not r, ctx.find_region("a") is b, r.destroyed, b.info().tag)
        """)
        self.assert_all_refused(lines, "'a' (device 0)")
        self.assertIn("destroyed: True <cumemsaver.Region 'a' (device 0) destroyed>", lines)
        self.assertEqual(lines[-1], "new: True True True a")

    def test_pointer_info_region_destroys_then_first_is_refused(self):
        lines = self.run_child("""
            r = ctx.region("w", policy="host", shareable=True)
            p = r.alloc(1 << 20)
            ctx.pointer_info(p + 100).region.destroy()
            try_all(r, p)
        """)
        self.assert_all_refused(lines, "'w' (device 0)")

    def test_hook_current_region_destroys_then_first_is_refused(self):
        lines = self.run_child("""
            r = ctx.region("h", policy="host", shareable=True)
            p = r.alloc(1 << 20)
            with hook.push(r):
                hook.current_region().destroy()
            try_all(r, p)
        """)
        self.assert_all_refused(lines, "'h' (device 0)")

    def test_region_of_a_raw_handle_destroys_then_first_is_refused(self):
        lines = self.run_child("""
            r = ctx.region("raw", policy="host", shareable=True)
            p = r.alloc(1 << 20)
            cms.Region(ctx, r.handle).destroy()
            try_all(r, p)
        """)
        self.assert_all_refused(lines, "'raw' (device 0)")

    def test_failed_context_close_refuses_the_regions_it_destroyed(self):
        # cms_context_destroy stops at the first region it cannot destroy (here the second's
        # cuMemRelease fails): the first is freed, the second stays; the context stays open.
        lines = self.run_child("""
            sim = ctypes.CDLL(os.environ["CMS_DRIVER_LIBRARY"])
            sim.cmssim_fail_call.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int]
            r = ctx.region("first", policy="host", shareable=True)
            p = r.alloc(1 << 20)
            second = ctx.region("second", policy="host")
            second.alloc(1 << 20)
            hook.close()
            exp.close()
            assert sim.cmssim_fail_call(b"cuMemRelease", 2, 999) == 0
            try:
                ctx.close()
            except cms.DriverError as e:
                print("close failed:", e.function, ctx.closed, [s.tag for s in ctx.regions()])
            exp = ctx.exporter(os.path.join(TMP, "exporter2.sock"))
            try_all(r, p)
            exp.close()
            print("second:", second.destroyed, second.info().tag, ctx.find_region("second") is second)
            ctx.close()
            print("closed:", ctx.closed, second.destroyed)
        """)
        self.assertIn("close failed: cms_context_destroy False ['second']", lines)
        self.assert_all_refused(lines, "'first' (device 0)")
        self.assertIn("second: False second True", lines)
        self.assertEqual(lines[-1], "closed: True True")

    def test_closed_context_refuses_its_regions(self):
        lines = self.run_child("""
            r = ctx.region("c", policy="host", shareable=True)
            p = r.alloc(1 << 20)
            hook.close()
            exp.close()
            ctx.close()
            print("destroyed:", r.destroyed)
            try_all(r, p)
        """)
        self.assertIn("destroyed: True", lines)
        got = self.outcomes(lines)
        # the context's check comes first for a call that needs it, the region's otherwise
        for line, (label, _) in zip(got, CALLS):
            self.assertRegex(
                line,
                f"^{label}: ValueError cumemsaver (context is closed|region 'c' \\(device 0\\) "
                "is destroyed)$",
            )
        self.assertEqual(len(got), len(CALLS))


class TestOneObjectPerRegion(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.addCleanup(self.ctx.close)

    def test_every_way_to_a_region_gives_the_same_object(self):
        r = self.ctx.region("a", policy="host")
        p = r.alloc(MiB)
        self.assertIs(self.ctx.find_region("a"), r)
        self.assertIs(self.ctx.pointer_info(p + 1).region, r)
        self.assertIs(cms.Region(self.ctx, r.handle), r)
        with self.ctx.hook_context() as hook:
            with hook.push(r):
                self.assertIs(hook.current_region(), r)
            hook.set_default_region(0, r)
            self.assertIs(hook.default_region(0), r)
        self.assertEqual(r, self.ctx.find_region("a"))
        self.assertEqual(len({r, self.ctx.find_region("a")}), 1)

    def test_a_new_region_at_the_same_address_is_a_new_object(self):
        r = self.ctx.region("a")
        handle = r.handle
        r.destroy()
        self.assertIsNone(r.handle)
        others = [self.ctx.region(f"n{i}") for i in range(8)]  # one may reuse the address
        for o in others:
            self.assertIsNot(o, r)
            self.assertFalse(o.destroyed)
        self.assertTrue(r.destroyed)
        reused = [o for o in others if o.handle == handle]  # malloc may give the address again
        for o in reused:
            self.assertIs(self.ctx.find_region(o.info().tag), o)
        with self.assertRaisesRegex(ValueError, "^cumemsaver region 'a' \\(device 0\\) is destroyed$"):
            r.info()

    def test_region_needs_a_context_and_a_handle(self):
        with self.assertRaisesRegex(TypeError, "^context must be a Context"):
            cms.Region(object(), 1)
        with self.assertRaisesRegex(ValueError, "no region handle"):
            cms.Region(self.ctx, 0)
        with self.assertRaisesRegex(TypeError, "^handle must be an integer"):
            cms.Region(self.ctx, "0x10")

    def test_regions_are_not_copied(self):
        import copy
        import pickle

        r = self.ctx.region("a")
        for make in (copy.copy, copy.deepcopy, pickle.dumps):
            with self.subTest(make=make.__name__), self.assertRaises(TypeError):
                make(r)

    def test_failed_disk_dir_destroys_the_region_it_made(self):
        with self.assertRaises(cms.NotFound):
            self.ctx.region("d", policy="disk", disk_dir="/nonexistent/dir")
        self.assertEqual(self.ctx.regions(), [])
        self.assertEqual(dict(self.ctx._regions), {})


class TestDestroyWhileInUse(unittest.TestCase):
    """A destroy() on one thread while another thread is inside a call on the region: the
    destroy waits for that call, and a call that comes meanwhile raises."""

    def test_destroy_waits_for_the_call_in_flight(self):
        ctx = cms.Context(driver_path=SIM)
        self.addCleanup(ctx.close)
        r = ctx.region("a", policy=cms.Policy.HOST)
        r.alloc(MiB)
        inside, release = threading.Event(), threading.Event()

        def progress(op, done, total):
            inside.set()
            release.wait()

        ctx.set_progress(progress)
        results = {}

        def pause():
            results["pause"] = r.pause().regions

        def destroy():
            r.destroy()
            results["destroyed"] = True

        t_pause = threading.Thread(target=pause)
        t_destroy = threading.Thread(target=destroy)
        t_pause.start()
        try:
            inside.wait()  # the pause is in the library, its progress callback blocked
            t_destroy.start()
            while not r._destroying:  # the destroy is waiting for the pause
                threading.Event().wait(0.001)
            with self.assertRaisesRegex(
                ValueError, "^cumemsaver region 'a' \\(device 0\\) is being destroyed$"
            ):
                r.info()
            self.assertNotIn("destroyed", results)
        finally:
            release.set()
            t_pause.join()
            if t_destroy.ident is not None:
                t_destroy.join()
        self.assertEqual(results, {"pause": 1, "destroyed": True})
        self.assertTrue(r.destroyed)
        self.assertEqual(ctx.regions(), [])


if __name__ == "__main__":
    unittest.main()
