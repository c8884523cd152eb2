#!/bin/sh
# SPDX-License-Identifier: MIT
# `pip install ./bindings/python ./bindings/python-tms` serves the import name
# torch_memory_saver: in a fresh venv made without --system-site-packages (so with no wheel
# package and, from Python 3.12, no setuptools: as a pyenv or python.org interpreter's venv),
# offline, install both (cumemsaver's Python files only, CUMEMSAVER_NO_NATIVE=1:
# python_pip_install checks the library build), check that the build wrote nothing into the
# source (no build/, no *.egg-info), then in new processes with no PYTHONPATH check
#  - the installed distribution cumemsaver-torch-memory-saver: its files (the package and the
#    submodules the original's API and suite import) and its requirement on cumemsaver;
#  - `import torch_memory_saver` (over the stand-in torch) comes from the venv and is
#    cumemsaver's drop-in; without torch it raises NeedsPyTorch (unless torch is installed);
#  - an original torch_memory_saver, installed by pip from a stand-in project (name and
#    version of the original, no code of it; built by cumemsaver's backend, as no setuptools
#    is at hand) into a folder at the end of sys.path: the import
#    raises ImportError naming both; with CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver it warns
#    and serves cumemsaver's; with that folder first on sys.path Python imports the stand-in;
#  - `pip uninstall cumemsaver-torch-memory-saver`: the name is gone, cumemsaver stays.
# Usage: pip_install_check.sh REPO_ROOT [WORK_DIR]   (exit 0 pass, 77 skip, other fail)
set -eu
repo=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
py=${CMS_PIP_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3)
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
	echo "skip: $py has no venv/ensurepip (Debian: apt install python3-venv)"
	exit 77
fi
rm -rf "$work/venv" "$work/src" "$work/original" "$work/original-site"
# a copy of the two packages, so that the build's files (build/, *.egg-info) stay out of the
# checkout
mkdir -p "$work/src"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard bindings/python bindings/python-tms) |
		(cd "$repo" && xargs -0 cp --parents -t "$work/src")
else
	(cd "$repo" && tar -cf - --exclude='build' --exclude='*.egg-info' --exclude='__pycache__' \
		bindings/python bindings/python-tms) | (cd "$work/src" && tar -xf -)
fi
[ -f "$work/src/bindings/python-tms/pyproject.toml" ] || { echo "FAIL: copy of the tree"; exit 1; }
"$py" -m venv "$work/venv" # no --system-site-packages: no wheel package
vpy=$work/venv/bin/python
pip() { env -u PYTHONPATH "$vpy" -m pip --disable-pip-version-check -q "$@"; }
if env -u PYTHONPATH "$vpy" -c 'import wheel' 2>/dev/null; then
	echo "FAIL: the venv has the wheel package: it would not check the install without it"
	exit 1
fi
(cd "$work/src" && find . -name __pycache__ -prune -o -print | sort) >"$work/before.txt"
CUMEMSAVER_NO_NATIVE=1 pip install --no-build-isolation --no-index \
	"$work/src/bindings/python" "$work/src/bindings/python-tms"
(cd "$work/src" && find . -name __pycache__ -prune -o -print | sort) >"$work/after.txt"
if ! diff -u "$work/before.txt" "$work/after.txt"; then
	echo "FAIL: installing wrote into the source tree (above)"
	exit 1
fi
echo "installed offline without wheel; the source tree is unchanged"
stand_in=$repo/bindings/python/tests # fake_torch.py: the stand-in torch
run() { (cd "$work" && env -u PYTHONPATH -u LD_PRELOAD -u CUMEMSAVER_TORCH_MEMORY_SAVER "$@"); }

run "$vpy" - "$work/venv" "$stand_in" <<'EOF'
import importlib, importlib.metadata as md, os, sys
venv, stand_in = os.path.realpath(sys.argv[1]), sys.argv[2]
dist = md.distribution("cumemsaver-torch-memory-saver")
files = {str(f) for f in dist.files}
modules = ["torch_memory_saver/" + m for m in ("__init__.py", "_peer_check.py", "entrypoint.py",
           "utils.py", "testing_utils.py", "hooks/__init__.py", "hooks/base.py",
           "hooks/mode_preload.py")]
missing = [m for m in modules if m not in files]
assert not missing, f"not installed: {missing}"
assert any("".join(c for c in r if c not in " ()").startswith("cumemsaver>=") for r in dist.requires), dist.requires
sys.path.append(stand_in)
import fake_torch
if not fake_torch.real_torch():
    fake_torch.install()
