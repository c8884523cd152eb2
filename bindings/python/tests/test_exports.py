# SPDX-License-Identifier: MIT
"""What `import cumemsaver` gives (issue 35 item 5): every region flag and backup state of the
ABI description (abi/cumemsaver.json) as cumemsaver.REGION_* / BACKUP_*, and exceptions that
print and pickle as cumemsaver.NoDriver, the name they are imported by.

Needs CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY (the simulation), as test_cumemsaver.py.
"""

import json
import os
import pickle
import subprocess
import sys
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402
from cumemsaver import _lib as L  # noqa: E402
from cumemsaver import api  # noqa: E402

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(cms.__file__)))
ABI_JSON = os.path.join(PKG_DIR, os.pardir, os.pardir, "abi", "cumemsaver.json")


def abi_constants(group):
    """(name, value) of the ABI description's constants of group; from the generated _lib
    when the package runs outside the repository."""
    if os.path.exists(ABI_JSON):
        with open(ABI_JSON) as f:
            return [(c["name"], c["value"]) for c in json.load(f)["constants"] if c.get("group") == group]
    prefix = {"region_flag": "CMS_REGION_", "backup_state": "CMS_BACKUP_"}[group]
    return [(n, getattr(L, n)) for n in dir(L) if n.startswith(prefix) and isinstance(getattr(L, n), int)]


class TestFlagsExported(unittest.TestCase):
    def test_every_region_flag_and_backup_state(self):
        for group in ("region_flag", "backup_state"):
            constants = abi_constants(group)
            self.assertTrue(constants, group)
            for name, value in constants:
                with self.subTest(name=name):
                    public = name[len("CMS_"):]  # CMS_REGION_CHUNKS -> REGION_CHUNKS
                    self.assertEqual(getattr(cms, public, None), value, f"cumemsaver.{public}")
                    self.assertEqual(getattr(api, public), value)

    def test_flags_reach_the_region(self):
        with cms.Context(driver_path=SIM) as ctx:
            r = ctx.region("c", flags=cms.REGION_COALESCE | cms.REGION_CHUNKS)
            self.assertEqual(r.info().flags & cms.REGION_CHUNKS, cms.REGION_CHUNKS)
            h = ctx.region("h", policy="host", flags=cms.REGION_PREPARE | cms.REGION_HOST_PAGEABLE)
            self.assertEqual(h.info().flags & cms.REGION_PREPARE, cms.REGION_PREPARE)


class TestExceptionNames(unittest.TestCase):
    PUBLIC = [cms.CumemsaverError, cms.NeedsPyTorch] + list(cms.ERRORS.values())

    def test_module_is_the_package(self):
        for cls in self.PUBLIC:
            with self.subTest(cls=cls.__name__):
                self.assertEqual(cls.__module__, "cumemsaver")
                self.assertIs(getattr(cms, cls.__name__), cls)
        self.assertIs(api.NoDriver, cms.NoDriver)  # still importable from api
        from cumemsaver.api import NotFound  # noqa: F401

    def test_traceback_names_the_package(self):
        code = (
            "import cumemsaver as cms\n"
            "with cms.Context(driver_path='/nonexistent/libcuda.so.1') as ctx:\n"
            "    ctx.region('r')\n"
        )
        env = dict(os.environ, PYTHONPATH=PKG_DIR)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        last = out.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("cumemsaver.NoDriver: cms_region_create: CMS_ERR_NO_DRIVER"), last)

    def test_pickle_round_trip(self):
        with cms.Context(driver_path=SIM) as ctx:
            with self.assertRaises(cms.NotFound) as cm:
                ctx.find_region("nope")
        e = cm.exception
        back = pickle.loads(pickle.dumps(e))
        self.assertIs(type(back), cms.NotFound)
        self.assertEqual(
            (back.status, back.name, back.message, back.function, str(back)),
            (e.status, e.name, e.message, e.function, str(e)),
        )
        self.assertIn(b"cumemsaver\nNotFound", pickle.dumps(e, protocol=0))


if __name__ == "__main__":
    unittest.main()
