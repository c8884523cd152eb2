# SPDX-License-Identifier: MIT
"""cumemsaver.torch_memory_saver's backup options (torch_memory_saver's names and defaults)
over the stand-in torch on the host simulation: retain_cpu_backup and TMS_RETAIN_CPU_BACKUP
(CMS_REGION_RELEASE_HOST per region), cpu_backup_backend and TMS_INIT_CPU_BACKUP_BACKEND,
enable_disk_backup with set_disk_backup_dir and TMS_DISK_BACKUP_DIR, get_cpu_backup's
signature, configure_subprocess. The peer's own suite runs on the GPU
(../shared/peer/run-tms-suite.sh)."""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch  # noqa: E402

if fake_torch.real_torch():
    raise unittest.SkipTest("real torch installed: the GPU suite covers it")

fake_torch.install()

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402
from cumemsaver import preload  # noqa: E402

MiB = 1 << 20
PATTERN = bytes(range(256)) * 64  # 16 KiB
OTHER = bytes(reversed(range(256))) * 64


def need(*names):
    """Skips a test until the loaded library has the release 1.2 functions it exercises."""
    missing = [n for n in names if not L.available(n)]
    return unittest.skipIf(missing, f"libcumemsaver lacks {', '.join(missing)} (release 1.2)")


class EnvCase(unittest.TestCase):
    """Each test gets a fresh TorchMemorySaver made under the environment it sets."""

    ENV = (
        "TMS_RETAIN_CPU_BACKUP",
        "TMS_INIT_CPU_BACKUP_BACKEND",
        "TMS_DISK_BACKUP_DIR",
        "TMS_INIT_ENABLE",
        "TMS_INIT_ENABLE_CPU_BACKUP",
        "TMS_INIT_ENABLE_DISK_BACKUP",
    )

    def setUp(self):
        os.environ.setdefault("CMS_DRIVER_LIBRARY", SIM)
        saved = {k: os.environ.get(k) for k in self.ENV}
        for k in self.ENV:
            os.environ.pop(k, None)

        def restore():
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        self.addCleanup(restore)
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def make(self, **env):
        os.environ.update(env)
        from cumemsaver.torch_memory_saver import TorchMemorySaver

        tms = TorchMemorySaver()
        self.addCleanup(lambda: tms._saver and tms._saver.close())
        return tms

    def region(self, tms, tag):
        (region,) = tms.saver.regions(tag)
        return region

    def alloc_filled(self, tms, **kwargs):
        torch = sys.modules["torch"]
        with tms.region(**kwargs):
            ptr = torch.empty(MiB)
        ctypes.memmove(ptr, PATTERN, len(PATTERN))
        return ptr

    def cycle(self, tms, tag, ptr):
        tms.pause(tag)
        tms.resume(tag)
        self.assertEqual(ctypes.string_at(ptr, len(PATTERN)), PATTERN)


