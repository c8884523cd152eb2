#!/bin/sh
# SPDX-License-Identifier: MIT
# `pip install ./bindings/python` brings the C library: in a fresh venv (no
# --system-site-packages: no wheel package, nothing from the network), build the wheel from
# the tree (the package's own build backend runs CMake), check that the build wrote nothing
# into the source (no build/, no *.egg-info) and the wheel's tag (py3-none-<platform>: no
# extension module), install it, then in a new process with no CUMEMSAVER_LIBRARY import it,
# check that it loaded the library bundled inside the package, run a HOST pause/resume on the
# host simulation (also bundled) selected by cumemsaver.SIMULATION and by
# CMS_DRIVER_LIBRARY=sim, find the preload library and check that a child started with it is
# interposed; then uninstall and check that the package is gone.
# Usage: pip_install_check.sh REPO_ROOT [WORK_DIR]   (exit 0 pass, 77 skip, other fail)
set -eu
repo=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
# Debian's interpreter (python3-venv); else python3 on PATH. Any Python 3.8+ with venv will do.
py=${CMS_PIP_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3)
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
	echo "skip: $py has no venv/ensurepip (Debian: apt install python3-venv)"
	exit 77
fi
command -v cmake >/dev/null || { echo "skip: no cmake"; exit 77; }
rm -rf "$work/venv" "$work/src"
# a copy of the tree, so that the build's own files (build/, *.egg-info) stay out of the
# checkout and each run starts clean
mkdir -p "$work/src"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
		(cd "$repo" && xargs -0 cp --parents -t "$work/src" 2>/dev/null) || true
else
	(cd "$repo" && tar -cf - --exclude='./build*' --exclude='*.egg-info' .) | (cd "$work/src" && tar -xf -)
fi
[ -f "$work/src/bindings/python/pyproject.toml" ] || { echo "FAIL: copy of the tree"; exit 1; }
"$py" -m venv "$work/venv"
vpy=$work/venv/bin/python
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-1}
rm -rf "$work/wheel"
(cd "$work/src" && find . -name __pycache__ -prune -o -print | sort) >"$work/before.txt"
env -u CUMEMSAVER_LIBRARY -u PYTHONPATH "$vpy" -m pip wheel --no-index \
	--disable-pip-version-check -q -w "$work/wheel" "$work/src/bindings/python"
(cd "$work/src" && find . -name __pycache__ -prune -o -print | sort) >"$work/after.txt"
if ! diff -u "$work/before.txt" "$work/after.txt"; then
	echo "FAIL: building the wheel wrote into the source tree (above)"
	exit 1
fi
wheel=$(ls "$work/wheel"/cumemsaver-*.whl)
case $(basename "$wheel") in
cumemsaver-*-py3-none-linux_*.whl) echo "wheel: $(basename "$wheel")" ;;
*) echo "FAIL: wheel $(basename "$wheel") is not tagged py3-none-<platform>"; exit 1 ;;
esac
env -u CUMEMSAVER_LIBRARY -u PYTHONPATH "$vpy" -m pip install --no-index \
	--disable-pip-version-check -q "$wheel"
cd "$work"
env -u CUMEMSAVER_LIBRARY -u CMS_DRIVER_LIBRARY -u PYTHONPATH -u LD_PRELOAD \
	-u CUMEMSAVER_PRELOAD "$vpy" - "$work/venv" <<'EOF'
import os, sys, ctypes
venv = os.path.realpath(sys.argv[1])
import cumemsaver as cms
from cumemsaver import _lib, preload
pkg = os.path.dirname(os.path.realpath(cms.__file__))
assert pkg.startswith(venv + os.sep), f"imported from {pkg}, not the venv {venv}"
native = os.path.join(pkg, "_native")
lib = _lib.lib()
assert os.path.realpath(lib._name) == os.path.join(native, _lib.SONAME), lib._name
ctx = cms.Context(driver_path=cms.SIMULATION)
region = ctx.region("weights", policy=cms.Policy.HOST)
ptr = region.alloc(1 << 20)
data = bytes(range(256)) * 16
ctypes.memmove(ptr, data, len(data))
ctx.pause("weights")
assert region.info().paused
ctx.resume("weights")
assert ctypes.string_at(ptr, len(data)) == data, "content lost across pause/resume"
sim = os.path.join(native, "libcumemsaver-sim.so")
assert any(line.rstrip().endswith(sim) for line in open("/proc/self/maps")), "not the bundled sim"
assert preload.library_path() == os.path.join(native, "libcumemsaver-preload.so")
# the bundled interposer loads in a child (its RUNPATH finds the bundled library) and
# shares that library with the bindings
import subprocess
out = subprocess.run([sys.executable, "-c", "import cumemsaver.preload as p; print(p.active())"],
                     env=preload.env(), capture_output=True, text=True, timeout=60)
assert out.stdout.strip() == "True", (out.stdout, out.stderr)
print("import, pause/resume on the bundled library and simulation: ok")
EOF
env -u CUMEMSAVER_LIBRARY -u PYTHONPATH CMS_DRIVER_LIBRARY=sim "$vpy" -c '
import cumemsaver as cms
with cms.Context() as ctx:
    ctx.region("a").alloc(1 << 20)
    print("CMS_DRIVER_LIBRARY=sim: the bundled simulation,", ctx.device_memory_info().total, "bytes")
'
"$vpy" -m pip uninstall -y -q cumemsaver
if env -u PYTHONPATH "$vpy" -c 'import cumemsaver' 2>/dev/null; then
	echo "FAIL: cumemsaver still importable after pip uninstall"
	exit 1
fi
echo "pip install / import / pause-resume / uninstall: ok"