import cumemsaver.torch_memory_saver as dropin
import torch_memory_saver
where = os.path.realpath(torch_memory_saver.__file__)
assert where.startswith(venv + os.sep), f"torch_memory_saver from {where}, not the venv"
assert torch_memory_saver.torch_memory_saver is dropin.torch_memory_saver
for m in ("entrypoint", "utils", "testing_utils", "hooks.base", "hooks.mode_preload"):
    importlib.import_module("torch_memory_saver." + m)
print(f"installed: {dist.metadata['Name']} {dist.version}, import torch_memory_saver: the drop-in")
EOF

if ! run "$vpy" -c 'import torch' 2>/dev/null; then
	out=$(run "$vpy" -c 'import torch_memory_saver' 2>&1) && { echo "FAIL: imported without torch"; exit 1; }
	echo "$out" | grep -q "NeedsPyTorch: cumemsaver.torch_memory_saver needs PyTorch" ||
		{ echo "FAIL: without torch:"; echo "$out"; exit 1; }
	echo "without torch: NeedsPyTorch"
fi

# an original torch_memory_saver as pip records it (distribution torch_memory_saver 0.0.10b1)
mkdir -p "$work/original/torch_memory_saver"
cat >"$work/original/pyproject.toml" <<'EOF'
[build-system]
requires = []
build-backend = "cumemsaver_build"
backend-path = ["."]
[project]
name = "torch_memory_saver"
version = "0.0.10b1"
description = "a stand-in for the original"
requires-python = ">=3.8"
[tool.cumemsaver_build]
package = "torch_memory_saver"
native = false
EOF
cp "$repo/bindings/python/cumemsaver_build.py" "$work/original/"
echo 'STAND_IN_ORIGINAL = True' >"$work/original/torch_memory_saver/__init__.py"
pip install --no-build-isolation --no-index --no-deps --target "$work/original-site" "$work/original"
site=$(cd "$work/original-site" && pwd)
probe="import sys; sys.path.append('$stand_in'); import fake_torch
fake_torch.real_torch() or fake_torch.install()"
out=$(run "$vpy" -c "$probe
sys.path.append('$site'); import torch_memory_saver" 2>&1) && { echo "FAIL: not refused"; exit 1; }
# (the metadata spells the name torch_memory_saver or torch-memory-saver: setuptools' choice)
for part in "ImportError: torch_memory_saver: both cumemsaver's drop-in, cumemsaver-torch-memory-saver 1\.3\.0" \
	"the original torch_memory_saver, torch[-_]memory[-_]saver 0\.0\.10b1 \(in $site\)" \
	"pip uninstall torch[-_]memory[-_]saver\`" "CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver"; do
	echo "$out" | grep -qE "$part" || { echo "FAIL: the refusal lacks '$part':"; echo "$out"; exit 1; }
done
echo "original at the end of sys.path: refused"
out=$(run env CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver "$vpy" -c "$probe
sys.path.append('$site'); import torch_memory_saver as t; print(type(t.torch_memory_saver).__module__)" 2>&1) ||
	{ echo "FAIL: CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver:"; echo "$out"; exit 1; }
echo "$out" | grep -q "RuntimeWarning: torch_memory_saver: CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver" &&
	echo "$out" | grep -qx "cumemsaver.torch_memory_saver" ||
	{ echo "FAIL: CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver:"; echo "$out"; exit 1; }
echo "CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver: a warning, cumemsaver's drop-in"
out=$(run env PYTHONPATH="$site" "$vpy" -c 'import torch_memory_saver as t; print(t.STAND_IN_ORIGINAL)' 2>&1)
[ "$out" = True ] || { echo "FAIL: the original first on sys.path:"; echo "$out"; exit 1; }
echo "original first on sys.path: Python imports it (no check of ours runs)"

pip uninstall -y cumemsaver-torch-memory-saver
run "$vpy" -c 'import torch_memory_saver' 2>/dev/null && { echo "FAIL: still importable after uninstall"; exit 1; }
run "$vpy" -c 'import cumemsaver' || { echo "FAIL: cumemsaver went with it"; exit 1; }

# installed with --no-deps where cumemsaver is not: the import says what is missing and how
# to install it (Python's own error would say "No module named 'cumemsaver'" only)
pip uninstall -y cumemsaver
pip install --no-build-isolation --no-index --no-deps "$work/src/bindings/python-tms"
out=$(run "$vpy" -c 'import torch_memory_saver' 2>&1) && { echo "FAIL: imported without cumemsaver"; exit 1; }
for part in "ModuleNotFoundError: torch_memory_saver: cumemsaver-torch-memory-saver serves this name" \
	"cumemsaver is not installed" "pip install ./bindings/python"; do
	echo "$out" | grep -qF "$part" || { echo "FAIL: without cumemsaver, no '$part':"; echo "$out"; exit 1; }
done
echo "--no-deps without cumemsaver: the import names it and how to install it"
echo "pip install / import by name / the original detected / uninstall: ok"
