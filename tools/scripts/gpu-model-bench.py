# SPDX-License-Identifier: MIT
"""Real-model benchmark against the peer (issue 17, item 5), for the GPU machine.

A transformers Llama built from a config with random weights (nothing downloaded), created in
float32 on the GPU and cast to bfloat16 inside a HOST tag ("weights"), so the tag's PyTorch
pool also holds the freed float32 blocks, as a real load does; a large preallocated tensor
stands for the KV cache in a DISCARD tag ("kv_cache"). The same schedule runs through each
implementation, each in a process of its own (the peer's and cumemsaver never share one):

    cycle 0 (first) .. N:  pause kv_cache, pause weights | resume weights, resume kv_cache
                           then a greedy generate whose tokens must equal the reference

Implementations: "saver" (cumemsaver.torch.Saver), "dropin" (cumemsaver.torch_memory_saver),
"peer" and "peer-retain" (torch_memory_saver built from its tarball; retain_cpu_backup off /
on), plus "dropin-retain" when the drop-in has retain_cpu_backup. A "floor" process times
pinned host <-> device copies of the live weight bytes with torch (same run, same device).

Output ($OUT, else --out): model-bench.json and model-bench.txt, a table of steady pause
and resume ms (median of cycles 1..N), the first cycle's pause, bytes moved to the host per
pause (cumemsaver: its region stats; the peer: the tag pool's segment bytes, which it copies
whole), the live tensor bytes, their ratio, and the live bytes' GB/s against the floor.

    PYTHONPATH=bindings/python CUMEMSAVER_LIBRARY=build/libcumemsaver.so.1 \\
        python3 tools/scripts/gpu-model-bench.py [--cycles 5] [--impls saver,dropin,peer,...]
    python3 tools/scripts/gpu-model-bench.py --dry-run    # no torch, no GPU: plan + self-check

The peer: --peer-dir DIR holding an installed torch_memory_saver, else built there from
--peer-tarball (build-peer/torch_memory_saver-4a43c97.tar.gz) with
TMS_CUDA_MAJOR=13 python3 -m pip install --no-build-isolation --no-deps --target DIR.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GB = 1e9

# ~1.25 GB of bfloat16 weights (the Llama case); --layers scales it.
MODEL = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_attention_heads=16,
             num_key_value_heads=4, max_position_embeddings=2048)
PROMPT_LEN, NEW_TOKENS = 32, 24


# ---------------------------------------------------------------- implementations (child side)

class Impl:
    """What the schedule needs from an implementation: two region context managers, pause and
    resume by tag, and the bytes it moved (None: not reported; estimated from the pool)."""

    moved_reported = False

    def region_weights(self):
        raise NotImplementedError

    def region_kv(self):
        raise NotImplementedError

    def pause(self, tag):
        raise NotImplementedError

    def resume(self, tag):
        raise NotImplementedError

    def moved(self):
        return None

    def host_bytes(self):
        """Host backup bytes held now (None: not reported)."""
        return None


class CmsImpl(Impl):
    """cumemsaver: bytes moved are the regions' counters (cms_region_stats, ABI 1.2)."""

    moved_reported = True

    def moved(self):
        regions = self.context().regions()
        return (sum(s.bytes_to_store for s in regions), sum(s.bytes_from_store for s in regions))

    def host_bytes(self):
        """cms_region_info.host_bytes summed over the regions: host memory made (faulted in,
        page-locked) for the backups, read while paused (issue 27: a non-retaining pause
        made 2.1x the live bytes before it backed only the live extents)."""
        return sum(i.host_bytes for i in self.saver_of().stats())


class SaverImpl(CmsImpl):
    def __init__(self, retain):
        import cumemsaver as cms
        import cumemsaver.torch as cmt

        self.cms, self.saver = cms, cmt.Saver()

    def context(self):
        return self.saver.context

    def saver_of(self):
        return self.saver

    def region_weights(self):
        return self.saver.region("weights", policy=self.cms.Policy.HOST)

    def region_kv(self):
        return self.saver.region("kv_cache", policy=self.cms.Policy.DISCARD)

    declare_s = 0.0  # of the pauses: declaring the pools' free blocks (Saver.pause does it)

    def pause(self, tag):
        t0 = time.perf_counter()
        self.saver.declare_free_blocks(tag)
        self.declare_s += time.perf_counter() - t0
        self.saver.pause(tag, live_only=False)

    def resume(self, tag):
        self.saver.resume(tag)


