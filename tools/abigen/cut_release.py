# SPDX-License-Identifier: MIT
"""Cuts the description of one ABI release out of abi/cumemsaver.json.

    python3 tools/abigen/cut_release.py 1.0 abi/cumemsaver.json -o abi/1.0/cumemsaver.json
    python3 tools/abigen/cut_release.py 1.0 abi/cumemsaver.json --check abi/1.0/cumemsaver.json

The release's description keeps what existed in that release and nothing newer:
  - every entry (typedef, handle, callback, struct, status, constant, function) with
    `since` <= release; struct fields with `since` <= release (a struct is cut back to
    the size a header of that release declared);
  - a re-versioned function's "versions" cut at the release;
  - each function's status list and the conventions' status lists without statuses
    added later (an older function returns a newer status only when the caller uses a
    newer feature, docs/abi.md);
  - groups still used by a constant; `releases` up to the release;
  - `version` "<release>.0", the CMS_VERSION_* constants computed from it, and
    CMS_STATUS_MIN the lowest status number of the release; `header` abi/<release>/cumemsaver.h.
The output is validated with model.py and written deterministically (one entry a line).
--check compares with a committed file instead of writing (the test abi_release_<ver>):
everything but the `doc` strings must be equal, so an entry of an old release can
never be renamed, retyped, renumbered or removed in the current description.
Standard library only.
"""

import argparse
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model  # noqa: E402

ENTRY_LISTS = ("typedefs", "handles", "callbacks", "structs", "statuses", "constants", "functions")


def _rel(r):
    return tuple(int(x) for x in r.split("."))


def cut(data, release):
    if release not in data["releases"]:
        raise model.AbiError(f"release {release} is not one of {data['releases']}")
    keep = lambda item: _rel(item["since"]) <= _rel(release)  # noqa: E731
    out = copy.deepcopy(data)
    out["releases"] = [r for r in data["releases"] if _rel(r) <= _rel(release)]
    out["version"] = release + ".0"
    if "header" in out:
        out["header"] = f"abi/{release}/cumemsaver.h"
    for key in ENTRY_LISTS:
        out[key] = [e for e in out[key] if keep(e)]
    for s in out["structs"]:
        s["fields"] = [f for f in s["fields"] if keep(f)]
    statuses = {s["name"] for s in out["statuses"]}
    for f in out["functions"]:
        f["statuses"] = [s for s in f["statuses"] if s in statuses]
        if "versions" in f:  # symbol versions of a re-versioned function (docs/abi.md)
            f["versions"] = [v for v in f["versions"] if _rel(v) <= _rel(release)]
            if f["versions"] == [f["since"]]:
                del f["versions"]  # not re-versioned yet in this release
    conv = out.get("conventions", {})
    for key in ("driver_statuses", "any_call_statuses"):
        if key in conv:
            conv[key] = [s for s in conv[key] if s in statuses]
    if "groups" in out:
        used = {c["group"] for c in out["constants"]}
        out["groups"] = {k: v for k, v in out["groups"].items() if k in used}
    major, minor = (int(x) for x in release.split("."))
    derived = {
        "CMS_VERSION_MAJOR": major,
        "CMS_VERSION_MINOR": minor,
        "CMS_VERSION_PATCH": 0,
        "CMS_VERSION_NUMBER": (major << 16) | (minor << 8),
        "CMS_STATUS_MIN": min(s["value"] for s in out["statuses"]),
    }
    for c in out["constants"]:
        if c["name"] in derived:
            c["value"] = derived[c["name"]]
    model.Abi(copy.deepcopy(out))  # raises AbiError if the cut is not a valid description
    return out


def dumps(data):
    """Deterministic text: top-level keys in their order, one list entry or dict key a line."""
    one = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    text, prev_block = "", None
    for key, value in data.items():
        block = True
        if isinstance(value, list) and value and isinstance(value[0], dict):
            body = ",\n".join("    " + one(v) for v in value)
            part = f"  {one(key)}: [\n{body}\n  ]"
        elif isinstance(value, dict) and value:
            body = ",\n".join(f"    {one(k)}: {one(v)}" for k, v in value.items())
            part = f"  {one(key)}: {{\n{body}\n  }}"
        else:
            block, part = False, f"  {one(key)}: {one(value)}"
        if prev_block is not None:
            text += ",\n\n" if (block or prev_block) else ",\n"
        text, prev_block = text + part, block
    return "{\n" + text + "\n}\n"


def strip_docs(v):
    if isinstance(v, dict):
        return {k: strip_docs(x) for k, x in v.items() if k != "doc"}
    if isinstance(v, list):
        return [strip_docs(x) for x in v]
    return v


def first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {one_line(a)} != {one_line(b)}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'the committed file' if k in b else 'the cut'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            name = x.get("name", i) if isinstance(x, dict) else i
            d = first_difference(x, y, f"{path}[{name}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: {len(a)} entries in the cut, {len(b)} in the committed file"
        return None
    return None if a == b else f"{path}: {one_line(a)} != {one_line(b)}"


def one_line(v):
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) < 120 else s[:117] + "..."


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("release")
    ap.add_argument("description")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("-o", "--output", help="write here (default: stdout)")
    g.add_argument("--check", metavar="FILE", help="compare with FILE, docs aside")
    args = ap.parse_args(argv)
    try:
        with open(args.description, encoding="utf-8") as fh:
            data = json.load(fh)
        model.Abi(copy.deepcopy(data))
        out = cut(data, args.release)
    except (model.AbiError, OSError, ValueError, KeyError) as e:
        print(f"cut_release: {e}", file=sys.stderr)
        return 1
    if args.check:
        with open(args.check, encoding="utf-8") as fh:
            frozen = json.load(fh)
        diff = first_difference(strip_docs(out), strip_docs(frozen))
        if diff:
            print(f"cut_release: {args.description} cut at {args.release} differs from "
                  f"{args.check}: {diff}", file=sys.stderr)
            print("A released entry changed; see docs/abi.md (\"What never changes\").",
                  file=sys.stderr)
            return 1
        print(f"cut_release: {args.description} still describes release {args.release} "
              f"({len(out['functions'])} functions, {len(out['structs'])} structs, "
              f"{len(out['statuses'])} statuses)")
        return 0
    text = dumps(out)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
