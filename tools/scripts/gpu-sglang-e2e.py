# SPDX-License-Identifier: MIT
"""SGLang-style end-to-end on a GPU, through torch_memory_saver's public API only.

The way SGLang (and verl, slime, miles on top of it) drive torch_memory_saver: the model's
weights in region("weights", enable_cpu_backup=True), per-request memory (KV cache) in
region("kv_cache"), the decode graph captured with cuda_graph(tag="cuda_graph", pool=a
shared graph pool), then release/resume cycles: pause every tag, read weights from their
host backups with get_cpu_backup(zero_copy=True) while paused, resume. The process runs in
whole-process mode (TMS_INIT_ENABLE=1, the RL frameworks' training-side setting): what is
allocated outside the tags goes to the tag "default", never paused here, and a bookkeeping
tensor is allocated under disable() (PyTorch's own memory). disable() is used outside any
region(): torch_memory_saver's disable() asserts outside a region unless TMS_INIT_ENABLE is
set, and inside one it drops a MemPool while the region's pool is in use, which PyTorch 2.11
aborts on (captures_underway.empty()). The model is a transformers
LlamaForCausalLM built from a config with random weights (fixed seed, nothing downloaded),
sized like tools/scripts/gpu-torch-e2e.py's decoder (its CFG is read from that file).

Checks, each cycle: greedy tokens (eager, with transformers' cache) identical to those
before the first pause; the captured graph's logits bit-identical; the driver's free
memory rises by at least the weights' bytes at the pause and falls back by the same
amount (within 2 %) at the resume; the backups equal the weights; a tag without backup
has none (None; cumemsaver only: torch_memory_saver exits the process when asked for the
backup of a paused tensor without one, core.cpp get_cpu_backup_pointer); the disable()
tensor stays readable while everything is paused.

    python3 tools/scripts/gpu-sglang-e2e.py MODULE [--hook-mode preload|torch] [--cycles N]

MODULE: torch_memory_saver (the peer, PYTHONPATH to a built peer, or cumemsaver's drop-in
through a shim package of that name) or cumemsaver.torch_memory_saver. hook_mode preload
(the peer's and SGLang's default) re-executes the script inside MODULE's
configure_subprocess(), with TMS_INIT_ENABLE=1; hook_mode torch is for the drop-in only
(torch_memory_saver's cuda_graph() needs preload, its disable() TMS_INIT_ENABLE). Prints the figures; writes them as JSON to
$OUT/sglang-e2e-<label>.json (label: peer or cumemsaver). Exit status 0 when every check
passed.
"""

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def e2e_shape():
    """CFG, PROMPT_LEN and NEW_TOKENS of gpu-torch-e2e.py (read, not imported: that script
    imports cumemsaver, which a run against the peer does not have)."""
    with open(os.path.join(HERE, "gpu-torch-e2e.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if isinstance(node.targets[0], ast.Name) and node.targets[0].id == "CFG":
                out["CFG"] = {k.arg: ast.literal_eval(k.value) for k in node.value.keywords}
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            names = [t.id for t in node.targets[0].elts]
            if names == ["PROMPT_LEN", "NEW_TOKENS"]:
                out["PROMPT_LEN"], out["NEW_TOKENS"] = ast.literal_eval(node.value)
    return out["CFG"], out["PROMPT_LEN"], out["NEW_TOKENS"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module", help="torch_memory_saver or cumemsaver.torch_memory_saver")
    ap.add_argument("--hook-mode", choices=["preload", "torch"], default="preload")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


def main():
    args = parse_args()
    if args.hook_mode == "preload" and not args.child:
        mod = importlib.import_module(args.module)
        with mod.configure_subprocess():
            cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--child"]
            sys.exit(subprocess.call(cmd, env=dict(os.environ, TMS_INIT_ENABLE="1")))
    sys.exit(run(args))


def run(args):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import transformers

    mod = importlib.import_module(args.module)
    tms = mod.torch_memory_saver
    label = "cumemsaver" if type(tms).__module__.startswith("cumemsaver") else "peer"
    tms.hook_mode = args.hook_mode
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    cfg, prompt_len, new_tokens = e2e_shape()
    report = {
        "label": label,
        "module": args.module,
        "module_file": getattr(mod, "__file__", None),
        "hook_mode": args.hook_mode,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "config": cfg,
        "checks": [],
        "cycles": [],
    }
    failed = []

    def check(name, ok, detail=""):
        report["checks"].append({"name": name, "ok": bool(ok), "detail": str(detail)})
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)
        if not ok:
            failed.append(name)

    def free_bytes():
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info(0)[0]

    # -- model: weights in the "weights" tag with a CPU backup (SGLang's model loading)
    lcfg = transformers.LlamaConfig(
        vocab_size=cfg["vocab"],
        hidden_size=cfg["hidden"],
        intermediate_size=cfg["ffn"],
        num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        num_key_value_heads=cfg["kv_heads"],
        max_position_embeddings=4 * cfg["max_len"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(1234)
    t0 = time.perf_counter()
    model = transformers.LlamaForCausalLM(lcfg).to(torch.bfloat16).eval()
    with tms.region(tag="weights", enable_cpu_backup=True):
        model = model.to(dev)
    torch.cuda.synchronize()
    report["model_build_s"] = time.perf_counter() - t0
    params = dict(model.named_parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in params.values())
    report["weight_bytes"] = weight_bytes
    probes = ["model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight", "lm_head.weight"]
    snapshots = {n: params[n].detach().cpu().clone() for n in probes}

    gen = torch.Generator().manual_seed(99)
    prompt = torch.randint(0, cfg["vocab"], (1, prompt_len), generator=gen).to(dev)

    # -- per-request memory in the "kv_cache" tag (no backup); a bookkeeping tensor under
    # disable(): PyTorch's own memory, never paused
    with tms.region(tag="kv_cache"):
        static_ids = torch.empty_like(prompt)  # the graph's input buffer
    with tms.disable():
        keep = torch.arange(1 << 20, device=dev, dtype=torch.int64)
    keep_sum = int(keep.sum().item())

    @torch.no_grad()
    def generate():
        with tms.region(tag="kv_cache"):
            out = model(input_ids=prompt, use_cache=True)
            toks = []
            for _ in range(new_tokens):
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                toks.append(nxt)
                out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
            result = torch.cat(toks, 1).cpu().tolist()[0]
            del out, toks
        return result

    t0 = time.perf_counter()
    tokens_ref = generate()
    report["generate_s"] = time.perf_counter() - t0

    # -- the decode graph in the "cuda_graph" tag, with a shared graph pool as SGLang passes
    graph = torch.cuda.CUDAGraph()
    pool = torch.cuda.graph_pool_handle()
    stream = torch.cuda.Stream()
    static_ids.copy_(prompt)
    with torch.no_grad():
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                model(input_ids=static_ids, use_cache=False)
        torch.cuda.current_stream().wait_stream(stream)
        with tms.cuda_graph(cuda_graph=graph, pool=pool, stream=stream, tag="cuda_graph"):
            static_logits = model(input_ids=static_ids, use_cache=False).logits

    def replay():
        static_ids.copy_(prompt)  # kv_cache holds the input: DISCARD, refilled each time
        graph.replay()
        torch.cuda.synchronize()
        return static_logits.detach().cpu().clone()

    logits_ref = replay()
    eager_next = generate()[0]
    # informational: the graph runs without a cache, the eager path with one (bf16 ties)
    report["graph_matches_eager"] = int(logits_ref[0, -1].float().argmax()) == eager_next

    tags = ["kv_cache", "weights", "cuda_graph"]
    for cycle in range(args.cycles):
        c = {"cycle": cycle}
        f0 = free_bytes()
        t0 = time.perf_counter()
        for tag in tags:
            t = time.perf_counter()
            tms.pause(tag)
            c[f"pause_{tag}_s"] = time.perf_counter() - t
        c["pause_s"] = time.perf_counter() - t0
        f1 = free_bytes()
        c["free_rise"] = f1 - f0
        rise = f1 - f0
        check(f"c{cycle}_free_rises_by_the_weights", rise >= weight_bytes, (rise, weight_bytes))

        t = time.perf_counter()
        same = True
        for n in probes:
            b = tms.get_cpu_backup(params[n], zero_copy=True)
            same = same and b is not None and b.dtype == params[n].dtype
            same = same and tuple(b.shape) == tuple(params[n].shape)
            same = same and torch.equal(b, snapshots[n])
            del b
        c["get_cpu_backup_s"] = time.perf_counter() - t
        check(f"c{cycle}_backup_equals_weights", same)
        if label == "cumemsaver":  # the peer exits the process here (SIMPLE_CHECK)
            check(f"c{cycle}_no_backup_without_cpu_backup", tms.get_cpu_backup(static_ids) is None)
        check(f"c{cycle}_disabled_tensor_live", int(keep.sum().item()) == keep_sum)

        t0 = time.perf_counter()
        for tag in ["weights", "kv_cache", "cuda_graph"]:
            t = time.perf_counter()
            tms.resume(tag)
            c[f"resume_{tag}_s"] = time.perf_counter() - t
        c["resume_s"] = time.perf_counter() - t0
        f2 = free_bytes()
        c["free_drop"] = f1 - f2
        tol = max(0.02 * (f1 - f0), 64 * MiB)
        check(f"c{cycle}_free_falls_back", abs((f1 - f2) - (f1 - f0)) <= tol, (f1 - f2, f1 - f0))
        check(f"c{cycle}_no_backup_after_resume", tms.get_cpu_backup(params[probes[0]]) is None)

        t = time.perf_counter()
        check(f"c{cycle}_graph_logits_identical", torch.equal(replay(), logits_ref))
        c["replay_s"] = time.perf_counter() - t
        t = time.perf_counter()
        check(f"c{cycle}_tokens_identical", generate() == tokens_ref)
        c["generate_s"] = time.perf_counter() - t
        report["cycles"].append(c)
        print(
            f"cycle {cycle}: pause {c['pause_s'] * 1e3:.1f} ms (free +{c['free_rise'] / MiB:.0f}"
            f" MiB), resume {c['resume_s'] * 1e3:.1f} ms (free -{c['free_drop'] / MiB:.0f} MiB),"
            f" get_cpu_backup {c['get_cpu_backup_s'] * 1e3:.1f} ms",
            flush=True,
        )

    report["pass"] = not failed
    report["failed"] = failed
    out_dir = os.environ.get("OUT") or "/tmp"
    path = os.path.join(out_dir, f"sglang-e2e-{label}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"sglang e2e ({label}, {args.hook_mode}): {'PASS' if not failed else 'FAIL'}; {path}")
    return 0 if not failed else 1


if __name__ == "__main__":
    main()
