#!/usr/bin/env bash
# Runs on the GPU machine (device tool), one call: builds this tree, runs every gpu-labelled
# test and the demo, then cms-bench's (a) and (h) workloads (32 x 1 GiB DISCARD with and
# without CMS_REGION_GUARD) in one process. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; } >"$out/env.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_CHECK_ROOT="$PWD/.deps/check" \
	>"$out/build.log" 2>&1 && ninja -C build-gpu >>"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; exit 1; }
(cd build-gpu && ctest --output-on-failure -L gpu --timeout 300) >"$out/ctest-gpu.txt" 2>&1
echo "ctest rc=$?"
grep -E "Test +#|tests passed|tests failed" "$out/ctest-gpu.txt"
cp build-gpu/Testing/Temporary/LastTest.log "$out/ctest-gpu-full.log" 2>/dev/null
build-gpu/bin/cmsctl demo --gpu >"$out/demo.txt" 2>&1
echo "demo rc=$?"; tail -n 2 "$out/demo.txt"
unset CMS_DRIVER_LIBRARY
timeout ${BENCH_TIMEOUT:-200} build-gpu/bin/cms-bench --gpu --only a,h --cycles 6 --json "$out/bench-guard.json" \
	>"$out/bench-guard.txt" 2>&1
echo "bench rc=$?"; grep -E "^\((a|h)\)|pause|resume" "$out/bench-guard.txt" | head -n 30
