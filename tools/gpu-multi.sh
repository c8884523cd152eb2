#!/usr/bin/env bash
# Multi-GPU run (issue 8) on a host with at least 2 GPUs (device kind nvidia-h200-x2), from the
# repository root, in under 6 minutes:
#   1. build (Check from .deps/check as tools/gpu-suite.sh says; without it the C test is skipped)
#   2. test_multigpu in gpu mode (tags across both GPUs, rollback, a kernel on GPU 1 reading
#      GPU 0's memory through peer access after resume)
#   3. cms-bench --devices 0,1: (a) DISCARD and (c) HOST, the same bytes per GPU on 1 and on
#      2 GPUs in the same run (target <= 1.2x), peer read after every resume
#   4. a 2-rank torch.distributed job (nccl) pausing/resuming through cumemsaver.distributed
#      with an all_reduce before and after (tools/gpu-multi-rank.py)
#   5. if time is left: single-GPU reference figures, cms-bench --only a,c (floors included)
# Logs go to $OUT (default /tmp/cms-out). NCCL variables are left as the machine sets them.
#   OUT=$OUT bash tools/gpu-multi.sh
set -uo pipefail
out=${OUT:-/tmp/cms-out}
build=${CMS_GPU_BUILD:-/tmp/cms-build}
budget=${CMS_MULTI_BUDGET_S:-340}
mkdir -p "$out"
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
cap() { # a step's timeout: its own cap, or what is left of the budget (at least 20 s)
	local l; l=$(left)
	[ "$l" -lt 20 ] && l=20
	echo $(($1 < l ? $1 : l))
}
{
	date -u
	nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
	nvidia-smi topo -m
	uname -r; head -n2 /etc/os-release; gcc --version | head -n1; cmake --version | head -n1
	python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
		"nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
	env | grep -E '^(NCCL|CUDA)_' | sort
	free -g | head -n2; nproc
} >"$out/env.txt" 2>&1

tests=OFF
[ -d .deps/check ] && tests=ON
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=$tests \
	-DCMS_CHECK_ROOT="$PWD/.deps/check" >"$out/build.log" 2>&1 &&
	ninja -C "$build" cumemsaver cumemsaver-sim cms-bench $([ $tests = ON ] && echo test_multigpu) \
		>>"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; exit 1; }
echo "== build: $(($(date +%s) - t0)) s (tests $tests)"

rc=0
if [ $tests = ON ]; then
	(cd "$build" && timeout $(cap 90) ctest -R '^test_multigpu\.gpu$' --output-on-failure -V) \
		>"$out/test_multigpu.log" 2>&1
	r=$?
	echo "== test_multigpu.gpu rc=$r: $(grep -E 'Checks:|SKIP' "$out/test_multigpu.log" | tail -n 2)"
	[ $r -eq 0 ] || { rc=1; grep -E ':[FE]:' "$out/test_multigpu.log" | head -n 20; }
else
	echo "== test_multigpu.gpu: not built (no .deps/check)"
fi

timeout $(cap 170) "$build/tools/cms-bench" --gpu --devices 0,1 --json "$out/bench-multi.json" \
	>"$out/bench-multi.txt" 2>&1
r=$?
echo "== cms-bench --devices 0,1 rc=$r ($(($(date +%s) - t0)) s)"
sed -n '/^multi-device results/,$p' "$out/bench-multi.txt"
[ $r -eq 0 ] || { rc=1; grep -E "cms-bench:|FAIL" "$out/bench-multi.txt" | head -n 10; }

export CUMEMSAVER_LIBRARY=$build/libcumemsaver.so.1
export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
unset CMS_DRIVER_LIBRARY
timeout $(cap 120) python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
	tools/gpu-multi-rank.py --json "$out/torch-2rank.json" >"$out/torch-2rank.log" 2>&1
r=$?
echo "== torch.distributed 2 ranks rc=$r ($(($(date +%s) - t0)) s)"
grep -E "^rank [0-9]+: (PASS|FAIL)" "$out/torch-2rank.log" | cut -c1-400
[ $r -eq 0 ] || { rc=1; grep -E "Error|Traceback|error" "$out/torch-2rank.log" | head -n 20; }

if [ "$(left)" -gt 100 ]; then
	timeout $(($(left) - 10)) "$build/tools/cms-bench" --gpu --only a,c --cycles 4 \
		--json "$out/bench-single.json" >"$out/bench-single.txt" 2>&1
	r=$?
	echo "== cms-bench --only a,c (GPU 0 alone, floors) rc=$r ($(($(date +%s) - t0)) s)"
	sed -n '/^results:/,/^host memory/p' "$out/bench-single.txt" | head -n 24
	[ $r -eq 0 ] || [ $r -eq 124 ] || rc=1
else
	echo "== single-GPU reference bench skipped: $(left) s left of $budget"
fi
echo "gpu-multi: rc=$rc in $(($(date +%s) - t0)) s"
exit $rc
