#!/usr/bin/env bash
# Runs the copy experiment on a GPU (about 50 s on an H200, 32 GiB of device memory): builds
# cms-exp-copy into $CMS_GPU_BUILD with -DCMS_BUILD_LAB=ON (the default build leaves the lab
# out), then `cms-exp-copy --gpu --gib 16 --json exp.json`. Output in $OUT, else
# lab/results/<date>-<device>-exp-copy (tools/scripts/gpu-out.sh): run.txt, build.log,
# exp.txt, exp.json. Usage: bash lab/exp-copy/gpu-run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out exp-copy || exit 1
cms_run_info "$0" "$@" >"$out/run.txt"
build=${CMS_GPU_BUILD:-/tmp/cms-build-lab}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF \
	-DCMS_BUILD_LAB=ON >"$out/build.log" 2>&1 && ninja -C "$build" cms-exp-copy >>"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log"; exit 1; }
unset CMS_DRIVER_LIBRARY
rc=0
timeout 240 "$build/bin/cms-exp-copy" --gpu --gib 16 --json "$out/exp.json" >"$out/exp.txt" 2>&1 ||
	{ echo "cms-exp-copy rc=$?"; rc=1; }
cat "$out/exp.txt"
exit $rc
