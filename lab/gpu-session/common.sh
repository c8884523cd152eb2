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
