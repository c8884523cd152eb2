#!/usr/bin/env python3
"""Check the signatures of src/driver/cuda_api.h's CMS_CUDA_FUNCTIONS against the toolkit.

cuda_api_probe checks the types' layouts and the constants; this checks every function the
library resolves: cuGetProcAddress(name, CMS_CUDA_API_VERSION) returns the newest variant
of name whose version is at most CMS_CUDA_API_VERSION, so its signature must be that of
cudaTypedefs.h's PFN_<name>_v<N> with the largest such N (per-thread _ptsz/_ptds variants
left out). Both sides are compared after resolving plain typedefs (CUdevice -> int,
CUdeviceptr_v2 -> unsigned long long, ...), reading cuda.h's enums as int (the ABI of an
enum parameter) and dropping parameter names and versioned suffixes of struct names.

Usage: check_cuda_sigs.py SOURCE_DIR CUDA_INCLUDE_DIR
Exit status: 0 all agree, 1 a signature differs or a function has no typedef, 77 no
cudaTypedefs.h (skipped).
"""
import os
import re
import sys

QUALIFIERS = {"const", "unsigned", "signed", "long", "short", "int", "char", "void", "struct"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def simple_typedefs(text):
    """typedef <words> NAME; with no struct body, enum or function pointer."""
    out = {}
    for m in re.finditer(r"\btypedef\s+([A-Za-z_][\w ]*?)\s+(\w+)\s*;", text):
        src, name = m.group(1).strip(), m.group(2)
        if src.startswith(("struct", "enum", "union")):
            continue
        out.setdefault(name, src)
    return out


def enum_names(text):
    names = set(re.findall(r"\btypedef\s+enum\s+\w*\s*\{[^}]*\}\s*(\w+)\s*;", text, re.S))
    names |= set(re.findall(r"\btypedef\s+enum\s+\w+\s+(\w+)\s*;", text))
    return names


def resolve(word, typedefs, enums, depth=0):
    if word in enums:
        return "int"
    if word in typedefs and depth < 10:
        return " ".join(resolve(w, typedefs, enums, depth + 1) for w in typedefs[word].split())
    return re.sub(r"_v\d+$", "", word)


def normalize(params, typedefs, enums):
    params = " ".join(params.split())
    if params in ("", "void"):
        return "void"
    out = []
    for p in params.split(","):
        toks = re.findall(r"\w+|\*", p)
        words = [i for i, t in enumerate(toks) if t != "*"]
        if len(words) >= 2 and toks[words[-1]] not in QUALIFIERS:
            del toks[words[-1]]  # the parameter's name
        out.append(" ".join(resolve(t, typedefs, enums) if t != "*" else t for t in toks))
    return ", ".join(out)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    src, inc = sys.argv[1], sys.argv[2]
    tpath = os.path.join(inc, "cudaTypedefs.h")
    if not os.path.exists(tpath):
        print(f"check_cuda_sigs: no {tpath}: skipped")
        return 77
    ours = strip_comments(open(os.path.join(src, "src", "driver", "cuda_api.h")).read())
    cuda = strip_comments(open(os.path.join(inc, "cuda.h")).read())
    pfns = strip_comments(open(tpath).read())
    version = int(re.search(r"#define CMS_CUDA_API_VERSION (\d+)", ours).group(1))
    body = re.search(r"#define CMS_CUDA_FUNCTIONS\(X\)(.*?)\n\n", ours, re.S).group(1)
    body = body.replace("\\\n", " ")
    funcs = re.findall(r"X\((\w+),\s*(\w+),\s*\(([^()]*)\)\)", body)
    our_td, our_enums = simple_typedefs(ours), set()
    cu_td, cu_enums = simple_typedefs(cuda), enum_names(cuda)
    variants = {}
    for m in re.finditer(r"typedef\s+(\w+)\s*\(\s*CUDAAPI\s*\*\s*PFN_(\w+?)_v(\d+)\s*\)\s*\(([^;]*)\)\s*;",
                         pfns):
        ret, name, ver, params = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        variants.setdefault(name, []).append((ver, ret, params))
    bad = 0
    for name, ret, params in funcs:
        cands = [v for v in variants.get(name, []) if v[0] <= version]
        if not cands:
            print(f"check_cuda_sigs: {name}: no PFN_{name}_v<N> with N <= {version} in cudaTypedefs.h")
            bad = 1
            continue
        ver, tret, tparams = max(cands)
        a = normalize(ret, our_td, our_enums) + " (" + normalize(params, our_td, our_enums) + ")"
        b = normalize(tret, cu_td, cu_enums) + " (" + normalize(tparams, cu_td, cu_enums) + ")"
        if a != b:
            print(f"check_cuda_sigs: {name}: ours {a}\n    PFN_{name}_v{ver} {b}")
            bad = 1
    if not bad:
        print(f"check_cuda_sigs: {len(funcs)} functions agree with cudaTypedefs.h at API version {version}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
