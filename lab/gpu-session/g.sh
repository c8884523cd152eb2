#!/usr/bin/env bash
# GPU calls for issue 27 item 1 (non-retaining HOST pauses: host memory for the live extents
# only, cms-bench (k)): two phases, each under the device tool's 10-minute limit. Carry .deps
# (Check), .base (`git archive eb53c4c | tar -x -C .base`: the library before the change; the
# same cms-bench binary runs on it through LD_LIBRARY_PATH, the ABI being the same) and .peer
# (../shared/peer). Set CMS_COMMIT: the device copy's .git may lag.
#   bench: test_host_live.gpu; cms-bench (k) and (i) on this library, on .base's, on this one
#          again (new, old, new: the noise shows next to the difference)
#   model: gpu-model-bench.py (dropin, dropin-retain, saver, peer, peer-retain) on this library,
#          the dropin on .base's; then (k) under CMS_TUNABLES host_group=256M and threads:15
# Logs: $OUT/logs; the tables are printed.
. "$(dirname "$0")/common.sh"
phase=${1:?usage: g.sh bench|model}
logs=$out/logs
base=$PWD/build-base
mkdir -p "$logs"
if [ -d .base ] && [ ! -e "$base/libcumemsaver.so.1" ]; then
	{ cmake -S .base -B "$base" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMS_BUILD_TESTS=OFF &&
		ninja -C "$base"; } >"$logs/build-base.txt" 2>&1 || echo "build-base failed: $logs/build-base.txt"
fi
budget=${BUDGET_S:-570} # seconds of the call; a step that would not fit is skipped
# limit WANT: prints the seconds a step may take (WANT, or what is left), 0 when under 60 left
limit() {
	local l=$((budget - SECONDS - 10))
	if [ "$l" -lt 60 ]; then echo 0; elif [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi
}
# bench_k NAME [VAR=VALUE...]: cms-bench (k),(i) in env VAR=VALUE..., its (k) table printed
bench_k() {
	local name=$1 t
	shift
	t=$(limit 200)
	[ "$t" -eq 0 ] && { echo "== bench $name: skipped, $((budget - SECONDS)) s left"; return; }
	env "$@" timeout "$t" "$build/bin/cms-bench" --gpu --only "${ONLY:-k,i}" --cycles 6 \
		--json "$logs/bench-$name.json" >"$logs/bench-$name.txt" 2>&1
	echo "== bench $name ($*): rc=$?"
	sed -n '/^(k) non-retaining/,/^$/p' "$logs/bench-$name.txt"
	grep -E "^\(i\)|^ +median +pause" "$logs/bench-$name.txt" | head -n 4 | cut -c1-100
}
case "$phase" in
bench)
	(cd "$build" && timeout 120 ctest --output-on-failure -R '^test_host_live\.gpu$') \
		>"$logs/ctest-host-live.txt" 2>&1
	echo "== test_host_live.gpu: rc=$?"; grep -E "tests passed|Failed|Assert" "$logs/ctest-host-live.txt"
	bench_k new-1
	[ -e "$base/libcumemsaver.so.1" ] && bench_k old LD_LIBRARY_PATH="$base"
	bench_k new-2
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
	ONLY=k bench_k group256 CMS_TUNABLES=host_group=256M
	ONLY=k bench_k threads15 CMS_TUNABLES=threads:15
	;;
*) echo "usage: g.sh bench|model"; exit 2 ;;
esac
tar -czf "$out/logs.tgz" -C "$out" logs
