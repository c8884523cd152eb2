#!/usr/bin/env python3
"""Self-test of check_layers.py's include checks and its rule for the simulation: a file that
opens a header its place does not allow must fail them, a clean tree must pass. No build of
the project is needed.

Check 4 (the text lint, --includes): each case builds a small source tree (src/core, src/vmm,
src/api with their headers) in a temporary folder, adds one file, and runs it on the tree; an
internal header (vmm_internal.h) included outside its layer fails it.
Check 5 (the compiler's records, --deps):
  - recorded: a `ninja -C build -t deps` dump recorded from the project's build (trimmed to
    four objects and a few system headers), fed as it is and with one line added or changed;
  - compiled: a small tree whose store file opens the engine's header through a computed
    include (#define H "../engine/engine.h" / #include H) and uses its inline accessor,
    compiled with the C compiler (CC, default cc) writing depfiles (-MD), and with ninja
    (NINJA, default ninja; left out when there is none). The text lint passes it (what the
    layer check did before it read the compiler's records), the records fail it.
Check 1's rule for the simulation (no symbol of the library used by it, none of it by the
library): two small objects compiled with CC, given to check_sim().
Exit status: 0 when every case gives the expected result, 1 otherwise.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parent / "check_layers.py"
CC = os.environ.get("CC", "cc")
NINJA = os.environ.get("NINJA", "ninja")

# (file, its text, expected exit status)
TEXT_CASES = [
    ("core/clean.c", '#include <stdio.h>\n#include <sys/mman.h>\n#include "core.h"\n', 0),
    ("vmm/below.c", '#include "vmm.h"\n#include "core.h"\n#include "cumemsaver.h"\n', 0),
    ("core/up_relative.c", '#include "../api/api.h"\n', 1),
    ("core/up_folder.c", '#include "api/api.h"\n', 1),
    ("vmm/up_name.c", '#include "api.h"\n', 1),
    ("core/up_angle.c", "#include <../api/api.h>\n", 1),
    ("vmm/own_relative.h", '#  include "../vmm/vmm.h"\n', 1),
    # a layer's internal header: its own files only
    ("vmm/own_internal.c", '#include "vmm_internal.h"\n#include "core.h"\n', 0),
    ("api/below_internal.c", '#include "vmm_internal.h"\n', 1),
    ("vmm/core_internal.c", '#include "core_internal.h"\n', 1),
]

# `ninja -C build -t deps` of four objects, recorded from the project's build ({root}: the tree).
RECORDED = """\
CMakeFiles/cms_layer_core.dir/src/core/log.c.o: #deps 103, deps mtime 1796665848291044219 (VALID)
    {root}/src/core/log.c
    /usr/include/stdc-predef.h
    /usr/include/pthread.h
    {root}/src/core/core.h
    {root}/include/cumemsaver.h
    {root}/include/cumemsaver_hooks.h
    {root}/include/cumemsaver_ipc.h
    {root}/src/driver/driver.h
    {root}/src/driver/cuda_api.h

CMakeFiles/cms_layer_store.dir/src/store/piece.c.o: #deps 76, deps mtime 1796666024915703437 (VALID)
    {root}/src/store/piece.c
    /usr/include/stdc-predef.h
    {root}/src/store/store.h
    {root}/src/vmm/vmm.h
    {root}/src/core/core.h
    /usr/lib/gcc/x86_64-linux-gnu/12/include/limits.h
    {root}/include/cumemsaver.h
    {root}/include/cumemsaver_hooks.h
    {root}/include/cumemsaver_ipc.h
    {root}/src/driver/driver.h
    {root}/src/driver/cuda_api.h

src/sim/CMakeFiles/cumemsaver-sim.dir/sim_ctx.c.o: #deps 63, deps mtime 1796665878831044219 (VALID)
    {root}/src/sim/sim_ctx.c
    /usr/include/stdc-predef.h
    /usr/include/string.h
    {root}/src/kernels/checksum.h
    {root}/src/sim/sim_internal.h
    {root}/src/driver/cuda_api.h
    {root}/include/cumemsaver_sim.h

CMakeFiles/cumemsaver-preload.dir/src/adapters/preload.c.o: #deps 59, deps mtime 1796666028915115195 (VALID)
    {root}/src/adapters/preload.c
    /usr/include/stdc-predef.h
    /usr/include/dlfcn.h
    {root}/include/cumemsaver.h
    {root}/include/cumemsaver_hooks.h
    {root}/include/cumemsaver_ipc.h
