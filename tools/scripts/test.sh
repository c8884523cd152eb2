#!/usr/bin/env bash
# Quick start, command 2: the whole test suite. Builds four ways and runs ctest:
#   build/       RelWithDebInfo: unit + simulation suites (+ GPU suites where a GPU exists)
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer)
#   build-tsan/  ThreadSanitizer over every suite that starts threads (ctest -LE nothreads:
#                tests/CMakeLists.txt lists the few that start none; stress and fork included)
#   build-fuzz/  clang + libFuzzer + ASan/UBSan: option structs, tags and the IPC protocol, 60 s each
# plus the Python package (unittest), the Rust and Go bindings (tools/scripts/test-bindings.sh)
# and the Debian packages (tools/scripts/test-packages.sh: build, lintian, install, consume,
# remove). About 26 minutes on a 2-core machine (docs/testing.md). Each test is
# printed as it finishes (number, name, result, time), each stage with its elapsed time, and
# the run ends with one recap: stages and times, tests passed per stage, fault points, fuzz
# runs, total real time.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/deps.sh
jobs=$(nproc)
t_all=$SECONDS
recap=()
stage_start() { t_stage=$SECONDS; echo "== $1"; }
stage_end() { # name [what passed]
	local line
	line=$(printf '%-11s %5d s' "$1" $((SECONDS - t_stage)))
	[ -n "${2:-}" ] && line="$line  $2"
	recap+=("$line")
	echo "== $1: $((SECONDS - t_stage)) s"
}
# A test's line in a ctest log: "  3/45 Test  #3: name ....   Passed   0.50 sec" (ctest pads
# the counters with spaces), then the totals. Printed while ctest runs, one line per test.
test_line='^ *[0-9]+/[0-9]+ +Test +#[0-9]+:|[0-9]+% tests passed|tests failed|\*\*\*'
run() { # dir, cmake args..., -- ctest args...
	local dir=$1; shift
	local cm=() ct=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do cm+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	ct=("$@")
	stage_start "$dir"
	# tests on unless the stage says otherwise (tools/scripts/demo.sh configures build/ without)
	cmake -S . -B "$dir" -G Ninja -DCMS_WERROR=ON -DCMS_BUILD_TESTS=ON "${cm[@]}" >/dev/null
	ninja -C "$dir" >/dev/null
	local rc=0
	# The whole verbose output goes to the log; each test's result line to the terminal now.
	set +e
	(cd "$dir" && ctest -V -j "$jobs" "${ct[@]}") 2>&1 | tee "$dir/ctest-full.log" |
		grep --line-buffered -E "$test_line"
	rc=${PIPESTATUS[0]}
	set -e
	if [ $rc -ne 0 ]; then
		echo "== $dir: FAILED:"
		sed -n '/The following tests FAILED/,/^Errors while/p' "$dir/ctest-full.log" | head -n 30
		# each failed test's last lines (ctest -V prefixes a test's output with its number)
		for n in $(sed -n '/The following tests FAILED/,$s/^[[:space:]]*\([0-9][0-9]*\) - .*/\1/p' \
			"$dir/ctest-full.log"); do
			echo "-- test $n, last lines:"
			grep "^$n: " "$dir/ctest-full.log" | tail -n 40
		done
		echo "(full log: $dir/ctest-full.log)"
		exit $rc
	fi
	stage_end "$dir" "$(passed_of "$dir/ctest-full.log")"
}
passed_of() { # ctest log -> "70 passed, 3 skipped of 73"
	local total skipped failed
	total=$(grep -cE '^ *[0-9]+/[0-9]+ +Test +#[0-9]+:' "$1" || true)
	skipped=$(grep -cE '^ *[0-9]+/[0-9]+ +Test +#[0-9]+:.*\*\*\*Skipped' "$1" || true)
	failed=$(grep -oE '[0-9]+ tests failed' "$1" | tail -n 1 | cut -d' ' -f1)
	echo "tests: $((total - skipped - ${failed:-0})) passed, $skipped skipped of $total"
}
run build -DCMAKE_BUILD_TYPE=RelWithDebInfo
stage_start "python (bindings/python and bindings/python-tms against build/ on the host simulation)"
# bindings/python/tests, then bindings/python-tms/tests (the name torch_memory_saver) in a
# process of its own: its package takes that top-level name
py_ran=()
for suite in python python-tms; do
	py_rc=0
	CUMEMSAVER_LIBRARY=$PWD/build/libcumemsaver.so.1 CMS_DRIVER_LIBRARY=$PWD/build/src/sim/libcumemsaver-sim.so \
		CMS_CMSCTL=$PWD/build/bin/cmsctl PYTHONPATH=$PWD/bindings/python python3 -m unittest discover \
		-s bindings/$suite/tests -v >build/$suite-tests.log 2>&1 || py_rc=$?
	echo "$suite: $(grep -E '^Ran [0-9]+ tests' build/$suite-tests.log || echo 'no tests ran'), $(tail -n 1 build/$suite-tests.log)"
	if [ $py_rc -ne 0 ]; then
		grep -E "^(FAIL|ERROR):|Error|assert" build/$suite-tests.log | head -n 40
		echo "(full log: build/$suite-tests.log)"
		exit $py_rc
	fi
	py_ran+=("$suite $(grep -oE '^Ran [0-9]+ tests' build/$suite-tests.log | cut -d' ' -f2) run, $(tail -n 1 build/$suite-tests.log)")
