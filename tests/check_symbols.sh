#!/usr/bin/env bash
# The library exports exactly the functions of the ABI description (abi/cumemsaver.json), each
# in the version node of the release it appeared in (cms_x@@CMS_1.1; a function re-versioned
# with "nodes": [...] also has its old versions, cms_x@CMS_1.0), and the version script lists
# the same functions in the same nodes. All exported symbols are cms_-prefixed.
# Usage: check_symbols.sh LIB MAP [DESCRIPTION] (DESCRIPTION defaults to MAP's cumemsaver.json)
set -euo pipefail
lib=$1 map=$2 desc=${3:-$(dirname "$2")/cumemsaver.json}

# "name@@NODE" for every defined dynamic symbol.
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVWi]$/ {print $3}' | grep -v '^CMS_[0-9.]*$' | sort)
bad=$(printf '%s\n' "$exported" | grep -v '^cms_' || true)
if [ -n "$bad" ]; then echo "symbols without the cms_ prefix exported:"; echo "$bad"; exit 1; fi
unversioned=$(printf '%s\n' "$exported" | grep -vE '@@?CMS_[0-9]+\.[0-9]+$' || true)
if [ -n "$unversioned" ]; then echo "symbols without a CMS_x.y version:"; echo "$unversioned"; exit 1; fi

# "name@@NODE" from the version script: the node each global is listed in.
listed=$(awk '
	/^[A-Za-z0-9_.]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); next }
	/^[ \t]*(global|local):/ { scope = $1; next }
	/^\}/ { node = ""; next }
	node != "" && scope == "global:" && /^[ \t]*cms_[a-z0-9_]+;/ { gsub(/[ \t;]/, ""); print $0 "@@" node }
' "$map" | sort)

# From the description: node = node_prefix + since, or each release of "nodes" for a function
# re-versioned in a later release (old version name@CMS_1.0 kept, default name@@CMS_1.1).
# $1 = map: one "name@@NODE" per node listing it; $1 = lib: what nm -D shows.
described_as() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[2]))
p = d.get("node_prefix", "CMS_")
for f in d["functions"]:
    nodes = f.get("nodes", [f["since"]])
    for r in nodes:
        at = "@@" if sys.argv[1] == "map" or r == nodes[-1] else "@"
        print(f["name"] + at + p + r)
' "$1" "$desc" | sort
}
described=$(described_as lib)

fail=0
if [ "$(described_as map)" != "$listed" ]; then
	echo "version script $map differs from $desc (run python3 tools/abigen/abigen.py):"
	diff <(described_as map) <(echo "$listed") || true; fail=1
fi
if [ "$exported" != "$described" ]; then
	echo "exported symbols of $lib differ from $desc (< described, > exported):"
	diff <(echo "$described") <(echo "$exported") || true; fail=1
fi
[ $fail -eq 0 ] || exit 1
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libcumemsaver.so.1" ] || { echo "SONAME is '$soname'"; exit 1; }
if readelf -d "$lib" | grep -qE 'NEEDED.*lib(cuda|cudart)'; then echo "links CUDA at link time"; exit 1; fi
nodes=$(printf '%s\n' "$exported" | sed 's/.*@@\?//' | sort | uniq -c | awk '{printf "%s%s: %s", sep, $2, $1; sep = ", "}')
echo "symbols: $(printf '%s\n' "$exported" | wc -l) exported ($nodes), all cms_, each in its release's node, SONAME $soname"
