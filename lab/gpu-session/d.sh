#!/usr/bin/env bash
# GPU call D (2026-12-02, second session): after engine changes: the gpu-labelled ctests
# (CTEST_ARGS, e.g. -E test_gpu_oom), lab/tms-eviction/repro.py, the SGLang-style end-to-end
# through the drop-in and through the peer (as b.sh), and cms-bench --only ${BENCH_ONLY:-d}
# BENCH_RUNS times. Prints the figures; keeps $OUT to a few files.
. "$(dirname "$0")/common.sh"
(cd "$build" && ctest --output-on-failure -L gpu --timeout 300 ${CTEST_ARGS:-}) >"$out/ctest-gpu.txt" 2>&1
echo "ctest rc=$?"; grep -E "tests passed|tests failed|\*\*\*Failed|:F:|:E:" "$out/ctest-gpu.txt" | head -n 20
PYTHONPATH=$PWD/bindings/python timeout 300 python3 lab/tms-eviction/repro.py ${REPRO:-} >"$out/repro.txt" 2>&1
echo "repro rc=$?"; cat "$out/repro.txt" | tail -n 40
w=/tmp/peer-site; mkdir -p $w && tar -xzf build-peer/torch_memory_saver-4a43c97.tar.gz -C $w &&
	(cd $w/torch_memory_saver-4a43c97 && TMS_CUDA_MAJOR=13 python3 -m pip install -q --no-build-isolation \
	--no-deps --target $w/site .) >/tmp/peer-build.log 2>&1 || echo "peer build failed"
for m in cumemsaver peer; do
	if [ $m = cumemsaver ]; then mod=cumemsaver.torch_memory_saver; pp=$PWD/bindings/python; else mod=torch_memory_saver; pp=$w/site; fi
	OUT=$out PYTHONPATH=$pp timeout 300 python3 tools/scripts/gpu-sglang-e2e.py $mod >"$out/sglang-e2e-$m.log" 2>&1
	echo "sglang e2e ($m) rc=$?"; grep -E "^FAIL|^cycle|PASS|Error" "$out/sglang-e2e-$m.log" | tail -n 12
done
for i in $(seq 1 ${BENCH_RUNS:-3}); do
	timeout 150 "$build/bin/cms-bench" --gpu --only ${BENCH_ONLY:-d} --cycles ${BENCH_CYCLES:-4} \
		>"$out/bench-$i.txt" 2>&1
	echo "bench $i rc=$?"; sed -n '/^results:/,$p' "$out/bench-$i.txt" | head -n 30
done
