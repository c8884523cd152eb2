# SPDX-License-Identifier: MIT
"""pip install of bindings/python (issue 35 item 5): offline, in a venv of this interpreter
made without --system-site-packages, so with no wheel package (and, from Python 3.12, no
setuptools); the build writes nothing into the source directory (no build/, no *.egg-info);
pip uninstall removes it; pip install -e runs the package from the source. The same for
bindings/python-tms (the import name torch_memory_saver), whose backend is a link to
cumemsaver_build.py. The backend reads pyproject.toml as a TOML reader does.

CUMEMSAVER_NO_NATIVE=1 here (the Python files only; the C library build is the same CMake
build as the test command's): ctest python_pip_install (tests/pip_install_check.sh) checks the
wheel with the bundled library. Standard library only; no library or driver needed.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bindings/python
TMS = os.path.join(os.path.dirname(SRC), "python-tms")
sys.path.insert(0, SRC)
import cumemsaver_build  # noqa: E402


def tree(root):
    """Every path under root, relative, but Python's own __pycache__ (an import writes it)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


class TestPipInstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import ensurepip  # noqa: F401
            import venv  # noqa: F401
        except ImportError:
            raise unittest.SkipTest(f"{sys.executable} has no venv/ensurepip")
        cls.tmp = tempfile.mkdtemp(prefix="cms-pip-")
        cls.src = os.path.join(cls.tmp, "python")
        ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
        shutil.copytree(SRC, cls.src, ignore=ignore)
        cls.tms = os.path.join(cls.tmp, "python-tms")  # the backend's link copied as a file
        shutil.copytree(TMS, cls.tms, ignore=ignore)
        cls.venv = os.path.join(cls.tmp, "venv")  # no --system-site-packages: no wheel package
        subprocess.run([sys.executable, "-m", "venv", cls.venv], check=True, capture_output=True, timeout=300)
        cls.py = os.path.join(cls.venv, "bin", "python")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_py(self, *args, cwd=None):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUMEMSAVER_LIBRARY")}
        env.update(CUMEMSAVER_NO_NATIVE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
        return subprocess.run(
            [self.py] + list(args), env=env, cwd=cwd or self.tmp, capture_output=True, text=True, timeout=300
        )

    def pip(self, *args):
        out = self.run_py("-m", "pip", *args)
        self.assertEqual(out.returncode, 0, f"pip {' '.join(args)}:\n{out.stdout}\n{out.stderr}")
        return out

    def test_install_offline_without_wheel_leaves_the_source_clean(self):
        self.assertNotEqual(self.run_py("-c", "import wheel").returncode, 0, "the venv has wheel")
        before = tree(self.src)
        self.pip("install", "--no-index", self.src)
        self.assertEqual(tree(self.src) - before, set(), "the build wrote into the source")
        out = self.run_py("-c", "import cumemsaver, os; print(cumemsaver.__file__, cumemsaver.__version__)")
        self.assertEqual(out.returncode, 0, out.stderr)
        path, version = out.stdout.split()
        self.assertTrue(os.path.realpath(path).startswith(os.path.realpath(self.venv) + os.sep), path)
        self.assertEqual(version, cumemsaver_build.project(SRC)["version"])
        listed = self.pip("show", "-f", "cumemsaver").stdout
        self.assertIn("cumemsaver/py.typed", listed)
        self.pip("uninstall", "-y", "cumemsaver")
        self.assertNotEqual(self.run_py("-c", "import cumemsaver").returncode, 0)

    def test_tms_install_offline_without_wheel_leaves_the_source_clean(self):
        self.assertNotEqual(self.run_py("-c", "import wheel").returncode, 0, "the venv has wheel")
        before = tree(self.src), tree(self.tms)
        self.pip("install", "--no-index", "--no-build-isolation", self.src, self.tms)
        self.assertEqual((tree(self.src), tree(self.tms)), before, "the build wrote into the source")
        listed = self.pip("show", "-f", "cumemsaver-torch-memory-saver").stdout
        self.assertIn("torch_memory_saver/hooks/mode_preload.py", listed)
        self.assertIn("Requires: cumemsaver", listed)
        out = self.run_py("-c", "import importlib.util as u; print(u.find_spec('torch_memory_saver').origin)")
        self.assertTrue(os.path.realpath(out.stdout.strip()).startswith(os.path.realpath(self.venv)), out)
        self.pip("uninstall", "-y", "cumemsaver-torch-memory-saver", "cumemsaver")
        self.assertEqual((tree(self.src), tree(self.tms)), before)

    def test_wheel_and_editable(self):
        before = tree(self.src)
        wheels = os.path.join(self.tmp, "wheels")
        self.pip("wheel", "--no-index", "-w", wheels, self.src)
        version = cumemsaver_build.project(SRC)["version"]
        self.assertEqual(os.listdir(wheels), [f"cumemsaver-{version}-py3-none-any.whl"])
        self.pip("wheel", "--no-index", "--no-deps", "-w", wheels, self.tms)
        self.assertIn(f"cumemsaver_torch_memory_saver-{version}-py3-none-any.whl", os.listdir(wheels))
        self.pip("install", "--no-index", "-e", self.src)
        out = self.run_py("-c", "import cumemsaver; print(cumemsaver.__file__)")
        self.assertEqual(out.stdout.strip(), os.path.join(self.src, "cumemsaver", "__init__.py"), out.stderr)
        self.pip("uninstall", "-y", "cumemsaver")
        self.assertEqual(tree(self.src) - before, set(), "the builds wrote into the source")


class TestBackend(unittest.TestCase):
    def test_project_table_as_tomllib_reads_it(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib is Python 3.11+")
        with open(os.path.join(SRC, "pyproject.toml"), "rb") as f:
            self.assertEqual(cumemsaver_build.project(SRC), tomllib.load(f)["project"])

    def test_config_of_both_packages(self):
        self.assertTrue(os.path.samefile(os.path.join(TMS, "cumemsaver_build.py"), cumemsaver_build.__file__),
                        "python-tms/cumemsaver_build.py is not a link to this backend")
        self.assertEqual(cumemsaver_build.config(SRC), {"package": "cumemsaver", "native": True})
        self.assertEqual(cumemsaver_build.config(TMS), {"package": "torch_memory_saver", "native": False})
        self.assertEqual(cumemsaver_build.project(TMS)["dependencies"], ["cumemsaver>=1.3"])
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib is Python 3.11+")
        for root in (SRC, TMS):
            with open(os.path.join(root, "pyproject.toml"), "rb") as f:
                self.assertEqual(cumemsaver_build.config(root), tomllib.load(f)["tool"]["cumemsaver_build"])

    def test_bad_config_is_an_error(self):
        tmp = tempfile.mkdtemp(prefix="cms-config-")
        self.addCleanup(shutil.rmtree, tmp)
        for table, why in (("", "needs package"), ('package = "a-b"\nnative = true', "needs package"),
                           ('package = "x"\nnative = "no"', "needs native")):
            with open(os.path.join(tmp, "pyproject.toml"), "w") as f:
                f.write(f"[project]\nname = \"x\"\n[tool.cumemsaver_build]\n{table}\n")
            with self.assertRaisesRegex(ValueError, why):
                cumemsaver_build.config(tmp)

    def test_package_files(self):
        names = [n for n, _ in cumemsaver_build.package_files(SRC)]
        self.assertIn("cumemsaver/py.typed", names)  # PEP 561: the package's annotations
        self.assertIn("cumemsaver/api.py", names)
        self.assertFalse([n for n in names if "__pycache__" in n or "_native" in n])
        names = [n for n, _ in cumemsaver_build.package_files(TMS)]
        self.assertIn("torch_memory_saver/hooks/base.py", names)
        self.assertFalse([n for n in names if not n.startswith("torch_memory_saver/")])

    def test_unreadable_value_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "cannot read the value of version"):
            cumemsaver_build._toml_table('[project]\nversion = 1.3\n')
        self.assertEqual(cumemsaver_build._toml_table('[project]\nname = "x"  # c\n[tool.x]\ny = 1\n'),
                         {"name": "x"})


if __name__ == "__main__":
    unittest.main()
