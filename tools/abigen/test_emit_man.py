#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Self-test of emit_man.py (ctest man3_generator, label unit): the generator refuses header
comments that break the format or contradict abi/cumemsaver.json, and accepts the tree's.

Each case copies abi/ and include/ into a temporary root, changes one comment and expects
emit_man.emit_all to raise HeaderError naming the problem. Standard library only.
"""

import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import emit_man  # noqa: E402
import model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (header, text to replace, replacement, words the error must contain[, releases unfrozen in
# the copy: their abi/<release>/ removed, for a rule that stops at frozen releases])
CASES = [
    ("include/cumemsaver.h", " *   CMS_ERR_PAUSED: the region is paused.\n", "",
     "cms_alloc: abi lists CMS_ERR_PAUSED"),
    ("include/cumemsaver.h", " * cms_range_keep (since 1.2) - ", " * cms_range_keep (since 1.1) - ",
     "comment says since 1.1"),
    ("include/cumemsaver.h", " *   size: bytes, > 0.\n *   ptr:  receives",
     " *   bytes: bytes, > 0.\n *   ptr:  receives", "documents parameter 'bytes'"),
    ("include/cumemsaver.h", " * cms_region_find - ", " * cms_region_lookup - ",
     "must start with 'cms_region_find - "),
    ("include/cumemsaver.h", " *   CMS_ERR_PAUSED: CMS_REGION_HOST_PAGEABLE would change",
     " *   CMS_ERR_EXISTS: CMS_REGION_HOST_PAGEABLE would change",
     "CMS_ERR_EXISTS is not in the abi's statuses", ("1.2",)),
    ("include/cumemsaver_ipc.h", " * Returns:\n *   CMS_OK\n *   driver statuses.\n",
     " * Returns:\n *   CMS_OK\n", "Returns: needs 'driver statuses'"),
]


def run_case(header, old, new, want, unfreeze=()):
    with tempfile.TemporaryDirectory(prefix="emit-man-") as tmp:
        for d in ("abi", "include"):
            shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d))
        for r in unfreeze:
            shutil.rmtree(os.path.join(tmp, "abi", r))
        path = os.path.join(tmp, header)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if text.count(old) != 1:
            return f"case {want!r}: the text to change is not in {header} once"
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text.replace(old, new))
        abi = model.load(os.path.join(tmp, "abi/cumemsaver.json"))
        try:
            emit_man.emit_all(abi, tmp)
        except emit_man.HeaderError as e:
            return None if want in str(e) else f"case {want!r}: wrong error: {e}"
        return f"case {want!r}: accepted"


def main():
    abi = model.load(os.path.join(ROOT, "abi/cumemsaver.json"))
    emit_man.emit_all(abi, ROOT)  # the tree's comments pass
    bad = [m for m in (run_case(*c) for c in CASES) if m]
    for m in bad:
        print(f"test_emit_man: {m}")
    print(f"test_emit_man: {len(CASES) - len(bad)} of {len(CASES)} broken comments refused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
