#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A plain `cmake --install` writes no Debian-only file (share/doc/<package>/copyright,
# changelog*: the packages' alone, cmake/CmsPackage.cmake), and the `uninstall` target
# (cmake/CmsUninstall.cmake) removes every file it installed.
# usage: uninstall.sh BUILD_DIR STAGE_DIR
set -u
build=$1
stage=$2
fail=0
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" >/dev/null || { echo "FAIL: cmake --install"; exit 1; }
n=$(find "$stage" -type f | wc -l)
[ "$n" -gt 0 ] || { echo "FAIL: nothing installed"; fail=1; }
deb=$(find "$stage" -path '*/share/doc/*' \( -name copyright -o -name 'changelog*' \))
[ -z "$deb" ] || { echo "FAIL: Debian-only files installed by cmake --install:"; echo "$deb"; fail=1; }
cmake --build "$build" --target uninstall >/dev/null || { echo "FAIL: uninstall target"; fail=1; }
left=$(find "$stage" \( -type f -o -type l \))
[ -z "$left" ] || { echo "FAIL: left after uninstall:"; echo "$left"; fail=1; }
left=$(find "$stage" -name '*cumemsaver*')
[ -z "$left" ] || { echo "FAIL: directories of the project left:"; echo "$left"; fail=1; }
[ $fail -eq 0 ] && echo "uninstall: $n files installed (no Debian-only file), all removed"
rm -rf "$stage"
exit $fail
