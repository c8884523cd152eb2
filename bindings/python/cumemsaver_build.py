# SPDX-License-Identifier: MIT
"""The PEP 517 build backend of the cumemsaver package (pyproject.toml: build-backend), in the
standard library only: `pip install ./bindings/python` needs no setuptools and no wheel
package, so it works offline in any venv of Python 3.8 or later (a venv made by pyenv's or
python.org's interpreter has neither wheel nor, since 3.12, setuptools).
bindings/python-tms/cumemsaver_build.py is a link to this file: the same backend builds the
package torch_memory_saver (Python files only).

pyproject.toml's [tool.cumemsaver_build] table says what to build: `package` (the top-level
package directory beside pyproject.toml) and `native` (true: the C libraries too, as below;
false: the Python files only, a py3-none-any wheel).

build_wheel of a native package configures and builds the repository's CMake project (only
the libraries: no tests, no tools) in a temporary directory, copies libcumemsaver.so.1,
libcumemsaver-preload.so and the host simulation libcumemsaver-sim.so into
cumemsaver/_native/ of the wheel, where cumemsaver._lib loads them first, and removes the
temporary directory: nothing is written into the source tree (no build/, no *.egg-info).
The metadata comes from pyproject.toml's [project] table.

Environment:
  CUMEMSAVER_SOURCE_DIR   the repository root (default: two levels above this file)
  CUMEMSAVER_CMAKE_ARGS   extra arguments for the CMake configure step (space-separated)
  CUMEMSAVER_NO_NATIVE=1  the Python files only, for a native package too (the library
                          comes from elsewhere: CUMEMSAVER_LIBRARY, pkg-config or the
                          system loader)
  CMAKE_BUILD_PARALLEL_LEVEL  build jobs (CMake's own variable)

The wheel is tagged py3-none-<platform> (no extension module: any Python 3 loads the bundled
libraries with ctypes), py3-none-any with CUMEMSAVER_NO_NATIVE=1. An editable install
(pip install -e) puts the source directory on sys.path and bundles no library (as
CUMEMSAVER_NO_NATIVE=1).
"""

import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

# the directory of pyproject.toml (abspath, not realpath: through the link, python-tms's)
HERE = os.path.dirname(os.path.abspath(__file__))
# file in the CMake build tree -> name in cumemsaver/_native/
NATIVE = {
    "libcumemsaver.so.1": "libcumemsaver.so.1",
    "libcumemsaver-preload.so": "libcumemsaver-preload.so",
    os.path.join("src", "sim", "libcumemsaver-sim.so"): "libcumemsaver-sim.so",
}
TARGETS = ["cumemsaver", "cumemsaver-preload", "cumemsaver-sim"]
# the files of the package: its modules and the PEP 561 marker
PACKAGE_SUFFIXES = (".py", "py.typed")
# a fixed time for every archive member: the same sources give the same archive
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


# ---- metadata (pyproject.toml [project], [tool.cumemsaver_build]) --------------------------


def _toml_table(text, name="project"):
    """The table [name] of pyproject.toml as a dict. Reads the subset it uses (the standard
    library has no TOML reader before 3.11): `key = "string"`, `key = ["string", ...]` on one
    line, `key = { text = "string" }` and `key = true` / `false`; anything else there is an
    error."""
    table, inside = {}, False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            inside = line == f"[{name}]"
            continue
        if not inside:
            continue
        m = re.fullmatch(r'([A-Za-z0-9_-]+)\s*=\s*(.+)', line)
        if not m:
            raise ValueError(f"pyproject.toml:{n}: cannot read {raw!r}")
        key, value = m.groups()
        if re.fullmatch(r'"[^"\\]*"', value):
            table[key] = value[1:-1]
        elif re.fullmatch(r'\[\s*("[^"\\]*"\s*(,\s*"[^"\\]*"\s*)*,?\s*)?\]', value):
            table[key] = re.findall(r'"([^"\\]*)"', value)
        elif re.fullmatch(r'\{\s*text\s*=\s*"[^"\\]*"\s*\}', value):
            table[key] = {"text": re.search(r'"([^"\\]*)"', value).group(1)}
        elif value in ("true", "false"):
            table[key] = value == "true"
        else:
            raise ValueError(f"pyproject.toml:{n}: cannot read the value of {key}: {value!r}")
    return table


