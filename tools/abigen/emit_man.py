# SPDX-License-Identifier: MIT
"""man/man3/<function>.3: one manual page per public function.

Two inputs, each the single source of what it gives:
  - abi/cumemsaver.json: the synopsis (return and parameter types), the release a function
    appeared in and its symbol versions, the status conventions (driver statuses, ...);
  - the function's contract, abi/contracts/<function>.txt (abi/README.md "Contracts"): the
    summary line, description, parameters, Ownership, Threads, CUDA and Returns; and the
    flags' texts, abi/contracts/flags/<group>.txt (the FLAGS sections).
The header's prototypes are those of the description (tests/abi/header_probe.c proves it), so
the page's synopsis is the header's. The header's comment of a function is its short contract
and must name the page (check_header_pointers: "cms_pause(3)"). parse_contracts() fails
(HeaderError) on a contract that does not follow the format, check_function() on one that
contradicts the description (a parameter that does not exist, a wrong "since", a status the
description does not list), emit_all() on a function without its contract, a contract or flag
text of nothing, a flag without its text. Standard library only.
"""

import os
import re
import textwrap

HEADERS = ("include/cumemsaver.h", "include/cumemsaver_hooks.h", "include/cumemsaver_ipc.h")
MAN_DIR = "man/man3"
CONTRACTS = "abi/contracts"  # <function>.txt, and flags/<group>.txt
FLAG_NAME_RE = re.compile(r"^(CMS_[A-Z0-9_]+)$")
SECTIONS = ("Ownership", "Threads", "CUDA", "Returns")
SECTION_RE = re.compile(r"^(Ownership|Threads|CUDA|Returns)( \([^)]*\))?:\s*(.*)$")
NAME_LINE_RE = re.compile(r"^(cms_\w+)(?: \(since (\d+\.\d+)\))? - (.+)$")
PARAM_RE = re.compile(r"^  (\w+(?:, \w+)*):\s+(\S.*)$")
ITEM_RE = re.compile(r"^  (\S.*)$")
BULLET_RE = re.compile(r"^  - (\S.*)$")  # an item of a list in the description
STATUS_LIST_RE = re.compile(r"^(CMS_(?:OK|ERR_[A-Z_]+)(?:, CMS_ERR_[A-Z_]+)*)(?: \(since (\d+\.\d+)\))?(?::\s*(.*))?$")
DRIVER_ITEM = "driver statuses"


class HeaderError(Exception):
    pass


# ---- reading the header comments ----

def _comments_before_decls(text, path):
    """Yields (function name, comment lines, line number) for each CMS_API declaration."""
    for m in re.finditer(r"^CMS_API\b[^;(]*?\b(cms_\w+)\s*\(", text, re.M):
        head = text[:m.start()].rstrip()
        line = text.count("\n", 0, m.start()) + 1
        if not head.endswith("*/"):
            raise HeaderError(f"{path}:{line}: {m.group(1)} has no comment right above it")
        start = head.rfind("/*")
        body = head[start + 2:-2]
        lines = []
        for raw in body.split("\n"):
            s = raw.rstrip()
            s = re.sub(r"^\s*\* ?", "", s) if s.strip().startswith("*") else s.strip()
            lines.append(s)
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        yield m.group(1), lines, line


class Item(str):
    """A list item of the description ("  - text", continued by lines indented 4)."""


def _paragraphs(lines):
    """Paragraphs (str) and list items (Item) of the description, in order."""
    out, cur, item = [], [], False

    def flush():
        if cur:
            text = " ".join(cur)
            out.append(Item(text) if item else text)
            cur.clear()

    for s in lines:
        bullet = BULLET_RE.match(s)
        if not s.strip() or bullet or (item and not s.startswith("    ")):
            flush()
            item = False
        if bullet:
            cur.append(bullet.group(1).strip())
            item = True
        elif s.strip():
            cur.append(s.strip())
    flush()
    return out


