#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/scripts/demo.sh (quick start, command 1) as on a fresh Debian 12 machine, in a copy of
# the tree with no build/: stand-ins on PATH say no Debian package is installed (dpkg-query),
# record what apt-get is asked to install, and fail as the tools the demo must not need
# (pkg-config/pkgconf for Check, python3, clang, go, cargo, lintian). The demo must ask for a C
# compiler, CMake and Ninja only (gcc libc6-dev cmake ninja-build), configure with the tests
# off (no Check looked for), build and pass on the host simulation. Builds the library once.
# Usage: demo_script.sh SOURCE_DIR WORK_DIR
set -u
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work/tree" "$work/bin"
# the tree without its build directories and VCS metadata
for e in "$src"/* "$src"/.clang-format; do
	case $(basename "$e") in build*) continue ;; esac
	cp -a "$e" "$work/tree/" || exit 1
done
cat >"$work/bin/dpkg-query" <<'SH'
#!/bin/sh
exit 1
SH
cat >"$work/bin/apt-get" <<SH
#!/bin/sh
echo "\$*" >>"$work/apt-get.log"
SH
for t in pkg-config pkgconf python3 clang go cargo lintian; do
	cat >"$work/bin/$t" <<SH
#!/bin/sh
echo "$t \$*" >>"$work/used.log"
exit 1
SH
done
chmod +x "$work/bin"/*
fail=0
env -u CMS_DRIVER_LIBRARY PATH="$work/bin:$PATH" bash "$work/tree/tools/scripts/demo.sh" --sim --size 16M \
	--cycles 1 >"$work/demo.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^demo: PASS" "$work/demo.log" ||
	{ echo "FAIL: demo.sh exit $rc; its output:"; tail -n 30 "$work/demo.log"; fail=1; }
asked=$(sed -n 's/^install -y -qq --no-install-recommends //p' "$work/apt-get.log" 2>/dev/null | tr ' ' '\n' |
	sort | xargs)
[ "$asked" = "cmake gcc libc6-dev ninja-build" ] ||
	{ echo "FAIL: demo.sh asked apt-get for: '$asked' (want: cmake gcc libc6-dev ninja-build)"; fail=1; }
[ -s "$work/used.log" ] && { echo "FAIL: the demo ran tools it does not install:"; cat "$work/used.log"; fail=1; }
grep -q "^CMS_BUILD_TESTS:BOOL=OFF$" "$work/tree/build/CMakeCache.txt" 2>/dev/null ||
	{ echo "FAIL: build/ not configured with CMS_BUILD_TESTS=OFF"; fail=1; }
[ $fail = 0 ] && echo "demo_script: asked for $asked only, tests off, demo passed"
rm -rf "$work/tree"
exit $fail
