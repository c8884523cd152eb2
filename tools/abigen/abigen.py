#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates the ABI's derived files from abi/cumemsaver.json (see abi/README.md).

    python3 tools/abigen/abigen.py          # rewrite every generated file
    python3 tools/abigen/abigen.py --check  # regenerate into a temp dir; exit 1 with a diff if
                                            # any committed file differs
Standard library only.
"""

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import emit_go  # noqa: E402
import emit_man  # noqa: E402
import emit_map  # noqa: E402
import emit_probe  # noqa: E402
import emit_python  # noqa: E402
import emit_rust  # noqa: E402
import emit_rust_layout  # noqa: E402
import model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESCRIPTION = "abi/cumemsaver.json"
OUTPUTS = [
    ("abi/cumemsaver.map", emit_map.emit),
    ("bindings/python/cumemsaver/_lib.py", emit_python.emit),
    ("bindings/rust/cumemsaver-sys/src/ffi.rs", emit_rust.emit),
    ("bindings/rust/cumemsaver-sys/tests/generated/layout.rs", emit_rust_layout.emit_rs),
    ("bindings/rust/cumemsaver-sys/tests/generated/probe.c", emit_rust_layout.emit_c),
    ("bindings/go/cumemsaver/zabi.go", emit_go.emit),
    ("tests/abi/header_probe.c", emit_probe.emit),
]


def generate(root):
    abi = model.load(os.path.join(root, DESCRIPTION))
    files = {path: fn(abi) for path, fn in OUTPUTS}
    files.update(emit_man.emit_all(abi, root))  # man/man3: also reads abi/contracts
    return files


def strays(files, root):
    """Generated directories' files that nothing generates any more (a removed function's
    manual page)."""
    d = os.path.join(root, emit_man.MAN_DIR)
    have = sorted(os.listdir(d)) if os.path.isdir(d) else []
    return [f"{emit_man.MAN_DIR}/{n}" for n in have if f"{emit_man.MAN_DIR}/{n}" not in files]


def write(files, root):
    changed = []
    for path, text in files.items():
        full = os.path.join(root, path)
        try:
            with open(full, encoding="utf-8") as fh:
                if fh.read() == text:
                    continue
        except FileNotFoundError:
            pass
        os.makedirs(os.path.dirname(full), exist_ok=True)
        tmp = full + ".abigen-tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, full)
        changed.append(path)
    return changed


def check(files, root):
    """Writes the files into a temp dir and diffs them against the committed ones."""
    bad = 0
    with tempfile.TemporaryDirectory(prefix="abigen-") as tmp:
        write(files, tmp)
        for path in files:
            with open(os.path.join(tmp, path), encoding="utf-8") as fh:
                fresh = fh.read()
            try:
                with open(os.path.join(root, path), encoding="utf-8") as fh:
                    committed = fh.read()
            except FileNotFoundError:
                committed = ""
            if fresh != committed:
                bad += 1
                sys.stdout.writelines(difflib.unified_diff(
                    committed.splitlines(True), fresh.splitlines(True),
                    fromfile=f"a/{path} (in the tree)", tofile=f"b/{path} (generated)"))
    return bad


def lint(files):
    """Checks the generated text itself: Python compiles; gofmt and rustfmt (where installed)
    would change nothing. Returns the number of problems."""
    bad = 0
    with tempfile.TemporaryDirectory(prefix="abigen-lint-") as tmp:
        write(files, tmp)
        for path in files:
            full = os.path.join(tmp, path)
            if path.endswith(".py"):
                with open(full, encoding="utf-8") as fh:
                    try:
                        compile(fh.read(), path, "exec")
                    except SyntaxError as e:
                        print(f"abigen: {path} does not compile: {e}")
                        bad += 1
            elif path.endswith(".go") and shutil.which("gofmt"):
                out = subprocess.run(["gofmt", "-d", full], capture_output=True, text=True)
                if out.returncode or out.stdout:
                    print(f"abigen: {path} is not gofmt-clean:\n{out.stdout}{out.stderr}")
                    bad += 1
            elif path.endswith(".rs") and shutil.which("rustfmt"):
                out = subprocess.run(["rustfmt", "--edition", "2018", "--check", full],
                                     capture_output=True, text=True)
                if out.returncode:
                    print(f"abigen: {path} is not rustfmt-clean:\n{out.stdout}{out.stderr}")
                    bad += 1
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="fail with a diff if a generated file in the tree is out of date")
    ap.add_argument("--root", default=ROOT, help="repository root (default: this checkout)")
    args = ap.parse_args(argv)
    try:
        files = generate(args.root)
    except model.AbiError as e:
        print(f"abigen: {DESCRIPTION}: {e}", file=sys.stderr)
        return 2
    except emit_man.HeaderError as e:
        print(f"abigen: contracts (abi/README.md, \"Contracts\"):\n{e}",
              file=sys.stderr)
        return 2
    if args.check:
        bad = check(files, args.root)
        for path in strays(files, args.root):
            print(f"abigen: {path} is generated by nothing (remove it)")
            bad += 1
        bad += lint(files)
        if bad:
            print(f"abigen: {bad} problem(s): generated files must match {DESCRIPTION} "
                  "(run python3 tools/abigen/abigen.py and commit the result) and be "
                  "formatter-clean", file=sys.stderr)
            return 1
        tools = [t for t in ("gofmt", "rustfmt") if shutil.which(t)]
        print(f"abigen: {len(files)} generated files match {DESCRIPTION}; formatting checked "
              f"with {', '.join(['py_compile'] + tools)}")
        return 0
    for path in write(files, args.root):
        print(f"abigen: wrote {path}")
    for path in strays(files, args.root):
        os.remove(os.path.join(args.root, path))
        print(f"abigen: removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