def parse_comment(name, lines, where):
    """The parts of one function's comment (format: abi/README.md "Header comments")."""
    m = NAME_LINE_RE.match(lines[0]) if lines else None
    if not m or m.group(1) != name:
        raise HeaderError(f"{where}: the comment must start with '{name} - <summary>' "
                          f"(or '{name} (since X.Y) - <summary>')")
    doc = {"name": name, "since": m.group(2), "params": [], "sections": {}, "returns": [],
           "returns_text": "", "returns_note": ""}
    first = [m.group(3)]
    rest = lines[1:]
    i = 0
    while i < len(rest) and rest[i].strip() and not SECTION_RE.match(rest[i]) \
            and not PARAM_RE.match(rest[i]) and not BULLET_RE.match(rest[i]):
        first.append(rest[i].strip())
        i += 1
    lead = " ".join(first)
    cut = re.search(r"[.:;](\s|$)", lead)
    doc["summary"] = (lead[:cut.start()] if cut else lead).strip()
    doc["lead"] = lead if cut else lead + "."  # the first paragraph of the description
    body, section, param = [], None, None
    for s in rest[i:]:
        sm = SECTION_RE.match(s)
        if sm:
            section, param = sm.group(1), None
            if section in doc["sections"]:
                raise HeaderError(f"{where}: {section}: twice")
            doc["sections"][section] = [sm.group(3)] if sm.group(3) else []
            if section == "Returns" and sm.group(2):
                doc["returns_note"] = sm.group(2).strip()[1:-1]
            continue
        if section is None:
            pm = PARAM_RE.match(s)
            if pm:
                param = [pm.group(1).split(", "), [pm.group(2)]]
                doc["params"].append(param)
            elif param is not None and s.startswith("   "):
                param[1].append(s.strip())
            else:
                param = None
                body.append(s)
            continue
        doc["sections"][section].append(s)
    doc["description"] = _paragraphs(body)
    doc["params"] = [(names, " ".join(text)) for names, text in doc["params"]]
    for sec in ("Ownership", "Threads", "CUDA"):
        if sec in doc["sections"]:
            doc["sections"][sec] = " ".join(x.strip() for x in doc["sections"][sec] if x.strip())
    ret = doc["sections"].pop("Returns", None)
    if ret is None:
        raise HeaderError(f"{where}: no Returns:")
    items, text = [], []
    for s in ret:
        if not s.strip():
            continue
        if ITEM_RE.match(s) and not s.startswith("    "):
            items.append([s.strip()])
        elif items and s.startswith("    "):
            items[-1].append(s.strip())
        elif not items:
            text.append(s.strip())
        else:
            raise HeaderError(f"{where}: Returns: cannot read {s!r}")
    doc["returns_text"] = " ".join(text)
    for it in items:
        line = " ".join(it)
        sm = STATUS_LIST_RE.match(line)
        if sm:
            doc["returns"].append({"statuses": sm.group(1).split(", "), "since": sm.group(2),
                                   "text": sm.group(3) or ""})
        elif line.startswith(DRIVER_ITEM):
            doc["returns"].append({"statuses": [DRIVER_ITEM], "since": None,
                                   "text": line[len(DRIVER_ITEM):].lstrip(":. ").strip()})
        else:
            doc["returns"].append({"statuses": [], "since": None, "text": line})
    return doc


def parse_contracts(root, names):
    """{function name: parsed contract} of abi/contracts/<name>.txt for each of names, and the
    problems (list of strings): a name without its file, a file naming no function."""
    docs, bad = {}, []
    d = os.path.join(root, CONTRACTS)
    have = {n[:-4] for n in os.listdir(d) if n.endswith(".txt")} if os.path.isdir(d) else set()
    for name in names:
        rel = f"{CONTRACTS}/{name}.txt"
        if name not in have:
            bad.append(f"{rel}: missing (the contract of {name})")
            continue
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            lines = [ln.rstrip() for ln in fh.read().split("\n")]
        while lines and not lines[-1].strip():
            lines.pop()
        docs[name] = parse_comment(name, lines, rel)
        docs[name]["header"] = rel
    bad += [f"{CONTRACTS}/{n}.txt: names no function of abi/cumemsaver.json"
            for n in sorted(have - set(names))]
    return docs, bad


