# SPDX-License-Identifier: MIT
"""Experiment (issue 14): the peer's training_engine example fails through the drop-in on the
H200 with an illegal memory access at its cache-eviction step (allocate 0.3 and 0.3 of the
GPU, free both, allocate 0.6: PyTorch's cudaMalloc fails, it frees its cached segments and
retries). This runs the same steps with a synchronize after each, in a child per variant:

  whole   TMS_INIT_ENABLE=1 (+ CPU backup), a pause/resume cycle first (the example's order)
  nocycle TMS_INIT_ENABLE=1 (+ CPU backup), no pause/resume before the eviction steps
  disable as whole, with the example's disable() block (1 GiB and its float copy) while paused
  region  no whole-process mode: the same steps inside region("t", enable_cpu_backup=True)

    python3 lab/tms-eviction/repro.py            (GPU machine, PYTHONPATH=bindings/python)
"""
import os
import subprocess
import sys

CHILD = r"""
import os, sys, torch
from cumemsaver.torch_memory_saver import torch_memory_saver as t
variant = sys.argv[1]
t.hook_mode = "preload"
def step(name):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(f"{variant}: {name} ok (used {(total - free) / 1e9:.2f} GB)", flush=True)
import contextlib
ctx = t.region(tag="t", enable_cpu_backup=True) if variant == "region" else contextlib.nullcontext()
with ctx:
    init = torch.full((1_000_000,), 42, dtype=torch.uint8, device="cuda")
    w = [torch.full((s,), 42, dtype=torch.uint8, device="cuda") for s in (1 << 30, 1 << 20, 1024, 42)]
    ones = torch.ones((1 << 30,), dtype=torch.float32, device="cuda")
    outs = ones * 2
    del ones, outs
    step("setup")
    if variant != "nocycle":
        t.pause(); step("pause")
        if variant == "disable":  # the example's disable() block while paused
            with t.disable():
                d = torch.full((1 << 30,), 53, dtype=torch.uint8, device="cuda")
                assert d.float().mean().item() == 53
                del d
            step("disable block")
        t.resume(); step("resume")
        ones = torch.ones((1 << 30,), dtype=torch.float32, device="cuda"); del ones
        step("forward again")
    _, total = torch.cuda.mem_get_info()
    a = torch.full((int(total * 0.3),), 42, dtype=torch.uint8, device="cuda"); step("a")
    b = torch.full((int(total * 0.3),), 42, dtype=torch.uint8, device="cuda"); step("b")
    del a, b
    c = torch.full((int(total * 0.6),), 42, dtype=torch.uint8, device="cuda"); step("c")
    init += 1; step("init += 1")
    print(variant, "PASS" if int(init.min()) == 43 == int(init.max()) else "FAIL", flush=True)
print(t.saver.context.regions() if t._saver else "", flush=True)
"""


def main():
    from cumemsaver.torch_memory_saver import configure_subprocess

    rc = 0
    for variant in sys.argv[1:] or ["whole", "nocycle", "disable", "region"]:
        env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
        if variant != "region":
            env.update(TMS_INIT_ENABLE="1", TMS_INIT_ENABLE_CPU_BACKUP="1")
        with configure_subprocess():
            env["LD_PRELOAD"] = os.environ["LD_PRELOAD"]
            p = subprocess.run([sys.executable, "-c", CHILD, variant], env=env,
                               capture_output=True, text=True, timeout=300)
        print(p.stdout, end="")
        if p.returncode:
            rc = 1
            print(f"{variant}: exit {p.returncode}; stderr tail:\n{p.stderr[-1500:]}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
