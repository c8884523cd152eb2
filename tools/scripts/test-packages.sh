#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages, end to end (run by tools/scripts/test.sh; needs root and Debian):
#  1. configures build-deb/ for /usr (static library on, no tests), builds it and runs
#     `cpack -G DEB`: libcumemsaver1, libcumemsaver-dev, cumemsaver-tools;
#  2. lintian on each package: no error; its errors and warnings printed, with their count;
#  3. each package's control fields and `dpkg -c` listing into BUILD_DIR/packages-contents.log
#     (2 and 3: tools/scripts/deb-check.sh);
#  4. installs the three with dpkg, builds a consumer with `pkg-config` alone and one with
#     find_package(cumemsaver) against /usr, runs both and `cmsctl demo --sim` on the host
#     simulation installed by libcumemsaver1;
#  5. removes the packages (also on failure) and checks that their files are gone.
# Usage: test-packages.sh [BUILD_DIR]   (default build-deb)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${1:-build-deb}
pkgs=(libcumemsaver1 libcumemsaver-dev cumemsaver-tools)
[ "$(id -u)" = 0 ] || { echo "test-packages: needs root (dpkg -i)" >&2; exit 2; }
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
	-DCMS_BUILD_TESTS=OFF -DCMS_BUILD_STATIC=ON -DCMS_WERROR=ON >"$build/configure.log" 2>&1 ||
	{ cat "$build/configure.log"; exit 1; }
ninja -C "$build" >"$build/ninja.log" 2>&1 || { tail -n 40 "$build/ninja.log"; exit 1; }
rm -f "$build"/*.deb
(cd "$build" && cpack -G DEB) >"$build/cpack.log" 2>&1 || { tail -n 40 "$build/cpack.log"; exit 1; }
debs=()
for p in "${pkgs[@]}"; do
	f=$(ls "$build"/"${p}"_*.deb 2>/dev/null | head -n1)
	[ -n "$f" ] || { echo "test-packages: no $p package"; ls "$build"/*.deb; exit 1; }
	debs+=("$f")
done
# Contents into a log, lintian's errors and warnings on the terminal (tools/scripts/deb-check.sh).
bash "$root/tools/scripts/deb-check.sh" "$build/packages-contents.log" "${debs[@]}" | tee "$build/lintian.log"
lint=$(tail -n 1 "$build/lintian.log")

remove() { dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true; }
trap remove EXIT
remove
dpkg -i "${debs[@]}" >"$build/dpkg-install.log" 2>&1 || { cat "$build/dpkg-install.log"; exit 1; }
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
sim=/usr/lib/$multiarch/cumemsaver/libcumemsaver-sim.so
[ -f "$sim" ] || { echo "test-packages: $sim not installed"; exit 1; }
work=$(mktemp -d)
cat >"$work/consumer.c" <<'C'
#include <cumemsaver.h>
#include <stdio.h>
int main(void)
{
	cms_context *ctx = NULL;
	cms_region *r = NULL;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	uint64_t p = 0;
	cms_status st = cms_context_create(NULL, &ctx);

	o.policy = CMS_POLICY_HOST;
	if (!st)
		st = cms_region_create(ctx, "weights", &o, &r);
	if (!st)
		st = cms_alloc(r, 1 << 20, &p);
	if (!st)
		st = cms_pause(ctx, "weights", NULL, NULL);
	if (!st)
		st = cms_resume(ctx, "weights", NULL, NULL);
	printf("consumer %s: %s %s\n", cms_version_string(), cms_status_name(st), cms_last_error());
	cms_context_destroy(ctx);
	return st ? 1 : 0;
}
C
# pkg-config alone: a /usr install needs no -I or -L (pkg-config filters system directories).
flags=$(env -u PKG_CONFIG_PATH pkg-config --cflags --libs cumemsaver | xargs)
[ "$flags" = "-lcumemsaver" ] || { echo "test-packages: pkg-config gives '$flags', expected -lcumemsaver"; exit 1; }
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror -o "$work/consumer" "$work/consumer.c" $flags
CMS_DRIVER_LIBRARY=$sim "$work/consumer"
# libcumemsaver.a, with the libraries `pkg-config --static` lists: no NEEDED libcumemsaver.
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$work/consumer-static" "$work/consumer.c" "/usr/lib/$multiarch/libcumemsaver.a" \
	$(env -u PKG_CONFIG_PATH pkg-config --static --libs cumemsaver | sed 's/-lcumemsaver//')
! readelf -d "$work/consumer-static" | grep -q 'NEEDED.*libcumemsaver' ||
	{ echo "test-packages: the static consumer needs libcumemsaver.so"; exit 1; }
CMS_DRIVER_LIBRARY=$sim "$work/consumer-static"
mkdir -p "$work/cm"
cat >"$work/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(cumemsaver 1.1 REQUIRED)
add_executable(consumer ../consumer.c)
target_link_libraries(consumer PRIVATE cumemsaver::cumemsaver)
CM
cmake -S "$work/cm" -B "$work/cm/build" >/dev/null
cmake --build "$work/cm/build" >/dev/null
CMS_DRIVER_LIBRARY=$sim "$work/cm/build/consumer"
/usr/bin/cmsctl demo --sim --size 16M --cycles 1 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; exit 1; }
echo "cmsctl demo --sim (installed): $(tail -n 1 "$work/demo.log")"
for m in man1/cmsctl.1.gz man1/cms-bench.1.gz man7/cumemsaver.7.gz; do
	[ -f "/usr/share/man/$m" ] || { echo "test-packages: /usr/share/man/$m not installed"; exit 1; }
done
rm -rf "$work"
trap - EXIT
dpkg --purge "${pkgs[@]}" >/dev/null
for f in /usr/lib/$multiarch/libcumemsaver.so.1 /usr/include/cumemsaver.h /usr/bin/cmsctl "$sim"; do
	[ ! -e "$f" ] || { echo "test-packages: $f left after removal"; exit 1; }
done
echo "packages: built, $lint, installed, pkg-config/static/find_package consumers and cmsctl ran, removed"
