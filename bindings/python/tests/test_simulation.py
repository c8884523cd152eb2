# SPDX-License-Identifier: MIT
"""The switch to the host simulation (issue 28): cumemsaver.SIMULATION as driver_path and
CMS_DRIVER_LIBRARY=sim load the libcumemsaver-sim.so installed with the library (here: the
build tree's, beside CUMEMSAVER_LIBRARY's directory in src/sim/; pip_install_check.sh covers
the bundled one), a driver that cannot be loaded names the switch, and docs/python.md's
example runs with CMS_DRIVER_LIBRARY=sim.

Needs CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY (the simulation), as test_cumemsaver.py.
"""

import ctypes
import os
import re
import subprocess
import sys
import unittest

LIB = os.environ.get("CUMEMSAVER_LIBRARY")
SIM = os.environ.get("CMS_DRIVER_LIBRARY")
if not LIB or not SIM:
    raise unittest.SkipTest("set CUMEMSAVER_LIBRARY and CMS_DRIVER_LIBRARY to run these tests")

import cumemsaver as cms  # noqa: E402

PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(cms.__file__)))
DOC = os.path.join(PKG_DIR, os.pardir, os.pardir, "docs", "python.md")


def run_python(code, **env):
    """code in a new interpreter with this package and env on top of ours (minus
    CMS_DRIVER_LIBRARY unless given); returns (returncode, stdout, stderr)."""
    full = dict(os.environ)
    full.pop("CMS_DRIVER_LIBRARY", None)
    full["PYTHONPATH"] = PKG_DIR
    full["CMS_SIM_POISON"] = "0"  # the docs' example allocates 768 MiB of simulated memory
    full.update(env)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full
    )
    return out.returncode, out.stdout, out.stderr


def loaded_simulation():
    """The simulation's file mapped in this process (realpath), or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith("/libcumemsaver-sim.so"):
                return os.path.realpath(line.split()[-1])
    return None


class TestSwitch(unittest.TestCase):
    def test_constant_as_driver_path(self):
        self.assertEqual(cms.SIMULATION, "sim")
        with cms.Context(driver_path=cms.SIMULATION) as ctx:
            r = ctx.region("weights", policy=cms.Policy.HOST)
            p = r.alloc(1 << 20)
            ctypes.memmove(p, b"abc", 3)
            ctx.pause("weights")
            ctx.resume("weights")
            self.assertEqual(ctypes.string_at(p, 3), b"abc")
            self.assertEqual(loaded_simulation(), os.path.realpath(SIM))

    def test_environment_variable(self):
        rc, out, err = run_python(
            "import cumemsaver as cms\n"
            "with cms.Context() as ctx:\n"
            "    ctx.region('a').alloc(1 << 20)\n"
            "    print(ctx.device_memory_info().total > 0)\n",
            CMS_DRIVER_LIBRARY="sim",
        )
        self.assertEqual((rc, out.strip()), (0, "True"), err)

    def test_no_driver_names_the_switch(self):
        with cms.Context(driver_path="/nonexistent/libcuda.so.1") as ctx:
            with self.assertRaises(cms.NoDriver) as cm:
                ctx.region("a")
        self.assertIn("/nonexistent/libcuda.so.1", cm.exception.message)
        self.assertIn("CMS_DRIVER_LIBRARY=sim", cm.exception.message)


class TestDocsExample(unittest.TestCase):
    def test_example_runs_on_the_simulation(self):
        if not os.path.exists(DOC):
            self.skipTest(f"no {DOC}")
        with open(DOC) as f:
            text = f.read()
        m = re.search(r"## Example\n\n```python\n(.*?)```", text, re.S)
        self.assertIsNotNone(m, "docs/python.md has no ## Example code block")
        rc, out, err = run_python(m.group(1), CMS_DRIVER_LIBRARY="sim")
        self.assertEqual(rc, 0, err)
        released, freed = map(int, out.split())
        self.assertEqual(released, (256 + 512) << 20)
        self.assertEqual(freed, released)


if __name__ == "__main__":
    unittest.main()
