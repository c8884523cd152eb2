#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the JSON of cms-bench's multi-device mode on the host simulation.

Usage: bench_multi_json.py CMS_BENCH WORKDIR

Runs cms-bench --sim --devices on 2 simulated devices (workloads (a), (c) and
the driver floor of (a)) and on 3 (--only floor: the floor alone), and checks
the structure and consistency of the JSON: the keys of earlier versions are
still there, the driver floor has its five variants, one number per timed
repetition (and per device and repetition), medians that are the medians of
those, ratios that are the quotients of the medians. No timing is judged:
the simulation's timings say nothing about a GPU.
"""
import json
import os
import statistics
import subprocess
import sys

VARIANTS = ["one", "one_peer", "threads", "threads_peer", "interleaved"]
OLD_WORK_KEYS = ["id", "policy", "status", "allocations_per_device", "allocation_bytes",
                 "peer_reads", "peer_work", "one", "all", "median_pause_ratio",
                 "median_resume_ratio", "pause_target_met", "resume_target_met"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-4 * max(1.0, abs(b))


def run(bench, workdir, ndev, extra):
    path = os.path.join(workdir, "bench-multi-%d.json" % ndev)
    env = dict(os.environ, CMS_SIM_DEVICES=str(ndev))
    env.pop("CMS_DRIVER_LIBRARY", None)
    devices = ",".join(str(d) for d in range(ndev))
    cmd = [bench, "--sim", "--scale", "256", "--cycles", "3", "--devices", devices,
           "--json", path] + extra
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    sys.stdout.write(proc.stdout)
    check(proc.returncode == 0, "%s: exit status %d" % (" ".join(cmd), proc.returncode))
    check("multi-device driver floor of (a)" in proc.stdout, "no floor table in the output")
    with open(path) as f:
        return json.load(f), proc.stdout


def check_floor(df, ndev, reps):
    check(df["status"] == "ok", "floor status %r" % df["status"])
    check(df["comparison_one"] == "one" and df["comparison_all"] == "threads_peer",
          "comparison variants")
    ids = [v["id"] for v in df["variants"]]
    check(ids == VARIANTS, "floor variants %r" % ids)
    med = {}
    for v in df["variants"]:
        n = 1 if v["id"].startswith("one") else ndev
        check(v["devices"] == n, "%s: devices %r" % (v["id"], v["devices"]))
        check(v["threads"] == (1 if v["id"] == "interleaved" else n),
              "%s: threads %r" % (v["id"], v["threads"]))
        check(v["peer_access"] == v["id"].endswith("peer"), "%s: peer_access" % v["id"])
        check(v["measured"] and v["reps"] == reps, "%s: measured %r reps %r"
              % (v["id"], v["measured"], v["reps"]))
        for key in ("back_ms", "release_ms"):
            check(len(v[key]) == reps and all(x > 0 for x in v[key]),
                  "%s: %s %r" % (v["id"], key, v[key]))
            check(close(v["median_" + key], statistics.median(v[key])),
                  "%s: median_%s %r is not the median of %r"
                  % (v["id"], key, v["median_" + key], v[key]))
        for key in ("device_back_ms", "device_release_ms"):
            check(len(v[key]) == reps * n and all(x > 0 for x in v[key]),
                  "%s: %s has %d entries, expected %d" % (v["id"], key, len(v[key]), reps * n))
            # a device's own time is within the wall time of its repetition
            wall = v[key.replace("device_", "")]
            check(all(v[key][r * n + i] <= wall[r] * (1 + 1e-6) + 1e-3
                      for r in range(reps) for i in range(n)),
                  "%s: a device's own time exceeds the wall time" % v["id"])
        med[v["id"]] = v
    one = med["one"]
    for v in df["variants"]:
        check(close(v["back_ratio"], v["median_back_ms"] / one["median_back_ms"]),
              "%s: back_ratio" % v["id"])
        check(close(v["release_ratio"], v["median_release_ms"] / one["median_release_ms"]),
              "%s: release_ratio" % v["id"])
    tp = med["threads_peer"]
    check(close(df["floor_back_ratio"], tp["back_ratio"]), "floor_back_ratio")
    check(close(df["floor_release_ratio"], tp["release_ratio"]), "floor_release_ratio")
    return one, tp


def main():
    bench, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)

    d, _ = run(bench, workdir, 2, [])
    check(d["result"] == "pass", "result %r" % d.get("result"))
    m = d["multi_device"]
    check(m["devices"] == [0, 1], "devices %r" % m["devices"])
    works = {w["id"]: w for w in m["workloads"]}
    check(sorted(works) == ["a", "c"], "workloads %r" % sorted(works))
    for w in works.values():
        missing = [k for k in OLD_WORK_KEYS if k not in w]
        check(not missing, "(%s): keys of 1.1 missing: %r" % (w["id"], missing))
        check(w["status"] == "ok", "(%s): status %r" % (w["id"], w["status"]))
        check("driver_floor" in w, "(%s): no driver_floor key" % w["id"])
    check(works["c"]["driver_floor"] is None, "(c) has a driver floor")
    a = works["a"]
    one, tp = check_floor(a["driver_floor"], 2, 2)
    cms = {p: statistics.median(a[ph][p + "_ms"][1:]) for ph in ("one",)
           for p in ("pause", "resume")}
    cms_all = {p: statistics.median(a["all"][p + "_ms"][1:]) for p in ("pause", "resume")}
    df = a["driver_floor"]
    check(close(df["pause_to_floor_one"], cms["pause"] / one["median_release_ms"]),
          "pause_to_floor_one")
    check(close(df["resume_to_floor_one"], cms["resume"] / one["median_back_ms"]),
          "resume_to_floor_one")
    check(close(df["pause_to_floor_all"], cms_all["pause"] / tp["median_release_ms"]),
          "pause_to_floor_all")
    check(close(df["resume_to_floor_all"], cms_all["resume"] / tp["median_back_ms"]),
          "resume_to_floor_all")

    d, out = run(bench, workdir, 3, ["--only", "floor"])
    check(d["result"] == "pass", "floor only: result %r" % d.get("result"))
    m = d["multi_device"]
    check(m["devices"] == [0, 1, 2], "floor only: devices %r" % m["devices"])
    check([w["id"] for w in m["workloads"]] == ["a"], "floor only: workloads")
    a = m["workloads"][0]
    check(a["status"] == "floor only", "floor only: status %r" % a["status"])
    check(a["one"]["cycles"] == 0 and a["all"]["cycles"] == 0, "floor only: cycles ran")
    check_floor(a["driver_floor"], 3, 2)
    check(a["driver_floor"]["pause_to_floor_one"] is None, "floor only: a cumemsaver ratio")
    check("multi-device results" not in out, "floor only: a cumemsaver table")

    for f in failures:
        print("bench_multi_json: FAIL: %s" % f)
    print("bench_multi_json: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
