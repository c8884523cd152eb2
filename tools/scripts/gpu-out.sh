#!/usr/bin/env bash
# Sourced by the gpu-*.sh scripts (from the repository root): where a GPU run's output goes.
#   cms_gpu_out NAME   sets $out: $OUT when set (the device tool hands back that folder), else
#                      lab/results/<date>-<device>-NAME, e.g. lab/results/2026-11-30-h200x2-multi
#                      (lab/results/README.md: the one place the project keeps GPU run output;
#                      -2, -3... when it exists); creates it.
#   cms_run_info ARGS  prints what each run records: date, device, commit, command (ARGS: the
#                      script and its arguments; CMS_* variables set are listed with them).
#                      Where the tree has no .git (a copy on a GPU machine), set CMS_COMMIT.
cms_gpu_device() { # "h200", "h200x2", or "nogpu"
	local names n dev
	names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)
	n=$(printf '%s\n' "$names" | grep -c .)
	dev=$(printf '%s\n' "$names" | head -n1 | awk '{ print tolower($NF) }')
	[ -n "$dev" ] || { echo nogpu; return; }
	[ "$n" -gt 1 ] && dev=${dev}x$n
	echo "$dev"
}
cms_gpu_out() { # a second run of the day gets -2, -3, ...
	local base i=2
	out=${OUT:-}
	if [ -z "$out" ]; then
		base=lab/results/$(date -u +%F)-$(cms_gpu_device)-$1
		out=$base
		while [ -e "$out" ]; do out=$base-$i; i=$((i + 1)); done
	fi
	mkdir -p "$out"
}
cms_run_info() {
	local rev=${CMS_COMMIT:-} dev
	if [ -z "$rev" ]; then
		rev=$(git rev-parse --short HEAD 2>/dev/null) &&
			{ git diff --quiet HEAD 2>/dev/null || rev="$rev + working tree changes"; }
	fi
	echo "date:    $(date -u +%FT%TZ)"
	dev=$(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null |
		paste -sd';' -)
	echo "device:  ${dev:-none (no nvidia-smi)}"
	echo "commit:  ${rev:-unknown}"
	echo "command: $(env | grep -E '^CMS_[A-Z_]*=' | sort | tr '\n' ' ')bash $*"
}
