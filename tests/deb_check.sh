#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/scripts/deb-check.sh on a small package built here, with a stand-in lintian on PATH
# that answers two warnings (then an error): the listing goes to the log, not to the terminal;
# each warning line is printed after its package's line with the count, and the last line
# counts them and names their tags (test.sh's recap); an error fails (exit 1) and is printed.
# Needs dpkg-deb (77: skipped without it).
# Usage: deb_check.sh SOURCE_DIR WORK_DIR
set -u
src=$1 work=$2
command -v dpkg-deb >/dev/null || { echo "deb_check: no dpkg-deb, skipped"; exit 77; }
rm -rf "$work"
mkdir -p "$work/pkg/DEBIAN" "$work/pkg/usr/share/doc/cms-probe" "$work/bin"
cat >"$work/pkg/DEBIAN/control" <<'CTL'
Package: cms-probe
Version: 1.0
Architecture: all
Maintainer: cumemsaver tests <tests@example.invalid>
Description: a package for tests/deb_check.sh
CTL
for i in 1 2 3; do echo "file $i" >"$work/pkg/usr/share/doc/cms-probe/file$i.txt"; done
dpkg-deb --root-owner-group --build "$work/pkg" "$work/cms-probe_1.0_all.deb" >/dev/null || exit 1
# lintian: the lines of $LINTIAN_SAYS, exit 1 when one is an error (as --fail-on error)
cat >"$work/bin/lintian" <<'SH'
#!/bin/sh
printf '%b' "$LINTIAN_SAYS"
printf '%b' "$LINTIAN_SAYS" | grep -q '^E:' && exit 1
exit 0
SH
chmod +x "$work/bin/lintian"
fail=0
run() { # expected exit, then the stand-in's lines
	local want=$1 rc
	LINTIAN_SAYS=$2 PATH="$work/bin:$PATH" bash "$src/tools/scripts/deb-check.sh" "$work/contents.log" \
		"$work/cms-probe_1.0_all.deb" >"$work/out" 2>&1
	rc=$?
	[ $rc = "$want" ] || { echo "FAIL: exit $rc, expected $want; output:"; cat "$work/out"; fail=1; }
}
has() { grep -qF -- "$1" "$work/out" || { echo "FAIL: no '$1' in:"; cat "$work/out"; fail=1; }; }

w1='W: cms-probe: no-copyright-file'
w2='W: cms-probe: description-too-short a package for tests'
run 0 "$w1\n$w2\nN: a note\n"
has "-- cms-probe_1.0_all.deb: 3 files; lintian: 0 errors, 2 warnings"
has "   $w1"
has "   $w2"
[ "$(tail -n 1 "$work/out")" = "lintian: 0 errors, 2 warnings in 1 package (description-too-short x1, no-copyright-file x1)" ] ||
	{ echo "FAIL: last line: $(tail -n 1 "$work/out")"; fail=1; }
grep -q "file2.txt" "$work/out" && { echo "FAIL: the listing is on the terminal"; fail=1; }
grep -q "file2.txt" "$work/contents.log" || { echo "FAIL: the listing is not in the log"; fail=1; }
grep -q "^Package: cms-probe" "$work/contents.log" || { echo "FAIL: no control fields in the log"; fail=1; }
n=$(wc -l <"$work/out")
[ "$n" -le 5 ] || { echo "FAIL: $n lines for one package with two warnings"; fail=1; }

run 1 "E: cms-probe: some-error\n$w1\n"
has "lintian: 1 error, 1 warning"
has "   E: cms-probe: some-error"

run 0 ""
[ "$(tail -n 1 "$work/out")" = "lintian: 0 errors, 0 warnings in 1 package" ] ||
	{ echo "FAIL: clean: last line $(tail -n 1 "$work/out")"; fail=1; }
[ $fail = 0 ] && echo "deb_check: listing in the log, lintian's warnings counted, listed and in the last line"
exit $fail
