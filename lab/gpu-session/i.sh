#!/usr/bin/env bash
# GPU call for issue 36 (architecture 3, no performance change): cms-bench before and after in
# one warm machine. Carry .deps (Check) and .base (`git archive <before>`, the tree before the
# refactor). Builds this tree (common.sh: build-gpu) and .base (build-old, tools only), then
# runs cms-bench --gpu --only ${BENCH_ONLY:-c,d,i,k,l,m,o} --cycles ${BENCH_CYCLES:-4} on old
# and new in alternation (old, new, old, new, ...) while BUDGET_S lasts. Set CMS_COMMIT.
# Logs: $OUT/logs.tgz; each run's results table printed.
. "$(dirname "$0")/common.sh"
logs=$out/logs
mkdir -p "$logs"
budget=${BUDGET_S:-540}
old=$PWD/build-old
[ -d .base ] || { echo "no .base: carry a git archive of the tree before"; exit 2; }
{ cmake -S .base -B "$old" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF &&
	ninja -C "$old"; } >"$logs/build-old.txt" 2>&1 || { tail -n 30 "$logs/build-old.txt"; exit 1; }
echo "== builds done: $SECONDS s"
unset CMS_DRIVER_LIBRARY
per=${BENCH_TIMEOUT:-150}
n=0
while [ $((budget - SECONDS)) -gt $((per + 20)) ]; do
	n=$((n + 1))
	for side in old new; do
		bin=$build/bin/cms-bench
		[ $side = old ] && bin=$old/bin/cms-bench
		t0=$SECONDS
		timeout "$per" "$bin" --gpu --only "${BENCH_ONLY:-c,d,i,k,l,m,o}" --cycles "${BENCH_CYCLES:-4}" \
			--disk-dir /tmp --json "$logs/bench-$side-$n.json" >"$logs/bench-$side-$n.txt" 2>&1
		echo "== bench-$side-$n: rc=$? $((SECONDS - t0)) s"
		sed -n '/^results:/,/^$/p' "$logs/bench-$side-$n.txt" | grep -E "^\(|median|first" | head -n 30
	done
done
tar -czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
echo "i.sh done in $SECONDS s"
