#!/usr/bin/env bash
# GPU call E (exploration for the performance issue), the lab built once in build-gpu-lab (no
# tests). STEPS (default "handles hoststore") picks, in this order:
#   numa      the host's NUMA layout and the GPU's node
#   handles   cms-exp-handles -G (C1-C6: do releases slow the copies they overlap)
#   register  cms-exp-register -G ${REG_THREADS:-1 8 16} (faulting, page-locking, pageable copies)
#   model     tools/scripts/gpu-model-bench.py --cycles 5 --impls saver,dropin-retain
#   hoststore cms-bench (i) once per CMS_TUNABLES host-buffer variant (lab/hoststore/gpu-run.sh; VARIANTS,
#             default "default noprefault threads:32 lazyfree")
# Compact figures on stdout; files in $OUT.
set -uo pipefail
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uname -r
  echo "commit ${CMS_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}"; echo "command $0 $*; STEPS=${STEPS:-}"; } >>"$out/env.txt" 2>&1
build=$PWD/build-gpu-lab
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF -DCMS_BUILD_LAB=ON \
	>"$out/build.log" 2>&1 && ninja -C "$build" >>"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; exit 1; }
unset CMS_DRIVER_LIBRARY
for step in ${STEPS:-handles hoststore}; do
	case $step in
	numa)
		{ lscpu | grep -iE "numa|model name|socket"; command -v numactl >/dev/null && numactl -H
		  for d in /sys/bus/pci/devices/*; do
			[ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] && echo "gpu $(basename "$d") numa_node $(cat "$d/numa_node")"
		  done; } >"$out/numa.txt" 2>&1
		cat "$out/numa.txt" ;;
	handles)
		timeout 150 "$build/bin/cms-exp-handles" -G >"$out/exp-handles.txt" 2>&1; echo "exp rc=$?"
		grep -E "^ *C[0-9]|GB/s" "$out/exp-handles.txt" | head -n 20 ;;
	register)
		timeout 200 "$build/bin/cms-exp-register" -G ${REG_THREADS:-1 8 16} >"$out/exp-register.txt" 2>&1; echo "register rc=$?"
		grep -E "threads|FAIL" "$out/exp-register.txt" ;;
	model)
		CUMEMSAVER_LIBRARY=$build/libcumemsaver.so.1 PYTHONPATH=$PWD/bindings/python timeout 200 \
			python3 tools/scripts/gpu-model-bench.py --cycles 5 --impls saver,dropin-retain --out "$out" \
			>"$out/model-bench.log" 2>&1
		echo "model bench rc=$?"; grep -E "^(saver|dropin|impl|of the|floor)" "$out/model-bench.log" | cut -c1-200 ;;
	hoststore)
		# shellcheck disable=SC2086
		OUT=$out/hoststore CMS_GPU_BUILD=$build bash lab/hoststore/gpu-run.sh ${VARIANTS:-default noprefault threads:32 lazyfree} 2>&1 |
			grep -E "^===|first|median|RSS|rc=" | cut -c1-220 | head -n 60 ;;
	esac
done
