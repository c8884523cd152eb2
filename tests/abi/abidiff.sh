#!/usr/bin/env bash
# abi_abidiff: the freshly built library is ABI-compatible with a release baseline.
# Usage: abidiff.sh BASELINE.abi LIBRARY SUPPRESSIONS INCLUDE_DIR
#   BASELINE.abi   abi/<ver>/libcumemsaver.so.1.abi (tools/scripts/abi-baseline.sh)
#   LIBRARY        the build's libcumemsaver.so.1, built with -g (RelWithDebInfo or Debug)
#   SUPPRESSIONS   abi/abidiff.suppr: added functions in new nodes, tail growth of sized structs
#   INCLUDE_DIR    the current public headers (to write the library's corpus like the baseline)
# Fails when abidiff reports any change left after the suppressions (exit bits 4
# ABIDIFF_ABI_CHANGE and 8 ABIDIFF_ABI_INCOMPATIBLE_CHANGE), when abidiff itself fails
# (bits 1 and 2: error, usage), or when tests/abi/abi_layout.py finds a baseline struct
# whose old members moved or changed type.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 BASELINE.abi LIBRARY SUPPRESSIONS INCLUDE_DIR" >&2; exit 2; }
base=$1 lib=$2 suppr=$3 inc=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! readelf -S "$lib" | grep -q '\.debug_info'; then
	echo "abi_abidiff: $lib has no debug info: build with -g (RelWithDebInfo or Debug)"
	exit 1
fi
rc=0
abidiff --exported-interfaces-only --fail-no-debug-info --suppressions "$suppr" \
	"$base" "$lib" >"$tmp/report" 2>&1 || rc=$?
cat "$tmp/report"
if [ $((rc & 3)) -ne 0 ]; then
	echo "abi_abidiff: abidiff failed (exit $rc: error or usage; is the library built with -g?)"
	exit 1
fi
if [ $((rc & 12)) -ne 0 ]; then
	kind="ABI change"
	[ $((rc & 8)) -ne 0 ] && kind="incompatible ABI change"
	echo "abi_abidiff: $kind against $(basename "$(dirname "$base")") (abidiff exit $rc): see above."
	echo "If the change is intended and compatible, see docs/abi.md (\"What may change\")."
	exit 1
fi

# Same flags as the baseline (tools/scripts/abi-baseline.sh), so the two corpora compare like for like.
abidw --no-corpus-path --no-comp-dir-path --short-locs --type-id-style hash \
	--headers-dir "$inc" --drop-private-types --exported-interfaces-only \
	--out-file "$tmp/new.abi" "$lib"
python3 "$here/abi_layout.py" "$base" "$tmp/new.abi"
added=$(grep -oE "[0-9]+ Added \(([0-9]+) filtered out\) function" "$tmp/report" | grep -oE "\([0-9]+" | tr -d '(' || true)
echo "abi_abidiff: compatible with $(basename "$(dirname "$base")")" \
	"(${added:-0} functions added in newer version nodes)"
