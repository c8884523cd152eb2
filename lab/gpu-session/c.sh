#!/usr/bin/env bash
# GPU call C: the real-model benchmark (cumemsaver.torch, drop-in, peer default and retain),
# then cms-bench three times on the workloads the performance issue judges.
. "$(dirname "$0")/common.sh"
[ -n "${SKIP_MODEL:-}" ] || { PYTHONPATH=$PWD/bindings/python timeout 360 python3 tools/scripts/gpu-model-bench.py \
	 \
	--cycles 5 --impls saver,dropin,dropin-retain,peer,peer-retain \
	$( [ -d /tmp/peer-site/site ] && echo --peer-dir /tmp/peer-site/site ) --out "$out" >"$out/model-bench.log" 2>&1; echo "model bench rc=$?"; tail -n 30 "$out/model-bench.log"; }
for i in $(seq 1 ${BENCH_RUNS:-3}); do
	timeout 200 "$build/bin/cms-bench" --gpu --only ${BENCH_ONLY:-b,d,g,i} --cycles ${BENCH_CYCLES:-4} \
		--json "$out/bench-$i.json" >"$out/bench-$i.txt" 2>&1
	echo "bench $i rc=$?"; sed -n '/^results:/,$p' "$out/bench-$i.txt" | head -n 40
done
