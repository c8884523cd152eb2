#!/usr/bin/env python3
"""Check the library's layering on its object files: calls, data references and headers.

The library's sources are in layers, one folder each under src/ (LAYERS, highest first).
The build already makes an upward #include by name fail (each layer's include path holds only
its own folder and those below it); this script enforces what the include path cannot:

  1. No upward use: no file of a lower layer calls a function or references data defined
     in a higher layer (e.g. through a local prototype or an extern declaration). The
     simulation (src/sim/) uses nothing of the library and the library nothing of it.
  2. No circle of uses between files: no two .c files use each other, directly or through
     a longer circle, even inside one layer, so that every file can be read, tested and
     replaced knowing only the files below it (a Tarjan SCC of more than one file fails).
  3. One header per layer: each layer folder has exactly one header named after the layer
     (src/core/core.h, ...), what the layers above may use, and may have one internal header,
     <layer>_internal.h, for its own files only (checks 4 and 5 fail any file above the layer
     that opens it), apart from the headers in EXTRA_HEADERS.
  4. No include around the include path, as written (a lint of the text, before a build): a
     file of a layer folder includes headers by bare name only ("vmm.h", <stdio.h>,
     <sys/mman.h>): no quoted path ("../api/api.h", "api/api.h"), no ".." in any include,
     no header of a higher layer by name, and no internal header of another layer
     ("vmm_internal.h" outside src/vmm/).
  5. No header opened outside what the file's place allows, as the compiler opened them
     (authoritative): every project file each object's compilation really read, from the
     compiler's own dependency output (-MD), whatever spelled the include: a computed
     `#define H "../engine/engine.h"` / `#include H`, a path, a -include option. See
     may_open() for what each place may open: a layer its own and lower layers' headers (but
     no other layer's <layer>_internal.h), the public headers and the checksum's (src/kernels); src/adapters/preload.c (an adapter
     built outside the library, against its ABI) the public headers only; the simulation
     (src/sim/) its own headers, the driver API it implements (src/driver/cuda_api.h), its
     public header and the checksum's definition. Every .c file of src/ except the device
     code of src/kernels must have an up-to-date record: run it after the build.

How, 1-2: `nm` lists each object's defined and undefined (U) symbols; an undefined symbol
defined by another of the library's objects is an edge user -> definer. Symbols defined
nowhere among them (libc, the sanitizer runtimes' __asan_*, __tsan_*, __ubsan_*, ...) are
ignored. Static (local) symbols cannot satisfy another object's reference, so only global
definitions count. Not seen: calls through function pointers handed over at run time.
How, 5: Ninja keeps the depfiles in its log (`ninja -C BUILD -t deps` prints them; NINJA names
the program); other generators leave them as *.d files in the build folder, which are read
instead. Paths are resolved (.., symbolic links); files outside the source tree are the
system's and not checked; relative paths are taken from the build folder.

Usage: check_layers.py BUILD_DIR          (all checks: objects under CMakeFiles/cms_layer_*.dir,
                                           preload.c's and the simulation's, the build's
                                           dependency records)
       check_layers.py OBJECT.o...        (checks 1-4 on objects of the cms_layer_* targets)
       check_layers.py --includes SRC_DIR (only check 4, on the layer folders of SRC_DIR)
       check_layers.py --deps ROOT BUILD_DIR|DUMP
                                          (only check 5, for the source tree ROOT, on a build
                                           folder or a file holding `ninja -t deps` output;
                                           tests/check_layers_selftest.py feeds both bad files)
Exit status: 0 clean, 1 violations found, 2 usage error (no objects or records, nm failed).
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
ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
NM = os.environ.get("NM", "nm")
NINJA = os.environ.get("NINJA", "ninja")
PRELOAD = "src/adapters/preload.c"  # an adapter, but its own shared object (libcumemsaver-preload.so)
# The installed headers of the library (not the simulation's cumemsaver_sim.h).
PUBLIC = {"include/cumemsaver.h", "include/cumemsaver_hooks.h", "include/cumemsaver_ipc.h"}
# What the simulation opens besides src/sim/*.h: the driver API it implements, its own public
# header (counters, fault injection) and the checksum it runs in place of the library's kernel.
SIM_OPENS = {"src/driver/cuda_api.h", "include/cumemsaver_sim.h", "src/kernels/checksum.h"}
RANK = {name: i for i, name in enumerate(reversed(LAYERS))}  # driver 0 ... adapters 7
STRONG, WEAK = set("TDBRCGS"), set("WVwv")


def die(message):
    print(f"check_layers: {message}", file=sys.stderr)
    sys.exit(2)


def object_files(args):
    """The library's objects and preload.c's (a file of adapters), and the simulation's."""
    if len(args) == 1 and Path(args[0]).is_dir():
        build = Path(args[0])
        dirs = [build / "CMakeFiles" / f"cms_layer_{layer}.dir" for layer in LAYERS]
        dirs.append(build / "CMakeFiles" / "cumemsaver-preload.dir")
        sim = build / "src" / "sim" / "CMakeFiles" / "cumemsaver-sim.dir"
        return (sorted(p for d in dirs for p in d.rglob("*.o") if source_exists(p, "")),
                sorted(p for p in sim.rglob("*.o") if source_exists(p, "src/sim/")))
    return [Path(a) for a in args], []


