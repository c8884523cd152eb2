#!/usr/bin/env bash
# Non-retaining HOST cycles on a GPU (issue 17 item 3): cms-bench's (c) 16 x 1 GiB HOST
# (retaining, the reference), (i) the same with CMS_REGION_RELEASE_HOST and (j) with
# CMS_REGION_HOST_PAGEABLE too, first cycle and steady, GB/s, ratio to the pinned-copy floor,
# VmRSS before the pause, after it and after the resume of every cycle; then (i) once per
# host-buffer option of CMS_TUNABLES (src/engine/tunables.c, docs/internals.md), and the
# host-only fault benchmark (cms-faultbench) for orientation.
# Usage: bash lab/hoststore/gpu-run.sh [VARIANT...]
#   VARIANT: ref (c,i,j with the defaults), default, nothp, hugetlb, noprefault, threads:32,
#   threads:8, slice:128, lazyfree, "lazyfree,threads:32", faultbench; none: all of them
#   (about 8 minutes on an H200: split the list over two device calls if needed).
#   hugetlb maps from the kernel's reserved huge pages: with none reserved it is the default
#   (the script only reads /proc/sys/vm/nr_hugepages; set CMS_LAB_HUGEPAGES=N to write N
#   there first, where permitted, and 0 back afterwards).
# Output in $OUT, else lab/results/<date>-<device>-hoststore: run.txt, build.log,
# bench-<variant>.txt/.json, faultbench.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tools/scripts/gpu-out.sh
cms_gpu_out hoststore || exit 1
cms_run_info "$0" "$@" >"$out/run.txt"
{
	echo "kernel:  $(uname -r)"
	echo "THP:     enabled=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)" \
		"defrag=$(cat /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null)"
	echo "hugetlb: nr_hugepages=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null)"
	echo "cpus:    $(nproc); memlock: $(ulimit -l)"
	grep -E 'MemTotal|MemAvailable' /proc/meminfo
} >>"$out/run.txt"
cat "$out/run.txt"
build=${CMS_GPU_BUILD:-/tmp/cms-build-hoststore}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF \
	-DCMS_BUILD_LAB=ON >"$out/build.log" 2>&1 &&
	ninja -C "$build" cms-bench cms-faultbench >>"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log"
	exit 1
}
unset CMS_DRIVER_LIBRARY CMS_TUNABLES
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(ref default nothp hugetlb noprefault threads:32 threads:8
	slice:128 lazyfree lazyfree,threads:32 faultbench)
rc=0
for v in "${variants[@]}"; do
	name=${v//[:,]/-}
	case $v in
	faultbench)
		timeout 300 "$build/bin/cms-faultbench" "${CMS_LAB_FAULT_GIB:-16}" 1 4 8 16 32 >"$out/faultbench.txt" 2>&1 ||
			{ echo "faultbench rc=$?"; rc=1; }
		cat "$out/faultbench.txt"
		continue ;;
	ref) only=c,i,j; env=() ;;
	default) only=i; env=() ;;
	*) only=i; env=(CMS_TUNABLES="$v") ;;
	esac
	if [ "$v" = hugetlb ] && [ -n "${CMS_LAB_HUGEPAGES:-}" ]; then
		echo "$CMS_LAB_HUGEPAGES" >/proc/sys/vm/nr_hugepages 2>/dev/null ||
			echo "cannot write nr_hugepages"
		echo "nr_hugepages now $(cat /proc/sys/vm/nr_hugepages)"
	fi
	echo "=== $v: ${env[*]} cms-bench ${CMS_LAB_BENCH_ARGS:---gpu} --only $only --cycles 5"
	# CMS_LAB_BENCH_ARGS: e.g. "--sim --scale 256" to try the script without a GPU
	env "${env[@]}" timeout 420 "$build/bin/cms-bench" ${CMS_LAB_BENCH_ARGS:---gpu} \
		--only "$only" --cycles 5 \
		--json "$out/bench-$name.json" >"$out/bench-$name.txt" 2>&1 ||
		{ echo "cms-bench ($v) rc=$?"; rc=1; }
	grep -E '^\(|cycle [0-9]+:|^ +(first|median)|copy floor|D2H|bench:' "$out/bench-$name.txt"
	if [ "$v" = hugetlb ] && [ -n "${CMS_LAB_HUGEPAGES:-}" ]; then
		echo 0 >/proc/sys/vm/nr_hugepages 2>/dev/null
	fi
done
exit $rc
