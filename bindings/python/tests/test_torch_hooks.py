# SPDX-License-Identifier: MIT
"""The allocator hooks (ABI 1.1) from Python, cumemsaver.torch and the torch_memory_saver
compatibility module over a stand-in torch (tests/fake_torch.py), and the preload helper.
Against the host simulation; the H200 end-to-end test runs the same code with real torch."""

import ctypes
import os
import subprocess
import sys
import threading
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch  # noqa: E402

if fake_torch.real_torch():
    raise unittest.SkipTest("real torch installed: the GPU end-to-end test covers it")

fake_torch.install()

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402
from cumemsaver import preload  # noqa: E402

MiB = 1 << 20


def write(ptr, data):
    ctypes.memmove(ptr, data, len(data))


def read(ptr, n):
    return ctypes.string_at(ptr, n)


class TestHooksLowLevel(unittest.TestCase):
    def setUp(self):
        self.ctx = cms.Context(driver_path=SIM)
        self.addCleanup(self.ctx.close)
        self.addCleanup(L.lib().cms_hook_context_set, None)

    def test_push_alloc_free_from_another_thread(self):
        lib = L.lib()
        region = self.ctx.region("weights", policy=cms.Policy.HOST)
        self.assertEqual(lib.cms_hook_region_push(region.handle), L.CMS_ERR_INVALID_ARGUMENT)
        self.assertEqual(lib.cms_hook_context_set(self.ctx.handle), L.CMS_OK)
        self.assertEqual(lib.cms_hook_region_push(region.handle), L.CMS_OK)
        self.assertEqual(lib.cms_hook_region_current(), region.handle)
        ptr = lib.cms_torch_alloc(3 * MiB, 0, None)
        self.assertTrue(ptr)
        self.assertGreater(ptr, 1 << 32)  # a 64-bit address survives ctypes
        self.assertFalse(lib.cms_torch_alloc(MiB, 1, None))  # region is on device 0
        self.assertIn("device", cms.last_error_message())
        self.assertEqual(lib.cms_hook_region_pop(), L.CMS_OK)
        self.assertIsNone(lib.cms_hook_region_current())
        self.assertFalse(lib.cms_torch_alloc(MiB, 0, None))  # no region active
        self.assertEqual(self.ctx.pointer_info(ptr).region, region)
        t = threading.Thread(target=lib.cms_torch_free, args=(ptr, 3 * MiB, 0, None))
        t.start()
        t.join()
        self.assertEqual(region.info().allocations, 0)
        self.assertEqual(lib.cms_hook_free(ptr), L.CMS_ERR_NOT_FOUND)


class TestSaver(unittest.TestCase):
    def setUp(self):
        import cumemsaver.torch as cmt

        self.cmt = cmt
        self.saver = cmt.Saver(driver_path=SIM)
        self.addCleanup(self.saver.close)

    def test_region_routes_pool_misses_to_the_tag(self):
        torch = sys.modules["torch"]
        with self.saver.region("weights", policy=cms.Policy.HOST) as region:
            w = torch.empty(4 * MiB)
        with self.saver.region("kv"):
            kv = torch.empty(2 * MiB)
        self.assertEqual(self.saver.context.pointer_info(w).region, region)
        self.assertEqual(self.saver.context.pointer_info(kv).region.info().tag, "kv")
        self.assertEqual(torch.empty(MiB), 0)  # outside any region: PyTorch's own memory
        write(w, b"weights!" * 1000)
        self.saver.pause("weights")
        infos = {i.tag: i for i in self.saver.stats()}
        self.assertTrue(infos["weights"].paused)
        self.assertFalse(infos["kv"].paused)
        with self.assertRaises(RuntimeError):  # allocating in a paused tag is refused
            with self.saver.region("weights", policy=cms.Policy.HOST):
                pass
        self.saver.resume("weights")
        self.assertEqual(read(w, 8000), b"weights!" * 1000)
        with self.assertRaises(ValueError):  # one policy per tag and device
            with self.saver.region("kv", policy=cms.Policy.HOST):
                pass

    def test_nested_regions_and_disable(self):
        torch = sys.modules["torch"]
        lib = L.lib()
        with self.saver.region("outer") as outer:
            a = torch.empty(MiB)
            with self.saver.region("inner") as inner:
                p = torch.empty(MiB)
                with self.saver.region("inner"):  # the same region again
                    p2 = torch.empty(MiB)
                with self.saver.disable():
                    self.assertIsNone(lib.cms_hook_region_current())
                    self.assertEqual(torch.empty(MiB), 0)  # PyTorch's own allocator
                self.assertEqual(lib.cms_hook_region_current(), inner.handle)
                p3 = torch.empty(MiB)
            self.assertEqual(lib.cms_hook_region_current(), outer.handle)
            b = torch.empty(MiB)
        self.assertIsNone(lib.cms_hook_region_current())
        info = self.saver.context.pointer_info
        for ptr in (p, p2, p3):
            self.assertEqual(info(ptr).region, inner)
        for ptr in (a, b):
            self.assertEqual(info(ptr).region, outer)
        # Each pool holds only its own tag's segments.
        for (tag, _, _), pool in self.saver._pools.items():
            for seg, _ in pool.segments:
                self.assertEqual(info(seg).region.info().tag, tag)

    def test_one_live_saver(self):
        with self.assertRaisesRegex(RuntimeError, "another Saver"):
            self.cmt.Saver(driver_path=SIM)

    def test_cuda_graph_pool_is_the_tags(self):
        torch = sys.modules["torch"]

        class Graph:
            pass

        g = Graph()
        with self.saver.cuda_graph(g, tag="graph") as region:
            p = torch.empty(MiB)
        self.assertIsNotNone(g.pool_id)
        self.assertEqual(self.saver.context.pointer_info(p).region, region)
        self.saver.pause("graph")
        self.saver.resume("graph")

    def test_empty_cache_frees_through_the_hook(self):
        torch = sys.modules["torch"]
        with self.saver.region("kv") as region:
            torch.empty(MiB)
            torch.empty(MiB)
        self.assertEqual(region.info().allocations, 2)
        self.saver.pause("kv")
        for pool in self.saver._pools.values():
            pool.empty_cache()  # frees while paused
        self.assertEqual(region.info().allocations, 0)

    def test_expandable_segments_is_refused(self):
        old = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:64,expandable_segments:True"
        try:
            with self.assertRaisesRegex(RuntimeError, "expandable_segments"):
                self.cmt.Saver(driver_path=SIM)
        finally:
            if old is None:
                del os.environ["PYTORCH_CUDA_ALLOC_CONF"]
            else:
                os.environ["PYTORCH_CUDA_ALLOC_CONF"] = old

    def test_preload_mode_needs_the_interposer(self):
        with self.assertRaisesRegex(RuntimeError, "LD_PRELOAD"):
            self.cmt.Saver(hook_mode="preload", driver_path=SIM)


