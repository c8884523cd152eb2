#!/usr/bin/env bash
# Runs on the GPU machine (device tool): build, the whole suite (gpu + sim + unit labels,
# less lint: the GPU image has no clang-format) and the demo. Check is taken from an
# unpacked copy of the Debian
# packages in .deps/check (the GPU image has no package registry):
#   mkdir -p .deps && cd .deps && apt-get download check libsubunit-dev &&
#   for f in *.deb; do dpkg -x $f check; done
# Logs go to $OUT, else lab/results/<date>-<device>-suite (tools/scripts/gpu-out.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out suite || exit 1
cms_run_info "$0" "$@" >"$out/run.txt"
build=${CMS_GPU_BUILD:-/tmp/cms-build}
{
	date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
	uname -r; head -n2 /etc/os-release; gcc --version | head -n1; cmake --version | head -n1
} >"$out/env.txt" 2>&1
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_CHECK_ROOT="$PWD/.deps/check" \
	>"$out/build.log" 2>&1 && ninja -C "$build" >>"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log"; exit 1; }
(cd "$build" && ctest --output-on-failure -V -L "${CMS_LABELS:-gpu|unit|sim}" -E lint) >"$out/ctest.log" 2>&1
ctest_rc=$?
"$build/bin/cmsctl" demo --gpu ${CMS_DEMO_ARGS:-} >"$out/demo.log" 2>&1
demo_rc=$?
grep -E "^[0-9]+% tests passed|tests failed|Skipped|\(Failed\)|Checks:|fault sweep|bad input|stress:|gpu:" \
	"$out/ctest.log" | tail -n 60
cat "$out/demo.log"
echo "ctest rc=$ctest_rc demo rc=$demo_rc"
[ $ctest_rc -eq 0 ] && [ $demo_rc -eq 0 ]
