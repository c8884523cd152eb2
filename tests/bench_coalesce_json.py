#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks cms-bench --coalesce on the host simulation.

Usage: bench_coalesce_json.py CMS_BENCH WORKDIR

--coalesce gives the HOST and DISK workloads' regions CMS_REGION_COALESCE: every one of
(c), (d), (e) and (g) run with it reports the flag in its JSON region_flags (the flags the
library reports for the region, cms_region_info.flags), and without the option none does.
--coalesce with --devices (whose regions have fixed flags) is refused with status 2. No
timing is judged.
"""
import json
import os
import subprocess
import sys

CMS_REGION_COALESCE = 0x8
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def run(bench, workdir, name, extra):
    path = os.path.join(workdir, name + ".json")
    cmd = [bench, "--sim", "--scale", "256", "--cycles", "2", "--disk-dir", workdir,
           "--json", path] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600)
    if not check(p.returncode == 0, "%s: exit %d\n%s" % (" ".join(cmd), p.returncode,
                                                         p.stdout[-3000:])):
        return None, p.stdout
    with open(path) as f:
        return json.load(f), p.stdout


def main():
    bench, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    for coalesce in (True, False):
        name = "coalesce" if coalesce else "default"
        doc, out = run(bench, workdir, name,
                       ["--only", "c,d,e,g"] + (["--coalesce"] if coalesce else []))
        if doc is None:
            continue
        check(doc.get("coalesce") is coalesce, "%s: JSON coalesce %r" % (name,
                                                                        doc.get("coalesce")))
        works = {w["id"]: w for w in doc["workloads"]}
        for wid in "cdeg":
            w = works[wid]
            if not check(w["status"] == "ok", "%s: (%s) status %s" % (name, wid, w["status"])):
                continue
            flags = w.get("region_flags")
            if not check(flags is not None, "%s: (%s) has no region_flags" % (name, wid)):
                continue
            check(bool(flags & CMS_REGION_COALESCE) == coalesce,
                  "%s: (%s) region_flags 0x%x" % (name, wid, flags))
            heading = [line for line in out.splitlines() if line.startswith("(%s) " % wid)]
            check(heading and ("CMS_REGION_COALESCE by --coalesce" in heading[0]) == coalesce,
                  "%s: (%s) heading %r" % (name, wid, heading[:1]))
    p = subprocess.run([bench, "--sim", "--devices", "0,1", "--coalesce"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    check(p.returncode == 2 and "--coalesce" in p.stdout,
          "--devices 0,1 --coalesce: exit %d, %r" % (p.returncode, p.stdout[-500:]))
    for f in failures:
        print("FAIL:", f)
    print("bench --coalesce: %s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
