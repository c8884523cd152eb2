#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs cms-exp-copy on the host simulation and checks its JSON.

Usage: exp_copy_json.py CMS_EXP_COPY WORKDIR

Runs `cms-exp-copy --sim --scale 256 --json FILE` (exit status 0: every driver
call, content check and the simulation's leak check passed), then checks the
file: every variant's rows in order, 5 repetitions each, medians that are the
medians of those repetitions, GB/s that are bytes over the median, ratios that
are the quotient of a row's GB/s and the ceiling (F1/F2 for H2D rows,
G-copy/H-copy for D2H rows), the span calls of J with their return codes, L's
free bytes before the copies (the simulation's exact accounting: L4 holds a
second set) and the content samples. Then a run with a copy fault injected must fail with exit
status 1 and name the failed call in the JSON. No timing is judged: the
simulation's timings say nothing about a GPU.
"""
import json
import os
import statistics
import subprocess
import sys

IDS = ["A", "B", "C", "D", "E1", "E2", "F1", "F2", "G", "G-copy", "G-rel", "H", "H-copy",
       "H-rel", "I0-rel", "I0-back", "I1-rel", "I1-back", "L0", "L1", "L2", "L3", "L4", "K", "J1-back", "J1-rel",
       "J2-back", "J2-rel", "J3-back", "J3-rel"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-4 * max(1.0, abs(b))


def run(tool, path, env_extra):
    env = dict(os.environ, **env_extra)
    env.pop("CMS_DRIVER_LIBRARY", None)
    cmd = [tool, "--sim", "--scale", "256", "--json", path]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    sys.stdout.write(proc.stdout)
    with open(path) as f:
        return proc.returncode, json.load(f), proc.stdout


def check_rows(d):
    rows = d["rows"]
    ids = [r["id"] for r in rows]
    check(ids == IDS, "row ids %r" % ids)
    by = {r["id"]: r for r in rows}
    unit, n = d["unit_bytes"], d["total_bytes"] // d["unit_bytes"]
    check(n % 2 == 0 and n * unit == d["total_bytes"], "total %d = %d x %d" %
          (d["total_bytes"], n, unit))
    check(d["piece_bytes"] * 4 == unit, "piece bytes %d" % d["piece_bytes"])
    for r in rows:
        check(r["reps"] == d["reps"] == 5, "%s: reps %r" % (r["id"], r["reps"]))
        check(len(r["rep_ms"]) == r["reps"], "%s: rep_ms %r" % (r["id"], r["rep_ms"]))
        check(close(r["median_ms"], statistics.median(r["rep_ms"])), "%s: median" % r["id"])
        check(close(r["min_ms"], min(r["rep_ms"])), "%s: min" % r["id"])
        check(r["bytes"] == r["handles"] * r["handle_bytes"], "%s: bytes" % r["id"])
        if r["direction"] == "vmm":
            check(r["gbs"] is None and r["ratio"] is None, "%s: vmm GB/s" % r["id"])
            continue
        check(close(r["gbs"], r["bytes"] / (r["median_ms"] * 1e6)), "%s: GB/s" % r["id"])
        ceil = d["ceiling_h2d_gbs"] if r["direction"] == "h2d" else d["ceiling_d2h_gbs"]
        check(close(r["ratio"], r["gbs"] / ceil), "%s: ratio" % r["id"])
        if "rep_back_ms" in r:
            check(close(r["back_ms"], statistics.median(r["rep_back_ms"])),
                  "%s: back" % r["id"])
            # L times only the copies: its back comes before them
            check(all(0 <= b and (r["id"].startswith("L") or b <= t + 1e-3)
                      for b, t in zip(r["rep_back_ms"], r["rep_ms"])),
                  "%s: back within the total" % r["id"])
    check(close(d["ceiling_h2d_gbs"], max(by["F1"]["gbs"], by["F2"]["gbs"])), "H2D ceiling")
    check(close(d["ceiling_d2h_gbs"], max(by["G-copy"]["gbs"], by["H-copy"]["gbs"])),
          "D2H ceiling")
    for v in ("A", "B", "C", "E1", "E2", "F1", "F2", "G", "H", "I0-back", "K"):
        check(by[v]["handles"] == n and by[v]["handle_bytes"] == unit, "%s: shape" % v)
    check(by["D"]["handles"] * 2 == n and by["D"]["handle_bytes"] == 2 * unit, "D: shape")
    check(by["J3-back"]["handles"] * 2 == n, "J3: shape")
    check_l(d, by, n, unit)
    for g in ("G", "H"):
        parts = [a + b for a, b in zip(by[g + "-copy"]["rep_ms"], by[g + "-rel"]["rep_ms"])]
        check(all(p <= t + 1e-3 for p, t in zip(parts, by[g]["rep_ms"])),
              "%s: copy + release within the total" % g)
    check(by["J2-back"]["result"] == 0 and by["J2-back"]["result_name"] == "CUDA_SUCCESS",
          "J2-back result %r" % by["J2-back"]["result"])
    check(by["J2-rel"]["result"] == 0, "J2-rel result %r" % by["J2-rel"]["result"])


def check_l(d, by, n, unit):
    """L0-L4: shape, the free bytes of every repetition, L3's synchronize time only."""
    free = {}
    for v in ("L0", "L1", "L2", "L3", "L4"):
        r = by[v]
        check(r["direction"] == "h2d" and r["handles"] == n and r["handle_bytes"] == unit,
              "%s: shape" % v)
        fb = r.get("rep_free_bytes")
        if not check(isinstance(fb, list) and len(fb) == r["reps"] and
                     all(isinstance(b, int) and b > 0 for b in fb), "%s: free %r" % (v, fb)):
            continue
        check("free before the copies" in r["note"], "%s: note %r" % (v, r["note"]))
        check(len(r.get("rep_enqueued_ms", [])) == r["reps"], "%s: enqueued" % v)
        check(("rep_sync_ms" in r) == (v == "L3"), "%s: rep_sync_ms" % v)
        free[v] = fb
    if len(free) < 5:
        return
    # the simulation counts exactly: L0-L3 hold one set before their copies, L4 two
    one = free["L0"][0]
    check(all(b == one for v in ("L0", "L1", "L2", "L3") for b in free[v]),
          "L0-L3: free bytes differ %r" % free)
    check(all(b + d["total_bytes"] == one for b in free["L4"]),
          "L4: free %r, L0 %d, a set %d" % (free["L4"], one, d["total_bytes"]))
    sync = by["L3"].get("rep_sync_ms", [])
    check(len(sync) == by["L3"]["reps"] and all(s >= 0 for s in sync), "L3: sync %r" % sync)