def header_comments(root):
    """{function name: (header, line, comment lines)} of every CMS_API declaration."""
    out = {}
    for rel in HEADERS:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            text = fh.read()
        for name, lines, line in _comments_before_decls(text, rel):
            if name in out:
                raise HeaderError(f"{rel}:{line}: {name} declared twice")
            out[name] = (rel, line, lines)
    return out


def check_header_pointers(comments):
    """Problems of the headers' short contracts: each names its function's page."""
    return [f"{rel}:{line}: the comment of {name} does not point at its page ({name}(3))"
            for name, (rel, line, lines) in comments.items()
            if not re.search(rf"\b{name}\(3\)", " ".join(lines))]


def declared_functions(root):
    """Names of every function the public headers declare with CMS_API."""
    names = []
    for rel in HEADERS:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            names += re.findall(r"^CMS_API\b[^;(]*?\b(cms_\w+)\s*\(", fh.read(), re.M)
    return names


def check_function(abi, f, doc, frozen=()):
    """Problems where the comment contradicts the description (list of strings). A function
    of a frozen release (frozen: releases with a directory abi/<release>/) may document
    statuses its entry lacks: that entry can no longer change (docs/abi.md)."""
    bad = []
    where = f"{doc['header']}: {f['name']}"
    if doc["since"] and doc["since"] != f["since"]:
        bad.append(f"{where}: comment says since {doc['since']}, abi says {f['since']}")
    params = {p["name"] for p in f["params"]}
    for names, _ in doc["params"]:
        for n in names:
            if n not in params:
                bad.append(f"{where}: documents parameter {n!r}, which it does not have")
    if f["returns"]["type"] != abi.status_type:
        return bad
    conv = abi.data.get("conventions", {})
    listed = {s for r in doc["returns"] for s in r["statuses"]}
    if not listed or "CMS_OK" not in listed:
        bad.append(f"{where}: Returns: must list CMS_OK and each error status, one a line")
        return bad
    implied = set(conv.get("any_call_statuses", [])) | {"CMS_ERR_INTERNAL"}
    if f.get("forked"):
        implied.add(conv.get("forked_status", "CMS_ERR_FORKED"))
    if DRIVER_ITEM in listed:
        if not f.get("driver"):
            bad.append(f"{where}: lists driver statuses, abi says it makes no driver call")
        implied |= set(conv.get("driver_statuses", []))
    elif f.get("driver"):
        bad.append(f"{where}: abi says it calls the driver: Returns: needs 'driver statuses'")
    for s in f["statuses"]:
        if s not in listed and s not in implied:
            bad.append(f"{where}: abi lists {s}, the comment's Returns: does not")
    for s in listed - {DRIVER_ITEM}:
        if s not in abi.status_names:
            bad.append(f"{where}: Returns: unknown status {s}")
        elif s not in f["statuses"] and s not in implied and f["since"] not in frozen:
            bad.append(f"{where}: Returns: {s} is not in the abi's statuses of the function")
    return bad


# ---- roff ----

# A sentence that starts with code keeps its case: a parameter (ctx, info->host), a driver
# function (cuMemSetAccess), a name with an underscore.
CODE_START_RE = re.compile(r"[A-Za-z_]\w*(?:->|\.\w)|[a-z]+[A-Z0-9_]\w*")


def _cap(text, names=()):
    """The text with its first letter capitalized, unless it starts with code (names: the
    function's parameters)."""
    word = re.match(r"[A-Za-z_]\w*", text)
    if word and (word.group(0) in names or CODE_START_RE.match(text)):
        return text
    return text[:1].upper() + text[1:]


