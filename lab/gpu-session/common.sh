#!/usr/bin/env bash
# Sourced by a.sh, b.sh, c.sh (GPU machine, repository root): output folder, run facts, and
# one build of the whole tree with tests and the lab in build-gpu (incremental on a warm machine).
set -uo pipefail
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uname -r
  echo "commit ${CMS_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}"; echo "command $0 $*"; } >>"$out/env.txt" 2>&1
build=$PWD/build-gpu
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_CHECK_ROOT="$PWD/.deps/check" \
	-DCMS_BUILD_LAB=ON >>"$out/build.log" 2>&1 && ninja -C "$build" >>"$out/build.log" 2>&1 ||
	{ tail -n 40 "$out/build.log"; exit 1; }
export CUMEMSAVER_LIBRARY=$build/libcumemsaver.so.1
unset CMS_DRIVER_LIBRARY
# Logs under $out/logs; BUDGET_S (default 540) bounds the steps of a call (h.sh, j.sh).
logs=$out/logs
mkdir -p "$logs"
budget=${BUDGET_S:-540}
step() { # name timeout cmd...: runs when at least 30 s are left, logs to $logs/name.txt
	local name=$1 t=$2 l=$((budget - SECONDS)) t0=$SECONDS
	shift 2
	[ "$l" -lt 30 ] && { echo "== $name: skipped, ${l} s left"; return; }
	[ "$t" -gt "$l" ] && t=$l
	timeout "$t" "$@" >"$logs/$name.txt" 2>&1
	echo "== $name: rc=$? $((SECONDS - t0)) s"
}
