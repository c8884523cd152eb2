#!/usr/bin/env bash
# Installs what is missing on Debian 12 (dpkg-query says what is there; apt-get installs the rest).
#   deps.sh        building and testing everything (tools/scripts/test.sh)
#   deps.sh demo   building the library, the host simulation and cmsctl with the tests off
#                  (tools/scripts/demo.sh): a C compiler, CMake and Ninja, nothing else
set -euo pipefail
case ${1:-all} in
demo)
	pkgs=(gcc libc6-dev cmake ninja-build)
	;;
all)
	pkgs=(gcc libc6-dev make cmake ninja-build pkg-config check binutils clang-format clang libclang-rt-14-dev python3 python3-setuptools python3-wheel python3-pip python3-venv golang-go
		abigail-tools libffi-dev libjson-c-dev
		dpkg-dev file lintian) # the Debian packages: dpkg-shlibdeps, file (CPack finds ELF files), lintian
	# Rust bindings (tools/scripts/test-bindings.sh): Debian's cargo and rustc 1.63, only where no cargo is on
	# PATH (a rustup toolchain, when there is one, is kept).
	command -v cargo >/dev/null 2>&1 || pkgs+=(cargo rustc)
	;;
*)
	echo "usage: $0 [demo]" >&2
	exit 2
	;;
esac
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
