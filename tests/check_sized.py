#!/usr/bin/env python3
"""Check src/core/core.h's CMS_SIZED_STRUCTS against abi/cumemsaver.json.

The table gives each sized public struct (first field struct_size) the last field of the
release that introduced it; options.c derives the smallest struct_size accepted from it
(docs/abi.md, "The smallest size accepted"). This checks that the table lists every such
struct of the ABI description, nothing else, and for each the last field whose "since" is
the struct's own release: a struct added without a line, or a line naming a field added
later (which would refuse older callers' structs), fails. It also checks that
abi/abidiff.suppr's tail-growth suppression names exactly the sized structs of the
description (cms_control_request included: a callback built against an older header reads
its first fields only), so that abi_abidiff does not refuse a field a new release appends
to one of them, nor let another struct grow.

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
    sized = set()
    for s in abi["structs"]:
        fields = s["fields"]
        if not fields or fields[0]["name"] != "struct_size":
            continue
        sized.add(s["name"])
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
    bad |= check_suppressions(root, sized)
    if not bad:
        print(f"check_sized: {len(table)} sized structs, each with its first release's last "
              f"field; {len(sized)} in abi/abidiff.suppr")
    return bad


def check_suppressions(root, sized):
    """abi/abidiff.suppr's name_regexp of trailing members lists every sized struct."""
    with open(os.path.join(root, "abi", "abidiff.suppr")) as f:
        suppr = f.read()
    m = re.search(r"has_data_member_inserted_at = end", suppr)
    names = re.search(r"name_regexp = \^cms_\(([a-z0-9_|]+)\)\$", suppr)
    if not m or not names:
        print("check_sized: abi/abidiff.suppr has no tail-growth suppression by name")
        return 1
    listed = {"cms_" + n for n in names.group(1).split("|")}
    bad = 0
    for name in sorted(sized - listed):
        print(f"check_sized: {name} (struct_size first) is missing from abi/abidiff.suppr")
        bad = 1
    for name in sorted(listed - sized):
        print(f"check_sized: {name} is in abi/abidiff.suppr but not a sized struct of the ABI")
        bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
