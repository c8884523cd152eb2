#!/usr/bin/env bash
# GPU call C: the real-model benchmark (cumemsaver.torch, drop-in, peer default and retain),
# the peer's and the drop-in's first pause of 2048 x 8 MiB (DISCARD and with CPU backup), then
# cms-bench three times on the workloads the performance issue judges (COALESCE_D=1: then (d)
# once more with --coalesce).
. "$(dirname "$0")/common.sh"
if [ -n "${TMS_K:-}" ]; then # peer-suite cases to run again through the drop-in, with their output
	OUT=$out/rerun timeout 120 bash build-peer/run-tms-suite.sh cumemsaver "$TMS_K" >/dev/null 2>&1
	echo "suite rerun ($TMS_K) rc=$?"; grep -vE "^\s*$" "$out/rerun/tms-suite-cumemsaver.txt" | grep -E "Error|error|assert|Traceback|File|FAILED|PASSED|line" | tail -n 40
fi
[ -n "${SKIP_MODEL:-}" ] || { PYTHONPATH=$PWD/bindings/python timeout 300 python3 tools/scripts/gpu-model-bench.py \
	 \
	--cycles 5 --impls saver,dropin,dropin-retain,peer,peer-retain \
	$( [ -d /tmp/peer-site/site ] && echo --peer-dir /tmp/peer-site/site ) --out "$out" >"$out/model-bench.log" 2>&1; echo "model bench rc=$?"; tail -n 30 "$out/model-bench.log"; }
# the peer's first pause of cms-bench's (b) and (d) allocations, for the same-call comparison
# (the model bench built the peer into build-peer/site unless b.sh built /tmp/peer-site)
pdir=/tmp/peer-site/site; [ -d $pdir ] || pdir=$PWD/build-peer/site
if [ -z "${SKIP_FIRST:-}" ] && [ -d $pdir ]; then
	shim=$(mktemp -d /tmp/shim.XXXX); mkdir -p "$shim/torch_memory_saver"; trap 'rm -rf "$shim"' EXIT
	echo 'from cumemsaver.torch_memory_saver import *  # noqa' >"$shim/torch_memory_saver/__init__.py"
	echo 'from cumemsaver.torch_memory_saver import torch_memory_saver, configure_subprocess  # noqa' \
		>>"$shim/torch_memory_saver/__init__.py"
	for m in "" --cpu-backup; do # the peer, then the drop-in, each mode
		PYTHONPATH=$pdir timeout 120 python3 lab/exp-handles/first-pause.py $m \
			>>"$out/first-pause-peer.jsonl" 2>>"$out/first-pause.err"
		echo "peer first pause ($m) rc=$?"; tail -n 1 "$out/first-pause-peer.jsonl" | cut -c1-400
		PYTHONPATH=$shim:$PWD/bindings/python timeout 120 python3 lab/exp-handles/first-pause.py $m \
			>>"$out/first-pause-cms.jsonl" 2>>"$out/first-pause.err"
		echo "drop-in first pause ($m) rc=$?"; tail -n 1 "$out/first-pause-cms.jsonl" | cut -c1-400
	done
fi
for i in $(seq 1 ${BENCH_RUNS:-3}); do
	timeout 150 "$build/bin/cms-bench" --gpu --only ${BENCH_ONLY:-b,d,g,i} --cycles ${BENCH_CYCLES:-4} \
		--json "$out/bench-$i.json" >"$out/bench-$i.txt" 2>&1
	echo "bench $i rc=$?"; sed -n '/^results:/,/^host memory/p' "$out/bench-$i.txt" | grep -E "^\(|first|median" | cut -c1-100
done
if [ -n "${COALESCE_D:-}" ]; then # (d) with CMS_REGION_COALESCE, for comparison
	timeout 120 "$build/bin/cms-bench" --gpu --only d --coalesce --cycles ${BENCH_CYCLES:-4} \
		--json "$out/bench-d-coalesce.json" >"$out/bench-d-coalesce.txt" 2>&1
	echo "bench d --coalesce rc=$?"; grep -E "^\(d\)|median pause" "$out/bench-d-coalesce.txt" | cut -c1-110
fi
