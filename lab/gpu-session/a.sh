#!/usr/bin/env bash
# GPU call A: every gpu-labelled test, the demo, the Python GPU tests, the handle experiment.
. "$(dirname "$0")/common.sh"
(cd "$build" && ctest --output-on-failure -L gpu --timeout 300 ${CTEST_ARGS:-}) >"$out/ctest-gpu.txt" 2>&1
echo "ctest rc=$?"; grep -E "Test +#|tests passed|tests failed" "$out/ctest-gpu.txt"
"$build/bin/cmsctl" demo --gpu >"$out/demo.txt" 2>&1; echo "demo rc=$?"; tail -n 2 "$out/demo.txt"
PYTHONPATH=$PWD/bindings/python timeout 300 python3 -m unittest bindings/python/tests/test_tms_gpu.py -v \
	>"$out/python-gpu.txt" 2>&1; echo "python gpu rc=$?"; tail -n 4 "$out/python-gpu.txt"
[ -n "${SKIP_EXP:-}" ] || { timeout 120 "$build/bin/cms-exp-handles" -G >"$out/exp-handles.txt" 2>&1
	echo "exp rc=$?"; grep -E "^C[0-9]|PASS|FAIL" "$out/exp-handles.txt"; }
