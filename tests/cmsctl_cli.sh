#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cmsctl's command line without a process to ask: a bad option or command prints the
# one-line usage (not the whole help) and exits 2; --timeout takes whole seconds from 1 to
# 604800; with --json, a socket that cannot be reached is one JSON error object with the
# schema version on stdout (exit 1), as are the errors of a reachable one (test_ipc); an
# empty tag or one with a control character is a usage error said in words; the demo with a
# named driver that cannot be loaded fails.
# Usage: cmsctl_cli.sh CMSCTL
set -u
cmsctl=$1
fail=0
# expect RC WHAT -- ARGS...: runs cmsctl ARGS, keeps stdout in $out and stderr in $err.
expect() {
	local want=$1 what=$2 rc
	shift 3
	out=$("$cmsctl" "$@" 2>/tmp/cmsctl_cli.$$) && rc=0 || rc=$?
	err=$(cat /tmp/cmsctl_cli.$$)
	rm -f /tmp/cmsctl_cli.$$
	if [ "$rc" != "$want" ]; then
		echo "FAIL: $what: cmsctl $*: exit $rc, expected $want; stderr: $err"
		fail=1
	fi
}
short() { # the stderr of a usage error: at most 3 lines, the usage line, not the help
	local what=$1
	if [ "$(printf '%s\n' "$err" | wc -l)" -gt 3 ] || ! printf '%s\n' "$err" | grep -q '^usage: cmsctl ' ||
		printf '%s\n' "$err" | grep -q '^commands:'; then
		echo "FAIL: $what: expected a short usage on stderr, got:"
		printf '%s\n' "$err"
		fail=1
	fi
}
expect 2 "unknown option" -- --bogus
short "unknown option"
printf '%s\n' "$err" | grep -q "unknown option '--bogus'" || { echo "FAIL: --bogus not named: $err"; fail=1; }
expect 2 "unknown command" -- frobnicate
short "unknown command"
expect 2 "missing argument" -- --socket
short "missing argument"
for t in 0 -1 abc 1.5 604801 99999999999999999999; do
	expect 2 "--timeout $t" -- --timeout "$t" --socket /nonexistent/cms.sock status
done
expect 0 "help" -- --help
printf '%s\n' "$out" | grep -q -- '--timeout SECONDS' || { echo "FAIL: --help does not document --timeout"; fail=1; }
sock=/nonexistent-$$/cms.sock
expect 1 "unreachable socket, text" -- --socket "$sock" --timeout 5 status
[ -z "$out" ] || { echo "FAIL: text error wrote to stdout: $out"; fail=1; }
expect 1 "unreachable socket, json" -- --socket "$sock" --json status
case $out in
'{"schema_version": 1, "status": "CMS_ERR_NOT_FOUND", "op": "status", "tag": "", "message": "'*'"}') ;;
*) echo "FAIL: unreachable socket with --json: stdout is not one JSON error object: '$out'"; fail=1 ;;
esac
expect 2 "remote usage, json" -- --socket "$sock" --json pause
case $out in
'{"schema_version": 1, "status": "CMS_ERR_INVALID_ARGUMENT", "op": "pause", '*) ;;
*) echo "FAIL: remote usage error with --json: '$out'"; fail=1 ;;
esac
# An empty tag, or one with a control character, is a usage error said in words before any
# connection (before: "request: op 2, tag" from the encoder, exit 1, or the socket's error).
expect 2 "pause of an empty tag" -- --socket "$sock" pause ''
printf '%s\n' "$err" | grep -q "pause: the tag is empty" ||
	{ echo "FAIL: pause '' does not say the tag is empty: $err"; fail=1; }
printf '%s\n' "$err" | grep -qE "op [0-9]|NOT_FOUND" &&
	{ echo "FAIL: pause '' reports the wire request or the socket: $err"; fail=1; }
