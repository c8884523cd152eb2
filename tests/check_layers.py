#!/usr/bin/env python3
"""Check the library's layering on its object files: calls, data references and headers.

The library's sources are in layers, one folder each under src/ (LAYERS, highest first).
The build already makes an upward #include fail (each layer's include path holds only its
own folder and those below it); this script enforces what the compiler cannot see:

  1. No upward use: no file of a lower layer calls a function or references data defined
     in a higher layer (e.g. through a local prototype or an extern declaration).
  2. No circle of uses between files: no two .c files use each other, directly or through
     a longer circle, even inside one layer, so that every file can be read, tested and
     replaced knowing only the files below it (a Tarjan SCC of more than one file fails).
  3. One header per layer: each layer folder has exactly one header named after the layer
     (src/core/core.h, ...), apart from the headers in EXTRA_HEADERS.
  4. No include around the include path: a file of a layer folder includes headers by bare
     name only ("vmm.h", <stdio.h>, <sys/mman.h>): no quoted path ("../api/api.h",
     "api/api.h"), no ".." in any include, and no header of a higher layer by name. The
     compiler would accept a relative path to an upper layer's header.

How: `nm` lists each object's defined and undefined (U) symbols; an undefined symbol
defined by another of the library's objects is an edge user -> definer. Symbols defined
nowhere among them (libc, the sanitizer runtimes' __asan_*, __tsan_*, __ubsan_*, ...) are
ignored. Static (local) symbols cannot satisfy another object's reference, so only global
definitions count. Not seen: calls through function pointers handed over at run time, and
files outside the cms_layer_* targets (src/adapters/preload.c, src/sim/).

Usage: check_layers.py BUILD_DIR          (objects under CMakeFiles/cms_layer_*.dir)
       check_layers.py OBJECT.o...        (objects of the cms_layer_* targets)
       check_layers.py --includes SRC_DIR (only check 4, on the layer folders of SRC_DIR;
                                           tests/check_layers_selftest.py feeds it bad files)
Exit status: 0 clean, 1 violations found, 2 usage error (no objects, nm failed).
"""
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

LAYERS = ["adapters", "api", "ipc", "engine", "store", "vmm", "core", "driver"]  # highest first
# Headers allowed in a layer folder besides the one named after the layer.
EXTRA_HEADERS = {"src/driver/cuda_api.h", "src/ipc/ipc_proto.h", "src/ipc/ipc_sock.h"}
# Folders under src/ that are not layers of the library.
NOT_LAYERS = {"sim", "kernels"}  # kernels: the checksum's definition and PTX (core, sim)
SRC = Path(__file__).resolve().parent.parent / "src"
NM = os.environ.get("NM", "nm")
RANK = {name: i for i, name in enumerate(reversed(LAYERS))}  # driver 0 ... adapters 7
STRONG, WEAK = set("TDBRCGS"), set("WVwv")


def die(message):
    print(f"check_layers: {message}", file=sys.stderr)
    sys.exit(2)


def object_files(args):
    if len(args) == 1 and Path(args[0]).is_dir():
        build = Path(args[0])
        return sorted(p for layer in LAYERS
                      for p in (build / "CMakeFiles" / f"cms_layer_{layer}.dir").rglob("*.o"))
    return [Path(a) for a in args]


def file_of(obj):
    """.../cms_layer_core.dir/src/core/log.c.o -> ("core", "src/core/log.c")"""
    m = re.search(r"src/([A-Za-z0-9_]+)/([^/]+?)(\.o|\.obj)$", obj.as_posix())
    if not m or m.group(1) not in RANK:
        die(f"{obj}: not an object of a layer folder src/<layer>/ ({', '.join(LAYERS)})")
    return m.group(1), f"src/{m.group(1)}/{m.group(2)}"


def read_symbols(objects):
    """{object: (global definitions {name: strong?}, undefined names)}, by one `nm -P -A`."""
    res = subprocess.run([NM, "-P", "-A", *map(str, objects)], capture_output=True, text=True)
    if res.returncode != 0:
        die(f"{NM} failed: {res.stderr.strip()}")
    syms = {str(obj): ({}, set()) for obj in objects}
    for line in res.stdout.splitlines():  # "path/x.c.o: name type [value size]"
        obj, _, rest = line.rpartition(": ")
        parts = rest.split()
        if obj not in syms or len(parts) < 2:
            continue
        defined, undefined = syms[obj]
        if parts[1] == "U":
            undefined.add(parts[0])
        elif parts[1] in STRONG or parts[1] in WEAK:
            defined[parts[0]] = parts[1] in STRONG
    return syms


