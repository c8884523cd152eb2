#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Self-test of emit_man.py (ctest man3_generator, label unit): the generator refuses
contracts (abi/contracts) that break the format or contradict abi/cumemsaver.json, a function
without its contract or a contract of nothing, a flag without its text, accepts the tree's,
and renders them as the contracts say.

Each case copies abi/, include/ and man/ into a temporary root, changes one file (a contract,
a flag text, a header comment, the .TH line of cumemsaver(7)), removes or adds one, and
expects emit_man.emit_all to raise HeaderError naming the problem. The render checks read the
pages generated from the tree:
  - a list in a contract ("  - item" lines) is a list on the page (one .IP per item), not
    run into the paragraph;
  - text that starts with code keeps its case: no "CuMemSetAccess" in CUDA DRIVER CALLS, no
    capitalized parameter ("Ctx stays the caller's") in Ownership, Thread safety, RETURN
    VALUE;
  - every page's .TH has the date and the version ("cumemsaver 1.3") of the hand-written
    sections 1 and 7;
  - every constant of a flag group has its entry (.TP) in the group's FLAGS section.
Standard library only.
"""

import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import emit_man  # noqa: E402
import model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (file, text to replace (None: remove the file; "": a new file), replacement, words the error
# must contain[, releases unfrozen in the copy: their abi/<release>/ removed, for a rule that
# stops at frozen releases])
CASES = [
    ("abi/contracts/cms_alloc.txt", "  CMS_ERR_PAUSED: the region is paused.\n", "",
     "cms_alloc: abi lists CMS_ERR_PAUSED"),
    ("abi/contracts/cms_range_keep.txt", "cms_range_keep (since 1.2) - ",
     "cms_range_keep (since 1.1) - ", "comment says since 1.1"),
    ("abi/contracts/cms_alloc.txt", "  size: bytes, > 0.\n  ptr:  receives",
     "  bytes: bytes, > 0.\n  ptr:  receives", "documents parameter 'bytes'"),
    ("abi/contracts/cms_region_find.txt", "cms_region_find - ", "cms_region_lookup - ",
     "must start with 'cms_region_find - "),
    ("abi/contracts/cms_region_flags_set.txt", "  CMS_ERR_PAUSED: CMS_REGION_HOST_PAGEABLE would change",
     "  CMS_ERR_EXISTS: CMS_REGION_HOST_PAGEABLE would change",
     "CMS_ERR_EXISTS is not in the abi's statuses", ("1.2",)),
    ("abi/contracts/cms_import_close.txt", "Returns:\n  CMS_OK\n  driver statuses.\n",
     "Returns:\n  CMS_OK\n", "Returns: needs 'driver statuses'"),
    ("man/cumemsaver.7", '"cumemsaver 1.3" "Miscellaneous', '"cumemsaver 1.2" "Miscellaneous',
     'man/cumemsaver.7: .TH says "cumemsaver 1.2"'),
    ("man/cumemsaver.7", '.TH CUMEMSAVER 7 "2026-12-05"', '.TH CUMEMSAVER 7 ""',
     "man/cumemsaver.7: no .TH line with a date"),
    # one source: a function without its contract, a contract or flag text of nothing, a flag
    # without its text
    ("abi/contracts/cms_swap.txt", None, None, "abi/contracts/cms_swap.txt: missing"),
    ("abi/contracts/cms_region_rename.txt", "", "cms_region_rename - renames.\nReturns: x\n",
     "cms_region_rename.txt: names no function"),
    ("abi/contracts/flags/resume_flag.txt", "CMS_RESUME_ASYNC\n", "CMS_RESUME_SYNC\n",
     "CMS_RESUME_ASYNC has no text"),
    # a header's short contract points at the page
    ("include/cumemsaver.h", " * Thread-safe. See cms_pause(3).\n", " * Thread-safe.\n",
     "the comment of cms_pause does not point at its page (cms_pause(3))"),
]


def run_case(header, old, new, want, unfreeze=()):
    with tempfile.TemporaryDirectory(prefix="emit-man-") as tmp:
        for d in ("abi", "include", "man"):
            shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d))
        for r in unfreeze:
            shutil.rmtree(os.path.join(tmp, "abi", r))
        path = os.path.join(tmp, header)
        if old is None:  # the file removed
            os.remove(path)
        else:
            text = ""  # old "": a new file
            if old:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                if text.count(old) != 1:
                    return f"case {want!r}: the text to change is not in {header} once"
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text.replace(old, new) if old else new)
        abi = model.load(os.path.join(tmp, "abi/cumemsaver.json"))
        try:
            emit_man.emit_all(abi, tmp)
        except emit_man.HeaderError as e:
            return None if want in str(e) else f"case {want!r}: wrong error: {e}"
        return f"case {want!r}: accepted"


def _th(text):
    m = re.search(r'^\.TH \S+ \w+ "([^"]*)" "([^"]*)"', text, re.M)
    return (m.group(1), m.group(2)) if m else None


def _first_line_after(page, heading):
    lines = page.split("\n")
    return [lines[i + 1] for i, ln in enumerate(lines[:-1]) if ln == heading]


def render_checks(abi, pages):
    """Problems of the pages generated from the tree (list of strings)."""
    bad = []
    # lists: as many .IP items as the contract has "  - " lines
    for f in abi.functions:
        name = f["name"]
        with open(os.path.join(ROOT, emit_man.CONTRACTS, name + ".txt"), encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        items = sum(1 for x in lines if re.match(r"  - \S", x))
        page = pages[f"{emit_man.MAN_DIR}/{name}.3"]
        if page.count(".IP \\(bu 2\n") != items:
            bad.append(f"{name}.3: {items} list items in the contract, "
                       f"{page.count('.IP')} .IP on the page")
    # case: a driver function or a parameter starting a section keeps its case
    for f in abi.functions:
        page = pages[f"{emit_man.MAN_DIR}/{f['name']}.3"]
        params = {p["name"] for p in f["params"]}
        starts = []
        for head in (".SH CUDA DRIVER CALLS", ".SS Ownership", ".SS Thread safety",
                     ".SH RETURN VALUE"):
            starts += _first_line_after(page, head)
        for ln in starts:
            word = re.match(r"\w+", ln)
            w = word.group(0) if word else ""
            if re.match(r"Cu[A-Z]", w) or (w[:1].isupper() and w[:1].lower() + w[1:] in params):
                bad.append(f"{f['name']}.3: a section starts with {w!r}, capitalized code")
    for text, want in (("cuMemSetAccess failed", "cuMemSetAccess failed"),
                       ("none.", "None."), ("info->host points", "info->host points"),
                       ("thread-safe.", "Thread-safe.")):
        if emit_man._cap(text) != want:
            bad.append(f"_cap({text!r}) is {emit_man._cap(text)!r}, not {want!r}")
    try:
        if emit_man._cap("ctx stays", {"ctx"}) != "ctx stays":
            bad.append("_cap capitalizes a parameter")
    except TypeError as e:
        bad.append(f"_cap(text, parameters): {e}")
    # one date and one version in every section of the manual
    hand = {}
    for sub in sorted(os.listdir(os.path.join(ROOT, "man"))):
        if re.fullmatch(r".+\.[17]", sub):
            with open(os.path.join(ROOT, "man", sub), encoding="utf-8") as fh:
                hand[sub] = _th(fh.read())
    want = hand.get("cumemsaver.7")
    release = "cumemsaver " + ".".join(abi.version.split(".")[:2])
    if not want or not want[0] or want[1] != release:
        bad.append(f"man/cumemsaver.7: .TH {want}, not a date and {release!r}")
    for sub, th in hand.items():
        if th != want:
            bad.append(f"man/{sub}: .TH date and version {th}, cumemsaver(7) {want}")
    for rel, page in pages.items():
        if _th(page) != want:
            bad.append(f"{rel}: .TH date and version {_th(page)}, cumemsaver(7) {want}")
    # every flag has its entry in its group's section
    kinds = {g: v.get("kind") for g, v in abi.groups.items()}
    for c in abi.constants:
        if kinds.get(c["group"]) != "flags":
            continue
        entry = f'.TP\n.BR {c["name"]} " ({c["value"]:#x})"\n'
        if not any(entry in page for page in pages.values()):
            bad.append(f"{c['name']}: no entry on any page")
    return bad


def main():
    abi = model.load(os.path.join(ROOT, "abi/cumemsaver.json"))
    pages = emit_man.emit_all(abi, ROOT)  # the tree's comments pass
    bad = [m for m in (run_case(*c) for c in CASES) if m]
    rendered = render_checks(abi, pages)
    for m in bad + rendered:
        print(f"test_emit_man: {m}")
    print(f"test_emit_man: {len(CASES) - len(bad)} of {len(CASES)} broken sources refused; "
          f"render checks: {len(rendered)} problem(s)")
    return 1 if bad or rendered else 0


if __name__ == "__main__":
    sys.exit(main())
