# SPDX-License-Identifier: MIT
"""The generated ctypes module (_lib.py) against the ABI description and across releases.

Needs CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY like test_cumemsaver.py. Standard library only.
"""

import ctypes
import json
import os
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

from cumemsaver import _lib as L  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DESCRIPTION = os.path.join(HERE, os.pardir, os.pardir, os.pardir, "abi", "cumemsaver.json")


class TestReleases(unittest.TestCase):
    def test_later_release_function_missing_is_skipped(self):
        # As if this module were of a release newer than the loaded library.
        name = "cms_not_in_any_library"
        L.FUNCTIONS[name] = (L.cms_status, [])
        L.SINCE[name] = L.RELEASES[-1]
        try:
            lib = L.load(LIB)
        finally:
            del L.FUNCTIONS[name], L.SINCE[name]
        self.assertIn(name, lib._cms_missing)
        self.assertFalse(L.available(name, lib))
        self.assertTrue(L.available("cms_alloc", lib))
        self.assertEqual(lib.cms_version(), L.CMS_VERSION_NUMBER)

    def test_first_release_function_missing_refuses_the_library(self):
        # The simulation library is not libcumemsaver: it has no cms_ functions at all.
        with self.assertRaises(OSError) as cm:
            L.load(SIM)
        self.assertIn("cms_", str(cm.exception))

    def test_every_function_has_a_release(self):
        self.assertEqual(set(L.SINCE), set(L.FUNCTIONS))
        for name, rel in L.SINCE.items():
            self.assertIn(rel, L.RELEASES, name)

    def test_struct_sizes_per_release(self):
        for cls in L.STRUCTS + L.PLAIN_STRUCTS:
            since = L.FIELD_SINCE[cls.__name__].values()
            first = min(L.RELEASES.index(r) for r in since)
            sizes = [L.struct_size_at(cls, r) for r in L.RELEASES]
            self.assertEqual(sizes[:first], [0] * first, cls.__name__)
            self.assertEqual(sizes, sorted(sizes), cls.__name__)
            self.assertEqual(sizes[-1], ctypes.sizeof(cls), cls.__name__)
            self.assertGreater(sizes[first], 0, cls.__name__)

    def test_old_size_struct_is_accepted(self):
        # A struct_size of the first release (what an old caller passes) is accepted.
        lib = L.lib()
        for cls in (L.cms_region_info,):
            old = L.struct_size_at(cls, L.RELEASES[0])
            ctx = L.cms_context_p()
            opts = L.init_struct(L.cms_context_options)
            opts.driver_path = SIM.encode()
            self.assertEqual(lib.cms_context_create(ctypes.byref(opts), ctypes.byref(ctx)), 0)
            self.addCleanup(lib.cms_context_destroy, ctx)
            reg = L.cms_region_p()
            st = lib.cms_region_create(ctx, b"old-size", None, ctypes.byref(reg))
            self.assertEqual(st, L.CMS_OK, lib.cms_last_error())
            info = L.init_struct(cls)
            info.struct_size = old
            self.assertEqual(lib.cms_region_info_get(reg, ctypes.byref(info)), L.CMS_OK)
            self.assertEqual(info.tag, b"old-size")
            self.assertEqual(info.struct_size, old)

    @unittest.skipUnless(os.path.exists(DESCRIPTION), "no abi/cumemsaver.json beside the package")
    def test_matches_description(self):
        with open(DESCRIPTION, encoding="utf-8") as fh:
            d = json.load(fh)
        self.assertEqual(list(L.RELEASES), d["releases"])
        self.assertEqual({f["name"]: f["since"] for f in d["functions"]}, L.SINCE)
        for s in d["statuses"] + d["constants"]:
            self.assertEqual(getattr(L, s["name"]), s["value"], s["name"])
        for f in d["functions"]:
            restype, argtypes = L.FUNCTIONS[f["name"]]
            self.assertEqual(len(argtypes), len(f["params"]), f["name"])
            for p, t in zip(f["params"], argtypes):
                if p["type"].endswith("*"):
                    # Pointers are pointer-sized in ctypes: never truncated to an int.
                    self.assertEqual(ctypes.sizeof(t), ctypes.sizeof(ctypes.c_void_p), p)
                if p["type"] in ("uint64_t", "int64_t", "size_t", "ssize_t"):
                    self.assertEqual(ctypes.sizeof(t), 8, p)


if __name__ == "__main__":
    unittest.main()
