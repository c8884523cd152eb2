#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the CUDA line of each function's contract (abi/contracts/<function>.txt) against
the driver calls the function really makes, recorded through the CUDA trace shim.

    python3 tools/testing/check_cuda_lists.py --program build/tests/test_cuda_calls \\
        --shim build/tests/libcms-cuda-trace.so --target libcuda.so.1 --judge

Runs the program (tests/test_cuda_calls.c) with CMS_DRIVER_LIBRARY = the shim,
CMS_TRACE_TARGET = the driver to trace and CMS_TRACE_OUT = a record file, then reads the
record: one line "cms_x: cuA cuB ..." per public call, the driver functions seen during it.
A function's list is every cu* name of its CUDA line, plus the lists of the cms_* functions
that line names ("as cms_pause", "what cms_region_create lists"), transitively, plus IMPLIED:
the calls every function that calls the driver may make and no line repeats (abi/README.md,
"Contracts"): making the device's primary context current around its calls and naming a
failed call's CUresult.

Fails (exit 1) when the program fails, when a function of abi/cumemsaver.json was never
called (the scenarios must cover every one), when the self-test of the comparison fails, and,
with --judge (the GPU run: tests/CMakeLists.txt, test_cuda_calls.gpu), when a call seen is
not in its function's list. Without --judge (the simulation, which takes other paths than a
GPU driver) those are printed as information only. Listed calls never seen are always
information (a path the scenarios do not reach, or a list too wide). Exit 77 when the program
skips (no device). Standard library only.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "abigen"))

import emit_man  # noqa: E402
import model  # noqa: E402


# Made by any function that calls the driver; never listed per function.
IMPLIED = {"cuCtxPushCurrent", "cuCtxPopCurrent", "cuGetErrorName", "cuGetErrorString"}


def cuda_texts(root, abi):
    """{function: the text of its contract's CUDA line}."""
    docs, bad = emit_man.parse_contracts(root, [f["name"] for f in abi.functions])
    if bad:
        raise SystemExit("check_cuda_lists: " + "; ".join(bad))
    return {n: d["sections"].get("CUDA", "") for n, d in docs.items()}


def lists(texts):
    """{function: set of driver functions its CUDA line allows}, references resolved."""
    own = {n: set(re.findall(r"\bcu[A-Z]\w*", t)) for n, t in texts.items()}
    refs = {n: {r for r in re.findall(r"\bcms_\w+", t) if r in texts and r != n}
            for n, t in texts.items()}
    out = {}
    for n in texts:
        seen, todo, names = {n}, [n], set()
        while todo:
            f = todo.pop()
            names |= own[f]
            for r in refs[f] - seen:
                seen.add(r)
                todo.append(r)
        out[n] = names
    return out


def read_record(path):
    """{function: set of driver functions seen}, {function: calls}."""
    seen, calls = {}, {}
    with open(path, encoding="utf-8") as fh:
        for ln in fh:
            name, _, rest = ln.partition(":")
            name = name.strip()
            if not name:
                continue
            seen.setdefault(name, set()).update(rest.split())
            calls[name] = calls.get(name, 0) + 1
    return seen, calls


def compare(allowed, seen):
    """(calls seen but not listed, listed but never seen): {function: sorted names}."""
    extra = {f: sorted(s - allowed.get(f, set()) - IMPLIED) for f, s in seen.items()}
    unseen = {f: sorted(allowed[f] - seen.get(f, set())) for f in allowed}
    return ({f: v for f, v in extra.items() if v}, {f: v for f, v in unseen.items() if v})


def self_test():
    """The comparison finds what it must (list of problems)."""
    texts = {"cms_a": "cuMemCreate, cuMemMap (on failure cuMemRelease).",
             "cms_b": "as cms_a; cuEventRecord.", "cms_c": "none."}
    allowed = lists(texts)
    bad = []
    if allowed["cms_b"] != {"cuMemCreate", "cuMemMap", "cuMemRelease", "cuEventRecord"}:
        bad.append(f"'as cms_a' not included: {allowed['cms_b']}")
    extra, unseen = compare(allowed, {"cms_a": {"cuMemCreate", "cuMemGetInfo",
                                                "cuCtxPushCurrent"}, "cms_c": set()})
    if extra != {"cms_a": ["cuMemGetInfo"]}:
        bad.append(f"a call seen but not listed is not reported: {extra}")
    if unseen.get("cms_a") != ["cuMemMap", "cuMemRelease"]:
        bad.append(f"listed calls never seen are not reported: {unseen}")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--target", required=True, help="the driver the shim loads")
    ap.add_argument("--judge", action="store_true",
                    help="fail on a call not in its function's list (the GPU run)")
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--record", help="keep the record file here")
    args = ap.parse_args(argv)
    bad = [f"self-test: {m}" for m in self_test()]
    abi = model.load(os.path.join(args.root, "abi/cumemsaver.json"))
    allowed = lists(cuda_texts(args.root, abi))
    with tempfile.TemporaryDirectory(prefix="cuda-calls-") as tmp:
        record = args.record or os.path.join(tmp, "record.txt")
        if os.path.exists(record):
            os.remove(record)
        env = dict(os.environ, CMS_DRIVER_LIBRARY=os.path.abspath(args.shim),
                   CMS_TRACE_TARGET=args.target, CMS_TRACE_OUT=record)
        run = subprocess.run([args.program], env=env)
        if run.returncode == 77:
            print("check_cuda_lists: skipped (the program found no device)")
            return 77
        if run.returncode:
            print(f"check_cuda_lists: {args.program} failed ({run.returncode})")
            return 1
        seen, calls = read_record(record)
    missing = [f["name"] for f in abi.functions if f["name"] not in calls]
    bad += [f"{n}: never called by the scenarios (tests/test_cuda_calls.c)" for n in missing]
    bad += [f"{n}: recorded, but no function of abi/cumemsaver.json" for n in calls
            if n not in allowed]
    extra, unseen = compare(allowed, {f: s for f, s in seen.items() if f in allowed})
    for f, names in sorted(extra.items()):
        msg = f"{f}: calls {', '.join(names)}, not in abi/contracts/{f}.txt's CUDA line"
        if args.judge:
            bad.append(msg)
        else:
            print(f"check_cuda_lists: (not judged on {args.target}) {msg}")
    for f, names in sorted(unseen.items()):
        print(f"check_cuda_lists: (information) {f}: listed, never seen: {', '.join(names)}")
    for m in bad:
        print(f"check_cuda_lists: {m}")
    print(f"check_cuda_lists: {len(calls)} functions, {sum(calls.values())} calls traced "
          f"through {os.path.basename(args.shim)} into {args.target}; "
          f"{len(extra)} function(s) with calls not in their list"
          + ("" if args.judge else " (not judged)") + f"; {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
