#!/usr/bin/env bash
# Quick start, command 1: build and run the demo (real GPU if present, else the host simulation).
# Installs only what the demo needs (tools/scripts/deps.sh demo: a C compiler, CMake, Ninja)
# and configures build/ with the tests off (they need Check); a build/ configured before (by
# tools/scripts/test.sh, say: it has a build.ninja) keeps its settings.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/deps.sh demo
if [ -f build/build.ninja ]; then
	cmake -S . -B build >/dev/null
else
	cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF >/dev/null
fi
ninja -C build cmsctl cumemsaver-sim >/dev/null
exec build/bin/cmsctl demo "$@"