def source_exists(obj, prefix):
    """Whether the source of a build folder's object is still in the tree: an incremental
    build keeps the objects of files since removed or renamed (the old core/checksum.c.o),
    which are not the library's."""
    rel = obj.as_posix().split(".dir/", 1)[-1]
    return (ROOT / (prefix + rel[: -len(".o")])).exists()


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


def check_sim(objects, sim_objects):
    """Check 1 for the simulation: no symbol of the library used by it, none of it by the library."""
    if not sim_objects:
        return []
    syms = read_symbols(objects + sim_objects)
    lib_def, lib_undef, sim_def, sim_undef = set(), set(), set(), set()
    for obj in objects:
        lib_def |= set(syms[str(obj)][0])
        lib_undef |= syms[str(obj)][1]
    for obj in sim_objects:
        sim_def |= set(syms[str(obj)][0])
        sim_undef |= syms[str(obj)][1]
    problems = [f"the simulation uses the library's {', '.join(sorted(sim_undef & lib_def))}"] \
        if sim_undef & lib_def else []
    if lib_undef & sim_def:
        problems.append(f"the library uses the simulation's {', '.join(sorted(lib_undef & sim_def))}")
    return problems


def place_of(source):
    """What a source file (path under the tree) is, for may_open(); None: not the library's."""
    parts = source.split("/")
    if source == PRELOAD:
        return "preload"
    if len(parts) != 3 or parts[0] != "src":
        return None  # tests, tools, examples: not checked here
    return parts[1]  # a layer, "sim", "kernels" or an unknown folder


def internal_of(name):
    """The layer whose internal header name (a file name) is, or None."""
    layer = name[:-len("_internal.h")] if name.endswith("_internal.h") else None
    return layer if layer in RANK else None


def may_open(place, header):
    """None when a file of place may open the tree's file header, else why not."""
    parts = header.split("/")
    folder = parts[1] if len(parts) == 3 and parts[0] == "src" and parts[2].endswith(".h") else None
    if place == "preload":
        return None if header in PUBLIC else \
            "preload.c is built outside the library, against its public headers only"
    if place == "sim":
        return None if folder == "sim" or header in SIM_OPENS else \
            "the simulation opens its own headers, " + ", ".join(sorted(SIM_OPENS)) + " only"
    if place == "kernels":
        return None if folder == "kernels" else "the checksum kernel opens its own headers only"
    if place not in RANK:
        return f"src/{place} is not a layer: add it to LAYERS, or give it a rule in may_open()"
    if header in PUBLIC or folder == "kernels":
        return None
    if folder in RANK and internal_of(parts[2]) == folder and folder != place:
        return f"the internal header of layer {folder}, for its own files only"
    if folder in RANK:
        return None if RANK[folder] <= RANK[place] else f"a header of the higher layer {folder}"
    return "not a header of a layer, nor a public one"


RECORD = re.compile(r"^(\S.*): #deps \d+, deps mtime \d+ \((VALID|STALE)\)$")


def ninja_records(text):
    """[(object, [files], stale)] of `ninja -t deps` output."""
    records = []
    for line in text.splitlines():
        m = RECORD.match(line)
        if m:
            records.append((m.group(1), [], m.group(2) == "STALE"))
        elif line.startswith("    ") and records:
            records[-1][1].append(line.strip())
    return records


def depfile_words(line):
    """The words of a make rule line as gcc writes a depfile: '\\ ' and '\\#' escaped, '$$'."""
    words, word, i = [], "", 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] in " #":
            word, i = word + line[i + 1], i + 2
            continue
        if c == "$" and line[i + 1:i + 2] == "$":
            word, i = word + "$", i + 2
            continue
        if c.isspace():
            if word:
                words.append(word)
            word = ""
        else:
            word += c
        i += 1
    return words + [word] if word else words


def depfile_records(build):
    """[(object, [files], False)] of the *.d files under build: each file's first rule."""
    records = []
    for d in sorted(build.rglob("*.d")):
        if not d.is_file():
            continue
        text = d.read_text(errors="replace").replace("\\\r\n", " ").replace("\\\n", " ")
        words = next((w for w in map(depfile_words, text.splitlines()) if w), [])
        if len(words) >= 2 and words[0].endswith(":"):
            records.append((words[0][:-1], words[1:], False))
    return records