class TestRetain(EnvCase):
    def test_default_gives_the_host_backup_back_after_resume(self):
        tms = self.make()
        self.assertIs(tms.retain_cpu_backup, False)
        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        region = self.region(tms, "w+cpu_backup")
        self.assertEqual(region.info().policy, cms.Policy.HOST)
        self.assertTrue(region.info().flags & L.CMS_REGION_RELEASE_HOST)
        tms.pause("w")
        self.assertGreater(region.info().host_bytes, 0)
        tms.resume("w")
        self.assertEqual(region.info().host_bytes, 0)
        self.assertEqual(ctypes.string_at(ptr, len(PATTERN)), PATTERN)

    def test_retain_keeps_the_host_backup(self):
        tms = self.make()
        tms.retain_cpu_backup = True
        self.assertIs(tms.retain_cpu_backup, True)
        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        region = self.region(tms, "w+cpu_backup")
        self.assertFalse(region.info().flags & L.CMS_REGION_RELEASE_HOST)
        self.cycle(tms, "w", ptr)
        self.assertGreater(region.info().host_bytes, 0)

    def test_environment_sets_retention_at_start(self):
        cases = (("1", True), ("true", True), ("YES", True), ("0", False), ("no", False))
        for value, want in cases:
            tms = self.make(TMS_RETAIN_CPU_BACKUP=value)
            self.assertIs(tms.retain_cpu_backup, want, value)

    @need("cms_region_flags_set", "cms_backup_get")
    def test_change_applies_to_existing_regions_from_their_next_resume(self):
        tms = self.make()
        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        region = self.region(tms, "w+cpu_backup")
        tms.pause("w")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning: the region takes the new setting
            tms.retain_cpu_backup = True
        tms.resume("w")
        self.assertGreater(region.info().host_bytes, 0)  # kept
        self.assertEqual(ctypes.string_at(ptr, len(PATTERN)), PATTERN)
        tms.retain_cpu_backup = False  # active: applies at the resume after the next pause
        self.assertGreater(region.info().host_bytes, 0)
        self.assertIsNotNone(tms._backup_buffer(ptr, 16, True))  # still readable
        self.cycle(tms, "w", ptr)
        self.assertEqual(region.info().host_bytes, 0)  # given back at that resume
        self.assertIsNone(tms._backup_buffer(ptr, 16, True))

    @unittest.skipIf(L.available("cms_region_flags_set"), "the library can change it")
    def test_change_with_existing_regions_warns_and_applies_to_new_ones(self):
        tms = self.make()
        self.alloc_filled(tms, tag="a", enable_cpu_backup=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tms.retain_cpu_backup = True
        self.assertEqual(len(caught), 1)
        self.assertIs(caught[0].category, RuntimeWarning)
        self.assertIn("a+cpu_backup", str(caught[0].message))
        self.alloc_filled(tms, tag="b", enable_cpu_backup=True)
        release = L.CMS_REGION_RELEASE_HOST
        self.assertTrue(self.region(tms, "a+cpu_backup").info().flags & release)
        self.assertFalse(self.region(tms, "b+cpu_backup").info().flags & release)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tms.retain_cpu_backup = True  # unchanged: nothing to say
        self.assertEqual(caught, [])


class TestBackend(EnvCase):
    def test_pinned_and_mmap_are_host_regions_of_their_own(self):
        tms = self.make()
        p1 = self.alloc_filled(tms, tag="w", enable_cpu_backup=True, cpu_backup_backend="pinned")
        p2 = self.alloc_filled(tms, tag="w", enable_cpu_backup=True, cpu_backup_backend="mmap")
        p3 = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)  # default: pinned
        self.assertEqual(self.region(tms, "w+cpu_backup").info().allocations, 2)
        self.assertEqual(self.region(tms, "w+cpu_backup_mmap").info().policy, cms.Policy.HOST)
        tms.pause("w")
        self.assertTrue(all(i.paused for i in tms.saver.stats()))
        tms.resume("w")
        for ptr in (p1, p2, p3):
            self.assertEqual(ctypes.string_at(ptr, len(PATTERN)), PATTERN)

    @unittest.skipIf(not hasattr(L, "CMS_REGION_HOST_PAGEABLE"), "no pageable host backups")
    def test_mmap_backups_are_pageable(self):
        tms = self.make()
        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True, cpu_backup_backend="mmap")
        region = self.region(tms, "w+cpu_backup_mmap")
        self.assertTrue(region.info().flags & L.CMS_REGION_HOST_PAGEABLE)
        self.cycle(tms, "w", ptr)
        self.alloc_filled(tms, tag="p", enable_cpu_backup=True)
        self.assertFalse(self.region(tms, "p+cpu_backup").info().flags & L.CMS_REGION_HOST_PAGEABLE)

    def test_environment_sets_the_default_backend(self):
        tms = self.make(TMS_INIT_CPU_BACKUP_BACKEND="mmap")
        self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        self.assertEqual([i.tag for i in tms.saver.stats()], ["w+cpu_backup_mmap"])

    def test_invalid_combinations_are_refused(self):
        tms = self.make()
        bad = (
            {"cpu_backup_backend": "pinned"},  # without enable_cpu_backup
            {"enable_cpu_backup": True, "cpu_backup_backend": "hugepages"},
            {"enable_cpu_backup": True, "enable_disk_backup": True},
        )
        for kwargs in bad:
            with self.assertRaises(ValueError, msg=str(kwargs)):
                with tms.region(tag="x", **kwargs):
                    pass
        self.assertEqual(tms.saver.stats(), [])  # nothing was created

    def test_invalid_default_backend_is_refused(self):
        tms = self.make(TMS_INIT_CPU_BACKUP_BACKEND="bogus")
        with self.assertRaisesRegex(ValueError, "TMS_INIT_CPU_BACKUP_BACKEND"):
            with tms.region(tag="x", enable_cpu_backup=True):
                pass
        self.assertEqual(tms.saver.stats(), [])  # nothing was created


