# SPDX-License-Identifier: MIT
"""bindings/rust/cumemsaver-sys/src/ffi.rs: raw declarations for the -sys crate (rustc 1.63)."""

import textwrap

from model import GENERATED, SCALARS

RAW = {"c_char", "c_int", "c_uint", "c_void"}
KEYWORDS = {"as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn",
            "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
            "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
            "unsafe", "use", "where", "while", "async", "await", "dyn", "abstract", "become",
            "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
            "yield", "try"}
WIDTH = 100


NOT_RAW = {"crate", "self", "Self", "super"}  # keywords that cannot be raw identifiers


def ident(name):
    """The C name itself; a Rust keyword as a raw identifier (r#fn), so names stay exact."""
    if name not in KEYWORDS:
        return name
    return name + "_" if name in NOT_RAW else "r#" + name


class Rust:
    def __init__(self, abi):
        self.abi = abi
        self.used = set()

    def ty(self, t):
        if t.kind == "void":
            base = "c_void"
        elif t.kind == "scalar":
            base = SCALARS[t.base][4]
        else:
            base = t.base
        if base in RAW:
            self.used.add(base)
        s = base
        for i in range(t.depth):
            s = ("*const " if t.const and i == 0 else "*mut ") + s
        if t.count is not None:
            s = f"[{s}; {t.count}]"
        return s

    def ret(self, text):
        t = self.abi.ctype(text)
        return "" if (t.kind == "void" and not t.depth) else " -> " + self.ty(t)

    def params(self, params):
        return [f"{ident(p['name'])}: {self.ty(self.abi.ctype(p['type']))}" for p in params]


def doc(text, indent=""):
    if not text:
        return []
    return [indent + "/// " + line for line in textwrap.wrap(text, 96 - len(indent))]


def fn_decl(name, params, ret, indent):
    """An extern fn declaration laid out as rustfmt does."""
    one = f"{indent}pub fn {name}({', '.join(params)}){ret};"
    if len(one) <= WIDTH:
        return [one]
    return ([f"{indent}pub fn {name}("] + [f"{indent}    {p}," for p in params]
            + [f"{indent}){ret};"])


def emit(abi):
    r = Rust(abi)
    d = abi.data
    body = []
    for t in d["typedefs"]:
        body += doc(t.get("doc", "")) + [f"pub type {t['name']} = {SCALARS[t['type']][4]};", ""]
    for gname, g in abi.groups.items():
        consts = [c for c in abi.constants if c["group"] == gname]
        if not consts:
            continue
        body.append(f"// ---- {gname}")
        for c in consts:
            v = c["value"]
            lit = f"0x{v:x}" if g.get("kind") == "flags" else str(v)
            body += doc(f"{c.get('doc', '')} (since {c['since']})")
            body.append(f"pub const {c['name']}: {r.ty(abi.ctype(c['type']))} = {lit};")
        body.append("")
    body.append("// ---- Status codes: never renumbered or reused")
    for s in abi.statuses:
        body += doc(f"{s.get('doc', '')} (since {s['since']})")
        body.append(f"pub const {s['name']}: {abi.status_type} = {s['value']};")
    body.append("")
    for h in d["handles"]:
        body += doc(f"{h.get('doc', '')} Opaque (since {h['since']}).")
        body += ["#[repr(C)]", f"pub struct {h['name']} {{", "    _opaque: [u8; 0],", "}", ""]
    for c in d["callbacks"]:
        body += doc(f"{c.get('doc', '')} (since {c['since']})")
        sig = f"Option<unsafe extern \"C\" fn({', '.join(r.params(c['params']))}){r.ret(c['returns'])}>;"
        one = f"pub type {c['name']} = {sig}"
        if len(one) <= WIDTH:
            body.append(one)
        else:
            body += [f"pub type {c['name']} =", "    " + sig]
        body.append("")
    for s in d["structs"]:
        body += doc(f"{s.get('doc', '')} (since {s['since']})")
        body += ["#[repr(C)]", "#[derive(Debug, Clone, Copy)]", f"pub struct {s['name']} {{"]
        for f in s["fields"]:
            body += doc(f"{f.get('doc', '')} (since {f['since']})", "    ")
            body.append(f"    pub {ident(f['name'])}: {r.ty(abi.ctype(f['type']))},")
        body += ["}", ""]
        sized = s["kind"] != "plain"
        body += [f"impl Default for {s['name']} {{",
                 "    /// All zero" + (", with struct_size set to this struct's size." if sized
                                      else "."),
                 "    fn default() -> Self {",
                 "        // SAFETY: every field is an integer, a raw pointer, an array of those or an",
                 "        // Option of a function pointer, for which all-zero bytes are valid."]
        if sized:
            body += ["        let mut s: Self = unsafe { std::mem::zeroed() };",
                     "        s.struct_size = std::mem::size_of::<Self>();", "        s"]
        else:
            body.append("        unsafe { std::mem::zeroed() }")
        body += ["    }", "}", ""]
    body.append('extern "C" {')
    for i, f in enumerate(abi.functions):
        if i:
            body.append("")
        body += doc(f"{f['doc']} Thread safety: {f['thread_safety']} (since {f['since']})", "    ")
        body += fn_decl(f["name"], r.params(f["params"]), r.ret(f["returns"]["type"]), "    ")
    body.append("}")
    head = [f"// {GENERATED}",
            f"//! Raw declarations of include/cumemsaver.h (ABI releases {', '.join(abi.releases)}).",
            "#![allow(non_camel_case_types)]", ""]
    used = sorted(r.used)
    if used:
        head += [f"use std::os::raw::{{{', '.join(used)}}};" if len(used) > 1
                 else f"use std::os::raw::{used[0]};", ""]
    return "\n".join(head + body) + "\n"