class TestCompat(unittest.TestCase):
    def setUp(self):
        os.environ.setdefault("CMS_DRIVER_LIBRARY", SIM)
        from cumemsaver.torch_memory_saver import TorchMemorySaver

        self.tms = TorchMemorySaver()
        self.addCleanup(lambda: self.tms._saver and self.tms._saver.close())

    def test_api_shape_and_semantics(self):
        torch = sys.modules["torch"]
        tms = self.tms
        tms.hook_mode = "torch"
        tms.memory_margin_bytes = 0
        with tms.region(tag="kv_cache"):
            kv = torch.empty(2 * MiB)
        with tms.region(tag="weights", enable_cpu_backup=True):
            w = torch.empty(2 * MiB)
        with tms.region(tag="weights"):  # same tag, no backup: a second library region
            w2 = torch.empty(2 * MiB)
        with self.assertRaises(RuntimeError):
            tms.hook_mode = "preload"  # too late
        write(w, b"x" * 4096)
        tms.pause("weights")
        tms.pause("weights")  # already paused: a no-op, as in torch_memory_saver
        tms.pause("nope")  # unknown tag: a no-op
        tags = {i.tag: i.paused for i in tms.saver.stats()}
        self.assertEqual(tags, {"kv_cache": False, "weights+cpu_backup": True, "weights": True})
        tms.resume("weights")
        tms.resume("weights")
        self.assertEqual(read(w, 4096), b"x" * 4096)
        tms.pause()
        self.assertTrue(all(i.paused for i in tms.saver.stats()))
        if not L.available("cms_hook_memory_margin_set"):  # else checked per allocation
            tms.memory_margin_bytes = 1 << 62  # more than any device has
            with self.assertRaises(MemoryError):
                tms.resume()
            self.assertTrue(all(i.paused for i in tms.saver.stats()))  # nothing changed
            tms.memory_margin_bytes = 0
        tms.resume()
        self.assertFalse(any(i.paused for i in tms.saver.stats()))
        self.assertTrue(tms.enabled)
        del kv, w2


class TestPreloadHelper(unittest.TestCase):
    def test_env_puts_the_interposer_first_once(self):
        path = os.path.join(os.path.dirname(os.path.realpath(LIB)), preload.PRELOAD_NAME)
        self.assertTrue(os.path.exists(path), path)
        self.assertEqual(preload.library_path(), path)  # found beside the loaded library
        env = preload.env({"LD_PRELOAD": f"/x/a.so:{path}", "A": "1"})
        self.assertEqual(env["LD_PRELOAD"], f"{path} /x/a.so")
        self.assertEqual(env["A"], "1")
        self.assertFalse(preload.active())

    def test_child_process_gets_the_interposer(self):
        code = "import cumemsaver.preload as p; print(p.active())"
        env = preload.env()
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60, check=True)
        self.assertEqual(out.stdout.strip(), "True", out.stderr)
        with preload.configure_subprocess():
            self.assertIn(preload.PRELOAD_NAME, os.environ["LD_PRELOAD"])
        self.assertNotIn(preload.PRELOAD_NAME, os.environ.get("LD_PRELOAD", ""))


if __name__ == "__main__":
    unittest.main()
