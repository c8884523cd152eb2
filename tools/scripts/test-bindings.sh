#!/usr/bin/env bash
# tools/scripts/test-bindings.sh <build-dir>: the consumers of an installed library, each finding it
# only through pkg-config: a C program, the Rust crates (bindings/rust) and the Go module
# (bindings/go), all run on the host simulation.
#
#  - stages `cmake --install <build-dir>` under <build-dir>/bindings/stage (the .pc file is
#    relocatable) and points PKG_CONFIG_PATH and LD_LIBRARY_PATH at it, CMS_CMSCTL at the
#    staged cmsctl (the bindings' control-socket tests drive it);
#  - C: tests/install_consumer.sh (also the ctest `install_consumer`): a consumer built with
#    `pkg-config --cflags --libs cumemsaver` alone and one with find_package, run on
#    <build-dir>/src/sim/libcumemsaver-sim.so;
#  - Rust and Go run with CMS_DRIVER_LIBRARY=sim: the simulation staged with the library
#    (<libdir>/cumemsaver/), found by the library itself;
#  - Rust: `cargo test --offline` (layout probe of the -sys crate against the installed header,
#    the safe crate's tests), `cargo run --offline --example cycle` and `cargo doc` (a broken
#    intra-doc link fails), CARGO_TARGET_DIR under
#    <build-dir>; then the feature `bundled` (the crate builds the library with CMake, no
#    pkg-config: PKG_CONFIG=false, the stage off LD_LIBRARY_PATH): the simulation test and the
#    example, in a target directory of its own; set CARGO (and RUSTC) to use another
#    toolchain, e.g. Debian's 1.63; then, with no library to find (PKG_CONFIG=false), the build
#    must stop in build.rs naming `--features bundled`, pkg-config and CUMEMSAVER_LIB_DIR;
#  - Go: `go vet`, `go test -race` and `go run ./examples/cycle` with GOPROXY=off and GOCACHE /
#    GOPATH under <build-dir>; then a module outside the tree that requires the documented
#    module path (github.com/cumemsaver/cumemsaver/bindings/go, with a replace to the tree)
#    builds and runs.
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
if CMS_DRIVER_LIBRARY=$sim bash "$root/tests/install_consumer.sh" "$build" "$work/c" "$sim" \
	>"$work/c.log" 2>&1; then
	echo "c: consumer built with pkg-config alone and with find_package, ran on the simulation"
else
	fail c "$work/c.log"
fi

export CMS_DRIVER_LIBRARY=sim # the simulation installed with the staged library

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
			(cd "$root/bindings/rust" && "$cargo" run --offline -q -p cumemsaver --example cycle 2>&1) &&
			(cd "$root/bindings/rust" && RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" \
				"$cargo" doc --offline -q --no-deps -p cumemsaver 2>&1)
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
	log=$work/rust-bundled.log
	(
		export CARGO_TARGET_DIR=$work/cargo-target-bundled PKG_CONFIG=false
		unset PKG_CONFIG_PATH LD_LIBRARY_PATH
		cd "$root/bindings/rust" &&
			"$cargo" test --offline -p cumemsaver --features bundled --test simulation -- \
				--nocapture &&
			"$cargo" run --offline -q -p cumemsaver --features bundled --example cycle
	) >"$log" 2>&1
	rc=$?
	if [ $rc -eq 0 ] && grep -q "^cycle: PASS" "$log" &&
		grep -q "SIMULATION loaded .*/cargo-target-bundled/.*/src/sim/libcumemsaver-sim.so" "$log"; then
		echo "rust --features bundled: library built with CMake, simulation test and example cycle: PASS"
	else
		echo "rust --features bundled: FAILED"
		fail rust-bundled "$log"
	fi
	# No library anywhere (no pkg-config, no CUMEMSAVER_LIB_DIR, none in the linker's path):
	# build.rs stops and says what to do, instead of the linker's "unable to find library".
	log=$work/rust-nolib.log
	if cc -print-file-name=libcumemsaver.so | grep -q /; then
		echo "rust without the library: not checked (a libcumemsaver.so is in the linker's default path)"
	else
		(
			export CARGO_TARGET_DIR=$work/cargo-target-nolib PKG_CONFIG=false
			unset PKG_CONFIG_PATH LD_LIBRARY_PATH LIBRARY_PATH
			cd "$root/bindings/rust" && "$cargo" build --offline -p cumemsaver --example cycle
		) >"$log" 2>&1
		rc=$?
		if [ $rc -ne 0 ] && grep -q -- "--features bundled" "$log" && grep -q "PKG_CONFIG_PATH" "$log" &&
			grep -q "CUMEMSAVER_LIB_DIR to the directory" "$log"; then
			echo "rust without the library: build.rs stops, naming --features bundled, pkg-config and CUMEMSAVER_LIB_DIR"
		else
			echo "rust without the library: FAILED (exit $rc; no hint at --features bundled)"
			fail rust-nolib "$log"
		fi
	fi
fi

# ---- Go
if ! command -v go >/dev/null 2>&1; then
	echo "go: FAILED: no go on PATH (bash tools/scripts/deps.sh installs golang-go)"
	failed=1
else
	log=$work/go.log
	gomod=$(sed -n 's/^module //p' "$root/bindings/go/go.mod")
	(
		export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GO111MODULE=on CGO_ENABLED=1
		export GOCACHE=$work/go-cache GOPATH=$work/go-path
		cd "$root/bindings/go" && go version && go vet ./... && go test -race -count=1 -v ./... &&
			go run ./examples/cycle &&
			consumer=$work/go-consumer && rm -rf "$consumer" && mkdir -p "$consumer" &&
			printf '%s\n' 'module example.com/consumer' '' 'go 1.19' '' \
				"require $gomod v0.0.0" '' "replace $gomod => $root/bindings/go" \
				>"$consumer/go.mod" &&
			printf '%s\n' 'package main' '' 'import (' '	"fmt"' '' "	\"$gomod/cumemsaver\"" ')' '' \
				'func main() {' \
				'	ctx, err := cumemsaver.NewContext(&cumemsaver.ContextOptions{DriverPath: cumemsaver.Simulation})' \
				'	if err == nil {' '		_, _, err = ctx.DeviceMemoryInfo(0)' '		ctx.Close()' '	}' \
				'	fmt.Println("consumer:", cumemsaver.VersionString(), err)' '}' >"$consumer/main.go" &&
			cd "$consumer" && go run .
	) >"$log" 2>&1
	rc=$?
	passed=$(grep -c -- "^--- PASS" "$log")
	nfail=$(grep -c -- "^--- FAIL" "$log")
	if [ $rc -eq 0 ] && grep -q "^cycle: PASS" "$log" && grep -q "^consumer: [0-9.]* <nil>$" "$log"; then
		echo "go: $passed tests passed ($(head -n1 "$log")); example cycle: PASS; module $gomod: PASS"
	else
		echo "go: $passed passed, $nfail failed"
		fail go "$log"
	fi
fi
exit $failed
