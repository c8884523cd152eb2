#!/usr/bin/env bash
# Quick start, command 1: build and run the demo (real GPU if present, else the host simulation).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build cmsctl cumemsaver-sim >/dev/null
exec build/bin/cmsctl demo "$@"
