# SPDX-License-Identifier: MIT
"""tests/abi/header_probe.c: compile-time proof that include/cumemsaver.h matches the description.

Sizes and offsets come from the description's types with LP64 rules; field and prototype types
are checked with _Generic (exact type compatibility), constant values, sizes and signedness with
_Static_assert. The file is between clang-format off/on markers: generated, not hand-formatted.
"""

from model import GENERATED, SCALARS


def _sig(abi, ret, params):
    args = ", ".join(p["type"] for p in params) or "void"
    return ret, args


def _fnptr(ret, args, name=""):
    sep = "" if ret.endswith("*") else " "
    return f"{ret}{sep}(*{name})({args})"


def emit(abi):
    d = abi.data
    o = [f"/* {GENERATED} */",
         "/* SPDX-License-Identifier: MIT */",
         "/* header_probe.c - include/cumemsaver.h against abi/cumemsaver.json (LP64). */",
         "/* clang-format off */",
         "#include <stddef.h>",
         "#include <stdint.h>",
         "#include <stdio.h>",
         "#include <sys/types.h>",
         "",
         "#include <cumemsaver.h>",
         "",
         "#define CMS_PROBE_UNSIGNED(x) ((x) - (x) - 1 > 0)",
         "#define CMS_PROBE_TYPE(expr, type) _Generic((expr), type: 1, default: 0)",
         "",
         "_Static_assert(sizeof(void *) == 8 && sizeof(size_t) == 8, \"LP64 only\");",
         "",
         "/* ---- typedefs */"]
    for t in d["typedefs"]:
        o.append(f"_Static_assert(CMS_PROBE_TYPE(({t['name']})0, {t['type']}), "
                 f"\"{t['name']} is {t['type']}\");")
    o += ["", "/* ---- statuses */"]
    for s in abi.statuses:
        o.append(f"_Static_assert({s['name']} == {s['value']}, \"{s['name']} == {s['value']}\");")
        o.append(f"_Static_assert(sizeof({s['name']}) == sizeof({abi.status_type}), "
                 f"\"{s['name']} has the size of {abi.status_type}\");")
    o += ["", "/* ---- constants: value, size and signedness of the C type recorded */"]
    for c in abi.constants:
        t = abi.ctype(c["type"])
        signed = SCALARS[t.scalar()][2]
        v = c["value"]
        lit = f"{v}" if signed else f"{v}u"
        o.append(f"_Static_assert({c['name']} == {lit}, \"{c['name']} == {v}\");")
        o.append(f"_Static_assert(sizeof({c['name']}) == sizeof({c['type']}), "
                 f"\"{c['name']} has the size of {c['type']}\");")
        o.append(f"_Static_assert(CMS_PROBE_UNSIGNED({c['name']}) == {int(not signed)}, "
                 f"\"{c['name']} is {'signed' if signed else 'unsigned'}\");")
    o += ["", "/* ---- callbacks */"]
    for c in d["callbacks"]:
        ret, args = _sig(abi, c["returns"], c["params"])
        o.append(f"_Static_assert(CMS_PROBE_TYPE(({c['name']})0, {_fnptr(ret, args)}), "
                 f"\"{c['name']} prototype\");")
    o += ["", "/* ---- structs: size, and each field's offset and type */"]
    for s in d["structs"]:
        n = s["name"]
        o.append(f"_Static_assert(sizeof({n}) == {s['_size']}, \"sizeof({n}) == {s['_size']}\");")
        for f in s["fields"]:
            fn = f["name"]
            t = abi.ctype(f["type"])
            o.append(f"_Static_assert(offsetof({n}, {fn}) == {f['_offset']}, "
                     f"\"offsetof({n}, {fn}) == {f['_offset']}\");")
            o.append(f"_Static_assert(CMS_PROBE_TYPE(&(({n} *)0)->{fn}, {t.pointer_to()}), "
                     f"\"{n}.{fn} is {f['type']}\");")
    o += ["", "/* ---- functions: exact prototypes */"]
    for f in abi.functions:
        ret, args = _sig(abi, f["returns"]["type"], f["params"])
        o.append(f"_Static_assert(CMS_PROBE_TYPE(&{f['name']}, {_fnptr(ret, args)}), "
                 f"\"{f['name']} prototype\");")
    o += ["", "int main(void)", "{",
          "\t/* Each function by its recorded prototype: also proves the library links them. */"]
    for f in abi.functions:
        ret, args = _sig(abi, f["returns"]["type"], f["params"])
        o.append(f"\t{_fnptr(ret, args, 'p_' + f['name'])} = {f['name']};")
    for f in abi.functions:
        o.append(f"\t(void)p_{f['name']};")
    counts = (len(d["structs"]), len(abi.constants) + len(abi.statuses), len(abi.functions))
    o.append(f"\tprintf(\"header_probe: %d structs, %d constants and statuses, %d functions "
             f"match abi/cumemsaver.json\\n\", {counts[0]}, {counts[1]}, {counts[2]});")
    o += ["\treturn 0;", "}", "/* clang-format on */"]
    return "\n".join(o) + "\n"
