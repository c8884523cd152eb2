#!/usr/bin/env bash
# Quick start, command 2: the whole test suite. Builds four ways and runs ctest:
#   build/       RelWithDebInfo: unit + simulation suites (+ GPU suites where a GPU exists)
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer)
#   build-tsan/  ThreadSanitizer over the same suites (stress and fork included)
#   build-fuzz/  clang + libFuzzer + ASan/UBSan: option structs, tags and the IPC protocol, 60 s each
# plus the Python package (unittest), and the Rust and Go bindings (tools/scripts/test-bindings.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/deps.sh
jobs=$(nproc)
run() { # dir, cmake args..., -- ctest args...
	local dir=$1; shift
	local cm=() ct=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do cm+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	ct=("$@")
	echo "== $dir"
	cmake -S . -B "$dir" -G Ninja "${cm[@]}" >/dev/null
	ninja -C "$dir" >/dev/null
	local rc=0
	(cd "$dir" && ctest -V -j "$jobs" "${ct[@]}") >"$dir/ctest-full.log" 2>&1 || rc=$?
	grep -E "^[0-9]+/[0-9]+ Test|tests passed|tests failed|\*\*\*" "$dir/ctest-full.log" || true
	if [ $rc -ne 0 ]; then
		echo "== $dir: FAILED; the failing tests' output:"
		grep -E "^[0-9]+: .*(F:|E:|Assertion|FAIL|error|ERROR)" "$dir/ctest-full.log" | head -n 80
		echo "(full log: $dir/ctest-full.log)"
		exit $rc
	fi
}
run build -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== python (bindings/python against build/ on the host simulation)"
py_rc=0
CUMEMSAVER_LIBRARY=$PWD/build/libcumemsaver.so.1 CMS_DRIVER_LIBRARY=$PWD/build/src/sim/libcumemsaver-sim.so \
	CMS_CMSCTL=$PWD/build/bin/cmsctl PYTHONPATH=$PWD/bindings/python python3 -m unittest discover -s bindings/python/tests -v \
	>build/python-tests.log 2>&1 || py_rc=$?
echo "python: $(grep -E '^Ran [0-9]+ tests' build/python-tests.log || echo 'no tests ran'), $(tail -n 1 build/python-tests.log)"
if [ $py_rc -ne 0 ]; then
	grep -E "^(FAIL|ERROR):|Error|assert" build/python-tests.log | head -n 40
	echo "(full log: build/python-tests.log)"
	exit $py_rc
fi
echo "== bindings (C, Rust, Go against a staged install of build/, found through pkg-config)"
bash tools/scripts/test-bindings.sh build
awk '/fault sweep: .*: [0-9]+ points/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^points/) n += $i }
     END { print "fault points exercised: " n }' build/ctest-full.log
grep -hoE "(bad input|stress): .*" build/ctest-full.log | sort -u || true
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	run build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMS_SANITIZE=address;undefined" -- -L "unit|sim"
TSAN_OPTIONS=halt_on_error=1 \
	run build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMS_SANITIZE=thread -- -L "unit|sim"
CC=clang run build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMS_FUZZ=ON -DCMS_BUILD_TESTS=OFF \
	"-DCMS_SANITIZE=address;undefined" -- -L fuzz
grep -hoE "fuzz_[a-z]+ -max|Done [0-9]+ runs in [0-9]+ second" build-fuzz/ctest-full.log | paste - - || true
echo "all suites passed"
