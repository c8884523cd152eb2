#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# obj_graph.sh OBJ... : the call graph between object files (one file calls another when it
# uses a symbol the other defines: nm's U against T/D/B/R), printed as "a -> b: symbols";
# exits 1 when two files call each other, directly or through a circle. Arguments may be
# ';'-separated lists ($<TARGET_OBJECTS:...>). The ctest bench_graph runs it on cms-bench.
set -euo pipefail
objs=()
for a in "$@"; do
	IFS=';' read -r -a parts <<<"$a"
	objs+=("${parts[@]}")
done
[ ${#objs[@]} -gt 0 ] || { echo "usage: $0 OBJ..." >&2; exit 2; }
for o in "${objs[@]}"; do
	f=$(basename "$o")
	f=${f%.o}
	f=${f%.c}
	nm "$o" | awk -v f="$f" 'NF == 3 && $2 ~ /^[TDBR]$/ { print "D", f, $3 } NF == 2 && $1 == "U" { print "U", f, $2 }'
done | awk '
$1 == "D" { def[$3] = $2 }
$1 == "U" { n++; uf[n] = $2; us[n] = $3 }
END {
	for (i = 1; i <= n; i++) {
		d = def[us[i]]
		if (d == "" || d == uf[i]) continue
		e = uf[i] SUBSEP d
		if (!(e in syms)) { syms[e] = us[i]; out[uf[i]] = out[uf[i]] " " d }
		else syms[e] = syms[e] " " us[i]
	}
	for (e in syms) { split(e, p, SUBSEP); print p[1] " -> " p[2] ": " syms[e] | "sort" }
	close("sort")
	# depth-first search for a back edge (a circle)
	for (v in out) if (!(v in state)) dfs(v)
	if (cyc != "") { print "circle: " cyc; exit 1 }
	print "no circle"
}
function dfs(v,    k, m, w, nb) {
	state[v] = 1; stack[++top] = v
	m = split(out[v], nb, " ")
	for (k = 1; k <= m; k++) {
		w = nb[k]
		if (!(w in state)) dfs(w)
		else if (state[w] == 1 && cyc == "") cyc = path(w) " -> " w
	}
	state[v] = 2; top--
}
function path(w,    i, s) {
	for (i = top; i >= 1 && stack[i] != w; i--) ;
	s = stack[i]
	for (i++; i <= top; i++) s = s " -> " stack[i]
	return s
}'
