#!/usr/bin/env bash
# GPU calls for issue 27 (release 1.3: non-retaining live extents, CMS_REGION_PREPARE, frozen
# regions, CMS_REGION_VERIFY): three phases, each under the device tool's 10-minute limit, on
# one warm machine (chain the calls). Carry .deps (Check), .base and .peer:
#   .deps/check  apt-get download check libsubunit-dev libsubunit0; dpkg -x each into it
#   .base        git archive eb53c4c | tar -x -C .base   (1.3 begun, none of issue 27's work)
#   .peer        cp -r ../shared/peer .peer
# Set CMS_COMMIT (the device copy's .git may lag). Logs: $OUT/logs (tarred); tables printed.
#   suite: f.sh suite (every gpu ctest: test_frozen, test_verify, test_prepare, test_host_live,
#          conformance_1_2 among them; demo; IPC demos; Python GPU tests; the peer's suite)
#   bench: cms-bench --only a,c,d,k,l,m,n,o twice (the floors of each workload are measured in
#          the same run), then .base's own cms-bench (c),(i) for the before figure
#   first: when device time is short, one call by priority: the issue-27 gpu ctests, cms-bench
#          --only c,k,l,m,n,o (4 cycles), gpu-model-bench.py with dropin and peer
#   frozen: cms-exp-frozen (lab/exp-frozen), cms-bench --only o, test_tms_gpu.py
#   model: gpu-model-bench.py on this library (dropin, dropin-retain, saver, peer,
#          peer-retain), the dropin on .base's library (ctypes: no 1.3 symbol needed), then (k)
#          under CMS_TUNABLES host_group=256M and threads:15
# The new cms-bench cannot run on .base's library: it calls cms_region_freeze (CMS_1.3).
phase=${1:?usage: g.sh first|suite|bench|model|frozen}
if [ "$phase" = suite ]; then
	exec bash "$(dirname "$0")/f.sh" suite
fi
. "$(dirname "$0")/common.sh"
logs=$out/logs
base=$PWD/build-old # f.sh suite builds .base there; built here when missing
mkdir -p "$logs"
if [ "$phase" != first ] && [ -d .base ] && [ ! -e "$base/libcumemsaver.so.1" ]; then
	{ cmake -S .base -B "$base" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF &&
		ninja -C "$base"; } >"$logs/build-base.txt" 2>&1 || echo "build-base failed: $logs/build-base.txt"
fi
budget=${BUDGET_S:-570} # seconds of the call; a step that would not fit is skipped
# limit WANT: prints the seconds a step may take (WANT, or what is left), 0 when under 60 left
limit() {
	local l=$((budget - SECONDS - 10))
	if [ "$l" -lt 60 ]; then echo 0; elif [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi
}
# bench NAME BIN ONLY [VAR=VALUE...]: BIN --only ONLY in env VAR=VALUE..., its tables printed
bench() {
	local name=$1 bin=$2 only=$3 t
	shift 3
	t=$(limit 240)
	[ "$t" -eq 0 ] && { echo "== bench $name: skipped, $((budget - SECONDS)) s left"; return; }
	env "$@" timeout "$t" "$bin" --gpu --only "$only" --cycles "${BENCH_CYCLES:-6}" --disk-dir /tmp \
		--json "$logs/bench-$name.json" >"$logs/bench-$name.txt" 2>&1
	echo "== bench $name ($only $*): rc=$?"
	sed -n '/^results:/,$p' "$logs/bench-$name.txt" | head -n 120
}
case "$phase" in
first) # one call, by priority, when device time is short: issue 27's own checks and figures
	t=$(limit 200) rc=skipped # each test's own limit is its CMake TIMEOUT; t bounds them all
	if [ "$t" -gt 0 ]; then
		(cd "$build" && timeout "$t" ctest --output-on-failure -V \
			-R 'test_(frozen|verify|prepare|host_live)\.gpu|conformance_1_2\.gpu') >"$logs/ctest-27.txt" 2>&1
		rc=$?
	fi
	echo "== ctest issue 27: rc=$rc"
	grep -E "Test +#|tests passed|tests failed|:F:|:E:|Checks:" "$logs/ctest-27.txt" | tail -n 20
	BENCH_CYCLES=${BENCH_CYCLES:-4} bench new-1 "$build/bin/cms-bench" "${ONLY:-c,k,l,m,n,o}"
	peer=(--peer-dir /tmp/peer-site --peer-tarball .peer/torch_memory_saver-4a43c97.tar.gz)
	t=$(limit 200) rc=skipped
	if [ "$t" -gt 0 ]; then
		PYTHONPATH=$PWD/bindings/python timeout "$t" python3 tools/scripts/gpu-model-bench.py \
			--cycles 4 --impls dropin,peer "${peer[@]}" --out "$logs/model-new" >"$logs/model-new.txt" 2>&1
		rc=$?
	fi
	echo "== model (dropin, peer): rc=$rc"; sed -n '/^impl | pause/,$p' "$logs/model-new.txt" 2>/dev/null
	;;
