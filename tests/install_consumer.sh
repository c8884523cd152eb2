#!/usr/bin/env bash
# Stages `cmake --install` twice: with the default, absolute cumemsaver.pc (prefix= the
# install's prefix, no "//"), then with CMS_PKGCONFIG_RELOCATABLE=ON (prefix=${pcfiledir}/..)
# and moves that tree. Builds and runs a tiny consumer with nothing but
# `pkg-config --cflags --libs cumemsaver` against each, and another with
# find_package(cumemsaver) against the moved tree. The preload and simulation libraries are
# in <libdir>/cumemsaver/, not in the linker's <libdir>.
set -euo pipefail
build=$1 stage=$2 sim=$3
rm -rf "$stage"
work=$stage/consumer
mkdir -p "$work"
# consumer DIR: the pkg-config consumer against the .pc in DIR, run on the simulation.
consumer() {
	# shellcheck disable=SC2046
	PKG_CONFIG_PATH=$1 cc -std=c11 -Wall -Werror -o "$work/consumer" "$work/consumer.c" \
		$(PKG_CONFIG_PATH=$1 pkg-config --cflags --libs cumemsaver)
	CMS_DRIVER_LIBRARY=$sim LD_LIBRARY_PATH=$(PKG_CONFIG_PATH=$1 pkg-config --variable=libdir cumemsaver) \
		"$work/consumer"
}
env -u CMS_PKGCONFIG_RELOCATABLE cmake --install "$build" --prefix "$stage/abs" >/dev/null
pc=$(find "$stage/abs" -name cumemsaver.pc | head -n1)
[ -n "$pc" ] || { echo "no cumemsaver.pc installed"; exit 1; }
grep -qx "prefix=$stage/abs" "$pc" || { echo "cumemsaver.pc: prefix is not $stage/abs:"; cat "$pc"; exit 1; }
! grep -q '//' "$pc" || { echo "cumemsaver.pc has a '//':"; cat "$pc"; exit 1; }
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir cumemsaver)
for f in libcumemsaver-preload.so libcumemsaver-sim.so; do
	[ -f "$libdir/cumemsaver/$f" ] && [ ! -e "$libdir/$f" ] ||
		{ echo "$f is not (only) in $libdir/cumemsaver/"; exit 1; }
done
cat >"$work/consumer.c" <<'C'
#include <cumemsaver.h>
#include <stdio.h>
int main(void)
{
	cms_context *ctx = NULL;
	cms_region *r = NULL;
	cms_region_options o = CMS_REGION_OPTIONS_INIT;
	uint64_t p = 0;
	cms_status st;

	if (cms_version() != CMS_VERSION_NUMBER)
		return 10;
	/* the subsystem headers were installed with it */
	if (cms_hook_region_current() != NULL || CMS_ACCESS_READ != 1u)
		return 13;
	if (cms_context_create(NULL, &ctx))
		return 11;
	o.policy = CMS_POLICY_HOST;
	st = cms_region_create(ctx, "weights", &o, &r);
	if (!st)
		st = cms_alloc(r, 1 << 20, &p);
	if (!st)
		st = cms_pause(ctx, "weights", NULL, NULL);
	if (!st)
		st = cms_resume(ctx, "weights", NULL, NULL);
	printf("consumer: %s %s ptr=0x%llx\n", cms_status_name(st), cms_last_error(), (unsigned long long)p);
	cms_context_destroy(ctx);
	return st ? 12 : 0;
}
C
consumer "$(dirname "$pc")"
# Relocatable: the prefix is found from the .pc file's own place, so a moved tree works.
CMS_PKGCONFIG_RELOCATABLE=ON cmake --install "$build" --prefix "$stage/usr" >/dev/null
pc=$(find "$stage/usr" -name cumemsaver.pc | head -n1)
grep -q '^prefix=\${pcfiledir}' "$pc" || { echo "cumemsaver.pc is not relocatable"; exit 1; }
mv "$stage/usr" "$stage/moved"
consumer "$(dirname "${pc/\/usr\//\/moved\/}")"
# find_package
mkdir -p "$work/cm"
cat >"$work/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(cumemsaver 1.0 REQUIRED)
add_executable(consumer ../consumer.c)
target_link_libraries(consumer PRIVATE cumemsaver::cumemsaver)
CM
cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$stage/moved" >/dev/null
cmake --build "$work/cm/build" >/dev/null
CMS_DRIVER_LIBRARY=$sim "$work/cm/build/consumer"
echo "install_consumer: pkg-config consumers (absolute and relocatable .pc) and a find_package consumer built and ran"