done
stage_end python "tests: ${py_ran[0]}; ${py_ran[1]}"
stage_start "bindings (C, Rust, Go against a staged install of build/, found through pkg-config)"
bash tools/scripts/test-bindings.sh build | tee build/bindings.log
stage_end bindings "$(grep -oE '^(c: consumer|rust: [0-9]+ tests passed|go: [0-9]+ tests passed)' build/bindings.log | paste -sd, - | sed 's/,/, /g')"
stage_start "packages (cpack -G DEB, lintian, dpkg -i, consumers, dpkg --purge)"
bash tools/scripts/test-packages.sh build-deb | tee build/packages.log
# lintian's count and tags in the recap: tools/scripts/deb-check.sh's last line
stage_end packages "built, $(grep -m 1 '^lintian: ' build/packages.log), installed, consumed, removed"
faults=$(awk '/fault sweep: .*: [0-9]+ points/ { for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^points/) n += $i }
     END { print "fault points exercised: " n }' build/ctest-full.log)
echo "$faults"
figures=$(grep -hoE "(bad input|stress): .*" build/ctest-full.log | sort -u || true)
echo "$figures"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	run build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMS_SANITIZE=address;undefined" -- -L "unit|sim"
# Only the suites that start threads: the few that start none are labelled nothreads
# (tests/CMakeLists.txt; the plain build checks the label with a pthread_create guard).
TSAN_OPTIONS=halt_on_error=1 \
	run build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMS_SANITIZE=thread -- -L "unit|sim" -LE nothreads
CC=clang run build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMS_FUZZ=ON -DCMS_BUILD_TESTS=OFF \
	"-DCMS_SANITIZE=address;undefined" -- -L fuzz
# Each fuzzer by name with its run count: ctest -V prefixes a test's output with its number.
fuzz=$(awk 'match($0, /^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: [^ ]+/) {
		split(substr($0, RSTART, RLENGTH), a, /#|: /); name[a[2] + 0] = a[3]
	}
	match($0, /^[0-9]+: Done [0-9]+ runs in [0-9]+ second/) {
		split($0, b, /[: ]+/); runs[b[1] + 0] = b[3]; secs[b[1] + 0] = b[6]
	}
	END { for (n in runs) printf "fuzz: %s: %s runs in %s s\n", (n in name ? name[n] : "test " n), runs[n], secs[n] }' \
	build-fuzz/ctest-full.log | sort)
echo "$fuzz"
total=$((SECONDS - t_all))
echo
echo "== recap"
printf '%s\n' "${recap[@]}"
echo "$faults"
[ -z "$figures" ] || echo "$figures"
echo "$fuzz"
printf 'all suites passed in %d s (%d min %02d s real time, %d cores)\n' "$total" $((total / 60)) \
	$((total % 60)) "$jobs"