def build_graph(objects):
    """layer_of {file: layer}, edges {(user, definer): {symbols}}."""
    by_object = read_symbols(objects)
    layer_of, syms = {}, {}
    for obj in objects:
        layer, name = file_of(obj)
        layer_of[name] = layer
        syms[name] = by_object[str(obj)]
    strong, weak = defaultdict(set), defaultdict(set)
    for name, (defined, _) in syms.items():
        for sym, is_strong in defined.items():
            (strong if is_strong else weak)[sym].add(name)
    edges = defaultdict(set)
    for user, (_, undefined) in syms.items():
        for sym in undefined:
            for definer in strong.get(sym) or weak.get(sym) or ():
                if definer != user:
                    edges[(user, definer)].add(sym)
    return layer_of, edges


def tarjan(nodes, succ):
    """Strongly connected components of the graph (recursive Tarjan: the graph is small)."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def check_headers():
    problems = []
    for folder in sorted(p for p in SRC.iterdir() if p.is_dir()):
        if folder.name in NOT_LAYERS:
            continue
        if folder.name not in RANK:
            problems.append(f"src/{folder.name}: not a layer: add it to LAYERS or NOT_LAYERS")
            continue
        own = f"src/{folder.name}/{folder.name}.h"
        headers = {f"src/{folder.name}/{h.name}" for h in folder.glob("*.h")}
        if own not in headers:
            problems.append(f"{own}: missing: each layer has one header named after it")
        for h in sorted(headers - {own} - EXTRA_HEADERS):
            problems.append(f"{h}: a second header in layer {folder.name} "
                            "(merge it into the layer's header, or allow it in EXTRA_HEADERS)")
    return problems


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]*)[>"]', re.M)


def check_includes(src):
    """Check 4 over the .c and .h files of src's layer folders."""
    problems = []
    headers = {h.name: d.name for d in src.iterdir() if d.is_dir() and d.name in RANK
               for h in d.glob("*.h")}
    for folder in sorted(p for p in src.iterdir() if p.is_dir() and p.name in RANK):
        for f in sorted(list(folder.glob("*.c")) + list(folder.glob("*.h"))):
            name = f"src/{folder.name}/{f.name}"
            text = f.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                kind, path = m.groups()
                shown = f'{kind}{path}{">" if kind == "<" else kind}'
                line = text.count("\n", 0, m.start()) + 1
                owner = headers.get(path)
                if ".." in path.split("/") or (kind == '"' and "/" in path):
                    problems.append(f"{name}:{line}: #include {shown}: "
                                    "a path around the layer's include path")
                elif owner and RANK[owner] > RANK[folder.name]:
                    problems.append(f"{name}:{line}: #include {shown}: "
                                    f"a header of the higher layer {owner}")
    return problems


def main(args):
    if not args:
        die(__doc__[__doc__.index("Usage:"):].rstrip())
    if args[0] == "--includes":
        if len(args) != 2 or not Path(args[1]).is_dir():
            die("--includes takes one source folder")
        problems = check_includes(Path(args[1]))
        for p in problems:
            print(f"include: {p}")
        return 1 if problems else 0
    objects = object_files(args)
    if not objects:
        die(f"no objects of cms_layer_* targets in {args[0]}: build the library first")
    layer_of, edges = build_graph(objects)
    succ = defaultdict(set)
    for user, definer in edges:
        succ[user].add(definer)
    fmt = lambda e: f"  {e[0]} -> {e[1]}: {', '.join(sorted(edges[e]))}"

    upward = sorted(e for e in edges if RANK[layer_of[e[0]]] < RANK[layer_of[e[1]]])
    for e in upward:
        print(f"upward use: {layer_of[e[0]]} -> {layer_of[e[1]]}:\n{fmt(e)}")
    cycles = [c for c in tarjan(layer_of, succ) if len(c) > 1]
    for comp in cycles:
        print(f"cycle of {len(comp)} files: {' '.join(comp)}")
        members = set(comp)
        for e in sorted(e for e in edges if e[0] in members and e[1] in members):
            print(fmt(e))
    headers = check_headers()
    for h in headers:
        print(f"header: {h}")
    includes = check_includes(SRC)
    for p in includes:
        print(f"include: {p}")

    per_layer = ", ".join(f"{layer} {sum(1 for f in layer_of.values() if f == layer)}" for layer in LAYERS)
    summary = f"{len(layer_of)} files ({per_layer}), {len(edges)} edges"
    if upward or cycles or headers or includes:
        print(f"{summary}: {len(upward)} upward uses, {len(cycles)} cycles, {len(headers)} header problems, "
              f"{len(includes)} include problems")
        return 1
    print(f"{summary}: no upward calls, no cycles, one header per layer, includes by name")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
