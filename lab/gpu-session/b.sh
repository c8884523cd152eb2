#!/usr/bin/env bash
# GPU call B: the peer's own suite against the drop-in (and against the peer unless
# SKIP_TMS=1), the SGLang-style end-to-end through the drop-in and through the peer.
# Needs build-peer/ (the peer's folder from ../shared/peer) carried.
. "$(dirname "$0")/common.sh"
if [ -n "${CTEST_R:-}" ]; then # gpu tests to run again first (e.g. after fixes)
	(cd "$build" && ctest --output-on-failure -R "$CTEST_R" --timeout 300) >"$out/ctest-rerun.txt" 2>&1
	echo "ctest rerun rc=$?"; grep -E "Test +#|tests passed|:F:|:E:" "$out/ctest-rerun.txt"
fi
OUT=$out timeout 420 bash build-peer/run-tms-suite.sh cumemsaver >"$out/tms-suite-cumemsaver.log" 2>&1
echo "suite (cumemsaver) rc=$?"; tail -n 25 "$out/tms-suite-cumemsaver.log"
w=/tmp/peer-site; if [ ! -d $w/site ]; then mkdir -p $w && tar -xzf build-peer/torch_memory_saver-4a43c97.tar.gz -C $w &&
	(cd $w/torch_memory_saver-4a43c97 && TMS_CUDA_MAJOR=13 python3 -m pip install -q --no-build-isolation --no-deps \
	--target $w/site .) >"$out/peer-build.log" 2>&1 || echo "peer build failed"; fi
for m in cumemsaver peer; do
	if [ $m = cumemsaver ]; then mod=cumemsaver.torch_memory_saver; pp=$PWD/bindings/python; else mod=torch_memory_saver; pp=$w/site; fi
	OUT=$out PYTHONPATH=$pp timeout 300 python3 tools/scripts/gpu-sglang-e2e.py $mod >"$out/sglang-e2e-$m.log" 2>&1
	echo "sglang e2e ($m) rc=$?"; tail -n 12 "$out/sglang-e2e-$m.log"
done
[ -n "${SKIP_TMS:-}" ] || { OUT=$out timeout 420 bash build-peer/run-tms-suite.sh tms >"$out/tms-suite-tms.log" 2>&1
	echo "suite (tms) rc=$?"; tail -n 8 "$out/tms-suite-tms.log"; }
