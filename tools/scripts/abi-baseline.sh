#!/usr/bin/env bash
# Freezes an ABI release: builds the library of a commit (RelWithDebInfo, so with -g)
# from `git archive` in a temporary directory and writes
#   abi/<version>/cumemsaver*.h              the release's public headers, verbatim
#                                            (cumemsaver.h and the subsystem headers it
#                                            includes; not the simulation's)
#   abi/<version>/cumemsaver.map             its version script, verbatim (the conformance
#                                            program links against a stub made from it)
#   abi/<version>/libcumemsaver.so.1.abi     its libabigail baseline (abidw)
# Usage: tools/scripts/abi-baseline.sh <version> <commit>    e.g. tools/scripts/abi-baseline.sh 1.0 e423650
# The release description abi/<version>/cumemsaver.json comes from
# tools/abigen/cut_release.py (docs/abi.md, "Cutting a release").
#
# abidw flags: --headers-dir + --drop-private-types keep only the types the public
# header defines, so the opaque handles (struct cms_context, struct cms_region) stay
# declarations and the library's internals may change freely; --exported-interfaces-only
# keeps the exported functions only; no paths or directories are recorded, so the file
# does not depend on where it was built.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 <version> <commit>" >&2; exit 2; }
ver=$1 commit=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
git -C "$root" archive "$commit" | tar -x -C "$tmp/src"
cmake -S "$tmp/src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMS_BUILD_TESTS=OFF -DCMS_BUILD_TOOLS=OFF >/dev/null
ninja -C "$tmp/build" cumemsaver >/dev/null
mkdir -p "$root/abi/$ver"
for h in "$tmp/src/include"/cumemsaver*.h; do
	[ "$(basename "$h")" = cumemsaver_sim.h ] || cp "$h" "$root/abi/$ver/"
done
cp "$tmp/src/abi/cumemsaver.map" "$root/abi/$ver/cumemsaver.map"
abidw --no-corpus-path --no-comp-dir-path --short-locs --type-id-style hash \
	--headers-dir "$tmp/src/include" --drop-private-types --exported-interfaces-only \
	--out-file "$root/abi/$ver/libcumemsaver.so.1.abi" "$tmp/build/libcumemsaver.so.1"
echo "abi/$ver: cumemsaver*.h, cumemsaver.map, libcumemsaver.so.1.abi" \
	"($(grep -c '<elf-symbol ' "$root/abi/$ver/libcumemsaver.so.1.abi") functions)"
