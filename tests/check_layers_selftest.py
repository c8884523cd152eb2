#!/usr/bin/env python3
"""Self-test of check_layers.py's include check (check 4): a layer file that reaches around
its include path to a higher layer's header must fail it, a clean tree must pass.

Each case builds a small source tree (src/core, src/vmm, src/api with their headers) in a
temporary folder, adds one file, and runs `check_layers.py --includes` on it.
Exit status: 0 when every case gives the expected result, 1 otherwise.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parent / "check_layers.py"
# (file, its text, expected exit status)
CASES = [
    ("core/clean.c", '#include <stdio.h>\n#include <sys/mman.h>\n#include "core.h"\n', 0),
    ("vmm/below.c", '#include "vmm.h"\n#include "core.h"\n#include "cumemsaver.h"\n', 0),
    ("core/up_relative.c", '#include "../api/api.h"\n', 1),
    ("core/up_folder.c", '#include "api/api.h"\n', 1),
    ("vmm/up_name.c", '#include "api.h"\n', 1),
    ("core/up_angle.c", "#include <../api/api.h>\n", 1),
    ("vmm/own_relative.h", '#  include "../vmm/vmm.h"\n', 1),
]


def run_case(rel, text):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        for layer in ("core", "vmm", "api"):
            (src / layer).mkdir(parents=True)
            (src / layer / f"{layer}.h").write_text("/* header */\n")
        (src / rel).write_text(text)
        res = subprocess.run([sys.executable, str(CHECK), "--includes", str(src)],
                             capture_output=True, text=True)
        return res.returncode, res.stdout + res.stderr


def main():
    failed = 0
    for rel, text, want in CASES:
        rc, out = run_case(rel, text)
        ok = rc == want
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {rel}: exit {rc}, expected {want}"
              + ("" if ok else f"\n{out}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
