#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cmsctl demo --progress on the simulation: the demo passes and stderr carries one progress
# line per pause and per resume, each ending at 100% of the bytes copied. Without --progress,
# stderr not being a terminal, no progress line is drawn.
# Usage: demo_progress.sh CMSCTL
set -u
cmsctl=$1
err=$("$cmsctl" demo --sim --size 16M --cycles 2 --progress 2>&1 >/dev/null) || {
	echo "cmsctl demo --progress failed: $err"
	exit 1
}
lines=$(printf '%s' "$err" | tr '\r' '\n')
for op in pause resume; do
	n=$(printf '%s\n' "$lines" | grep -c "^$op *100% (16.0 MiB of 16.0 MiB)$")
	if [ "$n" != 2 ]; then
		echo "expected 2 '$op 100%' lines (one per cycle), got $n; stderr was:"
		printf '%s\n' "$err" | od -c | head -40
		exit 1
	fi
done
err=$("$cmsctl" demo --sim --size 16M --cycles 1 2>&1 >/dev/null) || {
	echo "cmsctl demo failed: $err"
	exit 1
}
if printf '%s' "$err" | grep -q '%'; then
	echo "progress drawn without --progress on a non-terminal stderr: $err"
	exit 1
fi
echo "demo progress: OK"
