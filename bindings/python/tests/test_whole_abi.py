# SPDX-License-Identifier: MIT
"""The idiomatic layer over the whole 1.1 ABI, on the host simulation: exceptions of every
status, swap, progress, DISK, the logging bridge, hooks, IPC export/import between two
processes, and the control socket driven by cmsctl.

Needs CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY (as test_cumemsaver.py). cmsctl is
$CMS_CMSCTL, else bin/cmsctl next to the library (build/bin/cmsctl), else cmsctl on PATH.
"""

import ctypes
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402

MiB = 1 << 20
PACKAGE_DIR = os.path.dirname(os.path.abspath(cms.__file__))


def write(ptr, data):
    ctypes.memmove(ptr, data, len(data))


def read(ptr, n):
    return ctypes.string_at(ptr, n)


def pattern(n, seed):
    period = bytes((i * 7 + seed) & 0xFF for i in range(251))  # a prime: no page alignment
    return (period * (n // len(period) + 1))[:n]


def cmsctl_path():
    env = os.environ.get("CMS_CMSCTL")
    if env:
        return env
    beside = os.path.join(os.path.dirname(os.path.abspath(LIB)), "bin", "cmsctl")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("cmsctl")


class Base(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.addCleanup(self.ctx.close)
        tmp = tempfile.TemporaryDirectory(prefix="cms-py-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name


class TestPackage(unittest.TestCase):
    def test_every_status_has_an_importable_exception(self):
        import cumemsaver

        for status in range(L.CMS_STATUS_MIN, 0):
            cls = cms.ERRORS[status]
            self.assertIs(getattr(cumemsaver, cls.__name__), cls, status)
            self.assertTrue(issubclass(cls, cms.CumemsaverError))
            self.assertEqual(cls.status, status)
            e = cls(message="why")
            self.assertEqual((e.status, e.name), (status, cms.status_name(status)))
            self.assertIn("why", str(e))
        self.assertEqual(len(set(cms.ERRORS.values())), -L.CMS_STATUS_MIN)
        from cumemsaver import IOFailure, Refused, RollbackFailed  # noqa: F401

    def test_py_typed_is_package_data(self):
        self.assertTrue(os.path.isfile(os.path.join(PACKAGE_DIR, "py.typed")))
        # the build backend packs it (test_packaging checks an installed package has it)
        sys.path.insert(0, os.path.join(PACKAGE_DIR, os.pardir))
        try:
            import cumemsaver_build
        finally:
            sys.path.pop(0)
        names = [n for n, _ in cumemsaver_build.package_files(os.path.join(PACKAGE_DIR, os.pardir))]
        self.assertIn("cumemsaver/py.typed", names)

    def test_every_abi_function_reached_by_the_idiomatic_layer(self):
        # Each C function name must appear in the hand-written modules (api, ipc, hooks),
        # apart from the *_options_init ones (the Python defaults come from init_struct).
        text = ""
        for name in ("api.py", "ipc.py", "hooks.py"):
            with open(os.path.join(PACKAGE_DIR, name)) as f:
                text += f.read()
        missing = [
            fn
            for fn in L.FUNCTIONS
            if not fn.endswith("_options_init") and f'"{fn}"' not in text and f".{fn}(" not in text
        ]
        self.assertEqual(missing, [])


class TestRegionContextManager(Base):
    def test_with_region_destroys_it(self):
        with self.ctx.region("scoped", policy=cms.Policy.HOST) as r:
            r.alloc(MiB)
            self.assertEqual(self.ctx.find_region("scoped"), r)
        with self.assertRaises(cms.NotFound):
            self.ctx.find_region("scoped")
        with self.assertRaises(ValueError):
            r.info()
        with self.ctx.region("gone") as g:
            g.destroy()  # already destroyed inside: leaving the block does nothing more


class TestLogging(Base):
    def test_logging_bridge(self):
        with self.assertLogs("cumemsaver", level="DEBUG") as logs:
            with cms.Context(driver_path=SIM, log="logging", log_level=cms.LogLevel.DEBUG) as c:
                c.region("logged")
        self.assertTrue(any('region "logged" created' in line for line in logs.output), logs)
        self.assertTrue(all(r.name == "cumemsaver" for r in logs.records))

    def test_logging_level_follows_the_logger(self):
        # log="logging" without log_level asks the library only for what the logger emits
        # now: record what reaches the bridge (before the logger's own filtering).
        from cumemsaver import api

        log = logging.getLogger("cumemsaver")
        self.addCleanup(log.setLevel, log.level)
        self.addCleanup(setattr, api, "log_to_logging", api.log_to_logging)
        seen = []
        api.log_to_logging = lambda level, message: seen.append((level, message))
        log.setLevel(logging.ERROR)
        with cms.Context(driver_path=SIM, log="logging") as c:
            c.region("quiet")
        self.assertEqual(seen, [])
        log.setLevel(logging.DEBUG)
        with cms.Context(driver_path=SIM, log="logging") as c:
            c.region("loud")
        self.assertIn(cms.LogLevel.DEBUG, [level for level, _ in seen])
        with self.assertRaises(ValueError):
            cms.Context(driver_path=SIM, log="stderr")


class TestSwapProgress(Base):
    def test_swap_with_progress(self):
        a = self.ctx.region("swap-a", policy=cms.Policy.HOST)
        b = self.ctx.region("swap-b", policy=cms.Policy.HOST, coalesce=True)
        pa, pb = a.alloc(2 * MiB), b.alloc(3 * MiB)
        write(pa, pattern(2 * MiB, 1))
        write(pb, pattern(3 * MiB, 2))
        calls = []
        self.ctx.set_progress(lambda op, done, total: calls.append((op, done, total)))
        self.ctx.pause("swap-b")
        self.assertEqual(calls[-1], ("pause", 3 * MiB, 3 * MiB))
        calls.clear()
        paused, resumed = self.ctx.swap("swap-a", "swap-b")
        self.assertIsInstance(paused, cms.PauseResult)
        self.assertEqual((paused.regions, paused.bytes_backed_up), (1, 2 * MiB))
        self.assertEqual((resumed.regions, resumed.bytes_restored), (1, 3 * MiB))
        self.assertTrue(a.info().paused)
        self.assertFalse(b.info().paused)
        self.assertEqual(read(pb, 3 * MiB), pattern(3 * MiB, 2))
        self.assertTrue(calls and all(op == "swap" for op, _, _ in calls), calls)
        self.assertEqual(calls[-1][1:], (5 * MiB, 5 * MiB))
        self.assertEqual([d for _, d, _ in calls], sorted(d for _, d, _ in calls))
        self.ctx.set_progress(None)
        calls.clear()
        self.ctx.swap("swap-b", "swap-a")
        self.assertEqual(calls, [])
        self.assertEqual(read(pa, 2 * MiB), pattern(2 * MiB, 1))
        with self.assertRaises(cms.InvalidArgument):
            self.ctx.swap("swap-a", "swap-a")
        with self.assertRaises(cms.NotFound):
            self.ctx.swap("swap-a", "nowhere")

    def test_progress_exception_stays_in_python(self):
        r = self.ctx.region("raiser", policy=cms.Policy.HOST)
        p = r.alloc(MiB)
        write(p, pattern(MiB, 5))

        def boom(op, done, total):
            raise RuntimeError(f"boom {op}")

        self.ctx.set_progress(boom)
        with self.assertLogs("cumemsaver", level="ERROR") as logs:
            res = self.ctx.pause("raiser")
            self.ctx.resume("raiser")
        self.assertEqual(res.bytes_backed_up, MiB)
        self.assertEqual(read(p, MiB), pattern(MiB, 5))
        self.assertTrue(any("boom pause" in line for line in logs.output), logs.output)
        self.assertTrue(any("boom resume" in line for line in logs.output), logs.output)


class TestDisk(Base):
    def test_disk_region_round_trip(self):
        r = self.ctx.region("disk", policy=cms.Policy.DISK)
        p = r.alloc(2 * MiB)
        write(p, pattern(2 * MiB, 9))
        with self.assertRaises(cms.InvalidArgument):  # no directory yet
            r.pause()
        r.set_disk_dir(self.tmp)
        res = r.pause()
        self.assertEqual(res.bytes_released, 2 * MiB)
        self.assertTrue(r.info().paused)
        with self.assertRaises(cms.RegionPaused):
            r.set_disk_dir(self.tmp)
        self.assertEqual(os.listdir(self.tmp), [])  # the file is unlinked at once
        r.resume()
        self.assertEqual(read(p, 2 * MiB), pattern(2 * MiB, 9))
        r.set_disk_dir(None)
        with self.assertRaises(cms.InvalidArgument):
            r.pause()

    def test_disk_dir_at_creation(self):
        r = self.ctx.region("disk2", policy=cms.Policy.DISK, disk_dir=self.tmp)
        p = r.alloc(MiB)
        write(p, pattern(MiB, 3))
        self.ctx.pause("disk2")
        self.ctx.resume("disk2")
        self.assertEqual(read(p, MiB), pattern(MiB, 3))
        missing = os.path.join(self.tmp, "missing")
        with self.assertRaises(cms.NotFound):
            self.ctx.region("disk3", policy=cms.Policy.DISK, disk_dir=missing)
        with self.assertRaises(cms.NotFound):  # destroyed again
            self.ctx.find_region("disk3")
        host = self.ctx.region("host", policy=cms.Policy.HOST)
        with self.assertRaises(cms.InvalidArgument):
            host.set_disk_dir(self.tmp)


class TestHooks(Base):
    def test_hook_context_and_region_stack(self):
        r = self.ctx.region("hooked")
        with self.ctx.hook_context() as hooks:
            self.assertIsNone(hooks.current_region())
            with self.assertRaises(cms.NotFound):
                hooks.alloc(MiB)
            with hooks.push(r):
                self.assertEqual(hooks.current_region(), r)
                p = hooks.alloc(MiB, device=0)
                self.assertEqual(self.ctx.pointer_info(p).region, r)
                t = cms.torch_alloc(MiB, 0)
                self.assertEqual(r.info().allocations, 2)
            self.assertIsNone(cms.hook_region_current())
            self.assertEqual(cms.torch_alloc(MiB, 0), 0)  # no region active
            hooks.free(p)
            cms.torch_free(t)
            self.assertEqual(r.info().allocations, 0)
            with self.assertRaises(cms.NotFound):
                cms.hook_free(0x1000)
            with self.assertRaises(cms.NotFound):
                cms.hook_region_pop()
        self.assertTrue(hooks.closed)
        with self.assertRaises(cms.InvalidArgument):  # no hook context any more
            cms.hook_region_push(r)

    def test_closing_a_replaced_hook_context_keeps_the_newer_one(self):
        other = cms.Context(driver_path=SIM)
        self.addCleanup(other.close)
        r = other.region("newer")
        first = self.ctx.hook_context()
        with other.hook_context() as second:
            first.close()  # replaced already: must not clear the newer one
            with second.push(r):
                p = second.alloc(MiB)
            second.free(p)
        with self.assertRaises(cms.InvalidArgument):  # cleared by second.close()
            cms.hook_region_push(r)


# The importing process of TestIpc: reads commands on stdin, answers on stdout.
CHILD = r"""
import ctypes, sys, threading
import cumemsaver as cms
path, tag, sim = sys.argv[1:4]
events, remapped, refuse = [], threading.Event(), [False]
def on_event(ev, epoch):
    events.append(ev.name)
    if ev == cms.ImportEvent.REMAPPED:
        remapped.set()
def on_quiesce(epoch):
    events.append("quiesce")
    return not refuse[0]
with cms.Context(driver_path=sim) as ctx:
    with ctx.open_import(path, tag, on_quiesce=on_quiesce, on_event=on_event,
                         name="py-child", timeout_ms=10000) as imp:
        info = imp.info()
        (ptr, size), = imp.allocs()
        head = ctypes.string_at(ptr, 16).hex()
        ctypes.memmove(ptr, b"child", 5)
        print("mapped", info.state.name, info.access.name, info.allocations, size, head,
              imp.translate(int(sys.argv[4]) + 5) - ptr, flush=True)
        for line in sys.stdin:
            cmd = line.split()[0]
            if cmd == "check":
                ok = remapped.wait(10)
                print("remapped", ok, ",".join(events), imp.info().state.name,
                      ctypes.string_at(ptr, 16).hex(), flush=True)
            elif cmd == "refuse":
                refuse[0] = True
                print("ok", flush=True)
            elif cmd == "quit":
                break
print("closed", flush=True)
"""


class TestIpc(Base):
    def test_export_import_between_processes(self):
        r = self.ctx.region("shared", policy=cms.Policy.HOST, shareable=True)
        p = r.alloc(2 * MiB)
        data = pattern(2 * MiB, 11)
        write(p, data)
        path = os.path.join(self.tmp, "exp.sock")
        exp = self.ctx.exporter(path, revoke_timeout_ms=10000)
        exp.publish(r, cms.Access.READWRITE)
        with self.assertRaises(cms.Exists):
            exp.publish(r)
        plain = self.ctx.region("plain")
        with self.assertRaises(cms.InvalidArgument):
            exp.publish(plain)
        env = dict(os.environ, PYTHONPATH=os.path.dirname(PACKAGE_DIR))
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, "shared", SIM, str(p)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.addCleanup(child.stdout.close)
        self.addCleanup(child.stdin.close)
        self.addCleanup(child.kill)

        def ask(cmd=None):
            if cmd:
                child.stdin.write(cmd + "\n")
                child.stdin.flush()
            line = child.stdout.readline().split()
            self.assertTrue(line, "the child exited")
            return line

        mapped = ask()
        self.assertEqual(mapped[:5], ["mapped", "MAPPED", "READWRITE", "1", str(2 * MiB)])
        self.assertEqual(mapped[5], data[:16].hex())
        self.assertEqual(mapped[6], "5")  # translate(p + 5) - local base
        self.assertEqual(read(p, 5), b"child")  # the child wrote through its mapping
        self.assertEqual(exp.importers(), 1)

        self.ctx.pause("shared")  # the child consents (quiesce), then its mapping is revoked
        self.ctx.resume("shared")
        remapped = ask("check")
        self.assertEqual(remapped[1], "True")
        self.assertEqual(remapped[2].split(","), ["quiesce", "REVOKED", "REMAPPED"])
        self.assertEqual(remapped[3], "MAPPED")
        self.assertEqual(remapped[4], (b"child" + data[5:16]).hex())

        self.assertEqual(ask("refuse"), ["ok"])
        with self.assertRaises(cms.Refused):
            self.ctx.pause("shared")
        self.assertFalse(r.info().paused)

        child.stdin.write("quit\n")
        child.stdin.flush()
        self.assertEqual(ask(), ["closed"])
        self.assertEqual(child.wait(30), 0)
        deadline = time.monotonic() + 10
        while exp.importers() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(exp.importers(), 0)
        with self.assertRaises(cms.NotFound):  # nobody listens there once closed
            with exp:
                pass
            self.ctx.open_import(path, "shared", timeout_ms=1000)
        self.assertTrue(exp.closed)
        exp.close()  # idempotent

    def test_context_close_closes_its_exporters(self):
        ctx = cms.Context(driver_path=SIM)
        exp = ctx.exporter(os.path.join(self.tmp, "x.sock"))
        with self.assertRaises(cms.Exists):
            ctx.exporter(os.path.join(self.tmp, "x.sock"))
        ctx.close()
        self.assertTrue(exp.closed)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x.sock")))
        with self.assertRaises(ValueError):
            exp.importers()


@unittest.skipUnless(cmsctl_path(), "no cmsctl (set CMS_CMSCTL)")
class TestControlSocket(Base):
    def cmsctl(self, *args):
        out = subprocess.run(
            [cmsctl_path(), "--socket", self.path, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return out.returncode, out.stdout

    def test_cmsctl_drives_the_handler(self):
        r = self.ctx.region("ctl-w", policy=cms.Policy.HOST)
        p = r.alloc(2 * MiB)
        write(p, pattern(2 * MiB, 4))
        self.path = os.path.join(self.tmp, "ctl.sock")
        seen, refuse = [], threading.Event()

        def handler(req):
            seen.append(req)
            if req.phase == cms.ControlPhase.BEFORE and refuse.is_set():
                raise cms.Refused

        with self.ctx.control_socket(self.path, handler) as ctl:
            rc, out = self.cmsctl("status")
            self.assertEqual(rc, 0, out)
            self.assertIn("ctl-w", out)
            self.assertIn("active", out)
            rc, out = self.cmsctl("--json", "pause", "ctl-w")
            self.assertEqual((rc, json.loads(out)["status"]), (0, "CMS_OK"), out)
            self.assertTrue(r.info().paused)
            self.assertEqual(len(seen), 2, seen)
            before, after = seen
            self.assertEqual(before.op, cms.ControlOp.PAUSE)
            self.assertEqual((before.phase, before.tag), (cms.ControlPhase.BEFORE, "ctl-w"))
            self.assertEqual((after.phase, after.result), (cms.ControlPhase.AFTER, 0))
            self.assertEqual(before.peer_uid, os.getuid())
            self.assertGreater(before.peer_pid, 0)
            rc, out = self.cmsctl("resume", "ctl-w")
            self.assertEqual(rc, 0, out)
            self.assertEqual(read(p, 2 * MiB), pattern(2 * MiB, 4))
            refuse.set()
            rc, out = self.cmsctl("--json", "pause", "ctl-w")
            self.assertNotEqual(rc, 0)
            self.assertEqual(json.loads(out)["status"], "CMS_ERR_REFUSED", out)
            self.assertFalse(r.info().paused)
        self.assertTrue(ctl.closed)
        self.assertFalse(os.path.exists(self.path))

    def test_handler_return_values_and_status_only(self):
        self.ctx.region("ctl-x")
        self.path = os.path.join(self.tmp, "ctl2.sock")

        def handler(req):
            if req.phase == cms.ControlPhase.BEFORE:
                raise KeyError("a bug in the handler")

        with self.assertLogs("cumemsaver", level="ERROR"):
            with self.ctx.control_socket(self.path, handler):
                rc, out = self.cmsctl("--json", "pause", "ctl-x")
        self.assertEqual(json.loads(out)["status"], "CMS_ERR_INTERNAL", out)
        with self.ctx.control_socket(self.path, lambda req: False):
            rc, out = self.cmsctl("--json", "pause", "ctl-x")
        self.assertEqual(json.loads(out)["status"], "CMS_ERR_REFUSED", out)
        with self.ctx.control_socket(self.path):  # no handler: status only
            self.assertEqual(self.cmsctl("status")[0], 0)
            rc, out = self.cmsctl("--json", "pause", "ctl-x")
            self.assertNotEqual(rc, 0)
        with self.ctx.control_socket(self.path, allow_all=True):
            rc, out = self.cmsctl("--json", "pause", "ctl-x")
            self.assertEqual(json.loads(out)["status"], "CMS_OK", out)


if __name__ == "__main__":
    unittest.main()
