#!/usr/bin/env bash
# GPU machine, repository root: builds the library with steps.patch (a timestamp after each
# step of the pause and resume schedules, printed to stderr: lab only, never committed to src/)
# in build-steps, runs cms-bench --only ${ONLY:-c,o} with it, and undoes the patch. Output in $OUT.
set -uo pipefail
out=${OUT:-/tmp/exp-frozen}
mkdir -p "$out"
patch -p1 -s <lab/exp-frozen/steps.patch || { echo "patch failed"; exit 1; }
{ cmake -S . -B build-steps -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF &&
	ninja -C build-steps cms-bench; } >"$out/steps-build.log" 2>&1
rc=$?
patch -p1 -R -s <lab/exp-frozen/steps.patch
[ $rc -eq 0 ] || { tail -n 30 "$out/steps-build.log"; exit 1; }
unset CMS_DRIVER_LIBRARY
timeout "${STEPS_TIMEOUT:-300}" build-steps/bin/cms-bench --gpu --only "${ONLY:-c,o}" --cycles "${CYCLES:-6}" \
	--disk-dir /tmp >"$out/steps-bench.txt" 2>"$out/steps-stderr.txt"
echo "steps bench rc=$?"
grep -E "cycle [0-9]|DISCARD, the same|^\(" "$out/steps-bench.txt"
grep -E "^lab-" "$out/steps-stderr.txt"
