# SPDX-License-Identifier: MIT
"""Two (or more) ranks of torch.distributed (backend nccl, one GPU each) pausing and resuming
cumemsaver memory together through cumemsaver.distributed.Coordinator.

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 tools/scripts/gpu-multi-rank.py \\
        [--mib 512] [--cycles 3] [--json FILE]

Each rank makes its own cumemsaver context on its GPU with a HOST region "weights", and wraps
one allocation in a torch tensor through __cuda_array_interface__ (the low-level API: no
allocator hooks). Then, checking every step on every rank:

1. fill with rank + 1, NCCL all_reduce (SUM): every element = 1 + 2 + ... + world;
2. coordinated pause of "weights" (barrier, agreement by all_reduce on a gloo group; hooks
   around it): the region is paused and the driver's free memory rose by about its bytes;
3. coordinated resume: same pointer, same content, epoch + 1;
4. NCCL all_reduce again on the resumed memory: every element doubled;
5. --cycles more pause/resume cycles, timed (the slowest rank's time per call is reported);
6. a pause that fails on one rank only ("kv" exists on rank 0 alone): every rank raises
   DistributedError naming rank 1, and rank 0's "kv" region is active again (rolled back);
7. one more all_reduce: the NCCL communicator still works.

Prints one PASS/FAIL line per rank; rank 0 writes the JSON summary. Needs CUMEMSAVER_LIBRARY
(or an installed library) and bindings/python on PYTHONPATH.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import cumemsaver as cms
from cumemsaver.distributed import Coordinator, DistributedError

MiB = 1 << 20


class CudaArray:
    """A device pointer seen by torch.as_tensor through __cuda_array_interface__ (v3)."""

    def __init__(self, ptr, n, typestr="<f4"):
        self.__cuda_array_interface__ = {
            "shape": (n,),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": None,
            "version": 3,
            "stream": None,  # the caller orders its own work
        }


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512, help="MiB of the weights tensor per rank")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()
    summary = {"rank": rank, "world": world, "device": local,
               "device_name": torch.cuda.get_device_name(local),
               "torch": torch.__version__, "nccl": str(torch.cuda.nccl.version()),
               "cumemsaver": cms.version_string()}
    hooks_seen = []
    t_start = time.time()
    try:
        ctx = cms.Context()
        weights = ctx.region("weights", device=local, policy=cms.Policy.HOST)
        n = args.mib * MiB // 4
        ptr = weights.alloc(n * 4)
        t = torch.as_tensor(CudaArray(ptr, n), device=device)
        check(t.data_ptr() == ptr and t.device == device, "the tensor does not alias the allocation")
        kv = None
        if rank == 0:  # only rank 0 has a "kv" region: a pause of "kv" must fail on rank 1
            kv = ctx.region("kv", device=local, policy=cms.Policy.DISCARD)
            kv.alloc(64 * MiB)

        # 1. all_reduce on cumemsaver memory
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        torch.cuda.synchronize()
        want = float(world * (world + 1) // 2)
        check(bool((t == want).all()), f"all_reduce before the pause: {t[:4].tolist()} != {want}")

        coord = Coordinator(
            ctx,
            pre_pause=lambda tag: (torch.cuda.synchronize(), hooks_seen.append(("pre_pause", tag))),
            post_resume=lambda tag: hooks_seen.append(("post_resume", tag)),
        )

        # 2. coordinated pause
        free0 = ctx.device_memory_info(local).free
        p = coord.pause("weights")
        free1 = ctx.device_memory_info(local).free
        check(weights.info().paused, "weights not paused")
        check(p.bytes_released >= n * 4, f"released {p.bytes_released} < {n * 4}")
        check(free1 - free0 >= n * 4 - 64 * MiB,
              f"driver free memory rose by {(free1 - free0) / MiB:.1f} MiB, paused {args.mib} MiB")
        summary["free_gain_mib"] = (free1 - free0) / MiB

        # 3. coordinated resume: same pointer, same content
        r = coord.resume("weights")
        check(r.bytes_restored == n * 4, f"restored {r.bytes_restored}")
        info = weights.info()
        check(not info.paused and info.epoch == 1, f"after resume: {info}")
        check(t.data_ptr() == ptr, "pointer moved")
        check(bool((t == want).all()), "content lost across pause/resume")

        # 4. all_reduce on the resumed memory
        dist.all_reduce(t)
        torch.cuda.synchronize()
        check(bool((t == want * world).all()), f"all_reduce after resume: {t[:4].tolist()}")

        # 5. timed cycles (each call is collective: time the slowest rank)
        times = []
        for c in range(args.cycles):
            t0 = time.perf_counter()
            coord.pause("weights")
            t1 = time.perf_counter()
            coord.resume("weights")
            t2 = time.perf_counter()
            times.append((t1 - t0, t2 - t1))
        check(bool((t == want * world).all()), "content lost over the timed cycles")
        check(weights.info().epoch == 1 + args.cycles, "epoch")
        tt = torch.tensor([x for pr in times for x in pr], dtype=torch.float64, device=device)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        summary["cycles_ms_slowest_rank"] = [
            {"pause_ms": tt[2 * i].item() * 1e3, "resume_ms": tt[2 * i + 1].item() * 1e3}
            for i in range(args.cycles)]

        # 6. a pause failing on rank 1 only: everyone raises, rank 0 rolled back
        try:
            coord.pause("kv")
        except DistributedError as e:
            check(e.failed_ranks == [1], f"failed ranks {e.failed_ranks}")
            if rank == 1:
                check(isinstance(e.local_error, cms.NotFound), f"rank 1 error {e.local_error!r}")
            summary["failure_agreed"] = str(e)
        else:
            raise AssertionError("a pause of 'kv' succeeded although rank 1 has no such region")
        if kv is not None:
            check(not kv.info().paused, "rank 0's kv region stayed paused")

        # 7. NCCL still works
        one = torch.ones(1024, device=device)
        dist.all_reduce(one)
        torch.cuda.synchronize()
        check(bool((one == world).all()), "NCCL all_reduce after the cycles")
        check(("pre_pause", "weights") in hooks_seen and ("post_resume", "weights") in hooks_seen,
              f"hooks {hooks_seen}")
        summary["hooks"] = len(hooks_seen)
        ok = True
        del t
        ctx.close()
    except Exception as e:  # reported, and the other rank learns of it through the exit status
        ok = False
        summary["error"] = f"{type(e).__name__}: {e}"
    summary["seconds"] = time.time() - t_start
    summary["result"] = "PASS" if ok else "FAIL"
    print(f"rank {rank}: {summary['result']} {json.dumps(summary)}", flush=True)
    flags = torch.tensor([0 if ok else 1], device=device)
    try:
        dist.all_reduce(flags)
        all_ok = flags.item() == 0
    except Exception:
        all_ok = False
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"all_ranks_pass": all_ok, "rank0": summary}, f, indent=1)
    dist.destroy_process_group()
    return 0 if ok and all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