def _pyproject(root):
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
        return f.read()


def config(root=HERE):
    """The [tool.cumemsaver_build] table of root/pyproject.toml: package (a string, the
    directory of the top-level package beside it) and native (a boolean)."""
    table = _toml_table(_pyproject(root), "tool.cumemsaver_build")
    package = table.get("package")
    if not isinstance(package, str) or not re.fullmatch(r"[A-Za-z_]\w*", package):
        raise ValueError("pyproject.toml: [tool.cumemsaver_build] needs package (a package name)")
    if not isinstance(table.get("native"), bool):
        raise ValueError("pyproject.toml: [tool.cumemsaver_build] needs native (true or false)")
    return table


def project(root=HERE):
    """The [project] table of root/pyproject.toml, checked against the package's
    __version__ where its __init__.py sets one."""
    table = _toml_table(_pyproject(root))
    for key in ("name", "version", "description", "requires-python"):
        if not isinstance(table.get(key), str):
            raise ValueError(f"pyproject.toml: [project] needs {key} (a string)")
    package = config(root)["package"]
    with open(os.path.join(root, package, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if m and m.group(1) != table["version"]:
        raise ValueError(
            f"pyproject.toml says version {table['version']}, {package}/__init__.py says "
            f"{m.group(1)}: make them agree"
        )
    return table


def _metadata(root=HERE):
    p = project(root)
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
        f"Requires-Python: {p['requires-python']}",
    ]
    if isinstance(p.get("license"), dict):
        lines.append(f"License: {p['license']['text']}")
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str):
        with open(os.path.join(root, readme), encoding="utf-8") as f:
            body = f.read()
        kind = "text/markdown" if readme.endswith(".md") else "text/plain"
        lines.append(f"Description-Content-Type: {kind}")
    return "\n".join(lines) + "\n\n" + body


def _dist_name(root=HERE):
    p = project(root)
    return f"{re.sub(r'[-_.]+', '_', p['name'])}-{p['version']}"


def _tag(native):
    if not native:
        return "py3-none-any"
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _wheel_file(native):
    return (
        "Wheel-Version: 1.0\n"
        "Generator: cumemsaver_build\n"
        f"Root-Is-Purelib: {'false' if native else 'true'}\n"
        f"Tag: {_tag(native)}\n"
    )


def _native_wanted():
    return config()["native"] and os.environ.get("CUMEMSAVER_NO_NATIVE") != "1"


# ---- the package's files and the C libraries ----------------------------------------------


def package_files(root=HERE):
    """(archive name, path) of the package's modules and py.typed, sorted."""
    out = []
    base = os.path.join(root, config(root)["package"])
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "_native"))
        for name in sorted(filenames):
            if name.endswith(PACKAGE_SUFFIXES):
                path = os.path.join(dirpath, name)
                out.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    return out


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
    subprocess.run(cmd, check=True, stdout=sys.stderr)  # pip shows it with -v or on failure


def _build_native(build_dir):
    """Builds the libraries in build_dir; returns (name in _native/, path)."""
    if not shutil.which("cmake"):
        raise SystemExit(
            "cumemsaver: building libcumemsaver needs cmake and a C compiler "
            "(Debian: apt install cmake gcc), or set CUMEMSAVER_NO_NATIVE=1"
        )
    configure = [
        "cmake", "-S", _source_dir(), "-B", build_dir,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMS_BUILD_TESTS=OFF",
        "-DCMS_BUILD_TOOLS=OFF",
    ]  # fmt: skip
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    configure += os.environ.get("CUMEMSAVER_CMAKE_ARGS", "").split()
    _run(configure)
    _run(["cmake", "--build", build_dir, "--target"] + TARGETS)
    out = []
    for built, name in NATIVE.items():
        path = os.path.join(build_dir, built)
        if not os.path.exists(path):
            raise SystemExit(f"cumemsaver: the build made no {path}")
        out.append((name, os.path.realpath(path)))  # the file a link points at
    return out


