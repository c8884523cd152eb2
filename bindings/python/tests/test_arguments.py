# SPDX-License-Identifier: MIT
"""Argument types of the Python API (issue 28): sizes, devices, pointers and flags go through
operator.index (no bool, float or str), policies are a Policy, its name in any case or its
number, tags are str only; a wrong type raises TypeError and a bad value ValueError, each
naming the parameter, before the library is called. Also version() as a string and the
PyTorch modules' error without torch.

Needs CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY (the simulation), as test_cumemsaver.py.
"""

import os
import subprocess
import sys
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402
from cumemsaver import hooks  # noqa: E402

MiB = 1 << 20
PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(cms.__file__)))


class Index:
    """An integer type that is not int (numpy's integers are such): accepted via __index__."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


class Base(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.addCleanup(self.ctx.close)


class TestTags(Base):
    def test_tag_must_be_str(self):
        for bad in (123, [104, 105], b"hi", bytearray(b"hi"), 1.5, None):
            with self.subTest(tag=bad):
                with self.assertRaisesRegex(TypeError, "^tag must be a str, not "):
                    self.ctx.region(bad)
        self.assertEqual(self.ctx.regions(), [])  # nothing was created ("hi" from [104, 105])

    def test_tag_type_named_in_every_call(self):
        self.ctx.region("a")
        with self.assertRaisesRegex(TypeError, "^tag must be a str, not int"):
            self.ctx.pause(7)
        with self.assertRaisesRegex(TypeError, "^tag must be a str, not bytes"):
            self.ctx.resume(b"a")
        with self.assertRaisesRegex(TypeError, "^tag must be a str, not int"):
            self.ctx.find_region(1)
        with self.assertRaisesRegex(TypeError, "^pause_tag must be a str, not int"):
            self.ctx.swap(1, "a")
        with self.assertRaisesRegex(TypeError, "^resume_tag must be a str, not bytes"):
            self.ctx.swap("a", b"a")
        with self.assertRaisesRegex(TypeError, "^tag must be a str, not bytes"):
            hooks.hook_region_default_template_set(b"t")

    def test_nul_byte_is_a_value_error(self):
        with self.assertRaisesRegex(ValueError, "^tag contains a NUL byte"):
            self.ctx.region("a\0b")

    def test_str_tags_work(self):
        r = self.ctx.region("wéights")
        self.assertEqual(r.info().tag, "wéights")
        self.assertEqual(self.ctx.find_region("wéights"), r)


class TestIntegers(Base):
    def test_size_rejects_float_bool_str(self):
        r = self.ctx.region("a")
        for bad, name in ((1.9, "float"), (True, "bool"), ("4096", "str"), (None, "NoneType")):
            with self.subTest(size=bad):
                with self.assertRaisesRegex(TypeError, f"^size must be an integer, not {name}$"):
                    r.alloc(bad)
        self.assertEqual(r.info().allocations, 0)

    def test_size_out_of_range_is_a_value_error(self):
        r = self.ctx.region("a")
        with self.assertRaisesRegex(ValueError, "^size must fit in 64 unsigned bits, got -1"):
            r.alloc(-1)
        with self.assertRaisesRegex(ValueError, "^size must fit"):
            r.alloc(1 << 64)

    def test_index_types_accepted(self):
        r = self.ctx.region("a", device=Index(0))
        p = r.alloc(Index(MiB))
        self.assertEqual(self.ctx.pointer_info(Index(p)).size, MiB)
        self.ctx.free(Index(p))

    def test_device_flags_pointer_stream(self):
        with self.assertRaisesRegex(TypeError, "^device must be an integer, not str"):
            self.ctx.region("a", device="0")
        with self.assertRaisesRegex(TypeError, "^device must be an integer, not float"):
            self.ctx.region("a", device=0.0)
        with self.assertRaisesRegex(ValueError, "^device must fit in int32"):
            self.ctx.region("a", device=1 << 31)
        with self.assertRaisesRegex(TypeError, "^flags must be an integer, not bool"):
            self.ctx.region("a", flags=True)
        with self.assertRaisesRegex(TypeError, "^ptr must be an integer, not float"):
            self.ctx.free(4096.0)
        with self.assertRaisesRegex(TypeError, "^stream must be an integer, not str"):
            self.ctx.pause("a", stream="0")
        with self.assertRaisesRegex(TypeError, "^device must be an integer, not str"):
            self.ctx.device_memory_info("0")
        with self.assertRaisesRegex(TypeError, "^size must be an integer, not float"):
            hooks.torch_alloc(1.0, 0)
        self.assertEqual(self.ctx.regions(), [])

    def test_peer_devices(self):
        r = self.ctx.region("a")
        with self.assertRaisesRegex(TypeError, "^devices must be an integer, not bool"):
            r.set_peer_devices(True)
        with self.assertRaisesRegex(TypeError, "^devices must be an integer, not float"):
            r.set_peer_devices([1.0])
        with self.assertRaisesRegex(ValueError, "^devices must fit in a device ordinal"):
            r.set_peer_devices([64])
        with self.assertRaisesRegex(TypeError, "^devices must be an integer, not str"):
            r.set_peer_devices("1")
        r.set_peer_devices([])  # only its own device

    def test_paths(self):
        with self.assertRaisesRegex(TypeError, "^disk_dir must be a str, bytes or os.PathLike, not int"):
            self.ctx.region("d", policy="disk", disk_dir=3)
        with self.assertRaisesRegex(TypeError, "^driver_path must be a str, bytes or os.PathLike"):
            cms.Context(driver_path=1)


class TestPolicies(Base):
    def test_names_any_case(self):
        for name, policy in (("host", cms.Policy.HOST), ("ZERO", cms.Policy.ZERO),
                             ("Discard", cms.Policy.DISCARD), ("disk", cms.Policy.DISK)):
            with self.subTest(policy=name):
                r = self.ctx.region(name, policy=name)
                self.assertIs(r.info().policy, policy)

    def test_enum_and_number(self):
        self.assertIs(self.ctx.region("a", policy=cms.Policy.HOST).info().policy, cms.Policy.HOST)
        self.assertIs(self.ctx.region("b", policy=L.CMS_POLICY_ZERO).info().policy, cms.Policy.ZERO)

    def test_bad_policy(self):
        with self.assertRaisesRegex(
            ValueError, "^policy must be a Policy or one of 'discard', 'zero', 'host', 'disk', not 'hots'$"
        ):
            self.ctx.region("a", policy="hots")
        for bad, name in ((2.0, "float"), (True, "bool"), (None, "NoneType")):
            with self.subTest(policy=bad):
                with self.assertRaisesRegex(TypeError, f"^policy must be an integer, not {name}$"):
                    self.ctx.region("a", policy=bad)
        with self.assertRaisesRegex(ValueError, "^policy must be a Policy or one of"):
            hooks.hook_region_default_template_set("t", policy="pinned")
        self.assertEqual(self.ctx.regions(), [])


class TestEnumNumbers(Base):
    """An enumeration number this module does not know raises ValueError before the library
    is called (issue 35 item 5: policy=7 reached C, which raised InvalidArgument)."""

    def assert_refused_here(self, cm, pattern):
        self.assertRegex(str(cm.exception), pattern)
        self.assertNotIsInstance(cm.exception, cms.CumemsaverError)  # not the library's

    def test_unknown_policy_number(self):
        for bad in (4, 7, 77, -1, 1 << 32):
            with self.subTest(policy=bad):
                with self.assertRaises(ValueError) as cm:
                    self.ctx.region("a", policy=bad)
                self.assert_refused_here(
                    cm,
                    "^policy must be a Policy or one of 'discard', 'zero', 'host', 'disk' "
                    rf"\(0, 1, 2, 3\), not {bad}$",
                )
        with self.assertRaises(ValueError) as cm:
            hooks.hook_region_default_template_set("t", policy=7)
        self.assert_refused_here(cm, "^policy must be a Policy or one of")
        self.assertEqual(self.ctx.regions(), [])

    def test_unknown_log_level_and_access(self):
        with self.assertRaises(ValueError) as cm:
            cms.Context(driver_path=SIM, log_level=9)
        self.assert_refused_here(cm, "^log_level must be a LogLevel or one of 'error', 'warn'")
        with cms.Context(driver_path=SIM, log_level="debug") as ctx:  # a name is fine
            ctx.region("a")
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            with self.ctx.exporter(os.path.join(tmp, "s")) as exp:
                r = self.ctx.region("a", shareable=True)
                with self.assertRaises(ValueError) as cm:
                    exp.publish(r, access=5)
                self.assert_refused_here(cm, "^access must be an Access or one of 'read'")


class TestBooleans(Base):
    """Switches take True or False only (issue 34 item 4: prepare='no' and verify=2.5
    switched the flags on)."""

    BAD = (("no", "str"), (2.5, "float"), (1, "int"), (0, "int"), (None, "NoneType"))

    def assert_bool_only(self, what, call):
        for bad, name in self.BAD:
            with self.subTest(keyword=what, value=bad):
                with self.assertRaisesRegex(TypeError, f"^{what} must be a bool, not {name}$"):
                    call(bad)

    def test_region_switches(self):
        for kw in ("release_host", "coalesce", "shareable", "prepare", "verify"):
            self.assert_bool_only(kw, lambda v: self.ctx.region("a", policy="host", **{kw: v}))
        self.assertEqual(self.ctx.regions(), [])
        r = self.ctx.region("a", policy="host", prepare=True, verify=False)
        self.assertEqual(r.info().flags & (cms.REGION_PREPARE | cms.REGION_VERIFY), cms.REGION_PREPARE)

    def test_pause_swap_ipc_switches(self):
        r = self.ctx.region("a")
        self.ctx.region("b")
        r.alloc(MiB)
        self.assert_bool_only("no_sync", lambda v: self.ctx.pause("a", no_sync=v))
        self.assert_bool_only("no_sync", lambda v: r.pause(no_sync=v))
        self.assert_bool_only("no_sync", lambda v: self.ctx.swap("a", "b", no_sync=v))
        self.assertFalse(r.info().paused)
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s")
            self.assert_bool_only("read_only", lambda v: self.ctx.open_import(path, "a", read_only=v))
            self.assert_bool_only("allow_all", lambda v: self.ctx.control_socket(path, allow_all=v))
            self.assertEqual(os.listdir(tmp), [])

    def test_distributed_switches(self):
        from cumemsaver import distributed

        for kw in ("rollback", "barrier"):
            self.assert_bool_only(
                kw, lambda v: distributed.Coordinator(self.ctx, dist=object(), torch=object(), **{kw: v})
            )


class TestCallbacks(Base):
    def test_progress_callback_must_be_callable(self):
        # it was accepted and failed at each pause, logged, the pause going on
        for bad in (5, "abc", b"fn", 1.5):
            with self.subTest(fn=bad):
                with self.assertRaisesRegex(TypeError, f"^fn must be a callable or None, not {type(bad).__name__}"):
                    self.ctx.set_progress(bad)
        calls = []
        self.ctx.set_progress(lambda op, done, total: calls.append(op))
        with self.assertRaises(TypeError):
            self.ctx.set_progress(5)  # refused before the library is called: the callback stays
        r = self.ctx.region("p", policy=cms.Policy.HOST)
        r.alloc(MiB)
        r.pause()
        self.assertIn("pause", calls)
        self.ctx.set_progress(None)

    def test_other_callbacks_must_be_callable(self):
        # Context(log=5), control_socket(handler=5) and open_import(on_quiesce=5 / on_event=5)
        # were accepted and failed only when the library called them, each time, logged
        import tempfile

        for bad in (5, b"fn", 1.5):
            name = type(bad).__name__
            with self.subTest(log=bad):
                with self.assertRaisesRegex(TypeError, f"^log must be a callable, \"logging\" or None, not {name}"):
                    cms.Context(log=bad)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "s")
                for kw in ("on_quiesce", "on_event"):
                    with self.subTest(keyword=kw, value=bad):
                        with self.assertRaisesRegex(TypeError, f"^{kw} must be a callable or None, not {name}$"):
                            self.ctx.open_import(path, "a", **{kw: bad})
                with self.subTest(handler=bad):
                    with self.assertRaisesRegex(TypeError, f"^handler must be a callable or None, not {name}$"):
                        self.ctx.control_socket(path, handler=bad)
                self.assertEqual(os.listdir(tmp), [])


class TestVersion(unittest.TestCase):
    def test_version_is_the_string(self):
        self.assertIsInstance(cms.version(), str)
        self.assertEqual(cms.version(), cms.version_string())
        self.assertEqual(cms.version(), ".".join(map(str, cms.version_tuple())))
        self.assertEqual(cms.version_number(), L.lib().cms_version())


class TestWithoutTorch(unittest.TestCase):
    def run_without_torch(self, module):
        code = (
            "import sys; sys.modules['torch'] = None\n"  # as if torch were not installed
            f"sys.path.insert(0, {PKG_DIR!r})\n"
            "import cumemsaver\n"
            "try:\n"
            f"    import {module}\n"
            "except ImportError as e:\n"
            "    print(type(e).__name__, isinstance(e, cumemsaver.NeedsPyTorch), e.name, e)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.strip()

    def test_drop_in_needs_pytorch(self):
        out = self.run_without_torch("cumemsaver.torch_memory_saver")
        self.assertTrue(out.startswith("NeedsPyTorch True torch cumemsaver.torch_memory_saver "
                                       "needs PyTorch: `import torch` failed"), out)

    def test_torch_module_needs_pytorch(self):
        out = self.run_without_torch("cumemsaver.torch")
        self.assertTrue(out.startswith("NeedsPyTorch True torch cumemsaver.torch needs PyTorch"), out)


if __name__ == "__main__":
    unittest.main()