expect 2 "resume of a tag with a control character" -- --socket "$sock" resume "$(printf 'kv\tx')"
printf '%s\n' "$err" | grep -q 'resume: the tag "kv?x" holds a control character' ||
	{ echo "FAIL: a control character in the tag is not said so: $err"; fail=1; }
expect 2 "pause of an empty tag, json" -- --socket "$sock" --json pause ''
case $out in
'{"schema_version": 1, "status": "CMS_ERR_INVALID_ARGUMENT", "op": "pause", "tag": "", "message": "pause: the tag is empty'*) ;;
*) echo "FAIL: empty tag with --json: '$out'"; fail=1 ;;
esac
# The demo with a driver named by CMS_DRIVER_LIBRARY that cannot be loaded: an error naming
# it, no quiet fall back to the simulation (before: the demo ran on the simulation, exit 0).
bad_drv=/nonexistent-$$/libcuda.so.1
CMS_DRIVER_LIBRARY=$bad_drv expect 1 "demo with a driver that cannot load" -- demo --size 16M --cycles 1
printf '%s\n' "$out" | grep -q "HOST SIMULATION" &&
	{ echo "FAIL: demo fell back to the simulation: $out"; fail=1; }
printf '%s\n' "$out" "$err" | grep -q "CMS_DRIVER_LIBRARY=$bad_drv" ||
	{ echo "FAIL: demo does not name the driver that failed: $out $err"; fail=1; }
# A remote command without --socket: says it needs one (not "unknown command").
for c in status stats metrics; do
	expect 2 "$c without --socket" -- "$c"
	short "$c without --socket"
	printf '%s\n' "$err" | grep -q -- "--socket PATH $c" ||
		{ echo "FAIL: cmsctl $c without --socket does not ask for --socket: $err"; fail=1; }
	printf '%s\n' "$err" | grep -q "unknown command" &&
		{ echo "FAIL: cmsctl $c without --socket says unknown command: $err"; fail=1; }
done
# A path that exists but is no socket: said so, INVALID_ARGUMENT (not NOT_FOUND), text and JSON.
notsock=$(mktemp)
for c in status stats; do
	expect 1 "regular file as socket, $c" -- --socket "$notsock" "$c"
	printf '%s\n' "$err" | grep -q "CMS_ERR_INVALID_ARGUMENT.*is not a socket (it is a regular file)" ||
		{ echo "FAIL: regular file as socket ($c): $err"; fail=1; }
	expect 1 "regular file as socket, $c, json" -- --socket "$notsock" --json "$c"
	case $out in
	'{"schema_version": 1, "status": "CMS_ERR_INVALID_ARGUMENT", '*'is not a socket'*) ;;
	*) echo "FAIL: regular file as socket with --json ($c): '$out'"; fail=1 ;;
	esac
done
rm -f "$notsock"
# The man pages are of this release and document the 1.2 commands.
man=$(cd "$(dirname "$0")/../man" && pwd)
ver=$("$cmsctl" version | sed -n 's/^cmsctl \([0-9]*\.[0-9]*\)\..*/\1/p')
for page in cmsctl.1 cms-bench.1 cumemsaver.7; do
	grep -q "^\.TH .*\"cumemsaver $ver\"" "$man/$page" ||
		{ echo "FAIL: man/$page is not of cumemsaver $ver: $(grep '^\.TH' "$man/$page")"; fail=1; }
done
for word in stats metrics prometheus; do
	grep -q -- "$word" "$man/cmsctl.1" || { echo "FAIL: man/cmsctl.1 does not document $word"; fail=1; }
done
if command -v python3 >/dev/null; then
	printf '%s\n' "$out" | python3 -c 'import json,sys; json.load(sys.stdin)' ||
		{ echo "FAIL: not valid JSON: $out"; fail=1; }
fi
[ $fail = 0 ] && echo "cmsctl_cli: usage errors, --timeout and JSON errors as documented"
exit $fail
