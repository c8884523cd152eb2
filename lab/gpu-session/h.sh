#!/usr/bin/env bash
# GPU call of 2026-12-07 (issues 34, 35), after the review fixes: one call under the device
# tool's limit. Builds the tree (common.sh: build-gpu, tests on; carry .deps), then
#   the gpu ctests the fixes touch (R below: the free's order and handle retain, guards,
#   chunks, VERIFY's reservation, tunables, frozen, importer locking), the IPC demos
#   (tools/scripts/gpu-ipc.sh), and the peer's suite by the import name torch_memory_saver
#   (lab/gpu-session/tms-shim.sh suite; carry .peer) while BUDGET_S lasts.
# Set CMS_COMMIT (the device copy's .git may lag). Logs: $OUT/logs.tgz; summaries printed.
. "$(dirname "$0")/common.sh"
echo "== build-gpu: $SECONDS s"
R=${R:-'test_(core|guard|gpu|chunks|runs|frozen|verify|tunables|stress|disk|ipc)\.gpu|conformance_1_0\.gpu'}
step ctest 300 bash -c "cd $build && ctest --output-on-failure -V -L gpu -R '$R'"
grep -E "Test +#|tests passed|tests failed|:F:|:E:" "$logs/ctest.txt" | tail -n 20
step ipc 120 env CMS_GPU_BUILD="$build" OUT="$logs/ipc" bash tools/scripts/gpu-ipc.sh
grep -E "rc=" "$logs/ipc.txt" | tail -n 2
step tms 240 env OUT="$logs" BUDGET_S=$((budget - SECONDS - 10)) bash lab/gpu-session/tms-shim.sh suite
grep -E "public cases|== " "$logs/tms.txt" | tail -n 6
tar -czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
echo "h.sh done in $SECONDS s"
