#!/usr/bin/env bash
# tools/scripts/test-bindings.sh <build-dir>: the consumers of an installed library, each finding it
# only through pkg-config: a C program, the Rust crates (bindings/rust) and the Go module
# (bindings/go), all run on the host simulation.
#
#  - stages `cmake --install <build-dir>` under <build-dir>/bindings/stage (the .pc file is
#    relocatable) and points PKG_CONFIG_PATH and LD_LIBRARY_PATH at it, CMS_DRIVER_LIBRARY at
#    <build-dir>/src/sim/libcumemsaver-sim.so, CMS_CMSCTL at the staged cmsctl (the bindings'
#    control-socket tests drive it);
#  - C: tests/install_consumer.sh (also the ctest `install_consumer`): a consumer built with
#    `pkg-config --cflags --libs cumemsaver` alone and one with find_package;
#  - Rust: `cargo test --offline` (layout probe of the -sys crate against the installed header,
#    the safe crate's tests) and `cargo run --offline --example cycle`, CARGO_TARGET_DIR under
#    <build-dir>; set CARGO (and RUSTC) to use another toolchain, e.g. Debian's 1.63;
#  - Go: `go vet`, `go test -race` and `go run ./examples/cycle` with GOPROXY=off and GOCACHE /
#    GOPATH under <build-dir>.
# Prints one summary line per language; exits non-zero if any failed. Logs stay in
# <build-dir>/bindings/*.log. Needs a plain (not sanitizer) build.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 <build-dir>" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
sim=$build/src/sim/libcumemsaver-sim.so
[ -f "$sim" ] || { echo "test-bindings: $sim not found (build first)" >&2; exit 2; }
work=$build/bindings
mkdir -p "$work"
stage=$work/stage
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; echo "test-bindings: cmake --install failed" >&2; exit 1; }
pc=$(find "$stage" -name cumemsaver.pc | head -n1)
[ -n "$pc" ] || { echo "test-bindings: no cumemsaver.pc installed" >&2; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
libdir=$(pkg-config --variable=libdir cumemsaver)
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMS_DRIVER_LIBRARY=$sim
CMS_CMSCTL=$(find "$stage" -name cmsctl -type f | head -n1)
[ -n "$CMS_CMSCTL" ] || CMS_CMSCTL=$build/bin/cmsctl
export CMS_CMSCTL
unset CUMEMSAVER_LIB_DIR CUMEMSAVER_INCLUDE_DIR # pkg-config only

failed=0
fail() { # language, log
	echo "$1: FAILED; the end of $2:"
	tail -n 40 "$2" | sed 's/^/    /'
	failed=1
}

# ---- C
if bash "$root/tests/install_consumer.sh" "$build" "$work/c" "$sim" >"$work/c.log" 2>&1; then
	echo "c: consumer built with pkg-config alone and with find_package, ran on the simulation"
else
	fail c "$work/c.log"
fi

# ---- Rust
cargo=${CARGO:-cargo}
if ! command -v "$cargo" >/dev/null 2>&1; then
	echo "rust: FAILED: no cargo on PATH (bash tools/scripts/deps.sh installs Debian's)"
	failed=1
else
	export CARGO_TARGET_DIR=$work/cargo-target
	log=$work/rust.log
	{
		"$cargo" --version && "${RUSTC:-rustc}" --version &&
			(cd "$root/bindings/rust" && "$cargo" test --offline 2>&1) &&
			(cd "$root/bindings/rust" && "$cargo" run --offline -q -p cumemsaver --example cycle 2>&1)
	} >"$log" 2>&1
	rc=$?
	passed=$(awk '/^test result:/ { n += $4 } END { print n + 0 }' "$log")
	nfail=$(awk '/^test result:/ { n += $6 } END { print n + 0 }' "$log")
	if [ $rc -eq 0 ] && grep -q "^cycle: PASS" "$log"; then
		echo "rust: $passed tests passed ($(sed -n 2p "$log"), $(head -n1 "$log")); example cycle: PASS"
	else
		echo "rust: $passed passed, $nfail failed"
		fail rust "$log"
	fi
fi

# ---- Go
if ! command -v go >/dev/null 2>&1; then
	echo "go: FAILED: no go on PATH (bash tools/scripts/deps.sh installs golang-go)"
	failed=1
else
	log=$work/go.log
	(
		export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GO111MODULE=on CGO_ENABLED=1
		export GOCACHE=$work/go-cache GOPATH=$work/go-path
		cd "$root/bindings/go" && go version && go vet ./... && go test -race -count=1 -v ./... &&
			go run ./examples/cycle
	) >"$log" 2>&1
	rc=$?
	passed=$(grep -c -- "^--- PASS" "$log")
	nfail=$(grep -c -- "^--- FAIL" "$log")
	if [ $rc -eq 0 ] && grep -q "^cycle: PASS" "$log"; then
		echo "go: $passed tests passed ($(head -n1 "$log")); example cycle: PASS"
	else
		echo "go: $passed passed, $nfail failed"
		fail go "$log"
	fi
fi
exit $failed
