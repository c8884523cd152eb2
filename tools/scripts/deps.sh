#!/usr/bin/env bash
# Installs what building and testing need on Debian 12, skipping what is there.
set -euo pipefail
pkgs=(gcc libc6-dev make cmake ninja-build pkg-config check binutils clang-format clang libclang-rt-14-dev python3 python3-setuptools python3-wheel python3-pip golang-go
	abigail-tools libffi-dev libjson-c-dev
	dpkg-dev file lintian) # the Debian packages: dpkg-shlibdeps, file (CPack finds ELF files), lintian
# Rust bindings (tools/scripts/test-bindings.sh): Debian's cargo and rustc 1.63, only where no cargo is on
# PATH (a rustup toolchain, when there is one, is kept).
command -v cargo >/dev/null 2>&1 || pkgs+=(cargo rustc)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
