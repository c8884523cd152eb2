# SPDX-License-Identifier: MIT
"""bindings/python/cumemsaver/_lib.py: the ctypes low-level module."""

import textwrap

from model import GENERATED

HEAD = '''# {generated}
# SPDX-License-Identifier: MIT
"""Low-level ctypes layer over {soname} (include/cumemsaver.h, ABI releases {releases}).

A 1:1 mirror of the header, generated from abi/cumemsaver.json: every constant, struct and
function, nothing idiomatic (that is api.py). load() declares every function with its argtypes
and restype. A function of a later release that the loaded library lacks is left out (see
available() and SINCE), so this module runs against an older 1.x library for the functions
that library has.
"""

import ctypes
import os
import shutil
import subprocess

SONAME = "{soname}"
RELEASES = {releases_tuple}
'''

TAIL = '''

def init_struct(cls):
    """A zeroed struct with struct_size set (what the CMS_*_INIT macros do for outputs)."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


def struct_size_at(cls, release):
    """sizeof(cls) as the header of an older release declared it (its fields up to release);
    0 for a struct that release did not have."""
    rank = RELEASES.index(release)
    end, align = 0, 1
    for name, ftype in cls._fields_:
        if RELEASES.index(FIELD_SINCE[cls.__name__][name]) <= rank:
            end = getattr(cls, name).offset + ctypes.sizeof(ftype)
            align = max(align, ctypes.alignment(ftype))
    return (end + align - 1) // align * align


def pkgconfig_libdir():
    """pkg-config's libdir of cumemsaver, or None (no pkg-config, or not installed)."""
    if not shutil.which("pkg-config"):
        return None
    try:
        out = subprocess.run(
            ["pkg-config", "--variable=libdir", "cumemsaver"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    return libdir if out.returncode == 0 and libdir else None


NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def bundled_library():
    """The libcumemsaver.so.1 that `pip install` built into this package (cumemsaver/_native/),
    or None (a source tree, or a package installed without it)."""
    path = os.path.join(NATIVE_DIR, SONAME)
    return path if os.path.exists(path) else None


def _candidates():
    bundled = bundled_library()
    if bundled:
        yield bundled
        return
    env = os.environ.get("CUMEMSAVER_LIBRARY")
    if env:
        yield env
        return
    libdir = pkgconfig_libdir()
    if libdir and os.path.exists(os.path.join(libdir, SONAME)):
        yield os.path.join(libdir, SONAME)
    yield SONAME


def load(path=None):
    """Loads the library (path, else the one bundled in the package by pip install, else
    CUMEMSAVER_LIBRARY, else pkg-config's libdir, else the system loader) and declares every
    function it has. Raises OSError if none loads (the message names what to set), or if a
    function of the first release is missing (not this library). Functions of later releases
    that an older library lacks are skipped: available(name, lib) is then False."""
    errors = []
    for cand in [path] if path else _candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError as e:
            errors.append(f"{cand}: {e}")
    else:
        raise OSError(
            f"cannot load {SONAME} (" + "; ".join(errors) + "). Install the package with "
            "`pip install ./bindings/python` (it builds and bundles the library), or set "
            f"CUMEMSAVER_LIBRARY=/path/to/{SONAME}, or install the library where pkg-config "
            "(cumemsaver.pc) or the system loader finds it"
        )
    missing = set()
    for name, (restype, argtypes) in FUNCTIONS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if SINCE[name] == RELEASES[0]:
                raise OSError(f"{lib._name}: no {name} (release {SINCE[name]})") from None
            missing.add(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    lib._cms_missing = frozenset(missing)
    return lib


def available(name, library=None):
    """Whether function name is declared here and present in the loaded library."""
    library = library or lib()
    return name in FUNCTIONS and name not in library._cms_missing


_lib = None


def lib():
    """The process-wide loaded library (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = load()
    return _lib
'''


def _wrap(text, indent=""):
    return [indent + "# " + line for line in textwrap.wrap(text, 96 - len(indent))]


def py_type(abi, t, pfx):
    """ctypes spelling of a CType; pfx is 'ctypes.' or '_c.'."""

    def base():
        if t.kind == "void":
            return "None"
        if t.kind == "scalar":
            return pfx + _scalar(abi, t.base)
        return t.base  # typedef, struct, callback: module-level names

    def ptr(depth):
        if depth == 0:
            return base()
        if depth == 1:
            if t.base == "char":
                return pfx + "c_char_p"
            if t.base == "void":
                return pfx + "c_void_p"
            if t.kind == "handle":
                return t.base + "_p"
        return f"P({ptr(depth - 1)})"

    s = ptr(t.depth)
    if t.count is not None:
        s = f"{s} * {t.count}"
    return s


