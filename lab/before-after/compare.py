#!/usr/bin/env python3
"""Medians table of a before/after run (lab/before-after/run.sh, lab/gpu-session/f.sh bench):
cms-bench JSON files given as old-1 new-1 old-2 new-2 ..., printed as a Markdown table of the
median pause/resume of cycles 2..N with the ratio to the floor measured in the same run.
Usage: compare.py LABEL=FILE.json [LABEL=FILE.json ...]"""
import json
import sys


def cell(m, phase):
    ms = m.get(phase + "_ms")
    if ms is None:
        return "-"
    gbs, ratio = m.get(phase + "_gbs"), m.get(phase + "_ratio")
    text = "%.1f ms" % ms
    if gbs:
        text += ", %.1f GB/s" % gbs
    if ratio:
        text += " (%.2fx)" % ratio
    return text


def main(args):
    runs = []
    for a in args:
        label, _, path = a.partition("=")
        with open(path) as f:
            runs.append((label, {w["id"]: w for w in json.load(f)["workloads"]}))
    print("| workload | phase | " + " | ".join(l for l, _ in runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    for wid, w in runs[0][1].items():
        for phase in ("pause", "resume"):
            cells = [cell(r.get(wid, {}).get("median") or {}, phase) for _, r in runs]
            if all(c == "-" for c in cells):
                continue
            print("| (%s) %s | %s | %s |" % (wid, w["name"], phase, " | ".join(cells)))


if __name__ == "__main__":
    main(sys.argv[1:])