def _esc(text):
    """Plain text to roff text: backslashes, minus signs (a '-' starting a word or number)."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(^|(?<=[\s(\[=<>,]))-", r"\\-", text)
    return text


def _fmt(text, functions):
    """Escaped text with the library's function names in bold."""
    text = _esc(text)
    return re.sub(r"\b(cms_\w+)\b",
                  lambda m: f"\\fB{m.group(1)}\\fR" if m.group(1) in functions else m.group(1),
                  text)


def _lines(text):
    """Filled text as source lines of at most ~100 columns, none starting with a control
    character."""
    out = []
    for ln in textwrap.wrap(text, 100, break_long_words=False, break_on_hyphens=False):
        out.append("\\&" + ln if ln[:1] in (".", "'") else ln)
    return out


def _synopsis(f):
    ret = f["returns"]["type"]
    lead = ret + ("" if ret.endswith("*") else " ") + f["name"] + "("
    if not f["params"]:
        return [f'.B "{lead}void);"']
    out, pad = [], " " * len(lead)
    for i, p in enumerate(f["params"]):
        t = p["type"]
        typ = t + ("" if t.endswith("*") else " ")
        end = ");" if i + 1 == len(f["params"]) else ","
        out.append(f'.BI "{lead if i == 0 else pad}{typ}" {p["name"]} "{end}"')
    return out