class TestDisk(EnvCase):
    def test_disk_backup_in_the_chosen_directory(self):
        tms = self.make()
        d = os.path.join(self.tmp, "a", "b")
        tms.set_disk_backup_dir(d)
        self.assertTrue(os.path.isdir(d))  # created, as in torch_memory_saver
        ptr = self.alloc_filled(tms, tag="w", enable_disk_backup=True)
        region = self.region(tms, "w+disk_backup")
        self.assertEqual(region.info().policy, cms.Policy.DISK)
        self.cycle(tms, "w", ptr)
        self.cycle(tms, "w", ptr)
        # a directory chosen later applies to the region that exists
        d2 = os.path.join(self.tmp, "c")
        tms.set_disk_backup_dir(d2)
        os.rmdir(d)  # its file was unlinked at once: the old directory is empty
        self.cycle(tms, "w", ptr)

    def test_environment_names_the_directory(self):
        d = os.path.join(self.tmp, "env")
        tms = self.make(TMS_DISK_BACKUP_DIR=d)
        ptr = self.alloc_filled(tms, tag="w", enable_disk_backup=True)
        self.assertTrue(os.path.isdir(d))
        self.cycle(tms, "w", ptr)

    def test_a_directory_that_cannot_be_made_is_an_error(self):
        tms = self.make()
        blocker = os.path.join(self.tmp, "file")
        open(blocker, "w").close()
        with self.assertRaises(OSError):
            tms.set_disk_backup_dir(os.path.join(blocker, "sub"))