bench)
	bench new-1 "$build/bin/cms-bench" "${ONLY:-a,c,d,k,l,m,n,o}"
	bench new-2 "$build/bin/cms-bench" "${ONLY:-a,c,d,k,l,m,n,o}"
	old=$(find "$base" -name cms-bench -type f -perm -u+x 2>/dev/null | head -n1)
	[ -n "$old" ] && bench old "$old" c,i
	;;
model)
	peer=(--peer-dir /tmp/peer-site --peer-tarball .peer/torch_memory_saver-4a43c97.tar.gz)
	t=$(limit 330)
	[ "$t" -gt 0 ] && PYTHONPATH=$PWD/bindings/python timeout "$t" python3 tools/scripts/gpu-model-bench.py \
		--cycles 5 --impls dropin,dropin-retain,saver,peer,peer-retain "${peer[@]}" \
		--out "$logs/model-new" >"$logs/model-new.txt" 2>&1
	echo "== model (this library): rc=$?"; sed -n '/^impl | pause/,$p' "$logs/model-new.txt"
	t=$(limit 120)
	if [ -e "$base/libcumemsaver.so.1" ] && [ "$t" -gt 0 ]; then
		CUMEMSAVER_LIBRARY=$base/libcumemsaver.so.1 PYTHONPATH=$PWD/bindings/python timeout "$t" \
			python3 tools/scripts/gpu-model-bench.py --cycles 5 --impls dropin \
			--out "$logs/model-old" >"$logs/model-old.txt" 2>&1
		echo "== model (.base's library, dropin): rc=$?"; sed -n '/^impl | pause/,$p' "$logs/model-old.txt"
	fi
	bench group256 "$build/bin/cms-bench" k CMS_TUNABLES=host_group=256M
	bench threads15 "$build/bin/cms-bench" k CMS_TUNABLES=threads:15
	;;
frozen) # where (o) loses time: cms-exp-frozen; (o) again; the Python GPU test of retention
	t=$(limit 150)
	[ "$t" -gt 0 ] && timeout "$t" "$build/bin/cms-exp-frozen" -G >"$logs/exp-frozen.txt" 2>&1
	echo "== cms-exp-frozen: rc=$?"; cat "$logs/exp-frozen.txt"
	BENCH_CYCLES=${BENCH_CYCLES:-8} bench o "$build/bin/cms-bench" o
	t=$(limit 120)
	[ "$t" -gt 0 ] && PYTHONPATH=$PWD/bindings/python timeout "$t" python3 -m unittest -v \
		bindings/python/tests/test_tms_gpu.py >"$logs/python-gpu.txt" 2>&1
	echo "== python-gpu: rc=$?"; tail -n 4 "$logs/python-gpu.txt"
	;;
*) echo "usage: g.sh first|suite|bench|model|frozen"; exit 2 ;;
esac
tar -czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"
echo "phase $phase done in $SECONDS s"