def main():
    tool, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "exp-copy.json")
    rc, d, out = run(tool, path, {})
    check(rc == 0, "exit status %d" % rc)
    check(d["tool"] == "cms-exp-copy" and d["simulation"] is True, "tool/simulation")
    check(d["failure"] is None, "failure %r" % d["failure"])
    check(d["content"]["ok"] is True and d["content"]["mismatches"] == 0 and
          d["content"]["samples"] > 0, "content %r" % d["content"])
    j = d["j"]
    check(j["span_set_access"] == {"result": 0, "name": "CUDA_SUCCESS"}, "span access %r" % j)
    check(j["span_unmap"] == {"result": 0, "name": "CUDA_SUCCESS"}, "span unmap %r" % j)
    check(j["access_check"].startswith("OK"), "access check %r" % j["access_check"])
    check(d["floor"] is not None and d["floor"]["h2d_gbs"] > 0, "floor %r" % d["floor"])
    check("content: OK" in out and "cms-exp-copy: PASS" in out, "summary lines")
    check_rows(d)

    # a failed copy: exit status 1, the call named, nothing left (the tool's cleanup)
    fpath = os.path.join(workdir, "exp-copy-fail.json")
    rc, d, out = run(tool, fpath, {"CMS_SIM_FAIL": "cuMemcpyDtoHAsync:180:1"})
    check(rc == 1, "fault run: exit status %d" % rc)
    check(d["failure"] and "cuMemcpyDtoHAsync" in d["failure"], "fault run: %r" % d["failure"])
    check("left after cleanup" not in out and "cleanup" not in (d["failure"] or ""),
          "fault run: cleanup")

    for f in failures:
        print("FAILED: " + f)
    print("exp_copy_json: %s (%d rows checked)" % ("FAIL" if failures else "PASS", len(IDS)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
