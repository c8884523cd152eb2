#!/usr/bin/env bash
# GPU call for issue 35 item 1: torch_memory_saver's own example suite against cumemsaver
# through the import name torch_memory_saver alone, installed as a user installs it.
# Usage (GPU machine, repository root): bash lab/gpu-session/tms-shim.sh [all|suite|detect]
# Carry .peer: `cp -r ../shared/peer .peer` (the peer's tarball torch_memory_saver-4a43c97.tar.gz;
# /.peer/ is git-ignored, so name it in carry), or set PEER_TARBALL. Set CMS_COMMIT (the device
# copy's .git may lag). Logs: $OUT/tms-shim/*.txt (OUT default /tmp/gpu-session); summary printed.
#  install  `pip install --no-build-isolation --no-index ./bindings/python ./bindings/python-tms`
#           into a venv (--system-site-packages: torch, pytest from the machine) in
#           build-tms-shim/ (kept between calls on a warm machine); `pip install --target`
#           where the interpreter has no venv module. pip builds and bundles libcumemsaver.
#  which    from a folder outside the tree, with PYTHONPATH, CUMEMSAVER_LIBRARY and
#           CMS_DRIVER_LIBRARY unset: which torch_memory_saver and libcumemsaver that
#           interpreter imports (must be the installed ones)
#  suite    (all, suite) the peer's test/test_examples.py, its test/ folder alone out of the
#           tarball (none of the peer's package), -k "${PYTEST_K:-not xpu and not multi_device}"
#           (19 cases on one GPU): the 10 public cases must pass; the 7 that read the peer's
#           private internals and the 2 disk_backup cases (files unlinked at once) fail, as
#           docs/python.md lists
#  detect   (all when >= 150 s are left, detect) builds the peer (TMS_CUDA_MAJOR=13) into
#           build-tms-shim/peer-site, then: that folder at the end of sys.path -> ImportError
#           naming both; with CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver -> RuntimeWarning and
#           cumemsaver's drop-in; that folder first on sys.path (PYTHONPATH) -> the peer
set -uo pipefail
phase=${1:-all}
case "$phase" in all | suite | detect) ;; *) echo "usage: tms-shim.sh [all|suite|detect]"; exit 2 ;; esac
root=$PWD
out=${OUT:-/tmp/gpu-session}/tms-shim
mkdir -p "$out"
tarball=${PEER_TARBALL:-.peer/torch_memory_saver-4a43c97.tar.gz}
[ -f "$tarball" ] || { echo "no peer tarball at $tarball: cp -r ../shared/peer .peer and carry .peer"; exit 2; }
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
budget=${BUDGET_S:-560}
mkdir -p "$root/build-tms-shim"
work=$(cd "$root/build-tms-shim" && pwd -P)
# The machine's own PYTHONPATH (where its torch may live) is kept for the interpreter, after ours
sys_pythonpath=${PYTHONPATH:-}
unset CUMEMSAVER_LIBRARY CMS_DRIVER_LIBRARY CUMEMSAVER_PRELOAD PYTHONPATH LD_PRELOAD CUMEMSAVER_TORCH_MEMORY_SAVER
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uname -r
	echo "commit ${CMS_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}"; echo "command $0 $*"
	python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
	python3 -c 'import importlib.metadata as m; print("the machine has torch-memory-saver", m.version("torch-memory-saver"))' 2>/dev/null ||
		echo "the machine has no torch-memory-saver distribution"; } >>"$out/env.txt" 2>&1
left() { echo $((budget - SECONDS)); }
step() { # name timeout cmd...: when 30 s are left at least; output to $out/name.txt
	local name=$1 t=$2 l t0=$SECONDS rc
	shift 2
	l=$(left)
	[ "$l" -lt 30 ] && { echo "== $name: skipped, $l s left"; return 99; }
	[ "$t" -gt "$l" ] && t=$l
	timeout "$t" "$@" >"$out/$name.txt" 2>&1
	rc=$?
	echo "== $name: rc=$rc $((SECONDS - t0)) s"
	return $rc
}

# install: $work/py runs the interpreter that has both packages (a script: timeout runs it)
site=
if ! "$work/venv/bin/python" -m pip --version >/dev/null 2>&1; then # none yet, or one without pip
	rm -rf "$work/venv"
	python3 -m venv --system-site-packages "$work/venv" >"$out/venv.txt" 2>&1 || rm -rf "$work/venv"
fi
if [ -x "$work/venv/bin/python" ] && PYTHONPATH=$sys_pythonpath "$work/venv/bin/python" -c 'import torch' 2>/dev/null; then
	vpy=$work/venv/bin/python
elif [ -x "$work/venv/bin/python" ] && ! PYTHONPATH=$sys_pythonpath python3 -c 'import torch' 2>/dev/null; then
	vpy=$work/venv/bin/python # no torch anywhere: the suite cannot run, the install still can
else
	vpy=$(command -v python3) site=$work/site # no venv module: pip install --target, on PYTHONPATH
	echo "no venv ($(tail -n 1 "$out/venv.txt")): pip install --target $site"
fi
{ echo '#!/bin/sh'
	[ -z "$site" ] || echo "export PYTHONPATH=\${PYTHONPATH:+\$PYTHONPATH:}'$site'${sys_pythonpath:+:'$sys_pythonpath'}"
	[ -n "$site" ] || [ -z "$sys_pythonpath" ] || echo "export PYTHONPATH=\${PYTHONPATH:+\$PYTHONPATH:}'$sys_pythonpath'"
	echo "exec '$vpy' \"\$@\""; } >"$work/py"
