# SPDX-License-Identifier: MIT
"""Where cumemsaver._lib looks for libcumemsaver.so.1: the library bundled in the package by
`pip install` first (cumemsaver/_native/), then CUMEMSAVER_LIBRARY, pkg-config, the system
loader; and an error that names what to set when none loads. Each case in a fresh process.
The installed package itself is checked by pip_install_check.sh (ctest python_pip_install)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
if not LIB:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY to run these tests")

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, os.pardir, "cumemsaver")

PROBE = "from cumemsaver import _lib; import os; print(os.path.realpath(_lib.lib()._name))"


def run(pythonpath, library):
    env = {k: v for k, v in os.environ.items() if k not in ("CUMEMSAVER_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = pythonpath
    env["PKG_CONFIG_PATH"] = "/nonexistent"  # no system cumemsaver.pc in the way
    if library is not None:
        env["CUMEMSAVER_LIBRARY"] = library
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60,
        cwd=pythonpath,  # not the source tree: "" on sys.path is the working directory
    )


class TestLibrarySearch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        shutil.copytree(PKG, os.path.join(self.tmp, "cumemsaver"),
                        ignore=shutil.ignore_patterns("__pycache__", "_native"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_bundled_library_comes_first(self):
        native = os.path.join(self.tmp, "cumemsaver", "_native")
        os.makedirs(native)
        shutil.copyfile(os.path.realpath(LIB), os.path.join(native, "libcumemsaver.so.1"))
        out = run(self.tmp, "/nonexistent/libcumemsaver.so.1")
        self.assertEqual(out.returncode, 0, out.stderr)
        want = os.path.realpath(os.path.join(native, "libcumemsaver.so.1"))
        self.assertEqual(out.stdout.strip(), want)

    def test_without_bundled_library_cumemsaver_library_is_used(self):
        out = run(self.tmp, LIB)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), os.path.realpath(LIB))

    def test_error_names_what_to_set(self):
        out = run(self.tmp, "/nonexistent/libcumemsaver.so.1")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("OSError", out.stderr)
        self.assertIn("CUMEMSAVER_LIBRARY=", out.stderr)
        self.assertIn("pip install ./bindings/python", out.stderr)


if __name__ == "__main__":
    unittest.main()
