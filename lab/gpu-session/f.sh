#!/usr/bin/env bash
# GPU calls of 2026-12-05 (issues 25, 26, 28): one script, two phases, each under the device
# tool's 10-minute limit. Carry .deps (Check), .base (`git archive 223eb22`, the tree before
# issue 25) and .peer (../shared/peer). Set CMS_COMMIT: the device copy's .git may lag.
#   suite: build this tree (build-gpu, via common.sh) and the old one (build-old); every
#          gpu-labelled ctest; cmsctl demo --gpu; the IPC demos (tools/scripts/gpu-ipc.sh);
#          the Python GPU tests with torch; the peer's suite against the drop-in (public cases)
#   bench: cms-bench on old and new, alternating (old, new, old, new) while time is left
# Each step has its own timeout; logs go to $OUT/logs and come back as $OUT/logs.tgz.
. "$(dirname "$0")/common.sh"
phase=${1:?usage: f.sh suite|bench}
logs=$out/logs
mkdir -p "$logs"
budget=${BUDGET_S:-540}
left() { echo $((budget - SECONDS)); }
step() { # name timeout cmd...: runs when at least 30 s are left, logs to $logs/name.txt
	local name=$1 t=$2; shift 2
	local l; l=$(left)
	[ "$l" -lt 30 ] && { echo "== $name: skipped, ${l} s left"; return; }
	[ "$t" -gt "$l" ] && t=$l
	local t0=$SECONDS
	timeout "$t" "$@" >"$logs/$name.txt" 2>&1
	echo "== $name: rc=$? $((SECONDS - t0)) s"
}
old=$PWD/build-old
case "$phase" in
suite)
	echo "== build-gpu: $SECONDS s"
	[ -d .base ] && { cmake -S .base -B "$old" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF &&
		ninja -C "$old"; } >"$logs/build-old.txt" 2>&1
	echo "== build-old: rc=$? $SECONDS s"
	step ctest-gpu 300 bash -c "cd $build && ctest --output-on-failure -V -L gpu --timeout 240"
	grep -E "Test +#|tests passed|tests failed|:F:|:E:|Checks:" "$logs/ctest-gpu.txt" | tail -n 40
	step demo 60 "$build/bin/cmsctl" demo --gpu
	tail -n 2 "$logs/demo.txt"
	step ipc 200 env CMS_GPU_BUILD="$build" OUT="$logs/ipc" bash tools/scripts/gpu-ipc.sh
	grep -E "^==|rc=|pause|import" "$logs/ipc.txt" | head -n 30
	# test_tms_gpu.py needs CMS_DRIVER_LIBRARY unset, test_arguments.py set: one process each
	step python-gpu 120 env PYTHONPATH="$PWD/bindings/python" python3 -m unittest -v \
		bindings/python/tests/test_tms_gpu.py
	tail -n 4 "$logs/python-gpu.txt"
	step python-args 60 env PYTHONPATH="$PWD/bindings/python" CMS_DRIVER_LIBRARY=libcuda.so.1 \
		python3 -m unittest -v bindings/python/tests/test_arguments.py
	tail -n 4 "$logs/python-args.txt"
	step peer-suite 200 env OUT="$logs" bash .peer/run-tms-suite.sh cumemsaver \
		"simple or cuda_graph or rl_example or cpu_backup or training_engine"
	tail -n 25 "$logs/peer-suite.txt"
	;;
bench)
	unset CMS_DRIVER_LIBRARY
	n=0
	while [ "$(left)" -gt 150 ]; do
		n=$((n + 1))
		for side in old new; do
			bin=$old/bin/cms-bench
			[ -x "$bin" ] || bin=$(find "$old" -name cms-bench -type f -perm -u+x | head -n1)
			[ $side = new ] && bin=$build/bin/cms-bench
			step bench-$side-$n 200 "$bin" --gpu --cycles ${BENCH_CYCLES:-5} --disk-dir /tmp \
				--json "$logs/bench-$side-$n.json"
			sed -n '/^results:/,$p' "$logs/bench-$side-$n.txt" | head -n 40
		done
	done
	;;
*) echo "usage: f.sh suite|bench"; exit 2 ;;
esac
tar -czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
echo "phase $phase done in $SECONDS s"