def render(abi, f, doc, manual, flags):
    """The page of function f. manual: (date, source) of the .TH line (manual_th());
    flags: flag_sections() of the header."""
    functions = {g["name"] for g in abi.functions}
    conv = abi.data.get("conventions", {})
    fmt = lambda t: _lines(_fmt(t, functions))  # noqa: E731
    params = {p["name"] for p in f["params"]}
    cap = lambda t: _cap(t, params)  # noqa: E731
    name = f["name"]
    out = [f'.\\" {abi_generated()}',
           f'.TH {name.upper()} 3 "{manual[0]}" "{manual[1]}" "cumemsaver Manual"',
           ".nh", ".ad l",
           ".SH NAME", f"{name} \\- {_esc(doc['summary'])}",
           ".SH LIBRARY", "cumemsaver (libcumemsaver, \\fI\\-lcumemsaver\\fP)",
           ".SH SYNOPSIS", ".nf", ".B #include <cumemsaver.h>", ".PP"]
    out += _synopsis(f)
    out += [".fi", ".SH DESCRIPTION"]
    first = True
    for para in [f"{name}(): {doc['lead']}"] + doc["description"]:
        if isinstance(para, Item):
            out.append(".IP \\(bu 2")
        elif not first:
            out.append(".PP")
        out += fmt(para)
        first = False
    for names, text in doc["params"]:
        out += [".TP", ".I " + ", ".join(names)] + fmt(text)
    for sec, title in (("Ownership", "Ownership"), ("Threads", "Thread safety")):
        if doc["sections"].get(sec):
            out += [".SS " + title] + fmt(cap(doc["sections"][sec]))
    out.append(".SH RETURN VALUE")
    if f["returns"]["type"] == abi.status_type:
        out += fmt(f"{name}() returns CMS_OK (0) on success, else a negative CMS_ERR_* status; "
                   "cms_last_error() then describes the failure on the calling thread."
                   + (f" {cap(doc['returns_note'])}."
                      if doc["returns_note"] else ""))
        if doc["returns_text"]:
            out += [".PP"] + fmt(doc["returns_text"])
        errors = [r for r in doc["returns"] if r["statuses"] != ["CMS_OK"]]
        ok = [r for r in doc["returns"] if r["statuses"] == ["CMS_OK"] and r["text"]]
        for r in ok:
            out += [".PP"] + fmt("CMS_OK: " + r["text"])
        out.append(".SH ERRORS")
        for r in errors:
            if r["statuses"] == [DRIVER_ITEM]:
                head = ", ".join(conv.get("driver_statuses", []))
                text = ("a CUDA driver call failed: the status its CUresult maps to "
                        "(CUDA_ERROR_OUT_OF_MEMORY gives CMS_ERR_OUT_OF_DEVICE_MEMORY, "
                        "anything unlisted CMS_ERR_DRIVER); the message names the call."
                        + (" " + cap(r["text"]) if r["text"] else ""))
            elif r["statuses"]:
                head = ", ".join(r["statuses"])
                text = (f"(since {r['since']}) " if r["since"] else "") + r["text"]
            else:
                head, text = None, r["text"]
            if head:
                out += [".TP", ".B " + _esc(head)] + (fmt(text) if text.strip() else [])
            else:
                out += [".PP"] + fmt(text)
        general = ("Any call may also return CMS_ERR_OUT_OF_HOST_MEMORY (a bookkeeping "
                   "allocation failed) and CMS_ERR_INTERNAL (a broken invariant: a bug)")
        if f.get("forked"):
            general += (", and CMS_ERR_FORKED in a child process created by fork() after the "
                        "context was created")
        out += [".PP"] + fmt(general + " (cumemsaver(7), CONVENTIONS).")
    else:
        out += fmt(cap(doc["returns_text"]) or "Nothing.")
    if doc["sections"].get("CUDA"):
        out += [".SH CUDA DRIVER CALLS"] + fmt(cap(doc["sections"]["CUDA"]))
    own = [sec for sec in flags["sections"] if name in sec["functions"]]
    for sec in own:
        out += [f".SH {sec['title']}"] + fmt(sec["lead"])
        for c in sec["flags"]:
            out += [".TP", f'.BR {c["name"]} " ({c["value"]:#x})"'] + fmt(c["text"])
    nodes = f.get("nodes", [f["since"]])
    hist = f"{name}() first appeared in cumemsaver {f['since']} (symbol version " \
           f"{abi.node(nodes[-1])}"
    if len(nodes) > 1:
        hist += ", older versions " + ", ".join(abi.node(r) for r in nodes[:-1])
    out += [".SH HISTORY"] + fmt(hist + ").")
    seen = set()
    texts = [doc["lead"]] + doc["description"] + [t for _, t in doc["params"]] + \
        list(doc["sections"].values()) + [doc["returns_text"]] + \
        [r["text"] for r in doc["returns"]] + [c["text"] for sec in own for c in sec["flags"]]
    described = {c["name"] for sec in own for c in sec["flags"]}
    for text in texts:
        seen |= {n for n in re.findall(r"\bcms_\w+\b", text) if n in functions and n != name}
        # the page that describes a flag named here (its FLAGS section)
        seen |= {flags["home"][c] for c in re.findall(r"\bCMS_[A-Z0-9_]+\b", text)
                 if c in flags["home"] and c not in described and flags["home"][c] != name}
    refs = [f".BR {n} (3)," for n in sorted(seen)] + [".BR cumemsaver (7)"]
    out += [".SH SEE ALSO"] + refs
    return "\n".join(out) + "\n"


def abi_generated():
    return ("generated by tools/abigen from abi/cumemsaver.json and abi/contracts; "
            "do not edit")


def manual_th(abi, root):
    """(date, source) of the .TH line: those of the overview page cumemsaver(7), so that
    every section of the manual carries one date and one version; the version is the
    description's release (major.minor)."""
    rel = "man/cumemsaver.7"
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            m = re.search(r'^\.TH \S+ 7 "([^"]*)" "([^"]*)"', fh.read(), re.M)
    except OSError as e:
        raise HeaderError(f"{rel}: {e.strerror}: the manual's date and version come from it")
    want = "cumemsaver " + ".".join(abi.version.split(".")[:2])
    if not m or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", m.group(1)):
        raise HeaderError(f'{rel}: no .TH line with a date (YYYY-MM-DD) and "{want}"')
    if m.group(2) != want:
        raise HeaderError(f'{rel}: .TH says "{m.group(2)}", the description "{want}" '
                          f"(version {abi.version})")
    return m.group(1), m.group(2)


