# SPDX-License-Identifier: MIT
"""abi/cumemsaver.map: GNU ld version script, one node per release, each inheriting the previous."""

from model import GENERATED


def emit(abi):
    out = [f"/* {GENERATED} */",
           "/* GNU ld version script of " + abi.data["soname"]
           + ": one node per release, each inheriting the previous. */"]
    prev = None
    for i, rel in enumerate(abi.releases):
        names = sorted(f["name"] for f in abi.functions_in_node(rel))
        out.append(abi.node(rel) + " {")
        if names:
            out.append("\tglobal:")
            out.extend(f"\t\t{n};" for n in names)
        if i == 0:
            out.append("\tlocal:")
            out.append("\t\t*;")
        out.append("}" + (f" {prev};" if prev else ";"))
        if i + 1 < len(abi.releases):
            out.append("")
        prev = abi.node(rel)
    return "\n".join(out) + "\n"