def _scalar(abi, name):
    from model import SCALARS

    return SCALARS[name][3]


def _callback(abi, c):
    args = [py_type(abi, abi.ctype(p["type"]), "ctypes.") for p in c["params"]]
    ret = py_type(abi, abi.ctype(c["returns"]), "ctypes.")
    sig = ", ".join(f"{p['type']}{'' if p['type'].endswith('*') else ' '}{p['name']}"
                    for p in c["params"])
    return ["", "", f"# typedef {c['returns']} (*{c['name']})({sig});",
            f"{c['name']} = ctypes.CFUNCTYPE({', '.join([ret] + args)})"]


def _fn_line(name, ret, args):
    one = f'    "{name}": ({ret}, [{", ".join(args)}]),'
    if len(one) <= 99:
        return [one]
    return [f'    "{name}": (', f"        {ret},", f"        [{', '.join(args)}],", "    ),"]


def emit(abi):
    d = abi.data
    out = [HEAD.format(generated=GENERATED, soname=d["soname"], releases=", ".join(abi.releases),
                       releases_tuple="(" + ", ".join(f'"{r}"' for r in abi.releases) + ")")]
    for gname, g in abi.groups.items():
        consts = [c for c in abi.constants if c["group"] == gname]
        if not consts:
            continue
        out.append(f"# ---- {gname}")
        out.extend(_wrap(g.get("doc", "")))
        for c in consts:
            v = c["value"]
            lit = hex(v) if g.get("kind") == "flags" else str(v)
            out.extend(_wrap(c.get("doc", "")))
            out.append(f"{c['name']} = {lit}  # {c['type']}, since {c['since']}")
        out.append("")
    out.append("# ---- Status codes (cms_status): never renumbered or reused")
    for s in abi.statuses:
        out.append(f"{s['name']} = {s['value']}  # since {s['since']}")
    out.append("STATUS_NAMES = {")
    for s in abi.statuses:
        out.append(f'    {s["value"]}: "{s["name"]}",')
    out.append("}")
    out.append("")
    out.append("# ---- Types")
    for t in d["typedefs"]:
        out.append(f"{t['name']} = ctypes.{_scalar(abi, t['type'])}")
    out.append("# Opaque handles: carried as void pointers.")
    for h in d["handles"]:
        out.append(f"{h['name']}_p = ctypes.c_void_p  # {h['name']} *")
    out.append("P = ctypes.POINTER")
    for kind, e in abi.ordered_types():
        if kind == "callback":
            out.extend(_callback(abi, e))
            continue
        s = e
        out.append("")
        out.append("")
        out.append(f"class {s['name']}(ctypes.Structure):")
        out.append(f'    """{s.get("doc", s["name"])} (since {s["since"]})"""')
        out.append("")
        out.append("    _fields_ = [")
        for f in s["fields"]:
            out.append(f'        ("{f["name"]}", {py_type(abi, abi.ctype(f["type"]), "ctypes.")}),')
        out.append("    ]")
    out.append("")
    out.append("")
    out.append("# Sized structs (first field size_t struct_size): options and results.")
    out.append("STRUCTS = (")
    out.extend(f"    {s['name']}," for s in d["structs"] if s["kind"] != "plain")
    out.append(")")
    out.append("# Structs without struct_size, embedded in the sized ones.")
    out.append("PLAIN_STRUCTS = (")
    out.extend(f"    {s['name']}," for s in d["structs"] if s["kind"] == "plain")
    out.append(")")
    out.append("# The release each struct field appeared in.")
    out.append("FIELD_SINCE = {")
    for s in d["structs"]:
        out.append(f'    "{s["name"]}": {{')
        out.extend(f'        "{f["name"]}": "{f["since"]}",' for f in s["fields"])
        out.append("    },")
    out.append("}")
    out.append("")
    out.append("_c = ctypes")
    out.append("# name: (restype, [argtypes])")
    out.append("FUNCTIONS = {")
    for f in abi.functions:
        ret = py_type(abi, abi.ctype(f["returns"]["type"]), "_c.")
        args = [py_type(abi, abi.ctype(p["type"]), "_c.") for p in f["params"]]
        out.extend(_fn_line(f["name"], ret, args))
    out.append("}")
    out.append("# The release each function appeared in.")
    out.append("SINCE = {")
    out.extend(f'    "{f["name"]}": "{f["since"]}",' for f in abi.functions)
    out.append("}")
    out.append("del P, _c")
    return "\n".join(out) + "\n" + TAIL
