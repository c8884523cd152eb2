#!/usr/bin/env bash
# Runs on the GPU machine after tools/scripts/gpu-suite.sh built $CMS_GPU_BUILD: the Python
# package's PyTorch end-to-end test (tools/scripts/gpu-torch-e2e.py) in its three modes
# (CUDAPluggableAllocator, torch_memory_saver drop-in, LD_PRELOAD), then the SGLang-style
# run of the drop-in (CMS_SGLANG_E2E=0 skips it). Logs go to $OUT, else
# lab/results/<date>-<device>-python (tools/scripts/gpu-out.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out python || exit 1
cms_run_info "$0" "$@" >"$out/run.txt"
build=${CMS_GPU_BUILD:-/tmp/cms-build}
export CUMEMSAVER_LIBRARY=$build/libcumemsaver.so.1
export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
unset CMS_DRIVER_LIBRARY
rc=0
for mode in ${CMS_E2E_MODES:-torch compat preload}; do
	timeout 300 python3 tools/scripts/gpu-torch-e2e.py --mode "$mode" --json "$out/e2e-$mode.json" \
		>"$out/e2e-$mode.log" 2>&1
	r=$?
	echo "== e2e $mode rc=$r"
	grep -E "^(PASS|FAIL|E2E|pause|Traceback)|Error" "$out/e2e-$mode.log" | head -n 30
	[ $r -eq 0 ] || { rc=1; tail -n 25 "$out/e2e-$mode.log"; }
done
# SGLang-style run of the drop-in (tools/scripts/gpu-sglang-e2e.py; the peer's side needs a
# built peer on PYTHONPATH: see docs/python.md)
if [ "${CMS_SGLANG_E2E:-1}" != 0 ]; then
	OUT=$out timeout 600 python3 tools/scripts/gpu-sglang-e2e.py cumemsaver.torch_memory_saver \
		>"$out/sglang-e2e-cumemsaver.log" 2>&1
	r=$?
	echo "== sglang e2e (cumemsaver) rc=$r"
	grep -E "^(ok|FAIL|cycle|sglang)|Traceback|Error" "$out/sglang-e2e-cumemsaver.log" | head -n 40
	[ $r -eq 0 ] || { rc=1; tail -n 25 "$out/sglang-e2e-cumemsaver.log"; }
fi
exit $rc
