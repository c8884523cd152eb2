# SPDX-License-Identifier: MIT
"""End-to-end test of cumemsaver with PyTorch on a GPU (the H200 run of the Python issue).

A Llama-style decoder (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU MLP;
random weights from a fixed seed, nothing downloaded) keeps its weights in a HOST-policy
region and a static KV cache in a DISCARD region; its decode step is captured as a CUDA
graph whose private pool is pausable under its own tag. The test generates N tokens
greedily (eager and by graph replay), pauses everything, checks the driver's free memory
rose by about the paused bytes, resumes, and requires identical tokens and bit-identical
logits from the same prompt, eager and by replaying the graph captured before the pause.

    python3 tools/scripts/gpu-torch-e2e.py --mode torch|compat|preload [--json FILE]

mode torch: cumemsaver.torch.Saver (CUDAPluggableAllocator); compat: the
torch_memory_saver drop-in; preload: Saver(hook_mode="preload") in a process started with
libcumemsaver-preload.so in LD_PRELOAD (the script re-executes itself that way).
Needs CUMEMSAVER_LIBRARY (or an installed library) and bindings/python on PYTHONPATH.
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

import cumemsaver as cms  # noqa: E402
from cumemsaver import preload  # noqa: E402

CFG = dict(vocab=16384, hidden=1536, layers=6, heads=12, kv_heads=4, ffn=4096, max_len=256)
PROMPT_LEN, NEW_TOKENS = 24, 48
DTYPE = torch.bfloat16


class Decoder:
    """Weights are plain tensors created on the current device (inside a region)."""

    def __init__(self, cfg, seed=1234):
        g = torch.Generator(device="cuda").manual_seed(seed)
        h, f, v = cfg["hidden"], cfg["ffn"], cfg["vocab"]
        self.cfg = cfg
        self.hd = h // cfg["heads"]
        kvd = self.hd * cfg["kv_heads"]

        def w(*shape, scale=0.02):
            return (torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32) * scale).to(DTYPE)

        self.embed = w(v, h)
        self.layers = []
        for _ in range(cfg["layers"]):
            self.layers.append(
                dict(
                    n1=torch.ones(h, device="cuda", dtype=DTYPE),
                    wq=w(h, h), wk=w(kvd, h), wv=w(kvd, h), wo=w(h, h),
                    n2=torch.ones(h, device="cuda", dtype=DTYPE),
                    wg=w(f, h), wu=w(f, h), wd=w(h, f),
                )
            )
        self.norm = torch.ones(h, device="cuda", dtype=DTYPE)
        self.head = w(v, h)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, device="cuda", dtype=torch.float32) / self.hd))
        t = torch.arange(cfg["max_len"], device="cuda", dtype=torch.float32)
        freqs = torch.outer(t, inv)
        self.cos, self.sin = freqs.cos(), freqs.sin()

    def weight_tensors(self):
        out = [self.embed, self.norm, self.head, self.cos, self.sin]
        for layer in self.layers:
            out += list(layer.values())
        return out

    @staticmethod
    def rms(x, wt):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(DTYPE) * wt

    def rope(self, x, pos):
        # x: [heads, hd]; pos: int64 tensor [1]
        cos = self.cos.index_select(0, pos)[0]
        sin = self.sin.index_select(0, pos)[0]
        x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
        out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
        return out.to(DTYPE)

    def step(self, tok, pos, kcache, vcache, positions):
        """One decode step, static shapes only (graph-capturable). tok, pos: int64 [1].
        kcache/vcache: [layers, max_len, kv_heads, hd]. Returns logits [vocab] (float32)."""
        cfg = self.cfg
        nh, nkv, hd = cfg["heads"], cfg["kv_heads"], self.hd
        x = self.embed.index_select(0, tok)[0]
        mask = torch.where(positions <= pos, 0.0, -math.inf)  # [max_len]
        for i, L in enumerate(self.layers):
            a = self.rms(x, L["n1"])
            q = self.rope((L["wq"] @ a).view(nh, hd), pos)
            k = self.rope((L["wk"] @ a).view(nkv, hd), pos)
            v = (L["wv"] @ a).view(nkv, hd)
            kcache[i].index_copy_(0, pos, k.unsqueeze(0))
            vcache[i].index_copy_(0, pos, v.unsqueeze(0))
            kk = kcache[i].float().repeat_interleave(nh // nkv, dim=1)  # [max_len, nh, hd]
            vv = vcache[i].float().repeat_interleave(nh // nkv, dim=1)
            s = torch.einsum("hd,thd->ht", q.float(), kk) / math.sqrt(hd) + mask
            p = torch.softmax(s, dim=-1)
            o = torch.einsum("ht,thd->hd", p, vv).reshape(-1).to(DTYPE)
            x = x + L["wo"] @ o
            m = self.rms(x, L["n2"])
            x = x + L["wd"] @ (torch.nn.functional.silu(L["wg"] @ m) * (L["wu"] @ m))
        return (self.head @ self.rms(x, self.norm)).float()


class Runner:
    def __init__(self, model, kcache, vcache, io):
        self.m, self.k, self.v = model, kcache, vcache
        self.tok, self.pos, self.positions = io

    def run_step(self):
        return self.m.step(self.tok, self.pos, self.k, self.v, self.positions)

    def generate(self, prompt, replay=None):
        """Feeds the prompt then NEW_TOKENS greedy tokens; replay: (graph, out) or None."""
        self.k.zero_()
        self.v.zero_()
        tokens, logits = [], []
        cur = prompt[0]
        for i in range(len(prompt) + NEW_TOKENS - 1):
            self.tok.fill_(cur)
            self.pos.fill_(i)
            if replay:
                replay[0].replay()
                out = replay[1]
            else:
                out = self.run_step()
            if i + 1 < len(prompt):
                cur = prompt[i + 1]
            else:
                logits.append(out.clone())
                cur = int(out.argmax())
                tokens.append(cur)
        return tokens, torch.stack(logits)


def phys(infos):
    return sum(i.physical_bytes for i in infos if not i.paused)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["torch", "compat", "preload"], default="torch")
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.mode == "preload" and not args.child:
        import subprocess

        env = preload.env()
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        cmd = [sys.executable, os.path.abspath(__file__), "--mode", "preload", "--child"]
        if args.json:
            cmd += ["--json", args.json]
        print(f"re-executing with LD_PRELOAD={env['LD_PRELOAD']}", flush=True)
        return subprocess.run(cmd, env=env, check=False).returncode

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.current_device()
    report = dict(mode=args.mode, device=torch.cuda.get_device_name(dev), torch=torch.__version__,
                  cumemsaver=cms.version_string(), config=CFG, prompt_len=PROMPT_LEN,
                  new_tokens=NEW_TOKENS, dtype=str(DTYPE), checks={})
    try:
        import transformers  # noqa: F401

        report["transformers"] = transformers.__version__
    except Exception as e:  # only reported
        report["transformers"] = f"not importable: {e}"

    tms = None
    if args.mode == "compat":
        from cumemsaver.torch_memory_saver import torch_memory_saver as tms

        tms.hook_mode = "torch"
        region_w = lambda: tms.region(tag="weights", enable_cpu_backup=True)  # noqa: E731
        region_kv = lambda: tms.region(tag="kv_cache")  # noqa: E731
        graph_ctx = lambda g: tms.cuda_graph(g, tag="graph")  # noqa: E731
        saver = None
        pause_all, resume_all = tms.pause, tms.resume
        stats = lambda: tms.saver.stats()  # noqa: E731
    else:
        import cumemsaver.torch as cmt

        saver = cmt.Saver(hook_mode=args.mode)
        region_w = lambda: saver.region("weights", policy=cms.Policy.HOST)  # noqa: E731
        region_kv = lambda: saver.region("kv_cache", policy=cms.Policy.DISCARD)  # noqa: E731
        graph_ctx = lambda g: saver.cuda_graph(g, tag="graph")  # noqa: E731
        pause_all, resume_all, stats = saver.pause, saver.resume, saver.stats

    checks = report["checks"]

    def check(name, ok, detail=""):
        checks[name] = dict(ok=bool(ok), detail=detail)
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)

    with region_w():
        model = Decoder(CFG)
    c = CFG
    hd = c["hidden"] // c["heads"]
    with region_kv():
        kcache = torch.zeros(c["layers"], c["max_len"], c["kv_heads"], hd, device="cuda", dtype=DTYPE)
        vcache = torch.zeros_like(kcache)
    with region_w():  # kept across a pause (HOST): the positions table must survive
        io = (torch.zeros(1, dtype=torch.long, device="cuda"), torch.zeros(1, dtype=torch.long, device="cuda"),
              torch.arange(c["max_len"], device="cuda"))
    ctx = saver.context if saver else tms.saver.context
    owned = [t for t in model.weight_tensors() + [kcache, vcache] + list(io)]
    not_ours = [t for t in owned if _region_tag(ctx, t) is None]
    check("tensors_in_regions", not not_ours, f"{len(owned) - len(not_ours)}/{len(owned)} tensors in cumemsaver memory")

    # Nesting and disable(): the inner block's allocations go to the inner tag only, and
    # disable() sends them to PyTorch's own allocator.
    disable_ctx = tms.disable if args.mode == "compat" else saver.disable
    with region_w():
        a = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        with region_kv():
            b = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
            with disable_ctx():
                d = torch.empty(7 << 20, dtype=torch.uint8, device="cuda")
            b2 = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
        a2 = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    tags = [_region_tag(ctx, t) for t in (a, b, d, b2, a2)]
    want = [tags[0], tags[1], None, tags[1], tags[0]]
    check("nested_regions_and_disable", tags == want and tags[0] != tags[1] and tags[0] is not None,
          f"tags {tags}")
    del a, b, d, b2, a2

    runner = Runner(model, kcache, vcache, io)
    prompt = torch.randint(0, c["vocab"], (PROMPT_LEN,), generator=torch.Generator().manual_seed(7)).tolist()
    ref_tokens, ref_logits = runner.generate(prompt)
    torch.cuda.synchronize()

    # Capture the decode step; warm up on a side stream first, as torch requires.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            runner.run_step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with graph_ctx(g):
        out = runner.run_step()
    torch.cuda.synchronize()
    g_tokens, g_logits = runner.generate(prompt, replay=(g, out))
    check("graph_matches_eager_before", g_tokens == ref_tokens and torch.equal(g_logits, ref_logits),
          f"{sum(a == b for a, b in zip(g_tokens, ref_tokens))}/{len(ref_tokens)} tokens equal")
    infos = {i.tag: i for i in stats()}
    report["regions_before"] = {t: dict(allocations=i.allocations, physical_bytes=i.physical_bytes,
                                        policy=int(i.policy)) for t, i in infos.items()}
    graph_tags = [t for t in infos if t.startswith("graph")]
    check("graph_pool_in_region", graph_tags and infos[graph_tags[0]].allocations > 0,
          f"graph region: {[(t, infos[t].allocations, infos[t].physical_bytes) for t in graph_tags]}")

    active_bytes = phys(infos.values())
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info(dev)[0]
    t0 = time.perf_counter()
    pause_all()
    t_pause = time.perf_counter() - t0
    free1 = torch.cuda.mem_get_info(dev)[0]
    rose = free1 - free0
    check("free_memory_rose", rose >= 0.95 * active_bytes,
          f"driver free +{rose / 2**20:.1f} MiB for {active_bytes / 2**20:.1f} MiB paused")
    check("all_paused", all(i.paused for i in stats()))
    t0 = time.perf_counter()
    resume_all()
    t_resume = time.perf_counter() - t0
    free2 = torch.cuda.mem_get_info(dev)[0]
    report["timing_s"] = dict(pause=t_pause, resume=t_resume)
    report["memory"] = dict(paused_bytes=active_bytes, free_before=free0, free_paused=free1, free_resumed=free2)
    print(f"pause {t_pause * 1e3:.1f} ms, resume {t_resume * 1e3:.1f} ms, "
          f"{active_bytes / 2**20:.1f} MiB", flush=True)

    w_same = all(_region_tag(ctx, t) is not None for t in owned)
    check("addresses_kept", w_same)
    e_tokens, e_logits = runner.generate(prompt)
    check("eager_identical_after_resume", e_tokens == ref_tokens and torch.equal(e_logits, ref_logits),
          f"max |dlogit| {float((e_logits - ref_logits).abs().max()):.3g}")
    r_tokens, r_logits = runner.generate(prompt, replay=(g, out))
    check("graph_replay_identical_after_resume", r_tokens == ref_tokens and torch.equal(r_logits, ref_logits),
          f"max |dlogit| {float((r_logits - ref_logits).abs().max()):.3g}")

    # A second cycle, pausing tags one by one (KV and graph discarded, weights backed up).
    for tag in ("kv_cache", "graph", "weights"):
        pause_all(tag)
    for tag in ("weights", "graph", "kv_cache"):
        resume_all(tag)
    r2_tokens, r2_logits = runner.generate(prompt, replay=(g, out))
    check("second_cycle_by_tag", r2_tokens == ref_tokens and torch.equal(r2_logits, ref_logits))
    report["tokens"] = ref_tokens
    report["ok"] = all(v["ok"] for v in checks.values())
    print(("E2E PASS" if report["ok"] else "E2E FAIL") + f" mode={args.mode}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if report["ok"] else 1


def _region_tag(ctx, t):
    try:
        return ctx.pointer_info(t.data_ptr()).region.info().tag
    except cms.CumemsaverError:
        return None


if __name__ == "__main__":
    sys.exit(main())