class TmsImpl(Impl):
    """The torch_memory_saver API (the drop-in's or the peer's), hook_mode "torch"."""

    def __init__(self, tms, retain):
        self.tms = tms
        tms.hook_mode = "torch"
        if retain:
            tms.retain_cpu_backup = True

    def region_weights(self):
        return self.tms.region(tag="weights", enable_cpu_backup=True)

    def region_kv(self):
        return self.tms.region(tag="kv_cache")

    def pause(self, tag):
        self.tms.pause(tag)

    def resume(self, tag):
        self.tms.resume(tag)


class DropinImpl(TmsImpl, CmsImpl):
    def __init__(self, retain):
        from cumemsaver.torch_memory_saver import torch_memory_saver as tms

        if retain and not hasattr(type(tms), "retain_cpu_backup"):
            raise SystemExit("the drop-in has no retain_cpu_backup")
        TmsImpl.__init__(self, tms, retain)

    def context(self):
        return self.tms.saver.context

    def saver_of(self):
        return self.tms.saver


class PeerImpl(TmsImpl):
    def __init__(self, retain):
        from torch_memory_saver import torch_memory_saver as tms

        TmsImpl.__init__(self, tms, retain)


IMPLS = {
    "saver": (SaverImpl, False),
    "dropin": (DropinImpl, False),
    "dropin-retain": (DropinImpl, True),
    "peer": (PeerImpl, False),
    "peer-retain": (PeerImpl, True),
}
PEER_IMPLS = ("peer", "peer-retain")


# ---------------------------------------------------------------- child processes

def pool_segment_bytes(torch, ptrs):
    """Bytes of every segment of the pools that hold ptrs (what a whole-allocation backup
    copies), from torch.cuda.memory_snapshot()."""
    segs = torch.cuda.memory_snapshot()
    pools = set()
    for s in segs:
        for p in ptrs:
            if s["address"] <= p < s["address"] + s["total_size"]:
                pools.add(tuple(s.get("segment_pool_id", ())))
    return sum(s["total_size"] for s in segs if tuple(s.get("segment_pool_id", ())) in pools)


def unique_storage_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        st = t.untyped_storage()
        if st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
    return total


def run_floor(args):
    """Pinned host <-> device copies of n bytes with torch: the floor of a backup copy."""
    import torch

    n = args.floor_bytes
    d = torch.empty(n, dtype=torch.uint8, device="cuda")
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d.fill_(1)

    def timed(fn):
        out = []
        for _ in range(6):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            out.append(time.perf_counter() - t0)
        return statistics.median(out[1:])  # the first one warms up

    d2h = timed(lambda: h.copy_(d, non_blocking=True))
    h2d = timed(lambda: d.copy_(h, non_blocking=True))
    return dict(bytes=n, d2h_gbps=n / d2h / GB, h2d_gbps=n / h2d / GB,
                device=torch.cuda.get_device_name(), torch=torch.__version__)


