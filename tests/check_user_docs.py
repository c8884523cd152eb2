#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every public name has an entry in the user documents of its language.

    python3 tests/check_user_docs.py [SOURCE_DIR]

The names come from what the code publishes, the documents are the ones a user reads for
that language. A name "appears in a Markdown document" when it is an identifier inside a
code span of it (`...` or a fenced block); "cms_x" also counts where a table cell writes
`cms_x_create` / `_destroy` (a code span "_destroy" after a full name on the same line
stands for the function that name's leading words and "_destroy" make, if the ABI has it).

C (abi/cumemsaver.json; the manual pages):
  C1  every function has its page man/man3/<name>.3 and is named in cumemsaver(7)
      (man/cumemsaver.7, the overview that lists them by subject);
  C2  every constant of a flag group (group kind "flags": region, pause, resume, import,
      control flags, handle types) has an entry of its own on a manual page: a ".TP" whose
      term (.B / .BR) is the name, in cumemsaver(7) or a section 3 page (tools/abigen makes
      the FLAGS sections there from the flags' texts, abi/contracts/flags).
Python (docs/python.md):
  P1  every ABI function's C name (its row of the C / Python table);
  P2  every name the package exports: cumemsaver.__all__, or while the package has none
      every public name of the package that is not a module (exceptions included);
  P3  every public method and property of the exported classes (exceptions, enumerations
      and dataclass fields aside), and every parameter with a default of those methods and
      of the exported functions (the keywords: prepare=, verify=, ...).
Rust (docs/rust.md):
  R1  every ABI function's C name;
  R2  every flag of a flag group under the name the cumemsaver crate gives it (the C name
      without CMS_, a `pub const` of the crate) and every ErrorKind variant;
  R3  every `pub fn` of the cumemsaver crate (bindings/rust/cumemsaver/src).
Go (docs/go.md):
  G1  every ABI function's C name;
  G2  every flag and status constant of zabi.go (its "X is CMS_Y" comment names it);
  G3  every exported function and method of the package (not tests, not zabi.go).

Exit status 0 when every name has its entry, 1 otherwise (each missing one printed).
Standard library only (it imports the Python package, which loads no library on import).
The ctest user_docs (label unit) runs it.
"""

import dataclasses
import enum
import glob
import inspect
import json
import os
import re
import sys
import types

sys.dont_write_bytecode = True


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        return fh.read()


def code_spans(text):
    """The code spans of a Markdown text, each with the line it starts on."""
    out = []
    # An inline span may continue on the next line (CommonMark), never past a blank line.
    for m in re.finditer(r"^(```|~~~).*?^\1[ \t]*$|`(?:[^`\n]|\n(?![ \t]*\n))+`", text, re.S | re.M):
        out.append((text.count("\n", 0, m.start()), m.group(0).strip("`")))
    return out


def md_names(text, functions):
    """Identifiers in the code spans, and the C functions named with the table
    shorthand (`cms_region_create` / `_destroy`)."""
    names = set()
    last = {}  # line -> last full cms_ name on it
    for line, span in code_spans(text):
        for tok in re.findall(r"[A-Za-z_]\w*", span):
            names.add(tok)
            if tok.startswith("cms_"):
                last[line] = tok
        m = re.fullmatch(r"(_\w+)", span.strip())
        if m and line in last:
            words = last[line].split("_")
            for k in range(len(words) - 1, 1, -1):
                cand = "_".join(words[:k]) + m.group(1)
                if cand in functions:
                    names.add(cand)
                    break
    return names


def man_text(text):
    """The words of a roff page (font escapes removed)."""
    return re.sub(r"\\f[BIRP]|\\&|\\-", lambda m: "-" if m.group(0) == "\\-" else "", text)


def man_entries(text):
    """Terms of the .TP entries of a roff page."""
    out = set()
    lines = text.split("\n")
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith(".TP"):
            m = re.match(r'\.BR?\s+"?([A-Z_0-9]+)', lines[i + 1])
            if m:
                out.add(m.group(1))
    return out


def check_c(root, abi, functions):
    bad = []
    seven = man_text(read(root, "man/cumemsaver.7"))
    named = set(re.findall(r"\bcms_\w+", seven))
    entries = man_entries(read(root, "man/cumemsaver.7"))
    for path in glob.glob(os.path.join(root, "man/man3/*.3")):
        with open(path, encoding="utf-8") as fh:
            entries |= man_entries(fh.read())
    for f in functions:
        if not os.path.exists(os.path.join(root, "man/man3", f + ".3")):
            bad.append(f"C1 {f}: no page man/man3/{f}.3")
        if f not in named:
            bad.append(f"C1 {f}: not named in cumemsaver(7)")
    kinds = {g: v["kind"] for g, v in abi["groups"].items()}
    for c in abi["constants"]:
        if kinds.get(c["group"]) == "flags" and c["name"] not in entries:
            bad.append(f"C2 {c['name']}: no entry (.TP term) on any manual page")
    return bad


def python_names(root):
    """(exported names, [(class or function name, member names and parameters)])."""
    sys.path.insert(0, os.path.join(root, "bindings/python"))
    import cumemsaver  # noqa: E402

    if hasattr(cumemsaver, "__all__"):
        exported = list(cumemsaver.__all__)
    else:
        exported = [n for n in dir(cumemsaver) if not n.startswith("_")
                    and not isinstance(getattr(cumemsaver, n), types.ModuleType)]
    members = []
    for n in exported:
        obj = getattr(cumemsaver, n)
        if inspect.isclass(obj):
            if issubclass(obj, (BaseException, enum.Enum)):
                continue
            fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) \
                else set()
            for m, v in vars(obj).items():
                if m.startswith("_") or m in fields:
                    continue
                members.append((f"{n}.{m}", m))
                fn = v.fget if isinstance(v, property) else v
                members += [(f"{n}.{m}({p}=)", p) for p in defaults_of(fn)]
        elif callable(obj):
            members += [(f"{n}({p}=)", p) for p in defaults_of(obj)]
    return exported, members


def defaults_of(fn):
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    if not callable(fn):
        return []
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.default is not inspect.Parameter.empty and not p.name.startswith("_")]


def check_python(root, functions):
    names = md_names(read(root, "docs/python.md"), functions)
    bad = [f"P1 {f}: not in docs/python.md" for f in functions if f not in names]
    exported, members = python_names(root)
    bad += [f"P2 cumemsaver.{n}: not in docs/python.md" for n in exported if n not in names]
    bad += [f"P3 cumemsaver.{what}: {n!r} not in docs/python.md"
            for what, n in members if n not in names]
    return bad


def check_rust(root, abi, functions):
    names = md_names(read(root, "docs/rust.md"), functions)
    bad = [f"R1 {f}: not in docs/rust.md" for f in functions if f not in names]
    src = "\n".join(read(root, os.path.relpath(p, root))
                    for p in sorted(glob.glob(os.path.join(root, "bindings/rust/cumemsaver/src/*.rs"))))
    consts = set(re.findall(r"\bpub const (\w+)", src))
    kinds = {g: v["kind"] for g, v in abi["groups"].items()}
    for c in abi["constants"]:
        rust = c["name"][len("CMS_"):]
        if kinds.get(c["group"]) == "flags" and rust in consts and rust not in names:
            bad.append(f"R2 {rust} ({c['name']}): not in docs/rust.md")
    m = re.search(r"error_kinds!\s*\{(.*?)\n\}", src, re.S)
    variants = re.findall(r"^\s*(\w+) = CMS_ERR_", m.group(1), re.M) if m else []
    if not variants:
        bad.append("R2 ErrorKind: no variants found in src/error.rs (error_kinds!)")
    bad += [f"R2 ErrorKind::{v}: not in docs/rust.md" for v in variants if v not in names]
    bad += [f"R3 {fn}: not in docs/rust.md"
            for fn in sorted(set(re.findall(r"\bpub fn (\w+)", src))) if fn not in names]
    return bad


def check_go(root, abi, functions):
    names = md_names(read(root, "docs/go.md"), functions)
    bad = [f"G1 {f}: not in docs/go.md" for f in functions if f not in names]
    zabi = read(root, "bindings/go/cumemsaver/zabi.go")
    go_of = dict((c, g) for g, c in re.findall(r"^\s*// (\w+) is (CMS_\w+)", zabi, re.M))
    kinds = {g: v["kind"] for g, v in abi["groups"].items()}
    wanted = [c["name"] for c in abi["constants"] if kinds.get(c["group"]) == "flags"]
    wanted += [s["name"] for s in abi["statuses"]]
    for c in wanted:
        g = go_of.get(c)
        if g is None:
            bad.append(f"G2 {c}: zabi.go has no constant for it")
        elif g not in names:
            bad.append(f"G2 {g} ({c}): not in docs/go.md")
    exported = set()
    for p in glob.glob(os.path.join(root, "bindings/go/cumemsaver/*.go")):
        if p.endswith("_test.go") or os.path.basename(p) == "zabi.go":
            continue
        with open(p, encoding="utf-8") as fh:
            exported |= set(re.findall(r"^func (?:\([^)]*\) )?([A-Z]\w*)\(", fh.read(), re.M))
    bad += [f"G3 {fn}: not in docs/go.md" for fn in sorted(exported) if fn not in names]
    return bad


def main(argv):
    root = argv[1] if len(argv) > 1 else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    abi = json.loads(read(root, "abi/cumemsaver.json"))
    functions = [f["name"] for f in abi["functions"]]
    bad = check_c(root, abi, functions) + check_python(root, functions) + \
        check_rust(root, abi, functions) + check_go(root, abi, functions)
    for b in bad:
        print(f"check_user_docs: {b}")
    if bad:
        print(f"check_user_docs: {len(bad)} public name(s) without an entry in their user "
              "document (tests/check_user_docs.py says which documents count)")
        return 1
    print(f"check_user_docs: {len(functions)} functions, the flags, the Python, Rust and Go "
          "names: each has its entry in the user documents")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
