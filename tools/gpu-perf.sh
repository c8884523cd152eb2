#!/usr/bin/env bash
# Runs on the GPU machine (device tool) after tools/gpu-suite.sh built $CMS_GPU_BUILD: the
# benchmark (cms-bench, every workload, JSON) and the copy/backing experiment (cms-exp-copy).
# Logs go to $OUT (default /tmp/cms-out).
set -uo pipefail
out=${OUT:-/tmp/cms-out}
build=${CMS_GPU_BUILD:-/tmp/cms-build}
mkdir -p "$out"
unset CMS_DRIVER_LIBRARY
rc=0
if [ -z "${CMS_SKIP_EXP:-}" ]; then
	timeout 240 "$build/tools/cms-exp-copy" --gpu --gib 16 --json "$out/exp.json" >"$out/exp.txt" 2>&1 ||
		{ echo "cms-exp-copy rc=$?"; rc=1; }
	cat "$out/exp.txt"
fi
timeout 480 "$build/tools/cms-bench" --gpu --cycles 6 --disk-dir "${CMS_DISK_DIR:-/tmp}" \
	--json "$out/bench.json" ${CMS_BENCH_ARGS:-} >"$out/bench.txt" 2>&1 ||
	{ echo "cms-bench rc=$?"; rc=1; }
sed -n '/^results:/,$p' "$out/bench.txt"
grep -E "FAIL" "$out/bench.txt" | head -n 20
exit $rc