def run_impl(args):
    import torch
    import transformers

    cls, retain = IMPLS[args.child]
    impl = cls(retain)
    torch.manual_seed(1234)
    cfg = transformers.LlamaConfig(num_hidden_layers=args.layers, **MODEL)
    with impl.region_weights():
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(cfg)  # float32, initialised on the GPU
        model = model.to(torch.bfloat16).eval()  # the float32 blocks stay in the tag's pool
    with impl.region_kv():
        kv = torch.empty(int(args.kv_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
        kv.fill_(1)
    weights = list(model.parameters()) + list(model.buffers())
    live = unique_storage_bytes(weights)
    pool_bytes = pool_segment_bytes(torch, [t.data_ptr() for t in weights])
    ids = torch.randint(0, cfg.vocab_size, (1, PROMPT_LEN),
                        generator=torch.Generator().manual_seed(7)).cuda()

    def generate():
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 pad_token_id=0)
        return out[0, PROMPT_LEN:].tolist()

    ref = generate()
    cycles = []
    for c in range(args.cycles + 1):
        torch.cuda.synchronize()
        m0 = impl.moved()
        d0 = getattr(impl, "declare_s", None)
        free0 = torch.cuda.mem_get_info()[0]
        t0 = time.perf_counter()
        impl.pause("kv_cache")
        tk = time.perf_counter()
        impl.pause("weights")
        t1 = time.perf_counter()
        free1 = torch.cuda.mem_get_info()[0]
        host = impl.host_bytes()
        impl.resume("weights")
        impl.resume("kv_cache")
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        m1 = impl.moved()
        tokens = generate()
        cycles.append(dict(
            pause_ms=(t1 - t0) * 1e3, resume_ms=(t2 - t1) * 1e3, freed=free1 - free0,
            kv_pause_ms=(tk - t0) * 1e3, host_bytes=host,
            out_bytes=(m1[0] - m0[0]) if m0 else pool_bytes,
            in_bytes=(m1[1] - m0[1]) if m0 else pool_bytes,
            tokens_ok=tokens == ref,
            declare_ms=None if d0 is None else (impl.declare_s - d0) * 1e3))
        print(f"{args.child} cycle {c}: pause {cycles[-1]['pause_ms']:.1f} ms, resume "
              f"{cycles[-1]['resume_ms']:.1f} ms, {cycles[-1]['out_bytes'] / GB:.3f} GB out, "
              f"tokens {'ok' if tokens == ref else 'DIFFER'}", flush=True)
    return dict(impl=args.child, live_bytes=live, pool_bytes=pool_bytes,
                moved_reported=impl.moved_reported, kv_bytes=kv.numel(), tokens=ref,
                cycles=cycles, transformers=transformers.__version__, torch=torch.__version__)


# ---------------------------------------------------------------- summary (no torch)

def summarize(floor, results):
    """One row per implementation from the children's results and the floor."""
    rows = []
    for r in results:
        if "error" in r:
            rows.append(dict(impl=r["impl"], error=r["error"]))
            continue
        steady = r["cycles"][1:] or r["cycles"]
        pause = statistics.median(c["pause_ms"] for c in steady)
        resume = statistics.median(c["resume_ms"] for c in steady)
        moved = statistics.median(c["out_bytes"] for c in steady)
        live = r["live_bytes"]
        floor_pause_ms = live / (floor["d2h_gbps"] * GB) * 1e3
        floor_resume_ms = live / (floor["h2d_gbps"] * GB) * 1e3
        rows.append(dict(
            impl=r["impl"], pause_ms=pause, resume_ms=resume,
            first_pause_ms=r["cycles"][0]["pause_ms"], first_resume_ms=r["cycles"][0]["resume_ms"],
            moved_bytes=moved, moved_reported=r["moved_reported"], live_bytes=live,
            moved_over_live=moved / live,
            pause_gbps=live / (pause / 1e3) / GB, resume_gbps=live / (resume / 1e3) / GB,
            pause_over_floor=pause / floor_pause_ms, resume_over_floor=resume / floor_resume_ms,
            tokens_ok=all(c["tokens_ok"] for c in r["cycles"]), exit=r.get("exit"),
            kv_pause_ms=statistics.median(c["kv_pause_ms"] for c in steady)
            if "kv_pause_ms" in steady[0] else None,
            declare_ms=statistics.median(c["declare_ms"] for c in steady)
            if steady[0].get("declare_ms") is not None else None,
            host_bytes=statistics.median(c["host_bytes"] for c in steady)
            if steady[0].get("host_bytes") is not None else None))
    return rows


def table(floor, rows):
    head = ("impl", "pause ms", "resume ms", "1st pause", "moved GB", "live GB", "moved/live",
            "pause GB/s", "x floor t", "resume GB/s", "x floor t", "tokens")
    lines = [" | ".join(head), " | ".join("-" * len(h) for h in head)]
    for w in rows:
        if "error" in w:
            lines.append(f"{w['impl']} | error: {w['error']}")
            continue
        est = "" if w["moved_reported"] else "~"
        lines.append(" | ".join((
            w["impl"], f"{w['pause_ms']:.1f}", f"{w['resume_ms']:.1f}",
            f"{w['first_pause_ms']:.1f}", f"{est}{w['moved_bytes'] / GB:.3f}",
            f"{w['live_bytes'] / GB:.3f}", f"{w['moved_over_live']:.2f}x",
            f"{w['pause_gbps']:.1f}", f"{w['pause_over_floor']:.2f}x",
            f"{w['resume_gbps']:.1f}", f"{w['resume_over_floor']:.2f}x",
            "identical" if w["tokens_ok"] else "DIFFER"))
            + (f" ({w['exit']})" if w["exit"] else ""))
    kv = [f"{w['impl']} {w['kv_pause_ms']:.1f}" for w in rows if w.get("kv_pause_ms") is not None]
    if kv:
        lines.append("of the pause, the kv_cache tag's (DISCARD, nothing copied; the floor counts "
                     "the weights only), ms: " + ", ".join(kv))
    host = [f"{w['impl']} {w['host_bytes'] / GB:.3f} GB ({w['host_bytes'] / w['live_bytes']:.2f}x "
            "live)" for w in rows if w.get("host_bytes") is not None]
    if host:
        lines.append("host backup memory held while paused (cms_region_info.host_bytes): "
                     + ", ".join(host))
    for w in rows:
        if w.get("declare_ms") is not None:
            lines.append(f"{w['impl']}: {w['declare_ms']:.1f} ms of the pause declare the pools' "
                         "free blocks (MemPool.snapshot + cms_range_discard), "
                         f"{w['pause_ms'] - w['declare_ms']:.1f} ms the library's pause")
    lines.append(f"floor (torch, pinned, {floor['bytes'] / GB:.3f} GB): D2H "
                 f"{floor['d2h_gbps']:.1f} GB/s, H2D {floor['h2d_gbps']:.1f} GB/s; GB/s are live "
                 "bytes over the steady median time; x floor t: that time over the live bytes' "
                 "time at the floor; ~: estimated (the peer copies its pool's segments whole)")
    return "\n".join(lines)


def self_check():
    """The summary's arithmetic on made-up results (no torch, no GPU)."""
    floor = dict(bytes=10 ** 9, d2h_gbps=50.0, h2d_gbps=50.0)
    cyc = lambda p, o: dict(pause_ms=p, resume_ms=p, out_bytes=o, in_bytes=o, tokens_ok=True,  # noqa: E731
                            declare_ms=p / 4, kv_pause_ms=p / 10, host_bytes=o)
    res = [dict(impl="a", live_bytes=10 ** 9, moved_reported=True,
                cycles=[cyc(100, 2e9), cyc(20, 1e9), cyc(22, 1e9), cyc(40, 1e9)]),
           dict(impl="b", error="x"),
           dict(impl="c", live_bytes=10 ** 9, moved_reported=False, exit="exit -11 after",
                cycles=[cyc(100, 2e9), cyc(20, 1e9)])]
    rows = summarize(floor, res)
    a = rows[0]
    assert a["pause_ms"] == 22 and a["first_pause_ms"] == 100, a
    assert abs(a["moved_over_live"] - 1.0) < 1e-9 and abs(a["pause_over_floor"] - 1.1) < 1e-9, a
    assert abs(a["pause_gbps"] - 1e9 / 0.022 / GB) < 1e-9, a
    text = table(floor, rows)
    assert "1.10x" in text and "error: x" in text and "(exit -11 after)" in text, text
    assert "a: 5.5 ms of the pause declare" in text and "16.5 ms the library's" in text, text
    assert "ms: a 2.2, c 2.0" in text, text
    assert "paused (cms_region_info.host_bytes): a 1.000 GB (1.00x live), c 1.000 GB" in text, text
    return text


# ---------------------------------------------------------------- parent

def peer_path(args):
    """DIR with an installed torch_memory_saver, built from the tarball if missing; None
    when there is none and it cannot be built (the peer's rows then say so)."""
    d = os.path.abspath(args.peer_dir)
    if os.path.isdir(os.path.join(d, "torch_memory_saver")):
        return d
    if not os.path.isfile(args.peer_tarball):
        print(f"no peer in {d} and no tarball {args.peer_tarball}", flush=True)
        return None
    src = tempfile.mkdtemp(prefix="peer-src-", dir=os.path.dirname(d) or ".")
    with tarfile.open(args.peer_tarball) as tf:
        try:
            tf.extractall(src, filter="data")  # no links or paths out of src
        except TypeError:  # Python without extraction filters
            tf.extractall(src)
    tops = [os.path.join(src, e) for e in os.listdir(src)]
    top = tops[0] if len(tops) == 1 and os.path.isdir(tops[0]) else src
    env = dict(os.environ, TMS_CUDA_MAJOR="13")
    print(f"building the peer from {args.peer_tarball} into {d}", flush=True)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", "--target", d, "."], cwd=top, env=env, check=False)
    return d if p.returncode == 0 else None


def child_env(impl, peer_dir):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if impl in PEER_IMPLS:
        env["PYTHONPATH"] = peer_dir  # the peer alone: cumemsaver is not importable there
    else:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.join(ROOT, "bindings", "python"), env.get("PYTHONPATH")) if p)
    return env