class TestBackup(EnvCase):
    """get_cpu_backup's reading of the library's backups (the tensor is built by torch: the
    GPU test tests/gpu/test_tms_gpu.py); _backup_buffer is everything below it."""

    @need("cms_backup_get", "cms_backup_read")
    def test_a_paused_view_reads_its_bytes_of_the_backup(self):
        tms = self.make()
        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        tms.pause("w")
        off, n = 100, 1000  # a view into the allocation
        view = tms._backup_buffer(ptr + off, n, True)
        self.assertIsInstance(view, ctypes.Array)  # over the library's host buffer
        self.assertEqual(bytes(view), PATTERN[off : off + n])
        copy = tms._backup_buffer(ptr + off, n, False)
        self.assertIsInstance(copy, bytearray)
        self.assertEqual(bytes(copy), PATTERN[off : off + n])
        with self.assertRaises(ValueError):  # past the allocation's end
            tms._backup_buffer(ptr + MiB - 10, 100, True)
        tms.resume("w")
        self.assertIsNone(tms._backup_buffer(ptr, n, True))  # not retained: none
        self.assertEqual(ctypes.string_at(ptr, len(PATTERN)), PATTERN)

    @need("cms_backup_get", "cms_backup_read", "cms_region_flags_set")
    def test_a_retained_backup_stays_at_its_address_and_is_refreshed(self):
        tms = self.make()
        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        n = len(PATTERN)
        tms.pause("w")
        first = ctypes.addressof(tms._backup_buffer(ptr, n, True))
        tms.retain_cpu_backup = True
        tms.resume("w")
        kept = tms._backup_buffer(ptr, n, True)
        self.assertEqual((ctypes.addressof(kept), bytes(kept)), (first, PATTERN))
        ctypes.memmove(ptr, OTHER, n)  # new content, saved by the next pause
        tms.pause("w")
        again = tms._backup_buffer(ptr, n, True)
        self.assertEqual((ctypes.addressof(again), bytes(again)), (first, OTHER))
        tms.retain_cpu_backup = False
        tms.resume("w")
        self.assertIsNone(tms._backup_buffer(ptr, n, True))
        self.assertEqual(ctypes.string_at(ptr, n), OTHER)

    @need("cms_backup_get", "cms_backup_read")
    def test_a_disk_backup_is_read_into_a_copy(self):
        tms = self.make()
        tms.set_disk_backup_dir(self.tmp)
        ptr = self.alloc_filled(tms, tag="d", enable_disk_backup=True)
        tms.pause("d")
        got = tms._backup_buffer(ptr + 5, 500, True)  # zero_copy: no host buffer, a copy
        self.assertIsInstance(got, bytearray)
        self.assertEqual(bytes(got), PATTERN[5:505])
        tms.resume("d")

    @need("cms_backup_get")
    def test_no_backup_is_none(self):
        tms = self.make()
        ptr = self.alloc_filled(tms, tag="kv")  # DISCARD: keeps no content
        tms.pause("kv")
        self.assertIsNone(tms._backup_buffer(ptr, 16, True))
        tms.resume("kv")
        self.assertIsNone(tms._backup_buffer(ptr, 16, False))  # active, never backed up
        self.assertIsNone(tms._backup_buffer(0x1000, 16, False))  # not cumemsaver's

    @unittest.skipIf(L.available("cms_backup_get"), "the library reads backups")
    def test_without_cms_backup_get_it_is_none(self):
        tms = self.make()

        class Tensor:
            def __init__(self, ptr):
                self.ptr = ptr

            def data_ptr(self):
                return self.ptr

            def is_contiguous(self):
                return True

            def numel(self):
                return 16

            def element_size(self):
                return 1

        ptr = self.alloc_filled(tms, tag="w", enable_cpu_backup=True)
        tms.pause("w")
        self.assertIsNone(tms.get_cpu_backup(Tensor(ptr), zero_copy=True))
        self.assertIsNone(tms.get_cpu_backup(Tensor(ptr)))
        tms.resume("w")
        self.assertIsNone(tms.get_cpu_backup(Tensor(ptr)))  # active: none, as in the peer