"""
LOG, PIECE = "src/core/log.c", "src/store/piece.c"
SIM, PRELOAD = "src/sim/sim_ctx.c", "src/adapters/preload.c"
# What a store file that opened the engine's header fails with.
UP = f"{PIECE} opened src/engine/engine.h"


def opened(source, file):
    """A change to the dump: source's record also lists file (one its compilation opened;
    under the tree unless it starts with {tmp})."""
    first = "    {root}/" + source + "\n"
    line = "    " + (file if file.startswith("{") else "{root}/" + file) + "\n"
    return lambda dump: dump.replace(first, first + line)


# (name, change to the recorded dump or None, expected: 0 (passes) or what the failure names).
DEPS_CASES = [
    ("clean", None, 0),
    ("store below", opened(PIECE, "src/kernels/checksum.h"), 0),
    # the computed include of the engine's header, as ninja recorded it in the project
    ("store computed up", opened(PIECE, "src/engine/engine.h"), UP),
    ("store up by ..", opened(PIECE, "src/store/../engine/engine.h"), UP),
    ("store up by link", opened(PIECE, "{tmp}/outside.h"), UP),
    ("store opens a .c", opened(PIECE, "src/engine/engine.c"), f"{PIECE} opened src/engine/engine.c"),
    ("store opens its internal", opened(PIECE, "src/store/store_internal.h"), 0),
    ("store opens vmm's internal", opened(PIECE, "src/vmm/vmm_internal.h"),
     f"{PIECE} opened src/vmm/vmm_internal.h"),
    ("store opens core's internal", opened(PIECE, "src/core/core_internal.h"),
     f"{PIECE} opened src/core/core_internal.h"),
    ("core opens tests", opened(LOG, "tests/common.h"), f"{LOG} opened tests/common.h"),
    ("core opens the sim's", opened(LOG, "include/cumemsaver_sim.h"), f"{LOG} opened include/cumemsaver_sim.h"),
    ("sim opens core", opened(SIM, "src/core/core.h"), f"{SIM} opened src/core/core.h"),
    ("sim opens library", opened(SIM, "include/cumemsaver.h"), f"{SIM} opened include/cumemsaver.h"),
    ("sim opens driver.h", opened(SIM, "src/driver/driver.h"), f"{SIM} opened src/driver/driver.h"),
    ("preload opens api", opened(PRELOAD, "src/api/api.h"), f"{PRELOAD} opened src/api/api.h"),
    ("preload record missing", lambda d: d[:d.index("CMakeFiles/cumemsaver-preload.dir")],
     f"{PRELOAD}: no dependency record"),
    ("record stale", lambda d: d.replace("831044219 (VALID)", "831044219 (STALE)"),
     "sim_ctx.c.o is out of date"),
]

STORE_H = ('#ifndef STORE_H\n#define STORE_H\n#include "core.h"\nstruct store_part { int size; };\n'
           "#endif\n")
ENGINE_H = ('#include "store.h"\nstruct engine_part { struct store_part below; int checksummed; };\n'
            "static inline int engine_checksummed(const struct engine_part *e)\n"
            "{\n\treturn e->checksummed;\n}\n")
PIECE_UP = ('#include "store.h"\n#define CMS_UP "../engine/engine.h"\n#include CMS_UP\n'
            "int store_piece(const struct engine_part *e);\n"
            "int store_piece(const struct engine_part *e)\n{\n\treturn engine_checksummed(e);\n}\n")
PIECE_CLEAN = ('#include "store.h"\nint store_piece(const struct store_part *p);\n'
               "int store_piece(const struct store_part *p)\n{\n\treturn p->size;\n}\n")


def check(*args):
    res = subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


def text_case(rel, text):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        for layer in ("core", "vmm", "api"):
            (src / layer).mkdir(parents=True)
            (src / layer / f"{layer}.h").write_text("/* header */\n")
        (src / rel).write_text(text)
        return check("--includes", src)


def deps_case(change):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp).resolve()
        root = tmp / "tree"
        for rel in (LOG, PIECE, SIM, PRELOAD):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("/* source */\n")
        (root / "src/engine").mkdir()
        (root / "src/engine/engine.h").write_text("/* header */\n")
        (tmp / "outside.h").symlink_to(root / "src/engine/engine.h")
        dump = change(RECORDED) if change else RECORDED
        (tmp / "deps.txt").write_text(dump.replace("{root}", str(root)).replace("{tmp}", str(tmp)))
        return check("--deps", root, tmp / "deps.txt")


def compiled_tree(tmp, piece):
    """A store file and the headers of core, store and engine; (tree, its store include path)."""
    root = tmp / "tree"
    for rel, text in (("src/core/core.h", "/* core */\n"), ("src/store/store.h", STORE_H),
                      ("src/engine/engine.h", ENGINE_H), ("src/store/piece.c", piece)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root, [f"-I{root}/src/store", f"-I{root}/src/core"]  # the store's: its own and below


def compiled_case(piece, with_ninja):
    """Compiles the tree's store file (by cc -MD, or by ninja keeping the depfile in its log),
    then runs check 5 on the build folder. (exit status, output), or None without ninja."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp).resolve()
        root, includes = compiled_tree(tmp, piece)
        build = tmp / "build"
        build.mkdir()
        obj, source = build / "piece.c.o", root / "src/store/piece.c"
        flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", *includes]
        if with_ninja:
            if not shutil.which(NINJA):
                return None
            (build / "build.ninja").write_text(
                f"rule cc\n  command = {CC} {' '.join(flags)} -MD -MT $out -MF $out.d -o $out -c $in\n"
                f"  depfile = $out.d\n  deps = gcc\nbuild piece.c.o: cc {source}\n")
            cmd = [NINJA, "-C", str(build)]
        else:
            cmd = [CC, *flags, "-MD", "-MF", f"{obj}.d", "-o", str(obj), "-c", str(source)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            return 2, f"the throwaway tree did not build: {' '.join(cmd)}\n{res.stdout}{res.stderr}"
        return check("--deps", root, build)


def compiled_text_case(piece):
    """The text lint (check 4, all the layer check had before check 5) on the same tree."""
    with tempfile.TemporaryDirectory() as tmp:
        root, _ = compiled_tree(Path(tmp), piece)
        return check("--includes", root / "src")


def symbols_case(lib, sim):
    """Check 1's rule for the simulation (check_sim) on a library object and a simulation
    object compiled from lib and sim: (1 when it reports a use, its report)."""
    sys.path.insert(0, str(CHECK.parent))
    import check_layers
    with tempfile.TemporaryDirectory() as tmp:
        objects = []
        for name, text in (("lib", lib), ("sim", sim)):
            (Path(tmp) / f"{name}.c").write_text(text)
            obj = Path(tmp) / f"{name}.o"
            res = subprocess.run([CC, "-std=c11", "-c", "-o", str(obj), str(obj.with_suffix(".c"))],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                return 2, f"{name}.c did not compile:\n{res.stderr}"
            objects.append(obj)
        problems = check_layers.check_sim(objects[:1], objects[1:])
        return (1 if problems else 0), "\n".join(problems)


def report(name, result, want):
    """Prints the case's result; 1 when it is not the expected one (want: an exit status, or
    a text that the output of a failing check, exit 1, must hold)."""
    if result is None:
        print(f"skip {name}: no {NINJA}")
        return 0
    rc, out = result
    ok = rc == want if isinstance(want, int) else rc == 1 and want in out
    shown = want if isinstance(want, int) else f"1 naming '{want}'"
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc}, expected {shown}" + ("" if ok else f"\n{out}"))
    return not ok


def main():
    failed = 0
    for rel, text, want in TEXT_CASES:
        failed += report(f"text {rel}", text_case(rel, text), want)
    for name, change, want in DEPS_CASES:
        failed += report(f"recorded {name}", deps_case(change), want)
    # Before: the text lint passes a computed include of a higher layer's header. After: fails.
    failed += report("compiled computed up, text lint (passes: cannot see it)",
                     compiled_text_case(PIECE_UP), 0)
    failed += report("compiled clean, cc -MD depfiles", compiled_case(PIECE_CLEAN, False), 0)
    failed += report("compiled computed up, cc -MD depfiles", compiled_case(PIECE_UP, False), UP)
    failed += report("compiled clean, ninja -t deps", compiled_case(PIECE_CLEAN, True), 0)
    failed += report("compiled computed up, ninja -t deps", compiled_case(PIECE_UP, True), UP)
    lib = "int cms_version(void);\nint cms_version(void)\n{\n\treturn 1;\n}\n"
    sim = "int cuInit(unsigned f);\nint cuInit(unsigned f)\n{\n\treturn (int)f;\n}\n"
    sim_uses_lib = sim + "int cms_version(void);\nint sim_version(void);\nint sim_version(void)\n" \
        "{\n\treturn cms_version();\n}\n"
    lib_uses_sim = lib + "int cuInit(unsigned f);\nint lib_init(void);\nint lib_init(void)\n" \
        "{\n\treturn cuInit(0);\n}\n"
    failed += report("symbols clean", symbols_case(lib, sim), 0)
    failed += report("symbols sim uses the library", symbols_case(lib, sim_uses_lib),
                     "the simulation uses the library's cms_version")
    failed += report("symbols library uses the sim", symbols_case(lib_uses_sim, sim),
                     "the library uses the simulation's cuInit")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
