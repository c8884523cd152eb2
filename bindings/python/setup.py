# SPDX-License-Identifier: MIT
"""Builds the C library with CMake and bundles it in the package (cumemsaver/_native/).

`pip install ./bindings/python` runs build_py, which configures and builds the repository's
CMake project (only the libraries: no tests, no tools) and copies libcumemsaver.so.1,
libcumemsaver-preload.so and the host simulation libcumemsaver-sim.so into the package, where
cumemsaver._lib loads them first. Metadata is in pyproject.toml.

Environment:
  CUMEMSAVER_SOURCE_DIR   the repository root (default: two levels above this file)
  CUMEMSAVER_CMAKE_ARGS   extra arguments for the CMake configure step (space-separated)
  CUMEMSAVER_NO_NATIVE=1  install the Python files only (the library comes from elsewhere:
                          CUMEMSAVER_LIBRARY, pkg-config or the system loader)
  CMAKE_BUILD_PARALLEL_LEVEL  build jobs (CMake's own variable)

The wheel is tagged py3-none-<platform> (no extension module: any Python 3 loads the bundled
libraries with ctypes), py3-none-any with CUMEMSAVER_NO_NATIVE=1.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
# file in the build tree -> name in cumemsaver/_native/
NATIVE = {
    "libcumemsaver.so.1": "libcumemsaver.so.1",
    "libcumemsaver-preload.so": "libcumemsaver-preload.so",
    os.path.join("src", "sim", "libcumemsaver-sim.so"): "libcumemsaver-sim.so",
}
TARGETS = ["cumemsaver", "cumemsaver-preload", "cumemsaver-sim"]


def _source_dir():
    src = os.environ.get("CUMEMSAVER_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
    if not os.path.exists(os.path.join(src, "CMakeLists.txt")) or not os.path.exists(
        os.path.join(src, "include", "cumemsaver.h")
    ):
        raise SystemExit(
            f"cumemsaver: no cumemsaver source tree at {src} (CMakeLists.txt and "
            "include/cumemsaver.h) to build libcumemsaver from: set CUMEMSAVER_SOURCE_DIR to the "
            "repository root, or CUMEMSAVER_NO_NATIVE=1 to install the Python files only"
        )
    return src


def _run(cmd):
    print("cumemsaver: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


class BuildPyWithNative(build_py):
    """build_py, then the C libraries into <build_lib>/cumemsaver/_native/."""

    def run(self):
        super().run()
        if os.environ.get("CUMEMSAVER_NO_NATIVE") == "1":
            return
        if not shutil.which("cmake"):
            raise SystemExit(
                "cumemsaver: building libcumemsaver needs cmake and a C compiler "
                "(Debian: apt install cmake gcc), or set CUMEMSAVER_NO_NATIVE=1"
            )
        src = _source_dir()
        build_temp = self.get_finalized_command("build").build_temp
        build_dir = os.path.join(os.path.abspath(build_temp), "cmake")
        configure = [
            "cmake", "-S", src, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCMS_BUILD_TESTS=OFF",
            "-DCMS_BUILD_TOOLS=OFF",
        ]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += os.environ.get("CUMEMSAVER_CMAKE_ARGS", "").split()
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            _run(configure)
        _run(["cmake", "--build", build_dir, "--target"] + TARGETS)
        dest = os.path.join(self.build_lib, "cumemsaver", "_native")
        os.makedirs(dest, exist_ok=True)
        for built, name in NATIVE.items():
            path = os.path.join(build_dir, built)
            if not os.path.exists(path):
                raise SystemExit(f"cumemsaver: the build made no {path}")
            # copy the file a link points at, under the name the loader asks for
            shutil.copyfile(os.path.realpath(path), os.path.join(dest, name))
            os.chmod(os.path.join(dest, name), 0o755)


class BinaryDistribution(Distribution):
    """Native libraries inside: a platform wheel, installed in platlib."""

    def has_ext_modules(self):
        return os.environ.get("CUMEMSAVER_NO_NATIVE") != "1"


try:  # setuptools >= 70.1 has its own; Debian 12's setuptools 66 uses the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None

cmdclass = {"build_py": BuildPyWithNative}
if bdist_wheel is not None:

    class BdistWheelAnyPython(bdist_wheel):
        """py3-none-<platform>: the package has no extension module (ctypes only), so any
        Python 3 on the platform of the bundled libraries can use the wheel; py3-none-any
        with CUMEMSAVER_NO_NATIVE=1."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = BdistWheelAnyPython

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
