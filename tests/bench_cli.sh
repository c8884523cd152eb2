#!/usr/bin/env bash
# cms-bench's command line: paths checked before the run (--json FILE, --disk-dir DIR), bad
# usage in a few lines, --help naming every workload, a failure printed once, a named driver
# that cannot load and a workload named by --only that is skipped fail the run.
# usage: bench_cli.sh <cms-bench>
set -u
bench=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # what, condition (0 = ok)
	if [ "$2" -ne 0 ]; then
		echo "FAIL: $1"
		fail=1
	else
		echo "ok: $1"
	fi
}

# An unwritable --json path: exit 2 at once, before any workload ran (no "date" line, no floor).
"$bench" --sim --scale 256 --cycles 2 --json "$tmp/no/such/dir/out.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "--json into a missing directory: exit 2 (got $rc)" $((rc != 2))
grep -q "out.json" "$tmp/err"
check "--json: the message names the file" $?
! grep -qE "^date |floor:" "$tmp/out"
check "--json: nothing ran" $?

# A missing or non-directory --disk-dir: exit 2 before the run, never PASS.
"$bench" --sim --scale 256 --cycles 2 --only g --disk-dir "$tmp/missing" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "--disk-dir missing: exit 2 (got $rc)" $((rc != 2))
! grep -q "PASS" "$tmp/out"
check "--disk-dir missing: no PASS" $?
grep -q "$tmp/missing" "$tmp/err"
check "--disk-dir missing: the message names the directory" $?
: >"$tmp/file"
"$bench" --sim --only g --disk-dir "$tmp/file" >/dev/null 2>"$tmp/err"
rc=$?
check "--disk-dir a regular file: exit 2 (got $rc)" $((rc != 2))

# A bad option: the problem and the synopsis, not the whole help.
"$bench" --no-such-option >"$tmp/out" 2>"$tmp/err"
rc=$?
check "bad option: exit 2 (got $rc)" $((rc != 2))
n=$(wc -l <"$tmp/err")
check "bad option: at most 6 lines on stderr (got $n)" $((n > 6))
grep -q "unknown option '--no-such-option'" "$tmp/err"
check "bad option: named" $?
grep -q "cms-bench --help" "$tmp/err"
check "bad option: points to --help" $?
"$bench" --sim extra >/dev/null 2>"$tmp/err"
n=$(wc -l <"$tmp/err")
check "unexpected argument: at most 6 lines (got $n)" $((n > 6))

# --help describes every workload a..o (one line each: the letter, then what it runs).
"$bench" --help >"$tmp/help"
check "--help: exit 0" $?
for w in a b c d e f g h i j k l m n o; do
	grep -qE "^ +$w  [0-9A-Za-z]" "$tmp/help"
	check "--help describes workload ($w)" $?
done
# cms-bench(1) has an entry for each workload --help lists, and its range ends at the last.
man=$(dirname "$0")/../man/cms-bench.1
last=
for w in $(sed -nE 's/^ +([a-z])  [0-9A-Za-z].*/\1/p' "$tmp/help"); do
	grep -qx ".B ($w)" "$man"
	check "cms-bench(1) describes workload ($w)" $?
	last=$w
done
grep -q "workloads (a) to ($last)" "$man"
check "cms-bench(1) says the workloads are (a) to ($last)" $?

# A failure during the run (--gpu with a driver that cannot load): its message once.
CMS_DRIVER_LIBRARY=$tmp/no-such-libcuda.so "$bench" --gpu >"$tmp/out" 2>"$tmp/err"
rc=$?
check "--gpu without a driver: exit 1 (got $rc)" $((rc != 1))
n=$(cat "$tmp/out" "$tmp/err" | grep -c "no-such-libcuda")
check "--gpu without a driver: the error printed once (got $n)" $((n != 1))
grep -q "^bench: FAIL" "$tmp/out"
check "--gpu without a driver: FAIL line" $?

# A driver named by CMS_DRIVER_LIBRARY that cannot be loaded is an error, also without --gpu:
# no quiet fall back to the simulation (before: the run went on on the simulation, PASS).
CMS_DRIVER_LIBRARY=$tmp/no-such-libcuda.so "$bench" --scale 256 --cycles 2 --only a >"$tmp/out" 2>"$tmp/err"
rc=$?
check "CMS_DRIVER_LIBRARY that cannot load: exit 1 (got $rc)" $((rc != 1))
! grep -q "HOST SIMULATION" "$tmp/out"
check "CMS_DRIVER_LIBRARY that cannot load: no fall back to the simulation" $?
n=$(cat "$tmp/out" "$tmp/err" | grep -c "CMS_DRIVER_LIBRARY=$tmp/no-such-libcuda.so")
check "CMS_DRIVER_LIBRARY that cannot load: named once (got $n)" $((n != 1))
grep -q "^bench: FAIL" "$tmp/out"
check "CMS_DRIVER_LIBRARY that cannot load: FAIL line" $?

# A workload named by --only that is skipped fails the run (before: "skipped" and PASS, exit
# 0): (g) in /proc, whose statvfs says 0 bytes free. Only root passes the writable check on
# /proc; anyone else is refused before the run (exit 2), which the checks above cover.
if [ -w /proc ]; then
	"$bench" --sim --scale 256 --cycles 2 --only g --disk-dir /proc >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "--only g in /proc: exit 1 (got $rc)" $((rc != 1))
	! grep -q "PASS" "$tmp/out"
	check "--only g in /proc: no PASS" $?
	grep -q "(g) was asked for (--only) but cannot run: /proc has 0 B free" "$tmp/err"
	check "--only g in /proc: the reason on stderr" $?
else
	echo "ok: --only g in /proc: not run (not root)"
fi

# A good --json still gets the report.
"$bench" --sim --scale 256 --cycles 2 --only a --json "$tmp/ok.json" >"$tmp/out" 2>&1
rc=$?
check "--json: exit 0 (got $rc)" $((rc != 0))
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["result"] != "pass")' "$tmp/ok.json"
check "--json: valid JSON, result pass" $?
exit $fail
