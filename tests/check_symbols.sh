#!/usr/bin/env bash
# The library exports exactly the cms_ symbols of the version script, all in node CMS_1.0 or later.
set -euo pipefail
lib=$1 map=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort)
bad=$(printf '%s\n' "$exported" | grep -v '^cms_' || true)
if [ -n "$bad" ]; then echo "symbols without the cms_ prefix exported:"; echo "$bad"; exit 1; fi
listed=$(grep -oE '^\s+cms_[a-z0-9_]+;' "$map" | tr -d ' \t;' | sort)
if [ "$exported" != "$listed" ]; then
  echo "exported symbols differ from $map:"; diff <(echo "$listed") <(echo "$exported") || true; exit 1
fi
unversioned=$(nm -D --defined-only "$lib" | awk '$3 ~ /^cms_/ && $3 !~ /@@?CMS_1\.[0-9]+$/ {print $3}')
if [ -n "$unversioned" ]; then echo "symbols without a CMS_1.x version: $unversioned"; exit 1; fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libcumemsaver.so.1" ] || { echo "SONAME is '$soname'"; exit 1; }
if readelf -d "$lib" | grep -qE 'NEEDED.*lib(cuda|cudart)'; then echo "links CUDA at link time"; exit 1; fi
echo "symbols: $(printf '%s\n' "$exported" | wc -l) exported, all cms_, all versioned, SONAME $soname"
