#!/usr/bin/env bash
# Runs on the GPU machine (device tool): the same cms-bench workloads on the code before a
# change (.base/: `git archive <commit> | tar -x -C .base`) and after it (this tree), built
# side by side, each run twice in alternation (old, new, old, new) so that the machine's
# run-to-run noise shows next to any difference. Logs go to $OUT.
#   phase build: build both (and the new one's tests)
#   phase suite: the new build's GPU tests and the demo
#   phase bench N: bench run N of old then new; phase bench-all: runs 1 and 2 (old, new, old,
#   new) in one call
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/before-after}
mkdir -p "$out"
new=build-new old=build-old
case "${1:-}" in
build)
	{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r
	  git rev-parse HEAD 2>/dev/null || true; } >"$out/env.txt" 2>&1
	cmake -S . -B $new -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMS_CHECK_ROOT="$PWD/.deps/check" >"$out/build-new.log" 2>&1 &&
		ninja -C $new >>"$out/build-new.log" 2>&1 || { tail -n 30 "$out/build-new.log"; exit 1; }
	cmake -S .base -B $old -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF \
		>"$out/build-old.log" 2>&1 &&
		ninja -C $old >>"$out/build-old.log" 2>&1 || { tail -n 30 "$out/build-old.log"; exit 1; }
	echo "built both" ;;
suite)
	(cd $new && ctest --output-on-failure -L gpu) >"$out/ctest-gpu.txt" 2>&1
	rc=$?
	$new/bin/cmsctl demo --gpu >"$out/demo.txt" 2>&1
	drc=$?
	grep -E "tests passed|tests failed|Failed|Skipped|Passed" "$out/ctest-gpu.txt" | tail -n 25
	tail -n 5 "$out/demo.txt"
	echo "ctest rc=$rc demo rc=$drc" ;;
bench-all)
	bash "$0" bench 1 && bash "$0" bench 2 ;;
bench)
	n=${2:-1}
	unset CMS_DRIVER_LIBRARY
	for side in old new; do
		bin=$old/tools/cms-bench
		[ $side = new ] && bin=$new/bin/cms-bench
		t0=$(date +%s)
		timeout 290 $bin --gpu --cycles 6 --disk-dir /tmp --json "$out/bench-$side-$n.json" \
			>"$out/bench-$side-$n.txt" 2>&1
		echo "$side run $n: rc=$? $(( $(date +%s) - t0 )) s"
	done ;;
*) echo "usage: $0 build | suite | bench N | bench-all"; exit 2 ;;
esac