chmod +x "$work/py"
step install 300 env CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} "$vpy" -m pip install --disable-pip-version-check \
	--no-build-isolation --no-index ${site:+--target "$site" --upgrade} \
	"$root/bindings/python" "$root/bindings/python-tms" ||
	{ tail -n 30 "$out/install.txt"; exit 1; }
tail -n 2 "$out/install.txt"
cd "$work" # outside the tree: nothing of bindings/ on sys.path

which_py='import importlib.metadata as md, os, sys
import torch, torch_memory_saver, cumemsaver.torch_memory_saver as dropin
from cumemsaver import _lib
from torch_memory_saver.utils import get_binary_path_from_package
print("python", sys.executable, "torch", torch.__version__)
print("torch_memory_saver", os.path.realpath(torch_memory_saver.__file__))
print("distribution cumemsaver-torch-memory-saver", md.version("cumemsaver-torch-memory-saver"))
print("the singleton is cumemsaver.torch_memory_saver.torch_memory_saver:", torch_memory_saver.torch_memory_saver is dropin.torch_memory_saver)
print("libcumemsaver", os.path.realpath(_lib.lib()._name))
print("preload", get_binary_path_from_package("torch_memory_saver_hook_mode_preload"))'
if ! step which 60 "$work/py" -c "$which_py"; then
	if grep -q "provide this import name" "$out/which.txt"; then # the machine has the peer
		echo "the peer is installed on this machine (which.txt): CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver from here on"
		mv "$out/which.txt" "$out/which-refused.txt"
		export CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver
		step which 60 "$work/py" -c "$which_py" || { cat "$out/which.txt"; exit 1; }
	else
		cat "$out/which.txt"; exit 1
	fi
fi
cat "$out/which.txt"
grep -q "^torch_memory_saver $work/" "$out/which.txt" ||
	{ echo "FAIL: torch_memory_saver is not the one installed in $work"; exit 1; }

if [ "$phase" != detect ]; then
	rm -rf "$work/peer-test" && mkdir -p "$work/peer-test"
	tar -xzf "$tarball" -C "$work/peer-test" --wildcards '*/test/*' # its tests, not its package
	tests=$(dirname "$(find "$work/peer-test" -name test_examples.py | head -n 1)")
	# -p no:cacheprovider: nothing written into the peer's folder
	step suite 420 bash -c "cd '$tests' && PYTHONUNBUFFERED=1 exec '$work/py' -m pytest -q -rA \
		--timeout 300 -p no:cacheprovider test_examples.py -k '${PYTEST_K:-not xpu and not multi_device}'"
	grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|[0-9]+ (passed|failed)" "$out/suite.txt" | tail -n 30
	public="test_simple[preload] test_simple[torch] test_cuda_graph[preload] test_cuda_graph[torch]
		test_rl_example[preload] test_rl_example[torch] test_cpu_backup_retain_from_env[preload]
		test_cpu_backup_retain_from_env[torch] test_cpu_backup_rss test_training_engine"
	n=0 missed=
	for c in $public; do
		if grep -qF "PASSED test_examples.py::$c" "$out/suite.txt"; then n=$((n + 1)); else missed="$missed $c"; fi
	done
	echo "public cases passed: $n of 10${missed:+; not passed:$missed}"
fi

if [ "$phase" = detect ] || { [ "$phase" = all ] && [ "$(left)" -ge 150 ]; }; then
	psite=$work/peer-site
	if ! ls "$psite"/torch_memory_saver-*.dist-info >/dev/null 2>&1; then
		rm -rf "$work/peer-src" "$psite" && mkdir -p "$work/peer-src"
		tar -xzf "$tarball" -C "$work/peer-src"
		src=$(dirname "$(find "$work/peer-src" -maxdepth 2 -name setup.py | head -n 1)")
		step peer-build 200 bash -c "cd '$src' && TMS_CUDA_MAJOR=13 python3 -m pip install -q \
			--disable-pip-version-check --no-build-isolation --no-deps --no-index --target '$psite' ." ||
			{ tail -n 20 "$out/peer-build.txt"; exit 1; }
	fi
	ok=0
	step detect-refused 60 env -u CUMEMSAVER_TORCH_MEMORY_SAVER "$work/py" -c \
		"import sys; sys.path.append('$psite'); import torch_memory_saver"
	rc=$?
	tail -n 1 "$out/detect-refused.txt" | cut -c1-400
	[ $rc -ne 0 ] && grep -q "^ImportError: torch_memory_saver: both cumemsaver's drop-in.*(in $psite)" \
		"$out/detect-refused.txt" && ok=$((ok + 1)) && echo "PASS: at the end of sys.path: refused, naming both"
	step detect-chosen 60 env CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver "$work/py" -c "import sys
sys.path.append('$psite'); import torch_memory_saver as t; print(type(t.torch_memory_saver).__module__)" &&
		grep -q "RuntimeWarning: torch_memory_saver: CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver" \
			"$out/detect-chosen.txt" && grep -qx "cumemsaver.torch_memory_saver" "$out/detect-chosen.txt" &&
		ok=$((ok + 1)) && echo "PASS: CUMEMSAVER_TORCH_MEMORY_SAVER=cumemsaver: a warning, then cumemsaver's"
	step detect-peer-first 60 env -u CUMEMSAVER_TORCH_MEMORY_SAVER PYTHONPATH="$psite" "$work/py" -c \
		'import os, torch_memory_saver as t; print(os.path.realpath(t.__file__))' &&
		grep -q "^$psite/torch_memory_saver/__init__.py" "$out/detect-peer-first.txt" &&
		ok=$((ok + 1)) && echo "PASS: the peer first on sys.path: Python imports the peer (no check of ours runs)"
	echo "detect: $ok of 3 as expected"
fi
echo "tms-shim $phase done in $SECONDS s; logs in $out"