class TestWholeProcess(EnvCase):
    @need("cms_hook_region_default_set")
    def test_default_region_takes_allocations_outside_regions_and_disable_sets_it_aside(self):
        tms = self.make()
        saver = tms.saver
        ctag, kwargs = tms._options("default", True, False, None)
        region = saver._region(ctag, device=0, **kwargs)
        saver.set_default_region(0, region)
        ptr = cms.hook_alloc(MiB, 0)  # no region active on this thread: the default one
        self.assertEqual(saver.context.pointer_info(ptr).region, region)
        with tms.region(tag="grad"):  # nested: the region's own tag
            torch = sys.modules["torch"]
            inner = torch.empty(MiB)
        self.assertEqual(saver.context.pointer_info(inner).region.info().tag, "grad")
        with tms.disable():
            with self.assertRaises(cms.NotFound):  # nothing is cumemsaver's in the block
                cms.hook_alloc(MiB, 0)
            self.assertIsNone(cms.hook_region_default(0))
        ptr2 = cms.hook_alloc(MiB, 0)  # the default is back
        self.assertEqual(saver.context.pointer_info(ptr2).region, region)
        ctypes.memmove(ptr, PATTERN, len(PATTERN))
        tms.pause()
        self.assertTrue(all(i.paused for i in saver.stats()))
        tms.resume()
        self.assertEqual(ctypes.string_at(ptr, len(PATTERN)), PATTERN)
        saver.set_default_region(0, None)
        with self.assertRaises(cms.NotFound):
            cms.hook_alloc(MiB, 0)

    def test_not_set_up_without_the_interposer(self):
        tms = self.make(TMS_INIT_ENABLE="1", TMS_INIT_ENABLE_CPU_BACKUP="1")
        self.assertFalse(tms._init_whole_process())
        self.assertIsNone(tms._saver)  # nothing made

    @need("cms_hook_region_default_set")
    def test_environment_at_import_in_a_process_with_the_interposer(self):
        code = (
            "t.hook_mode = 'preload'  # what the peer's examples do: the same mode is fine\n"
            "p = malloc(1 << 20)\n"
            "info = t.saver.context.pointer_info(p)\n"
            "ctypes.memmove(p, b'abc' * 100, 300)\n"
            "t.pause(); t.resume()\n"
            "print(info.region.info().tag, ctypes.string_at(p, 300) == b'abc' * 100)\n"
        )
        out = self.run_whole_process(
            code, TMS_INIT_ENABLE_CPU_BACKUP="1", TMS_INIT_CPU_BACKUP_BACKEND="pinned"
        )
        self.assertEqual(out, ["default+cpu_backup True"])

    def run_whole_process(self, code, **env_more):
        """Runs code in a child started with the interposer and TMS_INIT_ENABLE=1 (two
        simulated devices); returns its stdout lines."""
        here = os.path.dirname(os.path.abspath(__file__))
        head = (
            "import ctypes, fake_torch; fake_torch.install()\n"
            "from cumemsaver.torch_memory_saver import torch_memory_saver as t\n"
            "def malloc(n):\n"
            "    p = ctypes.c_void_p()\n"
            "    assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), n) == 0\n"
            "    return p.value\n"
        )
        env = preload.env()
        env.update(TMS_INIT_ENABLE="1", CMS_SIM_DEVICES="2", **env_more)
        env["PYTHONPATH"] = os.pathsep.join([here] + sys.path)
        out = subprocess.run(
            [sys.executable, "-c", head + code], env=env, capture_output=True, text=True,
            timeout=120,
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.split("\n")[:-1]

    @need("cms_hook_region_default_template_set")
    def test_only_a_device_that_allocates_gets_a_default_region(self):
        out = self.run_whole_process(
            "print(len(t.saver.context.regions()))  # nothing made at import\n"
            "p = malloc(1 << 20)\n"
            "print([(r.tag, r.device) for r in t.saver.context.regions()])\n"
            "print([(i.tag, i.device) for i in t.saver.stats()])\n",
            TMS_INIT_ENABLE_CPU_BACKUP="1",
        )
        self.assertEqual(
            out, ["0", "[('default+cpu_backup', 0)]", "[('default+cpu_backup', 0)]"]
        )

    @need("cms_hook_region_default_template_set")
    def test_disk_backup_directory_and_retention_reach_a_region_made_on_demand(self):
        code = (
            "import os\n"
            "from cumemsaver import _lib as L\n"
            "p = malloc(1 << 20)\n"
            "ctypes.memmove(p, b'xyz' * 100, 300)\n"
            "t.pause('default'); print(sorted(os.listdir(os.environ['D'])) == [])\n"
            "t.resume('default'); print(ctypes.string_at(p, 300) == b'xyz' * 100)\n"
            "(r,) = t.saver.regions()\n"
            "print(bool(r.info().flags & L.CMS_REGION_RELEASE_HOST))\n"
            "t.retain_cpu_backup = True\n"
            "print(bool(r.info().flags & L.CMS_REGION_RELEASE_HOST))\n"
            "d2 = os.path.join(os.environ['D'], 'later'); t.set_disk_backup_dir(d2)\n"
            "t.pause(); t.resume(); print(ctypes.string_at(p, 300) == b'xyz' * 100)\n"
            "print(r.info().policy.name)\n"
        )
        out = self.run_whole_process(
            code, TMS_INIT_ENABLE_DISK_BACKUP="1", TMS_DISK_BACKUP_DIR=self.tmp, D=self.tmp
        )
        self.assertEqual(out, ["True", "True", "True", "False", "True", "DISK"])

    @need("cms_hook_region_default_template_set")
    def test_disable_sets_regions_made_on_demand_aside(self):
        code = (
            "import cumemsaver as cms\n"
            "p = malloc(1 << 20)\n"
            "with t.disable():\n"
            "    print(cms.hook_region_default(0) is None)\n"
            "    try:\n"
            "        cms.hook_alloc(1 << 20, 0); print('allocated')\n"
            "    except cms.NotFound:\n"
            "        print('not cumemsaver')\n"
            "q = malloc(1 << 20)\n"
            "print(t.saver.context.pointer_info(q).region.info().tag)\n"
            "print(len(t.saver.context.regions()))\n"
        )
        out = self.run_whole_process(code)
        self.assertEqual(out, ["True", "not cumemsaver", "default", "1"])

    @need("cms_hook_region_default_template_set")
    def test_regions_made_before_the_template_is_cleared_stay_the_savers(self):
        # a DISK region the template made, then the template cleared before anything adopted
        # it: it is still the Saver's (stats), with its directory (pause)
        code = (
            "p = malloc(1 << 20)\n"
            "t.saver.set_default_template(None)\n"
            "print([i.tag for i in t.saver.stats()])\n"
            "t.pause('default'); t.resume('default'); print('cycled')\n"
        )
        out = self.run_whole_process(
            code, TMS_INIT_ENABLE_DISK_BACKUP="1", TMS_DISK_BACKUP_DIR=self.tmp
        )
        self.assertEqual(out, ["['default+disk_backup']", "cycled"])

    @need("cms_hook_region_default_template_set")
    def test_a_disk_region_made_while_pausing_gets_its_directory(self):
        # another thread's first allocation on device 1 makes its region between the Saver's
        # adoption and the library's pause (here: just before cms_pause)
        code = (
            "import cumemsaver as cms\n"
            "p = malloc(1 << 20)\n"
            "orig = t.saver.context.pause\n"
            "def pause(tag):\n"
            "    cms.hook_alloc(1 << 20, 1)\n"
            "    return orig(tag)\n"
            "t.saver.context.pause = pause\n"
            "t.pause('default'); print(sorted(i.paused for i in t.saver.stats()))\n"
        )
        out = self.run_whole_process(
            code, TMS_INIT_ENABLE_DISK_BACKUP="1", TMS_DISK_BACKUP_DIR=self.tmp
        )
        self.assertEqual(out, ["[True, True]"])

    @need("cms_hook_region_default_template_set")
    def test_a_disk_region_made_after_set_disk_backup_dir_uses_the_new_directory(self):
        # set_disk_backup_dir applies to every enable_disk_backup region: also to one the
        # template makes afterwards (the old directory is gone, so using it fails)
        old = os.path.join(self.tmp, "old")
        code = (
            "import os, shutil\n"
            "t.set_disk_backup_dir(os.path.join(os.environ['D'], 'new'))\n"
            "shutil.rmtree(os.environ['OLD'])\n"
            "p = malloc(1 << 20)\n"
            "ctypes.memmove(p, b'xyz' * 100, 300)\n"
            "t.pause('default'); t.resume('default')\n"
            "print(ctypes.string_at(p, 300) == b'xyz' * 100)\n"
        )
        out = self.run_whole_process(
            code, TMS_INIT_ENABLE_DISK_BACKUP="1", TMS_DISK_BACKUP_DIR=old, D=self.tmp, OLD=old
        )
        self.assertEqual(out, ["True"])

    @need("cms_hook_region_default_template_set")
    def test_disable_sets_aside_defaults_a_cleared_template_made(self):
        # the template cleared outside disable(): the defaults it made stay, and disable()
        # must still set them aside for its block
        code = (
            "import cumemsaver as cms\n"
            "p = malloc(1 << 20)\n"
            "t.saver.set_default_template(None)\n"
            "with t.disable():\n"
            "    print(cms.hook_region_default(0) is None)\n"
            "print(cms.hook_region_default(0) is not None)\n"
        )
        self.assertEqual(self.run_whole_process(code), ["True", "True"])

    @need("cms_hook_region_default_template_set")
    def test_adopting_races_a_pause_on_another_thread(self):
        # stats() adopts the DISK region the template made; right after it saw the region
        # active, another thread's pause adopts and pauses it: stats() must not then set the
        # directory of a paused region (the library refuses: RegionPaused)
        code = (
            "import threading\n"
            "p = malloc(1 << 20)\n"
            "ctx = t.saver.context\n"
            "find_region, other = ctx.find_region, []\n"
            "def find(tag, device):\n"
            "    r = find_region(tag, device)\n"
            "    info = r.info\n"
            "    def seen():\n"
            "        i = info()\n"
            "        if not other:\n"
            "            other.append(threading.Thread(target=t.pause, args=('default',)))\n"
            "            other[0].start(); other[0].join(2)\n"
            "        return i\n"
            "    r.info = seen\n"
            "    return r\n"
            "ctx.find_region = find\n"
            "print(len(t.saver.stats()))\n"
            "other[0].join(); print(t.saver.stats()[0].paused)\n"
        )
        out = self.run_whole_process(
            code, TMS_INIT_ENABLE_DISK_BACKUP="1", TMS_DISK_BACKUP_DIR=self.tmp
        )
        self.assertEqual(out, ["1", "True"])

    @need("cms_hook_region_default_template_set")
    def test_clearing_the_template_inside_disable_keeps_the_defaults_made(self):
        # as outside disable(): defaults already made stay (cumemsaver_hooks.h)
        code = (
            "import cumemsaver as cms\n"
            "p = malloc(1 << 20)\n"
            "with t.disable():\n"
            "    t.saver.set_default_template(None)\n"
            "print(cms.hook_region_default(0) is not None)\n"
        )
        self.assertEqual(self.run_whole_process(code), ["True"])


class TestMisc(EnvCase):
    def test_hook_mode_set_again_to_the_same_mode_after_start(self):
        tms = self.make()
        tms.saver  # started (as TMS_INIT_ENABLE does at import)
        tms.hook_mode = "torch"  # what the peer's examples do first: accepted
        with self.assertRaisesRegex(RuntimeError, "before the first region"):
            tms.hook_mode = "preload"
        self.assertEqual(tms.hook_mode, "torch")

    def test_configure_subprocess_prepends_the_interposer_and_restores(self):
        from cumemsaver.torch_memory_saver import configure_subprocess

        old = os.environ.get("LD_PRELOAD")
        os.environ["LD_PRELOAD"] = "/x/other.so"
        try:
            with configure_subprocess():
                parts = os.environ["LD_PRELOAD"].replace(":", " ").split()
                self.assertEqual(parts, [preload.library_path(), "/x/other.so"])
            self.assertEqual(os.environ["LD_PRELOAD"], "/x/other.so")
        finally:
            if old is None:
                os.environ.pop("LD_PRELOAD", None)
            else:
                os.environ["LD_PRELOAD"] = old


if __name__ == "__main__":
    unittest.main()