def run_child(name, args, env, out_dir):
    path = os.path.join(out_dir, f"model-bench-{name}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--child-json", path,
           "--cycles", str(args.cycles), "--layers", str(args.layers), "--kv-gib",
           str(args.kv_gib), "--floor-bytes", str(args.floor_bytes)]
    print(f"== {name}", flush=True)
    if os.path.exists(path):
        os.unlink(path)  # a result left by an earlier run must not count
    try:
        p = subprocess.run(cmd, env=env, timeout=args.timeout, check=False)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    if not os.path.exists(path):
        return dict(impl=name, error=f"exit {rc}")
    with open(path) as f:
        res = json.load(f)
    if rc != 0:  # the results were complete: the child failed after writing them
        res["exit"] = f"exit {rc} after writing its results"
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impls", default="saver,dropin,peer,peer-retain")
    ap.add_argument("--cycles", type=int, default=5, help="steady cycles after the first")
    ap.add_argument("--layers", type=int, default=11)
    ap.add_argument("--kv-gib", type=float, default=4.0)
    ap.add_argument("--floor-bytes", type=int, default=0, help="default: the live weight bytes")
    ap.add_argument("--peer-dir", default=os.path.join(ROOT, "build-peer", "site"))
    ap.add_argument("--peer-tarball",
                    default=os.path.join(ROOT, "build-peer", "torch_memory_saver-4a43c97.tar.gz"))
    ap.add_argument("--out", default=os.environ.get("OUT") or ".")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per implementation")
    ap.add_argument("--dry-run", action="store_true", help="plan and self-check, no torch")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-json", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        res = run_floor(args) if args.child == "floor" else run_impl(args)
        with open(args.child_json, "w") as f:
            json.dump(res, f)
        return 0

    impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in impls if i not in IMPLS]
    if bad:
        raise SystemExit(f"unknown implementations {bad}; known: {sorted(IMPLS)}")
    if args.dry_run:
        print(self_check())
        for i in ["floor"] + impls:
            where = args.peer_dir if i in PEER_IMPLS else "bindings/python"
            print(f"would run {i} in its own process (PYTHONPATH={where})")
        print("self-check PASS")
        return 0

    os.makedirs(args.out, exist_ok=True)
    peer_dir = peer_path(args) if any(i in PEER_IMPLS for i in impls) else ""
    results = [dict(impl=i, error="peer not built") if i in PEER_IMPLS and not peer_dir else
               run_child(i, args, child_env(i, peer_dir), args.out) for i in impls]
    live = next((r["live_bytes"] for r in results if "live_bytes" in r), 0)
    if not args.floor_bytes:
        args.floor_bytes = live or (1 << 30)
    floor = run_child("floor", args, child_env("floor", ""), args.out)
    if "error" in floor:
        raise SystemExit(f"floor failed: {floor['error']}")
    rows = summarize(floor, results)
    text = table(floor, rows)
    print(text)
    report = dict(date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), floor=floor,
                  rows=rows, results=results, model=dict(MODEL, num_hidden_layers=args.layers),
                  kv_gib=args.kv_gib, cycles=args.cycles, prompt_len=PROMPT_LEN,
                  new_tokens=NEW_TOKENS, command=" ".join(sys.argv))
    with open(os.path.join(args.out, "model-bench.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out, "model-bench.txt"), "w") as f:
        f.write(text + "\n")
    # a cumemsaver child that fails after its cycles fails the run; the peer's is recorded
    ok = all("error" not in w and w["tokens_ok"] and (w["impl"] in PEER_IMPLS or not w["exit"])
             for w in rows)
    print("MODEL-BENCH " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
