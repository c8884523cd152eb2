#!/usr/bin/env python3
"""Check src/core/core.h's CMS_SIZED_STRUCTS against abi/cumemsaver.json.

The table gives each sized public struct (first field struct_size) the last field of the
release that introduced it; options.c derives the smallest struct_size accepted from it
(docs/abi.md, "The smallest size accepted"). This checks that the table lists every such
struct of the ABI description, nothing else, and for each the last field whose "since" is
the struct's own release: a struct added without a line, or a line naming a field added
later (which would refuse older callers' structs), fails.

Usage: check_sized.py SOURCE_DIR        Exit status: 0 consistent, 1 not.
"""
import json
import os
import re
import sys


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "abi", "cumemsaver.json")) as f:
        abi = json.load(f)
    with open(os.path.join(root, "src", "core", "core.h")) as f:
        core = f.read()
    m = re.search(r"#define CMS_SIZED_STRUCTS\(X\)(.*?)\n\n", core, re.S)
    if not m:
        print("check_sized: no CMS_SIZED_STRUCTS table in src/core/core.h")
        return 1
    table = dict(re.findall(r"X\((\w+),\s*(\w+),\s*\d+\)", m.group(1)))
    want = {}
    for s in abi["structs"]:
        fields = s["fields"]
        if not fields or fields[0]["name"] != "struct_size":
            continue
        first = [f["name"] for f in fields if f["since"] == s["since"]]
        want[s["name"]] = first[-1]
    # cms_control_request is filled by the library for a callback: no caller's size to check.
    want.pop("cms_control_request", None)
    bad = 0
    for name, last in sorted(want.items()):
        if name not in table:
            print(f"check_sized: {name} (struct_size first) is missing from CMS_SIZED_STRUCTS")
            bad = 1
        elif table[name] != last:
            print(f"check_sized: {name}: the table names {table[name]}, its last field of "
                  f"its first release is {last}")
            bad = 1
    for name in sorted(set(table) - set(want)):
        print(f"check_sized: {name} is in CMS_SIZED_STRUCTS but not a sized struct of the ABI")
        bad = 1
    if not bad:
        print(f"check_sized: {len(table)} sized structs, each with its first release's last field")
    return bad


if __name__ == "__main__":
    sys.exit(main())
