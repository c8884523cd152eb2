#!/usr/bin/env bash
# Multi-GPU run (issue 8) on a host with at least 2 GPUs (device kind nvidia-h200-x2), from the
# repository root, in under 3 minutes (CMS_MULTI_BUDGET_S, default 170 s, after which the
# optional step is skipped and every step's timeout shrinks):
#   1. build (Check from .deps/check as tools/scripts/gpu-suite.sh says; without it the C test is skipped)
#   2. test_multigpu in gpu mode (tags across both GPUs, rollback, a kernel on GPU 1 reading
#      GPU 0's memory through peer access after resume)
#   3. cms-bench --devices 0,1: the driver's own multi-device floor of (a) (raw VMM calls on 1
#      device, on 2 devices with a thread each, with and without peer access, and on one
#      thread interleaved), then (a) DISCARD and (c) HOST through cumemsaver, the same bytes
#      per GPU on 1 and on 2 GPUs (target <= 1.2x), peer read after every resume
#   4. a 2-rank torch.distributed job (nccl) pausing/resuming through cumemsaver.distributed
#      with an all_reduce before and after (tools/scripts/gpu-multi-rank.py)
#   5. if time is left: single-GPU reference figures, cms-bench --only a,c (floors included)
# Output: exactly two files in $OUT (else lab/results/<date>-<device>-multi: see
# tools/scripts/gpu-out.sh), because the device tool returns only a few files per call:
#   $OUT/summary.txt     what the script prints (step results, the bench tables)
#   $OUT/multi.tar.gz    multi/: run.txt env.txt build.log test_multigpu.log
#                        bench-multi.{txt,json} torch-2rank.{log,json} bench-single.{txt,json}
#                        summary.txt
# NCCL variables are left as the machine sets them.
#   OUT=$OUT bash tools/scripts/gpu-multi.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out multi || exit 1
build=${CMS_GPU_BUILD:-/tmp/cms-build}
budget=${CMS_MULTI_BUDGET_S:-170}
work=$(mktemp -d "${TMPDIR:-/tmp}/cms-multi.XXXXXX") || exit 1
logs=$work/multi
mkdir -p "$logs"
cms_run_info "$0" "$@" >"$logs/run.txt"
summary=$out/summary.txt
t0=$(date +%s)
left() { echo $((budget - ($(date +%s) - t0))); }
cap() { # a step's timeout: its own cap, or what is left of the budget (at least 20 s)
	local l
	l=$(left)
	[ "$l" -lt 20 ] && l=20
	echo $(($1 < l ? $1 : l))
}
finish() { # the tarball, also after a failure or a TERM
	trap - EXIT
	cp -f "$summary" "$logs/summary.txt" 2>/dev/null
	tar -C "$work" -czf "$out/multi.tar.gz" multi && rm -rf "$work"
}
trap finish EXIT
trap 'exit 143' TERM INT

run_all() {
	local tests=OFF rc=0 r rev targets
	{
		date -u
		nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv
		nvidia-smi topo -m
		uname -r
		head -n2 /etc/os-release
		gcc --version | head -n1
		cmake --version | head -n1
		python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
			"nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
		env | grep -E '^(NCCL|CUDA)_' | sort
		free -g | head -n2
		nproc
	} >"$logs/env.txt" 2>&1
	rev=$(sed -n 's/^commit:  //p' "$logs/run.txt")
	echo "== $(date -u +%FT%TZ), commit ${rev:-unknown}, budget $budget s"
	nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1 | sed 's/^/   /'

	targets=(cumemsaver cumemsaver-sim cms-bench)
	[ -d .deps/check ] && tests=ON && targets+=(test_multigpu)
	cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=$tests \
		-DCMS_CHECK_ROOT="$PWD/.deps/check" >"$logs/build.log" 2>&1 &&
		ninja -C "$build" "${targets[@]}" >>"$logs/build.log" 2>&1 || {
		echo "== build FAILED"
		tail -n 40 "$logs/build.log"
		return 1
	}
	echo "== build: $(($(date +%s) - t0)) s (tests $tests)"

	if [ $tests = ON ]; then
		(cd "$build" && timeout "$(cap 45)" ctest -R '^test_multigpu\.gpu$' --output-on-failure -V) \
			>"$logs/test_multigpu.log" 2>&1
		r=$?
		echo "== test_multigpu.gpu rc=$r ($(($(date +%s) - t0)) s): $(
			grep -E 'Checks:|SKIP' "$logs/test_multigpu.log" | tail -n 2)"
		[ $r -eq 0 ] || {
			rc=1
			grep -E ':[FE]:' "$logs/test_multigpu.log" | head -n 20
		}
	else
		echo "== test_multigpu.gpu: not built (no .deps/check)"
	fi

	timeout "$(cap 90)" "$build/bin/cms-bench" --gpu --devices 0,1 \
		--json "$logs/bench-multi.json" >"$logs/bench-multi.txt" 2>&1
	r=$?
	echo "== cms-bench --devices 0,1 rc=$r ($(($(date +%s) - t0)) s)"
	grep -E '^  floor ' "$logs/bench-multi.txt"
	sed -n '/^multi-device results/,$p' "$logs/bench-multi.txt"
	[ $r -eq 0 ] || {
		rc=1
		grep -E "cms-bench:|FAIL" "$logs/bench-multi.txt" | head -n 10
	}

	(
		export CUMEMSAVER_LIBRARY=$build/libcumemsaver.so.1
		export PYTHONPATH=$PWD/bindings/python${PYTHONPATH:+:$PYTHONPATH}
		unset CMS_DRIVER_LIBRARY
		timeout "$(cap 60)" python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
			tools/scripts/gpu-multi-rank.py --json "$logs/torch-2rank.json"
	) >"$logs/torch-2rank.log" 2>&1
	r=$?
	echo "== torch.distributed 2 ranks rc=$r ($(($(date +%s) - t0)) s)"
	grep -E "^rank [0-9]+: (PASS|FAIL)" "$logs/torch-2rank.log" | cut -c1-400
	[ $r -eq 0 ] || {
		rc=1
		grep -E "Error|Traceback|error" "$logs/torch-2rank.log" | head -n 20
	}

	if [ "$(left)" -gt 45 ]; then
		timeout "$(($(left) - 5))" "$build/bin/cms-bench" --gpu --only a,c --cycles 4 \
			--json "$logs/bench-single.json" >"$logs/bench-single.txt" 2>&1
		r=$?
		echo "== cms-bench --only a,c (GPU 0 alone, floors) rc=$r ($(($(date +%s) - t0)) s)"
		sed -n '/^results:/,/^host memory/p' "$logs/bench-single.txt" | head -n 24
		[ $r -eq 0 ] || [ $r -eq 124 ] || rc=1
	else
		echo "== single-GPU reference bench skipped: $(left) s left of $budget"
	fi
	echo "gpu-multi: rc=$rc in $(($(date +%s) - t0)) s; all logs in $out/multi.tar.gz"
	return $rc
}

run_all 2>&1 | tee "$summary"
exit "${PIPESTATUS[0]}"
