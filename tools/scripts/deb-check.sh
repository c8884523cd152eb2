#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/scripts/deb-check.sh LOG DEB...: the Debian packages' contents and lintian, briefly
# (steps 2 and 3 of tools/scripts/test-packages.sh):
#  - each package's control fields, control files (shlibs, symbols, triggers) and `dpkg -c`
#    listing go to LOG, not to the terminal;
#  - lintian on each (--fail-on error; its whole output in DEB.lintian): one line per package
#    with its number of files and lintian's errors and warnings, then each error and warning
#    line, indented;
#  - a last line "lintian: E errors, W warnings in N packages[ (tag xCOUNT, ...)]", with the
#    warnings' tags, which tools/scripts/test.sh puts in its recap.
# Exits 1 when lintian finds an error in a package (or fails), else 0.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 LOG DEB..." >&2; exit 2; }
log=$1
shift
: >"$log" || exit 2
errors=0 warnings=0 rc=0
tags=()
for f in "$@"; do
	name=$(basename "$f")
	{
		echo "-- $name"
		dpkg-deb -f "$f" Package Version Architecture Depends Section
		dpkg-deb --ctrl-tarfile "$f" | tar -t | grep -E '^\./(shlibs|symbols|triggers)$' | sed 's/^/   control: /'
		dpkg -c "$f" | awk '{ print "   " $1 " " $6 ($7 ? " " $7 " " $8 : "") }'
	} >>"$log" 2>&1
	files=$(dpkg -c "$f" | grep -vc '/$')
	lintian --fail-on error --suppress-tags-from-file /dev/null "$f" >"$f.lintian" 2>&1
	lrc=$?
	e=$(grep -c '^E:' "$f.lintian")
	w=$(grep -c '^W:' "$f.lintian")
	errors=$((errors + e))
	warnings=$((warnings + w))
	if [ $lrc -ne 0 ] && [ "$e" = 0 ]; then # lintian itself failed: its output is the reason
		echo "-- $name: $files files; lintian failed (exit $lrc):"
		sed 's/^/   /' "$f.lintian"
		rc=1
		continue
	fi
	[ "$e" = 0 ] || rc=1
	echo "-- $name: $files files; lintian: $e error$([ "$e" = 1 ] || echo s), $w warning$([ "$w" = 1 ] || echo s)"
	grep -E '^[EW]:' "$f.lintian" | sed 's/^/   /'
	# "W: package: tag [details]": the tag is the third field
	while read -r tag; do tags+=("$tag"); done < <(awk '/^W:/ { print $3 }' "$f.lintian")
done
summary="lintian: $errors error$([ $errors = 1 ] || echo s), $warnings warning$([ $warnings = 1 ] ||
	echo s) in $# package$([ $# = 1 ] || echo s)"
if [ ${#tags[@]} -gt 0 ]; then
	summary="$summary ($(printf '%s\n' "${tags[@]}" | sort | uniq -c |
		awk '{ printf "%s%s x%d", (NR > 1 ? ", " : ""), $2, $1 }'))"
fi
echo "   (listings: $log; lintian's whole output: DEB.lintian next to each package)"
echo "$summary"
exit $rc