# ---- archives --------------------------------------------------------------------------


class _Wheel:
    """A wheel being written: members with their RECORD lines."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, name, data, executable=False):
        info = zipfile.ZipInfo(name, ZIP_TIME)
        info.external_attr = (0o100755 if executable else 0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{name},sha256={digest},{len(data)}")

    def close(self, dist_info):
        name = f"{dist_info}/RECORD"
        self.record.append(f"{name},,")
        info = zipfile.ZipInfo(name, ZIP_TIME)
        info.external_attr = 0o100644 << 16
        self.zip.writestr(info, "\n".join(self.record) + "\n")
        self.zip.close()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write_wheel(wheel_directory, native, members):
    """Writes the wheel of members ((name, bytes, executable)); returns its file name."""
    dist = _dist_name()
    dist_info = f"{dist}.dist-info"
    filename = f"{dist}-{_tag(native)}.whl"
    path = os.path.join(wheel_directory, filename)
    wheel = _Wheel(path)
    try:
        for name, data, executable in members:
            wheel.add(name, data, executable)
        wheel.add(f"{dist_info}/METADATA", _metadata().encode())
        wheel.add(f"{dist_info}/WHEEL", _wheel_file(native).encode())
        wheel.add(f"{dist_info}/top_level.txt", f"{config()['package']}\n".encode())
        wheel.close(dist_info)
    except BaseException:
        wheel.zip.close()
        os.unlink(path)
        raise
    return filename


def _write_metadata(metadata_directory, native):
    dist_info = os.path.join(metadata_directory, f"{_dist_name()}.dist-info")
    os.makedirs(dist_info, exist_ok=True)
    for name, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file(native))):
        with open(os.path.join(dist_info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return os.path.basename(dist_info)


# ---- PEP 517 / PEP 660 hooks -------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory, _native_wanted())


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory, False)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    native = _native_wanted()
    members = [(name, _read(path), False) for name, path in package_files()]
    if native:
        build_dir = tempfile.mkdtemp(prefix="cumemsaver-cmake-")
        try:
            for name, path in _build_native(build_dir):
                members.append((f"{config()['package']}/_native/{name}", _read(path), True))
        finally:
            shutil.rmtree(build_dir, ignore_errors=True)
    return _write_wheel(wheel_directory, native, members)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # a .pth file puts this directory on sys.path: the package runs from the source
    pth = (HERE + "\n").encode()
    pth_name = f"__editable__.{config()['package']}.pth"
    return _write_wheel(wheel_directory, False, [(pth_name, pth, False)])


def build_sdist(sdist_directory, config_settings=None):
    """The Python sources (pyproject.toml, this backend, README.md, the package) as
    <name>-<version>.tar.gz. Building its wheel needs the repository for the library
    (CUMEMSAVER_SOURCE_DIR), or CUMEMSAVER_NO_NATIVE=1."""
    dist = _dist_name()
    filename = f"{dist}.tar.gz"
    files = [("pyproject.toml", os.path.join(HERE, "pyproject.toml")),
             ("cumemsaver_build.py", os.path.abspath(__file__)),
             ("README.md", os.path.join(HERE, "README.md"))] + package_files()  # fmt: skip
    path = os.path.join(sdist_directory, filename)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:

        def add(name, data):
            info = tarfile.TarInfo(f"{dist}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 315532800  # 1980-01-01
            tar.addfile(info, io.BytesIO(data))

        for name, path in files:
            add(name, _read(path))
        add("PKG-INFO", _metadata().encode())
    return filename
