#!/usr/bin/env bash
# Runs on the GPU machine (device tool) after tools/scripts/gpu-suite.sh built $CMS_GPU_BUILD:
# the benchmark (cms-bench, every workload, JSON; CMS_BENCH_ARGS adds options).
# Logs go to $OUT, else lab/results/<date>-<device>-bench (tools/scripts/gpu-out.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out bench || exit 1
cms_run_info "$0" "$@" >"$out/run.txt"
build=${CMS_GPU_BUILD:-/tmp/cms-build}
unset CMS_DRIVER_LIBRARY
rc=0
timeout 480 "$build/bin/cms-bench" --gpu --cycles 6 --disk-dir "${CMS_DISK_DIR:-/tmp}" \
	--json "$out/bench.json" ${CMS_BENCH_ARGS:-} >"$out/bench.txt" 2>&1 ||
	{ echo "cms-bench rc=$?"; rc=1; }
sed -n '/^results:/,$p' "$out/bench.txt"
grep -E "FAIL" "$out/bench.txt" | head -n 20
exit $rc
