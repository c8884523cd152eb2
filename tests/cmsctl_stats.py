#!/usr/bin/env python3
"""cmsctl stats over a control socket: table, JSON (schema_version) and the Prometheus text
exposition parsed and checked against a known sequence (tests/stats_server.c), and the clear
error of a process older than 1.2 (a fake server answering as a 1.1 library does); numbers
in their shortest form; a tag that is not UTF-8 (bytes 0xff 0xfe) served by this process
through ctypes: every output stays valid UTF-8 JSON and a valid exposition (invalid bytes as
U+FFFD), and `--json resume` has no made-up driver free figures.

usage: cmsctl_stats.py CMSCTL STATS_SERVER LIBCUMEMSAVER   (CMS_DRIVER_LIBRARY: the simulation)
"""
import ctypes
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading

CMSCTL, SERVER, LIBRARY = sys.argv[1], sys.argv[2], sys.argv[3]
WEIRD = 'a"b\\c d'
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def cmsctl(*args):
    p = subprocess.run([CMSCTL, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def cmsctl_bytes(*args):
    """cmsctl with bytes arguments; stdout must be strict UTF-8 (None when it is not)."""
    p = subprocess.run([CMSCTL, *args], capture_output=True, timeout=60)
    try:
        out = p.stdout.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        check(False, "cmsctl %r: stdout is not UTF-8: %s: %r" % (args, e, p.stdout[:200]))
        out = None
    return p.returncode, out, p.stderr.decode("utf-8", errors="replace")


def shortest(x):
    """x with the fewest %g digits that read back as x."""
    for p in range(1, 18):
        s = "%.*g" % (p, x)
        if float(s) == x:
            return s
    return s


# ---- Prometheus text format (0.0.4) parsing ----
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r"^(%s)\{(.*)\} (\S+)$" % NAME)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"(,|$)')


def unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse_prometheus(text):
    """{(name, frozenset(labels)): value}; checks HELP/TYPE precede each family's samples."""
    out, typed, helped = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            check(kind in ("counter", "gauge"), "TYPE of %s: %s" % (name, kind))
            check(name not in typed, "one TYPE line for %s" % name)
            typed[name] = kind
            continue
        m = SAMPLE.match(line)
        check(m is not None, "sample line syntax: %r" % line)
        if not m:
            continue
        name, labels, value = m.groups()
        check(name in typed and name in helped, "HELP and TYPE before %s" % name)
        if typed.get(name) == "counter":
            check(name.endswith("_total"), "counter %s ends in _total" % name)
        pairs, pos = {}, 0
        for lm in LABEL.finditer(labels):
            check(lm.start() == pos, "label syntax in %r" % labels)
            pos = lm.end()
            pairs[lm.group(1)] = unescape(lm.group(2))
        check(pos == len(labels), "labels parsed to the end: %r" % labels)
        check(value == shortest(float(value)),
              "%s: value %r in its shortest form (%r)" % (name, value, shortest(float(value))))
        out[(name, frozenset(pairs.items()))] = float(value)
    return out


class ControlOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("flags", ctypes.c_uint64),
                ("fn", ctypes.c_void_p), ("user", ctypes.c_void_p),
                ("allowed_uids", ctypes.c_void_p), ("nallowed_uids", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


def not_utf8(tmp):
    """A region whose tag is not UTF-8, served by this process (ctypes), seen through cmsctl."""
    lib = ctypes.CDLL(LIBRARY)
    vp = ctypes.c_void_p
    ctx, region, ctl, ptr = vp(), vp(), vp(), ctypes.c_uint64()
    check(lib.cms_context_create(None, ctypes.byref(ctx)) == 0, "ctypes: context")
    # The API refuses control characters in a tag: cmsctl gets them through its arguments.
    tag = None
    for cand in (b"\xff\xfe\x7fq\"\\", b"\xff\xfeq\"\\", b"\xff\xfe"):
        if lib.cms_region_create(ctx, cand, None, ctypes.byref(region)) == 0:
            tag = cand
            break
    check(tag is not None, "the API accepts a tag with bytes 0xff 0xfe")
    if tag is None:
        return
    check(lib.cms_alloc(region, ctypes.c_uint64(2 << 20), ctypes.byref(ptr)) == 0, "ctypes: alloc")
    path = os.path.join(tmp, "ctl8").encode()
    co = ControlOptions(ctypes.sizeof(ControlOptions), 1, None, None, None, 0, 0)  # ALLOW_ALL
    check(lib.cms_control_create(ctx, path, ctypes.byref(co), ctypes.byref(ctl)) == 0,
          "ctypes: control socket")
    shown = tag.decode("utf-8", errors="replace")  # each invalid byte: U+FFFD
    check(shown.startswith("\ufffd\ufffd"), "python replaces as documented: %r" % shown)
    try:
        for args in ((b"status",), (b"stats",), (b"pause", tag), (b"resume", tag),
                     (b"pause", tag + b"\x01\x1f\n"), (b"resume", b"\xc3(\xe2\x82")):
            rc, out, err = cmsctl_bytes(b"--socket", path, b"--json", *args)
            if out is None:
                continue
            try:
                doc = json.loads(out)
            except ValueError as e:
                check(False, "--json %r: invalid JSON (%s): %r" % (args, e, out))
                continue
            check(doc.get("schema_version") == 1, "--json %r: schema_version" % (args,))
            if args[0] == b"status" or args[0] == b"stats":
                check(rc == 0, "--json %r: exit 0 (%d %s)" % (args, rc, err))
                check([r["tag"] for r in doc["regions"]] == [shown],
                      "--json %r: tag %r" % (args, [r["tag"] for r in doc["regions"]]))
            elif len(args[1]) == len(tag) and args[1] == tag:
                check(rc == 0 and doc["status"] == "CMS_OK", "--json %r: %r" % (args, doc))
                check(doc["tag"] == shown, "--json %r: tag %r" % (args, doc["tag"]))
                if args[0] == b"pause":
                    check(isinstance(doc["driver_free_before"], int) and
                          doc["driver_free_after"] > doc["driver_free_before"],
                          "--json pause: driver free measured: %r" % doc)
                else:
                    check(doc["driver_free_before"] is None and doc["driver_free_after"] is None,
                          "--json resume: driver free not measured, null (not 0): %r" % doc)
            else:  # a tag the process does not know (exit 1); control characters: usage (2)
                want = 2 if any(c < 0x20 or c == 0x7f for c in args[1]) else 1
                check(rc == want and doc["status"] != "CMS_OK",
                      "--json %r: an error, exit %d (got %d)" % (args, want, rc))
                check(doc["tag"] == args[1].decode("utf-8", errors="replace"),
                      "--json %r: tag %r" % (args, doc["tag"]))
        rc, prom, err = cmsctl_bytes(b"--socket", path, b"metrics")
        check(rc == 0, "metrics of the non-UTF-8 tag: exit 0 (%s)" % err)
        if prom is not None:
            samples = parse_prometheus(prom)
            labels = frozenset({("tag", shown), ("device", "0"), ("policy", "discard")})
            check(samples.get(("cumemsaver_region_pauses_total", labels)) == 1,
                  "exposition: the tag's series, tag label %r" % shown)
    finally:
        lib.cms_control_destroy(ctl)
        lib.cms_context_destroy(ctx)
        os.unlink(path) if os.path.exists(path) else None


def main():
    tmp = tempfile.mkdtemp(prefix="cms-stats-")
    path = os.path.join(tmp, "ctl")
    srv = subprocess.Popen([SERVER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    try:
        ready = srv.stdout.readline().split()
        check(ready and ready[0] == "ready", "server ready: %r" % ready)
        phys_kv, logical_kv, phys_w = map(int, ready[1:4])
        want = {
            "kv": dict(pauses=3, resumes=2, swaps=0, failures=1,
                       failures_by_status={"CMS_ERR_OUT_OF_DEVICE_MEMORY": 1},
                       bytes_released=3 * phys_kv, bytes_backed=2 * phys_kv,
                       bytes_to_store=3 * logical_kv, bytes_from_store=2 * logical_kv,
                       state="paused", policy="host"),
            WEIRD: dict(pauses=2, resumes=2, swaps=0, failures=0, failures_by_status={},
                        bytes_released=2 * phys_w, bytes_backed=2 * phys_w,
                        bytes_to_store=0, bytes_from_store=0, state="active",
                        policy="discard"),
        }

        # JSON
        rc, out, err = cmsctl("--socket", path, "--json", "stats")
        check(rc == 0, "json exit status 0 (%d: %s)" % (rc, err))
        doc = json.loads(out)
        check(doc.get("schema_version") == 1, "schema_version 1")
        check(doc.get("status") == "CMS_OK", "status CMS_OK")
        regions = {r["tag"]: r for r in doc["regions"]}
        check(set(regions) == set(want), "json tags %s" % sorted(regions))
        for tag, w in want.items():
            for k, v in w.items():
                check(regions[tag][k] == v, "json %s.%s = %r, want %r" % (tag, k, regions[tag][k], v))
            check(regions[tag]["pause_ns"] > 0 and regions[tag]["resume_ns"] > 0, "json ns")
            check(regions[tag]["device"] == 0, "json device")

        # Table
        rc, out, err = cmsctl("--socket", path, "stats")
        check(rc == 0, "table exit status 0")
        lines = out.splitlines()
        check(lines[0].split()[:8] == ["tag", "device", "policy", "state", "pauses", "resumes",
                                       "swaps", "failures"], "table header: %r" % lines[0])
        kv = [line for line in lines if line.startswith("kv ")]
        check(len(kv) == 1 and kv[0].split()[1:8] == ["0", "host", "paused", "3", "2", "0", "1"],
              "table kv row: %r" % kv)
        check(any(line.startswith(WEIRD) for line in lines), "table weird tag row")

        # Prometheus, both spellings
        rc, prom, err = cmsctl("--socket", path, "stats", "--prometheus")
        check(rc == 0, "prometheus exit status 0")
        rc2, prom2, _ = cmsctl("--socket", path, "metrics")
        check(rc2 == 0 and prom2 == prom, "metrics equals stats --prometheus")
        samples = parse_prometheus(prom)
        names = {
            "pauses": "cumemsaver_region_pauses_total",
            "resumes": "cumemsaver_region_resumes_total",
            "swaps": "cumemsaver_region_swaps_total",
            "bytes_released": "cumemsaver_region_released_bytes_total",
            "bytes_backed": "cumemsaver_region_backed_bytes_total",
            "bytes_to_store": "cumemsaver_region_store_written_bytes_total",
            "bytes_from_store": "cumemsaver_region_store_read_bytes_total",
        }
        for tag, w in want.items():
            labels = {("tag", tag), ("device", "0"), ("policy", w["policy"])}
            for field, metric in names.items():
                got = samples.get((metric, frozenset(labels)))
                check(got == w[field], "%s{tag=%r} = %r, want %r" % (metric, tag, got, w[field]))
            got = samples.get(("cumemsaver_region_paused", frozenset(labels)))
            check(got == (w["state"] == "paused"), "paused gauge of %r" % tag)
            for status, n in w["failures_by_status"].items():
                key = ("cumemsaver_region_failures_total",
                       frozenset(labels | {("status", status)}))
                check(samples.get(key) == n, "failures_total of %r %s" % (tag, status))
        check(sum(1 for k in samples if k[0] == "cumemsaver_region_failures_total") == 1,
              "only non-zero failure series")
        check('tag="a\\"b\\\\c d"' in prom, "label escaping in the text: %r" % prom[:200])

        # Usage errors
        check(cmsctl("--socket", path, "--json", "stats", "--prometheus")[0] == 2,
              "--json with --prometheus is a usage error")
        check(cmsctl("--socket", path, "stats", "--bogus")[0] == 2, "bad stats option")
    finally:
        srv.stdin.close()
        srv.wait(timeout=60)
    check(srv.returncode == 0, "server exit status %s" % srv.returncode)

    # A process of release 1.1: op 4 fails its request decoding; it answers ERROR
    # CMS_ERR_PROTOCOL "request: op 4, tag" (control.c's serve_request, ipc_proto.c).
    old = os.path.join(tmp, "old")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(old)
    ls.listen(4)

    def serve_old():
        for _ in range(2):
            c, _ = ls.accept()
            hdr = c.recv(16)
            magic, ver, typ, n, nfds = struct.unpack("<IHHII", hdr)
            payload = c.recv(n) if n else b""
            op = struct.unpack("<I", payload[:4])[0] if len(payload) >= 4 else 0
            text = ("request: op %u, tag" % op).encode()
            body = struct.pack("<iH", -19, len(text)) + text
            c.sendall(struct.pack("<IHHII", 0x49534D43, 1, 7, len(body), 0) + body)
            c.close()

    t = threading.Thread(target=serve_old)
    t.start()
    rc, out, err = cmsctl("--socket", old, "stats")
    check(rc == 1 and "predates 1.2" in err, "old server, table: %d %r" % (rc, err))
    rc, out, err = cmsctl("--socket", old, "--json", "stats")
    doc = json.loads(out) if out.strip() else {}
    check(rc == 1 and doc.get("schema_version") == 1 and
          doc.get("status") == "CMS_ERR_NOT_SUPPORTED" and "predates 1.2" in doc.get("message", ""),
          "old server, json: %r" % out)
    t.join(timeout=30)
    ls.close()
    os.unlink(old)
    if LIBRARY == "-":  # a sanitized build: its library cannot be loaded by python3
        print("cmsctl_stats: the non-UTF-8 tag case skipped (sanitized library)")
    else:
        not_utf8(tmp)
    os.rmdir(tmp)
    print("cmsctl_stats: %d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
