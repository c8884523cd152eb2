#!/usr/bin/env bash
# IPC on the GPU machine (issue 7, docs/ipc.md): builds, runs the IPC suites (protocol unit
# test, two-process tests on the host simulation) and cms-ipc-demo on the real driver:
#   (a) one importer of a 4 GiB weights region (4 x 1 GiB), 3 pause/resume cycles: the
#       importer's CUDA graph reads the weights, the exporter's pause raises the driver's free
#       memory by 4 GiB with the importer alive, the graph replays correctly after each resume;
#   (b) the same with 4 importers (pause/resume times with 4 importers);
#   (c) 1,000 allocations (1000 x 2 MiB): import time, pause/resume with 1 importer;
#   (d) 1,000 allocations with 4 importers;
#   (e) a read-only grant (256 MiB).
# Check comes from an unpacked copy of the Debian packages in .deps/check, as for
# tools/scripts/gpu-suite.sh. Logs go to $OUT, else lab/results/<date>-<device>-ipc
# (tools/scripts/gpu-out.sh). Usage: bash tools/scripts/gpu-ipc.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out ipc || exit 1
cms_run_info "$0" "$@" >"$out/run.txt"
build=${CMS_GPU_BUILD:-/tmp/cms-build-ipc}
{
	date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
	uname -r; gcc --version | head -n1; cmake --version | head -n1
} >"$out/ipc-env.txt" 2>&1
check=()
[ -d "$PWD/.deps/check" ] && check=(-DCMS_CHECK_ROOT="$PWD/.deps/check") || check=(-DCMS_BUILD_TESTS=OFF)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${check[@]}" \
	>"$out/ipc-build.log" 2>&1 && ninja -C "$build" >>"$out/ipc-build.log" 2>&1 || {
	tail -n 40 "$out/ipc-build.log"; exit 1; }
ctest_rc=0
if [ -f "$build/tests/CTestTestfile.cmake" ]; then
	(cd "$build" && ctest --output-on-failure -R "ipc" -E lint) >"$out/ipc-ctest.log" 2>&1
	ctest_rc=$?
	grep -E "tests passed|tests failed|\(Failed\)|Checks:" "$out/ipc-ctest.log"
fi
demo="$build/bin/cms-ipc-demo"
rcs=()
run() { # name, args...
	local name=$1; shift
	echo "== $name: cms-ipc-demo --gpu $*"
	timeout 150 "$demo" --gpu "$@" >"$out/ipc-$name.log" 2>&1
	local rc=$?
	cat "$out/ipc-$name.log"
	rcs+=("$name=$rc")
}
run a-4g-1importer --size 4G --allocs 4 --importers 1 --cycles 3
run b-4g-4importers --size 4G --allocs 4 --importers 4 --cycles 3
run c-1000allocs-1importer --size 2000M --allocs 1000 --importers 1 --cycles 2
run d-1000allocs-4importers --size 2000M --allocs 1000 --importers 4 --cycles 2
run e-read-only --size 256M --allocs 2 --importers 1 --cycles 1 --read-only
echo "ctest rc=$ctest_rc ${rcs[*]}"
[ $ctest_rc -eq 0 ] && ! printf '%s\n' "${rcs[@]}" | grep -qv '=0$'
