# SPDX-License-Identifier: MIT
"""bindings/go/cumemsaver/zabi.go: Go constants and thin cgo wrappers (Go 1.19, gofmt-clean)."""

import textwrap

from model import GENERATED, GO_CONST_TYPES, SCALARS

KEYWORDS = {"break", "case", "chan", "const", "continue", "default", "defer", "else",
            "fallthrough", "for", "func", "go", "goto", "if", "import", "interface", "map",
            "package", "range", "return", "select", "struct", "switch", "type", "var"}
INITIALISMS = {"OK", "ID", "API", "CPU", "GPU", "NUL"}


def go_name(c):
    """CMS_ERR_INVALID_ARGUMENT -> ErrInvalidArgument, CMS_OK -> OK (or the entry's go_name)."""
    if "go_name" in c:
        return c["go_name"]
    words = c["name"].split("_")[1:]
    return "".join(w if w in INITIALISMS else w.capitalize() for w in words)


def go_type(gname, grp):
    """The Go type of a constant group: an enum group's CamelCase name (policy -> Policy,
    log_level -> LogLevel), a flags group's plural (region_flag -> RegionFlags, handle_type ->
    HandleTypes); None for value groups (their constants keep the C type's Go type)."""
    kind = grp.get("kind")
    if kind not in ("enum", "flags"):
        return None
    name = "".join(w.capitalize() for w in gname.split("_"))
    return name + "s" if kind == "flags" else name


def short_names(consts):
    """What String prints for each constant: its C name without the words the group's names
    share (CMS_POLICY_HOST -> host); a group of one drops CMS_ and the next word."""
    words = [c["name"].split("_") for c in consts]
    n = 2
    if len(words) > 1:
        n = 0
        while all(len(w) > n + 1 and w[n] == words[0][n] for w in words):
            n += 1
    return ["_".join(w[n:]).lower() for w in words]


def string_method(tname, base, kind, consts):
    """A String method: an enum's short name or Type(n); flags as a|b, unknown bits in hex."""
    names = short_names(consts)
    o = []
    if kind == "enum":
        o += [f"// String is the value's name ({', '.join(repr(n)[1:-1] for n in names[:2])}, ...), "
              f"or {tname}(n) for a value this package does not know.",
              f"func (v {tname}) String() string {{", "\tswitch v {"]
        for c, n in zip(consts, names):
            o += [f"\tcase {go_name(c)}:", f'\t\treturn "{n}"']
        o += ["\t}", f'\treturn fmt.Sprintf("{tname}(%d)", {base}(v))', "}", ""]
    else:
        o += [f"// String lists the flags set, joined with |, unknown bits in hex; \"0\" for none.",
              f"func (v {tname}) String() string {{", "\tif v == 0 {", '\t\treturn "0"', "\t}",
              "\tvar s []string"]
        for c, n in zip(consts, names):
            o += [f"\tif v&{go_name(c)} != 0 {{", f'\t\ts = append(s, "{n}")',
                  f"\t\tv &^= {go_name(c)}", "\t}"]
        o += ["\tif v != 0 {", f'\t\ts = append(s, fmt.Sprintf("0x%x", {base}(v)))', "\t}",
              '\treturn strings.Join(s, "|")', "}", ""]
    return o


def ident(name):
    return name + "_" if name in KEYWORDS else name


def comment(text, indent=""):
    return [indent + "// " + line for line in textwrap.wrap(text, 96 - len(indent))]


class Go:
    def __init__(self, abi):
        self.abi = abi
        self.unsafe = False

    def ty(self, t):
        if t.kind == "void" and t.depth == 1:
            self.unsafe = True
            return "unsafe.Pointer"
        if t.kind == "void":
            return "*" * (t.depth - 1) + "unsafe.Pointer"
        base = SCALARS[t.base][5] if t.kind == "scalar" else "C." + t.base
        if t.count is not None:
            return f"[{t.count}]{base}"
        return "*" * t.depth + base

    def const_type(self, text):
        t = self.abi.ctype(text)
        if t.base == self.abi.status_type:
            return "Status"
        return GO_CONST_TYPES[t.scalar()]


def emit(abi):
    g = Go(abi)
    body = []
    st = abi.status_type
    body += [f"// Status is a {st}: OK or a negative Err* code; never renumbered or reused.",
             f"type Status {GO_CONST_TYPES[abi.resolve(st)]}", ""]
    body += ["// Status codes.", "const ("]
    for s in abi.statuses:
        body += comment(f"{go_name(s)} is {s['name']} (since {s['since']}): {s.get('doc', '')}",
                        "\t")
        body.append(f"\t{go_name(s)} Status = {s['value']}")
    body += [")", ""]
    methods = []
    for gname, grp in abi.groups.items():
        consts = [c for c in abi.constants if c["group"] == gname]
        if not consts:
            continue
        tname = go_type(gname, grp)
        if tname:
            base = g.const_type(consts[0]["type"])
            body += comment(f"{tname} is a value of group {gname} (a C {consts[0]['type']}): "
                            f"{grp.get('doc', '')}")
            body += [f"type {tname} {base}", ""]
            methods += string_method(tname, base, grp["kind"], consts)
        else:
            body += comment(f"Constants of group {gname}: {grp.get('doc', '')}")
        body.append("const (")
        for c in consts:
            v = c["value"]
            lit = f"0x{v:x}" if grp.get("kind") == "flags" else str(v)
            body += comment(f"{go_name(c)} is {c['name']} (since {c['since']}): "
                            f"{c.get('doc', '')}", "\t")
            body.append(f"\t{go_name(c)} {tname or g.const_type(c['type'])} = {lit}")
        body += [")", ""]
    body += methods
    for f in abi.functions:
        params = [f"{ident(p['name'])} {g.ty(abi.ctype(p['type']))}" for p in f["params"]]
        rt = abi.ctype(f["returns"]["type"])
        ret = "" if (rt.kind == "void" and not rt.depth) else " " + g.ty(rt)
        args = ", ".join(ident(p["name"]) for p in f["params"])
        body += comment(f"c_{f['name']} calls {f['name']} (since {f['since']}).")
        body.append(f"func c_{f['name']}({', '.join(params)}){ret} {{")
        body.append(f"\t{'return ' if ret else ''}C.{f['name']}({args})")
        body += ["}", ""]
    head = [f"// Code {GENERATED.replace('do not edit', 'DO NOT EDIT.')}", "",
            "package cumemsaver", "",
            "/*", "#cgo pkg-config: cumemsaver", "#include <cumemsaver.h>", "#include <stdlib.h>",
            "*/", 'import "C"', ""]
    imports = ["fmt", "strings"] + (["unsafe"] if g.unsafe else [])
    head += ["import ("] + [f'\t"{i}"' for i in imports] + [")", ""]
    while body and body[-1] == "":
        body.pop()
    return "\n".join(head + body) + "\n"