def dependency_records(where):
    """The compiler's dependency records of a build folder, or of a `ninja -t deps` dump."""
    if where.is_file():
        return ninja_records(where.read_text(errors="replace")), "the recorded `ninja -t deps`"
    if (where / ".ninja_deps").exists():
        res = subprocess.run([NINJA, "-C", str(where), "-t", "deps"], capture_output=True, text=True)
        if res.returncode != 0:
            die(f"{NINJA} -C {where} -t deps failed: {res.stderr.strip()}")
        return ninja_records(res.stdout), f"`{Path(NINJA).name} -t deps`"
    return depfile_records(where), "the *.d files"


def out_of_date(obj, paths, root):
    """Whether an object is missing or older than one of the tree's files it was built from."""
    if not obj.exists():
        return True
    built = obj.stat().st_mtime_ns
    return any(p.is_relative_to(root) and p.exists() and p.stat().st_mtime_ns > built for p in paths)


def check_record(root, source, obj, paths):
    """Check 5 on one object's record: the problems of the files its compilation opened."""
    place, problems = place_of(source), []
    for p in paths[1:]:
        if not p.is_relative_to(root):
            continue  # the system's headers
        header = p.relative_to(root).as_posix()
        why = None if header == source else may_open(place, header)
        if why:
            problems.append(f"{source} opened {header} ({obj}): {why}")
    return problems


def check_opened(root, where):
    """Check 5: ([problems], summary) over the dependency records of where (a build or a dump).
    Records of files outside src/ (tests, tools) or since removed are left out."""
    root = root.resolve()
    records, origin = dependency_records(where)
    if not records:
        die(f"no dependency records in {where}: build first")
    base = where if where.is_dir() else where.parent
    problems, seen, places = [], set(), defaultdict(int)
    for obj, files, stale in records:
        paths = [Path(os.path.realpath(base / f)) for f in files]  # base / absolute = absolute
        if not paths or not paths[0].is_relative_to(root) or not paths[0].exists():
            continue
        source = paths[0].relative_to(root).as_posix()
        if place_of(source) is None:
            continue
        seen.add(source)
        if stale or (where.is_dir() and out_of_date(Path(os.path.realpath(base / obj)), paths, root)):
            problems.append(f"{source}: {obj} is out of date, older than its files: build first")
            continue
        places["preload.c" if source == PRELOAD else place_of(source)] += 1
        problems += check_record(root, source, obj, paths)
    expected = {f.relative_to(root).as_posix() for f in (root / "src").glob("*/*.c")
                if f.parent.name != "kernels"}  # kernels: device code, compiled to PTX
    for source in sorted(expected - seen):
        problems.append(f"{source}: no dependency record in {origin} (build it first)")
    per_place = ", ".join(f"{k} {v}" for k, v in sorted(places.items()))
    return problems, f"{sum(places.values())} objects' opened files ({per_place}) from {origin}"


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
        internal = f"src/{folder.name}/{folder.name}_internal.h"
        for h in sorted(headers - {own, internal} - EXTRA_HEADERS):
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
                elif internal_of(path) and internal_of(path) != folder.name:
                    problems.append(f"{name}:{line}: #include {shown}: the internal header "
                                    f"of layer {internal_of(path)}, for its own files only")
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
    if args[0] == "--deps":
        if len(args) != 3 or not Path(args[1]).is_dir() or not Path(args[2]).exists():
            die("--deps takes a source tree and a build folder or a `ninja -t deps` dump")
        problems, summary = check_opened(Path(args[1]), Path(args[2]))
        for p in problems:
            print(f"opened: {p}")
        print(f"{summary}: {len(problems)} problems" if problems else f"{summary}: as allowed")
        return 1 if problems else 0
    objects, sim_objects = object_files(args)
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
    sim = check_sim(objects, sim_objects)
    for p in sim:
        print(f"upward use: {p}")
    upward += sim
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
    opened, opened_summary = [], "no dependency records (objects given by name)"
    if len(args) == 1 and Path(args[0]).is_dir():
        opened, opened_summary = check_opened(ROOT, Path(args[0]))
    for p in opened:
        print(f"opened: {p}")

    per_layer = ", ".join(f"{layer} {sum(1 for f in layer_of.values() if f == layer)}" for layer in LAYERS)
    summary = f"{len(layer_of)} files ({per_layer}), {len(edges)} edges; {opened_summary}"
    if upward or cycles or headers or includes or opened:
        print(f"{summary}: {len(upward)} upward uses, {len(cycles)} cycles, {len(headers)} header problems, "
              f"{len(includes)} include problems, {len(opened)} opened files not allowed")
        return 1
    print(f"{summary}: no upward calls, no cycles, one header per layer (and its internal one), "
          "includes by name, every opened file allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
