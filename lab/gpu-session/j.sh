#!/usr/bin/env bash
# GPU call for issue 36 (architecture 3) and issue 37 item 4, one call under the device tool's
# limit. Carry .deps (Check) and .peer (../shared/peer). Set CMS_COMMIT. Builds the tree
# (common.sh: build-gpu), then while BUDGET_S lasts:
#   every gpu-labelled ctest (-V: test_swap/test_multigpu print which cases ran on one GPU),
#   the CUDA lists judged against the trace (tools/testing/check_cuda_lists.py --judge, its
#   record kept), cmsctl demo --gpu, the IPC demos, the Python GPU tests, the peer's suite by
#   the import name torch_memory_saver (lab/gpu-session/tms-shim.sh suite).
# Logs: $OUT/logs.tgz (record.txt beside it); summaries printed.
. "$(dirname "$0")/common.sh"
echo "== build-gpu: $SECONDS s"
step ctest-gpu 360 bash -c "cd $build && CK_TAP_LOG_FILE_NAME=/dev/stderr ctest --output-on-failure -V -L gpu --timeout 300"
grep -E "Test +#|tests passed|tests failed|:F:|:E:|Checks:" "$logs/ctest-gpu.txt" | tail -n 45
grep -E "^(ok|not ok|SKIP)|SKIP " "$logs/ctest-gpu.txt" | grep -iE "swap|multigpu|tag_spans|peer_|every_tag|threads_on" | head -n 30
step cuda-lists 90 python3 tools/testing/check_cuda_lists.py --program "$build/tests/test_cuda_calls" \
	--shim "$build/tests/libcms-cuda-trace.so" --target libcuda.so.1 --judge --record "$out/record.txt"
tail -n 25 "$logs/cuda-lists.txt"
step demo 60 "$build/bin/cmsctl" demo --gpu
tail -n 2 "$logs/demo.txt"
step python-gpu 120 env PYTHONPATH="$PWD/bindings/python" python3 -m unittest -v bindings/python/tests/test_tms_gpu.py
tail -n 4 "$logs/python-gpu.txt"
step ipc 120 env CMS_GPU_BUILD="$build" OUT="$logs/ipc" bash tools/scripts/gpu-ipc.sh
grep -E "rc=" "$logs/ipc.txt" | tail -n 4
step tms 200 env OUT="$logs" BUDGET_S=$((budget - SECONDS - 10)) bash lab/gpu-session/tms-shim.sh suite
grep -E "public cases|== " "$logs/tms.txt" | tail -n 6
tar -czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
echo "j.sh done in $SECONDS s"
