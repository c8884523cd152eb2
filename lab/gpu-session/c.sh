#!/usr/bin/env bash
# GPU call C: the real-model benchmark (cumemsaver.torch, drop-in, peer default and retain),
# then cms-bench three times on the workloads the performance issue judges.
. "$(dirname "$0")/common.sh"
if [ -n "${TMS_K:-}" ]; then # peer-suite cases to run again through the drop-in, with their output
	OUT=$out/rerun timeout 120 bash build-peer/run-tms-suite.sh cumemsaver "$TMS_K" >/dev/null 2>&1
	echo "suite rerun ($TMS_K) rc=$?"; grep -vE "^\s*$" "$out/rerun/tms-suite-cumemsaver.txt" | grep -E "Error|error|assert|Traceback|File|FAILED|PASSED|line" | tail -n 40
fi
[ -n "${SKIP_MODEL:-}" ] || { PYTHONPATH=$PWD/bindings/python timeout 300 python3 tools/scripts/gpu-model-bench.py \
	 \
	--cycles 5 --impls saver,dropin,dropin-retain,peer,peer-retain \
	$( [ -d /tmp/peer-site/site ] && echo --peer-dir /tmp/peer-site/site ) --out "$out" >"$out/model-bench.log" 2>&1; echo "model bench rc=$?"; tail -n 30 "$out/model-bench.log"; }
for i in $(seq 1 ${BENCH_RUNS:-3}); do
	timeout 150 "$build/bin/cms-bench" --gpu --only ${BENCH_ONLY:-b,d,g,i} --cycles ${BENCH_CYCLES:-4} \
		--json "$out/bench-$i.json" >"$out/bench-$i.txt" 2>&1
	echo "bench $i rc=$?"; sed -n '/^results:/,$p' "$out/bench-$i.txt" | head -n 40
done
