#!/usr/bin/env bash
# GPU machine, one call: builds the lab (build-gpu-lab), runs cms-exp-handles, cms-bench's
# (b), (d) and (g) workloads, and first-pause.py against the peer and against the drop-in.
# Needs the peer's folder copied into build-peer/ (carry it). Output in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/exp-handles}
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; git rev-parse HEAD 2>/dev/null; } >"$out/env.txt" 2>&1
cmake -S . -B build-gpu-lab -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF -DCMS_BUILD_LAB=ON \
	>"$out/build.log" 2>&1 && ninja -C build-gpu-lab >>"$out/build.log" 2>&1 || { tail -n 40 "$out/build.log"; exit 1; }
unset CMS_DRIVER_LIBRARY
timeout 120 build-gpu-lab/bin/cms-exp-handles -G >"$out/exp-handles.txt" 2>&1; echo "exp rc=$?"
cat "$out/exp-handles.txt"
if [ -z "${SKIP_BENCH:-}" ]; then
	timeout 240 build-gpu-lab/bin/cms-bench --gpu --only ${BENCH_ONLY:-b,d,g} --cycles 4 --json "$out/bench.json" >"$out/bench.txt" 2>&1
	echo "bench rc=$?"; grep -E "^\(|pause|resume|floor" "$out/bench.txt" | head -n 60
fi
if [ -d build-peer ] && [ -z "${SKIP_PEER:-}" ]; then
	w=$(mktemp -d /tmp/peer.XXXX)
	tar -xzf build-peer/torch_memory_saver-4a43c97.tar.gz -C "$w"
	(cd "$w/torch_memory_saver-4a43c97" && TMS_CUDA_MAJOR=13 python3 -m pip install -q --no-build-isolation \
		--no-deps --target "$w/site" .) >"$out/peer-build.log" 2>&1 || echo "peer build failed"
	mkdir -p "$w/shim/torch_memory_saver"
	echo 'from cumemsaver.torch_memory_saver import *  # noqa' >"$w/shim/torch_memory_saver/__init__.py"
	echo 'from cumemsaver.torch_memory_saver import torch_memory_saver, configure_subprocess  # noqa' >>"$w/shim/torch_memory_saver/__init__.py"
	for i in 1 2; do
		PYTHONPATH=$w/site timeout 120 python3 lab/exp-handles/first-pause.py >>"$out/first-pause-peer.jsonl" 2>>"$out/first-pause.err"
		CUMEMSAVER_LIBRARY=$PWD/build-gpu-lab/libcumemsaver.so.1 PYTHONPATH=$w/shim:$PWD/bindings/python \
			timeout 120 python3 lab/exp-handles/first-pause.py >>"$out/first-pause-cms.jsonl" 2>>"$out/first-pause.err"
	done
	echo "== peer"; cat "$out/first-pause-peer.jsonl"; echo "== cms"; cat "$out/first-pause-cms.jsonl"; tail -n 20 "$out/first-pause.err"
fi
