#!/usr/bin/env python3
"""Struct layouts of a release baseline are preserved by a newer library.

Usage: abi_layout.py BASELINE.abi NEW.abi   (both written by abidw, see tests/abi/abidiff.sh)

For every struct the baseline defines (the public ones: the baseline is written with
--drop-private-types), the new corpus must define a struct of the same name whose
members of the baseline are all there, in the same order, at the same bit offsets,
with the same types (compared structurally: typedef names, qualifiers, pointers,
arrays and builtin sizes). Members may be added only to sized structs (first member
`size_t struct_size`) and only at or past the baseline's size; any other struct must
keep its size. This is the check that abi/abidiff.suppr's tail-growth suppression
cannot do by itself (libabigail accepts a retyped old member there).
A struct that grew and has an init function (`<struct>_init`, which writes a whole struct
into the caller's memory) must have that function re-versioned: the baseline's version
still exported for old callers (writing the old size) and a new default version, else an
old binary's buffer overflows (docs/abi.md, "Growing a struct that has an init function").
Standard library only.
"""
import sys
import xml.etree.ElementTree as ET

TYPE_TAGS = {
    "type-decl",
    "typedef-decl",
    "pointer-type-def",
    "qualified-type-def",
    "array-type-def",
    "function-type",
    "class-decl",
    "union-decl",
    "enum-decl",
    "reference-type-def",
}


class Corpus:
    def __init__(self, path):
        self.types = {}
        self.structs = {}
        self.symbols = {}  # name -> {version: is_default}
        for el in ET.parse(path).getroot().iter():
            if el.tag == "elf-symbol" and el.get("is-defined") == "yes":
                self.symbols.setdefault(el.get("name"), {})[el.get("version", "")] = (
                    el.get("is-default-version") == "yes")
            if el.tag not in TYPE_TAGS or "id" not in el.attrib:
                continue
            self.types.setdefault(el.get("id"), el)
            if el.tag == "class-decl" and el.get("is-declaration-only") != "yes":
                self.structs.setdefault(el.get("name"), el)

    def spell(self, type_id, depth=0):
        """A structural spelling of a type that does not depend on type ids."""
        el = self.types.get(type_id)
        if el is None or depth > 32:
            return "?%s" % type_id
        t = el.tag
        if t == "type-decl":
            return "%s:%s" % (el.get("name"), el.get("size-in-bits", "0"))
        if t == "typedef-decl":
            return "%s=%s" % (el.get("name"), self.spell(el.get("type-id"), depth + 1))
        if t == "pointer-type-def":
            return "ptr(%s)" % self.spell(el.get("type-id"), depth + 1)
        if t == "reference-type-def":
            return "ref(%s)" % self.spell(el.get("type-id"), depth + 1)
        if t == "qualified-type-def":
            quals = [q for q in ("const", "volatile", "restrict") if el.get(q) == "yes"]
            return "%s(%s)" % ("+".join(quals), self.spell(el.get("type-id"), depth + 1))
        if t == "array-type-def":
            dims = [s.get("length") for s in el.findall("subrange")]
            return "%s[%s]" % (self.spell(el.get("element-type-id"), depth + 1), ",".join(dims))
        if t == "function-type":
            ret = el.find("return")
            params = [self.spell(p.get("type-id"), depth + 1) for p in el.findall("parameter")]
            r = self.spell(ret.get("type-id"), depth + 1) if ret is not None else "void"
            return "fn(%s)->%s" % (",".join(params), r)
        kind = {"class-decl": "struct", "union-decl": "union", "enum-decl": "enum"}[t]
        return "%s %s" % (kind, el.get("name"))  # by name: its own layout is checked on its own

    def members(self, struct):
        out = []
        for dm in struct.findall("data-member"):
            var = dm.find("var-decl")
            out.append(
                (
                    var.get("name"),
                    int(dm.get("layout-offset-in-bits", "0")),
                    self.spell(var.get("type-id")),
                )
            )
        return out


def check(old, new):
    errors = []
    for name, s_old in sorted(old.structs.items()):
        s_new = new.structs.get(name)
        if s_new is None:
            errors.append("struct %s: missing from the new library" % name)
            continue
        m_old, m_new = old.members(s_old), new.members(s_new)
        size_old, size_new = int(s_old.get("size-in-bits")), int(s_new.get("size-in-bits"))
        for i, (mname, off, ty) in enumerate(m_old):
            if i >= len(m_new) or m_new[i] != (mname, off, ty):
                got = m_new[i] if i < len(m_new) else "nothing"
                errors.append(
                    "struct %s: member %d was %s, is %s" % (name, i, (mname, off, ty), got)
                )
        sized = bool(m_old) and m_old[0][0] == "struct_size" and m_old[0][2].startswith("size_t=")
        added = m_new[len(m_old):]
        if size_new < size_old:
            errors.append("struct %s: shrank from %d to %d bits" % (name, size_old, size_new))
        elif not sized and (added or size_new != size_old):
            errors.append(
                "struct %s: not a sized struct, but changed size %d -> %d bits or gained %s"
                % (name, size_old, size_new, [a[0] for a in added])
            )
        for mname, off, _ in added:
            if off < size_old:
                errors.append(
                    "struct %s: new member %s at bit %d, inside the old size (%d bits)"
                    % (name, mname, off, size_old)
                )
        init = name + "_init"
        old_init = [v for v, default in old.symbols.get(init, {}).items() if default]
        if size_new > size_old and old_init:
            new_init = new.symbols.get(init, {})
            default = [v for v, d in new_init.items() if d]
            if old_init[0] not in new_init or default == old_init:
                errors.append(
                    "struct %s grew (%d -> %d bits) but %s is still %s@@%s only: a caller "
                    "built against the old header has room for %d bytes and gets %d. Keep "
                    "%s@%s writing the old size and add %s@@<new node> (docs/abi.md)"
                    % (name, size_old, size_new, init, init, old_init[0], size_old // 8,
                       size_new // 8, init, old_init[0], init))
    return errors


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    old, new = Corpus(argv[1]), Corpus(argv[2])
    if not old.structs:
        print("abi_layout: no struct in %s" % argv[1], file=sys.stderr)
        return 2
    errors = check(old, new)
    for e in errors:
        print("abi_layout: " + e)
    if errors:
        return 1
    grown = [n for n in old.structs if n in new.structs and
             new.structs[n].get("size-in-bits") != old.structs[n].get("size-in-bits")]
    print("abi_layout: %d structs of the baseline preserved (%d grew at the tail: %s)"
          % (len(old.structs), len(grown), ", ".join(sorted(grown)) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
