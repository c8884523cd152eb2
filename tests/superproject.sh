#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The tree as another project's add_subdirectory(): the project is not top-level, so no
# test, tool or lab target is defined (and Check is not needed); cumemsaver::cumemsaver (an
# ALIAS) links, as does cumemsaver::cumemsaver_static with CMS_BUILD_STATIC=ON (no NEEDED
# libcumemsaver); both run on the simulation. An absolute CMAKE_INSTALL_LIBDIR installs the
# library, the .pc (libdir= that directory, no "//") and the CMake package there.
# Usage: superproject.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work/super"
cat >"$work/super/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(super C)
add_subdirectory("$src" cumemsaver)
foreach(t cmsctl cms-bench cms-ipc-demo test_api test_core)
  if(TARGET \${t})
    message(FATAL_ERROR "\${t} is defined in a superproject")
  endif()
endforeach()
add_executable(app app.c)
target_link_libraries(app PRIVATE cumemsaver::cumemsaver)
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE cumemsaver::cumemsaver_static)
CM
cat >"$work/super/app.c" <<'C'
#include <cumemsaver.h>
#include <stdio.h>
int main(void)
{
	cms_context *ctx = NULL;
	cms_region *r = NULL;
	uint64_t p = 0;
	cms_status st = cms_context_create(NULL, &ctx);

	if (!st)
		st = cms_region_create(ctx, "kv", NULL, &r);
	if (!st)
		st = cms_alloc(r, 1 << 20, &p);
	if (!st)
		st = cms_pause(ctx, "kv", NULL, NULL);
	if (!st)
		st = cms_resume(ctx, "kv", NULL, NULL);
	printf("app: %s %s\n", cms_status_name(st), cms_last_error());
	cms_context_destroy(ctx);
	return st ? 1 : 0;
}
C
libdir=$work/opt/lib64
cmake -S "$work/super" -B "$work/build" -G Ninja -DCMS_BUILD_STATIC=ON \
	-DCMAKE_INSTALL_PREFIX="$work/usr" -DCMAKE_INSTALL_LIBDIR="$libdir" >"$work/configure.log" ||
	{ cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j2 >"$work/build.log" || { tail -n 40 "$work/build.log"; exit 1; }
sim=$work/build/cumemsaver/src/sim/libcumemsaver-sim.so
CMS_DRIVER_LIBRARY=$sim "$work/build/app"
CMS_DRIVER_LIBRARY=$sim "$work/build/app_static"
if readelf -d "$work/build/app_static" | grep -q 'NEEDED.*libcumemsaver'; then
	echo "app_static needs libcumemsaver.so"
	exit 1
fi
cmake --install "$work/build" >/dev/null
for f in libcumemsaver.so.1 libcumemsaver.a pkgconfig/cumemsaver.pc cmake/cumemsaver/cumemsaverConfig.cmake \
	cumemsaver/libcumemsaver-sim.so; do
	[ -e "$libdir/$f" ] || { echo "not installed: $libdir/$f"; exit 1; }
done
pc=$libdir/pkgconfig/cumemsaver.pc
grep -qx "libdir=$libdir" "$pc" || { echo "cumemsaver.pc: libdir is not $libdir:"; cat "$pc"; exit 1; }
! grep -q '//' "$pc" || { echo "cumemsaver.pc has a '//':"; cat "$pc"; exit 1; }
[ "$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --variable=includedir cumemsaver)" = "$work/usr/include" ] ||
	{ echo "cumemsaver.pc: includedir is not $work/usr/include"; exit 1; }
echo "superproject: add_subdirectory without tests or tools, shared and static consumers, absolute libdir"
