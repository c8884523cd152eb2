# SPDX-License-Identifier: MIT
"""The layout probe of the Rust -sys crate, in two files under bindings/rust/cumemsaver-sys/tests/generated/:

- layout.rs: what the Rust declarations (ffi.rs) say: size and alignment of every struct, offset
  and size of every field, the value of every constant and status, and the address of every
  function (so that each symbol must link);
- probe.c: a C program printing the same keys, as the installed header says.

tests/layout.rs compiles probe.c against the header found with pkg-config, runs it and compares
the two. Both come from the description, so they cover every entry of it (build.rs used to
re-parse ffi.rs to find them).
"""

from emit_rust import ident
from model import GENERATED


def _c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def entries(abi):
    """(key, Rust expression, C expression) for every figure compared."""
    out = []
    for s in abi.data["structs"]:
        n = s["name"]
        out.append((f"sizeof {n}", f"size_of::<{n}>()", f"sizeof({n})"))
        out.append((f"alignof {n}", f"align_of::<{n}>()", f"_Alignof({n})"))
        for f in s["fields"]:
            c, r = f["name"], ident(f["name"])
            out.append((f"offsetof {n}.{c}", f"field_offset!({n}, {r})", f"offsetof({n}, {c})"))
            out.append((f"sizeof {n}.{c}", f"field_size!({n}, {r})",
                        f"sizeof(((const {n} *)0)->{c})"))
    for c in list(abi.constants) + list(abi.statuses):
        out.append((f"const {c['name']}", c["name"], c["name"]))
    return out


def emit_rs(abi):
    e = entries(abi)
    o = [f"// {GENERATED}",
         "// The Rust side of the layout probe (see tests/layout.rs; the C side is probe.c).",
         "",
         "/// Every figure of the Rust declarations, keyed as probe.c prints them.",
         "#[rustfmt::skip]",
         "pub fn rust_values() -> Vec<(&'static str, i128)> {",
         "    use ::core::mem::{align_of, size_of};",
         "    vec!["]
    o += [f"        ({_c_str(k)}, {r} as i128)," for k, r, _ in e]
    o += ["    ]", "}", "",
          "/// Every function of the ABI with its address (forces each symbol to link).",
          "#[rustfmt::skip]",
          "pub fn function_addresses() -> Vec<(&'static str, usize)> {",
          "    vec!["]
    o += [f"        ({_c_str(f['name'])}, {f['name']} as *const () as usize),"
          for f in abi.functions]
    o += ["    ]", "}", "",
          f"pub const STRUCT_COUNT: usize = {len(abi.data['structs'])};",
          f"pub const CONST_COUNT: usize = {len(abi.constants) + len(abi.statuses)};",
          f"pub const FUNCTION_COUNT: usize = {len(abi.functions)};"]
    return "\n".join(o) + "\n"


def emit_c(abi):
    o = [f"/* {GENERATED} */",
         "/* SPDX-License-Identifier: MIT */",
         "/* The C side of the Rust layout probe: one \"key value\" line per figure. */",
         "/* clang-format off */",
         "#include <stddef.h>",
         "#include <stdio.h>",
         "",
         "#include <cumemsaver.h>",
         "",
         "#define P(key, v) printf(\"%s %lld\\n\", key, (long long)(v))",
         "",
         "int main(void)",
         "{"]
    o += [f"\tP({_c_str(k)}, {c});" for k, _, c in entries(abi)]
    o += ["\treturn 0;", "}"]
    return "\n".join(o) + "\n"