def flag_docs(root):
    """{flag: its text} of abi/contracts/flags/*.txt: an entry is the flag's name alone on a
    line, then its text indented by two, joined into one paragraph."""
    out = {}
    d = os.path.join(root, CONTRACTS, "flags")
    for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        rel = f"{CONTRACTS}/flags/{fn}"
        name = None
        with open(os.path.join(d, fn), encoding="utf-8") as fh:
            for i, ln in enumerate(fh.read().split("\n"), 1):
                m = FLAG_NAME_RE.match(ln.rstrip())
                if m:
                    name = m.group(1)
                    if name in out:
                        raise HeaderError(f"{rel}:{i}: {name} twice")
                    out[name] = []
                elif ln.startswith("  ") and ln.strip() and name:
                    out[name].append(ln.strip())
                elif ln.strip():
                    raise HeaderError(f"{rel}:{i}: neither a flag's name nor its text "
                                      "(indented by two)")
    return {k: " ".join(v) for k, v in out.items()}


def flag_sections(abi, root):
    """The FLAGS sections: one per flag group of the description (kind "flags"), on the
    page of each function that takes the struct whose field holds the group (named in the
    group's doc: "cms_region_options.flags"), *_init functions aside. Each flag's text is its
    entry of abi/contracts/flags/<group>.txt. Returns {"sections": [{"title", "lead",
    "functions", "flags"}], "home": {flag: the first function whose page describes it}}."""
    texts = flag_docs(root)
    flags = {c["name"] for c in abi.constants if abi.groups[c["group"]].get("kind") == "flags"}
    bad = [f"{CONTRACTS}/flags: {n} is no flag of abi/cumemsaver.json" for n in texts
           if n not in flags]
    bad += [f"{CONTRACTS}/flags: {n} has no text" for n in sorted(flags - set(texts))]
    if bad:
        raise HeaderError("\n".join(bad))
    sections, home = [], {}
    for group, g in abi.groups.items():
        if g.get("kind") != "flags":
            continue
        m = re.search(r"\b(cms_\w+)\.(\w+)", g.get("doc", ""))
        if not m:
            raise HeaderError(f"abi group {group}: its doc names no struct field (cms_x.field)")
        struct = m.group(1)
        fns = [f["name"] for f in abi.functions if not f["name"].endswith("_init")
               and any(re.search(rf"\b{struct}\b", p["type"]) for p in f["params"])]
        if not fns:
            raise HeaderError(f"abi group {group}: no function takes {struct}")
        entries = []
        for c in abi.constants:
            if c["group"] != group:
                continue
            text = texts[c["name"]]
            entries.append({"name": c["name"], "value": c["value"], "text": text})
            home.setdefault(c["name"], fns[0])
        doc = g["doc"].strip()
        lead = f"The bits of {m.group(0)}, combined with |:" \
            if re.fullmatch(r"cms_\w+\.\w+\.", doc) else doc
        title = group.upper().replace("_", " ") + "S"
        sections.append({"title": title, "lead": lead, "functions": fns, "flags": entries})
    return {"sections": sections, "home": home}


def emit_all(abi, root):
    """{"man/man3/<name>.3": text} for every function of the description."""
    comments = header_comments(root)
    docs, problems = parse_contracts(root, [f["name"] for f in abi.functions])
    frozen = [r for r in abi.releases if os.path.isdir(os.path.join(root, "abi", r))]
    for f in abi.functions:
        if f["name"] not in comments:
            problems.append(f"{f['name']}: in abi/cumemsaver.json, not declared in the headers")
        if f["name"] in docs:
            problems += check_function(abi, f, docs[f["name"]], frozen)
    known = {f["name"] for f in abi.functions}
    problems += [f"{n}: declared in the headers, not in abi/cumemsaver.json"
                 for n in comments if n not in known]
    problems += check_header_pointers(comments)
    if problems:
        raise HeaderError("\n".join(problems))
    manual = manual_th(abi, root)
    flags = flag_sections(abi, root)
    return {f"{MAN_DIR}/{f['name']}.3": render(abi, f, docs[f["name"]], manual, flags)
            for f in abi.functions}
