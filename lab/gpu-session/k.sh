#!/usr/bin/env bash
# One GPU call for issue 36 when device time is short: the gpu ctests the refactor touches, then
# cms-bench before (.base: `git archive` of the tree before) and after, alternating, while
# BUDGET_S lasts. Carry .deps (Check) and .base. Set CMS_COMMIT. Logs: $OUT/logs.tgz.
. "$(dirname "$0")/common.sh"
budget=${BUDGET_S:-500}
old=$PWD/build-old
{ cmake -S .base -B "$old" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF &&
	ninja -C "$old"; } >"$logs/build-old.txt" 2>&1 || { tail -n 30 "$logs/build-old.txt"; exit 1; }
echo "== builds done: $SECONDS s"
R=${R:-'test_(core|verify|prepare|features|frozen|swap|multigpu|cuda_calls|hooks|disk|guard|chunks|tunables|host_live)\.gpu|conformance_1_0\.gpu'}
t0=$SECONDS
(cd "$build" && CK_TAP_LOG_FILE_NAME=/dev/stderr timeout ${CTEST_S:-220} ctest --output-on-failure -V -L gpu -R "$R" --timeout 200) >"$logs/ctest-gpu.txt" 2>&1
echo "== ctest-gpu: rc=$? $((SECONDS - t0)) s"
grep -E "Test +#|tests passed|tests failed|:F:|:E:|Checks:|^SKIP|SKIP " "$logs/ctest-gpu.txt" | tail -n 60
unset CMS_DRIVER_LIBRARY
per=${BENCH_TIMEOUT:-110}
n=0
while [ $((budget - SECONDS)) -gt $((2 * per)) ]; do
	n=$((n + 1))
	for side in old new; do
		bin=$build/bin/cms-bench
		[ $side = old ] && bin=$old/bin/cms-bench
		t0=$SECONDS
		timeout "$per" "$bin" --gpu --only "${BENCH_ONLY:-c,d,i,l,m}" --cycles "${BENCH_CYCLES:-4}" \
			--disk-dir /tmp --json "$logs/bench-$side-$n.json" >"$logs/bench-$side-$n.txt" 2>&1
		echo "== bench-$side-$n: rc=$? $((SECONDS - t0)) s"
		sed -n '/^results:/,/^$/p' "$logs/bench-$side-$n.txt" | grep -E "median|first" | head -n 24
	done
done
tar -czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
echo "k.sh done in $SECONDS s"
